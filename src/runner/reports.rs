//! What the run says about itself beyond cucumber's own output: the
//! properties the reports carry (cluster, versions, nodes, gates), the
//! closing line on what a pass proves of the kubelet, the conformance
//! checks this run could not make, and the sinks the scenarios' output and
//! the Cucumber JSON report are written through.
use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::cluster::Cluster;
use crate::report;

/// A report sink the runner can read back after the run.
#[derive(Clone, Default)]
pub(super) struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("report buffer poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    pub(super) fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default()
    }
}

/// Where the scenarios' output goes: stdout, or stdout under a live status
/// line on a terminal.
pub(super) enum ScenarioOut {
    Plain(std::io::Stdout),
    Status(report::progress::StatusOut),
}

impl Write for ScenarioOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ScenarioOut::Plain(o) => o.write(buf),
            ScenarioOut::Status(o) => o.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ScenarioOut::Plain(o) => o.flush(),
            ScenarioOut::Status(o) => o.flush(),
        }
    }
}

/// What the run's passes prove about the kubelet, said last beside the
/// counts: on simulated nodes they prove dra-e2e's simulator.
pub(super) fn kubelet_line(kubelet: crate::cluster::Kubelet) -> String {
    match kubelet {
        crate::cluster::Kubelet::Simulated => format!(
            "kubelet: {kubelet}: what passed shows the simulator does what the kubelet does; \
             real nodes (--node-kind real) or a real cluster show it of Kubernetes' kubelet"
        ),
        crate::cluster::Kubelet::Real => format!("kubelet: {kubelet}"),
    }
}

/// What the reports say about the run: the cluster, its version, its nodes
/// and gates.
pub(super) async fn run_properties(
    cluster: &Cluster,
    env: &crate::cluster::Environment,
) -> Vec<(String, String)> {
    let version = match cluster.client().apiserver_version().await {
        Ok(v) => v.git_version,
        Err(e) => format!("unknown ({e})"),
    };
    vec![
        (
            "dra-e2e.version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
        ("cluster".to_owned(), cluster.describe()),
        ("kubernetes.version".to_owned(), version),
        (
            "kubelet.version".to_owned(),
            env.kubelet_version
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_else(|| "unknown".to_owned()),
        ),
        ("kubelet".to_owned(), env.kubelet.to_string()),
        ("nodes.ready".to_owned(), env.ready_nodes.to_string()),
        (
            "nodes.container-runtime".to_owned(),
            env.container_runtime().to_string(),
        ),
        (
            "feature-gates".to_owned(),
            env.enabled_gates
                .as_ref()
                .map(|g| g.join(","))
                .unwrap_or_else(|| "unknown (not a local cluster)".to_owned()),
        ),
    ]
}

/// The pack's closer checks (`under_test::device_check`) that this run
/// cannot make for its driver, and why: the runner sees a driver's answers
/// and CDI specs only when it hosts the driver or stands in front of it, and
/// repeats calls only from in front of it.
pub(super) fn unchecked(under: &crate::harness::under_test::UnderTest) -> Vec<String> {
    if under.interposed.is_some() {
        return Vec::new();
    }
    if under.is_builtin() {
        return vec![
            "prepare and unprepare asked twice (idempotency): only the interposer repeats \
             calls, in front of a driver the runner does not host"
                .to_owned(),
        ];
    }
    let how = match under.profile.interposable() {
        Ok(()) => "run with --interpose".to_owned(),
        Err(why) => format!("the interposer cannot stand in front of it: {why}"),
    };
    vec![format!(
        "the driver's NodePrepareResources answers against the claims' allocations, prepare and \
         unprepare asked twice (idempotency), and its CDI specs on the nodes after prepare and \
         unprepare: the runner sees them only in front of the driver ({how})"
    )]
}
