//! ResourceClaims and templates: creating them, acting on them, checking them.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimSpec};
use kube::api::DeleteParams;

use super::World;
use super::params::{ClaimOptions, ClaimPhrase, ClaimState, DriverRef, Strings};
use crate::ground::objects::{self, ClaimShape};
use crate::ground::wait::{self, Check};

/// What the claim steps remember between steps: the claims generated for
/// pods (from templates or extended resources), noted before a pod is
/// deleted or once it is evicted, so that "the claim of pod ..." still
/// names its claim when the pod, which said it, is gone ([`claim_name`]).
#[derive(Debug, Default)]
pub struct ClaimMemory {
    /// Claims generated for pods, remembered before a pod is deleted.
    pub generated: std::collections::BTreeMap<ClaimPhrase, String>,
}

sentences! {
    #[given(expr = "an external claim {string}{claimoptions}")]
    fn external_claim(name: String, options: ClaimOptions);

    #[given(expr = "an external claim {string} with spec:")]
    fn external_claim_spec(name: String, step: Step<'_>);

    #[then(expr = "{claim} is {claimstate}")]
    fn claim_is(claim: ClaimPhrase, state: ClaimState);

    #[then(expr = "{claim} is allocated with results {strings}")]
    fn claim_results(claim: ClaimPhrase, results: Strings);

    #[then(expr = "{claim} is reserved for pod {string}")]
    fn claim_reserved(claim: ClaimPhrase, pod: String);

    #[when(expr = "{claim} is deleted")]
    fn claim_deleted(claim: ClaimPhrase);

    #[when(expr = "{claim} is force-deleted")]
    fn claim_force_deleted(claim: ClaimPhrase);

    #[then(expr = "the claim of pod {string} has a name shorter than 64 characters")]
    fn generated_name_valid(pod: String);
}

/// Upstream's PodStart timeout, used for claim state changes.
pub const CLAIM_TIMEOUT: Duration = Duration::from_secs(300);

pub(crate) fn default_shape(w: &World, d: &DriverRef) -> anyhow::Result<ClaimShape> {
    let class = w.class_name(d)?;
    let driver = w.driver_name(d)?;
    let mut shape = ClaimShape::default_for(&class, &driver);
    // Upstream's `{"a":"b"}` is what its test driver (and the suite's)
    // accept; a real driver's opaque config has a schema of its own, so
    // claims for the driver under test carry none.
    if w.external_driver(d).is_some() {
        shape.parameters = None;
    }
    Ok(shape)
}

/// A claim spec written in a feature file as YAML, with placeholders.
pub(crate) fn spec_from_doc(w: &World, step: &Step) -> anyhow::Result<ResourceClaimSpec> {
    let doc = step
        .docstring
        .as_ref()
        .context("this step needs the claim spec as a doc string (\"\"\" ... \"\"\")")?;
    let text = objects::expand(doc, &w.vars())?;
    serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the claim spec is not a valid ResourceClaim spec: {e}"))
}

async fn external_claim(w: &mut World, name: String, options: ClaimOptions) -> anyhow::Result<()> {
    let mut shape = default_shape(w, &options.driver)?;
    shape.admin_access = options.admin_access;
    w.create_claim(&name, shape.spec()?).await
}

async fn external_claim_spec(w: &mut World, name: String, step: &Step) -> anyhow::Result<()> {
    let spec = spec_from_doc(w, step)?;
    w.create_claim(&name, spec).await
}

/// The claim's name, resolving a pod's generated claim (waits until the
/// controller or scheduler wrote it into the pod status).
pub(crate) async fn claim_name(w: &World, claim: &ClaimPhrase) -> anyhow::Result<String> {
    let (pod, extended) = match claim {
        ClaimPhrase::Named(n) => return Ok(n.clone()),
        // Remembered when the pod was deleted, so its claim can still be checked.
        _ if w.claims.generated.contains_key(claim) => {
            return Ok(w.claims.generated[claim].clone());
        }
        ClaimPhrase::OfPod(pod) => (pod, false),
        ClaimPhrase::ExtendedOfPod(pod) => (pod, true),
    };
    let api = w.api::<Pod>()?;
    let what = if extended {
        format!("the extended resource claim of pod {pod} to be made")
    } else {
        format!("the claim of pod {pod} to be generated")
    };
    let name = wait::pod(&api, pod, &what, CLAIM_TIMEOUT, |p| {
        let Some(p) = p else {
            return Check::Pending("pod does not exist".into());
        };
        match generated_claim(p, extended) {
            Some(n) => Check::Done(n),
            None if extended => Check::Pending("no extendedResourceClaimStatus yet".into()),
            None => Check::Pending("no resourceClaimStatuses yet".into()),
        }
    })
    .await?;
    Ok(name)
}

/// The claim the pod status names: generated for its (first) inline claim,
/// or made by the scheduler for its extended resources.
pub(crate) fn generated_claim(pod: &Pod, extended: bool) -> Option<String> {
    let status = pod.status.as_ref()?;
    if extended {
        status
            .extended_resource_claim_status
            .as_ref()
            .map(|s| s.resource_claim_name.clone())
            .filter(|n| !n.is_empty())
    } else {
        status
            .resource_claim_statuses
            .as_deref()?
            .iter()
            .find_map(|s| s.resource_claim_name.clone())
    }
}

fn describe_claim(c: Option<&ResourceClaim>) -> String {
    let Some(c) = c else {
        return "claim does not exist".to_owned();
    };
    let status = c.status.as_ref();
    let allocated = status.and_then(|s| s.allocation.as_ref()).is_some();
    let reserved: Vec<String> = status
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| format!("{}/{}", r.resource, r.name))
        .collect();
    format!(
        "allocated={allocated}, reservedFor=[{}], deleting={}",
        reserved.join(", "),
        c.metadata.deletion_timestamp.is_some()
    )
}

/// Watches the claim until `done` holds for it (`None`: it does not exist).
async fn wait_claim(
    w: &World,
    claim: &ClaimPhrase,
    what: &str,
    done: impl Fn(Option<&ResourceClaim>) -> bool,
) -> anyhow::Result<()> {
    let name = claim_name(w, claim).await?;
    let api = w.api::<ResourceClaim>()?;
    let what = format!("ResourceClaim {name} to be {what}");
    wait::object(&api, &name, &what, CLAIM_TIMEOUT, |c| {
        if done(c) {
            Check::Done(())
        } else {
            Check::Pending(describe_claim(c))
        }
    })
    .await?;
    Ok(())
}

fn reserved_for(c: Option<&ResourceClaim>) -> Vec<String> {
    c.and_then(|c| c.status.as_ref())
        .and_then(|s| s.reserved_for.as_ref())
        .map(|r| {
            r.iter()
                .filter(|r| r.resource == "pods")
                .map(|r| r.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

async fn claim_is(w: &World, claim: ClaimPhrase, state: ClaimState) -> anyhow::Result<()> {
    let what = format!("{state:?}").to_lowercase();
    wait_claim(w, &claim, &what, |c| {
        let allocated = c
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.allocation.as_ref())
            .is_some();
        match state {
            ClaimState::Allocated => allocated,
            ClaimState::Deallocated => c.is_some() && !allocated,
            ClaimState::NotReserved => c.is_some() && reserved_for(c).is_empty(),
            ClaimState::Deleted => c.is_none(),
        }
    })
    .await
}

/// `request (driver/pool/device)` of each allocation result, in order.
fn allocation_results(c: &ResourceClaim) -> Option<Vec<(String, String)>> {
    let allocation = c.status.as_ref()?.allocation.as_ref()?;
    let results = allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    Some(
        results
            .iter()
            .map(|r| {
                (
                    r.request.clone(),
                    format!("{}/{}/{}", r.driver, r.pool, r.device),
                )
            })
            .collect(),
    )
}

async fn claim_results(w: &World, claim: ClaimPhrase, results: Strings) -> anyhow::Result<()> {
    let want = results.0;
    let name = claim_name(w, &claim).await?;
    let api = w.api::<ResourceClaim>()?;
    // An allocation never changes once made, so the first one decides.
    let got = wait::object(
        &api,
        &name,
        &format!("ResourceClaim {name} to be allocated"),
        CLAIM_TIMEOUT,
        |c| match c.and_then(allocation_results) {
            Some(r) => Check::Done(r),
            None => Check::Pending(describe_claim(c)),
        },
    )
    .await?;
    let requests: Vec<&str> = got.iter().map(|(r, _)| r.as_str()).collect();
    if requests != want {
        let listed: Vec<String> = got.iter().map(|(r, d)| format!("{r} ({d})")).collect();
        bail!(
            "ResourceClaim {name} was allocated with results for {:?}, expected {want:?}: {}",
            requests,
            listed.join(", ")
        );
    }
    Ok(())
}

async fn claim_reserved(w: &World, claim: ClaimPhrase, pod: String) -> anyhow::Result<()> {
    let what = format!("reserved for pod {pod}");
    wait_claim(w, &claim, &what, |c| reserved_for(c).contains(&pod)).await
}

async fn claim_deleted(w: &World, claim: ClaimPhrase) -> anyhow::Result<()> {
    delete_claim(w, claim, false).await
}

async fn claim_force_deleted(w: &World, claim: ClaimPhrase) -> anyhow::Result<()> {
    delete_claim(w, claim, true).await
}

async fn delete_claim(w: &World, claim: ClaimPhrase, force: bool) -> anyhow::Result<()> {
    let name = claim_name(w, &claim).await?;
    let api = w.api::<ResourceClaim>()?;
    let dp = if force {
        DeleteParams::default().grace_period(0)
    } else {
        DeleteParams::default()
    };
    // Only the grace period differs: the claim's finalizer stays, so the
    // control plane (the resourceclaim controller) has to release the claim
    // once no pod reserves it, as it does for upstream's force-delete.
    api.delete(&name, &dp)
        .await
        .with_context(|| format!("deleting ResourceClaim {name}"))?;
    Ok(())
}

async fn generated_name_valid(w: &World, pod: String) -> anyhow::Result<()> {
    let name = claim_name(w, &ClaimPhrase::OfPod(pod)).await?;
    if name.len() > 63 {
        bail!(
            "expected a generated claim name of at most 63 characters, got {} ({name})",
            name.len()
        );
    }
    Ok(())
}
