//! Whether the driver publishes its devices on every ready node, waited
//! for before the run starts and after a scenario changed it, and its pods
//! described when it does not, so that a driver that never comes up fails
//! once, with what was seen.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;

use dra_e2e_kube::wait::{self, Check};

use super::{DEVICES_TIMEOUT, UnderTest, UnderTestError};

impl UnderTest {
    /// Waits until the driver's slices hold at least one device for every
    /// ready node.
    pub(super) async fn wait_devices(
        &self,
        client: &kube::Client,
        driver: &str,
        want: Option<u32>,
        timeout: Duration,
    ) -> Result<(), UnderTestError> {
        let nodes = ready_nodes(client)
            .await
            .map_err(|e| UnderTestError::Deploy {
                driver: driver.to_owned(),
                message: format!("listing nodes: {e}"),
            })?;
        // A node falls short with no device, or with another count than
        // `want` when it is given.
        let short = |per_node: &BTreeMap<String, Vec<String>>| -> Vec<String> {
            nodes
                .iter()
                .filter(|n| {
                    per_node
                        .get(*n)
                        .is_none_or(|d| d.is_empty() || want.is_some_and(|w| d.len() != w as usize))
                })
                .cloned()
                .collect()
        };
        let (goal, expected) = match want {
            Some(w) => (
                format!("{w} devices"),
                format!("not the {w} devices per node its profile gives (devicesPerNode)"),
            ),
            None => ("devices".to_owned(), "no devices".to_owned()),
        };
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
        let what = format!("driver {driver} to publish {goal} on every ready node");
        let result = wait::list(&slices, config, &what, timeout, |items| {
            let per_node = devices_per_node(items);
            let missing = short(&per_node);
            if missing.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!(
                    "devices per node {:?}; short on {missing:?}",
                    per_node
                        .iter()
                        .map(|(n, d)| (n.clone(), d.len()))
                        .collect::<BTreeMap<_, _>>()
                ))
            }
        })
        .await;
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let per_node = slices
                    .list(&ListParams::default().fields(&format!("spec.driver={driver}")))
                    .await
                    .map(|l| devices_per_node(&l.items))
                    .unwrap_or_default();
                Err(UnderTestError::NoDevices {
                    driver: driver.to_owned(),
                    expected,
                    nodes: short(&per_node).join(", "),
                    message: e.to_string(),
                    pods: self.describe_pods(client).await,
                })
            }
        }
    }

    /// Waits until the driver publishes devicesPerNode devices (or, without
    /// it, any) on every ready node, so the next scenario finds the driver as
    /// deployed.
    pub async fn wait_devices_as_deployed(
        &self,
        client: &kube::Client,
    ) -> Result<(), UnderTestError> {
        self.wait_devices(
            client,
            self.driver_name(),
            self.profile.devices_per_node,
            DEVICES_TIMEOUT,
        )
        .await
    }

    /// One line per driver pod: node, phase, container states; on simulated
    /// nodes the end of each process's log.
    pub async fn describe_pods(&self, client: &kube::Client) -> String {
        let mut out = self.describe_deployed_pods(client).await;
        for p in self
            .processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            out.push_str(&format!(
                "{} (pid {}, {}): {}\n{}\n",
                p.component(),
                p.pid(),
                p.log_path().display(),
                match p.exit_status() {
                    Some(s) => format!("exited, {s}"),
                    None => "running".to_owned(),
                },
                p.log_tail(10)
            ));
        }
        out
    }

    pub(super) async fn describe_deployed_pods(&self, client: &kube::Client) -> String {
        let mut out = String::new();
        for set in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
            match api
                .list(&ListParams::default().labels(&set.selector()))
                .await
            {
                Ok(list) if list.items.is_empty() => out.push_str(&format!(
                    "DaemonSet {}/{} has no pods\n",
                    set.namespace, set.daemonset
                )),
                Ok(list) => {
                    for p in &list.items {
                        out.push_str(&format!(
                            "driver pod {}/{}: {}\n",
                            set.namespace,
                            p.metadata.name.as_deref().unwrap_or("?"),
                            wait::describe_pod(Some(p))
                        ));
                    }
                }
                Err(e) => out.push_str(&format!(
                    "listing the pods of DaemonSet {}/{}: {e}\n",
                    set.namespace, set.daemonset
                )),
            }
        }
        out
    }

    /// The images the driver's pods run.
    pub(super) async fn pod_images(&self, client: &kube::Client) -> BTreeSet<String> {
        let mut images = BTreeSet::new();
        for set in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
            if let Ok(list) = api
                .list(&ListParams::default().labels(&set.selector()))
                .await
            {
                for p in list.items {
                    for c in p.spec.map(|s| s.containers).unwrap_or_default() {
                        images.extend(c.image);
                    }
                }
            }
        }
        images
    }
}

/// Names of the ready, schedulable nodes.
pub async fn ready_nodes(client: &kube::Client) -> kube::Result<Vec<String>> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let mut names: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(dra_e2e_cluster::node_is_ready_and_schedulable)
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// Device names per node in `slices` (node-local slices only).
pub fn devices_per_node(slices: &[ResourceSlice]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in slices {
        if let Some(node) = &s.spec.node_name {
            let devices = s.spec.devices.iter().flatten().map(|d| d.name.clone());
            out.entry(node.clone()).or_default().extend(devices);
        }
    }
    for d in out.values_mut() {
        d.sort();
    }
    out
}
