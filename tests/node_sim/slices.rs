//! Slice wiping by simulated nodes: all node slices at start, a driver's node
//! slices a delay after its plugin went away, no wipe when the plugin comes
//! back in time, and never slices without a node name.

use std::time::Duration;

use super::support::*;
use dra_e2e::node_sim::{NodeEvent, NodeEventKind, SimNode, SimNodes};
use dra_e2e::plugin::NodeApi;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, PostParams};
use serde_json::json;

async fn create_slice(client: &kube::Client, name: &str, driver: &str, node: Option<&str>) {
    let mut spec = json!({
        "driver": driver,
        "pool": {"name": node.unwrap_or("network"), "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "device-00"}],
    });
    match node {
        Some(n) => spec["nodeName"] = json!(n),
        None => spec["allNodes"] = json!(true),
    }
    let slice: ResourceSlice =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    Api::<ResourceSlice>::all(client.clone())
        .create(&PostParams::default(), &slice)
        .await
        .unwrap();
}

async fn slice_exists(client: &kube::Client, name: &str) -> bool {
    Api::<ResourceSlice>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

fn find(events: &[NodeEvent], pred: impl Fn(&NodeEventKind) -> bool) -> Option<NodeEvent> {
    events.iter().find(|e| pred(&e.kind)).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_slices_are_wiped_like_the_kubelet_does() {
    let mut env = Env::start(0, |_| {}).await;
    let client = env.client.clone();

    // Left over from an earlier node of the same name: wiped at start. Other
    // nodes' slices and slices without a node name stay.
    create_slice(&client, "stale-sim-0", "old.example.com", Some("sim-0")).await;
    create_slice(&client, "other-node", "old.example.com", Some("elsewhere")).await;
    create_slice(&client, "network", "old.example.com", None).await;
    let root = env.cluster.dir().join("nodes");
    let nodes = SimNodes::start(client.clone(), "sim", 2, &root, |c| {
        c.wipe_delay = Duration::from_secs(if c.name == "sim-0" { 2 } else { 6 });
    })
    .await
    .unwrap();
    assert_eq!(nodes.names(), ["sim-0", "sim-1"]);
    env.nodes = nodes.into_nodes();
    assert!(!slice_exists(&client, "stale-sim-0").await);
    assert!(slice_exists(&client, "other-node").await);
    assert!(slice_exists(&client, "network").await);

    node_objects(&env).await;
    plugin_gone_wipes_after_delay(&env).await;
    quick_restart_keeps_slices(&env).await;

    // Stopping a node removes its Node and Lease.
    let sim1 = env.nodes.pop().unwrap();
    sim1.stop().await.unwrap();
    assert!(
        Api::<Node>::all(client.clone())
            .get_opt("sim-1")
            .await
            .unwrap()
            .is_none()
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    assert!(leases.get_opt("sim-1").await.unwrap().is_none());
    env.stop().await;
}

async fn node_objects(env: &Env) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "kube-node-lease");
    for name in ["sim-0", "sim-1"] {
        let node = nodes.get(name).await.unwrap();
        let labels = node.metadata.labels.clone().unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], name);
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert!(labels.contains_key("kubernetes.io/arch"));
        let status = node.status.unwrap();
        let conditions = status.conditions.unwrap();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            "{name} not Ready: {conditions:?}"
        );
        assert!(status.allocatable.unwrap().contains_key("pods"));
        assert_eq!(status.node_info.unwrap().operating_system, "linux");
        let lease = eventually("node lease", || async {
            leases.get_opt(name).await.unwrap()
        })
        .await;
        assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some(name));
    }
}

async fn plugin_gone_wipes_after_delay(env: &Env) {
    let client = &env.client;
    let ns = env.namespace("sim-wipe").await;
    let mut driver = Driver::start(env, &ns, &[NodeApi::V1], 1).await;
    create_slice(client, &format!("{ns}-network"), &driver.name, None).await;
    let node: &SimNode = env.node(0);
    let node0 = driver.slice_name("sim-0");
    let node1 = driver.slice_name("sim-1");

    // Only sim-0's plugin goes away.
    let plugin = driver.plugins.remove(0);
    plugin.stop().await.unwrap();
    let scheduled = node
        .wait_for_event(
            DEADLINE,
            |k| matches!(k, NodeEventKind::WipeScheduled { driver: d } if *d == driver.name),
        )
        .await
        .expect("wipe scheduled on sim-0");
    eventually("sim-0 slice wiped", || async {
        (!slice_exists(client, &node0).await).then_some(())
    })
    .await;
    // The API server may show the slice gone before the node journals it.
    let wiped = node
        .wait_for_event(
            DEADLINE,
            |k| matches!(k, NodeEventKind::SlicesWiped { driver: Some(d) } if *d == driver.name),
        )
        .await
        .expect("wipe journaled");
    // Never before the delay: a lower bound, so load cannot make it flaky.
    let waited = wiped.at.duration_since(scheduled.at);
    assert!(
        waited >= jiff::SignedDuration::from_secs(2),
        "wiped {waited:?} after the plugin left"
    );
    assert!(
        slice_exists(client, &node1).await,
        "another node's slice was wiped"
    );
    assert!(slice_exists(client, &format!("{ns}-network")).await);
    driver.stop().await;
}

async fn quick_restart_keeps_slices(env: &Env) {
    let client = &env.client;
    let ns = env.namespace("sim-restart").await;
    let mut driver = Driver::start(env, &ns, &[NodeApi::V1], 1).await;
    let node = env.node(1);
    let slice = driver.slice_name("sim-1");

    // A plugin restart well within sim-1's 6 s delay.
    let old = driver.plugins.remove(1);
    old.stop().await.unwrap();
    node.wait_for_event(
        DEADLINE,
        |k| matches!(k, NodeEventKind::WipeScheduled { driver: d } if *d == driver.name),
    )
    .await
    .expect("wipe scheduled on sim-1");
    let new = driver.start_plugin(node, &[NodeApi::V1]).await;
    driver.plugins.push(new);
    let cancelled = node
        .wait_for_event(
            DEADLINE,
            |k| matches!(k, NodeEventKind::WipeCancelled { driver: d } if *d == driver.name),
        )
        .await
        .expect("wipe cancelled");
    // Past the moment the wipe would have happened, the slice is still there.
    let deadline = cancelled.at + jiff::SignedDuration::from_secs(7);
    while jiff::Timestamp::now() < deadline {
        assert!(
            slice_exists(client, &slice).await,
            "slice wiped despite the restart"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        find(&node.events(), |k| {
            matches!(k, NodeEventKind::SlicesWiped { driver: Some(d) } if *d == driver.name)
        })
        .is_none()
    );
    driver.stop().await;
}
