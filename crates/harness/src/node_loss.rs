//! A node lost and back: cut off from the control plane while a scenario
//! runs, and what the control plane says of it meanwhile.
//!
//! Why: a node that drops off (a cable, a switch, a kubelet host frozen) is
//! something DRA must live through. The node lifecycle controller marks
//! the Node `Ready=Unknown` once its Lease has gone unrenewed for the
//! controller's grace period (50 s by default) and taints it
//! `node.kubernetes.io/unreachable`; the pods on it stay bound, their
//! claims allocated and reserved, and a pod deleted meanwhile stays until
//! its kubelet, back, stops it and unprepares its claims. The local cluster
//! cuts a node off for real ([`Cluster::set_node_cut`]): a real node's
//! packets to and from the API server are dropped, a simulated node's
//! requests and watches stall. The node's unix sockets are not cut: a
//! driver's process on the node goes on talking to its kubelet.
//!
//! The waits are on what the control plane writes (the Node's condition and
//! taints), with deadlines that name what they last saw. What becomes of a
//! workload's pod on the lost node, evicted and made again elsewhere by
//! its controller, is [`replacement`].
pub mod replacement;

use std::time::Duration;

use dra_e2e_cluster::Cluster;
use dra_e2e_kube::node_ready::{node_is_ready_and_schedulable, reported_unreachable};
use dra_e2e_kube::wait::{self, Check, WaitError};
use k8s_openapi::api::core::v1::Node;
use kube::Api;

/// How long the control plane may take to report a cut node unreachable:
/// the node lifecycle controller's grace period (50 s) after the last
/// renewal (up to 10 s before the cut), its 5 s monitor period, and room.
pub const UNREACHABLE_TIMEOUT: Duration = Duration::from_secs(150);
/// How long a reconnected node's kubelet may take to post Ready again (it
/// posts every 10 s) and the controller to lift the taints.
pub const BACK_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
pub enum NodeLossError {
    #[error("{0}")]
    Cluster(String),
    #[error(transparent)]
    Wait(#[from] WaitError),
}

/// Cuts `node` off the control plane; returns once it is cut.
pub fn cut_off(cluster: &Cluster, node: &str) -> Result<(), NodeLossError> {
    cluster
        .set_node_cut(node, true)
        .map_err(|e| NodeLossError::Cluster(format!("{e:#}")))
}

/// Waits until the control plane reports `node` unreachable.
pub async fn wait_unreachable(client: &kube::Client, node: &str) -> Result<(), NodeLossError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let what = format!("node {node} to be reported unreachable (Ready Unknown, tainted)");
    wait::object(
        &nodes,
        node,
        &what,
        UNREACHABLE_TIMEOUT,
        |n: Option<&Node>| match n.map(reported_unreachable) {
            None => Check::Pending("no Node object".into()),
            Some(Ok(())) => Check::Done(()),
            Some(Err(now)) => Check::Pending(now),
        },
    )
    .await?;
    Ok(())
}

/// Connects `node` again and waits until it is Ready and schedulable again
/// (its kubelet posted Ready, the controller lifted the taints).
pub async fn reconnect(cluster: &Cluster, node: &str) -> Result<(), NodeLossError> {
    cluster
        .set_node_cut(node, false)
        .map_err(|e| NodeLossError::Cluster(format!("{e:#}")))?;
    let nodes: Api<Node> = Api::all(cluster.client());
    let what = format!("node {node} to be Ready and schedulable again once reconnected");
    wait::object(
        &nodes,
        node,
        &what,
        BACK_TIMEOUT,
        |n: Option<&Node>| match n {
            None => Check::Pending("no Node object".into()),
            Some(n) if node_is_ready_and_schedulable(n) => Check::Done(()),
            Some(n) => Check::Pending(match reported_unreachable(n) {
                Ok(()) => "still reported unreachable".to_owned(),
                Err(now) => now,
            }),
        },
    )
    .await?;
    Ok(())
}
