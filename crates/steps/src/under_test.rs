//! The driver under test: the steps of the conformance pack that work on
//! any driver, the suite's own or one a profile names.
//!
//! They check only what the cluster shows (slices, the kubelet's
//! registration, containers' environments, the driver's pods), never the
//! hosted plugin's own records, so the same sentence holds a real driver to
//! the same standard as the suite's.
//!
//! The pack's steps are grouped by what they hold the driver to: the
//! devices it publishes (`publishing`), the devices in its pods'
//! containers (`container_devices`) and letting claims go when a pod is
//! deleted (`deletion`).
use std::collections::BTreeSet;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::World;
use super::drivers::default_nodes;
use super::params::{DriverPhrase, DriverRef};
use crate::ground::wait::PodState;
use crate::harness::under_test::pack;
use crate::plugin::fault::Faults;
use crate::profile::{Deployment, Fault};

mod container_devices;
mod deletion;
mod publishing;

pub use deletion::DeletedPod;
pub(crate) use deletion::note_deleted;
use publishing::wait_devices;

/// What the conformance pack's steps remember between steps: the devices
/// the driver published as noted (`publishing`), so that later steps can
/// hold it to the same devices, and the pods the pack deleted with their
/// node and claims as they were before (`deletion`), since a claim from a
/// template may be gone once its pod is.
#[derive(Debug, Default)]
pub struct ConformanceMemory {
    /// Devices per node of the driver as "the driver's devices are noted" saw them.
    pub noted_devices: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// Pods the conformance pack deleted, with their node and claims as
    /// they were before the deletion, for "the driver lets the claims of
    /// pod ... go".
    pub deleted_pods: std::collections::BTreeMap<String, DeletedPod>,
}

sentences! {
    #[given("the driver under test")]
    fn the_driver_under_test(step: Step<'_>);

    #[then(expr = "pod {string} runs without a {string} event")]
    fn runs_without_event(pod: String, reason: String);
}

/// The suite's own driver gets a hosted instance of its own with the
/// profile's devices per node and a class, as any scenario's driver; any
/// other is the run's installation, used with the run's class.
async fn the_driver_under_test(w: &mut World, step: &Step) -> anyhow::Result<()> {
    let ctx = w.context()?.clone();
    let under = &ctx.under_test;
    default_nodes(w).await?;
    if under.profile.deployment == Deployment::Builtin {
        let faults = &under.profile.faults;
        let n = under.profile.devices_per_node.unwrap_or(4);
        let resources = if faults.contains(&Fault::NoDevices) {
            "no devices".to_owned()
        } else {
            format!("{n} devices per node")
        };
        let phrase: DriverPhrase = resources.parse().map_err(anyhow::Error::msg)?;
        let mut options = super::drivers::options_from(w, &phrase, step, String::new())?;
        options.faults = Faults::new(faults.iter().copied());
        w.add_driver_on(DriverRef::The, options, !phrase.start_later, None)
            .await?;
        return super::drivers::device_class(w, Default::default()).await;
    }
    let class = under
        .class
        .clone()
        .context("the run has no DeviceClass for its driver under test")?;
    w.scenario
        .use_driver_under_test(DriverRef::The, under.driver_name(), &class);
    // Behind the interposer, the counts and injections start with the
    // scenario (interposed scenarios run alone: @serial).
    if let Some(i) = &under.interposed {
        i.reset();
    }
    // An earlier scenario may have restarted the driver: its devices must
    // be back before this one counts on them.
    let nodes = w.nodes.clone();
    wait_devices(w, &nodes, |seen| {
        let empty: Vec<&String> = nodes
            .iter()
            .filter(|n| seen.get(*n).is_none_or(|d| d.is_empty()))
            .collect();
        empty
            .is_empty()
            .then_some(())
            .ok_or_else(|| format!("no devices on {empty:?}"))
    })
    .await
}

/// The pod runs, and fails at once when the event appears first: a driver
/// whose preparation fails is named by the kubelet's event, not left to a
/// timeout.
async fn runs_without_event(w: &World, pod: String, reason: String) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Event;
    let events = w.api::<Event>()?;
    let failed = pack::event_of_pod(&events, &pod, &reason, super::pods::POD_TIMEOUT);
    tokio::select! {
        r = super::pods::wait_pod(w, &pod, PodState::Running) => r,
        r = failed => {
            let message = r?;
            let node = w.pod(&pod).await.ok().and_then(|p| p.spec?.node_name).unwrap_or_default();
            bail!(
                "pod {pod} on node {node} got a {reason} event before it ran (driver {}): {message}",
                w.driver_name(&DriverRef::The)?
            )
        }
    }
}

/// Every ResourceClaim of the scenario's namespace.
pub(super) async fn scenario_claims(w: &World) -> anyhow::Result<Vec<ResourceClaim>> {
    Ok(pack::claims_of_namespace(&w.client()?, &w.namespace).await?)
}

/// The UIDs of the claims of `pod`, by name.
pub(super) async fn claim_uids(w: &World, pod: &Pod) -> anyhow::Result<Vec<(String, String)>> {
    let claims = scenario_claims(w).await?;
    let names: BTreeSet<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone())
        .chain(
            pod.status
                .iter()
                .flat_map(|s| s.resource_claim_statuses.iter().flatten())
                .filter_map(|c| c.resource_claim_name.clone()),
        )
        .collect();
    Ok(claims
        .into_iter()
        .filter_map(|c| {
            let name = c.metadata.name?;
            names
                .contains(&name)
                .then(|| (name, c.metadata.uid.unwrap_or_default()))
        })
        .collect())
}
