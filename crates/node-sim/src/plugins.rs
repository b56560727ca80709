//! The DRA plugins registered on one node, their connections, and whether each
//! driver is usable (at least one connected plugin).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::Channel;
use tracing::{Instrument, debug, info};

use super::backoff::Backoff;
use super::dra_api::DraClient;
use super::health::{self, HealthStore};
use super::journal::{Journal, NodeEventKind};
use super::uds::{self, ConnCount};
use dra_e2e_proto::dra::{NodeApi, NodeClient};
use dra_e2e_proto::health::HealthApi;

/// A driver became usable or unusable on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsabilityChange {
    pub driver: String,
    pub usable: bool,
}

/// A registered plugin as the runner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginView {
    pub driver: String,
    pub endpoint: PathBuf,
    pub registration_socket: PathBuf,
    pub service: NodeApi,
    pub connected: bool,
    /// The health service version the node streams the plugin's device
    /// health through (the newest it advertised), if any.
    pub health: Option<HealthApi>,
}

#[derive(Debug)]
struct Plugin {
    driver: String,
    endpoint: PathBuf,
    registration_socket: PathBuf,
    service: NodeApi,
    /// The health service version the node streams device health through,
    /// if the plugin advertises one.
    health: Option<HealthApi>,
    /// Registration order; the newest connected plugin serves calls.
    seq: u64,
    channel: Mutex<Channel>,
    conns: ConnCount,
    /// Ends the plugin's connection monitor and health stream.
    cancel: CancellationToken,
}

impl Plugin {
    fn connected(&self) -> bool {
        self.conns.current() > 0
    }

    fn channel(&self) -> Channel {
        self.channel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn client(&self) -> DraClient {
        DraClient(NodeClient::new(self.service, self.channel()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AddPluginError {
    #[error("endpoint {endpoint} is already registered for driver {driver}")]
    DuplicateEndpoint { driver: String, endpoint: PathBuf },
}

/// Shared state of the node's plugins.
#[derive(Debug)]
pub struct PluginStore {
    node: String,
    plugins: Mutex<HashMap<String, Vec<Arc<Plugin>>>>,
    usable: Mutex<HashMap<String, bool>>,
    seq: AtomicU64,
    changes: mpsc::UnboundedSender<UsabilityChange>,
    /// Bumped on every registration change, for waiters.
    version: watch::Sender<u64>,
    journal: Journal,
    /// Fed by the health streams of plugins that offer one.
    health: Arc<HealthStore>,
    tracker: TaskTracker,
    cancel: CancellationToken,
    reconnect: Backoff,
    /// The node's span: connection monitors log under it, not under the
    /// registration attempt that happened to start them.
    span: tracing::Span,
}

impl PluginStore {
    pub(crate) fn new(
        node: &str,
        journal: Journal,
        health: Arc<HealthStore>,
        tracker: TaskTracker,
        cancel: CancellationToken,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<UsabilityChange>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let store = Arc::new(Self {
            node: node.to_owned(),
            plugins: Mutex::default(),
            usable: Mutex::default(),
            seq: AtomicU64::new(0),
            changes: tx,
            version: watch::channel(0).0,
            journal,
            health,
            tracker,
            cancel,
            reconnect: Backoff::new(Duration::from_millis(100), Duration::from_secs(2)),
            span: tracing::Span::current(),
        });
        (store, rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Arc<Plugin>>>> {
        self.plugins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a plugin whose DRA endpoint is already connected (`channel`, whose
    /// connections `conns` counts) and starts watching its connection and,
    /// if it offers `health`, its device health.
    // One caller, which has all of these at hand; a struct would only
    // rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add(
        self: &Arc<Self>,
        driver: &str,
        endpoint: &Path,
        registration_socket: &Path,
        service: NodeApi,
        health: Option<HealthApi>,
        channel: Channel,
        conns: ConnCount,
    ) -> Result<(), AddPluginError> {
        let plugin = {
            let mut plugins = self.lock();
            let list = plugins.entry(driver.to_owned()).or_default();
            if list.iter().any(|p| p.endpoint == endpoint) {
                return Err(AddPluginError::DuplicateEndpoint {
                    driver: driver.to_owned(),
                    endpoint: endpoint.to_owned(),
                });
            }
            let plugin = Arc::new(Plugin {
                driver: driver.to_owned(),
                endpoint: endpoint.to_owned(),
                registration_socket: registration_socket.to_owned(),
                service,
                health,
                seq: self.seq.fetch_add(1, Ordering::Relaxed),
                channel: Mutex::new(channel),
                conns,
                cancel: self.cancel.child_token(),
            });
            list.push(plugin.clone());
            plugin
        };
        info!(driver, endpoint = %endpoint.display(), service = service.registration_string(), health = ?health,
            "plugin registered");
        self.journal.record(NodeEventKind::PluginRegistered {
            driver: driver.to_owned(),
            endpoint: endpoint.display().to_string(),
            service: service.registration_string().to_owned(),
        });
        let span = tracing::info_span!(parent: &self.span, "plugin_connection", driver,
            endpoint = %endpoint.display());
        self.tracker
            .spawn(self.clone().monitor(plugin.clone()).instrument(span));
        if let Some(api) = health {
            let span = tracing::info_span!(parent: &self.span, "device_health", driver,
                endpoint = %endpoint.display());
            let source = plugin.clone();
            self.tracker.spawn(
                health::watch_plugin(
                    self.health.clone(),
                    driver.to_owned(),
                    api,
                    move || source.channel(),
                    plugin.cancel.clone(),
                )
                .instrument(span),
            );
        }
        self.changed(driver);
        Ok(())
    }

    /// Removes the plugin registered through `registration_socket`, if any.
    pub(crate) fn remove_by_socket(&self, registration_socket: &Path) {
        let removed: Vec<Arc<Plugin>> = {
            let mut plugins = self.lock();
            let mut removed = Vec::new();
            for list in plugins.values_mut() {
                list.retain(|p| {
                    let hit = p.registration_socket == registration_socket;
                    if hit {
                        removed.push(p.clone());
                    }
                    !hit
                });
            }
            plugins.retain(|_, l| !l.is_empty());
            removed
        };
        for p in removed {
            // Cancelled before the health of the driver may be forgotten
            // below, so that its stream cannot report again afterwards.
            p.cancel.cancel();
            info!(driver = %p.driver, endpoint = %p.endpoint.display(), "plugin deregistered");
            self.journal.record(NodeEventKind::PluginDeregistered {
                driver: p.driver.clone(),
                endpoint: p.endpoint.display().to_string(),
            });
            self.changed(&p.driver);
            if !self.is_registered(&p.driver) {
                self.health.forget_driver(&p.driver);
            }
        }
    }

    pub fn is_registered(&self, driver: &str) -> bool {
        self.lock().get(driver).is_some_and(|l| !l.is_empty())
    }

    /// The client calls for `driver` go to: the most recently registered
    /// connected plugin, or else the most recently registered one.
    pub fn client(&self, driver: &str) -> Option<DraClient> {
        let plugins = self.lock();
        let list = plugins.get(driver)?;
        list.iter()
            .filter(|p| p.connected())
            .max_by_key(|p| p.seq)
            .or_else(|| list.iter().max_by_key(|p| p.seq))
            .map(|p| p.client())
    }

    pub fn views(&self) -> Vec<PluginView> {
        let plugins = self.lock();
        let mut all: Vec<&Arc<Plugin>> = plugins.values().flatten().collect();
        all.sort_by_key(|p| p.seq);
        all.into_iter()
            .map(|p| PluginView {
                driver: p.driver.clone(),
                endpoint: p.endpoint.clone(),
                registration_socket: p.registration_socket.clone(),
                service: p.service,
                connected: p.connected(),
                health: p.health,
            })
            .collect()
    }

    /// A receiver that changes whenever plugins register, deregister,
    /// connect or disconnect.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Re-evaluates whether `driver` is usable and reports a transition.
    fn changed(&self, driver: &str) {
        self.version.send_modify(|v| *v += 1);
        let now = self
            .lock()
            .get(driver)
            .is_some_and(|l| l.iter().any(|p| p.connected()));
        let mut usable = self.usable.lock().unwrap_or_else(|e| e.into_inner());
        let before = usable.insert(driver.to_owned(), now);
        if before != Some(now) {
            debug!(driver, usable = now, "driver usability changed");
        }
        // Every re-evaluation, as the kubelet's `sync` on each registration,
        // deregistration and connection change: an unusable driver gets a
        // wipe scheduled unless one is pending, also when it was unusable
        // before and its last wipe is done (its slices were published again
        // since), and also when it is first seen unusable (registered, its
        // DRA service not answering yet). The receiver lives as long as the
        // node; a send error means the node is stopping and nobody needs to
        // know any more.
        let _ = self.changes.send(UsabilityChange {
            driver: driver.to_owned(),
            usable: now,
        });
    }

    /// Follows one plugin's connection: reports drops and dials again until
    /// the plugin is deregistered (the kubelet reconnects on ConnEnd too).
    async fn monitor(self: Arc<Self>, plugin: Arc<Plugin>) {
        let mut conns = plugin.conns.subscribe();
        loop {
            let connected = tokio::select! {
                _ = plugin.cancel.cancelled() => return,
                r = conns.wait_for(|n| *n == 0) => r.is_ok(),
            };
            if !connected {
                return;
            }
            // Also the normal end of a stopping plugin, so not a warning.
            info!("plugin connection closed");
            self.journal.record(NodeEventKind::PluginConnection {
                driver: plugin.driver.clone(),
                endpoint: plugin.endpoint.display().to_string(),
                connected: false,
            });
            self.changed(&plugin.driver);
            let mut delays = self.reconnect.delays();
            loop {
                let dial = uds::dial(
                    &plugin.endpoint,
                    Duration::from_secs(1),
                    plugin.conns.clone(),
                );
                let result = tokio::select! {
                    _ = plugin.cancel.cancelled() => return,
                    r = dial => r,
                };
                match result {
                    Ok(ch) => {
                        *plugin.channel.lock().unwrap_or_else(|e| e.into_inner()) = ch;
                        break;
                    }
                    Err(e) => {
                        debug!(error = %e, "reconnect failed");
                        tokio::select! {
                            _ = plugin.cancel.cancelled() => return,
                            _ = tokio::time::sleep(delays.next_delay()) => {}
                        }
                    }
                }
            }
            info!("plugin connection re-established");
            self.journal.record(NodeEventKind::PluginConnection {
                driver: plugin.driver.clone(),
                endpoint: plugin.endpoint.display().to_string(),
                connected: true,
            });
            self.changed(&plugin.driver);
        }
    }

    pub(crate) fn node(&self) -> &str {
        &self.node
    }
}
