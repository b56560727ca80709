//! The driver under test: the steps of the conformance pack that work on
//! any driver, the suite's own or one a profile names.
//!
//! They check only what the cluster shows (slices, the kubelet's
//! registration, containers' environments, the driver's pods), never the
//! hosted plugin's own records, so the same sentence holds a real driver to
//! the same standard as the suite's.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher;

use super::World;
use super::drivers::default_nodes;
use super::params::{Containers, DriverPhrase, DriverRef, Method, NodeSel};
use crate::ground::objects::{PodClaims, PodShape};
use crate::ground::wait::{self, Check, PodState};
use crate::harness::under_test::{device_check, devices_per_node};
use crate::plugin::calls::CallOutcome;
use crate::plugin::fault::Faults;
use crate::profile::{Deployment, Fault};

sentences! {
    #[given("the driver under test")]
    fn the_driver_under_test(step: Step<'_>);

    #[then(expr = "pod {string} runs without a {string} event")]
    fn runs_without_event(pod: String, reason: String);

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

    #[then(expr = "the driver publishes devices on {node}")]
    fn publishes_devices(node: NodeSel);

    #[given("the driver's devices are noted")]
    #[when("the driver's devices are noted")]
    fn devices_noted();

    #[then("the driver publishes the devices noted")]
    fn devices_as_noted();

    #[when("the driver is restarted with one device fewer on every node")]
    fn restart_one_fewer();

    #[when("the driver is restarted with all its devices")]
    fn restart_all_devices();

    /// An update of the driver: its DaemonSet rolled out again, the way its
    /// update strategy says (with maxSurge, new pod first).
    #[when("the driver's DaemonSet is rolled out")]
    fn rolled_out();

    #[then("the driver publishes one device fewer than noted")]
    fn one_fewer_than_noted();

    /// The profile's containerCheck, claim by claim. Where the runner sees
    /// the driver's answers and reaches the node's CDI directory (its own
    /// driver, any driver behind `--interpose`), also: the answers match
    /// the claims' allocations, and every CDI device answered for a claim
    /// is defined by a spec there; that last check starts as soon as the
    /// driver answered, so a missing spec fails the step at once instead
    /// of leaving the pod pending to a timeout. For a driver the runner
    /// neither hosts nor interposes, neither check is possible, and the
    /// step judges the containers' environment alone.
    #[then(expr = "{containers} of pod {string} has its device")]
    fn has_device(which: Containers, pod: String);

    #[then("all pods are running with their devices")]
    fn all_have_devices();

    #[then(expr = "container {string} of pod {string} has no device")]
    fn has_no_device(container: String, pod: String);

    #[when(expr = "pods {string} with an inline claim take every device of {node}")]
    fn take_every_device(prefix: String, node: NodeSel);

    #[when(expr = "the driver's pod on {node} is restarted")]
    fn restart_driver_pod(node: NodeSel);
}

/// How long the driver may take to publish (again) what is expected.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a restarted driver pod may take to run again.
const DRIVER_POD_TIMEOUT: Duration = Duration::from_secs(180);

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
    let config = watcher::Config::default().fields(&format!(
        "involvedObject.name={pod},involvedObject.kind=Pod"
    ));
    let what = format!("no {reason} event of pod {pod}");
    let failed = wait::list(
        &events,
        config,
        &what,
        super::pods::POD_TIMEOUT,
        |items| match items
            .iter()
            .find(|e| e.reason.as_deref() == Some(reason.as_str()))
        {
            Some(e) => Check::Done(e.message.clone().unwrap_or_default()),
            None => Check::Pending("none yet".to_owned()),
        },
    );
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
    super::pods::delete_pod(w, pod, false).await?;
    w.deleted_pods.insert(pod.to_owned(), before);
    Ok(())
}

/// Notes the node and claims of a pod someone else deleted (a controller
/// evicting it) while it is still there, for `Then the driver lets the
/// claims of pod ... go`.
pub(crate) async fn note_deleted(w: &mut World, pod: &str) -> anyhow::Result<()> {
    let before = before_deletion(w, pod).await?;
    w.deleted_pods.insert(pod.to_owned(), before);
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
    let Some(DeletedPod { node, claims }) = w.deleted_pods.get(&pod).cloned() else {
        bail!(
            "pod {pod} was not deleted by `When pod \"{pod}\" is deleted without waiting` or \
             `... is deleted while its claims are being prepared` (nor evicted by `Then pod \
             \"{pod}\" is evicted by the taint eviction controller`), which note its node and claims \
             before deleting it (a claim from a template may be gone afterwards)"
        );
    };
    let api = w.api::<Pod>()?;
    let gone = wait::object(
        &api,
        &pod,
        &format!("pod {pod} to be gone"),
        UNPREPARE_TIMEOUT,
        |p| wait::pod_in_state(&pod, PodState::Gone, p),
    )
    .await;
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

/// Every ResourceClaim of the scenario's namespace.
async fn scenario_claims(w: &World) -> anyhow::Result<Vec<ResourceClaim>> {
    Ok(Api::<ResourceClaim>::namespaced(w.client()?, &w.namespace)
        .list(&ListParams::default())
        .await
        .context("listing the scenario's ResourceClaims")?
        .items)
}

/// The UIDs of the claims of `pod`, by name.
async fn claim_uids(w: &World, pod: &Pod) -> anyhow::Result<Vec<(String, String)>> {
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

/// Watches the driver's slices until `done` accepts the devices per node.
async fn wait_devices(
    w: &World,
    nodes: &[String],
    done: impl Fn(&BTreeMap<String, Vec<String>>) -> Result<(), String>,
) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    let api: Api<ResourceSlice> = Api::all(w.client()?);
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!("driver {driver}'s devices on {}", nodes.join(", "));
    wait::list(&api, config, &what, PUBLISH_TIMEOUT, |items| {
        let seen = devices_per_node(items);
        match done(&seen) {
            Ok(()) => Check::Done(()),
            Err(why) => Check::Pending(format!("{why}; devices per node: {seen:?}")),
        }
    })
    .await?;
    Ok(())
}

/// KEP-5970's second behaviour: the driver's slices hold at least one
/// device for the node, and each pool is complete (as many slices of its
/// latest generation as it says it has), so the scheduler considers it.
async fn publishes_devices(w: &World, node: NodeSel) -> anyhow::Result<()> {
    let nodes = node.resolve(w).await?;
    let driver = w.driver_name(&DriverRef::The)?;
    let api: Api<ResourceSlice> = Api::all(w.client()?);
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!(
        "driver {driver} to publish complete pools with devices on {}",
        nodes.join(", ")
    );
    wait::list(
        &api,
        config,
        &what,
        PUBLISH_TIMEOUT,
        |items| match node_pools_problem(items, &nodes) {
            None => Check::Done(()),
            Some(p) => Check::Pending(p),
        },
    )
    .await?;
    Ok(())
}

/// What keeps the slices of `nodes` from being usable: a node without
/// devices, or a pool whose latest generation lacks slices.
fn node_pools_problem(slices: &[ResourceSlice], nodes: &[String]) -> Option<String> {
    for node in nodes {
        let mine: Vec<&ResourceSlice> = slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(node.as_str()))
            .collect();
        let devices: usize = mine
            .iter()
            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
            .sum();
        if devices == 0 {
            return Some(format!("node {node}: {} slice(s), no device", mine.len()));
        }
        let mut pools: BTreeMap<&str, Vec<&ResourceSlice>> = BTreeMap::new();
        for s in &mine {
            pools.entry(s.spec.pool.name.as_str()).or_default().push(s);
        }
        for (pool, slices) in pools {
            let latest = slices
                .iter()
                .map(|s| s.spec.pool.generation)
                .max()
                .unwrap_or(0);
            let current: Vec<&&ResourceSlice> = slices
                .iter()
                .filter(|s| s.spec.pool.generation == latest)
                .collect();
            let want = current
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            if current.len() as i64 != want {
                return Some(format!(
                    "node {node}: pool {pool} generation {latest} says {want} slice(s), {} published",
                    current.len()
                ));
            }
        }
    }
    None
}

async fn devices_noted(w: &mut World) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    let api: Api<ResourceSlice> = Api::all(w.client()?);
    let slices = api
        .list(&ListParams::default().fields(&format!("spec.driver={driver}")))
        .await
        .with_context(|| format!("listing the slices of driver {driver}"))?;
    let mut seen = devices_per_node(&slices.items);
    seen.retain(|n, _| w.nodes.contains(n));
    // Noting nothing would let every later "as noted" hold on nothing.
    let empty: Vec<&String> = w
        .nodes
        .iter()
        .filter(|n| seen.get(*n).is_none_or(|d| d.is_empty()))
        .collect();
    if !empty.is_empty() {
        bail!("driver {driver} publishes no devices on {empty:?}: there is nothing to note");
    }
    w.noted_devices = Some(seen);
    Ok(())
}

/// The devices per node `the driver's devices are noted` kept.
fn noted(w: &World) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    w.noted_devices
        .clone()
        .context("no devices were noted; add `Given the driver's devices are noted` before")
}

/// The same device names on each of the scenario's nodes as noted (a
/// restarted driver must come back with the devices it had).
async fn devices_as_noted(w: &World) -> anyhow::Result<()> {
    let noted = noted(w)?;
    let nodes = w.nodes.clone();
    wait_devices(w, &nodes, |seen| {
        let mut seen = seen.clone();
        seen.retain(|n, _| nodes.contains(n));
        if seen == noted {
            Ok(())
        } else {
            Err(format!("noted {noted:?}"))
        }
    })
    .await
}

/// A device goes away: the driver restarted through the profile's
/// deviceCount with one fewer than devicesPerNode. Teardown restores the
/// count if the scenario does not.
async fn restart_one_fewer(w: &mut World) -> anyhow::Result<()> {
    let ctx = w.context()?.clone();
    let under = &ctx.under_test;
    let n = under.profile.devices_per_node.with_context(|| {
        format!(
            "driver {}'s profile gives no devicesPerNode; tag the scenario @DeviceCount so that \
             it is skipped",
            under.driver_name()
        )
    })?;
    if n < 2 {
        bail!(
            "driver {} offers {n} device per node; one fewer would be none (devicesPerNode must \
             be at least 2 for this step)",
            under.driver_name()
        );
    }
    w.scenario.restores_device_count();
    under.restart_with_devices(&ctx.cluster, n - 1).await?;
    Ok(())
}

async fn rolled_out(w: &World) -> anyhow::Result<()> {
    let ctx = w.context()?;
    ctx.under_test.roll_out(&ctx.cluster).await?;
    Ok(())
}

async fn restart_all_devices(w: &World) -> anyhow::Result<()> {
    let ctx = w.context()?;
    ctx.under_test.restore_devices(&ctx.cluster).await?;
    Ok(())
}

/// On each of the scenario's nodes, the devices noted but one, and nothing
/// else.
async fn one_fewer_than_noted(w: &World) -> anyhow::Result<()> {
    let noted = noted(w)?;
    let nodes = w.nodes.clone();
    wait_devices(w, &nodes, |seen| {
        let wrong: Vec<String> = nodes
            .iter()
            .filter_map(|n| {
                let before: BTreeSet<&String> = noted.get(n).into_iter().flatten().collect();
                let now: BTreeSet<&String> = seen.get(n).into_iter().flatten().collect();
                let fine = now.is_subset(&before) && now.len() + 1 == before.len();
                (!fine).then(|| format!("{n}: {} of the {} noted", now.len(), before.len()))
            })
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "expected one device fewer than noted; {}",
                wrong.join(", ")
            ))
        }
    })
    .await
}

/// Names every runtime or kubelet sets in a container whatever the pod
/// asks for: not the driver's doing.
fn set_by_runtime(name: &str) -> bool {
    matches!(
        name,
        "PATH" | "HOSTNAME" | "HOME" | "TERM" | "SHLVL" | "PWD"
    ) || name.starts_with("KUBERNETES_")
        || name.contains("_SERVICE_")
        || name.contains("_PORT")
}

/// The variables of `container` that its pod spec does not set and the
/// runtime does not add: what CDI (the driver) injected.
async fn injected_env(
    w: &World,
    pod: &Pod,
    container: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.as_ref().context("the pod has no spec")?;
    let from_spec: BTreeSet<String> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter(|c| c.name == container)
        .flat_map(|c| c.env.iter().flatten().map(|e| e.name.clone()))
        .collect();
    let env = w
        .context()?
        .cluster
        .container_env(&w.namespace, &name, container)
        .await?;
    Ok(env
        .iter()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !from_spec.contains(*k) && !set_by_runtime(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

/// The profile's container check, claim by claim, and the driver's
/// answers for the container's claims where the runner sees them, as a
/// failure message when they do not hold.
async fn device_problem(w: &World, pod: &Pod, container: &str) -> anyhow::Result<Option<String>> {
    let ctx = w.context()?;
    let check = &ctx.under_test.profile.container_check;
    let driver = w.driver_name(&DriverRef::The)?;
    let claims = scenario_claims(w).await?;
    let (used, unused) = device_check::claims_of_container(pod, container, &claims, &driver);
    let injected = injected_env(w, pod, container).await?;
    let mut problems = device_check::env_problems(check, &used, &unused, &injected);
    if !problems.is_empty() {
        problems.push(format!(
            "variables the driver injected: {:?}",
            injected
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        ));
        return Ok(Some(format!(
            "by the profile's containerCheck.env, {}",
            problems.join("; ")
        )));
    }
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    // The answers are seen for the suite's own driver and behind the
    // interposer; elsewhere the environment is all there is.
    if let Ok(prepared) = w.prepared_of(&DriverRef::The, &node) {
        let problems = device_check::answer_problems(&used, |uid| prepared.answered(uid));
        if !problems.is_empty() {
            return Ok(Some(problems.join("; ")));
        }
    }
    let used_ids: Vec<(String, String)> = used
        .iter()
        .map(|c| (c.name.clone(), c.uid.clone()))
        .collect();
    if let Some(problem) = spec_missing(w, &node, &used_ids).await? {
        return Ok(Some(problem));
    }
    if let Some(disagreements) = ctx
        .under_test
        .interposed
        .as_ref()
        .and_then(|i| i.disagreements(&node))
    {
        let repeated: Vec<String> = used
            .iter()
            .flat_map(|c| disagreements.of_claim(&c.uid))
            .collect();
        if !repeated.is_empty() {
            return Ok(Some(repeated.join("; ")));
        }
    }
    if !check.command.is_empty() {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = crate::cluster::remote::exec_status(
            &w.client()?,
            &w.namespace,
            &name,
            container,
            &check.command,
        )
        .await?;
        if let Some(failure) = status {
            return Ok(Some(format!(
                "the profile's containerCheck.command {:?} failed in it: {failure}",
                check.command
            )));
        }
    }
    Ok(None)
}

/// How often the CDI directory is read while a pod waits for its
/// containers.
const SPEC_POLL: Duration = Duration::from_secs(1);

/// Where the runner sees the driver's answers and reaches the node's CDI
/// directory: the CDI devices the driver answered for each of `claims`
/// (name, UID) it holds prepared on `node` that no spec there defines, as
/// a failure message naming the claim, the IDs and the spec files seen.
/// `None` when every one is defined, or where the runner cannot look.
async fn spec_missing(
    w: &World,
    node: &str,
    claims: &[(String, String)],
) -> anyhow::Result<Option<String>> {
    let (Ok(prepared), Ok(cdi)) = (
        w.prepared_of(&DriverRef::The, node),
        w.cdi_of(&DriverRef::The, node),
    ) else {
        return Ok(None);
    };
    // Only claims the driver holds prepared: an answer is remembered after
    // its unprepare, when its spec is rightly gone.
    let held: BTreeSet<String> = prepared.claims().into_iter().map(|c| c.uid).collect();
    let ids: Vec<(&String, Vec<String>)> = claims
        .iter()
        .filter(|(_, uid)| held.contains(uid))
        .filter_map(|(name, uid)| {
            let ids: Vec<String> = prepared
                .answered(uid)?
                .into_iter()
                .flat_map(|d| d.cdi_device_ids)
                .collect();
            (!ids.is_empty()).then_some((name, ids))
        })
        .collect();
    if ids.is_empty() {
        return Ok(None);
    }
    let specs = cdi
        .specs()
        .await
        .with_context(|| format!("reading the CDI specs on node {node}"))?;
    for (claim, ids) in ids {
        let missing = device_check::undefined(&specs, &ids);
        if missing.is_empty() {
            continue;
        }
        const SHOWN: usize = 20;
        let mut files: Vec<&str> = specs.iter().take(SHOWN).map(|(n, _)| n.as_str()).collect();
        let more = specs.len().saturating_sub(SHOWN);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        if files.is_empty() {
            files.push("none");
        }
        return Ok(Some(format!(
            "driver {} answered NodePrepareResources for claim {claim} on node {node} with CDI \
             devices that no spec in the node's CDI directory defines: {}; spec files seen: {}{more}",
            w.driver_name(&DriverRef::The)?,
            missing.join(", "),
            files.join(", ")
        )));
    }
    Ok(None)
}

/// Watches, until the pod's containers settle, for a claim of `pod` whose
/// answered CDI devices no spec defines: on a node a runtime would refuse
/// such a container, so the pod would only stay pending to the step's
/// timeout. Behind the interposer a repeated prepare answered otherwise
/// comes first, as the likelier cause (a driver that rewrote its spec under
/// the repeat's names). Returns the pod's node and the problem; never
/// returns where the runner cannot look.
async fn spec_missing_while_waiting(w: &World, pod: &str) -> anyhow::Result<(String, String)> {
    loop {
        let current = w.pod(pod).await?;
        if let Some(node) = current.spec.as_ref().and_then(|s| s.node_name.clone()) {
            if w.prepared_of(&DriverRef::The, &node).is_err()
                || w.cdi_of(&DriverRef::The, &node).is_err()
            {
                return std::future::pending().await;
            }
            let claims = claim_uids(w, &current).await?;
            if let Some(d) = w
                .context()?
                .under_test
                .interposed
                .as_ref()
                .and_then(|i| i.disagreements(&node))
            {
                let repeated: Vec<String> =
                    claims.iter().flat_map(|(_, uid)| d.of_claim(uid)).collect();
                if !repeated.is_empty() {
                    return Ok((node, repeated.join("; ")));
                }
            }
            if let Some(problem) = spec_missing(w, &node, &claims).await? {
                return Ok((node, problem));
            }
        }
        tokio::time::sleep(SPEC_POLL).await;
    }
}

async fn has_device(w: &World, which: Containers, pod: String) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    let containers = tokio::select! {
        r = super::pods::settled_containers(w, &which, &pod) => r?,
        r = spec_missing_while_waiting(w, &pod) => {
            let (node, problem) = r?;
            bail!("pod {pod} on node {node} cannot start with its device: {problem}");
        }
    };
    let current = w.pod(&pod).await?;
    let node = current
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    for (label, c) in containers {
        if let Some(problem) = device_problem(w, &current, &c).await? {
            bail!(
                "{label} of pod {pod} on node {node} did not get its device from driver {driver}: {problem}"
            );
        }
    }
    Ok(())
}

async fn all_have_devices(w: &World) -> anyhow::Result<()> {
    let pods: Vec<String> = w.scenario.pods().map(|p| p.name.clone()).collect();
    if pods.is_empty() {
        bail!("the scenario created no pods");
    }
    for pod in pods {
        has_device(w, Containers::Every, pod).await?;
    }
    Ok(())
}

async fn has_no_device(w: &World, container: String, pod: String) -> anyhow::Result<()> {
    super::pods::wait_pod(w, &pod, PodState::Running).await?;
    let current = w.pod(&pod).await?;
    let check = &w.context()?.under_test.profile.container_check;
    let driver = w.driver_name(&DriverRef::The)?;
    let claims = scenario_claims(w).await?;
    let (_, unused) = device_check::claims_of_container(&current, &container, &claims, &driver);
    let injected = injected_env(w, &current, &container).await?;
    let foreign = device_check::foreign_variables(check, &unused, &injected);
    if !foreign.is_empty() {
        bail!(
            "container {container} of pod {pod} uses no claim, yet has the driver's variables {foreign:?}"
        );
    }
    Ok(())
}

/// As many pods as the node has devices, each with a claim for one device
/// and bound to the node by a node selector; waits until all run.
async fn take_every_device(w: &mut World, prefix: String, node: NodeSel) -> anyhow::Result<()> {
    let nodes = node.resolve(w).await?;
    let [node] = nodes.as_slice() else {
        bail!(
            "`take every device of` needs one node, {} names {}",
            nodes.len(),
            nodes.join(", ")
        );
    };
    let ctx = w.context()?;
    let n = ctx.under_test.profile.devices_per_node.with_context(|| {
        format!(
            "the profile of driver {} does not say how many devices a node has (devicesPerNode); \
             tag the scenario @DevicesPerNode so that it is skipped",
            ctx.under_test.driver_name()
        )
    })?;
    let mut names = Vec::new();
    for i in 1..=n {
        let name = format!("{prefix}-{i}");
        let mut shape = PodShape::new(&name);
        shape.claims = PodClaims::Inline {
            template: name.clone(),
        };
        shape.node_selector = Some(node.clone());
        let claim = super::claims::default_shape(w, &DriverRef::The)?;
        w.create_template(&name, claim.spec()?).await?;
        let pod = shape.build()?;
        w.create_pod(&pod, shape.pod_claim_names()).await?;
        names.push(name);
    }
    for name in names {
        super::pods::wait_pod(w, &name, PodState::Running).await?;
    }
    Ok(())
}

/// Deletes the driver's pod on the node, as a crash or an update would end
/// it, and waits until its DaemonSet runs a new one there.
async fn restart_driver_pod(w: &World, node: NodeSel) -> anyhow::Result<()> {
    let ctx = w.context()?;
    let under = &ctx.under_test;
    if under.pods.is_empty() {
        bail!(
            "the runner does not know the pods of driver {}: it knows them only from a \
             DaemonSet in the manifests it deploys (deployment.mode: RealNodes or Manifests); tag the \
             scenario @DriverPods so that it is skipped elsewhere",
            under.driver_name()
        );
    }
    let client = w.client()?;
    for node in node.resolve(w).await? {
        for set in &under.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
            let lp = ListParams::default()
                .labels(&set.selector())
                .fields(&format!("spec.nodeName={node}"));
            let old: BTreeSet<String> = api
                .list(&lp)
                .await
                .with_context(|| format!("listing driver pods on {node}"))?
                .items
                .into_iter()
                .filter_map(|p| p.metadata.uid)
                .collect();
            if old.is_empty() {
                bail!(
                    "DaemonSet {}/{} has no pod on node {node}\n{}",
                    set.namespace,
                    set.daemonset,
                    under.describe_pods(&client).await
                );
            }
            api.delete_collection(&DeleteParams::default(), &lp)
                .await
                .with_context(|| format!("deleting the driver's pod on {node}"))?;
            let config = watcher::Config::default()
                .labels(&set.selector())
                .fields(&format!("spec.nodeName={node}"));
            let what = format!(
                "a new pod of DaemonSet {}/{} running on {node}",
                set.namespace, set.daemonset
            );
            wait::list(&api, config, &what, DRIVER_POD_TIMEOUT, |pods| {
                let fresh: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| !old.contains(u)))
                    .collect();
                let old_left = pods.len() - fresh.len();
                match fresh.iter().find(|p| pod_ready(p)) {
                    Some(_) if old_left == 0 => Check::Done(()),
                    _ => Check::Pending(format!(
                        "{old_left} old pod(s) left; new: {}",
                        fresh
                            .iter()
                            .map(|p| wait::describe_pod(Some(p)))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )),
                }
            })
            .await?;
        }
    }
    Ok(())
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSliceSpec};

    fn slice(node: &str, generation: i64, count: i64, devices: &[&str]) -> ResourceSlice {
        ResourceSlice {
            spec: ResourceSliceSpec {
                driver: "d".into(),
                node_name: Some(node.into()),
                pool: ResourcePool {
                    name: node.into(),
                    generation,
                    resource_slice_count: count,
                },
                devices: Some(
                    devices
                        .iter()
                        .map(|d| Device {
                            name: (*d).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_node_needs_devices_in_a_complete_pool() {
        let nodes = vec!["n0".to_owned()];
        assert_eq!(
            node_pools_problem(&[slice("n0", 1, 1, &["a"])], &nodes),
            None
        );
        assert_eq!(
            node_pools_problem(&[slice("n0", 1, 1, &[])], &nodes),
            Some("node n0: 1 slice(s), no device".into())
        );
        assert_eq!(
            node_pools_problem(
                &[slice("n0", 2, 2, &["a"]), slice("n0", 1, 1, &["b"])],
                &nodes
            ),
            Some("node n0: pool n0 generation 2 says 2 slice(s), 1 published".into())
        );
        assert!(node_pools_problem(&[], &nodes).is_some());
    }

    #[test]
    fn runtime_variables_are_not_the_drivers() {
        for n in [
            "PATH",
            "HOSTNAME",
            "KUBERNETES_SERVICE_HOST",
            "FOO_SERVICE_PORT",
            "HOME",
        ] {
            assert!(set_by_runtime(n), "{n}");
        }
        for n in ["claim_c_r", "NVIDIA_VISIBLE_DEVICES", "user_a"] {
            assert!(!set_by_runtime(n), "{n}");
        }
    }
}
