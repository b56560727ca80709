//! Node operations: rebooting a real node, stopping, starting or restarting
//! its kubelet or containerd, and what a scenario checks when the kubelet
//! skips preparing or unpreparing a driver's devices.
use std::time::Duration;

use anyhow::Context as _;
use cucumber::{then, when};
use k8s_openapi::api::core::v1::{Event, Pod};

use super::World;
use super::claims::claim_name;
use super::params::{ClaimPhrase, DriverRef, NodeSel, phrase_words};
use crate::cluster::real_node::init::DaemonOp;
use crate::harness::node_daemon::{self, NodeDaemonError};
use crate::harness::node_loss;
use crate::harness::{containers, events};
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
    let daemon = daemon.daemon();
    for name in node.resolve(w).await? {
        let done = node_daemon::operate(&cluster, &name, daemon, op).await;
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
    for name in node.resolve(w).await? {
        node_loss::reconnect(&cluster, &name).await?;
        w.scenario.node_connected(&name);
    }
    Ok(())
}

async fn reported_unreachable(w: &mut World, node: NodeSel) -> anyhow::Result<()> {
    let client = w.client()?;
    for name in node.resolve(w).await? {
        node_loss::wait_unreachable(&client, &name).await?;
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
    for name in node.resolve(w).await? {
        node_daemon::reboot(&ctx.cluster, &name, REBOOT_TIMEOUT).await?;
    }
    Ok(())
}

/// Every container restarted (a reboot ended the old ones) and running and
/// ready again: the kubelet made a new sandbox and the claims were prepared
/// for it.
async fn runs_again(w: &World, pod: String) -> anyhow::Result<()> {
    containers::run_again_after_reboot(&w.api::<Pod>()?, &pod, RUN_AGAIN_TIMEOUT).await?;
    Ok(())
}

/// Checked once, as upstream lists the events once the pod runs: an event
/// the kubelet recorded before starting the pod has been written by then.
async fn no_event(w: &World, pod: String, reason: String) -> anyhow::Result<()> {
    Ok(events::none_of_pod(&w.api::<Event>()?, &pod, &reason).await?)
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
