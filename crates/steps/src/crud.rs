//! Objects a scenario created from manifests, addressed as `<Kind> "<name>"`:
//! patch them (spec or status), read them back, list and delete them. Enough
//! for upstream's CRUD tests without a step per resource type.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::World;
use super::api::client_for;
use super::params::{Identity, Kind, Strings, phrase_words};
use crate::ground::dynamic::{self, EventKind, ObjectWatch, Part, PatchType, Update};
use crate::ground::objects::{self, delete_if_present};
use crate::ground::wait::{self, Check};

/// What the CRUD steps remember between steps: the watch one step opens on
/// objects of a kind, so that later steps can tell which events it saw
/// while the scenario acted on them.
#[derive(Debug, Default)]
pub struct CrudMemory {
    /// The watch "a watch on ... objects" opened, for "the watch sees ...".
    pub watch: Option<ObjectWatch>,
}

sentences! {
    #[when(expr = "{kind} {string} is patched with:")]
    fn patched(kind: Kind, name: String, step: Step<'_>) => write(Write::Patch, Part::Object);

    #[when(expr = "the status of {kind} {string} is patched with:")]
    fn status_patched(kind: Kind, name: String, step: Step<'_>) => write(Write::Patch, Part::Status);

    /// A patch of the given type (`JSON merge`, `strategic merge`, `JSON`
    /// (a list of operations) or `apply`, whose apiVersion, kind and name
    /// are filled in), of the object or of its status subresource.
    #[when(expr = "{kind} {string} is patched with a(n) {patchtype} patch:")]
    fn patched_typed(kind: Kind, name: String, pt: PatchTypeWord, step: Step<'_>)
        => typed_patch(Part::Object);

    #[when(expr = "the status of {kind} {string} is patched with a(n) {patchtype} patch:")]
    fn status_patched_typed(kind: Kind, name: String, pt: PatchTypeWord, step: Step<'_>)
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
        => until_refused(Refusal::PatchFailsWith);

    /// Upstream's UpdateStatus that validation must refuse: tries until the
    /// write (PUT) is refused as Invalid (422) with the text.
    #[then(expr = "updating the status of {kind} {string} as {identity} is refused as invalid with {string}:")]
    fn status_update_invalid(kind: Kind, name: String, who: Identity, text: String, step: Step<'_>)
        => until_refused(Refusal::UpdateInvalidWith);

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

/// Which status write a refusal step tries, and which refusal it waits for.
#[derive(Clone, Copy)]
enum Refusal {
    /// A JSON merge patch, failing with any error containing the text.
    PatchFailsWith,
    /// An update (PUT), refused as Invalid (422) with the text, as
    /// upstream's `IsInvalid` checks.
    UpdateInvalidWith,
}

/// Writes the status as `who` until the write is refused as `refusal` says,
/// with an error containing `text` (RBAC and admission take a moment).
async fn until_refused(
    w: &World,
    kind: Kind,
    name: String,
    who: Identity,
    text: String,
    step: &Step,
    refusal: Refusal,
) -> anyhow::Result<()> {
    let kind = kind.0;
    let text = objects::expand(&text, &w.vars())?;
    let (how, verb, refused, invalid_only) = match refusal {
        Refusal::PatchFailsWith => (Write::Patch, "patch", "fail", false),
        Refusal::UpdateInvalidWith => (Write::Update, "update", "be refused as invalid", true),
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
    dynamic::contains(&got, &want).map_err(|e| anyhow::anyhow!("{what}: {e}"))
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

async fn has_exactly(
    w: &World,
    kind: Kind,
    name: String,
    path: String,
    step: &Step,
) -> anyhow::Result<()> {
    let (got, what) = read(w, &kind.0, &name, Part::Object).await?;
    let want = yaml_doc(w, step)?;
    let got = dynamic::value_at(&got, &path);
    if let Err(diff) = dynamic::equals_at(&path, got, &want) {
        bail!("{what}: {path} is not as expected ({diff})\nexpected: {want}\nobserved: {got}");
    }
    Ok(())
}

/// The four patch types of the API by their words: `JSON merge`,
/// `strategic merge`, `JSON` and `apply` (server-side apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchTypeWord(pub PatchType);

phrase_words! {
    PatchTypeWord(PatchType) as "patchtype", "patch type"
}

async fn typed_patch(
    w: &World,
    kind: Kind,
    name: String,
    pt: PatchTypeWord,
    step: &Step,
    part: Part,
) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    let body = yaml_doc(w, step)?;
    dynamic::patch(&api, &name, part, pt.0, &body)
        .await
        .with_context(|| format!("patching {}", part.of(&kind.0, &name)))?;
    Ok(())
}

/// Reads as the admin, writes as `who` ([`dynamic::update_checked`]).
async fn update_as(
    w: &World,
    who: &Identity,
    kind: &str,
    name: &str,
    step: &Step,
    part: Part,
) -> anyhow::Result<()> {
    let (reader, name) = lookup(w, kind, name)?;
    let (writer, _) = lookup_as(w, who, kind, &name).await?;
    let change = yaml_doc(w, step)?;
    dynamic::update_checked(&Update {
        reader: &reader,
        writer: &writer,
        kind,
        name: &name,
        part,
        change: &change,
    })
    .await?;
    Ok(())
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
    let deleted = dynamic::delete_collection(&api, &kind.0, &label, DELETE_TIMEOUT).await?;
    for n in &deleted {
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
pub struct Watched(pub EventKind);

phrase_words! {
    Watched as "watchevent", "watch event" {
        "added" => Watched(EventKind::Added),
        "modified" => Watched(EventKind::Modified),
        "deleted" => Watched(EventKind::Deleted),
    }
}

/// How long a watch event may take to arrive after the write that caused it
/// returned.
const EVENT_DELIVERY: Duration = Duration::from_secs(10);

/// How long a new watch may take to list what it watches.
const WATCH_LISTS: Duration = Duration::from_secs(30);

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
    w.crud.watch = Some(ObjectWatch::start(api, &kind.0, &label, WATCH_LISTS).await?);
    Ok(())
}

async fn watch_sees(w: &mut World, kind: Kind, name: String, want: Watched) -> anyhow::Result<()> {
    let name = objects::expand(&name, &w.vars())?;
    let watch = w.crud.watch.as_mut().with_context(|| {
        format!(
            "no watch is open; start one with `Given a watch on {kind} objects labelled \"...\"`"
        )
    })?;
    if watch.kind() != kind.0 {
        bail!(
            "the watch is on {} objects labelled {}, not on {kind}",
            watch.kind(),
            watch.selector()
        );
    }
    watch.sees(&name, want.0, EVENT_DELIVERY).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{DRA_KINDS, dra_kind, forbidden};
    use serde_json::json;

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
}
