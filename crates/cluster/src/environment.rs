//! What a cluster offers, for the runner's choice of scenarios: which
//! kubelet runs the nodes, how many are ready, which gates are on; kept
//! apart from reaching the cluster because the runner asks it once, before
//! any scenario runs.
use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use crate::{Cluster, Kind, local, node_is_ready_and_schedulable};

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

impl Cluster {
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
