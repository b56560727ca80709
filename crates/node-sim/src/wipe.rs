//! Deleting a node's ResourceSlices, as the kubelet does: all of them at
//! start, and a driver's a delay after it became unusable unless it comes
//! back in time. Slices without `spec.nodeName` are never touched.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, warn};

use super::backoff::Backoff;
use super::journal::{Journal, NodeEventKind};
use super::plugins::UsabilityChange;

/// The kubelet's retry schedule for failed wipes (1 s doubling, 5 min cap).
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));

/// Deletes the node's slices, of one driver or all.
pub async fn wipe(
    client: &kube::Client,
    node: &str,
    driver: Option<&str>,
) -> Result<(), kube::Error> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let fields = match driver {
        Some(d) => format!("spec.nodeName={node},spec.driver={d}"),
        None => format!("spec.nodeName={node}"),
    };
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().fields(&fields),
    )
    .await
    .map(|_| ())
}

/// Pending per-driver wipes of one node.
#[derive(Clone)]
pub struct Wiper {
    client: kube::Client,
    node: String,
    delay: Duration,
    pending: Arc<Mutex<HashMap<String, CancellationToken>>>,
    journal: Journal,
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Wiper {
    pub fn new(
        client: kube::Client,
        node: &str,
        delay: Duration,
        journal: Journal,
        tracker: TaskTracker,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            client,
            node: node.to_owned(),
            delay,
            pending: Arc::default(),
            journal,
            tracker,
            cancel,
        }
    }

    /// Follows usability changes until the node stops.
    pub async fn run(self, mut changes: mpsc::UnboundedReceiver<UsabilityChange>) {
        loop {
            let change = tokio::select! {
                _ = self.cancel.cancelled() => return,
                c = changes.recv() => c,
            };
            let Some(change) = change else { return };
            if change.usable {
                self.cancel_wipe(&change.driver);
            } else {
                self.schedule(&change.driver);
            }
        }
    }

    fn schedule(&self, driver: &str) {
        let token = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.contains_key(driver) {
                return;
            }
            let token = self.cancel.child_token();
            pending.insert(driver.to_owned(), token.clone());
            token
        };
        info!(driver, delay = ?self.delay, "driver unusable, wiping its slices after delay");
        self.journal.record(NodeEventKind::WipeScheduled {
            driver: driver.to_owned(),
        });
        let this = self.clone();
        let driver = driver.to_owned();
        let span = tracing::info_span!("wipe", driver = %driver);
        self.tracker.spawn(
            async move {
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(this.delay) => {}
                }
                let mut delays = RETRY.delays();
                loop {
                    match wipe(&this.client, &this.node, Some(&driver)).await {
                        Ok(()) => break,
                        Err(e) => warn!(error = %e, "wiping slices failed, will retry"),
                    }
                    tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tokio::time::sleep(delays.next_delay()) => {}
                    }
                }
                // Only now may a later unusability schedule a new wipe.
                let mut pending = this.pending.lock().unwrap_or_else(|e| e.into_inner());
                if pending.get(&driver).is_some_and(|t| !t.is_cancelled()) {
                    pending.remove(&driver);
                }
                drop(pending);
                info!("slices wiped");
                this.journal.record(NodeEventKind::SlicesWiped {
                    driver: Some(driver),
                });
            }
            .instrument(span),
        );
    }

    fn cancel_wipe(&self, driver: &str) {
        let token = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(driver);
        if let Some(t) = token {
            t.cancel();
            info!(driver, "driver usable again, slice wipe cancelled");
            self.journal.record(NodeEventKind::WipeCancelled {
                driver: driver.to_owned(),
            });
        }
    }
}
