//! The health stream's messages as both versions mean them, and the
//! conversions to and from each version's generated ones.
use futures::stream::BoxStream;
use tonic::Status;

use super::{HealthStatus, v1, v1alpha1};

/// An open `NodeWatchResources` stream, in neutral reports.
pub type HealthReports = BoxStream<'static, Result<HealthReport, Status>>;

/// One `NodeWatchResources` message: a driver's complete device list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthReport {
    pub devices: Vec<DeviceReport>,
}

/// One device's entry in a [`HealthReport`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceReport {
    pub pool: String,
    pub device: String,
    pub health: HealthStatus,
    /// Unix seconds.
    pub last_updated_time: i64,
    pub health_check_timeout_seconds: i64,
    pub message: String,
}

/// The two versions declare the same messages with the same field numbers;
/// only the package differs.
macro_rules! convert_version {
    ($pb:ident) => {
        impl From<HealthStatus> for $pb::HealthStatus {
            fn from(h: HealthStatus) -> Self {
                match h {
                    HealthStatus::Unknown => $pb::HealthStatus::Unknown,
                    HealthStatus::Healthy => $pb::HealthStatus::Healthy,
                    HealthStatus::Unhealthy => $pb::HealthStatus::Unhealthy,
                }
            }
        }

        impl From<HealthReport> for $pb::NodeWatchResourcesResponse {
            fn from(report: HealthReport) -> Self {
                let devices = report
                    .devices
                    .into_iter()
                    .map(|d| $pb::DeviceHealth {
                        device: Some($pb::DeviceIdentifier {
                            pool_name: d.pool,
                            device_name: d.device,
                        }),
                        health: $pb::HealthStatus::from(d.health).into(),
                        last_updated_time: d.last_updated_time,
                        health_check_timeout_seconds: d.health_check_timeout_seconds,
                        message: d.message,
                    })
                    .collect();
                Self { devices }
            }
        }

        /// Entries without a device identifier cannot be attributed to
        /// anything and are dropped. Health values this code does not know
        /// (a newer plugin's enum) count as unknown rather than as an error,
        /// so the stream stays usable.
        impl From<$pb::NodeWatchResourcesResponse> for HealthReport {
            fn from(response: $pb::NodeWatchResourcesResponse) -> Self {
                let devices = response
                    .devices
                    .into_iter()
                    .filter_map(|d| {
                        let id = d.device?;
                        let health = match $pb::HealthStatus::try_from(d.health) {
                            Ok($pb::HealthStatus::Healthy) => HealthStatus::Healthy,
                            Ok($pb::HealthStatus::Unhealthy) => HealthStatus::Unhealthy,
                            Ok($pb::HealthStatus::Unknown) | Err(_) => HealthStatus::Unknown,
                        };
                        Some(DeviceReport {
                            pool: id.pool_name,
                            device: id.device_name,
                            health,
                            last_updated_time: d.last_updated_time,
                            health_check_timeout_seconds: d.health_check_timeout_seconds,
                            message: d.message,
                        })
                    })
                    .collect();
                HealthReport { devices }
            }
        }
    };
}

convert_version!(v1alpha1);
convert_version!(v1);

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> HealthReport {
        HealthReport {
            devices: vec![DeviceReport {
                pool: "pool".into(),
                device: "dev".into(),
                health: HealthStatus::Unhealthy,
                last_updated_time: 42,
                health_check_timeout_seconds: 7,
                message: "overheated".into(),
            }],
        }
    }

    #[test]
    fn reports_survive_both_versions_without_loss() {
        let wire = v1::NodeWatchResourcesResponse::from(report());
        assert_eq!(wire.devices[0].health(), v1::HealthStatus::Unhealthy);
        assert_eq!(HealthReport::from(wire), report());
        let wire = v1alpha1::NodeWatchResourcesResponse::from(report());
        assert_eq!(wire.devices[0].health(), v1alpha1::HealthStatus::Unhealthy);
        assert_eq!(HealthReport::from(wire), report());
    }

    #[test]
    fn unknown_values_and_anonymous_entries_are_tolerated() {
        let entry = |device: Option<&str>, health: i32| v1::DeviceHealth {
            device: device.map(|d| v1::DeviceIdentifier {
                pool_name: "p".into(),
                device_name: d.into(),
            }),
            health,
            ..Default::default()
        };
        let wire = v1::NodeWatchResourcesResponse {
            devices: vec![entry(Some("a"), 42), entry(None, 1)],
        };
        let report = HealthReport::from(wire);
        assert_eq!(report.devices.len(), 1);
        assert_eq!(report.devices[0].device, "a");
        assert_eq!(report.devices[0].health, HealthStatus::Unknown);
    }
}
