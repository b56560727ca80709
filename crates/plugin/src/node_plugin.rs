//! Lifecycle of one (driver, node) plugin: its registration and DRA servers.
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::RoutesBuilder;
use tonic::transport::Server;
use tracing::{Instrument, error, info, info_span};

use super::dra::NodeDriver;
use super::health::{DeviceHealth, HealthFeed, HealthState};
use super::prepared::{ClaimId, Prepared};
use super::registration::{RegistrationService, RegistrationState, RegistrationStatus};
use super::watch::WaitTimeout;
use super::{Calls, PluginConfig, PluginError, ServerKind};
use dra_e2e_conn::{Incoming, unix_incoming};
use dra_e2e_proto::dra::{ClaimRef, add_node_service};
use dra_e2e_proto::health::add_health_service;
use dra_e2e_proto::pluginregistration::registration_server::RegistrationServer;

/// A socket file this plugin created, identified by inode so that we never
/// remove a socket a newer instance bound at the same path.
#[derive(Debug)]
struct OwnedSocket {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl OwnedSocket {
    fn of(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path)?;
        Ok(Self {
            path: path.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    fn remove(&self) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.dev() == self.dev && meta.ino() == self.ino => {
                match std::fs::remove_file(&self.path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                }
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[derive(Debug)]
struct RunningServer {
    kind: ServerKind,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    socket: Option<OwnedSocket>,
}

impl RunningServer {
    /// Cancels, drains (up to `timeout`) and removes the socket.
    async fn stop(
        &mut self,
        driver: &str,
        node: &str,
        timeout: Duration,
    ) -> Result<(), PluginError> {
        self.shutdown.cancel();
        let mut result = Ok(());
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            result = match tokio::time::timeout(timeout, task).await {
                Ok(Ok(Ok(()))) => Ok(()),
                Ok(Ok(Err(source))) => Err(PluginError::Serve {
                    kind: self.kind,
                    driver: driver.to_owned(),
                    node: node.to_owned(),
                    source,
                }),
                Ok(Err(join)) => Err(PluginError::Panicked {
                    kind: self.kind,
                    driver: driver.to_owned(),
                    node: node.to_owned(),
                    message: join.to_string(),
                }),
                Err(_) => {
                    abort.abort();
                    Err(PluginError::StopTimeout {
                        kind: self.kind,
                        driver: driver.to_owned(),
                        node: node.to_owned(),
                        timeout,
                    })
                }
            };
        }
        if let Some(socket) = self.socket.take()
            && let Err(source) = socket.remove()
            && result.is_ok()
        {
            result = Err(PluginError::Socket {
                op: "remove",
                kind: self.kind,
                path: socket.path.clone(),
                driver: driver.to_owned(),
                node: node.to_owned(),
                source,
            });
        }
        result
    }

    fn abort(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(socket) = self.socket.take() {
            let _ = socket.remove();
        }
    }
}

/// The running plugin of one driver on one node. Stop it with
/// [`NodePlugin::stop`]; dropping it also stops serving, without waiting.
#[derive(Debug)]
pub struct NodePlugin {
    driver: String,
    node: String,
    registration: RunningServer,
    dra: RunningServer,
    registration_state: Arc<RegistrationState>,
    health: Arc<HealthState>,
    prepared: Prepared,
    calls: Calls,
    stop_timeout: Duration,
    core: Core,
    /// Kept to start the DRA server again.
    config: PluginConfig,
}

/// The driver logic behind the DRA server, for what the harness does to the
/// driver directly rather than through gRPC.
#[derive(Clone)]
struct Core(Arc<NodeDriver>);

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeDriver")
            .field("driver", &self.0.driver)
            .field("node", &self.0.node)
            .finish_non_exhaustive()
    }
}

fn spawn_server(
    kind: ServerKind,
    config: &PluginConfig,
    routes: RoutesBuilder,
    incoming: Incoming,
    shutdown: CancellationToken,
) -> RunningServer {
    let span = info_span!("plugin_server", driver = %config.driver_name, node = %config.node_name, server = %kind);
    let layer = span.in_scope(|| {
        config
            .calls
            .layer(config.node_name.clone(), shutdown.clone())
    });
    // tonic's defaults leave accepted connections without any handshake or
    // idle deadline (HTTP/2 only, no keepalive, no max age): pre-dialled proxy
    // connections may wait long for the kubelet's preface, and must.
    let router = Server::builder().layer(layer).add_routes(routes.routes());
    // A kubelet sends the percent-encoded socket path as `:authority` to the
    // registration socket, which h2 alone would refuse with PROTOCOL_ERROR
    // (https://github.com/hyperium/http/issues/836): there every connection,
    // unix or proxied, goes through an `AcceptAnyAuthority` that lets such
    // requests through (crates/conn/src/h2_rewrite.rs). The DRA socket's
    // (`localhost`) reach tonic as they are.
    let incoming = kind.kubelet_socket().server_incoming(incoming);
    let signal = shutdown.clone().cancelled_owned();
    let task = tokio::spawn(
        async move {
            let result = router.serve_with_incoming_shutdown(incoming, signal).await;
            match &result {
                Ok(()) => info!("server stopped"),
                Err(e) => error!(error = %e, "server failed"),
            }
            result
        }
        .instrument(span),
    );
    RunningServer {
        kind,
        shutdown,
        task: Some(task),
        socket: None,
    }
}

impl NodePlugin {
    /// Serves the DRA API from `dra` and registration from `registration`,
    /// whatever those connections come from. Must run inside a tokio runtime.
    pub fn start(config: PluginConfig, dra: Incoming, registration: Incoming) -> Self {
        let mut plugin = Self::start_dra(&config, dra);
        plugin.registration = plugin.start_registration(&config, registration);
        plugin
    }

    fn start_dra(config: &PluginConfig, incoming: Incoming) -> Self {
        let mut plugin = Self::without_servers(config);
        plugin.dra = plugin.spawn_dra(incoming);
        plugin
    }

    /// The plugin's state (its driver logic, device health) with neither
    /// server running yet.
    fn without_servers(config: &PluginConfig) -> Self {
        let core = Arc::new(NodeDriver {
            driver: config.driver_name.clone(),
            node: config.node_name.clone(),
            claims: config.claims.clone(),
            cdi: config.cdi.clone(),
            prepared: config.prepared.clone(),
            metadata: config.metadata.clone(),
            faults: config.faults.clone(),
            started: std::time::Instant::now(),
            used: Default::default(),
        });
        let idle = |kind| RunningServer {
            kind,
            shutdown: CancellationToken::new(),
            task: None,
            socket: None,
        };
        Self {
            driver: config.driver_name.clone(),
            node: config.node_name.clone(),
            registration: idle(ServerKind::Registration),
            dra: idle(ServerKind::Dra),
            registration_state: Arc::new(RegistrationState::default()),
            health: Arc::new(HealthState::default()),
            prepared: config.prepared.clone(),
            calls: config.calls.clone(),
            core: Core(core),
            stop_timeout: config.stop_timeout,
            config: config.clone(),
        }
    }

    /// The DRA server (node service and health streams) on `incoming`.
    fn spawn_dra(&self, incoming: Incoming) -> RunningServer {
        let config = &self.config;
        let shutdown = CancellationToken::new();
        let mut routes = RoutesBuilder::default();
        let served = config.served_node_apis();
        for api in &served {
            add_node_service(&mut routes, *api, self.core.0.clone());
        }
        let feed = Arc::new(HealthFeed {
            driver: config.driver_name.clone(),
            node: config.node_name.clone(),
            state: self.health.clone(),
            interval: config.health_interval,
            shutdown: shutdown.clone(),
        });
        let health_served = config.served_health_apis();
        for api in &health_served {
            add_health_service(&mut routes, *api, feed.clone());
        }
        info!(driver = %config.driver_name, node = %config.node_name, apis = ?served,
            health = ?health_served, "starting DRA server");
        spawn_server(ServerKind::Dra, config, routes, incoming, shutdown)
    }

    /// Serves registration alone, as a driver whose DRA service starts only
    /// after the kubelet registered it (upstream's separate registrar and
    /// DRA service): [`NodePlugin::start_dra_service`] starts it.
    pub fn start_registration_only(config: PluginConfig, registration: Incoming) -> Self {
        let mut plugin = Self::without_servers(&config);
        plugin.registration = plugin.start_registration(&config, registration);
        plugin
    }

    /// Whether the DRA server runs.
    pub fn dra_service_runs(&self) -> bool {
        self.dra.task.is_some()
    }

    /// Starts the DRA server again (or for the first time) on `incoming`;
    /// the claims prepared and the devices' health are the plugin's as
    /// before, as a driver's DRA service restarted in its process.
    pub fn start_dra_service(&mut self, incoming: Incoming) -> Result<(), PluginError> {
        if self.dra_service_runs() {
            return Err(PluginError::AlreadyServing {
                driver: self.driver.clone(),
                node: self.node.clone(),
            });
        }
        self.dra = self.spawn_dra(incoming);
        Ok(())
    }

    /// Stops the DRA server alone; registration stays. Calls in progress
    /// end with UNAVAILABLE.
    pub async fn stop_dra_service(&mut self) -> Result<(), PluginError> {
        info!(driver = %self.driver, node = %self.node, "stopping the DRA service");
        self.dra
            .stop(&self.driver, &self.node, self.stop_timeout)
            .await
    }

    fn start_registration(&self, config: &PluginConfig, incoming: Incoming) -> RunningServer {
        let mut routes = RoutesBuilder::default();
        routes.add_service(RegistrationServer::new(RegistrationService {
            driver: config.driver_name.clone(),
            node: config.node_name.clone(),
            endpoint: config.endpoint.clone(),
            supported_versions: config.supported_versions(),
            state: self.registration_state.clone(),
        }));
        info!(driver = %config.driver_name, node = %config.node_name, endpoint = %config.endpoint,
            "starting registration server");
        spawn_server(
            ServerKind::Registration,
            config,
            routes,
            incoming,
            CancellationToken::new(),
        )
    }

    /// Binds both unix sockets (removing stale files first) and serves them.
    /// The DRA socket is served before the registration socket appears, because
    /// the kubelet connects to the endpoint as soon as it sees the registration
    /// socket. Both sockets are removed on stop.
    pub async fn start_unix(
        config: PluginConfig,
        dra_socket: impl AsRef<Path>,
        registration_socket: impl AsRef<Path>,
    ) -> Result<Self, PluginError> {
        let bind =
            |kind: ServerKind, path: &Path| -> Result<(Incoming, OwnedSocket), PluginError> {
                let err = |op: &'static str| {
                    let path = path.to_owned();
                    let (driver, node) = (config.driver_name.clone(), config.node_name.clone());
                    move |source| PluginError::Socket {
                        op,
                        kind,
                        path,
                        driver,
                        node,
                        source,
                    }
                };
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(err("create directory of"))?;
                }
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(err("remove stale")(e));
                    }
                    _ => {}
                }
                let listener = tokio::net::UnixListener::bind(path).map_err(err("bind"))?;
                let owned = OwnedSocket::of(path).map_err(err("stat"))?;
                Ok((unix_incoming(listener), owned))
            };
        let (dra_incoming, dra_owned) = bind(ServerKind::Dra, dra_socket.as_ref())?;
        let mut plugin = Self::start_dra(&config, dra_incoming);
        plugin.dra.socket = Some(dra_owned);
        // On error `plugin` is dropped, which stops the DRA server and removes its socket.
        let (reg_incoming, reg_owned) =
            bind(ServerKind::Registration, registration_socket.as_ref())?;
        plugin.registration = plugin.start_registration(&config, reg_incoming);
        plugin.registration.socket = Some(reg_owned);
        Ok(plugin)
    }

    pub fn driver(&self) -> &str {
        &self.driver
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The driver-wide call counters this plugin reports into.
    pub fn calls(&self) -> &Calls {
        &self.calls
    }

    pub fn registration_status(&self) -> RegistrationStatus {
        self.registration_state.status()
    }

    /// The kubelet's last `NotifyRegistrationStatus` said registered.
    pub fn is_registered(&self) -> bool {
        self.registration_status() == RegistrationStatus::Registered
    }

    /// Waits until the kubelet reports a successful registration.
    pub async fn wait_registered(&self, timeout: Duration) -> Result<(), WaitTimeout> {
        let (driver, node) = (self.driver.clone(), self.node.clone());
        self.registration_state
            .wait_registered(
                move || format!("kubelet registration of driver {driver} on node {node}"),
                timeout,
            )
            .await
    }

    /// Claims prepared on this node (a live view).
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    pub fn prepared_claims(&self) -> Vec<ClaimId> {
        self.prepared.claims()
    }

    /// Unprepares `claim` as `NodeUnprepareResources` would, without a
    /// call (none is counted): upstream's `UnprepareClaim`, for claims the
    /// kubelet was told not to unprepare. Unknown claims are fine.
    pub async fn unprepare_directly(&self, claim: ClaimRef) -> Result<(), String> {
        let results = self.core.0.unprepare_claims(vec![claim], None).await;
        results.into_iter().try_for_each(|(_, result)| result)
    }

    /// Changes a device's reported health; open health streams send the new
    /// list at once.
    pub fn set_device_health(&self, update: DeviceHealth) {
        info!(driver = %self.driver, node = %self.node, pool = %update.pool,
            device = %update.device, health = ?update.health, "device health changed");
        self.health.set(update);
    }

    pub fn device_health(&self) -> Vec<DeviceHealth> {
        self.health.devices()
    }

    /// Stops the registration server (so the kubelet deregisters), then the DRA
    /// server; removes their sockets. Calls in progress end with UNAVAILABLE.
    pub async fn stop(mut self) -> Result<(), PluginError> {
        info!(driver = %self.driver, node = %self.node, "stopping plugin");
        let registration = self
            .registration
            .stop(&self.driver, &self.node, self.stop_timeout)
            .await;
        let dra = self
            .dra
            .stop(&self.driver, &self.node, self.stop_timeout)
            .await;
        registration.and(dra)
    }
}

impl Drop for NodePlugin {
    fn drop(&mut self) {
        self.registration.abort();
        self.dra.abort();
    }
}
