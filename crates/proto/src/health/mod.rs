//! DRA device health: `/v1alpha1.DRAResourceHealth/NodeWatchResources` and,
//! on newer kubelets, `/v1.DRAResourceHealth/NodeWatchResources`, behind
//! neutral reports: a plugin implements [`HealthService`] once and serves
//! either version with [`add_health_service`]; a kubelet opens either with
//! [`watch_health`].
use std::fmt;
use std::str::FromStr;

mod client;
mod messages;
mod server;

pub use client::watch_health;
pub use messages::{DeviceReport, HealthReport, HealthReports};
pub use server::{HealthService, add_health_service};

pub mod v1alpha1 {
    tonic::include_proto!("v1alpha1");
}
pub mod v1 {
    tonic::include_proto!("v1");
}

/// A version of the health service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthApi {
    V1,
    V1alpha1,
}

impl HealthApi {
    /// Newest first: the order plugins advertise and kubelets prefer.
    pub const ALL: [HealthApi; 2] = [HealthApi::V1, HealthApi::V1alpha1];

    /// The `supported_versions` entry (equal to the gRPC service name).
    pub fn registration_string(self) -> &'static str {
        match self {
            HealthApi::V1 => super::service::HEALTH_V1,
            HealthApi::V1alpha1 => super::service::HEALTH_V1ALPHA1,
        }
    }

    pub fn watch_method(self) -> &'static str {
        match self {
            HealthApi::V1 => super::method::HEALTH_V1_WATCH,
            HealthApi::V1alpha1 => super::method::HEALTH_V1ALPHA1_WATCH,
        }
    }

    /// The newest version among a plugin's `supported_versions`.
    pub fn preferred(supported_versions: &[String]) -> Option<HealthApi> {
        HealthApi::ALL.into_iter().find(|api| {
            supported_versions
                .iter()
                .any(|v| v == api.registration_string())
        })
    }

    /// The stream a kubelet of version `major.minor` opens on a plugin
    /// serving every version: dra-health v1 arrived in kubelet 1.37, older
    /// kubelets know only v1alpha1 (upstream's `expectedHealthMethod`).
    pub fn of_kubelet(major: u32, minor: u32) -> HealthApi {
        if (major, minor) >= (1, 37) {
            HealthApi::V1
        } else {
            HealthApi::V1alpha1
        }
    }
}

impl fmt::Display for HealthApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HealthApi::V1 => "v1",
            HealthApi::V1alpha1 => "v1alpha1",
        })
    }
}

impl FromStr for HealthApi {
    type Err = UnknownHealthApi;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "v1" => Ok(HealthApi::V1),
            "v1alpha1" => Ok(HealthApi::V1alpha1),
            other => Err(UnknownHealthApi(other.to_owned())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown DRA health API {0:?}: expected v1 or v1alpha1")]
pub struct UnknownHealthApi(pub String);

/// The health of one device, spelled as upstream's driver and pod status
/// spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HealthStatus {
    Healthy,
    Unhealthy,
    #[default]
    Unknown,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Healthy => "Healthy",
            HealthStatus::Unhealthy => "Unhealthy",
            HealthStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses upstream's strings: `Healthy`, `Unhealthy`; anything else is unknown.
impl FromStr for HealthStatus {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "Healthy" => HealthStatus::Healthy,
            "Unhealthy" => HealthStatus::Unhealthy,
            _ => HealthStatus::Unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelets_before_1_37_stream_through_v1alpha1() {
        assert_eq!(HealthApi::of_kubelet(1, 36), HealthApi::V1alpha1);
        assert_eq!(HealthApi::of_kubelet(1, 37), HealthApi::V1);
        assert_eq!(HealthApi::of_kubelet(1, 40), HealthApi::V1);
        assert_eq!(HealthApi::of_kubelet(2, 0), HealthApi::V1);
    }

    #[test]
    fn the_newest_advertised_health_api_is_preferred() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            HealthApi::preferred(&v(&[
                "v1.DRAPlugin",
                "v1alpha1.DRAResourceHealth",
                "v1.DRAResourceHealth"
            ])),
            Some(HealthApi::V1)
        );
        assert_eq!(
            HealthApi::preferred(&v(&["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"])),
            Some(HealthApi::V1alpha1)
        );
        assert_eq!(HealthApi::preferred(&v(&["v1.DRAPlugin"])), None);
    }

    #[test]
    fn health_status_spelling_round_trips() {
        for status in [
            HealthStatus::Healthy,
            HealthStatus::Unhealthy,
            HealthStatus::Unknown,
        ] {
            assert_eq!(status.to_string().parse::<HealthStatus>(), Ok(status));
        }
        assert_eq!("sick".parse::<HealthStatus>(), Ok(HealthStatus::Unknown));
    }
}
