//! Objects a scenario created from manifests, addressed as `<Kind> "<name>"`:
//! patch them (spec or status), read them back, list and delete them. Enough
//! for upstream's CRUD tests without a step per resource type.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{then, when};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::World;
use super::api::client_for;
use super::params::{Identity, Kind};
use crate::objects::{self, delete_if_present};
use crate::wait::{self, Check};

sentences! {
    #[when(expr = "{kind} {string} is patched with:")]
    fn patched(kind: Kind, name: String, step: Step<'_>);

    #[when(expr = "the status of {kind} {string} is patched with:")]
    fn status_patched(kind: Kind, name: String, step: Step<'_>);

    #[when(expr = "the status of {kind} {string} is patched as {identity} with:")]
    fn status_patched_as(kind: Kind, name: String, who: Identity, step: Step<'_>);

    /// Tries until the status patch fails with the text (RBAC and admission
    /// take a moment to apply).
    #[then(expr = "patching the status of {kind} {string} as {identity} fails with {string}:")]
    fn status_patch_fails(kind: Kind, name: String, who: Identity, text: String, step: Step<'_>);

    #[then(expr = "{kind} {string} has:")]
    fn has(kind: Kind, name: String, step: Step<'_>);

    /// The field at the dotted path equals the doc string's value exactly:
    /// nothing missing, nothing extra.
    #[then(expr = "{kind} {string} has {string} equal to:")]
    fn has_exactly(kind: Kind, name: String, path: String, step: Step<'_>);

    #[then(expr = "listing {kind} objects finds {string}")]
    fn listed(kind: Kind, name: String);

    #[when(expr = "{kind} {string} is deleted")]
    fn deleted(kind: Kind, name: String);
}

/// How long a deleted object may take to go (finalizers run first).
const DELETE_TIMEOUT: Duration = Duration::from_secs(60);

/// The API and real name of an object this scenario created; `name` may hold
/// placeholders.
fn lookup(w: &World, kind: &str, name: &str) -> anyhow::Result<(Api<DynamicObject>, String)> {
    lookup_as(w, &Identity::Admin, kind, name)
}

/// [`lookup`], with the API calls made as `who`.
fn lookup_as(
    w: &World,
    who: &Identity,
    kind: &str,
    name: &str,
) -> anyhow::Result<(Api<DynamicObject>, String)> {
    let name = objects::expand(name, &w.vars())?;
    let client = client_for(w, who)?;
    let found = w
        .scenario
        .objects()
        .find(|(ar, n, _)| ar.kind == kind && *n == name);
    if let Some((ar, _, namespaced)) = found {
        return Ok(if namespaced {
            (Api::namespaced_with(client, &w.namespace, ar), name)
        } else {
            (Api::all_with(client, ar), name)
        });
    }
    // The kinds other steps make (claims, pods, classes, ...), by name.
    if let Some((ar, namespaced)) = dra_kind(kind) {
        return Ok(if namespaced {
            (Api::namespaced_with(client, &w.namespace, &ar), name)
        } else {
            (Api::all_with(client, &ar), name)
        });
    }
    // Namespaced ones first.
    let mut created: Vec<_> = w.scenario.objects().collect();
    created.sort_by_key(|(_, _, namespaced)| !namespaced);
    let known: Vec<String> = created
        .iter()
        .map(|(ar, n, _)| format!("{} {n:?}", ar.kind))
        .collect();
    bail!(
        "this scenario created no {kind} {name:?} (created: {}); create it with `the following objects are created:` \
         (objects of kinds {} are found by name without that)",
        if known.is_empty() {
            "nothing".to_owned()
        } else {
            known.join(", ")
        },
        DRA_KINDS.join(", ")
    )
}

const DRA_KINDS: [&str; 6] = [
    "Pod",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
];

/// The API of a kind the step library creates itself, and whether it is
/// namespaced (then it is looked up in the scenario's namespace).
fn dra_kind(kind: &str) -> Option<(ApiResource, bool)> {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::resource::v1 as r;
    Some(match kind {
        "Pod" => (ApiResource::erase::<Pod>(&()), true),
        "ResourceClaim" => (ApiResource::erase::<r::ResourceClaim>(&()), true),
        "ResourceClaimTemplate" => (ApiResource::erase::<r::ResourceClaimTemplate>(&()), true),
        "DeviceClass" => (ApiResource::erase::<r::DeviceClass>(&()), false),
        "ResourceSlice" => (ApiResource::erase::<r::ResourceSlice>(&()), false),
        "DeviceTaintRule" => (ApiResource::erase::<r::DeviceTaintRule>(&()), false),
        _ => return None,
    })
}

fn yaml_doc(w: &World, step: &Step) -> anyhow::Result<Value> {
    let doc = step
        .docstring
        .as_ref()
        .context("this step needs YAML as a doc string (\"\"\" ... \"\"\")")?;
    let text = objects::expand(doc, &w.vars())?;
    serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the doc string is not valid YAML: {e}"))
}

/// Checks that every field of `want` is in `got` with the same value; lists
/// must have the same length. The error names the first differing path.
pub fn contains(got: &Value, want: &Value, path: &str) -> Result<(), String> {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => contains(gv, wv, &p)?,
                    None if wv.is_null() => {}
                    None => return Err(format!("{p} is missing (expected {wv})")),
                }
            }
            Ok(())
        }
        (Value::Array(g), Value::Array(w)) => {
            if g.len() != w.len() {
                return Err(format!(
                    "{path} has {} entries, expected {}: {got}",
                    g.len(),
                    w.len()
                ));
            }
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                contains(gv, wv, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if got == want => Ok(()),
        _ => Err(format!("{path} is {got}, expected {want}")),
    }
}

async fn patched(w: &World, kind: Kind, name: String, step: &Step) -> anyhow::Result<()> {
    patch_as(w, &Identity::Admin, &kind.0, &name, step, false).await
}

async fn status_patched(w: &World, kind: Kind, name: String, step: &Step) -> anyhow::Result<()> {
    status_patched_as(w, kind, name, Identity::Admin, step).await
}

async fn status_patched_as(
    w: &World,
    kind: Kind,
    name: String,
    who: Identity,
    step: &Step,
) -> anyhow::Result<()> {
    let kind = kind.0;
    // A role granted a moment ago may not be in the authorizer's cache
    // yet: retry what RBAC forbids, for a while, and nothing else.
    wait::poll(
        &format!("the status patch of {kind} {name} as {who:?} to be allowed"),
        RBAC_SETTLES,
        Duration::from_secs(1),
        || async {
            match patch_as(w, &who, &kind, &name, step, true).await {
                Ok(()) => Check::Done(()),
                Err(e) if forbidden(&e) => Check::Pending(format!("{e:#}")),
                Err(e) => Check::Fail(format!("{e:#}")),
            }
        },
    )
    .await?;
    Ok(())
}

/// How long RBAC and admission changes get to reach the API server's caches.
const RBAC_SETTLES: Duration = Duration::from_secs(60);

/// An RBAC denial (HTTP 403), as opposed to a rejection by validation.
fn forbidden(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(s)) if s.code == 403
        )
    })
}

async fn status_patch_fails(
    w: &World,
    kind: Kind,
    name: String,
    who: Identity,
    text: String,
    step: &Step,
) -> anyhow::Result<()> {
    let kind = kind.0;
    let text = objects::expand(&text, &w.vars())?;
    wait::poll(
        &format!("the status patch of {kind} {name} as {who:?} to fail with {text:?}"),
        RBAC_SETTLES,
        Duration::from_secs(1),
        || async {
            match patch_as(w, &who, &kind, &name, step, true).await {
                Ok(()) => Check::Pending("the patch succeeded".to_owned()),
                Err(e) if format!("{e:#}").contains(&text) => Check::Done(()),
                Err(e) => Check::Pending(format!("{e:#}")),
            }
        },
    )
    .await?;
    Ok(())
}

async fn patch_as(
    w: &World,
    who: &Identity,
    kind: &str,
    name: &str,
    step: &Step,
    status: bool,
) -> anyhow::Result<()> {
    let (api, name) = lookup_as(w, who, kind, name)?;
    let body = yaml_doc(w, step)?;
    let pp = PatchParams::default();
    let patch = Patch::Merge(&body);
    if status {
        api.patch_status(&name, &pp, &patch).await
    } else {
        api.patch(&name, &pp, &patch).await
    }
    .with_context(|| {
        format!(
            "patching {}{kind} {name}",
            if status { "the status of " } else { "" }
        )
    })?;
    Ok(())
}

async fn has(w: &World, kind: Kind, name: String, step: &Step) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    let want = yaml_doc(w, step)?;
    let obj = api
        .get(&name)
        .await
        .with_context(|| format!("reading {kind} {name}"))?;
    let got = serde_json::to_value(&obj)?;
    contains(&got, &want, "").map_err(|e| anyhow::anyhow!("{kind} {name}: {e}"))
}

/// The first field of `got` that `want` does not have, as a path.
fn extra_field(got: &Value, want: &Value, path: &str) -> Option<String> {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => g.iter().find_map(|(k, gv)| {
            let p = format!("{path}.{k}");
            match w.get(k) {
                None if !gv.is_null() => Some(p),
                None => None,
                Some(wv) => extra_field(gv, wv, &p),
            }
        }),
        (Value::Array(g), Value::Array(w)) => g
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (gv, wv))| extra_field(gv, wv, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// The value at a dotted path (`status.devices`), `null` where it is absent.
fn at_path<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|k| !k.is_empty())
        .try_fold(v, |v, k| v.get(k))
        .unwrap_or(&Value::Null)
}

async fn has_exactly(
    w: &World,
    kind: Kind,
    name: String,
    path: String,
    step: &Step,
) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    let want = yaml_doc(w, step)?;
    let obj = api
        .get(&name)
        .await
        .with_context(|| format!("reading {kind} {name}"))?;
    let got = serde_json::to_value(&obj)?;
    let got = at_path(&got, &path);
    if *got != want {
        let diff = contains(got, &want, &path).err().unwrap_or_else(|| {
            extra_field(got, &want, &path).map_or_else(
                || "it differs".to_owned(),
                |p| format!("{p} is there, but not expected"),
            )
        });
        bail!(
            "{kind} {name}: {path} is not as expected ({diff})\nexpected: {want}\nobserved: {got}"
        );
    }
    Ok(())
}

async fn listed(w: &World, kind: Kind, name: String) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {kind} objects"))?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    if !names.contains(&name) {
        bail!("listing {kind} objects did not find {name}; found {names:?}");
    }
    Ok(())
}

async fn deleted(w: &mut World, kind: Kind, name: String) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    delete_if_present(&api, &name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {kind} {name}"))?;
    // Dynamic objects have no watch-friendly type here; a short poll
    // with a deadline does the same job.
    wait::poll(
        &format!("{kind} {name} to be gone"),
        DELETE_TIMEOUT,
        Duration::from_millis(200),
        || async {
            match api.get_opt(&name).await {
                Ok(None) => Check::Done(()),
                Ok(Some(o)) => Check::Pending(format!(
                    "still there (finalizers: {:?})",
                    o.metadata.finalizers.unwrap_or_default()
                )),
                Err(e) => Check::Pending(format!("reading it failed: {e}")),
            }
        },
    )
    .await?;
    // Nothing left for teardown to delete.
    w.scenario.forget_object(&kind.0, &name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DRA_KINDS, at_path, contains, dra_kind, extra_field};
    use serde_json::json;

    #[test]
    fn every_listed_dra_kind_resolves() {
        for kind in DRA_KINDS {
            let (ar, _) = dra_kind(kind).unwrap();
            assert_eq!(ar.kind, kind);
        }
        assert!(dra_kind("ConfigMap").is_none());
    }

    #[test]
    fn at_path_finds_nested_fields_or_null() {
        let v = json!({ "status": { "devices": [1] } });
        assert_eq!(at_path(&v, "status.devices"), &json!([1]));
        assert_eq!(at_path(&v, "status.missing"), &serde_json::Value::Null);
        assert_eq!(at_path(&v, ""), &v);
    }

    #[test]
    fn extra_field_names_what_the_expectation_lacks() {
        let got = json!({ "a": [ { "x": 1, "y": 2 } ] });
        let want = json!({ "a": [ { "x": 1 } ] });
        assert_eq!(extra_field(&got, &want, "").as_deref(), Some(".a[0].y"));
        assert_eq!(extra_field(&want, &want, ""), None);
    }

    #[test]
    fn contains_checks_fields_and_names_the_first_difference() {
        let got = json!({ "spec": { "a": 1, "b": [ { "x": "y", "z": 2 } ] }, "extra": true });
        assert!(contains(&got, &json!({ "spec": { "a": 1 } }), "").is_ok());
        assert!(contains(&got, &json!({ "spec": { "b": [ { "x": "y" } ] } }), "").is_ok());
        let err = contains(&got, &json!({ "spec": { "b": [ { "x": "q" } ] } }), "").unwrap_err();
        assert!(err.contains(".spec.b[0].x"), "{err}");
        let err = contains(&got, &json!({ "spec": { "c": 1 } }), "").unwrap_err();
        assert!(err.contains(".spec.c is missing"), "{err}");
        let err = contains(&got, &json!({ "spec": { "b": [] } }), "").unwrap_err();
        assert!(err.contains("has 1 entries, expected 0"), "{err}");
        // null in the expectation means "absent or null".
        assert!(contains(&got, &json!({ "status": null }), "").is_ok());
    }
}
