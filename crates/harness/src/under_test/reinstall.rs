//! The driver under test uninstalled and installed again in the middle of
//! a scenario, as its user would with `helm uninstall` and `helm install`.
//!
//! Uninstalling deletes every object of the profile's manifests (its
//! DeviceClass too, when they hold it; not a class the runner made from
//! the profile's selector), most recent first, and waits until they and
//! the driver's pods are gone; on simulated nodes it stops the driver's
//! processes. What must follow is the driver's business, and
//! [`wait_slices_gone`] judges it: none of its ResourceSlices may be left.
//! A kubelet wipes the slices of its node a delay after the driver's
//! plugin there went away (30 s); a slice without `spec.nodeName` (a pool
//! for selected nodes or all of them, network-attached devices) no kubelet
//! ever wipes: the driver must delete it, or give it an owner that goes
//! with the driver.
//!
//! Installing again creates the same objects from the same manifests (the
//! nodes have the images already) or starts the processes again, and
//! waits until the driver publishes on every ready node what it did at the
//! run's start.
//!
//! A scenario cut short in between leaves the run without its driver:
//! [`UnderTest::restore_after_uninstall`] (the scenario's teardown) ends
//! the uninstallation, deletes whatever slices of the driver are left
//! (with no driver running, they are left behind; the driver installed
//! again publishes its own) and installs the driver again.
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher;

use dra_e2e_cluster::Cluster;
use dra_e2e_kube::wait::{self, Check};
use dra_e2e_profile::{Deployment, Profile};

use super::{UnderTest, UnderTestError};

/// How long the slices of an uninstalled driver may take to go: as long
/// as upstream's `IsGone` waits after a driver's teardown.
pub const SLICES_GONE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the pods of an uninstalled driver may take to be gone.
const PODS_GONE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the driver installed again may take to publish its devices on
/// every node (within a step's timeout).
const INSTALL_AGAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the runner cannot uninstall `profile`'s driver and install it
/// again: it did not install it, or it hosts it itself.
pub fn skip_reason(profile: &Profile) -> Option<String> {
    let driver = &profile.driver_name;
    match &profile.deployment {
        Deployment::RealNodes { .. }
        | Deployment::Manifests { .. }
        | Deployment::SimulatedNodes { .. } => None,
        Deployment::Builtin => Some(
            "needs to uninstall the driver and install it again; the suite's own driver is \
             hosted by the runner, one instance per scenario, whose teardown already waits until \
             its slices are gone, as upstream's IsGone (run it with a profile of a driver the \
             runner deploys: deployment.mode RealNodes, Manifests or SimulatedNodes)"
                .to_owned(),
        ),
        Deployment::Installed => Some(format!(
            "needs to uninstall driver {driver} and install it again, which the runner does only \
             for a driver it deploys itself (deployment.mode RealNodes, Manifests or \
             SimulatedNodes); this one was installed by someone else (deployment.mode: \
             Installed)"
        )),
    }
}

impl UnderTest {
    /// Whether a scenario uninstalled the driver and has not installed it
    /// again.
    pub fn is_uninstalled(&self) -> bool {
        self.uninstalled.load(Ordering::SeqCst)
    }

    /// Uninstalls the driver: deletes the objects of its manifests, most
    /// recent first, and waits until they and the driver's pods are gone,
    /// or stops its processes on simulated nodes. Its slices are left to
    /// the driver and the kubelets ([`wait_slices_gone`]).
    pub async fn uninstall_driver(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        if let Some(reason) = skip_reason(&self.profile) {
            return Err(self.deploy_error(format!(
                "{reason}; tag the scenario @DriverUninstalls so that it is skipped"
            )));
        }
        if self.uninstalled.swap(true, Ordering::SeqCst) {
            return Err(self.deploy_error(
                "it is uninstalled already: install it again first (\"When the driver is \
                 installed again\")"
                    .to_owned(),
            ));
        }
        self.remove_driver(cluster).await
    }

    /// What [`UnderTest::uninstall_driver`] does, safe to do again.
    async fn remove_driver(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        if let Deployment::SimulatedNodes { .. } = &self.profile.deployment {
            let left = self.stop_processes();
            if !left.is_empty() {
                tracing::warn!(
                    "driver {} needed SIGKILL to stop: {left:?}",
                    self.driver_name()
                );
            }
            return Ok(());
        }
        let client = cluster.client();
        let objects: Vec<super::Made> = self
            .made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|m| m.manifest)
            .cloned()
            .collect();
        let mut problems = Vec::new();
        for m in objects.iter().rev() {
            problems.extend(self.remove(&client, m).await);
        }
        if !problems.is_empty() {
            return Err(self.deploy_error(format!(
                "uninstalling it (deleting the objects of its manifests): {}",
                problems.join("; ")
            )));
        }
        for set in &self.pods {
            pods_gone(&client, set).await.map_err(|e| {
                self.deploy_error(format!("uninstalling it, its pods did not go: {e}"))
            })?;
        }
        Ok(())
    }

    /// Installs the driver again the way the run did (the same manifests,
    /// the nodes having the images already; or its processes started again
    /// on simulated nodes) and waits until it publishes on every ready node
    /// what it did at the run's start (the profile's devicesPerNode, or
    /// any device).
    pub async fn install_again(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        if !self.is_uninstalled() {
            return Err(self.deploy_error(
                "it was not uninstalled: nothing to install again (\"When the driver is \
                 uninstalled\" first)"
                    .to_owned(),
            ));
        }
        let client = cluster.client();
        match &self.profile.deployment {
            Deployment::SimulatedNodes { command } => {
                self.start_on_simulated_nodes(cluster, command, None)?;
            }
            Deployment::RealNodes { manifests, .. } | Deployment::Manifests { manifests } => {
                // The objects are remembered from the first installation
                // already, under the same names.
                for path in manifests {
                    self.create_objects(&client, path, false).await?;
                }
            }
            other => {
                return Err(self.deploy_error(format!(
                    "the runner installs only a driver it deploys, not one in mode {}",
                    other.mode()
                )));
            }
        }
        // As deployed: the manifests' own device count.
        *self.devices_now.lock().await = None;
        self.wait_devices(
            &client,
            self.driver_name(),
            self.profile.devices_per_node,
            INSTALL_AGAIN_TIMEOUT,
        )
        .await?;
        self.uninstalled.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// After a scenario that uninstalled the driver and did not install it
    /// again: ends the uninstallation, deletes the driver's slices left
    /// behind, installs it again and waits until it publishes as deployed.
    /// Nothing when the driver is installed.
    pub async fn restore_after_uninstall(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        if !self.is_uninstalled() {
            return Ok(());
        }
        self.remove_driver(cluster).await?;
        // No driver runs now: whatever slice of it is left, none publishes.
        let slices: Api<ResourceSlice> = Api::all(cluster.client());
        let lp = ListParams::default().fields(&format!("spec.driver={}", self.driver_name()));
        let left = slices
            .list(&lp)
            .await
            .map_err(|e| self.deploy_error(format!("listing its slices left behind: {e}")))?;
        if !left.items.is_empty() {
            tracing::warn!(
                "deleting what driver {} left behind when it was uninstalled: {}",
                self.driver_name(),
                left.items
                    .iter()
                    .map(describe_slice)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            slices
                .delete_collection(&DeleteParams::default(), &lp)
                .await
                .map_err(|e| self.deploy_error(format!("deleting its slices left behind: {e}")))?;
        }
        self.install_again(cluster).await
    }
}

/// Waits until the pods of `set` are gone.
async fn pods_gone(client: &kube::Client, set: &super::DriverPods) -> Result<(), String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
    let config = watcher::Config::default().labels(&set.selector());
    let what = format!(
        "the pods of DaemonSet {}/{} to be gone",
        set.namespace, set.daemonset
    );
    let describe = |p: &Pod| {
        format!(
            "pod {}: {}",
            p.metadata.name.as_deref().unwrap_or("?"),
            wait::describe_pod(Some(p))
        )
    };
    wait::list(
        &api,
        config,
        &what,
        PODS_GONE_TIMEOUT,
        wait::none_left(describe),
    )
    .await
    .map_err(|e| e.to_string())
}

/// Watches the ResourceSlices of `driver` until none is left; on timeout,
/// says which were still there (name, pool, where) and who should have
/// removed them.
pub async fn wait_slices_gone(
    client: &kube::Client,
    driver: &str,
    timeout: Duration,
) -> Result<(), String> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!("no ResourceSlice of driver {driver} to be left");
    let mut last: Vec<ResourceSlice> = Vec::new();
    let result = wait::list(&api, config, &what, timeout, |items: &[ResourceSlice]| {
        if items.is_empty() {
            return Check::Done(());
        }
        last = items.to_vec();
        Check::Pending(
            items
                .iter()
                .map(describe_slice)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })
    .await;
    match result {
        Ok(()) => Ok(()),
        Err(wait::WaitError::Timeout { .. }) => Err(left_behind(driver, timeout, &last)),
        Err(e) => Err(e.to_string()),
    }
}

/// The failure message for slices of `driver` still there `timeout` after
/// it was uninstalled.
fn left_behind(driver: &str, timeout: Duration, slices: &[ResourceSlice]) -> String {
    let (node_local, elsewhere): (Vec<&ResourceSlice>, Vec<&ResourceSlice>) =
        slices.iter().partition(|s| s.spec.node_name.is_some());
    let mut why = Vec::new();
    if !elsewhere.is_empty() {
        why.push(format!(
            "no kubelet wipes a slice without spec.nodeName ({}): the driver must delete it when \
             it is uninstalled, or give it an owner reference that goes with the driver",
            names(&elsewhere)
        ));
    }
    if !node_local.is_empty() {
        why.push(format!(
            "a node's kubelet wipes the slices of a driver whose plugin there has been gone a \
             while (30s in the kubelet), yet these stayed ({}): is a pod of the driver still \
             running, or its plugin still registered?",
            names(&node_local)
        ));
    }
    format!(
        "driver {driver} left {} ResourceSlice(s) behind {}s after it was uninstalled (the \
         scheduler would go on allocating their devices): {}; {}",
        slices.len(),
        timeout.as_secs(),
        slices
            .iter()
            .map(describe_slice)
            .collect::<Vec<_>>()
            .join("; "),
        why.join("; ")
    )
}

fn names(slices: &[&ResourceSlice]) -> String {
    slices
        .iter()
        .map(|s| s.metadata.name.as_deref().unwrap_or("?"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A slice as the failure messages name it: its name, pool, where its
/// devices are, and how many.
pub fn describe_slice(s: &ResourceSlice) -> String {
    let spec = &s.spec;
    let place = if let Some(node) = &spec.node_name {
        format!("node {node}")
    } else if spec.all_nodes == Some(true) {
        "all nodes".to_owned()
    } else if let Some(selector) = &spec.node_selector {
        let terms: Vec<String> = selector
            .node_selector_terms
            .iter()
            .map(|t| {
                t.match_expressions
                    .iter()
                    .flatten()
                    .map(|e| ("", e))
                    .chain(t.match_fields.iter().flatten().map(|e| ("field ", e)))
                    .map(|(kind, e)| {
                        format!(
                            "{kind}{} {} {:?}",
                            e.key,
                            e.operator,
                            e.values.clone().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" and ")
            })
            .collect();
        format!("nodeSelector {}", terms.join(" or "))
    } else if spec.per_device_node_selection == Some(true) {
        "per-device node selection".to_owned()
    } else {
        "no node".to_owned()
    };
    format!(
        "{} (pool {} generation {}, {place}, {} device(s))",
        s.metadata.name.as_deref().unwrap_or("?"),
        spec.pool.name,
        spec.pool.generation,
        spec.devices.as_ref().map_or(0, Vec::len)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, spec: serde_json::Value) -> ResourceSlice {
        let mut spec = spec;
        spec["driver"] = "d.example.com".into();
        spec["pool"] = serde_json::json!({ "name": "p", "generation": 2, "resourceSliceCount": 1 });
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn a_slice_is_named_with_its_pool_and_where_its_devices_are() {
        let local = slice(
            "a",
            serde_json::json!({ "nodeName": "n0", "devices": [{ "name": "d0" }] }),
        );
        assert_eq!(
            describe_slice(&local),
            "a (pool p generation 2, node n0, 1 device(s))"
        );
        let selected = slice(
            "b",
            serde_json::json!({ "nodeSelector": { "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": "kubernetes.io/hostname", "operator": "In", "values": ["n0"] }
            ] }] } }),
        );
        assert_eq!(
            describe_slice(&selected),
            "b (pool p generation 2, nodeSelector kubernetes.io/hostname In [\"n0\"], 0 device(s))"
        );
        let all = slice("c", serde_json::json!({ "allNodes": true }));
        assert_eq!(
            describe_slice(&all),
            "c (pool p generation 2, all nodes, 0 device(s))"
        );
    }

    #[test]
    fn the_message_says_who_should_have_removed_what_was_left() {
        let slices = [
            slice("a", serde_json::json!({ "nodeName": "n0" })),
            slice("b", serde_json::json!({ "allNodes": true })),
        ];
        let m = left_behind("d.example.com", Duration::from_secs(120), &slices);
        assert!(
            m.starts_with(
                "driver d.example.com left 2 ResourceSlice(s) behind 120s after it was \
                 uninstalled (the scheduler would go on allocating their devices): a (pool p \
                 generation 2, node n0, 0 device(s)); b (pool p generation 2, all nodes, 0 \
                 device(s)); no kubelet wipes a slice without spec.nodeName (b): the driver \
                 must delete it"
            ),
            "{m}"
        );
        assert!(
            m.contains("(30s in the kubelet), yet these stayed (a)"),
            "{m}"
        );
        // Only what is there is explained.
        let m = left_behind("d.example.com", Duration::from_secs(120), &slices[1..]);
        assert!(!m.contains("30s"), "{m}");
    }

    #[test]
    fn only_a_driver_the_runner_deploys_is_uninstalled() {
        let mut profile = dra_e2e_profile::Profile::from_flags("d.example.com", "c")
            .unwrap()
            .profile;
        let installed = skip_reason(&profile).unwrap();
        assert!(
            installed.contains("deployment.mode: Installed"),
            "{installed}"
        );
        profile.deployment = Deployment::Manifests {
            manifests: vec!["/m.yaml".into()],
        };
        assert_eq!(skip_reason(&profile), None);
        let builtin = skip_reason(&dra_e2e_profile::builtin()).unwrap();
        assert!(builtin.contains("suite's own driver"), "{builtin}");
    }
}
