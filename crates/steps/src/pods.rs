//! Pods: creating them in the shapes DRA scenarios need, acting on them, and
//! checking their state, their containers' env and their events.
//!
//! Creating them (`creation`), their state (`state`) and what their
//! containers got (`containers`) are modules of their own; deleting them
//! stays here, beside the wait every module shares.
use std::time::Duration;

use anyhow::Context as _;
use cucumber::when;
use k8s_openapi::api::core::v1::Pod;

use super::World;
use super::params::{ClaimPhrase, PodState};
use crate::harness::claims::generated_claim;
use crate::harness::pods;

mod containers;
mod creation;
mod state;

pub(crate) use containers::settled_containers;
pub(crate) use containers::{gets_requests, no_extended_claim};
pub use state::Readiness;

sentences! {
    #[when(expr = "pod {string} is deleted")]
    fn pod_deleted(name: String);

    #[when(expr = "pod {string} is force-deleted")]
    fn pod_force_deleted(name: String);

    #[when("all pods are deleted")]
    fn all_pods_deleted();

    #[when(expr = "the status of pod {string} marks its claim as not needed")]
    fn claim_not_needed(name: String);
}

/// Upstream's PodStart timeout.
pub const POD_TIMEOUT: Duration = Duration::from_secs(300);

pub(crate) async fn wait_pod(w: &World, name: &str, state: PodState) -> anyhow::Result<()> {
    pods::until(&w.api::<Pod>()?, name, state, POD_TIMEOUT).await?;
    Ok(())
}

/// Remembers the claims generated for the pod, so "the claim of pod" and
/// "the extended resource claim of pod" still resolve once it is gone.
pub(crate) async fn remember_generated_claims(w: &mut World, name: &str) -> anyhow::Result<()> {
    let found = w
        .api::<Pod>()?
        .get_opt(name)
        .await
        .with_context(|| format!("reading pod {name}"))?;
    if let Some(pod) = found {
        if let Some(claim) = generated_claim(&pod, false) {
            w.claims
                .generated
                .insert(ClaimPhrase::OfPod(name.to_owned()), claim);
        }
        if let Some(claim) = generated_claim(&pod, true) {
            w.claims
                .generated
                .insert(ClaimPhrase::ExtendedOfPod(name.to_owned()), claim);
        }
    }
    Ok(())
}

pub(crate) async fn delete_pod(w: &mut World, name: &str, force: bool) -> anyhow::Result<()> {
    remember_generated_claims(w, name).await?;
    pods::delete(&w.api::<Pod>()?, name, force).await?;
    Ok(())
}

async fn pod_deleted(w: &mut World, name: String) -> anyhow::Result<()> {
    delete_pod(w, &name, false).await?;
    wait_pod(w, &name, PodState::Gone).await
}

async fn pod_force_deleted(w: &mut World, name: String) -> anyhow::Result<()> {
    delete_pod(w, &name, true).await?;
    wait_pod(w, &name, PodState::Gone).await
}

async fn all_pods_deleted(w: &mut World) -> anyhow::Result<()> {
    let names: Vec<String> = w.scenario.pods().map(|p| p.name.clone()).collect();
    for p in &names {
        delete_pod(w, p, false).await?;
    }
    for p in &names {
        wait_pod(w, p, PodState::Gone).await?;
    }
    Ok(())
}

async fn claim_not_needed(w: &World, name: String) -> anyhow::Result<()> {
    let record = w
        .scenario
        .pods()
        .find(|p| p.name == name)
        .with_context(|| format!("the scenario created no pod {name}"))?;
    pods::mark_claims_not_needed(&w.api::<Pod>()?, &name, &record.pod_claims).await?;
    Ok(())
}
