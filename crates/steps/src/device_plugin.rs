//! Device plugins beside DRA: upstream's sample device plugin on some of the
//! scenario's nodes, the extended resource it advertises in the Node status,
//! and which pod got its extended resources from where.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{given, then};
use k8s_openapi::api::core::v1::Pod;

use super::World;
use super::params::{ClaimPhrase, Gets, NodeList, Strings};
use crate::harness::claims::generated_claim;
use crate::harness::device_plugin;

sentences! {
    #[given(expr = "the sample device plugin is deployed on {nodelist}")]
    fn deployed(on: NodeList);

    #[given(expr = "node {int} has {int} allocatable {string}")]
    #[then(expr = "node {int} has {int} allocatable {string}")]
    fn allocatable(node: usize, count: i64, resource: String);

    #[then(expr = "the pod on node {int} has no extended resource claim")]
    fn no_extended_claim(node: usize);

    #[then(expr = "container {string} of the pod on node {int} gets request {string} of its extended resource claim")]
    fn gets_request(container: String, node: usize, request: String);
}

/// Upstream's PodStart and PodDelete timeouts, which its device-plugin
/// waits use.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Upstream's `deployDevicePlugin`: its sample plugin as a DaemonSet whose
/// pods may run only on the given nodes; then, unlike upstream, the wait
/// until each runs, so a plugin that cannot start says so here.
async fn deployed(w: &mut World, on: NodeList) -> anyhow::Result<()> {
    super::drivers::default_nodes(w).await?;
    let nodes = on.names(w)?;
    let client = w.client()?;
    device_plugin::settled(&client, &w.namespace, &nodes, TIMEOUT).await?;
    let daemonset = device_plugin::daemon_set(&nodes)
        .context("building the sample device plugin's DaemonSet")?;
    let (daemonsets, resource) = device_plugin::daemon_sets(&client, &w.namespace);
    w.create_object(&daemonsets, resource, true, &daemonset)
        .await?;
    device_plugin::running_on(&w.api::<Pod>()?, &nodes, &on.to_string(), TIMEOUT).await?;
    Ok(())
}

async fn allocatable(w: &World, node: usize, count: i64, resource: String) -> anyhow::Result<()> {
    let name = w.node(node)?.to_owned();
    device_plugin::allocatable(&w.client()?, node, &name, count, &resource, TIMEOUT).await?;
    Ok(())
}

/// The one pod of the scenario's own that runs on node `index`: which node
/// the scheduler picks for each of several like pods is its choice, so the
/// pods are told apart by where they landed.
async fn pod_on_node(w: &World, index: usize) -> anyhow::Result<String> {
    let node = w.node(index)?;
    let mut on_node = Vec::new();
    let mut elsewhere = Vec::new();
    for record in w.scenario.pods() {
        let pod = w.pod(&record.name).await?;
        match pod.spec.and_then(|s| s.node_name) {
            Some(n) if n == node => on_node.push(record.name.clone()),
            Some(n) => elsewhere.push(format!("{} on {n}", record.name)),
            None => elsewhere.push(format!("{} not scheduled", record.name)),
        }
    }
    match on_node.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "none of the scenario's pods runs on node {index} ({node}): {}",
            if elsewhere.is_empty() {
                "it created none".to_owned()
            } else {
                elsewhere.join(", ")
            }
        ),
        several => bail!(
            "expected one of the scenario's pods on node {index} ({node}), found {}",
            several.join(", ")
        ),
    }
}

async fn no_extended_claim(w: &World, node: usize) -> anyhow::Result<()> {
    let pod = pod_on_node(w, node).await?;
    super::pods::no_extended_claim(w, pod.clone())
        .await
        .with_context(|| format!("the pod on node {node} is {pod}"))
}

/// Upstream's env check of the pod DRA served. The pod runs, so the
/// scheduler has made its claim by now or never will: a pod without one
/// fails here at once rather than after a wait.
async fn gets_request(
    w: &World,
    container: String,
    node: usize,
    request: String,
) -> anyhow::Result<()> {
    let pod = pod_on_node(w, node).await?;
    let found = w.pod(&pod).await?;
    if generated_claim(&found, true).is_none() {
        bail!(
            "the pod on node {node} is {pod}: expected the DRA driver to serve its extended resources, \
             but it has no extended resource claim (a device plugin served them)"
        );
    }
    super::pods::gets_requests(
        w,
        container,
        pod.clone(),
        Gets(true),
        Strings(vec![request]),
        ClaimPhrase::ExtendedOfPod(pod),
    )
    .await
}
