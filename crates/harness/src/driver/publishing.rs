//! The driver's ResourceSlices: the publishers each node's plugin keeps
//! in place, the waits until the slices are published, and the pool a
//! device is in, since steps name devices and the API names pools.
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;

use super::slices::{self, DeviceSpec, Publisher};
use super::{Driver, DriverError, Resources};
use dra_e2e_kube::wait::{self, Check};
use dra_e2e_plugin::fault::Fault;

impl Driver {
    /// The plugin's own publishers of the slices of node `index`, for
    /// node-local resources (other resources are published by the harness).
    pub(super) async fn node_publishers(
        &self,
        index: usize,
        node: &str,
        client: kube::Client,
    ) -> Result<Vec<Publisher>, DriverError> {
        let contents = match &self.options.resources {
            Resources::NodeLocal { per_node, default } => {
                let devices = per_node.get(&index).unwrap_or(default);
                vec![slices::SliceContent::of_devices(devices).map_err(self.build_err())?]
            }
            Resources::NodePool { slices } => slices.clone(),
            _ => return Ok(Vec::new()),
        };
        // A driver that names the wrong node (its first, say) publishes
        // there what this node offers.
        let named = match self.nodenames().first() {
            Some(first) if self.options.faults.has(Fault::SlicesWrongNode) => first.clone(),
            _ => node.to_owned(),
        };
        let node_obj: Node = Api::all(self.ctx.admin.clone())
            .get(&named)
            .await
            .map_err(self.kube_err(format!("reading node {named}")))?;
        let slices =
            slices::node_pool_slices(&self.name, &node_obj, &contents).map_err(self.build_err())?;
        Ok(slices
            .into_iter()
            .map(|slice| Publisher::start(client.clone(), self.with_skips(slice)))
            .collect())
    }

    pub(super) fn build_err(&self) -> impl Fn(serde_json::Error) -> DriverError + '_ {
        |e| DriverError::Other {
            driver: self.name.clone(),
            message: format!("building ResourceSlice: {e}"),
        }
    }

    /// Waits until every node has the node-local slices this driver publishes
    /// (drivers with other resources have nothing to wait for); fails at once
    /// when the API server refuses one as invalid.
    pub async fn wait_published(&self, timeout: Duration) -> Result<(), DriverError> {
        if !matches!(
            self.options.resources,
            Resources::NodeLocal { .. } | Resources::NodePool { .. }
        ) {
            return Ok(());
        }
        let nodes = self.nodes.clone();
        let want = match &self.options.resources {
            Resources::NodePool { slices } => slices.len(),
            _ => 1,
        };
        let what = format!("the ResourceSlices of driver {} on every node", self.name);
        let published = self.wait_slices(&what, timeout, |items| {
            let missing: Vec<&String> = nodes
                .iter()
                .filter(|n| {
                    items
                        .iter()
                        .filter(|s| s.spec.node_name.as_ref() == Some(*n))
                        .count()
                        < want
                })
                .collect();
            if missing.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!("not all slices yet on {missing:?}"))
            }
        });
        let refusals = self.instances.iter().flat_map(|(node, inst)| {
            inst.publishers.iter().map(move |p| {
                Box::pin(async move { (node.clone(), p.refusal().await) })
                    as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>>
            })
        });
        let refused: Vec<_> = refusals.collect();
        if refused.is_empty() {
            return published.await;
        }
        tokio::select! {
            r = published => r,
            ((node, message), _, _) = futures::future::select_all(refused) => Err(DriverError::Other {
                driver: self.name.clone(),
                message: format!("its ResourceSlice on node {node} was not published as written: {message}"),
            }),
        }
    }

    /// Watches the driver's slices, whoever published them, until `check`
    /// over all of them is done.
    pub async fn wait_slices<T>(
        &self,
        what: &str,
        timeout: Duration,
        check: impl FnMut(&[ResourceSlice]) -> Check<T>,
    ) -> Result<T, DriverError> {
        let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
        let config = watcher::Config::default().fields(&format!("spec.driver={}", self.name));
        wait::list(&api, config, what, timeout, check)
            .await
            .map_err(|e| DriverError::Wait(e, self.name.clone()))
    }

    /// The pool `device` belongs to as seen from `node`.
    pub(super) fn pool_of(&self, node: &str, device: &str) -> Result<String, DriverError> {
        let index = self.nodes.iter().position(|n| n == node);
        let names = |devices: &[DeviceSpec]| -> Vec<String> {
            devices.iter().map(|d| d.name.clone()).collect()
        };
        let (pool, known): (String, Vec<String>) = match &self.options.resources {
            Resources::NodeLocal { per_node, default } => (
                node.to_owned(),
                names(index.and_then(|i| per_node.get(&i)).unwrap_or(default)),
            ),
            Resources::NodePool { slices } => {
                (node.to_owned(), slices::SliceContent::device_names(slices))
            }
            Resources::Network { devices } => ("network".to_owned(), names(devices)),
            Resources::SharedPool { pool, slices } => {
                (pool.clone(), slices::SliceContent::device_names(slices))
            }
            Resources::AllNodes { pool, devices } => (pool.clone(), names(devices)),
            Resources::None => (String::new(), Vec::new()),
        };
        if known.iter().any(|d| d == device) {
            Ok(pool)
        } else {
            Err(DriverError::Other {
                driver: self.name.clone(),
                message: format!(
                    "node {node} has no device {device:?}; its devices: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            })
        }
    }

    /// The driver's slices as the API server has them.
    pub async fn slices(&self) -> Result<Vec<ResourceSlice>, DriverError> {
        let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
        let lp = ListParams::default().fields(&format!("spec.driver={}", self.name));
        Ok(api
            .list(&lp)
            .await
            .map_err(self.kube_err("listing ResourceSlices"))?
            .items)
    }
}
