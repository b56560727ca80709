//! The run's driver under test behind the interposer: one
//! [`NodeInterposer`] per ready node, sharing one [`Calls`], so that the
//! steps that count, fail and stall the suite's own driver's calls address a
//! real driver the same way.
//!
//! The driver is pointed at a private registration directory inside its own
//! plugin directory (`<kubelet root>/plugins/<driver>/dra-e2e`):
//! the kubelet watches only `plugins_registry`, so it never sees the driver's
//! own registration socket, and a driver whose pods mount their plugin
//! directory sees the private one without further mounts (the runner adds a
//! mount when they do not), or whose `plugins_registry` volume the runner
//! points there. For every instance of the driver it finds there (a
//! rolling update runs two), the interposer registers with the kubelet in
//! `plugins_registry` under the instance's socket name, and serves a DRA
//! socket `plugins/<driver>/dra-e2e-interposer-<n>.sock` in front of it.
//!
//! On real nodes the driver's sockets are reached through the run's node
//! host pods.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dra_e2e_cluster::Cluster;
use dra_e2e_conn::node_files::NodeFiles;
use dra_e2e_conn::node_host::{HostProvider as _, HostedDriver, NodeHost};
use dra_e2e_plugin::fault::Faults;
use dra_e2e_plugin::interposer::{
    Disagreements, InjectedHealth, InstanceView, InterposerConfig, InterposerFault, NodeInterposer,
};
use dra_e2e_plugin::{Calls, Prepared};

/// The private registration directory's name, inside the driver's plugin
/// directory.
pub const PRIVATE_REGISTRY: &str = "dra-e2e";
/// How long the driver may take to create its registration socket.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the kubelet may take to register the interposer.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the driver registers instead of the kubelet's directory.
pub fn private_registry(kubelet_root: &Path, driver: &str) -> PathBuf {
    kubelet_root
        .join("plugins")
        .join(driver)
        .join(PRIVATE_REGISTRY)
}

/// What the interposer on one node keeps for the scenarios.
#[derive(Debug, Clone, Default)]
struct NodeState {
    prepared: Prepared,
    health: InjectedHealth,
    disagreements: Disagreements,
}

/// The driver under test's calls, through the interposers on its nodes.
pub struct Interposed {
    pub calls: Calls,
    /// The faults the profile plants in the driver's answers: lifted when
    /// a scenario tears down, planted again when the next one starts.
    pub faults: Faults,
    /// How the runner reaches the driver's nodes (their CDI directories).
    host: Arc<dyn NodeHost>,
    nodes: BTreeMap<String, NodeState>,
    running: tokio::sync::Mutex<Vec<NodeInterposer>>,
}

impl std::fmt::Debug for Interposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interposed")
            .field("nodes", &self.nodes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Interposed {
    /// Starts an interposer on every one of `nodes`, each following the
    /// driver's private registration directory there, and waits until the
    /// kubelet registered an instance on each. Whatever started is stopped
    /// again on failure.
    pub async fn start(
        cluster: &Cluster,
        driver: &str,
        nodes: &[String],
        fault: InterposerFault,
        faults: Faults,
    ) -> Result<Self, String> {
        if fault != InterposerFault::None {
            tracing::warn!(
                "--interposer-fault {fault:?}: the interposer in front of driver {driver} is \
                 broken on purpose"
            );
        }
        let host = cluster
            .node_host(HostedDriver { driver, nodes })
            .await
            .map_err(|e| format!("reaching the nodes: {e:#}"))?;
        let mut me = Interposed {
            calls: Calls::new(driver),
            faults: faults.clone(),
            host: host.clone(),
            nodes: BTreeMap::new(),
            running: Default::default(),
        };
        let started = futures::future::join_all(nodes.iter().map(|node| {
            let root = host.kubelet_root(node);
            let node_state = NodeState::default();
            let config = InterposerConfig {
                driver: driver.to_owned(),
                node: node.clone(),
                private_dir: private_registry(&root, driver),
                registry_dir: root.join("plugins_registry"),
                endpoint_dir: root.join("plugins").join(driver),
                calls: me.calls.clone(),
                prepared: node_state.prepared.clone(),
                health: node_state.health.clone(),
                driver_timeout: DRIVER_TIMEOUT,
                fault,
                faults: faults.clone(),
                disagreements: node_state.disagreements.clone(),
            };
            let host = host.clone();
            async move {
                let r = NodeInterposer::start(host, config).await;
                (node.clone(), node_state, r)
            }
        }))
        .await;
        let mut problems = Vec::new();
        for (node, state, result) in started {
            match result {
                Ok(i) => {
                    me.nodes.insert(node, state);
                    me.running.get_mut().push(i);
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
        if problems.is_empty() {
            for i in me.running.get_mut().iter() {
                if let Err(e) = i.wait_registered(REGISTER_TIMEOUT).await {
                    problems.push(e.to_string());
                }
            }
        }
        if !problems.is_empty() {
            me.stop().await;
            return Err(problems.join("; "));
        }
        Ok(me)
    }

    /// The claims the driver prepared on `node`, as the interposer saw its
    /// answers.
    /// Where the driver on `node` answered a call asked again otherwise
    /// than the first time.
    pub fn disagreements(&self, node: &str) -> Option<&Disagreements> {
        self.nodes.get(node).map(|n| &n.disagreements)
    }

    /// The CDI spec directory of `node`.
    pub fn cdi_files(&self, node: &str) -> Arc<dyn NodeFiles> {
        self.host.cdi_files(node)
    }

    pub fn prepared(&self, node: &str) -> Option<&Prepared> {
        self.nodes.get(node).map(|n| &n.prepared)
    }

    /// The device health a scenario reports on the driver's behalf on
    /// `node`, laid over the driver's own health stream.
    pub fn health(&self, node: &str) -> Option<&InjectedHealth> {
        self.nodes.get(node).map(|n| &n.health)
    }

    /// The driver's instances each node's interposer fronts now, by node.
    pub async fn instances(&self) -> BTreeMap<String, Vec<InstanceView>> {
        self.running
            .lock()
            .await
            .iter()
            .map(|i| (i.node().to_owned(), i.instances()))
            .collect()
    }

    /// Waits until, on every node, none of the instances of `before` is
    /// left and a new one is registered with the kubelet: an update of the
    /// driver is over for the kubelet only then, some time after its new
    /// pods run (a pod is ready before its driver registers).
    pub async fn wait_replaced(
        &self,
        before: &BTreeMap<String, Vec<InstanceView>>,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let now = self.instances().await;
            let pending: Vec<String> = now
                .iter()
                .filter_map(|(node, instances)| {
                    let old: Vec<&str> = before
                        .get(node)
                        .into_iter()
                        .flatten()
                        .map(|v| v.identity.as_str())
                        .collect();
                    let left: Vec<&str> = instances
                        .iter()
                        .filter(|v| old.contains(&v.identity.as_str()))
                        .map(|v| v.socket.as_str())
                        .collect();
                    let new: Vec<String> = instances
                        .iter()
                        .filter(|v| !old.contains(&v.identity.as_str()))
                        .map(|v| format!("{} ({})", v.socket, v.status))
                        .collect();
                    let registered = instances.iter().any(|v| {
                        !old.contains(&v.identity.as_str())
                            && v.status == dra_e2e_plugin::RegistrationStatus::Registered
                    });
                    (!left.is_empty() || !registered)
                        .then(|| format!("{node}: old {left:?}, new {new:?}"))
                })
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "timed out after {timeout:?} waiting for the driver's new instances to \
                     register with the kubelet in place of the old; last seen: {}",
                    pending.join("; ")
                ));
            }
            // No watch reaches the interposers' findings; they look twice a
            // second themselves.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Forgets what a scenario injected: counts, faults, device health.
    pub fn reset(&self) {
        self.calls.reset();
        self.faults.plant_again();
        for n in self.nodes.values() {
            n.health.clear();
            n.disagreements.clear();
        }
    }

    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// Stops the interposers: their sockets go, and with them the kubelet's
    /// registration. Returns what of theirs is still in the kubelet's
    /// registration directories.
    pub async fn stop(&self) -> Vec<String> {
        self.calls.heal_all();
        self.faults.lift();
        for n in self.nodes.values() {
            n.health.clear();
        }
        let running = std::mem::take(&mut *self.running.lock().await);
        let mut left = Vec::new();
        for i in running {
            left.extend(i.stop().await);
        }
        left
    }
}
