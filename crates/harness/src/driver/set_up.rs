//! A driver's SetUp: its identity with typed RBAC objects, the slices the
//! harness publishes for it, and its plugin started on every node, in the
//! order upstream's Driver.SetUp does it; a start that fails halfway stops
//! what it started, so no agent or socket outlives it.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, PostParams};

use super::rbac::{self, IdentityObject};
use super::slices::{self, Publisher};
use super::{DraServiceStart, Driver, DriverError, NodeInstance, POLICY_TIMEOUT, Resources};
use crate::timing::{Laps, Phase};
use dra_e2e_conn::node_host::{HostedDriver, NodeHost, Served, Stopper};
use dra_e2e_plugin::fault::Fault;
use dra_e2e_plugin::{NodePlugin, PluginConfig, Prepared};

/// Stops what a plugin start that failed halfway had started, so no agent
/// or socket outlives it.
async fn abandon(plugin: Option<NodePlugin>, stoppers: Vec<Stopper>) {
    if let Some(plugin) = plugin
        && let Err(e) = plugin.stop().await
    {
        tracing::warn!(error = %e, "stopping a plugin whose start failed");
    }
    for s in stoppers {
        s.stop().await;
    }
}

impl Driver {
    /// `SetUp`: identity objects, slices, plugins on every node, and (with a
    /// kubelet) the wait until every node registered the plugin.
    pub async fn set_up(&mut self) -> Result<(), DriverError> {
        let mut laps = Laps::start();
        self.create_identity().await?;
        rbac::wait_authorized(&self.ctx.admin, &self.identity, POLICY_TIMEOUT)
            .await
            .map_err(|e| DriverError::Wait(e, self.name.clone()))?;
        laps.lap(
            &mut self.setup_timings,
            Phase::harness("create RBAC and admission policy"),
        );
        let host = self
            .hosts
            .node_host(HostedDriver {
                driver: &self.name,
                nodes: &self.nodes,
            })
            .await
            .map_err(|e| DriverError::Other {
                driver: self.name.clone(),
                message: format!("{e:#}"),
            })?;
        self.host = Some(host);
        self.publish_shared_slices().await?;
        laps.lap(&mut self.setup_timings, Phase::harness("start node hosts"));
        let nodes = self.nodes.clone();
        // Every node's plugin at once: each start waits on agent processes
        // (locally) or proxy pods, which do not depend on each other.
        let started = futures::future::join_all(
            nodes
                .iter()
                .enumerate()
                .map(|(index, node)| self.start_node(index, node)),
        )
        .await;
        let mut first_error = None;
        for (node, result) in nodes.iter().zip(started) {
            match result {
                // Kept even when another node failed, so teardown stops them.
                Ok((prepared, instance)) => {
                    self.prepared.insert(node.clone(), prepared);
                    self.instances.insert(node.clone(), instance);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        laps.lap(&mut self.setup_timings, Phase::harness("start plugins"));
        // Pods created right after setup must see every node's devices, or the
        // scheduler decides on a partial view. A DRA service started later
        // publishes them then.
        // A driver that publishes wrongly on purpose is left for the
        // scenario's own steps to catch.
        if self.options.dra_service == DraServiceStart::WithRegistration
            && !self.options.faults.has(Fault::SlicesWrongNode)
        {
            self.unless_broken(self.wait_published(Duration::from_secs(60)))
                .await?;
        }
        laps.lap(
            &mut self.setup_timings,
            Phase::wait("wait for slices to be published"),
        );
        if self.options.with_kubelet {
            let this = &*self;
            let registered = futures::future::try_join_all(nodes.iter().filter_map(|node| {
                let inst = this.instances.get(node)?;
                Some(async move {
                    inst.plugin
                        .wait_registered(Duration::from_secs(60))
                        .await
                        .map_err(|e| DriverError::Other {
                            driver: this.name.clone(),
                            message: format!(
                                "the kubelet on node {node} did not register the plugin: {e}"
                            ),
                        })
                })
            }));
            this.unless_broken(registered).await?;
        }
        laps.lap(
            &mut self.setup_timings,
            Phase::wait("wait for registration"),
        );
        tracing::info!(driver = %self.name, instance = %self.options.instance_suffix, nodes = ?self.nodes, "driver is up");
        Ok(())
    }

    pub(super) async fn create_identity(&mut self) -> Result<(), DriverError> {
        let objects = rbac::objects(&self.identity).map_err(|e| DriverError::Other {
            driver: self.name.clone(),
            message: format!("building RBAC objects: {e}"),
        })?;
        // Independent objects (a binding may name what does not exist yet),
        // created at once; what was created is kept for teardown.
        let created = futures::future::join_all(IdentityObject::ALL.map(|object| {
            let (admin, identity, objects) = (&self.ctx.admin, &self.identity, &objects);
            async move { (object, object.create(admin, identity, objects).await) }
        }))
        .await;
        let mut first_error = None;
        for (object, result) in created {
            match result {
                Ok(()) => self.identity_created.push(object),
                Err(e) => {
                    first_error.get_or_insert(self.kube_err(object.purpose())(e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// `slice` with the node operations the driver skips.
    pub(super) fn with_skips(&self, mut slice: ResourceSlice) -> ResourceSlice {
        if !self.options.skip_node_operations.is_empty() {
            slice.spec.skip_node_operations = Some(self.options.skip_node_operations.clone());
        }
        slice
    }

    pub(super) async fn publish_shared_slices(&mut self) -> Result<(), DriverError> {
        let shared = match &self.options.resources {
            Resources::Network { devices } => {
                slices::network_slices(&self.name, &self.nodes, devices)
                    .map_err(self.build_err())?
            }
            Resources::SharedPool { pool, slices } => {
                let prefix = format!("{}-{pool}", self.name);
                slices::selected_pool_slices(&self.name, &self.nodes, pool, &prefix, slices)
                    .map_err(self.build_err())?
            }
            _ => Vec::new(),
        };
        if !shared.is_empty() {
            let shared: Vec<ResourceSlice> =
                shared.into_iter().map(|s| self.with_skips(s)).collect();
            let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
            // Marked first, so teardown removes a partly published pool.
            self.network_slices = true;
            for slice in &shared {
                // A second instance of the same driver shares the pool.
                match api.create(&PostParams::default(), slice).await {
                    Ok(written) => {
                        if let Some(report) = slices::dropped_fields(slice, &written) {
                            return Err(DriverError::Other {
                                driver: self.name.clone(),
                                message: format!(
                                    "ResourceSlice {} was not published as written: {report}",
                                    written.metadata.name.unwrap_or_default()
                                ),
                            });
                        }
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        return Err(self.kube_err("creating the shared pool's ResourceSlices")(
                            e,
                        ));
                    }
                }
            }
        }
        // A pool on all nodes is kept in place, as a node-local one is.
        if let Resources::AllNodes { pool, devices } = &self.options.resources {
            let slice = self.with_skips(
                slices::all_nodes_slice(&self.name, pool, devices).map_err(self.build_err())?,
            );
            self.admin_publisher = Some(Publisher::start(self.ctx.admin.clone(), slice));
            self.network_slices = true;
        }
        Ok(())
    }

    /// Device metadata needs the plugin directory on the node, which only
    /// nodes with a container runtime (reached through proxy pods) offer.
    pub(super) fn with_device_metadata(
        &self,
        config: PluginConfig,
        host: &dyn NodeHost,
        node: &str,
    ) -> Result<PluginConfig, DriverError> {
        if self.options.device_metadata.is_empty() {
            return Ok(config);
        }
        let files = host
            .plugin_files(node, &self.name)
            .ok_or_else(|| DriverError::Other {
                driver: self.name.clone(),
                message: format!(
                    "device metadata needs the driver's plugin directory on node {node}, which only \
                     nodes with a container runtime offer (run with --node-kind real, or on kind)"
                ),
            })?;
        let host_dir = host
            .kubelet_root(node)
            .join("plugins")
            .join(&self.name)
            .display()
            .to_string();
        Ok(
            config.with_device_metadata(dra_e2e_plugin::metadata::MetadataConfig {
                versions: self.options.device_metadata.clone(),
                files,
                host_dir,
            }),
        )
    }

    /// Starts the plugin of node `index`: its sockets, its gRPC servers and
    /// (for node-local resources) its slice publisher.
    pub(super) async fn start_node(
        &self,
        index: usize,
        node: &str,
    ) -> Result<(Prepared, NodeInstance), DriverError> {
        let host = self.host.clone().ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: "starting a plugin before the driver's nodes are known".to_owned(),
        })?;
        let root = host.kubelet_root(node);
        let rolling_uid = self
            .options
            .rolling_update
            .then(|| self.instance_uid.clone());
        let (dra_path, reg_path) = self.socket_paths(&root, rolling_uid.as_deref());
        let client = self.plugin_client(node)?;
        let prepared = self.prepared.get(node).cloned().unwrap_or_default();
        let config = PluginConfig::new(
            self.name.clone(),
            node,
            dra_path.display().to_string(),
            Arc::new(client.clone()),
            host.cdi_files(node),
            self.calls.clone(),
        )
        .with_node_apis(self.options.node_apis.clone())
        .with_health_apis(self.options.health_apis.clone())
        .with_prepared(prepared.clone())
        .with_faults(self.options.faults.clone());
        let config = self.with_device_metadata(config, host.as_ref(), node)?;

        if !self.options.with_kubelet {
            let none = || Served::none().into_parts().0;
            let plugin = NodePlugin::start(config, none(), none());
            return match self.node_publishers(index, node, client).await {
                Ok(publishers) => Ok((
                    prepared,
                    NodeInstance {
                        plugin,
                        stoppers: Vec::new(),
                        dra_socket: None,
                        publishers,
                    },
                )),
                Err(e) => {
                    abandon(Some(plugin), Vec::new()).await;
                    Err(e)
                }
            };
        }
        // The DRA socket must accept before the kubelet learns about it
        // through the registration socket.
        let dra = match self.options.dra_service {
            DraServiceStart::WithRegistration => Some(self.serve_dra(node, &dra_path).await?),
            DraServiceStart::Later => None,
        };
        let (reg_in, reg_stopper) = match host.serve(node, &reg_path).await {
            Ok(served) => served.into_parts(),
            Err(e) => {
                abandon(None, dra.into_iter().map(|(_, s)| s).collect()).await;
                return Err(DriverError::Socket(e, self.name.clone()));
            }
        };
        let reg_in = self.watch_socket(node, reg_in);
        let (plugin, dra_socket) = match dra {
            Some((dra_in, dra_stopper)) => {
                (NodePlugin::start(config, dra_in, reg_in), Some(dra_stopper))
            }
            None => (NodePlugin::start_registration_only(config, reg_in), None),
        };
        let publishers = if dra_socket.is_some() {
            match self.node_publishers(index, node, client).await {
                Ok(publishers) => publishers,
                Err(e) => {
                    let stoppers = std::iter::once(reg_stopper).chain(dra_socket).collect();
                    abandon(Some(plugin), stoppers).await;
                    return Err(e);
                }
            }
        } else {
            Vec::new()
        };
        Ok((
            prepared,
            NodeInstance {
                plugin,
                stoppers: vec![reg_stopper],
                dra_socket,
                publishers,
            },
        ))
    }
}
