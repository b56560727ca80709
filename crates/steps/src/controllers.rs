//! Pods of controllers: a ReplicaSet that adopts a pod the scenario made,
//! the pods it runs, and a pod's eviction from a lost node by the taint
//! eviction controller ([`crate::harness::node_loss::replacement`]).
use cucumber::{then, when};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::World;
use super::params::NodeSel;
use crate::harness::node_loss::replacement;

sentences! {
    /// The pod keeps its name, so the steps about a named pod and its
    /// claim go on working on it; the pods the ReplicaSet makes in its
    /// place are found through the ReplicaSet.
    #[when(expr = "replica set {string} adopts pod {string}")]
    fn adopts(name: String, pod: String);

    #[then(expr = "replica set {string} has {int} running pod(s) on {node}")]
    fn running_on(name: String, count: usize, node: NodeSel);

    #[then(expr = "pod {string} is evicted by the taint eviction controller")]
    fn evicted(pod: String);
}

/// Labels the pod, creates the ReplicaSet (its cleanup on the stack, so
/// teardown deletes it before the pods and no pod is made again) and waits
/// until it controls the pod.
async fn adopts(w: &mut World, name: String, pod: String) -> anyhow::Result<()> {
    let pods = w.api::<Pod>()?;
    let set = replacement::adopting(&pods, &pod, &name).await?;
    super::workloads::create_namespaced(w, &set).await?;
    replacement::wait_adopted(&pods, &w.api::<ReplicaSet>()?, &pod, &name).await?;
    Ok(())
}

async fn running_on(
    w: &mut World,
    name: String,
    count: usize,
    node: NodeSel,
) -> anyhow::Result<()> {
    let [node] = node
        .resolve(w)
        .await?
        .try_into()
        .map_err(|nodes: Vec<String>| {
            anyhow::anyhow!(
                "a replica set's pods are counted on one node, not on {}",
                nodes.join(", ")
            )
        })?;
    let (pods, sets, claims) = (
        w.api::<Pod>()?,
        w.api::<ReplicaSet>()?,
        w.api::<ResourceClaim>()?,
    );
    replacement::wait_running_on(&pods, &sets, &claims, &name, &node, count).await?;
    Ok(())
}

/// Once evicted the pod is still there (its kubelet has not let it go):
/// its claims and node are noted now, for the steps about its claim once
/// it is gone (`the claim of pod ...`, `the driver lets the claims of pod
/// ... go`).
async fn evicted(w: &mut World, pod: String) -> anyhow::Result<()> {
    replacement::wait_evicted(&w.api::<Pod>()?, &pod).await?;
    super::pods::remember_generated_claims(w, &pod).await?;
    super::under_test::note_deleted(w, &pod).await
}
