//! Waiting for a pod's state and checking it: running, scheduled,
//! unschedulable for the scheduler's own reason, staying as it is for a
//! while, restarted, on nodes of their own, with an event. Each wait is a
//! watch with a deadline that says what it last saw.
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::then;
use k8s_openapi::api::core::v1::{Event, Pod};

use super::containers::{check_env, env_of};
use super::{POD_TIMEOUT, wait_pod};
use crate::World;
use crate::ground::objects;
use crate::harness::pods;
use crate::params::{
    DriverRef, Dur, PodState, PodStateWord, SteadyPodStateWord, Strings, quoted_list,
};

sentences! {
    #[then(expr = "pod {string} is {podstate}")]
    fn pod_is(name: String, state: PodStateWord);

    #[then(expr = "all pods are {podstate}")]
    fn all_pods_are(state: PodStateWord);

    #[then(expr = "pod {string} is running with env {strings} in every container")]
    fn pod_running_with_env(name: String, env: Strings);

    #[then(expr = "all pods are running with env {strings} in every container")]
    fn all_running_with_env(env: Strings);

    /// The pods compete for devices: each must get there once the ones
    /// before it are deleted, in whatever order the scheduler picks them.
    #[then(expr = "each pod in turn is {readiness} and then deleted")]
    fn each_in_turn(readiness: Readiness);

    #[then(expr = "pod {string} stays {steadystate} for {duration}")]
    fn stays(name: String, state: SteadyPodStateWord, d: Dur);

    #[then(expr = "pod {string} is unschedulable with a message containing {string}")]
    fn unschedulable_with(name: String, text: String);

    #[then(expr = "pod {string} has restarted at least {int} times")]
    fn restarted(name: String, n: i32);

    #[then("all pods run on different nodes")]
    fn different_nodes();

    #[then(expr = "pod {string} gets a {string} event containing {string}")]
    fn pod_event(pod: String, reason: String, text: String);
}

/// What upstream's TestPod checks of a pod: scheduled, when the driver is
/// not registered with the kubelet; otherwise running, with these env
/// entries in every container.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "readiness",
    regex = r#"scheduled|running with env ".+" in every container"#
)]
pub enum Readiness {
    Scheduled,
    RunningWithEnv(Vec<String>),
}

impl std::str::FromStr for Readiness {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "scheduled" {
            return Ok(Readiness::Scheduled);
        }
        s.strip_prefix("running with env ")
            .and_then(|r| r.strip_suffix(" in every container"))
            .map(|list| Readiness::RunningWithEnv(quoted_list(list)))
            .ok_or_else(|| {
                format!(
                    "expected `scheduled` or `running with env \"k=v\"... in every container`, got {s:?}"
                )
            })
    }
}

async fn pod_is(w: &World, name: String, PodStateWord(state): PodStateWord) -> anyhow::Result<()> {
    if state != PodState::Unschedulable {
        return wait_pod(w, &name, state).await;
    }
    // As upstream: the scheduler tried and found no node.
    pods::unschedulable(&w.api::<Pod>()?, &name, POD_TIMEOUT).await?;
    Ok(())
}

async fn wait_pod_within(
    w: &World,
    name: &str,
    state: PodState,
    timeout: Duration,
) -> anyhow::Result<()> {
    pods::until(&w.api::<Pod>()?, name, state, timeout).await?;
    Ok(())
}

/// Waits until the pod is as `readiness` says, checking the env of each
/// of its containers once it runs.
async fn reach(
    w: &World,
    pod: &str,
    readiness: &Readiness,
    timeout: Duration,
) -> anyhow::Result<()> {
    match readiness {
        Readiness::Scheduled => wait_pod_within(w, pod, PodState::Scheduled, timeout).await,
        Readiness::RunningWithEnv(want) => {
            wait_pod_within(w, pod, PodState::Running, timeout).await?;
            let containers: Vec<String> = w
                .pod(pod)
                .await?
                .spec
                .map(|s| s.containers.into_iter().map(|c| c.name).collect())
                .unwrap_or_default();
            for c in containers {
                let env = env_of(w, pod, &c).await?;
                check_env(&format!("container {c}"), pod, want, &env)?;
            }
            Ok(())
        }
    }
}

async fn pod_running_with_env(w: &World, name: String, env: Strings) -> anyhow::Result<()> {
    reach(w, &name, &Readiness::RunningWithEnv(env.0), POD_TIMEOUT).await
}

async fn all_running_with_env(w: &World, env: Strings) -> anyhow::Result<()> {
    let readiness = Readiness::RunningWithEnv(env.0);
    let names: Vec<String> = w.scenario.pods().map(|p| p.name.clone()).collect();
    if names.is_empty() {
        bail!("the scenario created no pods");
    }
    let waits = names.iter().map(|p| reach(w, p, &readiness, POD_TIMEOUT));
    futures::future::try_join_all(waits).await?;
    Ok(())
}

async fn each_in_turn(w: &World, readiness: Readiness) -> anyhow::Result<()> {
    let names: Vec<String> = w.scenario.pods().map(|p| p.name.clone()).collect();
    if names.is_empty() {
        bail!("the scenario created no pods");
    }
    // A pod may wait for every other one to come and go first.
    let timeout = POD_TIMEOUT * names.len() as u32;
    let api = w.api::<Pod>()?;
    let turns = names.iter().map(|name| {
        let (readiness, api) = (&readiness, &api);
        async move {
            reach(w, name, readiness, timeout).await?;
            pods::delete(api, name, false).await?;
            wait_pod_within(w, name, PodState::Gone, timeout).await
        }
    });
    futures::future::try_join_all(turns).await?;
    Ok(())
}

async fn all_pods_are(w: &World, PodStateWord(state): PodStateWord) -> anyhow::Result<()> {
    if w.scenario.pods().next().is_none() {
        bail!("the scenario created no pods");
    }
    let waits = w
        .scenario
        .pods()
        .map(|p| pod_is(w, p.name.clone(), PodStateWord(state)));
    futures::future::try_join_all(waits).await?;
    Ok(())
}

async fn stays(
    w: &World,
    name: String,
    SteadyPodStateWord(state): SteadyPodStateWord,
    d: Dur,
) -> anyhow::Result<()> {
    pods::stays(&w.api::<Pod>()?, &name, state, d.0).await?;
    Ok(())
}

async fn unschedulable_with(w: &World, name: String, text: String) -> anyhow::Result<()> {
    pods::unschedulable_with(&w.api::<Pod>()?, &name, &text, Duration::from_secs(120)).await?;
    Ok(())
}

async fn restarted(w: &World, name: String, n: i32) -> anyhow::Result<()> {
    pods::restarted(&w.api::<Pod>()?, &name, n, Duration::from_secs(900)).await?;
    Ok(())
}

async fn different_nodes(w: &World) -> anyhow::Result<()> {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for p in w.scenario.pods() {
        let pod = w.pod(&p.name).await?;
        let node = pod
            .spec
            .and_then(|s| s.node_name)
            .with_context(|| format!("pod {} is not scheduled", p.name))?;
        if let Some(other) = seen.insert(node.clone(), p.name.clone()) {
            bail!(
                "expected every pod on its own node, but pods {other} and {} both run on {node}",
                p.name
            );
        }
    }
    Ok(())
}

/// The scenario's placeholders, plus `old uid:<claim>` for each claim a
/// plugin still has prepared under the name of a claim the scenario
/// re-created since: the UID the kubelet names when it blocks the new one.
fn vars_with_old_claims(w: &World) -> BTreeMap<String, String> {
    let mut vars = w.vars();
    let mut prepared: Vec<crate::plugin::Prepared> = Vec::new();
    for (_, d) in w.scenario.drivers() {
        prepared.extend(d.nodenames().iter().filter_map(|n| d.prepared(n).cloned()));
    }
    // The driver under test behind the interposer, for this scenario's
    // namespace only.
    if w.external_driver(&DriverRef::The).is_some() {
        prepared.extend(
            w.nodes
                .iter()
                .filter_map(|n| w.prepared_of(&DriverRef::The, n).ok()),
        );
    }
    for p in prepared {
        for c in p.claims() {
            let ours = p.get(&c).is_some_and(|pc| pc.namespace == w.namespace);
            if ours
                && w.scenario
                    .claim_uid(&c.name)
                    .is_some_and(|now| now != c.uid)
            {
                vars.insert(format!("old uid:{}", c.name), c.uid);
            }
        }
    }
    vars
}

async fn pod_event(w: &World, pod: String, reason: String, text: String) -> anyhow::Result<()> {
    let text = objects::expand(&text, &vars_with_old_claims(w))?;
    pods::event(
        &w.api::<Event>()?,
        &pod,
        &reason,
        &text,
        Duration::from_secs(600),
    )
    .await?;
    Ok(())
}
