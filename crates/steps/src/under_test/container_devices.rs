//! The devices in the containers of the driver's pods: what the profile's
//! containerCheck says a container with a claim has and one without has
//! not, and where the runner sees the driver's answers and the node's CDI
//! directory, answers that match the claims' allocations and CDI devices a
//! spec defines. A missing spec fails the step as soon as the driver
//! answered, instead of leaving the pod pending to a timeout.
use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::Pod;

use super::{claim_uids, scenario_claims};
use crate::World;
use crate::ground::objects::{PodClaims, PodShape};
use crate::ground::wait::PodState;
use crate::harness::under_test::{device_check, pack};
use crate::params::{Containers, DriverRef, NodeSel};

sentences! {
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
    pack::first_problem(SPEC_POLL, || async move {
        let current = w.pod(pod).await?;
        let Some(node) = current.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return Ok(None);
        };
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
                return Ok(Some((node, repeated.join("; "))));
            }
        }
        Ok(spec_missing(w, &node, &claims)
            .await?
            .map(|problem| (node, problem)))
    })
    .await
}

async fn has_device(w: &World, which: Containers, pod: String) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    let containers = tokio::select! {
        r = crate::pods::settled_containers(w, &which, &pod) => r?,
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
    crate::pods::wait_pod(w, &pod, PodState::Running).await?;
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
        let claim = crate::claims::default_shape(w, &DriverRef::The)?;
        w.create_template(&name, claim.spec()?).await?;
        let pod = shape.build()?;
        w.create_pod(&pod, shape.pod_claim_names()).await?;
        names.push(name);
    }
    for name in names {
        crate::pods::wait_pod(w, &name, PodState::Running).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
