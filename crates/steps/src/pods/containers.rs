//! What a pod's containers got: the env the driver's devices put there,
//! which requests of a claim reached which container, and how the pod's
//! extended resources map to the requests of the claim the scheduler made
//! for them. A container's env is read only once it settled (an init
//! container completed, the others running).
use anyhow::bail;
use cucumber::gherkin::Step;
use cucumber::then;
use k8s_openapi::api::core::v1::Pod;

use super::{POD_TIMEOUT, wait_pod};
use crate::World;
use crate::claims::claim_name;
use crate::ground::objects;
use crate::harness::claims::generated_claim;
use crate::harness::pods;
use crate::params::{ClaimPhrase, Containers, Gets, PodState, Strings};
use crate::plugin::driver_logic;

sentences! {
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
}

/// Container env lines as the container sees them.
pub(super) async fn env_of(w: &World, pod: &str, container: &str) -> anyhow::Result<Vec<String>> {
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
pub(super) fn check_env(
    what: &str,
    pod: &str,
    want: &[String],
    env: &[String],
) -> anyhow::Result<()> {
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
            pods::init_container_completed(&w.api::<Pod>()?, pod, c, POD_TIMEOUT).await?;
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

pub(crate) async fn gets_requests(
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
    pods::mapped_requests(&w.api::<Pod>()?, &pod, want, in_order, POD_TIMEOUT).await?;
    Ok(())
}

pub(crate) async fn no_extended_claim(w: &World, pod: String) -> anyhow::Result<()> {
    let p = w.pod(&pod).await?;
    if let Some(claim) = generated_claim(&p, true) {
        bail!("pod {pod}: expected no extended resource claim, but the scheduler made {claim}");
    }
    Ok(())
}
