//! The optional DRA device health stream (`v1.DRAResourceHealth` and
//! `v1alpha1.DRAResourceHealth`), served on the DRA socket: the full, sorted
//! device list at once, then on every tick and after every change the harness
//! makes.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::watch::Changes;
use dra_e2e_proto::health::{
    DeviceReport, HealthReport, HealthReports, HealthService, HealthStatus,
};

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

    /// Forgets every device's health.
    pub(crate) fn clear(&self) {
        self.lock().clear();
        self.changes.bump();
    }

    /// A receiver that sees every change made after this call.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
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

    fn report(&self) -> HealthReport {
        let now = jiff::Timestamp::now().as_second();
        // BTreeMap order is pool, then device: the order upstream sorts by.
        let devices = self
            .devices()
            .into_iter()
            .map(|d| DeviceReport {
                pool: d.pool,
                device: d.device,
                health: d.health,
                last_updated_time: now,
                health_check_timeout_seconds: 0,
                message: d.message,
            })
            .collect();
        HealthReport { devices }
    }
}

#[derive(Clone)]
pub(crate) struct HealthFeed {
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

/// The stream of full reports every served version sends.
impl HealthService for HealthFeed {
    fn watch(&self) -> HealthReports {
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
