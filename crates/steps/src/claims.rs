//! ResourceClaims and templates: creating them, acting on them, checking them.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimSpec};

use super::World;
use super::params::{ClaimOptions, ClaimPhrase, ClaimState, DriverRef, Strings};
use crate::ground::objects::{self, ClaimShape};
use crate::harness::claims::{self, conditions};

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
    let pods = w.api::<Pod>()?;
    Ok(claims::generated_name(&pods, pod, extended, CLAIM_TIMEOUT).await?)
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
    claims::until(&api, &name, what, CLAIM_TIMEOUT, done).await?;
    Ok(())
}

async fn claim_is(w: &World, claim: ClaimPhrase, state: ClaimState) -> anyhow::Result<()> {
    let what = format!("{state:?}").to_lowercase();
    let done = match state {
        ClaimState::Allocated => conditions::allocated,
        ClaimState::Deallocated => conditions::deallocated,
        ClaimState::NotReserved => conditions::not_reserved,
        ClaimState::Deleted => conditions::deleted,
    };
    wait_claim(w, &claim, &what, done).await
}

async fn claim_results(w: &World, claim: ClaimPhrase, results: Strings) -> anyhow::Result<()> {
    let want = results.0;
    let name = claim_name(w, &claim).await?;
    let api = w.api::<ResourceClaim>()?;
    let got = claims::allocation(&api, &name, CLAIM_TIMEOUT).await?;
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
    wait_claim(w, &claim, &what, conditions::reserved_for(&pod)).await
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
    claims::delete(&api, &name, force)
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
