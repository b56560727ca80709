//! The optional DRA device health stream (`v1.DRAResourceHealth` and
//! `v1alpha1.DRAResourceHealth`), served on the DRA socket: the full, sorted
//! device list at once, then on every tick and after every change the harness
//! makes.
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tracing::debug;

use super::watch::Changes;
use crate::proto::health::v1alpha1::{
    self as pb, DeviceIdentifier, NodeWatchResourcesRequest, NodeWatchResourcesResponse,
    dra_resource_health_server::DraResourceHealth,
};
use crate::proto::health::{convert, v1};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HealthStatus {
    #[default]
    Unknown,
    Healthy,
    Unhealthy,
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

impl From<HealthStatus> for pb::HealthStatus {
    fn from(h: HealthStatus) -> Self {
        match h {
            HealthStatus::Unknown => pb::HealthStatus::Unknown,
            HealthStatus::Healthy => pb::HealthStatus::Healthy,
            HealthStatus::Unhealthy => pb::HealthStatus::Unhealthy,
        }
    }
}

/// The reported health of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHealth {
    pub pool: String,
    pub device: String,
    pub health: HealthStatus,
    pub message: String,
}

/// Device health of one node plugin; starts empty like upstream's driver.
#[derive(Debug, Default)]
pub(crate) struct HealthState {
    devices: Mutex<BTreeMap<(String, String), (HealthStatus, String)>>,
    changes: Changes,
}

impl HealthState {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, String), (HealthStatus, String)>> {
        self.devices
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn set(&self, update: DeviceHealth) {
        self.lock().insert(
            (update.pool, update.device),
            (update.health, update.message),
        );
        self.changes.bump();
    }

    pub(crate) fn devices(&self) -> Vec<DeviceHealth> {
        self.lock()
            .iter()
            .map(|((pool, device), (health, message))| DeviceHealth {
                pool: pool.clone(),
                device: device.clone(),
                health: *health,
                message: message.clone(),
            })
            .collect()
    }

    fn report(&self) -> NodeWatchResourcesResponse {
        let now = jiff::Timestamp::now().as_second();
        // BTreeMap order is pool, then device: the order upstream sorts by.
        let devices = self
            .devices()
            .into_iter()
            .map(|d| pb::DeviceHealth {
                device: Some(DeviceIdentifier {
                    pool_name: d.pool,
                    device_name: d.device,
                }),
                health: pb::HealthStatus::from(d.health).into(),
                last_updated_time: now,
                health_check_timeout_seconds: 0,
                message: d.message,
            })
            .collect();
        NodeWatchResourcesResponse { devices }
    }
}

#[derive(Clone)]
pub(crate) struct HealthService {
    pub(crate) driver: String,
    pub(crate) node: String,
    pub(crate) state: Arc<HealthState>,
    pub(crate) interval: Duration,
    /// Ends open streams so that the DRA server can drain on stop.
    pub(crate) shutdown: CancellationToken,
}

struct StreamState {
    first: bool,
    state: Arc<HealthState>,
    changes: tokio::sync::watch::Receiver<u64>,
    ticks: tokio::time::Interval,
    shutdown: CancellationToken,
}

impl HealthService {
    /// The stream of full reports both service versions send.
    fn reports(&self) -> BoxStream<'static, Result<NodeWatchResourcesResponse, Status>> {
        debug!(driver = %self.driver, node = %self.node, "health stream opened");
        // tokio panics on a zero period.
        let period = self.interval.max(Duration::from_millis(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let init = StreamState {
            first: true,
            state: self.state.clone(),
            changes: self.state.changes.subscribe(),
            ticks,
            shutdown: self.shutdown.clone(),
        };
        let stream = futures::stream::unfold(init, |mut s| async move {
            if !s.first {
                tokio::select! {
                    _ = s.ticks.tick() => {}
                    changed = s.changes.changed() => changed.ok()?,
                    _ = s.shutdown.cancelled() => return None,
                }
            }
            s.first = false;
            let report = s.state.report();
            Some((Ok(report), s))
        });
        Box::pin(stream)
    }
}

#[tonic::async_trait]
impl DraResourceHealth for HealthService {
    type NodeWatchResourcesStream = BoxStream<'static, Result<NodeWatchResourcesResponse, Status>>;

    async fn node_watch_resources(
        &self,
        _: Request<NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        Ok(Response::new(self.reports()))
    }
}

#[tonic::async_trait]
impl v1::dra_resource_health_server::DraResourceHealth for HealthService {
    type NodeWatchResourcesStream =
        BoxStream<'static, Result<v1::NodeWatchResourcesResponse, Status>>;

    async fn node_watch_resources(
        &self,
        _: Request<v1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        let reports = self.reports().map(|r| {
            r.and_then(|report| {
                convert(&report).map_err(|e| Status::internal(format!("health report: {e}")))
            })
        });
        Ok(Response::new(Box::pin(reports)))
    }
}
