//! Pods: creating them in the shapes DRA scenarios need, acting on them, and
//! checking their state, their containers' env and their events.
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;

use super::claims::{claim_name, default_shape, generated_claim};
use super::params::{ClaimRef, Dur, PodState, SteadyState, quoted_list};
use super::{PodRecord, World, context, run};
use crate::objects::{self, PodClaims, PodShape};
use crate::plugin::driver_logic;
use crate::wait::{self, Check};

/// Upstream's PodStart timeout.
pub const POD_TIMEOUT: Duration = Duration::from_secs(300);

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
                } else {
                    yes(&value)?.then(|| vec![objects::DEFAULT_USER_ENV.to_owned()])
                }
            }
            "command" => shape.command = Some(value),
            "restart policy" => shape.restart_policy = value,
            "node" => {
                shape.node_name = Some(match value.parse::<usize>() {
                    Ok(i) => w.node(i)?.to_owned(),
                    Err(_) => value,
                })
            }
            "node selector" => {
                shape.node_selector = Some(match value.parse::<usize>() {
                    Ok(i) => w.node(i)?.to_owned(),
                    Err(_) => value,
                })
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
            "device class" => match template.as_mut() {
                Some(t) => t.class = Some(value),
                None => bail!(
                    "`device class` applies to the template of an inline claim that the step creates"
                ),
            },
            "cel selector" => match template.as_mut() {
                Some(t) => t.selectors.push(value),
                None => bail!(
                    "`cel selector` applies to the template of an inline claim that the step creates"
                ),
            },
            "device toleration" => match template.as_mut() {
                Some(t) => t.tolerations.push(value.parse()?),
                None => bail!(
                    "`device toleration` applies to the template of an inline claim that the step creates"
                ),
            },
            "template" if value == "none" => *template = None,
            // An existing template (from a manifest, perhaps through an older API).
            "template" => match (&mut shape.claims, template.as_ref()) {
                (PodClaims::Inline { .. }, Some(t))
                    if t.class.is_some()
                        || !t.selectors.is_empty()
                        || !t.tolerations.is_empty() =>
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
                 command, restart policy, node, node selector, grace period, pod claim name, extended resource, device class, cel selector, device toleration, template, container N claims, \
                 container N extended resources"
            ),
        }
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
            Ok((k.trim().to_owned(), v.trim().to_owned()))
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
    claims: &str,
    step: Option<&Step>,
) -> anyhow::Result<()> {
    let mut shape = PodShape::new(name);
    let mut template: Option<InlineTemplate> = None;
    if claims == "with an inline claim" {
        shape.claims = PodClaims::Inline {
            template: name.to_owned(),
        };
        template = Some(InlineTemplate {
            name: name.to_owned(),
            class: None,
            selectors: Vec::new(),
            tolerations: Vec::new(),
        });
    } else if let Some(list) = claims.strip_prefix("using claim") {
        shape.claims = PodClaims::External(quoted_list(list));
    } else if claims != "without claims" {
        bail!("unknown claims {claims:?}");
    }
    if let Some(step) = step {
        apply_options(w, &mut shape, step, &mut template)?;
    }
    let client = w.client()?;
    if let Some(t) = template {
        let mut claim_shape = default_shape(w, "")?;
        if let Some(c) = t.class {
            claim_shape.class = c;
        }
        claim_shape.selectors = t.selectors;
        claim_shape.tolerations = t.tolerations;
        let api: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &w.namespace);
        api.create(
            &PostParams::default(),
            &objects::claim_template(&t.name, claim_shape.spec()?),
        )
        .await
        .with_context(|| format!("creating ResourceClaimTemplate {}", t.name))?;
    }
    let pod = shape.build()?;
    let api: Api<Pod> = Api::namespaced(client, &w.namespace);
    api.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    w.pods.push(PodRecord {
        name: name.to_owned(),
        pod_claims: shape.pod_claim_names(),
    });
    Ok(())
}

#[given(
    regex = r#"^pod "([^"]+)" (with an inline claim|using claims? .+|without claims) is created$"#
)]
#[when(
    regex = r#"^pod "([^"]+)" (with an inline claim|using claims? .+|without claims) is created$"#
)]
async fn pod_created(
    w: &mut World,
    name: String,
    claims: String,
    step: &Step,
) -> Result<(), String> {
    run(create_pod(w, &name, &claims, Some(step))).await
}

#[when(regex = r#"^(\d+) pods "([^"]+)" (with an inline claim|using claims? .+) are created$"#)]
async fn pods_created(
    w: &mut World,
    n: usize,
    prefix: String,
    claims: String,
    step: &Step,
) -> Result<(), String> {
    run(async {
        for i in 1..=n {
            create_pod(w, &format!("{prefix}-{i}"), &claims, Some(step)).await?;
        }
        Ok(())
    })
    .await
}

#[when(regex = r#"^one pod per node (with an inline claim|using claims? .+) is created$"#)]
async fn pod_per_node(w: &mut World, claims: String, step: &Step) -> Result<(), String> {
    run(async {
        for i in 1..=w.nodes.len() {
            create_pod(w, &format!("tester-{i}"), &claims, Some(step)).await?;
        }
        Ok(())
    })
    .await
}

fn describe_pod(p: Option<&Pod>) -> String {
    let Some(p) = p else {
        return "pod does not exist".to_owned();
    };
    let status = p.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let node = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let conditions: Vec<String> = status
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            format!(
                "{}={}{}",
                c.type_,
                c.status,
                c.message.map(|m| format!(" ({m})")).unwrap_or_default()
            )
        })
        .collect();
    format!(
        "phase={phase:?} node={node:?} conditions=[{}]{}",
        conditions.join(", "),
        if p.metadata.deletion_timestamp.is_some() {
            " deleting"
        } else {
            ""
        }
    )
}

fn scheduled(p: &Pod) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
}

fn unschedulable_message(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| c.message.clone().unwrap_or_default())
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub(crate) async fn wait_pod(w: &World, name: &str, state: PodState) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
    let what = format!("pod {name} to be {state:?}").to_lowercase();
    wait::object(&api, name, &what, POD_TIMEOUT, |p| {
        let done = match (state, p) {
            (PodState::Gone, None) => true,
            (_, None) => false,
            (PodState::Running, Some(p)) => phase(p) == "Running",
            (PodState::Scheduled, Some(p)) => scheduled(p),
            (PodState::Unschedulable, Some(p)) => {
                if scheduled(p) {
                    return Check::Fail(format!(
                        "expected pod {name} to stay unscheduled, but it was scheduled: {}",
                        describe_pod(Some(p))
                    ));
                }
                unschedulable_message(p).is_some()
            }
            (PodState::Completed, Some(p)) => {
                if phase(p) == "Failed" {
                    return Check::Fail(format!(
                        "pod {name} failed instead of completing: {}",
                        describe_pod(Some(p))
                    ));
                }
                phase(p) == "Succeeded"
            }
            (PodState::Failed, Some(p)) => phase(p) == "Failed",
            (PodState::Pending, Some(p)) => phase(p) == "Pending",
            (PodState::Gone, Some(_)) => false,
        };
        if done {
            Check::Done(())
        } else {
            Check::Pending(describe_pod(p))
        }
    })
    .await?;
    Ok(())
}

#[then(expr = "pod {string} is {podstate}")]
async fn pod_is(w: &mut World, name: String, state: PodState) -> Result<(), String> {
    run(wait_pod(w, &name, state)).await
}

#[then(expr = "all pods are {podstate}")]
async fn all_pods_are(w: &mut World, state: PodState) -> Result<(), String> {
    run(async {
        if w.pods.is_empty() {
            bail!("the scenario created no pods");
        }
        let waits = w.pods.iter().map(|p| wait_pod(w, &p.name, state));
        futures::future::try_join_all(waits).await?;
        Ok(())
    })
    .await
}

#[then(expr = "pod {string} stays {steadystate} for {duration}")]
async fn stays(w: &mut World, name: String, state: SteadyState, d: Dur) -> Result<(), String> {
    run(async {
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        let (word, holds): (&str, fn(&Pod) -> bool) = match state {
            SteadyState::Pending => ("Pending", |p| phase(p) == "Pending" || phase(p).is_empty()),
            SteadyState::Running => ("Running", |p| {
                phase(p) == "Running" && p.metadata.deletion_timestamp.is_none()
            }),
        };
        wait::consistently(
            &format!("pod {name} to stay {word}"),
            d.0,
            Duration::from_millis(200),
            || async {
                match api.get_opt(&name).await {
                    Ok(Some(p)) if holds(&p) => Ok(()),
                    Ok(p) => Err(format!(
                        "expected pod {name} to stay {word}, observed {}",
                        describe_pod(p.as_ref())
                    )),
                    Err(e) => Err(format!("reading pod {name}: {e}")),
                }
            },
        )
        .await?;
        Ok(())
    })
    .await
}

#[then(expr = "pod {string} is unschedulable with a message containing {string}")]
async fn unschedulable_with(w: &mut World, name: String, text: String) -> Result<(), String> {
    run(async {
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        let what = format!("pod {name} to be unschedulable with a message containing {text:?}");
        wait::object(&api, &name, &what, Duration::from_secs(120), |p| match p {
            Some(p) if scheduled(p) => Check::Fail(format!(
                "pod {name} was scheduled: {}",
                describe_pod(Some(p))
            )),
            Some(p) => match unschedulable_message(p) {
                Some(m) if m.contains(&text) => Check::Done(()),
                _ => Check::Pending(describe_pod(Some(p))),
            },
            None => Check::Pending("pod does not exist".into()),
        })
        .await?;
        Ok(())
    })
    .await
}

#[then(expr = "pod {string} has restarted at least {int} times")]
async fn restarted(w: &mut World, name: String, n: i32) -> Result<(), String> {
    run(async {
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        wait::object(
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
    })
    .await
}

#[then("all pods run on different nodes")]
async fn different_nodes(w: &mut World) -> Result<(), String> {
    run(async {
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for p in &w.pods {
            let pod = api.get(&p.name).await.with_context(|| format!("reading pod {}", p.name))?;
            let node = pod.spec.and_then(|s| s.node_name).with_context(|| format!("pod {} is not scheduled", p.name))?;
            if let Some(other) = seen.insert(node.clone(), p.name.clone()) {
                bail!("expected every pod on its own node, but pods {other} and {} both run on {node}", p.name);
            }
        }
        Ok(())
    })
    .await
}

/// Remembers the claims generated for the pod, so "the claim of pod" and
/// "the extended resource claim of pod" still resolve once it is gone.
async fn remember_generated_claims(w: &mut World, name: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
    if let Some(pod) = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading pod {name}"))?
    {
        if let Some(claim) = generated_claim(&pod, false) {
            w.generated_claims
                .insert(ClaimRef::OfPod(name.to_owned()), claim);
        }
        if let Some(claim) = generated_claim(&pod, true) {
            w.generated_claims
                .insert(ClaimRef::ExtendedOfPod(name.to_owned()), claim);
        }
    }
    Ok(())
}

async fn delete_pod(w: &mut World, name: &str, force: bool) -> anyhow::Result<()> {
    remember_generated_claims(w, name).await?;
    let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
    let dp = if force {
        DeleteParams::default().grace_period(0)
    } else {
        DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("deleting pod {name}: {e}")),
    }
}

#[when(expr = "pod {string} is deleted")]
async fn pod_deleted(w: &mut World, name: String) -> Result<(), String> {
    run(async {
        delete_pod(w, &name, false).await?;
        wait_pod(w, &name, PodState::Gone).await
    })
    .await
}

#[when(expr = "pod {string} is force-deleted")]
async fn pod_force_deleted(w: &mut World, name: String) -> Result<(), String> {
    run(async {
        delete_pod(w, &name, true).await?;
        wait_pod(w, &name, PodState::Gone).await
    })
    .await
}

#[when("all pods are deleted")]
async fn all_pods_deleted(w: &mut World) -> Result<(), String> {
    run(async {
        let names: Vec<String> = w.pods.iter().map(|p| p.name.clone()).collect();
        for p in &names {
            delete_pod(w, p, false).await?;
        }
        for p in &w.pods {
            wait_pod(w, &p.name, PodState::Gone).await?;
        }
        Ok(())
    })
    .await
}

#[when(expr = "the status of pod {string} marks its claim as not needed")]
async fn claim_not_needed(w: &mut World, name: String) -> Result<(), String> {
    run(async {
        let record = w
            .pods
            .iter()
            .find(|p| p.name == name)
            .with_context(|| format!("the scenario created no pod {name}"))?;
        let statuses: Vec<_> = record
            .pod_claims
            .iter()
            .map(|c| serde_json::json!({ "name": c }))
            .collect();
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        let patch = serde_json::json!({ "status": { "resourceClaimStatuses": statuses } });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("writing the claim statuses of pod {name}"))?;
        Ok(())
    })
    .await
}

/// Container env lines as the container sees them.
async fn env_of(w: &World, pod: &str, container: &str) -> anyhow::Result<Vec<String>> {
    context()?
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

async fn containers_of(w: &World, pod: &str, which: &str) -> anyhow::Result<Vec<String>> {
    if which != "every container" {
        return Ok(vec![
            quoted_list(which).into_iter().next().unwrap_or_default(),
        ]);
    }
    let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
    let p = api
        .get(pod)
        .await
        .with_context(|| format!("reading pod {pod}"))?;
    Ok(p.spec
        .map(|s| s.containers.into_iter().map(|c| c.name).collect())
        .unwrap_or_default())
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

/// What an init container's status says about its run: `Done` once it
/// exited 0 (or, for a sidecar, runs), `Fail` once it exited otherwise.
fn init_container_check(p: Option<&Pod>, pod: &str, container: &str) -> Check<()> {
    let Some(p) = p else {
        return Check::Pending("pod does not exist".into());
    };
    let spec = p
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container));
    let Some(spec) = spec else {
        return Check::Fail(format!("pod {pod} has no init container {container}"));
    };
    let sidecar = spec.restart_policy.as_deref() == Some("Always");
    let status = p
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container));
    let Some(status) = status else {
        return Check::Pending(format!(
            "no status of init container {container} yet; {}",
            describe_pod(Some(p))
        ));
    };
    let state = status.state.clone().unwrap_or_default();
    let command: Vec<&String> = spec.command.iter().chain(&spec.args).flatten().collect();
    let failed = |t: &k8s_openapi::api::core::v1::ContainerStateTerminated| {
        Check::Fail(format!(
            "init container {container} of pod {pod} exited with code {} ({}{}); the pod \
             builder's init script fails when its env lacks an entry it checks; command: {command:?}",
            t.exit_code,
            t.reason.clone().unwrap_or_default(),
            t.message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default(),
        ))
    };
    match (&state.terminated, &state.running, &status.last_state) {
        (Some(t), _, _) if t.exit_code == 0 => Check::Done(()),
        (Some(t), _, _) => failed(t),
        (None, Some(_), _) if sidecar => Check::Done(()),
        // Restarting after a failure (restart policy Always or OnFailure).
        (None, None, Some(last)) if last.terminated.as_ref().is_some_and(|t| t.exit_code != 0) => {
            failed(last.terminated.as_ref().expect("checked"))
        }
        _ => Check::Pending(format!(
            "init container {container}: {}",
            serde_json::to_string(&state).unwrap_or_default()
        )),
    }
}

#[then(
    regex = r#"^(every container|container "[^"]+"|init container "[^"]+") of pod "([^"]+)" has env (".+")$"#
)]
async fn has_env(w: &mut World, which: String, pod: String, list: String) -> Result<(), String> {
    run(async {
        let want = quoted_list(&list);
        if let Some(init) = which.strip_prefix("init container ") {
            let c = quoted_list(init).into_iter().next().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
            wait::object(
                &api,
                &pod,
                &format!("init container {c} of pod {pod} to complete"),
                POD_TIMEOUT,
                |p| init_container_check(p, &pod, &c),
            )
            .await?;
            // An init container that exited cannot be exec'd. Its exit code 0
            // already says its own script found the entries the pod was built
            // with (`init container` option) inside the container. The
            // entries listed here are compared with the env it ran with: on a
            // node with a container runtime, what its script printed to its
            // log before checking (container_env reads that log for an exited
            // init container); on a simulated node, the env the node gave it.
            let env = env_of(w, &pod, &c).await?;
            return check_env(&format!("init container {c}"), &pod, &want, &env);
        }
        wait_pod(w, &pod, PodState::Running).await?;
        for c in containers_of(w, &pod, &which).await? {
            let env = env_of(w, &pod, &c).await?;
            check_env(&format!("container {c}"), &pod, &want, &env)?;
        }
        Ok(())
    })
    .await
}

#[then(regex = r#"^container "([^"]+)" of pod "([^"]+)" has exactly the driver env (".+")$"#)]
async fn has_exact_env(
    w: &mut World,
    container: String,
    pod: String,
    list: String,
) -> Result<(), String> {
    run(async {
        wait_pod(w, &pod, PodState::Running).await?;
        let mut want = quoted_list(&list);
        want.sort();
        let got = driver_env(&env_of(w, &pod, &container).await?);
        if got != want {
            bail!("container {container} of pod {pod}: expected exactly the DRA env {want:?}, observed {got:?}");
        }
        Ok(())
    })
    .await
}

#[then(
    regex = r#"^container "([^"]+)" of pod "([^"]+)" (gets|does not get) request "([^"]+)" of (claim "[^"]+"|the claim of pod "[^"]+"|the extended resource claim of pod "[^"]+")$"#
)]
async fn gets_request(
    w: &mut World,
    container: String,
    pod: String,
    gets: String,
    request: String,
    claim: ClaimRef,
) -> Result<(), String> {
    run(async {
        wait_pod(w, &pod, PodState::Running).await?;
        let name = claim_name(w, &claim).await?;
        // The driver marks every request it prepared with this env entry, so
        // it shows which requests' devices reached the container.
        let marker = format!(
            "{}=true",
            driver_logic::marker_env_key(&name, driver_logic::base_request(&request))
        );
        let env = env_of(w, &pod, &container).await?;
        let want = gets == "gets";
        if env.contains(&marker) != want {
            bail!(
                "container {container} of pod {pod}: expected {}the device of request {request} of claim {name} \
                 (env {marker}); its DRA env is {:?}",
                if want { "" } else { "not " },
                driver_env(&env)
            );
        }
        Ok(())
    })
    .await
}

#[then(expr = "pod {string} has extended resource requests:")]
async fn extended_requests(w: &mut World, pod: String, step: &Step) -> Result<(), String> {
    run(async {
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
        want.sort();
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        wait::object(
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
                got.sort();
                if got == want {
                    Check::Done(())
                } else {
                    Check::Pending(format!("requestMappings {got:?}"))
                }
            },
        )
        .await?;
        Ok(())
    })
    .await
}

#[then(expr = "pod {string} has no extended resource claim")]
async fn no_extended_claim(w: &mut World, pod: String) -> Result<(), String> {
    run(async {
        let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
        let p = api
            .get(&pod)
            .await
            .with_context(|| format!("reading pod {pod}"))?;
        if let Some(claim) = generated_claim(&p, true) {
            bail!("pod {pod}: expected no extended resource claim, but the scheduler made {claim}");
        }
        Ok(())
    })
    .await
}

#[then(expr = "pod {string} gets a {string} event containing {string}")]
async fn pod_event(w: &mut World, pod: String, reason: String, text: String) -> Result<(), String> {
    run(async {
        let api: Api<Event> = Api::namespaced(w.client()?, &w.namespace);
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
    })
    .await
}

/// Deletes every pod of the namespace (teardown) and waits until they are gone.
pub(crate) async fn delete_all_pods(w: &World, timeout: Duration) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(w.client()?, &w.namespace);
    // Proxy pods of drivers are torn down with their driver, not here.
    let lp = ListParams::default().labels("app.kubernetes.io/part-of!=dra-test-driver");
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .context("deleting the scenario's pods")?;
    let config = watcher::Config::default().labels("app.kubernetes.io/part-of!=dra-test-driver");
    wait::list(
        &api,
        config,
        "the scenario's pods to be gone",
        timeout,
        |pods| {
            if pods.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(
                    pods.iter()
                        .map(|p| {
                            format!(
                                "{}: {}",
                                p.metadata.name.clone().unwrap_or_default(),
                                describe_pod(Some(p))
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            }
        },
    )
    .await?;
    Ok(())
}
