//! Reaching a cluster: the local cluster the runner starts (control plane plus
//! simulated kubelet nodes), or any cluster from a kubeconfig.
pub mod local;
pub mod local_host;
pub mod remote;

// What reaching a cluster takes on this machine and on its nodes.
mod control_plane;
pub mod host;
pub mod images;
pub mod job;
pub mod proxy;
pub mod real_node;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, ListParams};

use dra_e2e_conn::node_host::{HostProvider, HostedDriver, NodeHost};
pub use dra_e2e_kube::node_ready::node_is_ready_and_schedulable;
use dra_e2e_node_sim::SimNode;

/// Label on every namespace of a run, so the run's leftovers can be found.
pub const RUN_LABEL: &str = "dra-e2e.k8s.io/run";

/// Which cluster scenarios run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterChoice {
    /// The kubeconfig cluster when one is configured, otherwise the local cluster.
    Auto,
    /// The cluster of `--kubeconfig` / `KUBECONFIG` / `~/.kube/config`.
    Kubeconfig,
    /// A local control plane with simulated kubelet nodes, started by the runner.
    Local,
}

impl ClusterChoice {
    /// Whether this choice means the local cluster, given the `--kubeconfig`.
    pub fn is_local(self, kubeconfig: Option<&std::path::Path>) -> bool {
        match self {
            ClusterChoice::Local => true,
            ClusterChoice::Kubeconfig => false,
            ClusterChoice::Auto => !remote::kubeconfig_configured(kubeconfig),
        }
    }
}

/// What kind of nodes the local cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NodeKind {
    /// Kubelets simulated inside the runner: no container runtime, no root.
    #[default]
    Simulated,
    /// Real kubelets with containerd and runc, each in namespaces of its own
    /// (root; components built by `make node`).
    Real,
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NodeKind::Simulated => "simulated",
            NodeKind::Real => "real",
        })
    }
}

/// How the runner should reach a cluster.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub choice: ClusterChoice,
    pub kubeconfig: Option<PathBuf>,
    pub nodes: usize,
    pub node_kind: NodeKind,
    /// Image archives imported into real nodes besides the built-in ones.
    pub image_archives: Vec<PathBuf>,
    /// The nodes' CDI spec directory (real clusters; real local nodes use
    /// their own).
    pub cdi_dir: String,
    pub feature_gates: Vec<String>,
    pub binaries_dir: Option<PathBuf>,
    /// Real local nodes: the directory of their built programs (the
    /// runner's `--kubelet-version` build); `None`: the pinned build.
    pub node_binaries_dir: Option<PathBuf>,
    pub wipe_delay: Duration,
    pub keep_files: bool,
    pub kubelet_root: PathBuf,
    pub proxy_image: String,
    /// The user named `proxy_image`: real local nodes then use it as it is,
    /// upstream's hostpathplugin name included (their own image answers to
    /// it, unless an imported archive of upstream's takes the name over).
    pub proxy_image_given: bool,
    /// Real nodes: the node hosts broken on purpose, for broken variants.
    pub node_host_fault: crate::proxy::NodeHostFault,
}

impl ConnectOptions {
    /// Whether these options mean the local cluster.
    pub fn is_local(&self) -> bool {
        self.choice.is_local(self.kubeconfig.as_deref())
    }
}

/// Where the local cluster's simulated nodes keep what a kubelet plugin
/// uses: see [`Cluster::simulated_node_dirs`].
#[derive(Debug, Clone)]
pub struct SimulatedNodeDirs {
    /// The cluster's own directory, removed with it.
    pub dir: std::path::PathBuf,
    pub kubeconfig: std::path::PathBuf,
    /// Name, kubelet root directory and CDI spec directory of each node.
    pub nodes: Vec<(String, std::path::PathBuf, std::path::PathBuf)>,
}

/// Which kubelet runs a cluster's nodes, and so what a passing scenario
/// about the kubelet proves: on simulated nodes, that dra-e2e's simulator
/// does what upstream's kubelet does; on real ones, the kubelet itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kubelet {
    /// The local cluster's simulated kubelets, which run no containers.
    Simulated,
    /// Real kubelets with a container runtime: the local cluster's real
    /// nodes, or a real cluster.
    Real,
}

impl std::fmt::Display for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kubelet::Simulated => "dra-e2e simulated kubelet",
            Kubelet::Real => "real kubelet",
        })
    }
}

/// What a cluster offers, for deciding which scenarios can run on it.
#[derive(Debug, Clone)]
pub struct Environment {
    pub kubelet: Kubelet,
    pub ready_nodes: usize,
    /// Feature gates known to be on (local cluster); `None` when unknown (real cluster).
    pub enabled_gates: Option<Vec<String>>,
    /// Oldest kubelet (major, minor) among the nodes.
    pub kubelet_version: Option<(u32, u32)>,
    /// Gates the selected scenarios are tagged with that this cluster's
    /// Kubernetes will not run with (a local control plane built at an
    /// older `--kube-version`), and why; their scenarios are skipped saying so.
    pub refused_gates: Vec<(String, String)>,
    /// APIs named by the selected scenarios' `@API:` tags that this cluster
    /// does not serve (the tag's text); set by the runner.
    pub unserved_apis: Vec<String>,
    /// The runner can operate the nodes' processes (reboot a node): the
    /// local cluster's real nodes only.
    pub node_operations: bool,
    /// The run's driver under test, for `@DriverCapability:` tags; set by
    /// the runner (`None`: the suite's own driver, which claims them all).
    pub driver: Option<std::sync::Arc<dra_e2e_profile::Profile>>,
    /// The runner can count, fail and stall the driver under test's calls:
    /// its own driver, or another behind the interposer (`@Interposed`).
    pub interposed: bool,
}

impl Environment {
    /// The nodes run containers in a real runtime.
    pub fn container_runtime(&self) -> bool {
        self.kubelet == Kubelet::Real
    }
}

/// How long a simulated node may take to stop at the end of a run.
const SIM_NODE_STOP: Duration = Duration::from_secs(20);

/// DRA feature gates on by default in Kubernetes 1.37 (beta or GA).
pub const DEFAULT_ON_GATES: &[&str] = &[
    "DynamicResourceAllocation",
    "DRAAdminAccess",
    "DRAPrioritizedList",
    "DRAResourceClaimDeviceStatus",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAPartitionableDevices",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRASchedulerFilterTimeout",
    "ResourceHealthStatus",
    "ResourceHealthStatusMessage",
];

/// Gates that are on: the defaults unless switched off, plus those switched on.
fn enabled_gates(gates: &local::FeatureGates) -> Vec<String> {
    let mut on: Vec<String> = DEFAULT_ON_GATES
        .iter()
        .filter(|g| gates.get(g) != Some(false))
        .map(|g| (*g).to_owned())
        .collect();
    for (g, enabled) in gates.iter() {
        if enabled && !on.iter().any(|o| o == g) {
            on.push(g.to_owned());
        }
    }
    on
}

pub(crate) struct LocalEnv {
    cluster: Mutex<Option<local::LocalCluster>>,
    /// Read by steps; taken at shutdown so the nodes stop before the control plane.
    nodes: std::sync::RwLock<Vec<SimNode>>,
    /// Real nodes, reached through proxy pods exactly as on a real cluster.
    real: Option<RealLocal>,
    node_names: Vec<String>,
    wipe_delay: Duration,
}

/// The local cluster's real nodes and the real-cluster path that drives them.
struct RealLocal {
    nodes: Mutex<Option<crate::real_node::RealNodes>>,
    kubelet_logs: Vec<(String, PathBuf)>,
    remote: remote::RemoteEnv,
}

impl RealLocal {
    /// `f` on real node `node`, under the nodes' lock.
    fn on<T>(
        &self,
        node: &str,
        f: impl FnOnce(&crate::real_node::RealNode) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let nodes = self
            .nodes
            .lock()
            .map_err(|_| anyhow::anyhow!("the real nodes' lock is poisoned"))?;
        let n = nodes
            .as_ref()
            .and_then(|ns| ns.nodes().iter().find(|n| n.name == node))
            .ok_or_else(|| anyhow::anyhow!("no real node {node} in this cluster"))?;
        f(n)
    }
}

enum Kind {
    Local(Box<LocalEnv>),
    Remote(Box<remote::RemoteEnv>),
}

/// The cluster scenarios run against.
pub struct Cluster {
    client: kube::Client,
    config: kube::Config,
    kind: Kind,
}

impl Cluster {
    /// Picks and reaches the cluster; for the local one, starts it.
    pub async fn connect(opts: &ConnectOptions) -> anyhow::Result<Cluster> {
        if opts.is_local() {
            Self::start_local(opts).await
        } else {
            let env = remote::RemoteEnv::connect(opts).await?;
            Ok(Cluster {
                client: env.client.clone(),
                config: env.config.clone(),
                kind: Kind::Remote(Box::new(env)),
            })
        }
    }

    async fn start_local(opts: &ConnectOptions) -> anyhow::Result<Cluster> {
        let gates: local::FeatureGates = if opts.feature_gates.is_empty() {
            local::FeatureGates::new()
        } else {
            opts.feature_gates
                .join(",")
                .parse()
                .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?
        };
        let options = local::LocalClusterOptions {
            binaries_dir: opts.binaries_dir.clone(),
            feature_gates: gates,
            keep_files: opts.keep_files,
            ..Default::default()
        };
        // Missing binaries are reported (with how to build them) before the
        // cluster starts; any other failure says what failed, once.
        let cluster = local::LocalCluster::start(options)
            .await
            .map_err(|e| anyhow::Error::new(e).context("starting the local cluster"))?;
        let client = cluster.client();
        let config = cluster.kube_config();
        if opts.node_kind == NodeKind::Real {
            return Self::start_real_nodes(opts, cluster, client, config).await;
        }
        let nodes = match cluster
            .start_nodes(opts.nodes, |c| {
                c.wipe_delay = opts.wipe_delay;
                c.delete_node_on_stop = true;
            })
            .await
        {
            Ok(nodes) => nodes.into_nodes(),
            Err(e) => {
                let _ = cluster.stop().await;
                return Err(anyhow::Error::new(e).context("starting the simulated nodes"));
            }
        };
        Ok(Cluster {
            client,
            config,
            kind: Kind::Local(Box::new(LocalEnv {
                cluster: Mutex::new(Some(cluster)),
                node_names: nodes.iter().map(|n| n.name().to_owned()).collect(),
                nodes: std::sync::RwLock::new(nodes),
                real: None,
                wipe_delay: opts.wipe_delay,
            })),
        })
    }

    async fn start_real_nodes(
        opts: &ConnectOptions,
        cluster: local::LocalCluster,
        client: kube::Client,
        config: kube::Config,
    ) -> anyhow::Result<Cluster> {
        let options = crate::real_node::RealNodesOptions {
            extra_archives: opts.image_archives.clone(),
            binaries_dir: opts.node_binaries_dir.clone(),
            ..crate::real_node::RealNodesOptions::new(opts.nodes)
        };
        let nodes = match crate::real_node::RealNodes::start(&cluster, &options).await {
            Ok(nodes) => nodes,
            Err(e) => {
                let _ = cluster.stop().await;
                return Err(e.context("starting the real nodes"));
            }
        };
        let node_names = nodes.names();
        let kubelet_logs = nodes
            .nodes()
            .iter()
            .map(|n| (n.name.clone(), n.kubelet_log()))
            .collect();
        let proxy_image =
            if opts.proxy_image == crate::proxy::pods::DEFAULT_IMAGE && !opts.proxy_image_given {
                // Not asked for: upstream's image cannot be built or pulled
                // here (the archives the nodes import are a driver's); the
                // runner's own image carries the same agent protocol, and
                // the interposer's `proxy-agent --connect`. Asked for, the
                // name is kept: the nodes' own image answers to it, or an
                // imported archive of upstream's.
                crate::real_node::proxy_image()
            } else {
                opts.proxy_image.clone()
            };
        let layout = crate::proxy::NodeLayout {
            kubelet_root: crate::real_node::kubelet::ROOT_DIR.to_owned(),
            image: remote::proxy_image(&proxy_image),
            cdi_host_dir: crate::real_node::CDI_DIR.to_owned(),
            // The nodes' addresses are on links of this machine's.
            route: crate::proxy::HostRoute::PodAddress,
            fault: opts.node_host_fault,
        };
        remote::check_fault(&layout)?;
        let remote = remote::RemoteEnv::new(
            client.clone(),
            config.clone(),
            cluster.server_url().to_owned(),
            layout,
        );
        Ok(Cluster {
            client,
            config,
            kind: Kind::Local(Box::new(LocalEnv {
                cluster: Mutex::new(Some(cluster)),
                nodes: std::sync::RwLock::new(Vec::new()),
                real: Some(RealLocal {
                    nodes: Mutex::new(Some(nodes)),
                    kubelet_logs,
                    remote,
                }),
                node_names,
                wipe_delay: Duration::from_secs(30),
            })),
        })
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn kube_config(&self) -> kube::Config {
        self.config.clone()
    }

    pub fn is_local(&self) -> bool {
        matches!(self.kind, Kind::Local(_))
    }

    /// The kubelet's root directory on the nodes, for a driver the runner
    /// deploys there: `--kubelet-root-dir` on a kubeconfig cluster,
    /// [`crate::real_node::kubelet::ROOT_DIR`] on the local cluster's real
    /// nodes. Simulated nodes each have a directory of their own
    /// ([`Cluster::simulated_node_dirs`]); for them this is `ROOT_DIR` too,
    /// which none of them uses.
    pub fn kubelet_root(&self) -> PathBuf {
        match &self.kind {
            Kind::Remote(r) => r.kubelet_root.clone(),
            Kind::Local(l) => l.real.as_ref().map_or_else(
                || PathBuf::from(crate::real_node::kubelet::ROOT_DIR),
                |r| r.remote.kubelet_root.clone(),
            ),
        }
    }

    /// The drivers whose plugins the simulated kubelet of `node` has
    /// registered and connected; `None` when `node` is no simulated node.
    pub fn simulated_plugins(&self, node: &str) -> Option<Vec<String>> {
        let Kind::Local(l) = &self.kind else {
            return None;
        };
        let nodes = l.nodes.read().ok()?;
        let n = nodes.iter().find(|n| n.name() == node)?;
        Some(
            n.plugins()
                .into_iter()
                .filter(|p| p.connected)
                .map(|p| p.driver)
                .collect(),
        )
    }

    /// Reboots real node `node` of the local cluster (see
    /// [`crate::real_node::RealNode::reboot`]); returns once asked.
    pub fn reboot_node(&self, node: &str) -> anyhow::Result<()> {
        let real = match &self.kind {
            Kind::Local(l) => l.real.as_ref(),
            Kind::Remote(_) => None,
        };
        let Some(real) = real else {
            anyhow::bail!(
                "cannot reboot node {node}: the runner reboots only the local cluster's real \
                 nodes (--node-kind real)"
            );
        };
        real.on(node, |n| Ok(n.reboot()?))
    }

    /// Cuts node `node` of the local cluster off the control plane (`cut`)
    /// or connects it again: a simulated node's link to the API server
    /// ([`dra_e2e_node_sim::link`]), a real node's packets to and from its
    /// relay of the API server. Other clusters' nodes are not the runner's
    /// to cut off.
    pub fn set_node_cut(&self, node: &str, cut: bool) -> anyhow::Result<()> {
        let verb = if cut { "cut off" } else { "reconnect" };
        let Kind::Local(l) = &self.kind else {
            anyhow::bail!(
                "cannot {verb} node {node}: the runner cuts off only the local cluster's nodes \
                 from its control plane (--cluster local)"
            );
        };
        if let Some(real) = &l.real {
            return real.on(node, |n| {
                n.set_cut(cut)
                    .with_context(|| format!("cannot {verb} real node {node}"))
            });
        }
        let nodes = l
            .nodes
            .read()
            .map_err(|_| anyhow::anyhow!("the simulated nodes' lock is poisoned"))?;
        let n = nodes
            .iter()
            .find(|n| n.name() == node)
            .ok_or_else(|| anyhow::anyhow!("no simulated node {node} in this cluster"))?;
        n.link().set_cut(cut);
        Ok(())
    }

    /// Stops, starts or restarts daemon `daemon` of real node `node` of the
    /// local cluster (see [`crate::real_node::RealNode::daemon`]).
    pub fn node_daemon(
        &self,
        node: &str,
        op: crate::real_node::init::DaemonOp,
        daemon: &str,
    ) -> anyhow::Result<Option<u32>> {
        let real = match &self.kind {
            Kind::Local(l) => l.real.as_ref(),
            Kind::Remote(_) => None,
        };
        let Some(real) = real else {
            anyhow::bail!(
                "cannot {op:?} the {daemon} of node {node}: the runner controls the daemons only \
                 of the local cluster's real nodes (--node-kind real)"
            );
        };
        real.on(node, |n| Ok(n.daemon(op, daemon)?))
    }

    /// The local cluster's simulated nodes as a driver started on the host
    /// for each needs them, with the cluster's directory (for the driver's
    /// logs) and admin kubeconfig; `None` on other clusters.
    pub fn simulated_node_dirs(&self) -> Option<SimulatedNodeDirs> {
        let Kind::Local(l) = &self.kind else {
            return None;
        };
        if l.real.is_some() {
            return None;
        }
        let cluster = l.cluster.lock().ok()?;
        let cluster = cluster.as_ref()?;
        let nodes = l.nodes.read().ok()?;
        Some(SimulatedNodeDirs {
            dir: cluster.dir().to_owned(),
            kubeconfig: cluster.kubeconfig_path().to_owned(),
            nodes: nodes
                .iter()
                .map(|n| (n.name().to_owned(), n.root_dir().to_owned(), n.cdi_dir()))
                .collect(),
        })
    }

    /// One line saying what the run uses.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Local(l) => {
                let kubeconfig = l
                    .cluster
                    .lock()
                    .ok()
                    .and_then(|c| {
                        c.as_ref()
                            .map(|c| c.kubeconfig_path().display().to_string())
                    })
                    .unwrap_or_default();
                let kind = if l.real.is_some() {
                    "real"
                } else {
                    "simulated"
                };
                format!(
                    "local cluster with {} {kind} nodes (kubeconfig {kubeconfig})",
                    l.node_names.len()
                )
            }
            Kind::Remote(r) => format!(
                "cluster at {} (kubelet root {})",
                r.server,
                r.kubelet_root.display()
            ),
        }
    }

    /// The kubelet's slice wiping delay.
    pub fn wiping_delay(&self) -> Duration {
        match &self.kind {
            Kind::Local(l) => l.wipe_delay,
            Kind::Remote(_) => Duration::from_secs(30),
        }
    }

    /// What the parser needs to decide which scenarios can run here.
    pub async fn environment(&self) -> anyhow::Result<Environment> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .context("listing nodes")?
            .items;
        let ready: Vec<&Node> = list
            .iter()
            .filter(|n| node_is_ready_and_schedulable(n))
            .collect();
        let kubelet_version = ready
            .iter()
            .filter_map(|n| dra_e2e_kube::node_ready::kubelet_version(n))
            .min();
        let enabled_gates = match &self.kind {
            Kind::Local(l) => Some(
                l.cluster
                    .lock()
                    .ok()
                    .and_then(|c| c.as_ref().map(|c| enabled_gates(c.feature_gates())))
                    .unwrap_or_default(),
            ),
            Kind::Remote(_) => None,
        };
        let kubelet = match &self.kind {
            Kind::Local(l) if l.real.is_none() => Kubelet::Simulated,
            _ => Kubelet::Real,
        };
        let node_operations = matches!(&self.kind, Kind::Local(l) if l.real.is_some());
        Ok(Environment {
            node_operations,
            kubelet,
            ready_nodes: ready.len(),
            enabled_gates,
            kubelet_version,
            refused_gates: Vec::new(),
            unserved_apis: Vec::new(),
            driver: None,
            interposed: true,
        })
    }
}

#[async_trait::async_trait]
impl HostProvider for Cluster {
    /// Where a driver's plugin sockets and CDI files live on `nodes`.
    async fn node_host(&self, hosted: HostedDriver<'_>) -> anyhow::Result<Arc<dyn NodeHost>> {
        match &self.kind {
            Kind::Local(l) if l.real.is_some() => {
                let r = l.real.as_ref().map(|r| &r.remote);
                let r = r.ok_or_else(|| anyhow::anyhow!("real nodes gone"))?;
                Ok(Arc::new(r.host(hosted).await?))
            }
            Kind::Local(l) => Ok(Arc::new(local_host::LocalHost::new(
                l.nodes
                    .read()
                    .map_err(|_| anyhow::anyhow!("simulated nodes lock poisoned"))?
                    .iter()
                    .filter(|n| hosted.nodes.contains(&n.name().to_owned()))
                    .map(|n| (n.name().to_owned(), n.root_dir().to_owned(), n.cdi_dir()))
                    .collect(),
            ))),
            Kind::Remote(r) => Ok(Arc::new(r.host(hosted).await?)),
        }
    }
}

impl Cluster {
    /// The environment of a running container, as `env` inside it prints it.
    pub async fn container_env(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> anyhow::Result<Vec<String>> {
        match &self.kind {
            Kind::Local(l) if l.real.is_some() => {
                remote::exec_env(&self.client, namespace, pod, container).await
            }
            Kind::Local(l) => {
                let nodes = l
                    .nodes
                    .read()
                    .map_err(|_| anyhow::anyhow!("simulated nodes lock poisoned"))?;
                for n in nodes.iter() {
                    if let Some(env) = n.container_env(namespace, pod, container) {
                        return Ok(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect());
                    }
                }
                anyhow::bail!(
                    "no simulated node runs container {container} of pod {namespace}/{pod}"
                )
            }
            Kind::Remote(_) => remote::exec_env(&self.client, namespace, pod, container).await,
        }
    }

    /// Ends a running container's process as a crash would, so that its
    /// pod's restart policy decides what follows: `kill -TERM 1` by exec in
    /// it (the pod builder's default command exits at once on SIGTERM;
    /// `sh`, which runs it, is in every image the suite uses). The kubelet
    /// then creates the container again from the pod's prepared claims,
    /// without asking the driver. A simulated node has no exec: its kubelet
    /// ends the container itself, with the same status 0, and creates it
    /// again from the CDI specs as they are then.
    pub async fn end_container_process(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> anyhow::Result<()> {
        let target = format!("container {container} of pod {namespace}/{pod}");
        match &self.kind {
            Kind::Local(l) if l.real.is_none() => {
                // Asked under the lock, answered outside it.
                let answer = {
                    let nodes = l
                        .nodes
                        .read()
                        .map_err(|_| anyhow::anyhow!("simulated nodes lock poisoned"))?;
                    nodes
                        .iter()
                        .find_map(|n| n.end_container(namespace, pod, container))
                };
                let answer = answer.with_context(|| format!("no simulated node runs {target}"))?;
                answer
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "the simulated kubelet stopped tending pod {namespace}/{pod}"
                        )
                    })?
                    .map_err(|e| anyhow::anyhow!("cannot end the process of {target}: {e}"))
            }
            Kind::Local(_) | Kind::Remote(_) => {
                let kill = ["sh", "-c", "kill -TERM 1"].map(str::to_owned);
                if let Some(failure) =
                    remote::exec_status(&self.client, namespace, pod, container, &kill).await?
                {
                    anyhow::bail!("`kill -TERM 1` in {target} failed: {failure}");
                }
                Ok(())
            }
        }
    }

    /// The kubelet's log of a node (local cluster only: the simulated
    /// kubelet's journal, or a real kubelet's log file).
    pub fn node_log(&self, node: &str) -> Option<String> {
        match &self.kind {
            Kind::Local(l) if l.real.is_some() => {
                let real = l.real.as_ref()?;
                let (_, path) = real.kubelet_logs.iter().find(|(n, _)| n == node)?;
                std::fs::read_to_string(path).ok()
            }
            Kind::Local(l) => l
                .nodes
                .read()
                .ok()?
                .iter()
                .find(|n| n.name() == node)
                .map(|n| {
                    n.events()
                        .iter()
                        .map(|e| format!("{e}\n"))
                        .collect::<String>()
                }),
            Kind::Remote(_) => None,
        }
    }

    /// Removes the run's node host pods (real nodes and real clusters) and
    /// waits until their namespace is gone. Call once every driver stopped.
    pub async fn remove_node_hosts(&self) -> anyhow::Result<()> {
        let remote = match &self.kind {
            Kind::Local(l) => l.real.as_ref().map(|r| &r.remote),
            Kind::Remote(r) => Some(&**r),
        };
        if let Some(r) = remote {
            r.node_pods
                .remove()
                .await
                .context("removing the node host pods")?;
        }
        Ok(())
    }

    /// Waits (briefly) until the run's namespaces are gone.
    pub async fn wait_namespaces_gone(
        &self,
        run_id: &str,
    ) -> Result<(), dra_e2e_kube::wait::WaitError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let label = format!("{}={run_id}", RUN_LABEL);
        let config = kube::runtime::watcher::Config::default().labels(&label);
        dra_e2e_kube::wait::list(
            &api,
            config,
            "the run's namespaces to be deleted",
            Duration::from_secs(120),
            dra_e2e_kube::wait::none_left(|n: &Namespace| {
                n.metadata.name.clone().unwrap_or_default()
            }),
        )
        .await
    }

    /// Objects of the run's scenarios that are still there: namespaces,
    /// device classes, slices, cluster roles and bindings, admission policies.
    /// Names of everything a scenario creates start with its namespace.
    pub async fn leftovers(&self, namespaces: &[String]) -> anyhow::Result<Vec<String>> {
        use k8s_openapi::api::admissionregistration::v1::{
            ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
        };
        use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
        use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
        if namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let lp = ListParams::default();
        let c = self.client.clone();
        let ours = |name: &str| {
            namespaces.iter().any(|ns| {
                name == ns
                    || name.starts_with(&format!("{ns}-"))
                    || name.starts_with(&format!("{ns}."))
                    || name.contains(&format!("dra-kubelet-plugin-{ns}"))
            })
        };
        let mut found = Vec::new();
        macro_rules! check {
            ($kind:ty, $label:expr, $name:expr) => {
                for o in Api::<$kind>::all(c.clone())
                    .list(&lp)
                    .await
                    .with_context(|| format!("listing {}", $label))?
                    .items
                {
                    let n: Option<String> = $name(&o);
                    if let Some(n) = n.filter(|n| ours(n)) {
                        found.push(format!("{} {n}", $label));
                    }
                }
            };
        }
        check!(Namespace, "Namespace", |o: &Namespace| o
            .metadata
            .name
            .clone());
        // The node host pods' namespace is the run's, whatever its name.
        let hosts = ListParams::default().labels(crate::proxy::node_pods::NODE_HOSTS_LABEL);
        for ns in Api::<Namespace>::all(c.clone())
            .list(&hosts)
            .await
            .context("listing the node host pods' namespaces")?
            .items
        {
            found.push(format!(
                "Namespace {} (node host pods)",
                ns.metadata.name.unwrap_or_default()
            ));
        }
        // An owned node's taint names its owner's namespace.
        for node in Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
            .list(&lp)
            .await
            .context("listing nodes")?
            .items
        {
            if dra_e2e_kube::node_ready::owner(&node).is_some_and(&ours) {
                found.push(format!(
                    "taint {} on Node {}",
                    dra_e2e_kube::node_ready::OWN_NODE_TAINT,
                    node.metadata.name.unwrap_or_default()
                ));
            }
        }
        check!(DeviceClass, "DeviceClass", |o: &DeviceClass| o
            .metadata
            .name
            .clone());
        check!(
            ResourceSlice,
            "ResourceSlice of driver",
            |o: &ResourceSlice| Some(o.spec.driver.clone())
        );
        check!(ClusterRole, "ClusterRole", |o: &ClusterRole| o
            .metadata
            .name
            .clone());
        check!(
            ClusterRoleBinding,
            "ClusterRoleBinding",
            |o: &ClusterRoleBinding| o.metadata.name.clone()
        );
        check!(
            ValidatingAdmissionPolicy,
            "ValidatingAdmissionPolicy",
            |o: &ValidatingAdmissionPolicy| o.metadata.name.clone()
        );
        check!(
            ValidatingAdmissionPolicyBinding,
            "ValidatingAdmissionPolicyBinding",
            |o: &ValidatingAdmissionPolicyBinding| o.metadata.name.clone()
        );
        Ok(found)
    }

    /// Resolves, with what happened, when a process the run cannot do without
    /// exits: a control-plane component or a real node (the local cluster
    /// only; a real cluster's health is its own). Pending forever otherwise.
    pub fn first_death(&self) -> impl std::future::Future<Output = String> + use<> {
        let mut vitals = Vec::new();
        if let Kind::Local(l) = &self.kind {
            if let Ok(c) = l.cluster.lock()
                && let Some(c) = c.as_ref()
            {
                vitals.extend(c.vitals());
            }
            if let Some(real) = &l.real
                && let Ok(n) = real.nodes.lock()
                && let Some(n) = n.as_ref()
            {
                vitals.extend(n.nodes().iter().filter_map(|n| n.vital()));
            }
        }
        crate::host::vital::Vital::first_exit(vitals)
    }

    /// Second Ctrl-C: kill the local cluster's processes without waiting.
    /// Returns what the user should know: what real nodes left behind, and
    /// where kept files are.
    pub fn kill_now(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Kind::Local(l) = &self.kind {
            // The components running now (a restarted one has a new PID),
            // each signalled only while it is not reaped, so never a
            // stranger who got its PID. Real nodes are not among them:
            // killing their `unshare` parent would orphan process 1.
            if let Ok(c) = l.cluster.lock()
                && let Some(c) = c.as_ref()
            {
                c.kill_components();
            }
            // Process 1 of each real node is killed, its namespace with it;
            // then its links and cgroups are removed.
            if let Some(real) = &l.real
                && let Ok(mut n) = real.nodes.lock()
                && let Some(mut nodes) = n.take()
            {
                notes.extend(
                    nodes
                        .kill()
                        .into_iter()
                        .map(|left| format!("left behind by a real node: {left}")),
                );
            }
            if let Ok(mut c) = l.cluster.lock()
                && let Some(c) = c.take()
            {
                notes.extend(kept_files(&c));
                // Dropping removes the temp dir.
                drop(c);
            }
        }
        notes
    }

    /// Stops the nodes, then the local cluster's processes.
    pub async fn shutdown(&self) -> Shutdown {
        let mut done = Shutdown::default();
        if let Kind::Local(l) = &self.kind {
            if let Some(real) = &l.real {
                let nodes = real.nodes.lock().ok().and_then(|mut n| n.take());
                if let Some(mut nodes) = nodes {
                    done.left = tokio::task::spawn_blocking(move || nodes.stop())
                        .await
                        .unwrap_or_else(|e| vec![format!("stopping the real nodes: {e}")]);
                }
            }
            let nodes = l
                .nodes
                .write()
                .map(|mut n| std::mem::take(&mut *n))
                .unwrap_or_default();
            // Bounded: a node deletes its Node object on the way out, which
            // never answers when the control plane has died.
            for n in nodes {
                let name = n.name().to_owned();
                match tokio::time::timeout(SIM_NODE_STOP, n.stop()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => done
                        .notes
                        .push(format!("stopping simulated node {name}: {e}")),
                    Err(_) => done.notes.push(format!(
                        "simulated node {name} did not stop within {SIM_NODE_STOP:?}; leaving it to the cluster's end"
                    )),
                }
            }
            let cluster = l.cluster.lock().ok().and_then(|mut c| c.take());
            if let Some(c) = cluster {
                let kept = kept_files(&c);
                if let Err(e) = c.stop().await {
                    done.notes.push(format!("stopping the local cluster: {e}"));
                }
                done.notes.extend(kept);
            }
        }
        done
    }
}

/// What stopping the cluster found.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// What real nodes left on the host (processes, mounts, cgroups, links,
    /// `ip_forward`), which should be nothing.
    pub left: Vec<String>,
    /// What the user should know besides: stops that failed, kept files.
    pub notes: Vec<String>,
}

/// Where the local cluster's files stay, when they are kept.
fn kept_files(c: &local::LocalCluster) -> Option<String> {
    c.keeps_files()
        .then(|| format!("local cluster files kept in {}", c.dir().display()))
}
