//! Objects a scenario created from manifests, addressed as `<Kind> "<name>"`:
//! patch them (spec or status), read them back, list and delete them. Enough
//! for upstream's CRUD tests without a step per resource type.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::World;
use super::api::client_for;
use super::params::{Identity, Kind, Strings, phrase_words};
use crate::ground::dynamic::{self, EventKind, ObjectWatch, Part, PatchType};
use crate::ground::objects;
use crate::harness::crud::{self, How};

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
    fn patched(kind: Kind, name: String, step: Step<'_>) => write(How::MergePatch, Part::Object);

    #[when(expr = "the status of {kind} {string} is patched with:")]
    fn status_patched(kind: Kind, name: String, step: Step<'_>) => write(How::MergePatch, Part::Status);

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
    fn updated(kind: Kind, name: String, step: Step<'_>) => write(How::Update, Part::Object);

    #[when(expr = "the status of {kind} {string} is updated with:")]
    fn status_updated(kind: Kind, name: String, step: Step<'_>) => write(How::Update, Part::Status);

    /// Read as the admin, written as `identity`; retried while RBAC still
    /// forbids it. What the write returns must hold the doc string as sent.
    #[when(expr = "the status of {kind} {string} is updated as {identity} with:")]
    fn status_updated_as(kind: Kind, name: String, who: Identity, step: Step<'_>)
        => write_as(How::Update, Part::Status);

    /// Read through the status subresource.
    #[then(expr = "the status of {kind} {string} has:")]
    fn status_has(kind: Kind, name: String, step: Step<'_>) => has(Part::Status);

    /// One delete-collection request; a watch opened before it must see
    /// every listed object deleted.
    #[when(expr = "{kind} objects labelled {string} are deleted as a collection")]
    fn deleted_collection(kind: Kind, label: String);

    #[when(expr = "the status of {kind} {string} is patched as {identity} with:")]
    fn status_patched_as(kind: Kind, name: String, who: Identity, step: Step<'_>)
        => write_as(How::MergePatch, Part::Status);

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
        return Ok((crud::api(client, ar, namespaced, &w.namespace), name));
    }
    // The kinds other steps make (claims, pods, classes, ...), by name.
    if let Some((ar, namespaced)) = crud::dra_kind(kind) {
        return Ok((crud::api(client, &ar, namespaced, &w.namespace), name));
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
        crud::DRA_KINDS.join(", ")
    )
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

/// The APIs (read as the admin, written as `who`), real name and doc
/// string of a write to an object a step names.
struct Target {
    reader: Api<DynamicObject>,
    writer: Api<DynamicObject>,
    name: String,
    body: Value,
}

impl Target {
    async fn new(
        w: &World,
        who: &Identity,
        kind: &str,
        name: &str,
        step: &Step,
    ) -> anyhow::Result<Self> {
        let (reader, name) = lookup(w, kind, name)?;
        let (writer, _) = lookup_as(w, who, kind, &name).await?;
        let body = yaml_doc(w, step)?;
        Ok(Target {
            reader,
            writer,
            name,
            body,
        })
    }

    fn write<'a>(&'a self, kind: &'a str, how: How, part: Part) -> crud::Write<'a> {
        crud::Write {
            reader: &self.reader,
            writer: &self.writer,
            kind,
            name: &self.name,
            part,
            how,
            body: &self.body,
        }
    }
}

/// Writes the doc string as the admin, once.
async fn write(
    w: &World,
    kind: Kind,
    name: String,
    step: &Step,
    how: How,
    part: Part,
) -> anyhow::Result<()> {
    let target = Target::new(w, &Identity::Admin, &kind.0, &name, step).await?;
    target.write(&kind.0, how, part).once().await?;
    Ok(())
}

/// Writes the doc string as `who`, retried while RBAC still forbids it.
async fn write_as(
    w: &World,
    kind: Kind,
    name: String,
    who: Identity,
    step: &Step,
    how: How,
    part: Part,
) -> anyhow::Result<()> {
    let target = Target::new(w, &who, &kind.0, &name, step).await?;
    target
        .write(&kind.0, how, part)
        .until_allowed(&format!("{who:?}"))
        .await?;
    Ok(())
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
    let text = objects::expand(&text, &w.vars())?;
    let (how, invalid_only) = match refusal {
        Refusal::PatchFailsWith => (How::MergePatch, false),
        Refusal::UpdateInvalidWith => (How::Update, true),
    };
    let target = Target::new(w, &who, &kind.0, &name, step).await?;
    target
        .write(&kind.0, how, Part::Status)
        .until_refused(&format!("{who:?}"), &text, invalid_only)
        .await?;
    Ok(())
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
    crud::until_gone(&api, &name, &what, GONE_TIMEOUT).await?;
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

/// The API of `kind` (in the scenario's namespace when namespaced), for
/// steps about all objects of a kind.
fn kind_api(w: &World, kind: &str) -> anyhow::Result<Api<DynamicObject>> {
    let client = w.client()?;
    if let Some((ar, namespaced)) = w
        .scenario
        .objects()
        .find(|(ar, _, _)| ar.kind == kind)
        .map(|(ar, _, n)| (ar.clone(), n))
        .or_else(|| crud::dra_kind(kind))
    {
        return Ok(crud::api(client, &ar, namespaced, &w.namespace));
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
    let what = format!("listing {kind} objects labelled {label}");
    let mut found = crud::names(&api, Some(&label), &what).await?;
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
    let names = crud::names(&api, None, &format!("listing {kind} objects")).await?;
    if !names.contains(&name) {
        bail!("listing {kind} objects did not find {name}; found {names:?}");
    }
    Ok(())
}

async fn deleted(w: &mut World, kind: Kind, name: String) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    crud::delete(&api, &kind.0, &name, DELETE_TIMEOUT).await?;
    // Nothing left for teardown to delete.
    w.scenario.forget_object(&kind.0, &name);
    Ok(())
}

async fn marked_for_deletion(w: &mut World, kind: Kind, name: String) -> anyhow::Result<()> {
    let (api, name) = lookup(w, &kind.0, &name)?;
    crud::mark_for_deletion(&api, &kind.0, &name).await?;
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
    let (ar, namespaced) = crud::resource_kind(&client, kind).await?;
    Ok(crud::api(client, &ar, namespaced, &w.namespace))
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
