//! A real node's kubelet or container runtime stopped, started or
//! restarted, and the kubelet known to be back.
//!
//! Why here: scenarios do it on purpose (`When the kubelet on node 1 is
//! restarted`) and the runner does it as a fault the other scenarios must
//! ride out (`--restart-kubelet`); both must agree on when a kubelet is
//! back, or a chaos restart would be over before the kubelet is. A kubelet
//! is back once it has posted the Node's status again: a heartbeat later
//! than the second it was started in ([`posted_status_after`]). The
//! container runtime's return is awaited by the operation itself (its
//! socket answers).
//!
//! A restart as a fault waits first for a moment when no container of a
//! `restartPolicy: Never` pod is starting on the node ([`no_pod_starting`],
//! [`starting`]):
//! the kubelet's exit cuts its CRI calls in flight (`StartError: ...
//! context canceled`, exit code 128), and such a pod then fails for good.
//! That is Kubernetes' behaviour, not a fault it rides out, so a chaos run
//! does not inject it; a scenario that restarts a kubelet on purpose owns
//! its node and knows what it started there.
use std::sync::Arc;
use std::time::Duration;

use dra_e2e_cluster::Cluster;
use dra_e2e_cluster::real_node::init::DaemonOp;
use dra_e2e_kube::node_ready::{node_is_ready_and_schedulable, posted_status_after};
use dra_e2e_kube::wait::{self, Check, WaitError};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::watcher;

/// How long a kubelet started again may take to post the Node's status.
pub const KUBELET_BACK_TIMEOUT: Duration = Duration::from_secs(60);

/// The daemons of a real node the runner operates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    Kubelet,
    Containerd,
}

impl Daemon {
    pub fn name(self) -> &'static str {
        match self {
            Daemon::Kubelet => "kubelet",
            Daemon::Containerd => "containerd",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeDaemonError {
    #[error("{0}")]
    Cluster(String),
    #[error("reading node {node}")]
    ReadNode {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("{wait}\nlast lines of the kubelet's log:\n{log}")]
    NotBack { wait: WaitError, log: String },
    #[error(transparent)]
    Wait(#[from] WaitError),
}

/// Carries out `op` on `daemon` of real node `node`; returns once it is
/// done: a stopped daemon's process gone, a started kubelet posting the
/// Node's status, a started containerd answering. The new process id, if
/// one was started.
pub async fn operate(
    cluster: &Arc<Cluster>,
    node: &str,
    daemon: Daemon,
    op: DaemonOp,
) -> Result<Option<u32>, NodeDaemonError> {
    let started = k8s_openapi::jiff::Timestamp::now();
    let (c, n) = (cluster.clone(), node.to_owned());
    let pid = tokio::task::spawn_blocking(move || c.node_daemon(&n, op, daemon.name()))
        .await
        .map_err(|e| NodeDaemonError::Cluster(format!("the node operation's thread: {e}")))?
        .map_err(|e| NodeDaemonError::Cluster(format!("{e:#}")))?;
    tracing::info!(
        node,
        daemon = daemon.name(),
        ?op,
        ?pid,
        "node daemon operation done"
    );
    if daemon == Daemon::Kubelet && op != DaemonOp::Stop {
        let nodes: Api<Node> = Api::all(cluster.client());
        kubelet_back(&nodes, node, started, op).await?;
    }
    Ok(pid)
}

/// Waits until no pod on `node` with `restartPolicy: Never` is starting
/// ([`starting`]), within `timeout`; a timeout says which pods were.
/// What is left: a pod bound in the moment between this answer and the
/// kubelet's exit, and a sandbox made in the moment before the kubelet
/// says so in the pod's status.
pub async fn no_pod_starting(
    pods: &Api<Pod>,
    node: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let config = watcher::Config::default().fields(&format!(
        "spec.nodeName={node},spec.restartPolicy=Never,status.phase=Pending"
    ));
    let mut none_left = wait::none_left(|p: &Pod| {
        format!(
            "pod {}/{} starting",
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default()
        )
    });
    wait::list(
        pods,
        config,
        &format!("no pod with restartPolicy Never starting on node {node}"),
        timeout,
        |pending: &[Pod]| {
            let starting: Vec<Pod> = pending.iter().filter(|p| starting(p)).cloned().collect();
            none_left(&starting)
        },
    )
    .await
}

/// Whether the kubelet may be starting containers of pending pod `p`: it
/// has not posted the pod's status yet (it is about to start it), or the
/// pod's sandbox is ready (`PodReadyToStartContainers`) and its containers
/// are next. A pod whose sandbox is not ready is not starting containers:
/// it waits for something else (its claims prepared, say), and a sandbox
/// start the kubelet's exit cuts is tried again, whatever the pod's
/// restart policy. Without that exception a busy node, where some pod
/// always waits, never gives a moment to restart in.
pub fn starting(p: &Pod) -> bool {
    let sandbox = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodReadyToStartContainers"));
    sandbox.is_none_or(|c| c.status == "True")
}

/// Waits until the kubelet of `node`, started at `since`, has posted the
/// Node's status.
async fn kubelet_back(
    nodes: &Api<Node>,
    node: &str,
    since: k8s_openapi::jiff::Timestamp,
    op: DaemonOp,
) -> Result<(), WaitError> {
    let what = format!("the kubelet of node {node} to post the Node's status after its {op:?}");
    wait::object(
        nodes,
        node,
        &what,
        KUBELET_BACK_TIMEOUT,
        |n: Option<&Node>| match n.map(|n| posted_status_after(n, since)) {
            None => Check::Pending("no Node object".into()),
            Some(Ok(())) => Check::Done(()),
            Some(Err(seen)) => Check::Pending(seen),
        },
    )
    .await
}

/// Reboots real node `node` and waits until its kubelet reports a new boot
/// ID and the node is Ready and schedulable, as after a real reboot; a
/// node that does not come back is named with the last lines of its
/// kubelet's log.
pub async fn reboot(
    cluster: &Cluster,
    node: &str,
    timeout: Duration,
) -> Result<(), NodeDaemonError> {
    let nodes: Api<Node> = Api::all(cluster.client());
    let before = nodes
        .get(node)
        .await
        .map_err(|source| NodeDaemonError::ReadNode {
            node: node.to_owned(),
            source,
        })?;
    let before = boot_id(&before);
    cluster
        .reboot_node(node)
        .map_err(|e| NodeDaemonError::Cluster(format!("{e:#}")))?;
    let what = format!(
        "node {node} to come back from its reboot (boot ID other than {before}) and be Ready"
    );
    wait::object(&nodes, node, &what, timeout, |n| {
        back_from_reboot(n, &before)
    })
    .await
    .map_err(|wait| {
        let log = cluster.node_log(node).map(|l| {
            let tail: Vec<&str> = l.lines().rev().take(15).collect();
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        });
        NodeDaemonError::NotBack {
            wait,
            log: log.unwrap_or_default(),
        }
    })
}

/// The boot ID the kubelet reports for its node.
fn boot_id(n: &Node) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

/// The named condition of [`reboot`]: the node reports a boot ID other
/// than `before` and is Ready and schedulable.
fn back_from_reboot(n: Option<&Node>, before: &str) -> Check<()> {
    let Some(n) = n else {
        return Check::Pending("node object gone".into());
    };
    let now = boot_id(n);
    if now == before {
        Check::Pending(format!("boot ID still {now}"))
    } else if node_is_ready_and_schedulable(n) {
        Check::Done(())
    } else {
        Check::Pending(format!("boot ID {now}, not Ready yet"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(boot_id: &str, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "status": {
                "conditions": [{"type": "Ready", "status": ready}],
                "nodeInfo": {"bootID": boot_id, "architecture": "", "containerRuntimeVersion": "",
                    "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "",
                    "operatingSystem": "", "osImage": "", "systemUUID": ""},
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_rebooted_node_is_back_with_a_new_boot_id_and_ready() {
        assert!(matches!(
            back_from_reboot(Some(&node("b", "True")), "a"),
            Check::Done(())
        ));
        match back_from_reboot(Some(&node("a", "True")), "a") {
            Check::Pending(seen) => assert_eq!(seen, "boot ID still a"),
            other => panic!("expected pending, got {other:?}"),
        }
        match back_from_reboot(Some(&node("b", "False")), "a") {
            Check::Pending(seen) => assert_eq!(seen, "boot ID b, not Ready yet"),
            other => panic!("expected pending, got {other:?}"),
        }
        assert!(matches!(back_from_reboot(None, "a"), Check::Pending(_)));
    }

    fn pod(conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Pending", "conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_starts_until_its_sandbox_is_known_not_ready() {
        // No status from the kubelet yet: it is about to start the pod.
        let fresh: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert!(starting(&fresh));
        assert!(starting(&pod(
            json!([{"type": "PodScheduled", "status": "True"}])
        )));
        // Sandbox ready: its containers are next.
        assert!(starting(&pod(json!([
            {"type": "PodReadyToStartContainers", "status": "True"}
        ]))));
        // No sandbox yet, and the kubelet said so: waiting on something else.
        assert!(!starting(&pod(json!([
            {"type": "PodReadyToStartContainers", "status": "False"}
        ]))));
    }
}
