//! Pods: creating them in the shapes DRA scenarios need, acting on them, and
//! checking their state, their containers' env and their events.
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::watcher;

use super::World;
use super::claims::{claim_name, default_shape, generated_claim};
use super::params::{
    ClaimPhrase, Containers, DriverRef, Dur, Gets, PodClaimsPhrase, PodState, PodStateWord,
    SteadyPodState, SteadyPodStateWord, Strings, quoted_list,
};
use crate::ground::objects::{self, PodClaims, PodShape};
use crate::ground::wait::{self, Check, describe_pod};
use crate::plugin::driver_logic;

sentences! {
    #[given(expr = "pod {string} {podclaims} is created")]
    #[when(expr = "pod {string} {podclaims} is created")]
    fn pod_created(name: String, claims: PodClaimsPhrase, step: Step<'_>);

    #[when(expr = "{int} pods {string} {podclaims} are created")]
    fn pods_created(n: usize, prefix: String, claims: PodClaimsPhrase, step: Step<'_>);

    #[when(expr = "one pod per node {podclaims} is created")]
    fn pod_per_node(claims: PodClaimsPhrase, step: Step<'_>);

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

    #[when(expr = "pod {string} is deleted")]
    fn pod_deleted(name: String);

    #[when(expr = "pod {string} is force-deleted")]
    fn pod_force_deleted(name: String);

    #[when("all pods are deleted")]
    fn all_pods_deleted();

    #[when(expr = "the status of pod {string} marks its claim as not needed")]
    fn claim_not_needed(name: String);

    #[then(expr = "{containers} of pod {string} has env {strings}")]
    fn has_env(which: Containers, pod: String, want: Strings);

    #[then(expr = "container {string} of pod {string} has exactly the driver env {strings}")]
    fn has_exact_env(container: String, pod: String, want: Strings);

    #[then(expr = "container {string} of pod {string} {gets} request {string} of {claim}")]
    fn gets_request(container: String, pod: String, gets: Gets, request: String, claim: ClaimPhrase);

    #[then(expr = "container {string} of pod {string} {gets} requests {strings} of {claim}")]
    fn gets_requests(container: String, pod: String, gets: Gets, requests: Strings, claim: ClaimPhrase);

    #[then(expr = "pod {string} has extended resource requests:")]
    fn extended_requests(pod: String, step: Step<'_>);

    /// Upstream's ExtendedResourceClaimStatus test also checks the order.
    #[then(expr = "pod {string} has extended resource requests in this order:")]
    fn extended_requests_in_order(pod: String, step: Step<'_>);

    #[then(expr = "pod {string} has no extended resource claim")]
    fn no_extended_claim(pod: String);

    #[then(expr = "pod {string} gets a {string} event containing {string}")]
    fn pod_event(pod: String, reason: String, text: String);
}

/// Upstream's PodStart timeout.
pub const POD_TIMEOUT: Duration = Duration::from_secs(300);

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

/// The template of an inline claim, as a pod step's options shape it.
struct InlineTemplate {
    name: String,
    class: Option<String>,
    selectors: Vec<String>,
    tolerations: Vec<objects::DeviceToleration>,
}

/// Reads the `| option | value |` table of a pod step into the shape.
fn apply_options(
    w: &World,
    shape: &mut PodShape,
    step: &Step,
    template: &mut Option<InlineTemplate>,
) -> anyhow::Result<()> {
    let Some(table) = &step.table else {
        return Ok(());
    };
    for row in &table.rows {
        let (key, value) = match row.as_slice() {
            [k, v] => (k.trim(), objects::expand(v.trim(), &w.vars())?),
            _ => bail!("pod options are rows of `| option | value |`, got {row:?}"),
        };
        apply_option(w, shape, template, key, value)?;
    }
    Ok(())
}

/// The template a template option shapes: only one the step creates.
fn created_template<'a>(
    template: &'a mut Option<InlineTemplate>,
    option: &str,
) -> anyhow::Result<&'a mut InlineTemplate> {
    template.as_mut().with_context(|| {
        format!("`{option}` applies to the template of an inline claim that the step creates")
    })
}

/// A node option's value: a node index of the scenario, or a node name.
fn node_of(w: &World, value: String) -> anyhow::Result<String> {
    Ok(match value.parse::<usize>() {
        Ok(i) => w.node(i)?.to_owned(),
        Err(_) => value,
    })
}

fn apply_option(
    w: &World,
    shape: &mut PodShape,
    template: &mut Option<InlineTemplate>,
    key: &str,
    value: String,
) -> anyhow::Result<()> {
    match key {
        "containers" => {
            shape.containers = value
                .parse()
                .with_context(|| format!("containers: {value:?} is not a number"))?
        }
        "containers use the claims" => shape.containers_use_claims = yes(&value)?,
        // `yes`: upstream's check of the default claim config; a list
        // of "k=v" entries: those instead.
        "init container" => {
            shape.init_container = if value.starts_with('"') {
                Some(quoted_list(&value))
            } else if value == "prints its env" {
                // No check of its own: a later step judges what it printed.
                Some(Vec::new())
            } else {
                yes(&value)?.then(|| vec![objects::DEFAULT_USER_ENV.to_owned()])
            }
        }
        "command" => shape.command = Some(value),
        "restart policy" => shape.restart_policy = value,
        "node" => shape.node_name = Some(node_of(w, value)?),
        "node selector" => shape.node_selector = Some(node_of(w, value)?),
        // Seconds the pod stays on a node reported unreachable before the
        // taint eviction controller evicts it (the default is 300 s).
        "tolerates an unreachable node for" => {
            shape.unreachable_toleration = Some(
                humantime::parse_duration(&value)
                    .map(|d| d.as_secs() as i64)
                    .with_context(|| {
                        format!("tolerates an unreachable node for: {value:?} is not a duration")
                    })?,
            )
        }
        "grace period" => {
            shape.grace_period = Some(
                humantime::parse_duration(&value)
                    .map(|d| d.as_secs() as i64)
                    .or_else(|_| value.parse())
                    .with_context(|| format!("grace period: {value:?} is not a duration"))?,
            )
        }
        "pod claim name" => shape.pod_claim_name = Some(value),
        "extended resource" => shape.extended_resources.extend(extended_resources(&value)?),
        "device class" => created_template(template, key)?.class = Some(value),
        "cel selector" => created_template(template, key)?.selectors.push(value),
        "device toleration" => created_template(template, key)?
            .tolerations
            .push(value.parse()?),
        "template" if value == "none" => *template = None,
        // An existing template (from a manifest, perhaps through an older API).
        "template" => match (&mut shape.claims, template.as_ref()) {
            (PodClaims::Inline { .. }, Some(t))
                if t.class.is_some() || !t.selectors.is_empty() || !t.tolerations.is_empty() =>
            {
                bail!(
                    "`template {value}` uses an existing template, which `device class`, \
                     `cel selector` and `device toleration` cannot shape"
                )
            }
            (PodClaims::Inline { template: name }, _) => {
                *name = value;
                *template = None;
            }
            _ => bail!("`template` applies to pods with an inline claim"),
        },
        k if k.starts_with("container ") && k.ends_with(" extended resources") => {
            let index = container_index(k, " extended resources")?;
            shape
                .container_extended_resources
                .insert(index, extended_resources(&value)?);
        }
        k if k.starts_with("container ") && k.ends_with(" claims") => {
            let index = container_index(k, " claims")?;
            let list = value
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| match c.split_once('/') {
                    Some((claim, req)) => (claim.to_owned(), Some(req.to_owned())),
                    None => (c.to_owned(), None),
                })
                .collect();
            shape.container_claims.insert(index, list);
        }
        other => bail!(
            "unknown pod option {other:?}; known: containers, containers use the claims, init container, \
             command, restart policy, node, node selector, grace period, tolerates an unreachable node for, \
             pod claim name, extended resource, \
             device class, cel selector, device toleration, template, container N claims, \
             container N extended resources"
        ),
    }
    Ok(())
}

/// `N` of an option `container N<suffix>`.
fn container_index(option: &str, suffix: &str) -> anyhow::Result<usize> {
    option["container ".len()..option.len() - suffix.len()]
        .trim()
        .parse()
        .with_context(|| format!("{option:?}: expected `container N{suffix}`"))
}

/// `name=quantity[, name=quantity]...`
fn extended_resources(value: &str) -> anyhow::Result<Vec<(String, String)>> {
    value
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let (k, v) = r
                .split_once('=')
                .with_context(|| format!("extended resource {r:?} must be name=quantity"))?;
            let v = v.trim();
            crate::harness::quantity::Quantity::parse(v)
                .with_context(|| format!("extended resource {r:?}"))?;
            Ok((k.trim().to_owned(), v.to_owned()))
        })
        .collect()
}

fn yes(v: &str) -> anyhow::Result<bool> {
    match v {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        o => bail!("expected yes or no, got {o:?}"),
    }
}

async fn create_pod(
    w: &mut World,
    name: &str,
    claims: &PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    let mut shape = PodShape::new(name);
    let mut template: Option<InlineTemplate> = None;
    match claims {
        PodClaimsPhrase::Inline => {
            shape.claims = PodClaims::Inline {
                template: name.to_owned(),
            };
            template = Some(InlineTemplate {
                name: name.to_owned(),
                class: None,
                selectors: Vec::new(),
                tolerations: Vec::new(),
            });
        }
        PodClaimsPhrase::External(list) => shape.claims = PodClaims::External(list.clone()),
        PodClaimsPhrase::None => {}
    }
    apply_options(w, &mut shape, step, &mut template)?;
    // The run's driver under test serves every node, not only the
    // scenario's: a one-node scenario's pods go to its node, so that "node
    // 0" in its steps is where they run.
    if shape.node_name.is_none()
        && shape.node_selector.is_none()
        && w.external_driver(&DriverRef::The).is_some()
        && let [node] = w.nodes.as_slice()
    {
        shape.node_selector = Some(node.clone());
    }
    if let Some(t) = template {
        let mut claim_shape = default_shape(w, &DriverRef::The)?;
        if let Some(c) = t.class {
            claim_shape.class = c;
        }
        claim_shape.selectors = t.selectors;
        claim_shape.tolerations = t.tolerations;
        w.create_template(&t.name, claim_shape.spec()?).await?;
    }
    let pod = shape.build()?;
    w.create_pod(&pod, shape.pod_claim_names()).await
}

async fn pod_created(
    w: &mut World,
    name: String,
    claims: PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    create_pod(w, &name, &claims, step).await
}

async fn pods_created(
    w: &mut World,
    n: usize,
    prefix: String,
    claims: PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    for i in 1..=n {
        create_pod(w, &format!("{prefix}-{i}"), &claims, step).await?;
    }
    Ok(())
}

async fn pod_per_node(w: &mut World, claims: PodClaimsPhrase, step: &Step) -> anyhow::Result<()> {
    for i in 1..=w.nodes.len() {
        create_pod(w, &format!("tester-{i}"), &claims, step).await?;
    }
    Ok(())
}

pub(crate) async fn wait_pod(w: &World, name: &str, state: PodState) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    let what = format!("pod {name} to be {state:?}").to_lowercase();
    wait::pod(&api, name, &what, POD_TIMEOUT, |p| {
        wait::pod_in_state(name, state, p)
    })
    .await?;
    Ok(())
}

async fn pod_is(w: &World, name: String, PodStateWord(state): PodStateWord) -> anyhow::Result<()> {
    if state != PodState::Unschedulable {
        return wait_pod(w, &name, state).await;
    }
    // As upstream: the scheduler tried and found no node (reason
    // `Unschedulable`); a pod merely not scheduled yet, or held back by
    // scheduling gates, is not.
    let api = w.api::<Pod>()?;
    wait::pod(
        &api,
        &name,
        &format!("pod {name} to be unschedulable (PodScheduled=False, reason Unschedulable)"),
        POD_TIMEOUT,
        |p| match wait::pod_in_state(&name, state, p) {
            Check::Done(()) => match scheduled_reason(p) {
                Some("Unschedulable") => Check::Done(()),
                other => Check::Pending(format!(
                    "PodScheduled=False with reason {:?}; {}",
                    other.unwrap_or(""),
                    describe_pod(p)
                )),
            },
            other => other,
        },
    )
    .await?;
    Ok(())
}

/// The reason of the pod's PodScheduled condition.
fn scheduled_reason(p: Option<&Pod>) -> Option<&str> {
    p?.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?
        .reason
        .as_deref()
}

async fn wait_pod_within(
    w: &World,
    name: &str,
    state: PodState,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    let what = format!("pod {name} to be {state:?}").to_lowercase();
    wait::pod(&api, name, &what, timeout, |p| {
        wait::pod_in_state(name, state, p)
    })
    .await?;
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
    let pods = w.api::<Pod>()?;
    let turns = names.iter().map(|name| {
        let (readiness, pods) = (&readiness, &pods);
        async move {
            reach(w, name, readiness, timeout).await?;
            pods.delete(name, &DeleteParams::default())
                .await
                .with_context(|| format!("deleting pod {name}"))?;
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
    let api = w.api::<Pod>()?;
    let word = match state {
        SteadyPodState::Pending => "Pending",
        SteadyPodState::Running => "Running",
        SteadyPodState::Terminating => "terminating",
    };
    let held = wait::consistently(
        &format!("pod {name} to stay {word}"),
        d.0,
        Duration::from_millis(200),
        || async {
            match api.get_opt(&name).await {
                Ok(Some(p)) if state.holds(&p) => Ok(()),
                Ok(p) => Err(format!(
                    "expected pod {name} to stay {word}, observed {}",
                    describe_pod(p.as_ref())
                )),
                Err(e) => Err(format!("reading pod {name}: {e}")),
            }
        },
    )
    .await;
    wait::diagnosed(&api, &name, held).await?;
    Ok(())
}

async fn unschedulable_with(w: &World, name: String, text: String) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    let what = format!("pod {name} to be unschedulable with a message containing {text:?}");
    wait::pod(&api, &name, &what, Duration::from_secs(120), |p| {
        wait::pod_unschedulable_with(&name, &text, p)
    })
    .await?;
    Ok(())
}

async fn restarted(w: &World, name: String, n: i32) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    wait::pod(
        &api,
        &name,
        &format!("pod {name} to restart {n} times"),
        Duration::from_secs(900),
        |p| {
            let count = p
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
                .unwrap_or(0);
            if count >= n {
                Check::Done(())
            } else {
                Check::Pending(format!("restartCount={count}; {}", describe_pod(p)))
            }
        },
    )
    .await?;
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
            w.generated_claims
                .insert(ClaimPhrase::OfPod(name.to_owned()), claim);
        }
        if let Some(claim) = generated_claim(&pod, true) {
            w.generated_claims
                .insert(ClaimPhrase::ExtendedOfPod(name.to_owned()), claim);
        }
    }
    Ok(())
}

pub(crate) async fn delete_pod(w: &mut World, name: &str, force: bool) -> anyhow::Result<()> {
    remember_generated_claims(w, name).await?;
    let dp = if force {
        DeleteParams::default().grace_period(0)
    } else {
        DeleteParams::default()
    };
    match w.api::<Pod>()?.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("deleting pod {name}: {e}")),
    }
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
    let statuses: Vec<_> = record
        .pod_claims
        .iter()
        .map(|c| serde_json::json!({ "name": c }))
        .collect();
    let patch = serde_json::json!({ "status": { "resourceClaimStatuses": statuses } });
    w.api::<Pod>()?
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("writing the claim statuses of pod {name}"))?;
    Ok(())
}

/// Container env lines as the container sees them.
async fn env_of(w: &World, pod: &str, container: &str) -> anyhow::Result<Vec<String>> {
    w.context()?
        .cluster
        .container_env(&w.namespace, pod, container)
        .await
}

fn driver_env(env: &[String]) -> Vec<String> {
    let mut v: Vec<String> = env
        .iter()
        .filter(|l| l.starts_with("admin_") || l.starts_with("user_") || l.starts_with("claim_"))
        .cloned()
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Fails unless every wanted entry is a line of `env`.
fn check_env(what: &str, pod: &str, want: &[String], env: &[String]) -> anyhow::Result<()> {
    let missing: Vec<&String> = want.iter().filter(|kv| !env.contains(kv)).collect();
    if !missing.is_empty() {
        bail!(
            "{what} of pod {pod}: expected env to contain {missing:?}; its DRA env is {:?}",
            driver_env(env)
        );
    }
    Ok(())
}

async fn has_env(w: &World, which: Containers, pod: String, want: Strings) -> anyhow::Result<()> {
    let want = want.0;
    for (label, c) in settled_containers(w, &which, &pod).await? {
        let env = env_of(w, &pod, &c).await?;
        check_env(&label, &pod, &want, &env)?;
    }
    Ok(())
}

/// The containers `which` names, each with how a message names it, once
/// their env can be read: an init container once it completed, the others
/// once the pod runs.
pub(crate) async fn settled_containers(
    w: &World,
    which: &Containers,
    pod: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let named = |names: Vec<String>| {
        names
            .into_iter()
            .map(|c| (format!("container {c}"), c))
            .collect()
    };
    Ok(match which {
        Containers::Init(c) => {
            let api = w.api::<Pod>()?;
            wait::pod(
                &api,
                pod,
                &format!("init container {c} of pod {pod} to complete"),
                POD_TIMEOUT,
                |p| wait::init_container_done(p, pod, c),
            )
            .await?;
            // An init container that exited cannot be exec'd. Its exit code 0
            // already says its own script found the entries the pod was built
            // with (`init container` option) inside the container. What a
            // caller compares is the env it ran with: on a node with a
            // container runtime, what its script printed to its log before
            // checking (container_env reads that log for an exited init
            // container); on a simulated node, the env the node gave it.
            vec![(format!("init container {c}"), c.clone())]
        }
        Containers::Named(c) => {
            wait_pod(w, pod, PodState::Running).await?;
            named(vec![c.clone()])
        }
        Containers::Every => {
            wait_pod(w, pod, PodState::Running).await?;
            named(
                w.pod(pod)
                    .await?
                    .spec
                    .map(|s| s.containers.into_iter().map(|c| c.name).collect())
                    .unwrap_or_default(),
            )
        }
    })
}

async fn has_exact_env(
    w: &World,
    container: String,
    pod: String,
    want: Strings,
) -> anyhow::Result<()> {
    wait_pod(w, &pod, PodState::Running).await?;
    let mut want = want.0;
    want.sort();
    let got = driver_env(&env_of(w, &pod, &container).await?);
    if got != want {
        bail!(
            "container {container} of pod {pod}: expected exactly the DRA env {want:?}, observed {got:?}"
        );
    }
    Ok(())
}

async fn gets_request(
    w: &World,
    container: String,
    pod: String,
    gets: Gets,
    request: String,
    claim: ClaimPhrase,
) -> anyhow::Result<()> {
    gets_requests(w, container, pod, gets, Strings(vec![request]), claim).await
}

pub(super) async fn gets_requests(
    w: &World,
    container: String,
    pod: String,
    gets: Gets,
    requests: Strings,
    claim: ClaimPhrase,
) -> anyhow::Result<()> {
    wait_pod(w, &pod, PodState::Running).await?;
    let name = claim_name(w, &claim).await?;
    let env = env_of(w, &pod, &container).await?;
    let want = gets.0;
    for request in &requests.0 {
        // The driver marks every request it prepared with this env entry, so
        // it shows which requests' devices reached the container.
        let marker = format!(
            "{}=true",
            driver_logic::marker_env_key(&name, driver_logic::base_request(request))
        );
        if env.contains(&marker) != want {
            bail!(
                "container {container} of pod {pod}: expected {}the device of request {request} of claim {name} \
                 (env {marker}); its DRA env is {:?}",
                if want { "" } else { "not " },
                driver_env(&env)
            );
        }
    }
    Ok(())
}

async fn extended_requests(w: &World, pod: String, step: &Step) -> anyhow::Result<()> {
    mapped_requests(w, pod, step, false).await
}

async fn extended_requests_in_order(w: &World, pod: String, step: &Step) -> anyhow::Result<()> {
    mapped_requests(w, pod, step, true).await
}

/// The pod's extendedResourceClaimStatus maps exactly the table's rows,
/// `in_order` or as a set.
async fn mapped_requests(
    w: &World,
    pod: String,
    step: &Step,
    in_order: bool,
) -> anyhow::Result<()> {
    let mut want = Vec::new();
    for row in step.table.iter().flat_map(|t| t.rows.iter().skip(1)) {
        let [c, r, q] = row.as_slice() else {
            bail!("rows are | container | resource | request |, got {row:?}");
        };
        let vars = w.vars();
        want.push((
            objects::expand(c.trim(), &vars)?,
            objects::expand(r.trim(), &vars)?,
            objects::expand(q.trim(), &vars)?,
        ));
    }
    if !in_order {
        want.sort();
    }
    let api = w.api::<Pod>()?;
    wait::pod(
        &api,
        &pod,
        &format!("pod {pod} to map its extended resources to requests {want:?}"),
        POD_TIMEOUT,
        |p| {
            let status = p
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.extended_resource_claim_status.as_ref());
            let Some(status) = status else {
                return Check::Pending("no extendedResourceClaimStatus".into());
            };
            let mut got: Vec<(String, String, String)> = status
                .request_mappings
                .iter()
                .map(|m| {
                    (
                        m.container_name.clone(),
                        m.resource_name.clone(),
                        m.request_name.clone(),
                    )
                })
                .collect();
            if !in_order {
                got.sort();
            }
            if got == want {
                Check::Done(())
            } else {
                Check::Pending(format!("requestMappings {got:?}"))
            }
        },
    )
    .await?;
    Ok(())
}

pub(super) async fn no_extended_claim(w: &World, pod: String) -> anyhow::Result<()> {
    let p = w.pod(&pod).await?;
    if let Some(claim) = generated_claim(&p, true) {
        bail!("pod {pod}: expected no extended resource claim, but the scheduler made {claim}");
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
    let api = w.api::<Event>()?;
    let config = watcher::Config::default().fields(&format!("involvedObject.name={pod}"));
    wait::list(
        &api,
        config,
        &format!("a {reason} event on pod {pod} containing {text:?}"),
        Duration::from_secs(600),
        |events| {
            if events.iter().any(|e| {
                e.reason.as_deref() == Some(&reason)
                    && e.message.as_deref().is_some_and(|m| m.contains(&text))
            }) {
                Check::Done(())
            } else {
                Check::Pending(
                    events
                        .iter()
                        .map(|e| {
                            format!(
                                "{}: {}",
                                e.reason.clone().unwrap_or_default(),
                                e.message.clone().unwrap_or_default()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" | "),
                )
            }
        },
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resources_are_names_with_quantities() {
        assert_eq!(
            extended_resources("a.com/r=1, b.com/s = 2k").expect("valid"),
            [
                ("a.com/r".to_owned(), "1".to_owned()),
                ("b.com/s".to_owned(), "2k".to_owned())
            ]
        );
        let e = extended_resources("a.com/r=1 Gi").expect_err("a bad quantity");
        assert!(
            format!("{e:#}").contains("\"1 Gi\" is not a quantity"),
            "{e:#}"
        );
        assert!(extended_resources("a.com/r").is_err());
    }
}
