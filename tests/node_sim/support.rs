//! Shared parts of the simulated-node tests: a local cluster with simulated
//! nodes, the plugin harness on their sockets, and the objects a scenario
//! publishes with the admin client.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dra_e2e::cluster::local::{LocalCluster, LocalClusterOptions};
use dra_e2e::conn::node_files::LocalDir;
use dra_e2e::ground::objects;
use dra_e2e::node_sim::{SimNode, SimNodeConfig};
use dra_e2e::plugin::{Calls, NodeApi, NodePlugin, PluginConfig};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{Condition, await_condition};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Generous: two cores also run the whole control plane.
pub const DEADLINE: Duration = Duration::from_secs(90);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "dra_e2e::node_sim=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A local cluster plus simulated nodes.
pub struct Env {
    pub cluster: LocalCluster,
    pub client: kube::Client,
    pub nodes: Vec<SimNode>,
}

impl Env {
    pub async fn start(nodes: usize, configure: impl Fn(&mut SimNodeConfig)) -> Env {
        init_tracing();
        let cluster = LocalCluster::start(LocalClusterOptions::default())
            .await
            .expect("local cluster starts");
        let client = cluster.client();
        let mut sims = Vec::new();
        for i in 0..nodes {
            let name = format!("sim-{i}");
            let mut cfg = SimNodeConfig::new(&name, cluster.dir().join(format!("n{i}")));
            configure(&mut cfg);
            sims.push(
                SimNode::start(client.clone(), cfg)
                    .await
                    .expect("node starts"),
            );
        }
        Env {
            cluster,
            client,
            nodes: sims,
        }
    }

    pub fn node(&self, i: usize) -> &SimNode {
        &self.nodes[i]
    }

    pub async fn stop(self) {
        for n in self.nodes {
            n.stop().await.expect("node stops");
        }
        self.cluster.stop().await.expect("cluster stops");
    }

    /// A namespace whose default service account exists (the ServiceAccount
    /// admission plugin rejects pods before that).
    pub async fn namespace(&self, name: &str) -> String {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &ns).await.unwrap();
        let sa: Api<ServiceAccount> = Api::namespaced(self.client.clone(), name);
        wait_for(
            &sa,
            "default",
            "default service account",
            |o: Option<&ServiceAccount>| o.is_some(),
        )
        .await;
        name.to_owned()
    }
}

/// Watches `name` until `cond` holds; on timeout fails with the last state.
pub async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, cond: impl Condition<K>) -> Option<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    match tokio::time::timeout(DEADLINE, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(obj)) => obj,
        Ok(Err(e)) => panic!("{what}: watching {name}: {e}"),
        Err(_) => panic!(
            "{what}: {name} timed out; last: {:#?}",
            api.get_opt(name).await
        ),
    }
}

/// Polls `f` until it returns `Some`, failing after the deadline with `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One DRA driver: its plugin on each node, a DeviceClass, node slices.
pub struct Driver {
    pub name: String,
    pub ns: String,
    pub class: String,
    pub calls: Calls,
    pub plugins: Vec<NodePlugin>,
    client: kube::Client,
}

impl Driver {
    /// Plugins serving `apis` on every node of `env`, each node's slice with
    /// `devices` devices, and the class `<ns>-class` with parameters
    /// `{"x":"y"}`. The plugins offer no health service.
    pub async fn start(env: &Env, ns: &str, apis: &[NodeApi], devices: usize) -> Driver {
        Self::start_with(env, ns, apis, devices, |c| c).await
    }

    /// Like [`Driver::start`], with `configure` applied to each plugin's
    /// config after the defaults of [`Driver::start_plugin`].
    pub async fn start_with(
        env: &Env,
        ns: &str,
        apis: &[NodeApi],
        devices: usize,
        configure: impl Fn(PluginConfig) -> PluginConfig,
    ) -> Driver {
        let name = format!("{ns}.k8s.io");
        let calls = Calls::new(&name);
        let mut d = Driver {
            name: name.clone(),
            ns: ns.to_owned(),
            class: format!("{ns}-class"),
            calls,
            plugins: Vec::new(),
            client: env.client.clone(),
        };
        for node in &env.nodes {
            let p = d.start_plugin_with(node, apis, &configure).await;
            d.plugins.push(p);
            d.publish_slice(node.name(), devices).await;
        }
        let class = objects::device_class(&d.class, &name, Some(&json!({"x": "y"})), None).unwrap();
        Api::<DeviceClass>::all(env.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
        d
    }

    /// Starts a plugin instance for `node` and waits for its registration.
    pub async fn start_plugin(&self, node: &SimNode, apis: &[NodeApi]) -> NodePlugin {
        self.start_plugin_with(node, apis, |c| c).await
    }

    /// Like [`Driver::start_plugin`], with `configure` applied to the plugin's
    /// config (health is off unless `configure` turns it on).
    pub async fn start_plugin_with(
        &self,
        node: &SimNode,
        apis: &[NodeApi],
        configure: impl Fn(PluginConfig) -> PluginConfig,
    ) -> NodePlugin {
        let dra_socket = node.plugins_dir().join(&self.name).join("dra.sock");
        let reg_socket = node.registry_dir().join(format!("{}-reg.sock", self.name));
        let cfg = PluginConfig::new(
            &self.name,
            node.name(),
            dra_socket.display().to_string(),
            Arc::new(self.client.clone()),
            Arc::new(LocalDir::new(node.cdi_dir())),
            self.calls.clone(),
        )
        .with_node_apis(apis.iter().copied())
        .with_health_apis([]);
        let cfg = configure(cfg);
        let p = NodePlugin::start_unix(cfg, &dra_socket, &reg_socket)
            .await
            .expect("plugin starts");
        p.wait_registered(DEADLINE).await.expect("plugin registers");
        assert!(
            node.wait_for_plugin(&self.name, DEADLINE).await,
            "node {} has no connected plugin for {}",
            node.name(),
            self.name
        );
        p
    }

    pub fn slice_name(&self, node: &str) -> String {
        format!("{}-{node}", self.name)
    }

    pub async fn publish_slice(&self, node: &str, devices: usize) {
        let devices: Vec<_> = (0..devices)
            .map(|i| json!({"name": format!("device-{i:02}")}))
            .collect();
        let slice: ResourceSlice = serde_json::from_value(json!({
            "metadata": {"name": self.slice_name(node)},
            "spec": {
                "driver": self.name,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            }
        }))
        .unwrap();
        Api::<ResourceSlice>::all(self.client.clone())
            .create(&PostParams::default(), &slice)
            .await
            .unwrap();
    }

    pub fn claim_spec(&self) -> k8s_openapi::api::resource::v1::ResourceClaimSpec {
        objects::ClaimShape::default_for(&self.class, &self.name)
            .spec()
            .unwrap()
    }

    pub async fn create_claim(&self, name: &str) -> ResourceClaim {
        Api::<ResourceClaim>::namespaced(self.client.clone(), &self.ns)
            .create(
                &PostParams::default(),
                &objects::claim(name, self.claim_spec()),
            )
            .await
            .unwrap()
    }

    pub async fn create_template(&self, name: &str) {
        Api::<ResourceClaimTemplate>::namespaced(self.client.clone(), &self.ns)
            .create(
                &PostParams::default(),
                &objects::claim_template(name, self.claim_spec()),
            )
            .await
            .unwrap();
    }

    pub fn prepare_count(&self, node: &str) -> u64 {
        NodeApi::ALL
            .iter()
            .map(|a| self.calls.count(node, a.prepare_method()))
            .sum()
    }

    pub fn unprepare_count(&self, node: &str) -> u64 {
        NodeApi::ALL
            .iter()
            .map(|a| self.calls.count(node, a.unprepare_method()))
            .sum()
    }

    /// Stops the plugins (sockets removed) and deletes the class.
    pub async fn stop(self) {
        for p in self.plugins {
            p.stop().await.expect("plugin stops");
        }
        let _ = Api::<DeviceClass>::all(self.client.clone())
            .delete(&self.class, &DeleteParams::default())
            .await;
    }
}

pub async fn create_pod(client: &kube::Client, ns: &str, pod: &Pod) -> Pod {
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), pod)
        .await
        .unwrap()
}

pub fn is_running(p: Option<&Pod>) -> bool {
    p.and_then(|p| p.status.as_ref())
        .and_then(|s| s.phase.as_deref())
        == Some("Running")
}

pub fn phase_is(phase: &'static str) -> impl Fn(Option<&Pod>) -> bool {
    move |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some(phase)
    }
}

/// Warning events with `reason` on pod `name`.
pub async fn pod_events(client: &kube::Client, ns: &str, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// The `user_*`, `admin_*` and `claim_*` variables of a container.
pub fn dra_env(node: &SimNode, ns: &str, pod: &str, container: &str) -> Vec<(String, String)> {
    let mut env: Vec<_> = node
        .container_env(ns, pod, container)
        .unwrap_or_else(|| panic!("no env for {ns}/{pod}/{container}"))
        .into_iter()
        .filter(|(k, _)| {
            k.starts_with("user_") || k.starts_with("admin_") || k.starts_with("claim_")
        })
        .collect();
    env.sort();
    env
}

pub fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
