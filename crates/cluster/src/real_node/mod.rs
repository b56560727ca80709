//! Real kubelet nodes on the local cluster: kubelet + containerd + runc, each
//! node in namespaces of its own (PID, mount, network), driven by the runner
//! through exactly the code it uses on kind.
//!
//! A node is a directory below the cluster's, a network namespace with a veth
//! link to the host, a cgroup root in every hierarchy, and process 1 of a PID
//! namespace (`dra-e2e node-init`) that runs containerd and the kubelet in a
//! private mount namespace. Stopping a node ends process 1, which ends every
//! process of the node; the runner then removes the network and cgroups and
//! checks that nothing is left.
pub mod binaries;
pub use crate::host::cgroups;
pub mod containerd;
pub mod forward;
pub mod in_cluster;
pub use dra_e2e_agent::node_init as init;
pub mod kubelet;
pub mod net;
pub mod node;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use node::{CDI_DIR, RealNode, RealNodeError};

use crate::host::pki::Pki;

/// Real nodes are named `<REAL_NODE_PREFIX>-<i>`.
pub const REAL_NODE_PREFIX: &str = "dra-e2e-real";

/// The image the proxy pods of real nodes run: busybox plus
/// `dra-e2e-agent proxy-agent` (see [`crate::images`]).
pub fn proxy_image() -> String {
    format!("dra-e2e.local/proxy-agent:{}", env!("CARGO_PKG_VERSION"))
}

/// How real nodes are started.
#[derive(Debug, Clone)]
pub struct RealNodesOptions {
    pub count: usize,
    /// Image archives to import into every node besides the built-in ones.
    pub extra_archives: Vec<PathBuf>,
    pub ready_timeout: Duration,
    /// The `dra-e2e-agent` program: process 1 of every node and the proxy
    /// image's agent. `None`: found (or built) by
    /// [`crate::host::agent::agent_program`].
    pub agent: Option<PathBuf>,
    /// The directory of the built node programs (`--kubelet-version` picks
    /// one); `None`: the pinned build, as [`binaries::locate`] finds it.
    pub binaries_dir: Option<PathBuf>,
}

impl RealNodesOptions {
    pub fn new(count: usize) -> Self {
        Self {
            count,
            extra_archives: Vec::new(),
            ready_timeout: Duration::from_secs(120),
            agent: None,
            binaries_dir: None,
        }
    }
}

/// The control plane's gates that the kubelet knows: an older kubelet
/// (`--kubelet-version`) refuses to start with a newer release's gate, and
/// runs without it, as it would on a cluster upgraded ahead of its nodes
/// (scenarios that need the kubelet's part of a gate say so with
/// `@KubeletMinVersion`).
fn kubelet_gates(
    kubelet: &Path,
    gates: Vec<(String, bool)>,
) -> anyhow::Result<Vec<(String, bool)>> {
    use anyhow::Context as _;
    let named: Vec<(&str, bool)> = gates.iter().map(|(g, on)| (g.as_str(), *on)).collect();
    let refused = crate::gates::refused_by(kubelet, crate::gates::GateProbe::Kubelet, &named)
        .with_context(|| format!("asking {} which feature gates it takes", kubelet.display()))?;
    for (gate, why) in &refused {
        tracing::info!(
            kubelet = %kubelet.display(),
            %gate,
            why = %why,
            "the kubelet runs without a feature gate of the control plane"
        );
    }
    Ok(gates
        .into_iter()
        .filter(|(g, _)| !refused.iter().any(|(r, _)| r == g))
        .collect())
}

/// What real nodes need of the control plane they join (the local
/// cluster's), so that they do not depend on how it runs.
pub trait ControlPlane {
    /// The cluster's directory; the nodes keep their files below it.
    fn dir(&self) -> &Path;
    /// The API server's URL.
    fn server_url(&self) -> &str;
    /// The certificates the kubelets' credentials are issued from.
    fn pki(&self) -> &Pki;
    /// The feature gates the kubelets get, as the control plane has them.
    fn gates(&self) -> Vec<(String, bool)>;
    /// A client with cluster-admin rights.
    fn client(&self) -> kube::Client;
    /// The run's record of what it makes on the host: every node's
    /// namespace, link and cgroup root goes in before it is made, so a run
    /// killed with SIGKILL leaves nothing a later run cannot find.
    fn record(&self) -> &crate::host::leftovers::RunRecord;
}

/// The real nodes of one cluster.
pub struct RealNodes {
    nodes: Vec<RealNode>,
    ip_forward_before: Option<String>,
}

impl RealNodes {
    /// Writes the images, then starts `count` nodes and waits until all are
    /// Ready. On error, the nodes started so far are stopped again.
    pub async fn start(
        cluster: &impl ControlPlane,
        options: &RealNodesOptions,
    ) -> anyhow::Result<RealNodes> {
        use anyhow::Context as _;
        if !dra_e2e_sys::is_root() {
            anyhow::bail!(
                "real nodes need root (they make namespaces, mounts, cgroups and links); \
                 run as root, or use --node-kind simulated"
            );
        }
        let binaries = binaries::NodeBinaries::find(options.binaries_dir.as_deref())?;
        let feature_gates = kubelet_gates(&binaries.kubelet, cluster.gates())?;
        let ip_forward_before = net::ip_forward();
        let image_dir = cluster.dir().join("images");
        std::fs::create_dir_all(&image_dir)
            .with_context(|| format!("creating {}", image_dir.display()))?;
        // A copy of the agent: a rebuild may replace the original while the
        // run goes on.
        let source = match &options.agent {
            Some(agent) => agent.clone(),
            None => crate::host::agent::agent_program()?,
        };
        let agent = cluster.dir().join(crate::host::agent::AGENT_PROGRAM);
        std::fs::copy(&source, &agent)
            .with_context(|| format!("copying the agent {} into the cluster", source.display()))?;
        let mut archives = builtin_archives(&image_dir, &binaries, &agent)?;
        for a in &options.extra_archives {
            if !a.is_file() {
                anyhow::bail!("--image-archive {}: no such file", a.display());
            }
            archives.push(a.clone());
        }
        let api_port = cluster
            .server_url()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .context("the API server URL has no port")?;
        let shared = node::NodeShared {
            kubelet: binaries.kubelet.clone(),
            containerd: binaries.containerd.clone(),
            shim_dir: binaries
                .shim
                .parent()
                .map(Path::to_owned)
                .unwrap_or_default(),
            ctr: binaries.ctr.clone(),
            agent,
            api_port,
            feature_gates,
            archives,
            sandbox_image: crate::images::PAUSE_IMAGE.to_owned(),
            ready_timeout: options.ready_timeout,
        };
        // Wide enough that two runs practically never share a name: a gone
        // run's record must not name a live run's namespace.
        let run_id = format!("{:08x}", rand::random::<u32>());
        let range = net::pick_range(rand::random())?;
        let mut nodes = RealNodes {
            nodes: Vec::new(),
            ip_forward_before,
        };
        for i in 0..options.count {
            let name = format!("{REAL_NODE_PREFIX}-{i}");
            let node = RealNode::start(
                name,
                net::NodeNet::plan(&run_id, i, range),
                format!("/dra-e2e-{run_id}-{i}"),
                // Unique per start: nodes may be started again on one cluster.
                cluster.dir().join("real").join(format!("{run_id}-{i}")),
                cluster.pki(),
                &shared,
                cluster.record(),
            )
            .await;
            match node {
                Ok(n) => nodes.nodes.push(n),
                Err(e) => {
                    nodes.stop();
                    return Err(e.into());
                }
            }
        }
        let client = cluster.client();
        let waits = nodes
            .nodes
            .iter()
            .map(|n| n.wait_ready(&client, options.ready_timeout));
        for r in futures::future::join_all(waits).await {
            if let Err(e) = r {
                nodes.stop();
                return Err(e.into());
            }
        }
        Ok(nodes)
    }

    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    pub fn nodes(&self) -> &[RealNode] {
        &self.nodes
    }

    /// Stops every node (in parallel) and returns what was left behind.
    pub fn stop(&mut self) -> Vec<String> {
        self.stop_within(Duration::from_secs(20))
    }

    /// Ends every node at once (a second Ctrl-C), still removing their
    /// links and cgroups.
    pub fn kill(&mut self) -> Vec<String> {
        self.stop_within(Duration::ZERO)
    }

    fn stop_within(&mut self, grace: Duration) -> Vec<String> {
        let nodes = std::mem::take(&mut self.nodes);
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|mut n| {
                std::thread::spawn(move || {
                    let mut left = n.stop(grace);
                    left.extend(n.leftovers());
                    left
                })
            })
            .collect();
        let mut left: Vec<String> = handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec!["a node's stop panicked".into()])
            })
            .collect();
        let after = net::ip_forward();
        if after != self.ip_forward_before {
            left.push(format!(
                "net.ipv4.ip_forward is {:?}, was {:?}",
                after, self.ip_forward_before
            ));
        }
        left
    }
}

impl Drop for RealNodes {
    fn drop(&mut self) {
        if !self.nodes.is_empty() {
            for l in self.stop() {
                tracing::error!("real nodes left behind: {l}");
            }
        }
    }
}

/// The pause, busybox and proxy image archives, written once per cluster.
fn builtin_archives(
    dir: &Path,
    binaries: &binaries::NodeBinaries,
    agent: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context as _;
    let busybox = &binaries.busybox;
    let specs = vec![
        ("pause.tar", crate::images::builtin::pause(busybox)),
        ("busybox.tar", crate::images::builtin::busybox(busybox)?),
        (
            "sample-device-plugin.tar",
            crate::images::builtin::sample_device_plugin(&binaries.sample_device_plugin),
        ),
        (
            "proxy.tar",
            crate::images::builtin::proxy(&proxy_image(), agent, busybox)?,
        ),
    ];
    let mut out = Vec::new();
    for (file, spec) in specs {
        let path = dir.join(file);
        crate::images::write_archive(&spec, &path)
            .with_context(|| format!("writing the image archive {}", path.display()))?;
        out.push(path);
    }
    Ok(out)
}
