//! How the runner asks for a cluster: which one, with which nodes, and what
//! the nodes need; the command line fills these in, and nothing else here
//! reads the command line.
use std::path::PathBuf;
use std::time::Duration;

use crate::remote;

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
