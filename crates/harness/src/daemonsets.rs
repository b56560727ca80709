//! A scenario's own DaemonSets: a pod of one running on a node, and the
//! DaemonSet's status saying all of its pods are ready.
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;

use dra_e2e_kube::wait::{self, Check, WaitError};

/// Whether `pod` is one of DaemonSet `name`'s, running on `node`.
fn runs_for_on(pod: &Pod, name: &str, node: &str) -> bool {
    let owned = pod
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.kind == "DaemonSet" && o.name == name));
    owned
        && pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Watches the namespace's pods until one of DaemonSet `name`'s runs on
/// `node`.
pub async fn pod_running_on(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("a running pod of daemonset {name} on {node}");
    wait::list(pods, watcher::Config::default(), &what, timeout, |list| {
        if list.iter().any(|p| runs_for_on(p, name, node)) {
            Check::Done(())
        } else {
            Check::Pending(format!("{} pods in the namespace", list.len()))
        }
    })
    .await
}

/// Waits until DaemonSet `name` has at least one pod ready and all it
/// schedules ready.
pub async fn status_consistent(
    daemonsets: &Api<DaemonSet>,
    name: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("daemonset {name} status to be consistent");
    wait::object(daemonsets, name, &what, timeout, |d| {
        match d.and_then(|d| d.status.as_ref()) {
            Some(s) if s.number_ready >= 1 && s.number_ready == s.desired_number_scheduled => {
                Check::Done(())
            }
            s => Check::Pending(format!("{s:?}")),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner: &str, node: &str, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner, "uid": "u"}
            ]},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    #[test]
    fn only_a_running_pod_of_that_daemonset_on_that_node_counts() {
        assert!(runs_for_on(&pod("ds", "n1", "Running"), "ds", "n1"));
        assert!(!runs_for_on(&pod("other", "n1", "Running"), "ds", "n1"));
        assert!(!runs_for_on(&pod("ds", "n2", "Running"), "ds", "n1"));
        assert!(!runs_for_on(&pod("ds", "n1", "Pending"), "ds", "n1"));
        assert!(!runs_for_on(&Pod::default(), "ds", "n1"));
    }
}
