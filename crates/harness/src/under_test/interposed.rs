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
//! mount when they do not). The interposer's sockets are the ones the
//! kubelet sees: `plugins_registry/<driver>-reg.sock` and
//! `plugins/<driver>/dra-e2e-interposer.sock`.
//!
//! On real nodes the driver's sockets are reached through the run's node
//! host pods.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_e2e_cluster::Cluster;
use dra_e2e_conn::node_host::{HostProvider as _, HostedDriver};
use dra_e2e_plugin::interposer::{InterposerConfig, NodeInterposer};
use dra_e2e_plugin::{Calls, Prepared};

/// The private registration directory's name, inside the driver's plugin
/// directory.
pub const PRIVATE_REGISTRY: &str = "dra-e2e";
/// The interposer's DRA socket's name, inside the driver's plugin directory.
pub const INTERPOSER_SOCKET: &str = "dra-e2e-interposer.sock";
/// How long the driver may take to create its registration socket.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the kubelet may take to register the interposer.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(60);
/// Breaks the interposer on purpose when set to `direct`: the kubelet is
/// sent to the driver's own socket (tests/interposer.rs shows scenarios
/// fail then).
pub const FAULT_ENV: &str = "DRA_E2E_INTERPOSER_FAULT";

/// Where the driver registers instead of the kubelet's directory.
pub fn private_registry(kubelet_root: &Path, driver: &str) -> PathBuf {
    kubelet_root
        .join("plugins")
        .join(driver)
        .join(PRIVATE_REGISTRY)
}

/// The driver under test's calls, through the interposers on its nodes.
pub struct Interposed {
    pub calls: Calls,
    nodes: BTreeMap<String, Prepared>,
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
    /// Starts an interposer on every one of `nodes` once the driver's
    /// registration socket there answers, and waits until the kubelet
    /// registered each. Whatever started is stopped again on failure.
    pub async fn start(cluster: &Cluster, driver: &str, nodes: &[String]) -> Result<Self, String> {
        let bypass = match std::env::var(FAULT_ENV) {
            Err(_) => false,
            Ok(v) if v == "direct" => {
                tracing::warn!("{FAULT_ENV}=direct: the kubelet reaches driver {driver} directly");
                true
            }
            Ok(v) => {
                return Err(format!(
                    "{FAULT_ENV}={v:?}: the only fault is `direct` (unset it for a working \
                     interposer)"
                ));
            }
        };
        let host = cluster
            .node_host(HostedDriver { driver, nodes })
            .await
            .map_err(|e| format!("reaching the nodes: {e:#}"))?;
        let mut me = Interposed {
            calls: Calls::new(driver),
            nodes: BTreeMap::new(),
            running: Default::default(),
        };
        let started = futures::future::join_all(nodes.iter().map(|node| {
            let prepared = Prepared::default();
            let root = host.kubelet_root(node);
            let plugin_dir = root.join("plugins").join(driver);
            let config = InterposerConfig {
                driver: driver.to_owned(),
                node: node.clone(),
                driver_registration: private_registry(&root, driver)
                    .join(format!("{driver}-reg.sock")),
                registration: root
                    .join("plugins_registry")
                    .join(format!("{driver}-reg.sock")),
                endpoint: plugin_dir.join(INTERPOSER_SOCKET),
                calls: me.calls.clone(),
                prepared: prepared.clone(),
                driver_timeout: DRIVER_TIMEOUT,
                bypass,
            };
            let host = host.clone();
            async move {
                let too_long = [
                    &config.driver_registration,
                    &config.registration,
                    &config.endpoint,
                ]
                .into_iter()
                .find(|p| p.as_os_str().len() > dra_e2e_conn::node_host::MAX_SOCKET_PATH);
                if let Some(p) = too_long {
                    let e = dra_e2e_plugin::interposer::InterposerError {
                        driver: config.driver.clone(),
                        node: config.node.clone(),
                        message: format!(
                            "socket path {} is {} bytes, over the {} a unix socket path may \
                             have (on simulated nodes: use a shorter TMPDIR)",
                            p.display(),
                            p.as_os_str().len(),
                            dra_e2e_conn::node_host::MAX_SOCKET_PATH
                        ),
                    };
                    return (node.clone(), prepared, Err(e));
                }
                let r = NodeInterposer::start(host, config).await;
                (node.clone(), prepared, r)
            }
        }))
        .await;
        let mut problems = Vec::new();
        for (node, prepared, result) in started {
            match result {
                Ok(i) => {
                    me.nodes.insert(node, prepared);
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
    pub fn prepared(&self, node: &str) -> Option<&Prepared> {
        self.nodes.get(node)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// Stops the interposers: their sockets go, and with them the kubelet's
    /// registration.
    pub async fn stop(&self) {
        self.calls.heal_all();
        let running = std::mem::take(&mut *self.running.lock().await);
        for i in running {
            i.stop().await;
        }
    }
}
