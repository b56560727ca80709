//! Optional node operations: what a scenario checks when the kubelet skips
//! preparing or unpreparing a driver's devices.
use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;

use super::World;
use super::claims::claim_name;
use super::params::{ClaimPhrase, DriverRef, NodeSel};
use crate::proto::dra::ClaimRef;

sentences! {
    #[then(expr = "pod {string} got no {string} event")]
    fn no_event(pod: String, reason: String);

    #[when(expr = "the plugin on {node} unprepares {claim} by hand")]
    fn unprepare_by_hand(node: NodeSel, claim: ClaimPhrase);
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
