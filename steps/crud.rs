//! Objects a scenario created from manifests, addressed as `<Kind> "<name>"`:
//! patch them (spec or status), read them back, list and delete them. Enough
//! for upstream's CRUD tests without a step per resource type.
use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use futures::TryStreamExt as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use serde_json::Value;

use super::World;
use super::api::client_for;
use super::params::{Identity, Kind, Strings, phrase_words};
use crate::ground::objects::{self, delete_if_present};
use crate::ground::wait::{self, Check};
use crate::harness::api_conformance::merge;

sentences! {
    #[when(expr = "{kind} {string} is patched with:")]
    fn patched(kind: Kind, name: String, step: Step<'_>) => write(Write::Patch, Part::Object);

    #[when(expr = "the status of {kind} {string} is patched with:")]
    fn status_patched(kind: Kind, name: String, step: Step<'_>) => write(Write::Patch, Part::Status);

    /// A patch of the given type (`JSON merge`, `strategic merge`, `JSON`
    /// (a list of operations) or `apply`, whose apiVersion, kind and name
    /// are filled in), of the object or of its status subresource.
    #[when(expr = "{kind} {string} is patched with a(n) {patchtype} patch:")]
    fn patched_typed(kind: Kind, name: String, pt: PatchType, step: Step<'_>)
        => typed_patch(Part::Object);

    #[when(expr = "the status of {kind} {string} is patched with a(n) {patchtype} patch:")]
    fn status_patched_typed(kind: Kind, name: String, pt: PatchType, step: Step<'_>)
        => typed_patch(Part::Status);

    /// Read, merge the doc string in, write back whole (PUT); retried on a
    /// conflict only.
    #[when(expr = "{kind} {string} is updated with:")]
    fn updated(kind: Kind, name: String, step: Step<'_>) => write(Write::Update, Part::Object);

    #[when(expr = "the status of {kind} {string} is updated with:")]
    fn status_updated(kind: Kind, name: String, step: Step<'_>) => write(Write::Update, Part::Status);

    /// Read as the admin, written as `identity`; retried while RBAC still
    /// forbids it. What the write returns must hold the doc string as sent.
    #[when(expr = "the status of {kind} {string} is updated as {identity} with:")]
    fn status_updated_as(kind: Kind, name: String, who: Identity, step: Step<'_>)
        => write_as(Write::Update, Part::Status);

    /// Read through the status subresource.
    #[then(expr = "the status of {kind} {string} has:")]
    fn status_has(kind: Kind, name: String, step: Step<'_>) => has(Part::Status);

    /// One delete-collection request; a watch opened before it must see
    /// every listed object deleted.
    #[when(expr = "{kind} objects labelled {string} are deleted as a collection")]
    fn deleted_collection(kind: Kind, label: String);

    #[when(expr = "the status of {kind} {string} is patched as {identity} with:")]
    fn status_patched_as(kind: Kind, name: String, who: Identity, step: Step<'_>)
        => write_as(Write::Patch, Part::Status);

    /// Tries until the status patch fails with the text (RBAC and admission
    /// take a moment to apply).
    #[then(expr = "patching the status of {kind} {string} as {identity} fails with {string}:")]
    fn status_patch_fails(kind: Kind, name: String, who: Identity, text: String, step: Step<'_>)
        => until_refused(Write::Patch, Refusal::AnyWithText);

    /// Upstream's UpdateStatus that validation must refuse: tries until the
    /// write (PUT) is refused as Invalid (422) with the text.
    #[then(expr = "updating the status of {kind} {string} as {identity} is refused as invalid with {string}:")]
    fn status_update_invalid(kind: Kind, name: String, who: Identity, text: String, step: Step<'_>)
        => until_refused(Write::Update, Refusal::InvalidWithText);

    #[then(expr = "{kind} {string} has:")]
    fn has(kind: Kind, name: String, step: Step<'_>) => has(Part::Object);

    /// The field at the dotted path equals the doc string's value exactly:
    /// nothing missing, nothing extra.
    #[then(expr = "{kind} {string} has {string} equal to:")]
    fn has_exactly(kind: Kind, name: String, path: String, step: Step<'_>);

    #[then(expr = "listing {kind} objects finds {string}")]
    fn listed(kind: Kind, name: String);

    #[then(expr = "listing {kind} objects labelled {string} finds {strings}")]
    fn listed_labelled(kind: Kind, label: String, names: Strings);

    #[when(expr = "{kind} {string} is deleted")]
    fn deleted(kind: Kind, name: String);

    /// Someone else (a controller, the kubelet) deletes it: waits (2
    /// minutes) until reading it finds nothing.
    #[then(expr = "{kind} {string} no longer exists")]
    fn gone(kind: Kind, name: String);

    /// One DELETE request, without waiting: a finalizer keeps the object,
    /// terminating, for later steps.
    #[when(expr = "{kind} {string} is marked for deletion")]
    fn marked_for_deletion(kind: Kind, name: String);

    /// Opened before the objects exist, as upstream's conformance helper
    /// starts its informer: nothing may be listed yet.
    #[given(expr = "a watch on {kind} objects labelled {string}")]
    fn watch_started(kind: Kind, label: String);

    /// The events since the previous check, as upstream's helper matches
    /// them: `added` is ADDED then any MODIFIED, `modified` one or more
    /// MODIFIED, `deleted` any MODIFIED then DELETED; all about this
    /// object (its UID as added), resource versions never going back.
    #[then(expr = "the watch sees {kind} {string} {watchevent}")]
    fn watch_sees(kind: Kind, name: String, event: Watched);
}

/// How long a deleted object may take to go (finalizers run first).
const DELETE_TIMEOUT: Duration = Duration::from_secs(60);

/// The API and real name of an object this scenario created; `name` may hold
/// placeholders.
pub(super) fn lookup(
    w: &World,
    kind: &str,
    name: &str,
) -> anyhow::Result<(Api<DynamicObject>, String)> {
    lookup_with(w, w.client()?, kind, name)
}

/// [`lookup`], with the API calls made as `who`.
async fn lookup_as(
    w: &World,
    who: &Identity,
    kind: &str,
    name: &str,
) -> anyhow::Result<(Api<DynamicObject>, String)> {
    lookup_with(w, client_for(w, who).await?, kind, name)
}

fn lookup_with(
    w: &World,
    client: kube::Client,
    kind: &str,
    name: &str,
) -> anyhow::Result<(Api<DynamicObject>, String)> {
    let name = objects::expand(name, &w.vars())?;
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

pub(super) fn yaml_doc(w: &World, step: &Step) -> anyhow::Result<Value> {
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

/// The part of an object a step writes or reads: the object through its own
/// endpoint, or its status subresource (which takes nothing but the status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Object,
    Status,
}

impl Part {
    /// How messages name this part of `kind` `name`.
    fn of(self, kind: &str, name: &str) -> String {
        match self {
            Part::Object => format!("{kind} {name}"),
            Part::Status => format!("the status of {kind} {name}"),
        }
    }
}

/// How a doc string gets into an object: a JSON merge patch, or merged into
/// what was read and written back whole (PUT).
#[derive(Clone, Copy, Debug)]
enum Write {
    Patch,
    Update,
}

/// Writes the doc string as the admin, once.
async fn write(
    w: &World,
    kind: Kind,
    name: String,
    step: &Step,
    how: Write,
    part: Part,
) -> anyhow::Result<()> {
    write_once(w, &Identity::Admin, &kind.0, &name, step, how, part).await
}

/// Writes the doc string as `who`, retried while RBAC still forbids it.
async fn write_as(
    w: &World,
    kind: Kind,
    name: String,
    who: Identity,
    step: &Step,
    how: Write,
    part: Part,
) -> anyhow::Result<()> {
    let kind = kind.0;
    until_rbac_allows(
        format!(
            "the {} of {} as {who:?} to be allowed",
            match how {
                Write::Patch => "patch",
                Write::Update => "update",
            },
            part.of(&kind, &name)
        ),
        || write_once(w, &who, &kind, &name, step, how, part),
    )
    .await
}

async fn write_once(
    w: &World,
    who: &Identity,
    kind: &str,
    name: &str,
    step: &Step,
    how: Write,
    part: Part,
) -> anyhow::Result<()> {
    if let Write::Update = how {
        return update_as(w, who, kind, name, step, part).await;
    }
    let (api, name) = lookup_as(w, who, kind, name).await?;
    let body = yaml_doc(w, step)?;
    let pp = PatchParams::default();
    let patch = Patch::Merge(&body);
    match part {
        Part::Object => api.patch(&name, &pp, &patch).await,
        Part::Status => api.patch_status(&name, &pp, &patch).await,
    }
    .with_context(|| format!("patching {}", part.of(kind, &name)))?;
    Ok(())
}

/// Retries `write` while RBAC forbids it, and nothing else: a role granted
/// a moment ago may not be in the authorizer's cache yet.
async fn until_rbac_allows<F, Fut>(what: String, write: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    wait::poll(&what, RBAC_SETTLES, Duration::from_secs(1), || async {
        match write().await {
            Ok(()) => Check::Done(()),
            Err(e) if forbidden(&e) => Check::Pending(format!("{e:#}")),
            Err(e) => Check::Fail(format!("{e:#}")),
        }
    })
    .await?;
    Ok(())
}

/// How long RBAC and admission changes get to reach the API server's caches.
const RBAC_SETTLES: Duration = Duration::from_secs(60);

/// An RBAC denial, as opposed to a rejection by validation: HTTP 403, or a
/// 422 whose only causes are `FieldValueForbidden` (the permission checks
/// validation makes, such as the one for writing `status.devices`).
fn forbidden(e: &anyhow::Error) -> bool {
    e.chain().any(|c| match c.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(s)) => {
            s.code == 403
                || (s.code == 422
                    && s.details.as_ref().is_some_and(|d| {
                        !d.causes.is_empty()
                            && d.causes.iter().all(|c| c.reason == "FieldValueForbidden")
                    }))
        }
        _ => false,
    })
}

/// Which refusal of a status write a step waits for.
#[derive(Clone, Copy)]
enum Refusal {
    /// Any error containing the text.
    AnyWithText,
    /// Invalid (422) with the text, as upstream's `IsInvalid` checks.
    InvalidWithText,
}

/// Writes the status as `who` until the write is refused as `refusal` says,
/// with an error containing `text` (RBAC and admission take a moment).
#[allow(clippy::too_many_arguments)]
async fn until_refused(
    w: &World,
    kind: Kind,
    name: String,
    who: Identity,
    text: String,
    step: &Step,
    how: Write,
    refusal: Refusal,
) -> anyhow::Result<()> {
    let kind = kind.0;
    let text = objects::expand(&text, &w.vars())?;
    let verb = match how {
        Write::Patch => "patch",
        Write::Update => "update",
    };
    let (refused, invalid_only) = match refusal {
        Refusal::AnyWithText => ("fail", false),
        Refusal::InvalidWithText => ("be refused as invalid", true),
    };
    wait::poll(
        &format!("the status {verb} of {kind} {name} as {who:?} to {refused} with {text:?}"),
        RBAC_SETTLES,
        Duration::from_secs(1),
        || async {
            match write_once(w, &who, &kind, &name, step, how, Part::Status).await {
                Ok(()) => Check::Pending(format!("the {verb} succeeded")),
                Err(e) if (!invalid_only || invalid(&e)) && format!("{e:#}").contains(&text) => {
                    Check::Done(())
                }
                Err(e) => Check::Pending(format!("{e:#}")),
            }
        },
    )
    .await?;
    Ok(())
}

/// The API server refused the write as invalid (422).
fn invalid(e: &anyhow::Error) -> bool {
    e.chain().any(
        |c| matches!(c.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == 422),
    )
}

async fn has(w: &World, kind: Kind, name: String, step: &Step, part: Part) -> anyhow::Result<()> {
    let (got, what) = read(w, &kind.0, &name, part).await?;
    let want = yaml_doc(w, step)?;
    contains(&got, &want, "").map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// How long an object may take to be deleted by whoever deletes it.
const GONE_TIMEOUT: Duration = Duration::from_secs(120);

async fn gone(w: &World, kind: Kind, name: String) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    let what = format!("{kind} {name} to be deleted");
    // A dynamic kind has no watch the wait helpers take; reading it
    // often enough is as good for one object.
    wait::poll(&what, GONE_TIMEOUT, Duration::from_millis(250), || async {
        match api.get_opt(&name).await {
            Ok(None) => Check::Done(()),
            Ok(Some(o)) if o.metadata.deletion_timestamp.is_some() => {
                Check::Pending("marked for deletion, still there".into())
            }
            Ok(Some(_)) => Check::Pending("still there".into()),
            Err(e) => Check::Pending(format!("reading it: {e}")),
        }
    })
    .await?;
    Ok(())
}

/// The object (or its status) as JSON, and how messages name it.
async fn read(w: &World, kind: &str, name: &str, part: Part) -> anyhow::Result<(Value, String)> {
    let (api, name) = lookup(w, kind, name)?;
    let what = part.of(kind, &name);
    let obj = match part {
        Part::Object => api.get(&name).await,
        Part::Status => api.get_status(&name).await,
    }
    .with_context(|| format!("reading {what}"))?;
    Ok((serde_json::to_value(&obj)?, what))
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
    let (got, what) = read(w, &kind.0, &name, Part::Object).await?;
    let want = yaml_doc(w, step)?;
    let got = at_path(&got, &path);
    if *got != want {
        let diff = contains(got, &want, &path).err().unwrap_or_else(|| {
            extra_field(got, &want, &path).map_or_else(
                || "it differs".to_owned(),
                |p| format!("{p} is there, but not expected"),
            )
        });
        bail!("{what}: {path} is not as expected ({diff})\nexpected: {want}\nobserved: {got}");
    }
    Ok(())
}

/// The four patch types of the API: `JSON merge`, `strategic merge`, `JSON`
/// and `apply` (server-side apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Strategic,
    Json,
    Apply,
}

phrase_words! {
    PatchType as "patchtype", "patch type" {
        "JSON merge" => PatchType::Merge,
        "strategic merge" => PatchType::Strategic,
        "JSON" => PatchType::Json,
        "apply" => PatchType::Apply,
    }
}

impl PatchType {
    fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// The field manager of apply patches.
const FIELD_MANAGER: &str = "dra-e2e";

async fn typed_patch(
    w: &World,
    kind: Kind,
    name: String,
    pt: PatchType,
    step: &Step,
    part: Part,
) -> anyhow::Result<()> {
    let kind = kind.0;
    let (api, name) = lookup(w, &kind, &name)?;
    let mut body = yaml_doc(w, step)?;
    let current = api
        .get(&name)
        .await
        .with_context(|| format!("reading {kind} {name}"))?;
    if pt == PatchType::Apply {
        // An apply patch names what it applies to.
        let types = current.types.clone().unwrap_or_default();
        let obj = body
            .as_object_mut()
            .context("an apply patch must be a YAML mapping")?;
        obj.insert("apiVersion".into(), types.api_version.into());
        obj.insert("kind".into(), types.kind.into());
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(m) = meta.as_object_mut() {
            m.insert("name".into(), name.clone().into());
        }
    }
    if pt == PatchType::Json && !body.is_array() {
        bail!("a JSON patch is a list of operations (- {{ op: add, path: ..., value: ... }})");
    }
    // JSON patches go out as raw requests: the typed client has no JSON patch.
    let mut url = format!("{}/{name}", api.resource_url());
    if part == Part::Status {
        url.push_str("/status");
    }
    let mut query = "fieldValidation=Strict".to_owned();
    if pt == PatchType::Apply {
        query.push_str(&format!("&fieldManager={FIELD_MANAGER}&force=true"));
    }
    let req = http::Request::patch(format!("{url}?{query}"))
        .header(http::header::CONTENT_TYPE, pt.content_type())
        .body(serde_json::to_vec(&body)?)
        .context("building the patch request")?;
    let client = w.client()?;
    client
        .request::<DynamicObject>(req)
        .await
        .with_context(|| format!("patching {} with a {pt:?} patch", part.of(&kind, &name)))?;
    Ok(())
}

/// How often an update is retried when someone else wrote the object first.
const CONFLICT_RETRIES: usize = 5;

async fn update_as(
    w: &World,
    who: &Identity,
    kind: &str,
    name: &str,
    step: &Step,
    part: Part,
) -> anyhow::Result<()> {
    let (api, name) = lookup(w, kind, name)?;
    let (writer, _) = lookup_as(w, who, kind, &name).await?;
    let change = yaml_doc(w, step)?;
    let what = part.of(kind, &name);
    for _ in 0..CONFLICT_RETRIES {
        let current = match part {
            Part::Object => api.get(&name).await,
            Part::Status => api.get_status(&name).await,
        }
        .with_context(|| format!("reading {what}"))?;
        let before = current.metadata.resource_version.clone();
        let mut obj = serde_json::to_value(&current)?;
        merge(&mut obj, &change);
        let obj: DynamicObject = serde_json::from_value(obj)?;
        let pp = PostParams::default();
        let written = match part {
            Part::Object => writer.replace(&name, &pp, &obj).await,
            Part::Status => writer.replace_status(&name, &pp, &obj).await,
        };
        match written {
            Ok(after) => {
                // A write that changes something gets a new resource version.
                if after.metadata.resource_version == before {
                    bail!("updating {what} left its resourceVersion at {before:?}");
                }
                let returned = serde_json::to_value(&after)?;
                contains(&returned, &change, "")
                    .map_err(|e| anyhow::anyhow!("updating {what} returned otherwise: {e}"))?;
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e).with_context(|| format!("updating {what}")),
        }
    }
    bail!("updating {what} conflicted {CONFLICT_RETRIES} times in a row")
}

/// The API of `kind` (in the scenario's namespace when namespaced), for
/// steps about all objects of a kind.
fn kind_api(w: &World, kind: &str) -> anyhow::Result<Api<DynamicObject>> {
    let client = w.client()?;
    if let Some((ar, namespaced)) = w
        .scenario
        .objects()
        .find(|(ar, _, _)| ar.kind == kind)
        .map(|(ar, _, n)| (ar.clone(), n))
        .or_else(|| dra_kind(kind))
    {
        return Ok(if namespaced {
            Api::namespaced_with(client, &w.namespace, &ar)
        } else {
            Api::all_with(client, &ar)
        });
    }
    bail!("this scenario created no {kind} objects")
}

async fn listed_labelled(
    w: &World,
    kind: Kind,
    label: String,
    names: Strings,
) -> anyhow::Result<()> {
    let label = objects::expand(&label, &w.vars())?;
    let api = kind_api(w, &kind.0)?;
    let mut found: Vec<String> = api
        .list(&ListParams::default().labels(&label))
        .await
        .with_context(|| format!("listing {kind} objects labelled {label}"))?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    found.sort();
    let mut want = names
        .0
        .iter()
        .map(|n| objects::expand(n, &w.vars()))
        .collect::<Result<Vec<_>, _>>()?;
    want.sort();
    if found != want {
        bail!("listing {kind} objects labelled {label} found {found:?}, expected {want:?}");
    }
    Ok(())
}

async fn deleted_collection(w: &mut World, kind: Kind, label: String) -> anyhow::Result<()> {
    let label = objects::expand(&label, &w.vars())?;
    let api = kind_api(w, &kind.0)?;
    let list = api
        .list(&ListParams::default().labels(&label))
        .await
        .with_context(|| format!("listing {kind} objects labelled {label}"))?;
    let mut left: Vec<String> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    if left.is_empty() {
        bail!("no {kind} objects are labelled {label}; nothing to delete");
    }
    let rv = list.metadata.resource_version.unwrap_or_default();
    let watch = api
        .watch(&WatchParams::default().labels(&label), &rv)
        .await
        .with_context(|| format!("watching {kind} objects labelled {label}"))?;
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&label),
    )
    .await
    .with_context(|| format!("deleting the {kind} objects labelled {label}"))?;
    let mut watch = std::pin::pin!(watch);
    let what = format!("the watch to see the {kind} objects labelled {label} deleted");
    let seen = tokio::time::timeout(DELETE_TIMEOUT, async {
        while !left.is_empty() {
            match watch.try_next().await {
                Ok(Some(WatchEvent::Deleted(o))) => {
                    let n = o.metadata.name.unwrap_or_default();
                    left.retain(|l| *l != n);
                }
                Ok(Some(WatchEvent::Error(e))) => bail!("{what}: the watch failed: {e}"),
                Ok(Some(_)) => {}
                Ok(None) => bail!("{what}: the watch ended; not seen deleted: {left:?}"),
                Err(e) => bail!("{what}: {e}"),
            }
        }
        Ok(())
    })
    .await;
    match seen {
        Ok(r) => r?,
        Err(_) => bail!("timed out after {DELETE_TIMEOUT:?} waiting for {what}"),
    }
    for n in list.items.iter().filter_map(|o| o.metadata.name.as_deref()) {
        w.scenario.forget_object(&kind.0, n);
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

async fn marked_for_deletion(w: &mut World, kind: Kind, name: String) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    api.delete(&name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {kind} {name}"))?;
    Ok(())
}

/// The event a watch check expects of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    Added,
    Modified,
    Deleted,
}

phrase_words! {
    Watched as "watchevent", "watch event" {
        "added" => Watched::Added,
        "modified" => Watched::Modified,
        "deleted" => Watched::Deleted,
    }
}

impl Watched {
    /// The watch event's type as the API names it.
    fn event(self) -> &'static str {
        match self {
            Watched::Added => "ADDED",
            Watched::Modified => "MODIFIED",
            Watched::Deleted => "DELETED",
        }
    }
}

/// How long a watch event may take to arrive after the write that caused it
/// returned.
const EVENT_DELIVERY: Duration = Duration::from_secs(10);

type EventStream =
    Pin<Box<dyn futures::Stream<Item = Result<WatchEvent<DynamicObject>, kube::Error>> + Send>>;

/// A scenario's watch on the objects of one kind with one label, and what
/// its checks learnt so far.
pub struct ObjectWatch {
    kind: String,
    label: String,
    events: EventStream,
    /// Each object's UID as its ADDED event gave it; a DELETED event ends it.
    uids: BTreeMap<String, String>,
    /// The resource version of the last event.
    last_version: Option<u64>,
}

impl std::fmt::Debug for ObjectWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWatch")
            .field("kind", &self.kind)
            .field("label", &self.label)
            .field("uids", &self.uids)
            .field("last_version", &self.last_version)
            .finish_non_exhaustive()
    }
}

/// The API of `kind`: a DRA kind the steps know, or whatever version
/// resource.k8s.io prefers for it.
async fn watched_api(w: &World, kind: &str) -> anyhow::Result<Api<DynamicObject>> {
    let client = w.client()?;
    let (ar, namespaced) = match dra_kind(kind) {
        Some(k) => k,
        None => {
            let group = kube::discovery::group(&client, "resource.k8s.io")
                .await
                .context("discovering the API group resource.k8s.io")?;
            let (ar, caps) = group
                .resources_by_stability()
                .into_iter()
                .find(|(ar, _)| ar.kind == kind)
                .with_context(|| format!("the cluster serves no kind {kind} in resource.k8s.io"))?;
            (ar, caps.scope == kube::discovery::Scope::Namespaced)
        }
    };
    Ok(if namespaced {
        Api::namespaced_with(client, &w.namespace, &ar)
    } else {
        Api::all_with(client, &ar)
    })
}

async fn watch_started(w: &mut World, kind: Kind, label: String) -> anyhow::Result<()> {
    let label = objects::expand(&label, &w.vars())?;
    let api = watched_api(w, &kind.0).await?;
    let list = api
        .list(&ListParams::default().labels(&label))
        .await
        .with_context(|| format!("listing {kind} objects labelled {label}"))?;
    let there: Vec<String> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    if !there.is_empty() {
        bail!(
            "a watch on {kind} objects labelled {label} must start before they exist; there are already {there:?}"
        );
    }
    let rv = list.metadata.resource_version.unwrap_or_default();
    let events = api
        .watch(&WatchParams::default().labels(&label), &rv)
        .await
        .with_context(|| format!("watching {kind} objects labelled {label}"))?;
    w.crud_watch = Some(ObjectWatch {
        kind: kind.0,
        label,
        events: Box::pin(events),
        uids: BTreeMap::new(),
        last_version: None,
    });
    Ok(())
}

/// One watch event in a failure message: `ADDED a (uid u, version 7)`.
fn describe(e: &WatchEvent<DynamicObject>) -> String {
    let (what, o) = match e {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        WatchEvent::Bookmark(_) => return "BOOKMARK".to_owned(),
        WatchEvent::Error(e) => return format!("ERROR {e}"),
    };
    format!(
        "{what} {} (uid {}, version {})",
        o.metadata.name.as_deref().unwrap_or("?"),
        o.metadata.uid.as_deref().unwrap_or("?"),
        o.metadata.resource_version.as_deref().unwrap_or("?")
    )
}

/// Where an event sequence stands against what a check expects.
#[derive(Debug, PartialEq, Eq)]
enum Progress {
    /// The expected event came.
    Seen,
    /// Nothing wrong yet; more events are needed.
    Waiting,
    /// An event the expectation rules out.
    Wrong(String),
}

impl ObjectWatch {
    /// Checks one event of `name` against `want`, given how many events
    /// about it this check has taken already.
    fn step(
        &mut self,
        name: &str,
        want: Watched,
        taken: usize,
        e: &WatchEvent<DynamicObject>,
    ) -> Progress {
        let (o, kind) = match e {
            WatchEvent::Added(o) => (o, Watched::Added),
            WatchEvent::Modified(o) => (o, Watched::Modified),
            WatchEvent::Deleted(o) => (o, Watched::Deleted),
            WatchEvent::Bookmark(_) => return Progress::Waiting,
            WatchEvent::Error(_) => return Progress::Wrong("the watch failed".to_owned()),
        };
        let got_name = o.metadata.name.clone().unwrap_or_default();
        if got_name != name {
            return Progress::Wrong(format!("an event about {got_name}, not {name}"));
        }
        let uid = o.metadata.uid.clone().unwrap_or_default();
        match (kind, self.uids.get(name)) {
            (Watched::Added, Some(old)) => {
                return Progress::Wrong(format!(
                    "{name} added again (uid {uid}) while {old} was never seen deleted"
                ));
            }
            (Watched::Added, None) => {}
            (_, Some(known)) if *known != uid => {
                return Progress::Wrong(format!(
                    "an event about another {name} (uid {uid}, added as {known})"
                ));
            }
            (_, None) => {
                return Progress::Wrong(format!("an event about {name} before it was seen added"));
            }
            _ => {}
        }
        let version = o.metadata.resource_version.as_deref().unwrap_or_default();
        let Ok(version) = version.parse::<u64>() else {
            return Progress::Wrong(format!("resource version {version:?} is not a number"));
        };
        if let Some(last) = self.last_version
            && version < last
        {
            return Progress::Wrong(format!(
                "resource version {version} is lower than the one before it, {last}"
            ));
        }
        self.last_version = Some(version);
        match kind {
            Watched::Added => {
                self.uids.insert(name.to_owned(), uid);
            }
            Watched::Deleted => {
                self.uids.remove(name);
            }
            Watched::Modified => {}
        }
        match (want, kind) {
            (Watched::Added, Watched::Added) if taken == 0 => Progress::Seen,
            (Watched::Added, _) => Progress::Wrong(format!(
                "{} first, where ADDED was to come first",
                kind.event()
            )),
            (Watched::Modified, Watched::Modified) => Progress::Seen,
            (Watched::Deleted, Watched::Deleted) => Progress::Seen,
            (_, Watched::Modified) => Progress::Waiting,
            (_, other) => Progress::Wrong(format!(
                "{} where {} was to come",
                other.event(),
                want.event()
            )),
        }
    }
}

async fn watch_sees(w: &mut World, kind: Kind, name: String, want: Watched) -> anyhow::Result<()> {
    let name = objects::expand(&name, &w.vars())?;
    let watch = w.crud_watch.as_mut().with_context(|| {
        format!(
            "no watch is open; start one with `Given a watch on {kind} objects labelled \"...\"`"
        )
    })?;
    if watch.kind != kind.0 {
        bail!(
            "the watch is on {} objects labelled {}, not on {kind}",
            watch.kind,
            watch.label
        );
    }
    let what = format!(
        "the watch on {kind} objects labelled {} to see {name} {}",
        watch.label,
        format!("{want:?}").to_lowercase()
    );
    let mut seen: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + EVENT_DELIVERY;
    loop {
        let next = tokio::time::timeout_at(deadline, watch.events.try_next()).await;
        let e = match next {
            Err(_) => bail!(
                "timed out after {EVENT_DELIVERY:?} waiting for {what}; since the check before it saw {}",
                if seen.is_empty() {
                    "nothing".to_owned()
                } else {
                    seen.join(", ")
                }
            ),
            Ok(Ok(Some(e))) => e,
            Ok(Ok(None)) => bail!("{what}: the watch ended; it saw {seen:?}"),
            Ok(Err(e)) => bail!("{what}: the watch failed: {e}"),
        };
        seen.push(describe(&e));
        match watch.step(&name, want, seen.len() - 1, &e) {
            Progress::Seen => return Ok(()),
            Progress::Waiting => {}
            Progress::Wrong(why) => bail!("{what}: {why}; it saw {}", seen.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        DRA_KINDS, ObjectWatch, Progress, Watched, at_path, contains, dra_kind, extra_field,
        forbidden,
    };
    use kube::api::{DynamicObject, WatchEvent};
    use serde_json::json;

    fn object(name: &str, uid: &str, version: u64) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": { "name": name, "uid": uid, "resourceVersion": version.to_string() },
        }))
        .unwrap()
    }

    fn watch() -> ObjectWatch {
        ObjectWatch {
            kind: "DeviceClass".into(),
            label: "crud=x".into(),
            events: Box::pin(futures::stream::empty()),
            uids: Default::default(),
            last_version: None,
        }
    }

    fn wrong(p: Progress) -> String {
        match p {
            Progress::Wrong(why) => why,
            other => panic!("expected a wrong event, got {other:?}"),
        }
    }

    #[test]
    fn a_watch_follows_one_object_through_its_life() {
        let mut w = watch();
        let added = WatchEvent::Added(object("a", "u1", 5));
        assert_eq!(w.step("a", Watched::Added, 0, &added), Progress::Seen);
        // Others' writes before the expected event are allowed.
        let by_others = WatchEvent::Modified(object("a", "u1", 6));
        assert_eq!(
            w.step("a", Watched::Deleted, 0, &by_others),
            Progress::Waiting
        );
        let ours = WatchEvent::Modified(object("a", "u1", 7));
        assert_eq!(w.step("a", Watched::Modified, 0, &ours), Progress::Seen);
        let gone = WatchEvent::Deleted(object("a", "u1", 8));
        assert_eq!(w.step("a", Watched::Deleted, 1, &gone), Progress::Seen);
        // Created again, with a new UID.
        let again = WatchEvent::Added(object("a", "u2", 9));
        assert_eq!(w.step("a", Watched::Added, 0, &again), Progress::Seen);
    }

    #[test]
    fn a_watch_rejects_what_upstream_rejects() {
        let mut w = watch();
        assert_eq!(
            w.step(
                "a",
                Watched::Added,
                0,
                &WatchEvent::Added(object("a", "u1", 5))
            ),
            Progress::Seen
        );
        let back = WatchEvent::Modified(object("a", "u1", 4));
        let why = wrong(w.step("a", Watched::Modified, 0, &back));
        assert!(
            why.contains("resource version 4 is lower than the one before it, 5"),
            "{why}"
        );
        let other_uid = WatchEvent::Modified(object("a", "u9", 6));
        let why = wrong(w.step("a", Watched::Modified, 0, &other_uid));
        assert!(why.contains("another a (uid u9, added as u1)"), "{why}");
        let other_name = WatchEvent::Modified(object("b", "u1", 6));
        let why = wrong(w.step("a", Watched::Modified, 0, &other_name));
        assert!(why.contains("an event about b, not a"), "{why}");
        let deleted = WatchEvent::Deleted(object("a", "u1", 6));
        let why = wrong(w.step("a", Watched::Modified, 0, &deleted));
        assert!(why.contains("DELETED where MODIFIED was to come"), "{why}");
        let unknown = WatchEvent::Modified(object("c", "u3", 7));
        let why = wrong(w.step("c", Watched::Modified, 0, &unknown));
        assert!(why.contains("before it was seen added"), "{why}");
    }

    fn api_error(status: serde_json::Value) -> anyhow::Error {
        let status: kube::core::Status = serde_json::from_value(status).unwrap();
        anyhow::Error::new(kube::Error::Api(Box::new(status))).context("patching")
    }

    #[test]
    fn only_permission_denials_count_as_forbidden() {
        let denied = |code: u16, causes: &[&str]| {
            let causes: Vec<_> = causes
                .iter()
                .map(|r| json!({"reason": r, "message": "m", "field": "status.devices"}))
                .collect();
            api_error(json!({
                "code": code, "message": "m", "reason": "Invalid",
                "details": {"name": "c", "group": "g", "kind": "k", "uid": "", "causes": causes},
            }))
        };
        assert!(forbidden(&denied(403, &[])));
        assert!(forbidden(&denied(422, &["FieldValueForbidden"])));
        assert!(!forbidden(&denied(422, &["FieldValueInvalid"])));
        assert!(!forbidden(&denied(
            422,
            &["FieldValueForbidden", "FieldValueRequired"]
        )));
        assert!(!forbidden(&denied(422, &[])));
        assert!(!forbidden(&anyhow::anyhow!("not an API error")));
    }

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
