//! Deleting a pod of the driver under test and holding the driver to
//! letting its claims go: the pod is gone once the kubelet had the claims
//! unprepared, and where the runner sees the driver's answers, no CDI spec
//! is left behind and a repeated unprepare is answered the same. The pod's
//! node and claims are noted before the deletion, as a claim from a
//! template may be gone after it.
use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::Pod;

use super::claim_uids;
use crate::World;
use crate::ground::wait::PodState;
use crate::harness::pods;
use crate::harness::under_test::device_check;
use crate::params::{DriverRef, Method};
use crate::plugin::calls::CallOutcome;

sentences! {
    #[when(expr = "pod {string} is deleted and the driver lets its claims go")]
    fn deleted_and_let_go(pod: String);

    /// Deletes the pod without waiting, while a NodePrepareResources of
    /// the driver is in flight on its node (stalled by `When
    /// NodePrepareResources is stalled on node N`): refused when none is,
    /// or where the runner does not see the driver's calls (tag the
    /// scenario `@Interposed`). `Then the driver lets the claims of pod ...
    /// go` checks the rest.
    #[when(expr = "pod {string} is deleted while its claims are being prepared")]
    fn deleted_while_preparing(pod: String);

    /// Deletes the pod without waiting for it to go (its node may be away
    /// and the pod stay until its kubelet lets it go); its node and claims
    /// are noted first for `Then the driver lets the claims of pod ... go`.
    #[when(expr = "pod {string} is deleted without waiting")]
    fn deleted_without_waiting(pod: String);

    /// What `When pod ... is deleted and the driver lets its claims go`
    /// waits for and checks, for a pod deleted before by the pack's own
    /// deletion steps.
    #[then(expr = "the driver lets the claims of pod {string} go")]
    fn lets_claims_go(pod: String);
}

/// How long a deleted pod may take to be gone: its containers stop at once
/// on SIGTERM, so what is left is the kubelet unpreparing its claims.
const UNPREPARE_TIMEOUT: Duration = Duration::from_secs(120);

/// A pod the pack deleted: where it ran and its claims (name, UID), read
/// before the deletion, as a claim from a template may be gone after it.
#[derive(Debug, Clone)]
pub struct DeletedPod {
    node: String,
    claims: Vec<(String, String)>,
}

/// Deletes the pod and waits until it is gone; see [`lets_claims_go`].
async fn deleted_and_let_go(w: &mut World, pod: String) -> anyhow::Result<()> {
    delete_noting(w, &pod).await?;
    lets_claims_go(w, pod).await
}

async fn deleted_without_waiting(w: &mut World, pod: String) -> anyhow::Result<()> {
    delete_noting(w, &pod).await
}

/// Notes the pod's node and claims, then deletes it without waiting.
async fn delete_noting(w: &mut World, pod: &str) -> anyhow::Result<()> {
    let before = before_deletion(w, pod).await?;
    crate::pods::delete_pod(w, pod, false).await?;
    w.conformance.deleted_pods.insert(pod.to_owned(), before);
    Ok(())
}

/// Notes the node and claims of a pod someone else deleted (a controller
/// evicting it) while it is still there, for `Then the driver lets the
/// claims of pod ... go`.
pub(crate) async fn note_deleted(w: &mut World, pod: &str) -> anyhow::Result<()> {
    let before = before_deletion(w, pod).await?;
    w.conformance.deleted_pods.insert(pod.to_owned(), before);
    Ok(())
}

async fn before_deletion(w: &World, pod: &str) -> anyhow::Result<DeletedPod> {
    let before = w.pod(pod).await?;
    let node = before
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let claims = claim_uids(w, &before).await?;
    Ok(DeletedPod { node, claims })
}

/// The deletion is what the scenario says only if a prepare is in flight
/// when it happens: without one, the scenario would test an early deletion
/// at best.
async fn deleted_while_preparing(w: &mut World, pod: String) -> anyhow::Result<()> {
    let current = w.pod(&pod).await?;
    let Some(node) = current.spec.as_ref().and_then(|s| s.node_name.clone()) else {
        bail!("pod {pod} is not scheduled yet: no claim of it can be being prepared");
    };
    let calls = w.calls_of(&DriverRef::The).with_context(|| {
        "the runner does not see the calls of the driver under test, so it cannot tell a \
         prepare in flight; tag the scenario @Interposed so that it is skipped"
    })?;
    let prepare = Method::NodePrepareResources;
    let in_flight = calls
        .log(&node)
        .iter()
        .filter(|r| prepare.paths().contains(&r.method.as_str()))
        .filter(|r| r.outcome == CallOutcome::InProgress)
        .count();
    if in_flight == 0 {
        bail!(
            "no {prepare} of driver {} is in flight on node {node}; stall it first (`When \
             {prepare} is stalled on node N`, `Then {prepare} is called on node N`)",
            w.driver_name(&DriverRef::The)?
        );
    }
    delete_noting(w, &pod).await
}

/// Waits until the deleted pod is gone. The kubelet finishes a pod only
/// once the driver unprepared its claims, so a pod that stays terminating
/// is the driver's failure, and the message says so.
async fn lets_claims_go(w: &World, pod: String) -> anyhow::Result<()> {
    let Some(DeletedPod { node, claims }) = w.conformance.deleted_pods.get(&pod).cloned() else {
        bail!(
            "pod {pod} was not deleted by `When pod \"{pod}\" is deleted without waiting` or \
             `... is deleted while its claims are being prepared` (nor evicted by `Then pod \
             \"{pod}\" is evicted by the taint eviction controller`), which note its node and claims \
             before deleting it (a claim from a template may be gone afterwards)"
        );
    };
    let api = w.api::<Pod>()?;
    let gone = pods::until(&api, &pod, PodState::Gone, UNPREPARE_TIMEOUT).await;
    if let Err(e) = gone {
        bail!(
            "pod {pod} on node {node} was not gone {}s after its deletion: the kubelet finishes \
             a pod once driver {} has unprepared its claims (NodeUnprepareResources failing or \
             hanging?); {e}",
            UNPREPARE_TIMEOUT.as_secs(),
            w.driver_name(&DriverRef::The)?
        );
    }
    spec_left_after_unprepare(w, &node, &claims).await?;
    unprepare_asked_again(w, &node, &claims)
}

/// Behind the interposer: each unprepare was asked a second time, and
/// must have been answered the same (the kubelet repeats unprepare until
/// it succeeds, and after its own restart).
fn unprepare_asked_again(w: &World, node: &str, claims: &[(String, String)]) -> anyhow::Result<()> {
    let ctx = w.context()?;
    let Some(d) = ctx
        .under_test
        .interposed
        .as_ref()
        .and_then(|i| i.disagreements(node))
    else {
        return Ok(());
    };
    let found: Vec<String> = claims.iter().flat_map(|(_, uid)| d.of_claim(uid)).collect();
    if !found.is_empty() {
        bail!("{}", found.join("; "));
    }
    Ok(())
}

/// Where the runner sees the driver's answers and reaches the node's CDI
/// directory: once the driver unprepared a claim, no spec there may still
/// define the CDI devices it answered for it. A spec left behind is a
/// device the next container of any claim could still be given.
async fn spec_left_after_unprepare(
    w: &World,
    node: &str,
    claims: &[(String, String)],
) -> anyhow::Result<()> {
    let (Ok(prepared), Ok(cdi)) = (
        w.prepared_of(&DriverRef::The, node),
        w.cdi_of(&DriverRef::The, node),
    ) else {
        return Ok(());
    };
    let still_prepared: BTreeSet<String> = prepared.claims().into_iter().map(|c| c.uid).collect();
    let ids: Vec<(String, Vec<String>)> = claims
        .iter()
        .filter(|(_, uid)| !still_prepared.contains(uid))
        .filter_map(|(name, uid)| {
            let ids = prepared
                .answered(uid)?
                .into_iter()
                .flat_map(|d| d.cdi_device_ids)
                .collect();
            Some((name.clone(), ids))
        })
        .collect();
    if ids
        .iter()
        .all(|(_, i): &(String, Vec<String>)| i.is_empty())
    {
        return Ok(());
    }
    let specs = cdi
        .specs()
        .await
        .with_context(|| format!("reading the CDI specs on node {node}"))?;
    for (claim, ids) in ids {
        let left = device_check::still_defined(&specs, &ids);
        if !left.is_empty() {
            bail!(
                "driver {} unprepared claim {claim} on node {node}, yet its CDI spec is still \
                 there: {}",
                w.driver_name(&DriverRef::The)?,
                left.join(", ")
            );
        }
    }
    Ok(())
}
