//! A pod's containers restarted in place: whether they can be (restart
//! policy `Always`, every regular container running), their restart counts
//! before, and the wait until the kubelet has started each one again.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use dra_e2e_kube::wait::{self, WaitError};

/// Why a pod's containers cannot be restarted in place.
#[derive(Debug, thiserror::Error)]
pub enum NotRestartable {
    #[error(
        "pod {pod} has restart policy {policy:?}, so the kubelet would not start its \
         containers again; create it with `| restart policy | Always |`"
    )]
    Policy { pod: String, policy: String },
    #[error("pod {pod} has no container statuses yet: {seen}")]
    NoStatuses { pod: String, seen: String },
    #[error(
        "pod {pod}: containers {not_running:?} are not running, so they cannot be restarted: {seen}"
    )]
    NotRunning {
        pod: String,
        not_running: Vec<String>,
        seen: String,
    },
}

/// The restart count of each regular container of `p` (named `pod`), when
/// the kubelet would start them again once their processes end: the pod's
/// restart policy is `Always` (with `Never` the pod would end, with
/// `OnFailure` a container that exits 0 on SIGTERM would stay exited) and
/// each of them is running.
pub fn restart_counts(pod: &str, p: &Pod) -> Result<BTreeMap<String, i32>, NotRestartable> {
    let policy = p
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_default();
    if policy != "Always" {
        return Err(NotRestartable::Policy {
            pod: pod.to_owned(),
            policy,
        });
    }
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    if statuses.is_empty() {
        return Err(NotRestartable::NoStatuses {
            pod: pod.to_owned(),
            seen: wait::describe_pod(Some(p)),
        });
    }
    let not_running: Vec<String> = statuses
        .iter()
        .filter(|c| c.state.as_ref().is_none_or(|s| s.running.is_none()))
        .map(|c| c.name.clone())
        .collect();
    if !not_running.is_empty() {
        return Err(NotRestartable::NotRunning {
            pod: pod.to_owned(),
            not_running,
            seen: wait::describe_pod(Some(p)),
        });
    }
    Ok(statuses
        .iter()
        .map(|c| (c.name.clone(), c.restart_count))
        .collect())
}

/// Watches pod `pod` until each of its regular containers went past its
/// restart count in `before` and runs, ready, again
/// ([`wait::containers_restarted`]).
pub async fn restarted(
    pods: &Api<Pod>,
    pod: &str,
    before: &BTreeMap<String, i32>,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("the containers of pod {pod} to run again after they were restarted");
    wait::pod(pods, pod, &what, timeout, |p| {
        wait::containers_restarted(p, before)
    })
    .await
}

/// Watches pod `pod` until every container restarted (a reboot ended the
/// old ones: each count, 0 or more, went up) and runs, ready, again: the
/// kubelet made a new sandbox and the claims were prepared for it.
pub async fn run_again_after_reboot(
    pods: &Api<Pod>,
    pod: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("pod {pod} to run again after the reboot");
    let before = BTreeMap::new();
    wait::pod(pods, pod, &what, timeout, |p| {
        wait::containers_restarted(p, &before)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(policy: &str, containers: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"restartPolicy": policy, "containers": []},
            "status": {"phase": "Running", "containerStatuses": containers},
        }))
        .unwrap()
    }

    fn status(name: &str, restarts: i32, running: bool) -> serde_json::Value {
        let state = if running {
            serde_json::json!({"running": {}})
        } else {
            serde_json::json!({"waiting": {"reason": "ContainerCreating"}})
        };
        serde_json::json!({"name": name, "image": "i", "imageID": "", "ready": running,
            "restartCount": restarts, "state": state})
    }

    #[test]
    fn running_containers_of_an_always_pod_give_their_counts() {
        let p = pod(
            "Always",
            serde_json::json!([status("a", 0, true), status("b", 2, true)]),
        );
        assert_eq!(
            restart_counts("p", &p).unwrap(),
            BTreeMap::from([("a".to_owned(), 0), ("b".to_owned(), 2)])
        );
    }

    #[test]
    fn other_policies_no_statuses_and_stopped_containers_are_refused() {
        let never = pod("Never", serde_json::json!([status("a", 0, true)]));
        let e = restart_counts("p", &never).unwrap_err();
        assert!(e.to_string().contains("restart policy \"Never\""), "{e}");
        let none = pod("Always", serde_json::json!([]));
        assert!(matches!(
            restart_counts("p", &none),
            Err(NotRestartable::NoStatuses { .. })
        ));
        let stopped = pod(
            "Always",
            serde_json::json!([status("a", 0, true), status("b", 0, false)]),
        );
        match restart_counts("p", &stopped) {
            Err(NotRestartable::NotRunning { not_running, .. }) => assert_eq!(not_running, ["b"]),
            other => panic!("expected not running, got {other:?}"),
        }
    }
}
