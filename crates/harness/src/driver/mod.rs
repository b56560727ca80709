//! The harness of one DRA test driver instance in one scenario: the Rust
//! counterpart of upstream's `test/e2e/dra` Driver (SetUp, TearDown, IsGone,
//! CallCount, Fail, Nodenames, slices).
pub mod allocatable;
mod dra_service;
mod options;
mod publishing;
pub mod rbac;
mod set_up;
pub mod slices;
pub mod sockets;
mod teardown;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::timing::Timings;
use dra_e2e_conn::node_host::{HostProvider, NodeHost, SocketError, Stopper};
use dra_e2e_kube::wait;
use dra_e2e_plugin::{Calls, DeviceHealth, HealthStatus, NodePlugin, Prepared};
use rbac::IdentityObject;
use slices::Publisher;
use sockets::{Broken, BrokenSender};

pub use options::{DraServiceStart, DraSocketDir, DriverOptions, Resources};
pub use teardown::{Ended, Unfinished};

/// How long the API server may take to enforce the driver's admission policy.
const POLICY_TIMEOUT: Duration = Duration::from_secs(60);

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

struct NodeInstance {
    plugin: NodePlugin,
    /// The registration socket's.
    stoppers: Vec<Stopper>,
    /// The DRA socket's, while the DRA service runs.
    dra_socket: Option<Stopper>,
    publishers: Vec<Publisher>,
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

    /// The CDI spec directory of `node` as this driver's plugins write it.
    pub fn cdi_files(&self, node: &str) -> Option<Arc<dyn dra_e2e_conn::node_files::NodeFiles>> {
        self.host.as_ref().map(|h| h.cdi_files(node))
    }

    /// Sorted node names of the driver (`Nodenames()`).
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
