//! Upstream's CRUD conformance test of one API resource, as one step: the
//! doc string is the test case (what to create, how to update the spec and
//! the status, which patches to send) and the harness makes every call and
//! check of upstream's `TestResource` (`api_conformance`). One step rather
//! than fifty: upstream's procedure deletes and re-creates the object for
//! every patch, and a scenario spelling that out would hide which patch a
//! resource is tested with.
use anyhow::Context as _;
use cucumber::gherkin::Step;
use cucumber::then;

use super::World;
use super::crud::yaml_doc;
use crate::harness::api_conformance::{self, TestCase};

sentences! {
    /// `group/version resource` as discovery lists it, for example
    /// `resource.k8s.io/v1 deviceclasses`. The doc string holds `initial`
    /// (the object, with a name), `update` and optionally `updateStatus`
    /// (merged into the object read back, then written whole), `patches`
    /// and `statusPatches` (each `type: strategic-merge | apply |
    /// json-merge | json` with its `data`) and `verifyContent`.
    #[then(expr = "the CRUD conformance test of {word} {word} passes with:")]
    fn passes(group_version: String, resource: String, step: Step<'_>);
}

async fn passes(
    w: &mut World,
    group_version: String,
    resource: String,
    step: &Step,
) -> anyhow::Result<()> {
    let case: TestCase = serde_json::from_value(yaml_doc(w, step)?)
        .context("the doc string is not a CRUD test case")?;
    api_conformance::run(
        w.client()?,
        &group_version,
        &resource,
        &w.namespace,
        &w.namespace,
        &case,
    )
    .await
    .with_context(|| format!("the CRUD conformance test of {group_version} {resource}"))
}
