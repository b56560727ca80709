//! Upstream's sample device plugin beside DRA: its DaemonSet on some of a
//! scenario's nodes and the wait until it runs there, the plugin of earlier
//! scenarios gone first (its resource name is fixed), and the extended
//! resource a node lists as allocatable.
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::json;

use dra_e2e_cluster::images::builtin::SAMPLE_DEVICE_PLUGIN_IMAGE;
use dra_e2e_kube::node_ready::{node_is_ready_and_schedulable, owner};
use dra_e2e_kube::wait::{self, Check, WaitError, describe_pod};

use crate::quantity::Quantity;

/// The DaemonSet's name and its label, as in upstream's manifest; the label
/// is what upstream's uninstall deletes by.
pub const NAME: &str = "sample-device-plugin";
pub const LABEL: (&str, &str) = ("k8s-app", "sample-device-plugin");
/// The extended resource the sample plugin advertises (hard-coded in it).
pub const RESOURCE: &str = "example.com/resource";

/// Upstream's `deployDevicePlugin` DaemonSet: the sample plugin, whose pods
/// may run only on `nodes`.
pub fn daemon_set(nodes: &[String]) -> Result<DynamicObject, serde_json::Error> {
    let (key, value) = LABEL;
    serde_json::from_value(json!({
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
}

/// The DaemonSets of `namespace` as manifest objects, and their resource,
/// for creating [`daemon_set`] the way a scenario creates manifests.
pub fn daemon_sets(client: &kube::Client, namespace: &str) -> (Api<DynamicObject>, ApiResource) {
    let resource = ApiResource::erase::<DaemonSet>(&());
    let api = Api::namespaced_with(client.clone(), namespace, &resource);
    (api, resource)
}

/// Watches the plugin's pods in `pods`' namespace until one runs on each of
/// `nodes`; `on` says which nodes those are, for the message.
pub async fn running_on(
    pods: &Api<Pod>,
    nodes: &[String],
    on: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let (key, value) = LABEL;
    let config = watcher::Config::default().labels(&format!("{key}={value}"));
    let what = format!(
        "the sample device plugin to run on {on} ({})",
        nodes.join(", ")
    );
    wait::list(pods, config, &what, timeout, |pods| {
        runs_on_all(pods, nodes)
    })
    .await
}

/// The named condition of [`running_on`].
fn runs_on_all(pods: &[Pod], nodes: &[String]) -> Check<()> {
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
}

/// The plugin's resource name is fixed, so upstream runs its scenarios one
/// at a time. Here a scenario's teardown runs beside the next one: before a
/// plugin is deployed on `plugin_nodes` by scenario `own` (its namespace),
/// the plugin of an earlier scenario must be gone and no node but the new
/// plugin's may still advertise its resource, or the scheduler would send
/// pods there.
pub async fn settled(
    client: &kube::Client,
    own: &str,
    plugin_nodes: &[String],
    timeout: Duration,
) -> Result<(), WaitError> {
    let pods: Api<Pod> = Api::all(client.clone());
    wait::list(
        &pods,
        watcher::Config::default(),
        "the sample device plugin of earlier scenarios to be gone",
        timeout,
        |pods| others_gone(pods, own),
    )
    .await?;
    // Every node the scheduler may pick for the scenario's pods, not only the
    // scenario's own: a pod without a node selector goes wherever the
    // resource is listed, and a node an earlier scenario's plugin ran on
    // lists it as allocatable until its kubelet sees the plugin gone (seen
    // on six real nodes: the pod landed there and was rejected, "no healthy
    // devices"). Another scenario's own node is out of reach (its taint).
    let nodes: Api<Node> = Api::all(client.clone());
    let what = format!("the nodes without the plugin to advertise no {RESOURCE} any more");
    wait::list(
        &nodes,
        watcher::Config::default(),
        &what,
        timeout,
        |nodes| none_advertising(nodes, own, plugin_nodes),
    )
    .await
}

/// The first named condition of [`settled`]: no pod of another namespace
/// runs the plugin's image (by image, not label: scenarios may deploy the
/// plugin from manifests of their own).
fn others_gone(pods: &[Pod], own: &str) -> Check<()> {
    let runs_plugin = |p: &Pod| {
        p.spec.as_ref().is_some_and(|s| {
            s.containers
                .iter()
                .any(|c| c.image.as_deref() == Some(SAMPLE_DEVICE_PLUGIN_IMAGE))
        })
    };
    let left: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() != Some(own) && runs_plugin(p))
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
}

/// The second named condition of [`settled`]: no node but `plugin_nodes`
/// that scenario `own`'s pods may land on advertises the resource.
fn none_advertising(nodes: &[Node], own: &str, plugin_nodes: &[String]) -> Check<()> {
    let left: Vec<String> = nodes
        .iter()
        .filter(|n| {
            n.metadata
                .name
                .as_ref()
                .is_some_and(|name| !plugin_nodes.contains(name))
        })
        .filter(|n| reachable_for(n, own))
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
}

/// Whether the scheduler may put a pod of scenario `namespace` on the node.
fn reachable_for(n: &Node, namespace: &str) -> bool {
    let owned_by_other = owner(n).is_some_and(|o| o != namespace);
    node_is_ready_and_schedulable(n) && !owned_by_other
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

/// Watches Node `name` (node `index` of the scenario) until it lists
/// `count` of `resource` as allocatable. Upstream reads the quantity in the
/// Node's allocatable, -1 when it is not listed: a resource the kubelet
/// stopped advertising stays listed with 0, which is what 0 waits for.
pub async fn allocatable(
    client: &kube::Client,
    index: usize,
    name: &str,
    count: i64,
    resource: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let what = format!("node {index} ({name}) to have {count} allocatable {resource}");
    wait::object(&nodes, name, &what, timeout, |n| {
        lists_allocatable(n, count, resource)
    })
    .await
}

/// The named condition of [`allocatable`].
fn lists_allocatable(n: Option<&Node>, count: i64, resource: &str) -> Check<()> {
    let Some(status) = n.and_then(|n| n.status.as_ref()) else {
        return Check::Pending("no node status".into());
    };
    let listed = |list: &Option<std::collections::BTreeMap<String, _>>| {
        list.as_ref()
            .and_then(|l| l.get(resource))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(allocatable: Option<&str>, own_taint: Option<&str>, ready: bool) -> Node {
        let mut spec = json!({});
        if let Some(owner) = own_taint {
            spec = json!({ "taints": [ {
                "key": crate::node_lease::OWN_NODE_TAINT, "value": owner, "effect": "NoSchedule",
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

        let nodes = [node(Some("2"), None, true)];
        assert!(matches!(
            none_advertising(&nodes, "ns-a", &["node-1".to_owned()]),
            Check::Done(())
        ));
        match none_advertising(&nodes, "ns-a", &[]) {
            Check::Pending(seen) => assert_eq!(seen, "node-1 allocatable 2"),
            other => panic!("expected pending, got {other:?}"),
        }
    }

    #[test]
    fn allocatable_is_compared_as_a_quantity() {
        let n = node(Some("2"), None, true);
        assert!(matches!(
            lists_allocatable(Some(&n), 2, RESOURCE),
            Check::Done(())
        ));
        match lists_allocatable(Some(&n), 0, RESOURCE) {
            Check::Pending(seen) => {
                assert_eq!(
                    seen,
                    format!("allocatable {RESOURCE}: 2, capacity: not listed")
                )
            }
            other => panic!("expected pending, got {other:?}"),
        }
        assert!(matches!(
            lists_allocatable(None, 0, RESOURCE),
            Check::Pending(_)
        ));
    }

    fn pod(namespace: &str, node: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": namespace },
            "spec": { "nodeName": node, "containers": [ { "name": NAME, "image": SAMPLE_DEVICE_PLUGIN_IMAGE } ] },
            "status": { "phase": phase },
        }))
        .unwrap()
    }

    #[test]
    fn the_plugin_runs_on_every_node_and_no_earlier_one_is_left() {
        let nodes = ["a".to_owned(), "b".to_owned()];
        let pods = [pod("ns", "a", "Running"), pod("ns", "b", "Pending")];
        match runs_on_all(&pods, &nodes) {
            Check::Pending(seen) => assert!(seen.starts_with("not running on [\"b\"]"), "{seen}"),
            other => panic!("expected pending, got {other:?}"),
        }
        assert!(matches!(
            runs_on_all(&pods[..1], &nodes[..1]),
            Check::Done(())
        ));
        assert!(matches!(others_gone(&pods, "ns"), Check::Done(())));
        match others_gone(&pods, "other") {
            Check::Pending(seen) => assert_eq!(seen, "its pods ns/p, ns/p"),
            other => panic!("expected pending, got {other:?}"),
        }
    }
}
