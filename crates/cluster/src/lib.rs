//! Reaching a cluster: the local cluster the runner starts (control plane plus
//! simulated kubelet nodes), or any cluster from a kubeconfig.
pub mod gates;
pub mod local;
pub mod local_host;
pub mod progress;
pub mod remote;

// What reaching a cluster takes on this machine and on its nodes.
mod control_plane;
pub mod host;
pub mod images;
pub mod job;
pub mod proxy;
pub mod real_node;

// The cluster's parts, each for one side of it.
mod cleanup;
mod environment;
mod node_ops;
mod options;
mod shutdown;
mod start;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_e2e_conn::node_host::{HostProvider, HostedDriver, NodeHost};
pub use dra_e2e_kube::node_ready::node_is_ready_and_schedulable;
use dra_e2e_node_sim::SimNode;

pub use environment::{DEFAULT_ON_GATES, Environment, Kubelet};
pub use options::{ClusterChoice, ConnectOptions, NodeKind};
pub use shutdown::Shutdown;

/// Label on every namespace of a run, so the run's leftovers can be found.
pub const RUN_LABEL: &str = "dra-e2e.k8s.io/run";

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
