//! The harness of one DRA test driver instance in one scenario: the Rust
//! counterpart of upstream's `test/e2e/dra` Driver (SetUp, TearDown, IsGone,
//! CallCount, Fail, Nodenames, slices).
pub mod allocatable;
pub mod rbac;
pub mod slices;
pub mod sockets;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;

use crate::timing::{Laps, Phase, Timings};
use dra_e2e_conn::node_host::{HostProvider, HostedDriver, NodeHost, Served, SocketError, Stopper};
use dra_e2e_kube::wait::{self, Check};
use dra_e2e_plugin::fault::Fault;
use dra_e2e_plugin::{
    Calls, DeviceHealth, HealthApi, HealthStatus, NodeApi, NodePlugin, PluginConfig, Prepared,
};
use rbac::IdentityObject;
use slices::{DeviceSpec, Publisher, Taint};
use sockets::{Broken, BrokenSender};

/// The devices a driver offers.
#[derive(Debug, Clone)]
pub enum Resources {
    /// A pool per node (pool = node name), published by the plugin itself with
    /// its node identity, re-created when deleted. Upstream's `DriverResources`.
    NodeLocal {
        /// Devices per node index; nodes without an entry get `default`.
        per_node: BTreeMap<usize, Vec<DeviceSpec>>,
        default: Vec<DeviceSpec>,
    },
    /// A pool per node like `NodeLocal`, made of these slices on every node
    /// (devices that consume counters or share capacity, counter sets):
    /// upstream's `DriverResources` with slices of its own making.
    NodePool {
        slices: Vec<slices::SliceContent>,
    },
    /// One `network` pool for the driver's nodes, created by the harness.
    /// Upstream's `NetworkResources`.
    Network {
        devices: Vec<DeviceSpec>,
    },
    /// A pool the driver's nodes share (selected by hostname), made of these
    /// slices, created by the harness: upstream's multi-host
    /// `DriverResources` (`PartitionableResources`, `ShareableResources`).
    SharedPool {
        pool: String,
        slices: Vec<slices::SliceContent>,
    },
    /// A pool on all nodes, kept in place by the harness with admin rights.
    AllNodes {
        pool: String,
        devices: Vec<DeviceSpec>,
    },
    None,
}

impl Resources {
    pub fn node_local(count: usize) -> Self {
        Resources::NodeLocal {
            per_node: BTreeMap::new(),
            default: slices::node_local_devices(count),
        }
    }

    pub fn network(count: usize, taints: &[Taint]) -> Self {
        Resources::Network {
            devices: slices::network_devices(count, taints),
        }
    }
}

/// How long the API server may take to enforce the driver's admission policy.
const POLICY_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything that distinguishes one driver instance.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// Appended to `<namespace>` in the driver name (`-other`).
    pub name_suffix: String,
    /// Distinguishes a second instance of the same driver (`-new`).
    pub instance_suffix: String,
    pub resources: Resources,
    pub node_apis: Vec<NodeApi>,
    /// Served device health service versions (none: no health reporting).
    pub health_apis: Vec<HealthApi>,
    /// Register with the kubelet. Without it, slices are published but no
    /// kubelet ever calls the plugin (upstream's control-plane tests).
    pub with_kubelet: bool,
    /// Per-instance socket names, so two instances can run side by side.
    pub rolling_update: bool,
    /// When each node's DRA service (its socket, server and slices) starts.
    pub dra_service: DraServiceStart,
    /// Where the DRA socket is.
    pub dra_socket: DraSocketDir,
    /// Teardown waits until the driver's slices are gone (`IsGone`).
    pub expect_slice_removal: bool,
    /// Device metadata API versions written at prepare, in this order (none:
    /// no device metadata, upstream's default).
    pub device_metadata: Vec<dra_e2e_plugin::metadata::MetadataVersion>,
    /// `spec.skipNodeOperations` of every slice the driver publishes
    /// (`*`, `NodeUnprepareResources`, ...; upstream's
    /// `DriverResourcesWithSkipNodeOperations`); empty for none.
    pub skip_node_operations: Vec<String>,
    /// Bugs its plugins plant in themselves (the conformance pack's
    /// mutants; none normally).
    pub faults: dra_e2e_plugin::fault::Faults,
}

/// When a node's DRA service starts: its socket, its server and the slices
/// it publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraServiceStart {
    /// With the registration, its socket served first: a kubelet connects
    /// as soon as it learns of the plugin.
    WithRegistration,
    /// Only when a step starts it, after the kubelet registered the plugin
    /// (upstream's registrar and DRA service started apart).
    Later,
}

/// The directory of a plugin's DRA socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraSocketDir {
    /// `<kubelet>/plugins/<driver>/dra.sock`, the kubelet plugin helper's
    /// default.
    Plugin,
    /// `<kubelet>/plugins_registry/<driver>-common.sock`, beside the
    /// registration socket, where the kubelet's plugin watcher also finds it
    /// (and fails to register it): upstream's "1 common socket".
    Registry,
}

impl Default for DriverOptions {
    fn default() -> Self {
        Self {
            name_suffix: String::new(),
            instance_suffix: String::new(),
            resources: Resources::None,
            node_apis: vec![NodeApi::V1, NodeApi::V1beta1],
            health_apis: HealthApi::ALL.to_vec(),
            with_kubelet: true,
            rolling_update: false,
            dra_service: DraServiceStart::WithRegistration,
            dra_socket: DraSocketDir::Plugin,
            expect_slice_removal: true,
            device_metadata: Vec::new(),
            skip_node_operations: Vec::new(),
            faults: Default::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("driver {driver}: {action}: {source}")]
    Kube {
        driver: String,
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("driver {driver}: {0}", driver = .1)]
    Socket(#[source] SocketError, String),
    #[error("driver {driver} on node {node}: starting the plugin: {message}")]
    Plugin {
        driver: String,
        node: String,
        message: String,
    },
    #[error("driver {driver}: {0}", driver = .1)]
    Wait(#[source] wait::WaitError, String),
    #[error("driver {driver}: {message}")]
    Other { driver: String, message: String },
    /// The driver can no longer reach the kubelet (see [`Driver::broken`]);
    /// the reason names the driver.
    #[error("{0}")]
    Broken(String),
}

/// How long the kubelets may take to wipe a stopped driver's slices
/// (upstream's `IsGone`).
const IS_GONE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a registration socket may take to answer `GetInfo` (the
/// kubelet gives it 1 s; the way onto a node adds a connection).
const REGISTRATION_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A wait that ends a driver's teardown, detached from the driver so it can
/// run on its own task: until the kubelets wiped the driver's slices
/// (upstream's `IsGone`). Whatever tore the
/// driver down still fails if the wait does, even when it ends later.
pub struct Unfinished {
    phase: Phase,
    wait: dra_e2e_conn::later::Later<Result<(), DriverError>>,
}

impl std::fmt::Debug for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unfinished")
            .field("phase", &self.phase.name)
            .finish_non_exhaustive()
    }
}

impl Unfinished {
    /// The wait until no slice of the driver is left, as `--timings` shows it.
    pub const SLICES_WIPED: Phase = Phase::wait("wait for slices to be wiped");

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub async fn wait(self) -> Result<(), DriverError> {
        self.wait.run().await
    }
}

/// Watches until `driver` has no ResourceSlice left.
async fn slices_removed(
    admin: &kube::Client,
    driver: &str,
    timeout: Duration,
) -> Result<(), DriverError> {
    let api: Api<ResourceSlice> = Api::all(admin.clone());
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!("the ResourceSlices of driver {driver} to be removed");
    let name = |s: &ResourceSlice| s.metadata.name.clone().unwrap_or_default();
    wait::list(&api, config, &what, timeout, wait::none_left(name))
        .await
        .map_err(|e| DriverError::Wait(e, driver.to_owned()))
}

struct NodeInstance {
    plugin: NodePlugin,
    /// The registration socket's.
    stoppers: Vec<Stopper>,
    /// The DRA socket's, while the DRA service runs.
    dra_socket: Option<Stopper>,
    publishers: Vec<Publisher>,
}

/// Stops what a plugin start that failed halfway had started, so no agent
/// or socket outlives it.
async fn abandon(plugin: Option<NodePlugin>, stoppers: Vec<Stopper>) {
    if let Some(plugin) = plugin
        && let Err(e) = plugin.stop().await
    {
        tracing::warn!(error = %e, "stopping a plugin whose start failed");
    }
    for s in stoppers {
        s.stop().await;
    }
}

/// Shared resources of a scenario a driver needs.
#[derive(Clone)]
pub struct Context {
    pub admin: kube::Client,
    pub admin_config: kube::Config,
    pub namespace: String,
}

/// One running (or stopped) driver instance.
pub struct Driver {
    pub name: String,
    pub options: DriverOptions,
    ctx: Context,
    nodes: Vec<String>,
    calls: Calls,
    hosts: Arc<dyn HostProvider>,
    host: Option<Arc<dyn NodeHost>>,
    identity: rbac::Identity,
    instances: BTreeMap<String, NodeInstance>,
    /// Prepared-claim views survive a stop so teardown can still wait on them.
    prepared: BTreeMap<String, Prepared>,
    network_slices: bool,
    admin_publisher: Option<Publisher>,
    /// What of the plugin's identity exists, in creation order.
    identity_created: Vec<IdentityObject>,
    torn_down: bool,
    /// Waits `release` left to whoever takes them.
    unfinished: Vec<Unfinished>,
    /// Nodes whose kubelet had not registered the plugin when it stopped.
    unregistered: Vec<String>,
    /// Stands in for the plugin pod's UID in rolling-update socket names.
    instance_uid: String,
    /// Time of each setup and teardown phase, for `--timings`.
    pub setup_timings: Timings,
    pub teardown_timings: Timings,
    /// Set when one of its served sockets fails for good.
    broken: BrokenSender,
    /// See [`Driver::policy_enforced`].
    policy_in_force: tokio::sync::OnceCell<()>,
    /// The gate in front of the DRA socket on each node; kept across stops
    /// and starts of the DRA service, so a blocked socket stays blocked.
    dra_gates: std::sync::Mutex<BTreeMap<String, dra_e2e_conn::SocketGate>>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("name", &self.name)
            .field("instance", &self.options.instance_suffix)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// The driver name for a namespace and suffix (`<ns><suffix>.k8s.io`).
    pub fn name_for(namespace: &str, suffix: &str) -> String {
        format!("{namespace}{suffix}.k8s.io")
    }

    /// Builds a driver that is not running yet (upstream's `NewDriverInstance`).
    pub fn new(
        ctx: Context,
        nodes: Vec<String>,
        options: DriverOptions,
        hosts: Arc<dyn HostProvider>,
        calls: Option<Calls>,
    ) -> Self {
        let name = Self::name_for(&ctx.namespace, &options.name_suffix);
        let identity = rbac::Identity::new(&ctx.namespace, &name, &options.instance_suffix);
        Self {
            calls: calls.unwrap_or_else(|| Calls::new(name.clone())),
            name,
            identity,
            ctx,
            nodes,
            hosts,
            host: None,
            options,
            instances: BTreeMap::new(),
            prepared: BTreeMap::new(),
            network_slices: false,
            admin_publisher: None,
            identity_created: Vec::new(),
            torn_down: false,
            unfinished: Vec::new(),
            unregistered: Vec::new(),
            instance_uid: format!("{:08x}", rand::random::<u32>()),
            setup_timings: Vec::new(),
            teardown_timings: Vec::new(),
            broken: BrokenSender::default(),
            policy_in_force: tokio::sync::OnceCell::new(),
            dra_gates: Default::default(),
        }
    }

    fn kube_err(&self, action: impl Into<String>) -> impl FnOnce(kube::Error) -> DriverError {
        let driver = self.name.clone();
        let action = action.into();
        move |source| DriverError::Kube {
            driver,
            action,
            source,
        }
    }

    /// Set up and not torn down.
    pub fn is_running(&self) -> bool {
        !self.instances.is_empty() && !self.torn_down
    }

    /// Sorted node names of the driver (`Nodenames()`).
    /// The CDI spec directory of `node` as this driver's plugins write it.
    pub fn cdi_files(&self, node: &str) -> Option<Arc<dyn dra_e2e_conn::node_files::NodeFiles>> {
        self.host.as_ref().map(|h| h.cdi_files(node))
    }

    pub fn nodenames(&self) -> &[String] {
        &self.nodes
    }

    pub fn calls(&self) -> &Calls {
        &self.calls
    }

    pub fn identity(&self) -> &rbac::Identity {
        &self.identity
    }

    /// A client acting as this driver's plugin on `node` (any node name, even
    /// one that does not exist).
    pub fn plugin_client(&self, node: &str) -> Result<kube::Client, DriverError> {
        let pod = self.host.as_ref().and_then(|h| h.pod_of(node));
        let config = rbac::impersonate(
            &self.ctx.admin_config,
            &self.identity,
            node,
            pod.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
        );
        dra_e2e_kube::client::build(config, None)
            .map_err(self.kube_err("building the plugin's client"))
    }

    /// Waits, once per driver, until the admission policy that keeps its
    /// plugins to their own nodes' slices is in force: the API server loads
    /// a new policy a moment after it was created, and scenarios acting as
    /// a plugin expect a write to another node's slice to be denied from the
    /// first request on. Only those scenarios wait for it.
    pub async fn policy_enforced(&self) -> Result<(), DriverError> {
        let Some(node) = self.nodes.first() else {
            return Ok(());
        };
        let plugin = self.plugin_client(node)?;
        self.policy_in_force
            .get_or_try_init(|| async {
                slices::wait_policy_enforced(&plugin, &self.name, POLICY_TIMEOUT)
                    .await
                    .map_err(|e| DriverError::Wait(e, self.name.clone()))
            })
            .await
            .map(drop)
    }

    /// Fires when the plugin can no longer be reached on one of its nodes
    /// (a proxy agent died), with a reason naming driver, node and socket.
    /// Steps race their waits against it.
    pub fn broken(&self) -> Broken {
        self.broken.subscribe()
    }

    /// Runs `fut` unless the driver breaks first.
    async fn unless_broken<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        let broken = self.broken();
        tokio::select! {
            r = fut => r,
            reason = broken.wait() => Err(DriverError::Broken(reason)),
        }
    }

    /// Reports the failures of a socket served on `node` as this driver
    /// being broken.
    fn watch_socket(&self, node: &str, incoming: dra_e2e_conn::Incoming) -> dra_e2e_conn::Incoming {
        let broken = self.broken.clone();
        let who = if self.options.instance_suffix.is_empty() {
            format!("driver {} on node {node}", self.name)
        } else {
            format!(
                "driver {} (instance {}) on node {node}",
                self.name, self.options.instance_suffix
            )
        };
        sockets::report_failures(incoming, move |e| {
            let reason = format!("{who}: {e}");
            tracing::error!("{reason}");
            broken.report(reason);
        })
    }

    /// Counts the connections the kubelet opens to the DRA socket (upstream's
    /// node suite counts its listener's accepts).
    fn count_connections(
        &self,
        node: &str,
        incoming: dra_e2e_conn::Incoming,
    ) -> dra_e2e_conn::Incoming {
        let (calls, node) = (self.calls.clone(), node.to_owned());
        Box::pin(futures::StreamExt::inspect(incoming, move |conn| {
            if conn.is_ok() {
                calls.connection_opened(&node);
            }
        }))
    }

    /// Prepared claims of the plugin on `node`.
    pub fn prepared(&self, node: &str) -> Option<&Prepared> {
        self.prepared.get(node)
    }

    /// Takes over what another instance of the same driver has prepared on
    /// each node, as a driver's new process reads its predecessor's
    /// checkpoint: the kubelet asks the new one to unprepare the claims the
    /// old one prepared, and both then see them gone.
    /// `from` is the other's [`Self::prepared_handles`].
    pub fn share_prepared(&mut self, from: BTreeMap<String, Prepared>) {
        for (node, prepared) in from {
            self.prepared.entry(node).or_insert(prepared);
        }
    }

    /// Handles of the prepared claims on each node (clones share state).
    pub fn prepared_handles(&self) -> BTreeMap<String, Prepared> {
        self.prepared.clone()
    }

    /// `SetUp`: identity objects, slices, plugins on every node, and (with a
    /// kubelet) the wait until every node registered the plugin.
    pub async fn set_up(&mut self) -> Result<(), DriverError> {
        let mut laps = Laps::start();
        self.create_identity().await?;
        rbac::wait_authorized(&self.ctx.admin, &self.identity, POLICY_TIMEOUT)
            .await
            .map_err(|e| DriverError::Wait(e, self.name.clone()))?;
        laps.lap(
            &mut self.setup_timings,
            Phase::harness("create RBAC and admission policy"),
        );
        let host = self
            .hosts
            .node_host(HostedDriver {
                driver: &self.name,
                nodes: &self.nodes,
            })
            .await
            .map_err(|e| DriverError::Other {
                driver: self.name.clone(),
                message: format!("{e:#}"),
            })?;
        self.host = Some(host);
        self.publish_shared_slices().await?;
        laps.lap(&mut self.setup_timings, Phase::harness("start node hosts"));
        let nodes = self.nodes.clone();
        // Every node's plugin at once: each start waits on agent processes
        // (locally) or proxy pods, which do not depend on each other.
        let started = futures::future::join_all(
            nodes
                .iter()
                .enumerate()
                .map(|(index, node)| self.start_node(index, node)),
        )
        .await;
        let mut first_error = None;
        for (node, result) in nodes.iter().zip(started) {
            match result {
                // Kept even when another node failed, so teardown stops them.
                Ok((prepared, instance)) => {
                    self.prepared.insert(node.clone(), prepared);
                    self.instances.insert(node.clone(), instance);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        laps.lap(&mut self.setup_timings, Phase::harness("start plugins"));
        // Pods created right after setup must see every node's devices, or the
        // scheduler decides on a partial view. A DRA service started later
        // publishes them then.
        // A driver that publishes wrongly on purpose is left for the
        // scenario's own steps to catch.
        if self.options.dra_service == DraServiceStart::WithRegistration
            && !self.options.faults.has(Fault::SlicesWrongNode)
        {
            self.unless_broken(self.wait_published(Duration::from_secs(60)))
                .await?;
        }
        laps.lap(
            &mut self.setup_timings,
            Phase::wait("wait for slices to be published"),
        );
        if self.options.with_kubelet {
            let this = &*self;
            let registered = futures::future::try_join_all(nodes.iter().filter_map(|node| {
                let inst = this.instances.get(node)?;
                Some(async move {
                    inst.plugin
                        .wait_registered(Duration::from_secs(60))
                        .await
                        .map_err(|e| DriverError::Other {
                            driver: this.name.clone(),
                            message: format!(
                                "the kubelet on node {node} did not register the plugin: {e}"
                            ),
                        })
                })
            }));
            this.unless_broken(registered).await?;
        }
        laps.lap(
            &mut self.setup_timings,
            Phase::wait("wait for registration"),
        );
        tracing::info!(driver = %self.name, instance = %self.options.instance_suffix, nodes = ?self.nodes, "driver is up");
        Ok(())
    }

    async fn create_identity(&mut self) -> Result<(), DriverError> {
        let objects = rbac::objects(&self.identity).map_err(|e| DriverError::Other {
            driver: self.name.clone(),
            message: format!("building RBAC objects: {e}"),
        })?;
        // Independent objects (a binding may name what does not exist yet),
        // created at once; what was created is kept for teardown.
        let created = futures::future::join_all(IdentityObject::ALL.map(|object| {
            let (admin, identity, objects) = (&self.ctx.admin, &self.identity, &objects);
            async move { (object, object.create(admin, identity, objects).await) }
        }))
        .await;
        let mut first_error = None;
        for (object, result) in created {
            match result {
                Ok(()) => self.identity_created.push(object),
                Err(e) => {
                    first_error.get_or_insert(self.kube_err(object.purpose())(e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// `slice` with the node operations the driver skips.
    fn with_skips(&self, mut slice: ResourceSlice) -> ResourceSlice {
        if !self.options.skip_node_operations.is_empty() {
            slice.spec.skip_node_operations = Some(self.options.skip_node_operations.clone());
        }
        slice
    }

    async fn publish_shared_slices(&mut self) -> Result<(), DriverError> {
        let shared = match &self.options.resources {
            Resources::Network { devices } => {
                slices::network_slices(&self.name, &self.nodes, devices)
                    .map_err(self.build_err())?
            }
            Resources::SharedPool { pool, slices } => {
                let prefix = format!("{}-{pool}", self.name);
                slices::selected_pool_slices(&self.name, &self.nodes, pool, &prefix, slices)
                    .map_err(self.build_err())?
            }
            _ => Vec::new(),
        };
        if !shared.is_empty() {
            let shared: Vec<ResourceSlice> =
                shared.into_iter().map(|s| self.with_skips(s)).collect();
            let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
            // Marked first, so teardown removes a partly published pool.
            self.network_slices = true;
            for slice in &shared {
                // A second instance of the same driver shares the pool.
                match api.create(&PostParams::default(), slice).await {
                    Ok(written) => {
                        if let Some(report) = slices::dropped_fields(slice, &written) {
                            return Err(DriverError::Other {
                                driver: self.name.clone(),
                                message: format!(
                                    "ResourceSlice {} was not published as written: {report}",
                                    written.metadata.name.unwrap_or_default()
                                ),
                            });
                        }
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        return Err(self.kube_err("creating the shared pool's ResourceSlices")(
                            e,
                        ));
                    }
                }
            }
        }
        // A pool on all nodes is kept in place, as a node-local one is.
        if let Resources::AllNodes { pool, devices } = &self.options.resources {
            let slice = self.with_skips(
                slices::all_nodes_slice(&self.name, pool, devices).map_err(self.build_err())?,
            );
            self.admin_publisher = Some(Publisher::start(self.ctx.admin.clone(), slice));
            self.network_slices = true;
        }
        Ok(())
    }

    /// Device metadata needs the plugin directory on the node, which only
    /// nodes with a container runtime (reached through proxy pods) offer.
    fn with_device_metadata(
        &self,
        config: PluginConfig,
        host: &dyn NodeHost,
        node: &str,
    ) -> Result<PluginConfig, DriverError> {
        if self.options.device_metadata.is_empty() {
            return Ok(config);
        }
        let files = host
            .plugin_files(node, &self.name)
            .ok_or_else(|| DriverError::Other {
                driver: self.name.clone(),
                message: format!(
                    "device metadata needs the driver's plugin directory on node {node}, which only \
                     nodes with a container runtime offer (run with --node-kind real, or on kind)"
                ),
            })?;
        let host_dir = host
            .kubelet_root(node)
            .join("plugins")
            .join(&self.name)
            .display()
            .to_string();
        Ok(
            config.with_device_metadata(dra_e2e_plugin::metadata::MetadataConfig {
                versions: self.options.device_metadata.clone(),
                files,
                host_dir,
            }),
        )
    }

    /// Starts the plugin of node `index`: its sockets, its gRPC servers and
    /// (for node-local resources) its slice publisher.
    async fn start_node(
        &self,
        index: usize,
        node: &str,
    ) -> Result<(Prepared, NodeInstance), DriverError> {
        let host = self.host.clone().ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: "starting a plugin before the driver's nodes are known".to_owned(),
        })?;
        let root = host.kubelet_root(node);
        let rolling_uid = self
            .options
            .rolling_update
            .then(|| self.instance_uid.clone());
        let (dra_path, reg_path) = self.socket_paths(&root, rolling_uid.as_deref());
        let client = self.plugin_client(node)?;
        let prepared = self.prepared.get(node).cloned().unwrap_or_default();
        let config = PluginConfig::new(
            self.name.clone(),
            node,
            dra_path.display().to_string(),
            Arc::new(client.clone()),
            host.cdi_files(node),
            self.calls.clone(),
        )
        .with_node_apis(self.options.node_apis.clone())
        .with_health_apis(self.options.health_apis.clone())
        .with_prepared(prepared.clone())
        .with_faults(self.options.faults.clone());
        let config = self.with_device_metadata(config, host.as_ref(), node)?;

        if !self.options.with_kubelet {
            let none = || Served::none().into_parts().0;
            let plugin = NodePlugin::start(config, none(), none());
            return match self.node_publishers(index, node, client).await {
                Ok(publishers) => Ok((
                    prepared,
                    NodeInstance {
                        plugin,
                        stoppers: Vec::new(),
                        dra_socket: None,
                        publishers,
                    },
                )),
                Err(e) => {
                    abandon(Some(plugin), Vec::new()).await;
                    Err(e)
                }
            };
        }
        // The DRA socket must accept before the kubelet learns about it
        // through the registration socket.
        let dra = match self.options.dra_service {
            DraServiceStart::WithRegistration => Some(self.serve_dra(node, &dra_path).await?),
            DraServiceStart::Later => None,
        };
        let (reg_in, reg_stopper) = match host.serve(node, &reg_path).await {
            Ok(served) => served.into_parts(),
            Err(e) => {
                abandon(None, dra.into_iter().map(|(_, s)| s).collect()).await;
                return Err(DriverError::Socket(e, self.name.clone()));
            }
        };
        let reg_in = self.watch_socket(node, reg_in);
        let (plugin, dra_socket) = match dra {
            Some((dra_in, dra_stopper)) => {
                (NodePlugin::start(config, dra_in, reg_in), Some(dra_stopper))
            }
            None => (NodePlugin::start_registration_only(config, reg_in), None),
        };
        let publishers = if dra_socket.is_some() {
            match self.node_publishers(index, node, client).await {
                Ok(publishers) => publishers,
                Err(e) => {
                    let stoppers = std::iter::once(reg_stopper).chain(dra_socket).collect();
                    abandon(Some(plugin), stoppers).await;
                    return Err(e);
                }
            }
        } else {
            Vec::new()
        };
        Ok((
            prepared,
            NodeInstance {
                plugin,
                stoppers: vec![reg_stopper],
                dra_socket,
                publishers,
            },
        ))
    }

    /// Serves the DRA socket on `node`, its connections watched and counted.
    async fn serve_dra(
        &self,
        node: &str,
        dra_path: &std::path::Path,
    ) -> Result<(dra_e2e_conn::Incoming, Stopper), DriverError> {
        let host = self.host.clone().ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: "serving a socket before the driver's nodes are known".to_owned(),
        })?;
        let (dra_in, stopper) = host
            .serve(node, dra_path)
            .await
            .map_err(|e| DriverError::Socket(e, self.name.clone()))?
            .into_parts();
        let gate = self.dra_gate(node);
        Ok((
            self.count_connections(node, gate.guard(self.watch_socket(node, dra_in))),
            stopper,
        ))
    }

    fn dra_gate(&self, node: &str) -> dra_e2e_conn::SocketGate {
        // A poisoned map still holds the gates.
        let mut gates = self.dra_gates.lock().unwrap_or_else(|p| p.into_inner());
        gates.entry(node.to_owned()).or_default().clone()
    }

    /// Blocks (or unblocks) the DRA socket on `node`: the kubelet still finds
    /// the socket, but every connection it opens is closed at once and the
    /// open ones are cut, as when a plugin hangs. Neither counted as a
    /// connection nor as a call.
    pub fn set_dra_socket_blocked(&self, node: &str, blocked: bool) -> Result<(), DriverError> {
        self.node_index(node)?;
        let gate = self.dra_gate(node);
        if blocked {
            gate.block();
        } else {
            gate.unblock();
        }
        Ok(())
    }

    /// Unblocks every DRA socket a scenario blocked, so its pods can go.
    pub fn unblock_sockets(&self) {
        let gates = self.dra_gates.lock().unwrap_or_else(|p| p.into_inner());
        for gate in gates.values() {
            gate.unblock();
        }
    }

    /// (DRA socket, registration socket) under the kubelet directory `root`.
    fn socket_paths(
        &self,
        root: &std::path::Path,
        rolling_uid: Option<&str>,
    ) -> (std::path::PathBuf, std::path::PathBuf) {
        let (dra, reg) = sockets::socket_paths(root, &self.name, rolling_uid);
        match self.options.dra_socket {
            DraSocketDir::Plugin => (dra, reg),
            DraSocketDir::Registry => (
                root.join("plugins_registry")
                    .join(format!("{}-common.sock", self.name)),
                reg,
            ),
        }
    }

    /// The DRA socket of this driver on `node`, as the kubelet sees it.
    fn dra_path(&self, node: &str) -> Result<std::path::PathBuf, DriverError> {
        let host = self.host.clone().ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: "a plugin's socket before the driver's nodes are known".to_owned(),
        })?;
        let rolling_uid = self
            .options
            .rolling_update
            .then(|| self.instance_uid.clone());
        let root = host.kubelet_root(node);
        Ok(self.socket_paths(&root, rolling_uid.as_deref()).0)
    }

    /// Calls `GetInfo` on the driver's registration socket on `node` the way
    /// a process on the node would, through the node's host, and checks
    /// that the answer names the driver.
    pub async fn registration_answers(&self, node: &str) -> Result<(), DriverError> {
        let err = |message: String| DriverError::Other {
            driver: self.name.clone(),
            message: format!("its registration socket on node {node}: {message}"),
        };
        let host = self
            .host
            .clone()
            .ok_or_else(|| err("the driver's nodes are not known yet".to_owned()))?;
        let rolling_uid = self
            .options
            .rolling_update
            .then(|| self.instance_uid.clone());
        let root = host.kubelet_root(node);
        let (_, registration) = self.socket_paths(&root, rolling_uid.as_deref());
        let name = dra_e2e_plugin::probe::registration_name(
            host,
            node,
            &registration,
            REGISTRATION_PROBE_TIMEOUT,
        )
        .await
        .map_err(|e| err(format!("{} ({e})", registration.display())))?;
        if name != self.name {
            return Err(err(format!(
                "{} answered for plugin {name:?}",
                registration.display()
            )));
        }
        Ok(())
    }

    /// Starts the DRA service of the plugin on `node` (its socket, server
    /// and slices), which was not started with the registration or was
    /// stopped; waits until the slices are published when every node's runs.
    pub async fn start_dra_service(&mut self, node: &str) -> Result<(), DriverError> {
        let index = self.node_index(node)?;
        let dra_path = self.dra_path(node)?;
        if self
            .instances
            .get(node)
            .is_some_and(|i| i.dra_socket.is_some())
        {
            return Err(DriverError::Other {
                driver: self.name.clone(),
                message: format!("its DRA service on node {node} runs already"),
            });
        }
        let (dra_in, stopper) = self.serve_dra(node, &dra_path).await?;
        let client = self.plugin_client(node)?;
        let publishers = match self.node_publishers(index, node, client).await {
            Ok(p) => p,
            Err(e) => {
                stopper.stop().await;
                return Err(e);
            }
        };
        let inst = self.instance_mut(node)?;
        if let Err(e) = inst.plugin.start_dra_service(dra_in) {
            stopper.stop().await;
            for p in publishers {
                p.stop().await;
            }
            return Err(DriverError::Other {
                driver: self.name.clone(),
                message: e.to_string(),
            });
        }
        inst.dra_socket = Some(stopper);
        inst.publishers = publishers;
        if self.instances.values().all(|i| i.dra_socket.is_some()) {
            self.unless_broken(self.wait_published(Duration::from_secs(60)))
                .await?;
        }
        Ok(())
    }

    /// Stops the DRA service of the plugin on `node`: its slices are no
    /// longer published (left for the kubelet to wipe), its server ends, its
    /// socket goes; registration stays.
    pub async fn stop_dra_service(&mut self, node: &str) -> Result<(), DriverError> {
        let name = self.name.clone();
        let inst = self.instance_mut(node)?;
        for p in std::mem::take(&mut inst.publishers) {
            p.stop().await;
        }
        let stopped = inst.plugin.stop_dra_service().await;
        if let Some(s) = inst.dra_socket.take() {
            s.stop().await;
        }
        stopped.map_err(|e| DriverError::Other {
            driver: name,
            message: e.to_string(),
        })
    }

    fn node_index(&self, node: &str) -> Result<usize, DriverError> {
        self.nodes
            .iter()
            .position(|n| n == node)
            .ok_or_else(|| DriverError::Other {
                driver: self.name.clone(),
                message: format!("it does not run on node {node}"),
            })
    }

    fn instance_mut(&mut self, node: &str) -> Result<&mut NodeInstance, DriverError> {
        let name = self.name.clone();
        self.instances
            .get_mut(node)
            .ok_or_else(|| DriverError::Other {
                driver: name,
                message: format!("no plugin of it runs on node {node}"),
            })
    }

    /// The plugin's own publishers of the slices of node `index`, for
    /// node-local resources (other resources are published by the harness).
    async fn node_publishers(
        &self,
        index: usize,
        node: &str,
        client: kube::Client,
    ) -> Result<Vec<Publisher>, DriverError> {
        let contents = match &self.options.resources {
            Resources::NodeLocal { per_node, default } => {
                let devices = per_node.get(&index).unwrap_or(default);
                vec![slices::SliceContent::of_devices(devices).map_err(self.build_err())?]
            }
            Resources::NodePool { slices } => slices.clone(),
            _ => return Ok(Vec::new()),
        };
        // A driver that names the wrong node (its first, say) publishes
        // there what this node offers.
        let named = match self.nodenames().first() {
            Some(first) if self.options.faults.has(Fault::SlicesWrongNode) => first.clone(),
            _ => node.to_owned(),
        };
        let node_obj: Node = Api::all(self.ctx.admin.clone())
            .get(&named)
            .await
            .map_err(self.kube_err(format!("reading node {named}")))?;
        let slices =
            slices::node_pool_slices(&self.name, &node_obj, &contents).map_err(self.build_err())?;
        Ok(slices
            .into_iter()
            .map(|slice| Publisher::start(client.clone(), self.with_skips(slice)))
            .collect())
    }

    fn build_err(&self) -> impl Fn(serde_json::Error) -> DriverError + '_ {
        |e| DriverError::Other {
            driver: self.name.clone(),
            message: format!("building ResourceSlice: {e}"),
        }
    }

    /// Waits until every node has the node-local slices this driver publishes
    /// (drivers with other resources have nothing to wait for); fails at once
    /// when the API server refuses one as invalid.
    pub async fn wait_published(&self, timeout: Duration) -> Result<(), DriverError> {
        if !matches!(
            self.options.resources,
            Resources::NodeLocal { .. } | Resources::NodePool { .. }
        ) {
            return Ok(());
        }
        let nodes = self.nodes.clone();
        let want = match &self.options.resources {
            Resources::NodePool { slices } => slices.len(),
            _ => 1,
        };
        let what = format!("the ResourceSlices of driver {} on every node", self.name);
        let published = self.wait_slices(&what, timeout, |items| {
            let missing: Vec<&String> = nodes
                .iter()
                .filter(|n| {
                    items
                        .iter()
                        .filter(|s| s.spec.node_name.as_ref() == Some(*n))
                        .count()
                        < want
                })
                .collect();
            if missing.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!("not all slices yet on {missing:?}"))
            }
        });
        let refusals = self.instances.iter().flat_map(|(node, inst)| {
            inst.publishers.iter().map(move |p| {
                Box::pin(async move { (node.clone(), p.refusal().await) })
                    as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>>
            })
        });
        let refused: Vec<_> = refusals.collect();
        if refused.is_empty() {
            return published.await;
        }
        tokio::select! {
            r = published => r,
            ((node, message), _, _) = futures::future::select_all(refused) => Err(DriverError::Other {
                driver: self.name.clone(),
                message: format!("its ResourceSlice on node {node} was not published as written: {message}"),
            }),
        }
    }

    /// Watches the driver's slices, whoever published them, until `check`
    /// over all of them is done.
    pub async fn wait_slices<T>(
        &self,
        what: &str,
        timeout: Duration,
        check: impl FnMut(&[ResourceSlice]) -> Check<T>,
    ) -> Result<T, DriverError> {
        let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
        let config = watcher::Config::default().fields(&format!("spec.driver={}", self.name));
        wait::list(&api, config, what, timeout, check)
            .await
            .map_err(|e| DriverError::Wait(e, self.name.clone()))
    }

    /// The pool `device` belongs to as seen from `node`.
    fn pool_of(&self, node: &str, device: &str) -> Result<String, DriverError> {
        let index = self.nodes.iter().position(|n| n == node);
        let names = |devices: &[DeviceSpec]| -> Vec<String> {
            devices.iter().map(|d| d.name.clone()).collect()
        };
        let (pool, known): (String, Vec<String>) = match &self.options.resources {
            Resources::NodeLocal { per_node, default } => (
                node.to_owned(),
                names(index.and_then(|i| per_node.get(&i)).unwrap_or(default)),
            ),
            Resources::NodePool { slices } => {
                (node.to_owned(), slices::SliceContent::device_names(slices))
            }
            Resources::Network { devices } => ("network".to_owned(), names(devices)),
            Resources::SharedPool { pool, slices } => {
                (pool.clone(), slices::SliceContent::device_names(slices))
            }
            Resources::AllNodes { pool, devices } => (pool.clone(), names(devices)),
            Resources::None => (String::new(), Vec::new()),
        };
        if known.iter().any(|d| d == device) {
            Ok(pool)
        } else {
            Err(DriverError::Other {
                driver: self.name.clone(),
                message: format!(
                    "node {node} has no device {device:?}; its devices: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            })
        }
    }

    /// Changes a device's health as the plugin on `node` reports it (upstream's
    /// control channel); open health streams send the new list at once.
    pub fn set_device_health(
        &self,
        node: &str,
        device: &str,
        health: HealthStatus,
        message: &str,
    ) -> Result<(), DriverError> {
        let pool = self.pool_of(node, device)?;
        let inst = self.instances.get(node).ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: format!("no plugin runs on node {node}"),
        })?;
        inst.plugin.set_device_health(DeviceHealth {
            pool,
            device: device.to_owned(),
            health,
            message: message.to_owned(),
        });
        Ok(())
    }

    /// Unprepares a claim on `node`'s plugin directly, as upstream's
    /// `UnprepareClaim` does for claims the kubelet skips unpreparing; the
    /// plugin counts no call.
    pub async fn unprepare_directly(
        &self,
        node: &str,
        claim: dra_e2e_proto::dra::ClaimRef,
    ) -> Result<(), DriverError> {
        let inst = self.instances.get(node).ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: format!("no plugin runs on node {node}"),
        })?;
        let what = claim.to_string();
        inst.plugin
            .unprepare_directly(claim)
            .await
            .map_err(|e| DriverError::Other {
                driver: self.name.clone(),
                message: format!("unpreparing claim {what} on node {node}: {e}"),
            })
    }

    /// Makes `method` fail (gRPC UNKNOWN "injected error") on `node`, or stops it.
    pub fn fail(&self, node: &str, method: &str, fail: bool) {
        self.calls.set_fail(node, method, fail);
    }

    pub fn call_count(&self, node: &str, method: &str) -> u64 {
        self.calls.count(node, method)
    }

    /// The driver's slices as the API server has them.
    pub async fn slices(&self) -> Result<Vec<ResourceSlice>, DriverError> {
        let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
        let lp = ListParams::default().fields(&format!("spec.driver={}", self.name));
        Ok(api
            .list(&lp)
            .await
            .map_err(self.kube_err("listing ResourceSlices"))?
            .items)
    }

    /// Stops the plugins (sockets removed, agents ended) without deleting
    /// anything else, as when a driver pod goes away.
    pub async fn stop_plugins(&mut self) {
        let instances = std::mem::take(&mut self.instances);
        for (node, inst) in &instances {
            if inst.plugin.registration_status() != dra_e2e_plugin::RegistrationStatus::Registered
                && !self.unregistered.contains(node)
            {
                self.unregistered.push(node.clone());
            }
        }
        let driver = &self.name;
        futures::future::join_all(instances.into_iter().map(|(node, inst)| async move {
            for p in inst.publishers {
                p.stop().await;
            }
            if let Err(e) = inst.plugin.stop().await {
                tracing::warn!(%driver, %node, error = %e, "stopping plugin");
            }
            for s in inst.stoppers.into_iter().chain(inst.dra_socket) {
                s.stop().await;
            }
        }))
        .await;
        if let Some(p) = self.admin_publisher.take() {
            p.stop().await;
        }
    }

    /// `TearDown` in upstream's order: plugins, proxy pods, identity objects,
    /// shared slices, then `IsGone` when expected. Safe to call twice.
    pub async fn tear_down(&mut self) -> Result<(), DriverError> {
        let released = self.release().await;
        let waits = self.take_unfinished().into_iter().map(|u| async move {
            let (phase, started) = (u.phase(), Instant::now());
            (phase, u.wait().await, started.elapsed())
        });
        let mut result = released;
        for (phase, r, took) in futures::future::join_all(waits).await {
            self.teardown_timings.push((phase, took));
            result = result.and(r);
        }
        result
    }

    /// Everything of [`Driver::tear_down`] but its waits (until the proxy
    /// pods are gone, until the kubelets wiped the driver's slices), which
    /// [`Driver::take_unfinished`] hands to a caller that may let them run
    /// beside whatever comes next.
    pub async fn release(&mut self) -> Result<(), DriverError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut laps = Laps::start();
        self.stop_plugins().await;
        self.host = None;
        laps.lap(&mut self.teardown_timings, Phase::harness("stop plugins"));
        let created = std::mem::take(&mut self.identity_created);
        // A kubelet wipes only the slices of plugins it registered: a wait
        // for the rest could never end, so they are deleted here.
        // Only when no other instance of the driver keeps publishing.
        let unregistered = if self.options.with_kubelet && self.options.expect_slice_removal {
            std::mem::take(&mut self.unregistered)
        } else {
            Vec::new()
        };
        // The identity objects and the slices do not depend on each other.
        let (deleted, slices) = futures::future::join(
            futures::future::join_all(created.into_iter().map(|object| {
                let (admin, identity) = (&self.ctx.admin, &self.identity);
                async move { (object, object.delete(admin, identity).await) }
            })),
            self.delete_slices(&unregistered),
        )
        .await;
        let mut first_error = None;
        for (object, result) in deleted {
            if let Err(e) = result {
                let action = format!("deleting {} {}", object.kind(), object.name(&self.identity));
                first_error.get_or_insert(self.kube_err(action)(e));
            }
        }
        if let Err(e) = slices {
            first_error.get_or_insert(e);
        }
        laps.lap(
            &mut self.teardown_timings,
            Phase::harness("delete RBAC and shared slices"),
        );
        if self.options.expect_slice_removal {
            let (admin, driver) = (self.ctx.admin.clone(), self.name.clone());
            self.unfinished.push(Unfinished {
                phase: Unfinished::SLICES_WIPED,
                wait: dra_e2e_conn::later::Later::new(async move {
                    slices_removed(&admin, &driver, IS_GONE_TIMEOUT).await
                }),
            });
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The waits [`Driver::release`] left. The wait until no slice of the
    /// driver is left is among them unless the driver expects its slices to
    /// stay (another instance keeps publishing them).
    pub fn take_unfinished(&mut self) -> Vec<Unfinished> {
        std::mem::take(&mut self.unfinished)
    }

    /// Deletes the slices no kubelet will wipe: those of `unregistered`
    /// nodes, and every slice of the driver when the harness published them
    /// or no kubelet runs.
    async fn delete_slices(&self, unregistered: &[String]) -> Result<(), DriverError> {
        self.delete_node_slices(unregistered).await?;
        if self.network_slices || !self.options.with_kubelet {
            let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
            let lp = ListParams::default().fields(&format!("spec.driver={}", self.name));
            api.delete_collection(&DeleteParams::default(), &lp)
                .await
                .map_err(self.kube_err("deleting the driver's ResourceSlices"))?;
        }
        Ok(())
    }

    /// Deletes the driver's slices of `nodes`, whose kubelets never
    /// registered the plugin and so will never wipe them.
    async fn delete_node_slices(&self, nodes: &[String]) -> Result<(), DriverError> {
        let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
        for node in nodes {
            tracing::warn!(driver = %self.name, %node, "the kubelet never registered the plugin; deleting its slices instead of waiting for a wipe");
            let lp = ListParams::default()
                .fields(&format!("spec.driver={},spec.nodeName={node}", self.name));
            api.delete_collection(&DeleteParams::default(), &lp)
                .await
                .map_err(self.kube_err(format!("deleting the ResourceSlices of node {node}")))?;
        }
        Ok(())
    }

    /// `IsGone`: waits until no ResourceSlice of the driver is left (the
    /// kubelet wipes node-local ones a delay after the plugin went away).
    pub async fn is_gone(&self, timeout: Duration) -> Result<(), DriverError> {
        slices_removed(&self.ctx.admin, &self.name, timeout).await
    }

    /// Per-node plugin call logs, for artifacts.
    pub fn call_log_text(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            out.push_str(&format!("== {} on {node}\n", self.name));
            for record in self.calls.log(node) {
                out.push_str(&format!("{record}\n"));
            }
        }
        out
    }
}
