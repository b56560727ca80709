//! Device plugins beside DRA: upstream's sample device plugin on some of the
//! scenario's nodes, the extended resource it advertises in the Node status,
//! and which pod got its extended resources from where.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{given, then};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::json;

use super::World;
use super::params::{ClaimPhrase, Gets, NodeList, Strings};
use crate::cluster::images::builtin::SAMPLE_DEVICE_PLUGIN_IMAGE;
use crate::ground::wait::{self, Check, describe_pod};
use crate::harness::claims::generated_claim;
use crate::harness::quantity::Quantity;

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

/// The DaemonSet's name and its label, as in upstream's manifest; the label
/// is what upstream's uninstall deletes by.
const NAME: &str = "sample-device-plugin";
const LABEL: (&str, &str) = ("k8s-app", "sample-device-plugin");
/// The extended resource the sample plugin advertises (hard-coded in it).
const RESOURCE: &str = "example.com/resource";

/// Upstream's PodStart and PodDelete timeouts, which its device-plugin
/// waits use.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Upstream's `deployDevicePlugin`: its sample plugin as a DaemonSet whose
/// pods may run only on the given nodes; then, unlike upstream, the wait
/// until each runs, so a plugin that cannot start says so here.
async fn deployed(w: &mut World, on: NodeList) -> anyhow::Result<()> {
    super::drivers::default_nodes(w).await?;
    let nodes = on.names(w)?;
    settled(w, &nodes).await?;
    let (key, value) = LABEL;
    let daemonset: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": { "name": NAME, "labels": { key: value } },
        "spec": {
            "selector": { "matchLabels": { key: value } },
            "template": {
                "metadata": { "labels": { key: value } },
                "spec": {
                    "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [ { "matchExpressions": [ {
                            "key": "kubernetes.io/hostname", "operator": "In", "values": nodes,
                        } ] } ],
                    } } },
                    "tolerations": [
                        { "operator": "Exists", "effect": "NoExecute" },
                        { "operator": "Exists", "effect": "NoSchedule" },
                    ],
                    "containers": [ {
                        "name": NAME,
                        "image": SAMPLE_DEVICE_PLUGIN_IMAGE,
                        "env": [ { "name": "PLUGIN_SOCK_DIR", "value": "/var/lib/kubelet/device-plugins" } ],
                        "securityContext": { "privileged": true },
                        "volumeMounts": [ { "name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins" } ],
                    } ],
                    "volumes": [ { "name": "device-plugin", "hostPath": { "path": "/var/lib/kubelet/device-plugins" } } ],
                },
            },
        },
    }))
    .context("building the sample device plugin's DaemonSet")?;
    let resource = ApiResource::erase::<DaemonSet>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(w.client()?, &w.namespace, &resource);
    w.create_object(&api, resource, true, &daemonset).await?;

    let pods = w.api::<Pod>()?;
    let config = watcher::Config::default().labels(&format!("{key}={value}"));
    let what = format!(
        "the sample device plugin to run on {on} ({})",
        nodes.join(", ")
    );
    wait::list(&pods, config, &what, TIMEOUT, |pods| {
        let missing: Vec<&String> = nodes
            .iter()
            .filter(|n| {
                !pods.iter().any(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == Some(*n)
                        && wait::pod_phase(p) == "Running"
                })
            })
            .collect();
        if missing.is_empty() {
            Check::Done(())
        } else {
            Check::Pending(format!(
                "not running on {missing:?}; its pods: {}",
                pods.iter()
                    .map(|p| describe_pod(Some(p)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        }
    })
    .await?;
    Ok(())
}

/// The plugin's resource name is fixed, so upstream runs its scenarios one
/// at a time. Here a scenario's teardown runs beside the next one: before a
/// plugin is deployed, the plugin of an earlier scenario must be gone and
/// no node but the new plugin's may still advertise its resource, or the
/// scheduler would send pods there.
async fn settled(w: &World, plugin_nodes: &[String]) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::all(w.client()?);
    let own = w.namespace.clone();
    // By image, not label: scenarios may deploy the plugin from manifests
    // of their own.
    let runs_plugin = |p: &Pod| {
        p.spec.as_ref().is_some_and(|s| {
            s.containers
                .iter()
                .any(|c| c.image.as_deref() == Some(SAMPLE_DEVICE_PLUGIN_IMAGE))
        })
    };
    wait::list(
        &pods,
        watcher::Config::default(),
        "the sample device plugin of earlier scenarios to be gone",
        TIMEOUT,
        |pods| {
            let left: Vec<String> = pods
                .iter()
                .filter(|p| p.metadata.namespace.as_deref() != Some(own.as_str()) && runs_plugin(p))
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default()
                    )
                })
                .collect();
            if left.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!("its pods {}", left.join(", ")))
            }
        },
    )
    .await?;
    // Every node the scheduler may pick for the scenario's pods, not only the
    // scenario's own: a pod without a node selector goes wherever the
    // resource is listed, and a node an earlier scenario's plugin ran on
    // lists it as allocatable until its kubelet sees the plugin gone (seen
    // on six real nodes: the pod landed there and was rejected, "no healthy
    // devices"). Another scenario's own node is out of reach (its taint).
    let api: Api<Node> = Api::all(w.client()?);
    let what = format!("the nodes without the plugin to advertise no {RESOURCE} any more");
    wait::list(&api, watcher::Config::default(), &what, TIMEOUT, |nodes| {
        let left: Vec<String> = nodes
            .iter()
            .filter(|n| {
                n.metadata
                    .name
                    .as_ref()
                    .is_some_and(|name| !plugin_nodes.contains(name))
            })
            .filter(|n| reachable_for(n, &own))
            .filter_map(|n| {
                let q = advertised(n)?;
                Some(format!(
                    "{} allocatable {q}",
                    n.metadata.name.as_deref().unwrap_or_default()
                ))
            })
            .collect();
        if left.is_empty() {
            Check::Done(())
        } else {
            Check::Pending(left.join(", "))
        }
    })
    .await?;
    Ok(())
}

/// Whether the scheduler may put a pod of scenario `namespace` on the node.
fn reachable_for(n: &Node, namespace: &str) -> bool {
    let owned_by_other = crate::ground::node_ready::owner(n).is_some_and(|o| o != namespace);
    crate::ground::node_ready::node_is_ready_and_schedulable(n) && !owned_by_other
}

/// The node's allocatable amount of the plugin's resource, unless none:
/// the kubelet keeps listing a resource whose plugin went away, with `0`
/// (however written: `0`, `0k`).
fn advertised(n: &Node) -> Option<String> {
    let q = n
        .status
        .as_ref()?
        .allocatable
        .as_ref()?
        .get(RESOURCE)?
        .0
        .clone();
    (Quantity::parse(&q).ok() != Some(Quantity::ZERO)).then_some(q)
}

/// Upstream reads the quantity of the resource in the Node's allocatable,
/// -1 when it is not listed: a resource the kubelet stopped advertising
/// stays listed with 0, which is what "0 allocatable" waits for.
async fn allocatable(w: &World, node: usize, count: i64, resource: String) -> anyhow::Result<()> {
    let name = w.node(node)?.to_owned();
    let api: Api<Node> = Api::all(w.client()?);
    let what = format!("node {node} ({name}) to have {count} allocatable {resource}");
    wait::object(&api, &name, &what, TIMEOUT, |n| {
        let Some(status) = n.and_then(|n| n.status.as_ref()) else {
            return Check::Pending("no node status".into());
        };
        let listed = |list: &Option<std::collections::BTreeMap<String, _>>| {
            list.as_ref()
                .and_then(|l| l.get(&resource))
                .map(|q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| q.0.clone())
        };
        let (allocatable, capacity) = (listed(&status.allocatable), listed(&status.capacity));
        let amount = allocatable.as_deref().and_then(|q| Quantity::parse(q).ok());
        if amount.is_some_and(|q| q == Quantity::from(count)) {
            return Check::Done(());
        }
        Check::Pending(format!(
            "allocatable {resource}: {}, capacity: {}",
            allocatable.as_deref().unwrap_or("not listed"),
            capacity.as_deref().unwrap_or("not listed")
        ))
    })
    .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(allocatable: Option<&str>, own_taint: Option<&str>, ready: bool) -> Node {
        let mut spec = serde_json::json!({});
        if let Some(owner) = own_taint {
            spec = json!({ "taints": [ {
                "key": crate::harness::node_lease::OWN_NODE_TAINT, "value": owner, "effect": "NoSchedule",
            } ] });
        }
        let allocatable = allocatable.map_or(json!({}), |q| json!({ RESOURCE: q }));
        serde_json::from_value(json!({
            "metadata": { "name": "node-1" },
            "spec": spec,
            "status": {
                "allocatable": allocatable,
                "conditions": [ { "type": "Ready", "status": if ready { "True" } else { "False" } } ],
            },
        }))
        .unwrap()
    }

    /// A node still listing the resource with a non-zero amount keeps a new
    /// plugin waiting when the scenario's pods could land on it, and only
    /// then.
    #[test]
    fn a_node_left_advertising_counts_only_where_pods_may_land() {
        assert_eq!(
            advertised(&node(Some("2"), None, true)).as_deref(),
            Some("2")
        );
        assert_eq!(advertised(&node(Some("0"), None, true)), None);
        assert_eq!(advertised(&node(Some("0k"), None, true)), None);
        assert_eq!(advertised(&node(None, None, true)), None);

        assert!(reachable_for(&node(Some("2"), None, true), "ns-a"));
        assert!(reachable_for(&node(Some("2"), Some("ns-a"), true), "ns-a"));
        assert!(!reachable_for(&node(Some("2"), Some("ns-b"), true), "ns-a"));
        assert!(!reachable_for(&node(Some("2"), None, false), "ns-a"));
    }
}
