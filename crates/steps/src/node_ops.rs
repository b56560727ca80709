//! Node operations: rebooting a real node, stopping, starting or restarting
//! its kubelet or containerd, and what a scenario checks when the kubelet
//! skips preparing or unpreparing a driver's devices.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::ListParams;

use crate::ground::node_ready::node_is_ready_and_schedulable;
use crate::ground::wait::{self, Check};

use super::World;
use super::claims::claim_name;
use super::params::{ClaimPhrase, DriverRef, NodeSel, phrase_words};
use crate::cluster::real_node::init::DaemonOp;
use crate::harness::node_daemon::{self, NodeDaemonError};
use crate::harness::node_loss;
use crate::proto::dra::ClaimRef;

sentences! {
    #[then(expr = "pod {string} got no {string} event")]
    fn no_event(pod: String, reason: String);

    #[when(expr = "the plugin on {node} unprepares {claim} by hand")]
    fn unprepare_by_hand(node: NodeSel, claim: ClaimPhrase);

    #[when(expr = "{node} is rebooted")]
    fn reboot(node: NodeSel);

    #[then(expr = "pod {string} runs again after the reboot")]
    fn runs_again(pod: String);

    /// The node's traffic to the API server cut, as by a network
    /// partition ([`crate::harness::node_loss`]).
    #[when(expr = "{node} is cut off from the control plane")]
    fn cut_off(node: NodeSel);

    #[when(expr = "{node} is connected again")]
    fn connected_again(node: NodeSel);

    #[then(expr = "{node} is reported unreachable")]
    fn reported_unreachable(node: NodeSel);

    /// Through the node's process 1, as a node's init system would. A
    /// started or restarted kubelet is done when it has posted the Node's
    /// status again, containerd when its socket answers; a stopped one when
    /// its process is gone.
    #[when(expr = "(the ){nodedaemon} on {node} is {daemonop}")]
    fn daemon_op(daemon: NodeDaemon, node: NodeSel, op: Operation);
}

/// A daemon of a real node the runner can stop, start and restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeDaemon {
    Kubelet,
    Containerd,
}

phrase_words! {
    NodeDaemon as "nodedaemon", "node daemon" {
        "kubelet" => NodeDaemon::Kubelet,
        "containerd" => NodeDaemon::Containerd,
    }
}

impl NodeDaemon {
    fn daemon(self) -> node_daemon::Daemon {
        match self {
            NodeDaemon::Kubelet => node_daemon::Daemon::Kubelet,
            NodeDaemon::Containerd => node_daemon::Daemon::Containerd,
        }
    }
}

/// What is done to the daemon, as process 1 is asked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation(DaemonOp);

phrase_words! {
    Operation as "daemonop", "daemon operation" {
        "restarted" => Operation(DaemonOp::Restart),
        "stopped" => Operation(DaemonOp::Stop),
        "started" => Operation(DaemonOp::Start),
    }
}

async fn daemon_op(
    w: &mut World,
    daemon: NodeDaemon,
    node: NodeSel,
    Operation(op): Operation,
) -> anyhow::Result<()> {
    let cluster = w.context()?.cluster.clone();
    let nodes: Api<Node> = Api::all(w.client()?);
    let daemon = daemon.daemon();
    for name in node.resolve(w).await? {
        let done = node_daemon::operate(&cluster, &nodes, &name, daemon, op).await;
        // A kubelet that was started but did not post its status in time
        // runs all the same: nothing to start at teardown.
        match (op, &done) {
            (DaemonOp::Stop, Ok(_)) => w.scenario.daemon_stopped(&name, daemon.name()),
            (DaemonOp::Start | DaemonOp::Restart, Ok(_) | Err(NodeDaemonError::Wait(_))) => {
                w.scenario.daemon_started(&name, daemon.name())
            }
            _ => {}
        }
        done?;
    }
    Ok(())
}

async fn cut_off(w: &mut World, node: NodeSel) -> anyhow::Result<()> {
    let cluster = w.context()?.cluster.clone();
    for name in node.resolve(w).await? {
        // Registered first: a cut that half happened is undone too.
        w.scenario.node_cut(&name);
        node_loss::cut_off(&cluster, &name)?;
    }
    Ok(())
}

async fn connected_again(w: &mut World, node: NodeSel) -> anyhow::Result<()> {
    let cluster = w.context()?.cluster.clone();
    let nodes: Api<Node> = Api::all(w.client()?);
    for name in node.resolve(w).await? {
        node_loss::reconnect(&cluster, &nodes, &name).await?;
        w.scenario.node_connected(&name);
    }
    Ok(())
}

async fn reported_unreachable(w: &mut World, node: NodeSel) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(w.client()?);
    for name in node.resolve(w).await? {
        node_loss::wait_unreachable(&nodes, &name).await?;
    }
    Ok(())
}

/// How long a rebooted node may take to report its new boot and be Ready
/// (containerd and the kubelet start again, images are imported again).
const REBOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a pod may take to run again on a rebooted node: new sandbox,
/// the driver's pod first, then the claims prepared again.
const RUN_AGAIN_TIMEOUT: Duration = Duration::from_secs(180);

/// Reboots the nodes one after the other; each is done when the kubelet
/// reports a new boot ID and the node is Ready, as after a real reboot.
async fn reboot(w: &World, node: NodeSel) -> anyhow::Result<()> {
    let ctx = w.context()?;
    let nodes: Api<Node> = Api::all(w.client()?);
    for name in node.resolve(w).await? {
        let before = boot_id(
            &nodes
                .get(&name)
                .await
                .with_context(|| format!("reading node {name}"))?,
        );
        ctx.cluster.reboot_node(&name)?;
        let what = format!(
            "node {name} to come back from its reboot (boot ID other than {before}) and be Ready"
        );
        wait::object(&nodes, &name, &what, REBOOT_TIMEOUT, |n: Option<&Node>| {
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
        })
        .await
        .map_err(|e| {
            let log = ctx.cluster.node_log(&name).map(|l| {
                let tail: Vec<&str> = l.lines().rev().take(15).collect();
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            });
            anyhow::anyhow!(
                "{e}\nlast lines of the kubelet's log:\n{}",
                log.unwrap_or_default()
            )
        })?;
    }
    Ok(())
}

fn boot_id(n: &Node) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

/// Every container restarted (a reboot ended the old ones) and running and
/// ready again: the kubelet made a new sandbox and the claims were prepared
/// for it.
async fn runs_again(w: &World, pod: String) -> anyhow::Result<()> {
    let api: Api<Pod> = w.api()?;
    let what = format!("pod {pod} to run again after the reboot");
    // Every container's count was 0 or more: each must have gone up once.
    let before = Default::default();
    wait::pod(&api, &pod, &what, RUN_AGAIN_TIMEOUT, |p: Option<&Pod>| {
        wait::containers_restarted(p, &before)
    })
    .await?;
    Ok(())
}

/// Checked once, as upstream lists the events once the pod runs: an event
/// the kubelet recorded before starting the pod has been written by then.
async fn no_event(w: &World, pod: String, reason: String) -> anyhow::Result<()> {
    let api = w.api::<Event>()?;
    let lp = ListParams::default().fields(&format!(
        "involvedObject.name={pod},involvedObject.kind=Pod"
    ));
    let events = api
        .list(&lp)
        .await
        .with_context(|| format!("listing the events of pod {pod}"))?;
    let found: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason.as_str()))
        .map(|e| e.message.clone().unwrap_or_default())
        .collect();
    if !found.is_empty() {
        bail!(
            "expected no {reason} event on pod {pod}, found {}: {}",
            found.len(),
            found.join(" | ")
        );
    }
    Ok(())
}

/// Upstream's `UnprepareClaim` after a pod whose claim the kubelet does not
/// unprepare: the plugin forgets the claim (by its UID on the API server)
/// without a `NodeUnprepareResources` call, so teardown finds nothing left.
async fn unprepare_by_hand(w: &World, node: NodeSel, claim: ClaimPhrase) -> anyhow::Result<()> {
    let name = claim_name(w, &claim).await?;
    let uid = w
        .claim(&name)
        .await?
        .metadata
        .uid
        .with_context(|| format!("claim {name} has no UID"))?;
    let driver = w.driver(&DriverRef::The)?;
    for n in node.resolve(w).await? {
        let claim = ClaimRef {
            namespace: w.namespace.clone(),
            name: name.clone(),
            uid: uid.clone(),
        };
        driver.unprepare_directly(&n, claim).await?;
    }
    Ok(())
}
