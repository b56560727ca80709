//! Upstream's CRUD conformance procedure for one API resource
//! (`test/e2e/framework/conformance.TestResource`), as data plus one
//! procedure, as upstream has it: the test case says what to create, how to
//! update the spec and the status and which patches to send; the procedure
//! makes every call upstream makes, in upstream's order, and after each one
//! checks the answer, a cluster-wide watch and (for namespaced resources) a
//! namespace watch: the watches must hold exactly the object and must have
//! seen the events upstream expects (`add`, then only `update`s, ...), for
//! this object only, with resource versions never going back.
//!
//! Each patch is applied to a freshly deleted and re-created object, so that
//! every patch type alone must produce the update's result; status patches
//! are applied after the spec update of a re-created object. Nothing is
//! left behind: the object is deleted when the procedure ends, passed or
//! failed.
use std::time::Duration;

use dra_e2e_kube::dynamic::{
    self, EventKind, Lifecycles, Part, PatchType, Recorder, Update, contains, merge,
};
use dra_e2e_kube::wait::Check;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

/// The label upstream adds to every object of the test, for list and
/// delete-collection.
pub const TEST_LABEL: &str = "e2e-test.kubernetes.io";

/// How long the watches may take to catch up with a write (upstream's
/// default `Eventually` in the e2e framework), and to deliver the events
/// once caught up (upstream: 5 s).
const CATCH_UP: Duration = Duration::from_secs(30);
const EVENT_DELIVERY: Duration = Duration::from_secs(5);
/// How long a deleted object may take to be gone (`ensureNotFound`).
const GONE: Duration = Duration::from_secs(30);

/// One resource's test case, upstream's `ResourceTestcase` with the Go
/// update functions written as JSON merge patches applied to the object
/// the server returned.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCase {
    /// The object to create, without apiVersion and kind (discovery gives
    /// those). Named `test` unless it says otherwise; a cluster-scoped
    /// object's name gets `-<namespace>` appended.
    pub initial: Value,
    /// Merged into the object read back, then written whole (PUT).
    pub update: Value,
    /// Merged into the updated object, then written to the status
    /// subresource (PUT). Without it, the resource has no status tests.
    #[serde(default)]
    pub update_status: Option<Value>,
    /// Each applied alone to a re-created object; each must give the
    /// update's result.
    #[serde(default)]
    pub patches: Vec<PatchCase>,
    /// Each applied to the status of a re-created, updated object.
    #[serde(default)]
    pub status_patches: Vec<PatchCase>,
    /// Compare the content of every answer with what was sent (fields sent
    /// must come back; the server may add others). Upstream leaves it off
    /// for conformance, where admission may change what is stored.
    #[serde(default)]
    pub verify_content: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchCase {
    #[serde(rename = "type")]
    pub patch_type: PatchType,
    pub data: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Check(String),
    #[error("the test case: {0}")]
    Case(String),
    #[error(transparent)]
    Dynamic(#[from] dynamic::Error),
    #[error(transparent)]
    Wait(#[from] dra_e2e_kube::wait::WaitError),
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// What the watches must have seen since the previous check, upstream's
/// regular expressions over the event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// `^add,(update,)*$`
    Added,
    /// `^(update,)*$`
    MaybeUpdated,
    /// `^(update,)+$`
    Updated,
    /// `^add,(update,)+$`
    ReaddedAndUpdated,
    /// `^(update,)*delete,$`
    Deleted,
}

impl Seen {
    fn matches(self, events: &[EventKind]) -> bool {
        use EventKind::{Added as Add, Deleted as Delete, Modified as Update};
        let updates = |s: &[EventKind]| s.iter().all(|e| *e == Update);
        match self {
            Seen::Added => events.first() == Some(&Add) && updates(&events[1..]),
            Seen::MaybeUpdated => updates(events),
            Seen::Updated => !events.is_empty() && updates(events),
            Seen::ReaddedAndUpdated => {
                events.len() >= 2 && events[0] == Add && updates(&events[1..])
            }
            Seen::Deleted => events.last() == Some(&Delete) && updates(&events[..events.len() - 1]),
        }
    }

    fn pattern(self) -> &'static str {
        match self {
            Seen::Added => "add,(update,)*",
            Seen::MaybeUpdated => "(update,)*",
            Seen::Updated => "(update,)+",
            Seen::ReaddedAndUpdated => "add,(update,)+",
            Seen::Deleted => "(update,)*delete,",
        }
    }
}

/// One watch of the procedure: its record, and the lifecycle of what it
/// recorded so far.
struct Watch {
    recorder: Recorder,
    lifecycles: Lifecycles,
}

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

fn id(o: &DynamicObject) -> String {
    format!("{}, {}", key(o), o.metadata.uid.as_deref().unwrap_or(""))
}

/// The version a valid object carries: a non-zero unsigned integer.
fn version(o: &DynamicObject) -> Result<u64, String> {
    let rv = o.metadata.resource_version.as_deref().unwrap_or("");
    match rv.parse::<u64>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(format!("{} has no valid resourceVersion ({rv:?})", key(o))),
    }
}

/// Where the procedure stands: the clients, the watches and what it
/// expects objects to look like.
struct Run<'a> {
    client: kube::Client,
    case: &'a TestCase,
    /// The resource in its namespace (or cluster-wide).
    api: Api<DynamicObject>,
    /// Its URL, without name.
    url: String,
    resource: ApiResource,
    /// The object the events must be about: the last one a call returned.
    last_id: Option<String>,
    name: String,
    namespace: Option<String>,
    watches: Vec<Watch>,
}

/// Runs the procedure for `group_version` / `resource` in `namespace`
/// (used only if the resource is namespaced), labelling every object
/// `e2e-test.kubernetes.io=<label_value>`.
pub async fn run(
    client: kube::Client,
    group_version: &str,
    resource: &str,
    namespace: &str,
    label_value: &str,
    case: &TestCase,
) -> Result<(), Error> {
    // Discovery: the group version's resources must include this one.
    let list = client
        .list_api_group_resources(group_version)
        .await
        .map_err(api_err(format!("GET /apis/{group_version}")))?;
    let Some(found) = list.resources.iter().find(|r| r.name == resource) else {
        let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
        return Err(Error::Check(format!(
            "the API for {group_version} does not include an entry for {resource}; it lists {}",
            names.join(", ")
        )));
    };
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    let ar = ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: group_version.to_owned(),
        kind: found.kind.clone(),
        plural: resource.to_owned(),
    };
    let mut initial = case.initial.clone();
    let Some(meta) = initial.as_object_mut() else {
        return Err(Error::Case("`initial` must be a mapping".into()));
    };
    meta.insert("apiVersion".into(), group_version.into());
    meta.insert("kind".into(), found.kind.clone().into());
    let metadata = meta
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    // Upstream's names: "test" unless the case names it, and for a
    // cluster-scoped resource the namespace appended, so that concurrent
    // runs do not meet.
    let mut name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("test")
        .to_owned();
    if !found.namespaced {
        name = format!("{name}-{namespace}");
    }
    metadata["name"] = name.clone().into();
    let namespace = found.namespaced.then(|| namespace.to_owned());
    merge(
        metadata,
        &serde_json::json!({ "labels": { TEST_LABEL: label_value } }),
    );
    if let Some(ns) = &namespace {
        metadata["namespace"] = ns.clone().into();
    }

    let selector = format!("{TEST_LABEL}={label_value}");
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    // Upstream's informers: started before the object exists, they must
    // see all that happens to it.
    let watch = |scope: String, api: Api<DynamicObject>| async {
        Ok::<_, Error>(Watch {
            recorder: Recorder::start_before_objects(scope, api, &selector, CATCH_UP).await?,
            lifecycles: Lifecycles::default(),
        })
    };
    let mut watches =
        vec![watch(format!("the cluster-wide watch on {resource}"), all.clone()).await?];
    let api = match &namespace {
        Some(ns) => {
            let api = Api::namespaced_with(client.clone(), ns, &ar);
            watches.push(watch(format!("the namespace watch on {resource}"), api.clone()).await?);
            api
        }
        None => all.clone(),
    };
    let mut run = Run {
        client,
        case,
        url: api.resource_url().to_owned(),
        api,
        resource: ar,
        last_id: None,
        name,
        namespace,
        watches,
    };
    let result = run.steps(&initial, &all, &selector).await;
    // Always clean up, then report the first failure.
    let cleanup = run.delete_if_present().await;
    result.and(cleanup)
}

impl Run<'_> {
    async fn steps(
        &mut self,
        initial: &Value,
        all: &Api<DynamicObject>,
        selector: &str,
    ) -> Result<(), Error> {
        let mut updated = initial.clone();
        merge(&mut updated, &self.case.update);
        let updated_with_status = self.case.update_status.as_ref().map(|s| {
            let mut v = updated.clone();
            merge(&mut v, s);
            v
        });

        let created = self.send("POST", "", "application/json", initial).await?;
        self.verify("create", Some(initial), Some(&created), Seen::Added)
            .await?;
        let created_version = version(&created).map_err(Error::Check)?;

        let got = self.get("").await?;
        self.verify("get", Some(initial), Some(&got), Seen::MaybeUpdated)
            .await?;

        let existing = self.update(Part::Object, &self.case.update).await?;
        self.verify("update", Some(&updated), Some(&existing), Seen::Updated)
            .await?;
        let updated_version = version(&existing).map_err(Error::Check)?;
        if updated_version <= created_version {
            return Err(Error::Check(format!(
                "the resourceVersion did not increase with the update (before: {created_version}, after: {updated_version})"
            )));
        }

        if let (Some(status), Some(with_status)) = (&self.case.update_status, &updated_with_status)
        {
            let written = self.update(Part::Status, status).await?;
            self.verify(
                "update status",
                Some(with_status),
                Some(&written),
                Seen::Updated,
            )
            .await?;
            let read = self.get("/status").await?;
            self.verify(
                "get status",
                Some(with_status),
                Some(&read),
                Seen::MaybeUpdated,
            )
            .await?;
        }

        for patch in &self.case.patches {
            self.recreate(initial).await?;
            let patched = self.patch(Part::Object, patch).await?;
            self.verify(
                &format!("{} patch", patch.patch_type.words()),
                Some(&updated),
                Some(&patched),
                Seen::ReaddedAndUpdated,
            )
            .await?;
        }

        if self.case.update_status.is_some() {
            for patch in &self.case.status_patches {
                self.recreate(initial).await?;
                self.update(Part::Object, &self.case.update).await?;
                let patched = self.patch(Part::Status, patch).await?;
                self.verify(
                    &format!("{} patch of the status", patch.patch_type.words()),
                    Some(&updated),
                    Some(&patched),
                    Seen::ReaddedAndUpdated,
                )
                .await?;
            }
        } else if !self.case.status_patches.is_empty() {
            return Err(Error::Case(
                "statusPatches without updateStatus: the resource has no status tests".into(),
            ));
        }

        let list_params = kube::api::ListParams::default().labels(selector);
        let scoped = self.api.clone();
        let items = scoped
            .list(&list_params)
            .await
            .map_err(api_err("list with the label selector"))?;
        let one = typed(
            &self.resource,
            exactly_one(items.items, "list with the label selector")?,
        );
        self.verify("list", Some(&updated), Some(&one), Seen::MaybeUpdated)
            .await?;
        if self.namespace.is_some() {
            let items = all
                .list(&list_params)
                .await
                .map_err(api_err("list in all namespaces"))?;
            let one = typed(
                &self.resource,
                exactly_one(items.items, "list in all namespaces")?,
            );
            self.verify(
                "list in all namespaces",
                Some(&updated),
                Some(&one),
                Seen::MaybeUpdated,
            )
            .await?;
        }

        scoped
            .delete_collection(&Default::default(), &list_params)
            .await
            .map_err(api_err("delete collection with the label selector"))?;
        self.ensure_not_found().await?;
        self.verify("delete collection", None, None, Seen::Deleted)
            .await
    }

    /// Deletes the object, sees it gone, creates it again.
    async fn recreate(&mut self, initial: &Value) -> Result<DynamicObject, Error> {
        self.send(
            "DELETE",
            &format!("/{}", self.name),
            "application/json",
            &Value::Null,
        )
        .await?;
        self.ensure_not_found().await?;
        self.verify("delete", None, None, Seen::Deleted).await?;
        self.send("POST", "", "application/json", initial).await
    }

    async fn get(&self, sub: &str) -> Result<DynamicObject, Error> {
        self.send("GET", &format!("/{}{sub}", self.name), "", &Value::Null)
            .await
    }

    /// Merges `change` into the object read now and writes it whole,
    /// retried on conflicts ([`dynamic::update`]).
    async fn update(&self, part: Part, change: &Value) -> Result<DynamicObject, Error> {
        let update = Update {
            reader: &self.api,
            writer: &self.api,
            kind: &self.resource.kind,
            name: &self.name,
            part,
            change,
        };
        Ok(dynamic::update(&update).await?)
    }

    /// Sends the patch, which names the object as upstream's
    /// `createPatchObject` has it ([`dynamic::patch`]).
    async fn patch(&self, part: Part, patch: &PatchCase) -> Result<DynamicObject, Error> {
        Ok(dynamic::patch(&self.api, &self.name, part, patch.patch_type, &patch.data).await?)
    }

    async fn send(
        &self,
        method: &str,
        rest: &str,
        content_type: &str,
        body: &Value,
    ) -> Result<DynamicObject, Error> {
        let what = format!("{method} {}{rest}", self.url);
        let uri = if method == "POST" {
            format!("{}?fieldValidation=Strict", self.url)
        } else {
            format!("{}{rest}", self.url)
        };
        let mut req = http::Request::builder().method(method).uri(uri);
        if !content_type.is_empty() {
            req = req.header(http::header::CONTENT_TYPE, content_type);
        }
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).map_err(|e| Error::Check(format!("{what}: {e}")))?
        };
        let req = req
            .body(bytes)
            .map_err(|e| Error::Check(format!("{what}: {e}")))?;
        self.client
            .request::<DynamicObject>(req)
            .await
            .map_err(api_err(what))
    }

    /// Waits until a GET says NotFound: a deleted object may linger while
    /// a finalizer holds it.
    async fn ensure_not_found(&self) -> Result<(), Error> {
        let deadline = Instant::now() + GONE;
        loop {
            let notified = self.watches[0].recorder.changes();
            match self.get("").await {
                Err(Error::Api {
                    source: kube::Error::Api(s),
                    ..
                }) if s.code == 404 => return Ok(()),
                Err(e) => return Err(e),
                Ok(o) => {
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Err(Error::Check(format!(
                            "{} still exists {GONE:?} after its deletion (deletionTimestamp {:?}, finalizers {:?})",
                            key(&o),
                            o.metadata.deletion_timestamp,
                            o.metadata.finalizers
                        )));
                    }
                }
            }
        }
    }

    async fn delete_if_present(&self) -> Result<(), Error> {
        match self
            .send(
                "DELETE",
                &format!("/{}", self.name),
                "application/json",
                &Value::Null,
            )
            .await
        {
            Err(Error::Api {
                source: kube::Error::Api(s),
                ..
            }) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
            Ok(_) => self.ensure_not_found().await,
        }
    }

    /// Upstream's `verify`: the answer, then each watch's cache and the
    /// events it saw since the previous check.
    async fn verify(
        &mut self,
        what: &str,
        expected: Option<&Value>,
        actual: Option<&DynamicObject>,
        seen: Seen,
    ) -> Result<(), Error> {
        if let (Some(expected), Some(actual)) = (expected, actual) {
            same_object(
                what,
                (&self.name, self.namespace.as_deref()),
                self.case.verify_content.then_some(expected),
                actual,
            )?;
            version(actual).map_err(|e| Error::Check(format!("{what}: {e}")))?;
        }
        if let Some(actual) = actual {
            self.last_id = Some(id(actual));
        }
        for w in &mut self.watches {
            let scope = w.recorder.scope().to_owned();
            let (name, namespace, resource) = (&self.name, &self.namespace, &self.resource);
            w.recorder
                .wait(
                    &format!("{what}: the cache of {scope}"),
                    CATCH_UP,
                    |rec| match (expected, rec.objects().as_slice()) {
                        (None, []) => Check::Done(()),
                        (Some(e), [one]) => match same_object(
                            what,
                            (name, namespace.as_deref()),
                            self.case.verify_content.then_some(e),
                            &typed(resource, (*one).clone()),
                        ) {
                            Ok(()) => Check::Done(()),
                            Err(e) => Check::Pending(e.to_string()),
                        },
                        (_, objects) => Check::Pending(format!(
                            "{} object(s): {:?}",
                            objects.len(),
                            objects.iter().map(|o| key(o)).collect::<Vec<_>>()
                        )),
                    },
                )
                .await?;
            w.recorder
                .wait(
                    &format!("{what}: the events of {scope}"),
                    EVENT_DELIVERY,
                    |rec| {
                        let kinds: Vec<EventKind> = rec.events().map(|e| e.kind).collect();
                        if seen.matches(&kinds) {
                            Check::Done(())
                        } else {
                            Check::Pending(format!(
                                "events {} where {} was expected",
                                types(&kinds),
                                seen.pattern()
                            ))
                        }
                    },
                )
                .await?;
            for e in w.recorder.take_events() {
                let about = format!("{}, {}", e.key(), e.uid);
                if let Some(want) = self.last_id.as_deref()
                    && about != want
                {
                    return Err(Error::Check(format!(
                        "{what}: {scope} saw an event for {about} where only {want} was expected"
                    )));
                }
                w.lifecycles
                    .follow(&e)
                    .map_err(|why| Error::Check(format!("{what}: {scope} saw {e}: {why}")))?;
            }
        }
        Ok(())
    }
}

/// Checks that `actual` is the test's object `name` in `namespace` and,
/// with an `expected` content, that it holds it ([`contains`]: fields sent
/// must come back; the server may add others, and entries after those
/// sent in a list).
fn same_object(
    what: &str,
    (name, namespace): (&str, Option<&str>),
    expected: Option<&Value>,
    actual: &DynamicObject,
) -> Result<(), Error> {
    if actual.metadata.name.as_deref() != Some(name)
        || actual.metadata.namespace.as_deref() != namespace
    {
        return Err(Error::Check(format!(
            "{what}: got {} where {}/{name} was expected",
            key(actual),
            namespace.unwrap_or(""),
        )));
    }
    if let Some(expected) = expected {
        let actual = serde_json::to_value(actual)
            .map_err(|e| Error::Check(format!("{what}: encoding the answer: {e}")))?;
        contains(&actual, expected).map_err(|m| {
            Error::Check(format!(
                "{what}: the object differs from what was sent: {m}"
            ))
        })?;
    }
    Ok(())
}

/// A list's items carry no apiVersion and kind; the Go client fills them
/// in from the list, and so does this.
fn typed(resource: &ApiResource, mut o: DynamicObject) -> DynamicObject {
    o.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    o
}

fn exactly_one(mut items: Vec<DynamicObject>, what: &str) -> Result<DynamicObject, Error> {
    if items.len() != 1 {
        return Err(Error::Check(format!(
            "{what}: {} objects where exactly the test's object was expected: {:?}",
            items.len(),
            items.iter().map(key).collect::<Vec<_>>()
        )));
    }
    items
        .pop()
        .ok_or_else(|| Error::Check(format!("{what}: no object")))
}

/// Event types as upstream's patterns spell them (`add,update,`), `none`
/// for none.
fn types(kinds: &[EventKind]) -> String {
    if kinds.is_empty() {
        return "none".to_owned();
    }
    kinds
        .iter()
        .map(|k| match k {
            EventKind::Added => "add,",
            EventKind::Modified => "update,",
            EventKind::Deleted => "delete,",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use EventKind::{Added as Add, Deleted as Delete, Modified as Update};
    use serde_json::json;

    #[test]
    fn event_sequences_match_upstreams_patterns() {
        assert!(Seen::Added.matches(&[Add]));
        assert!(Seen::Added.matches(&[Add, Update]));
        assert!(!Seen::Added.matches(&[Update]));
        assert!(Seen::MaybeUpdated.matches(&[]));
        assert!(!Seen::Updated.matches(&[]));
        assert!(!Seen::Updated.matches(&[Update, Delete]));
        assert!(Seen::ReaddedAndUpdated.matches(&[Add, Update, Update]));
        assert!(!Seen::ReaddedAndUpdated.matches(&[Add]));
        assert!(Seen::Deleted.matches(&[Update, Delete]));
        assert!(!Seen::Deleted.matches(&[Delete, Add]));
        assert!(!Seen::Deleted.matches(&[]));
        assert_eq!(types(&[Add, Update]), "add,update,");
        assert_eq!(types(&[]), "none");
    }

    fn answer(name: &str, spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": { "name": name }, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn the_content_check_allows_added_fields_only() {
        let sent = json!({"spec": {"a": 1, "l": [{"x": 1}]}});
        let id = ("test", None);
        let added = answer(
            "test",
            json!({"a": 1, "b": 2, "l": [{"x": 1, "y": 2}, {"x": 2}]}),
        );
        same_object("update", id, Some(&sent), &added).unwrap();
        let changed = answer("test", json!({"a": 2, "l": [{"x": 1}]}));
        let e = same_object("update", id, Some(&sent), &changed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "update: the object differs from what was sent: .spec.a is 2, expected 1"
        );
        // Upstream's conformance leaves the content check off.
        same_object("update", id, None, &changed).unwrap();
        let other = answer("other", json!({}));
        let e = same_object("get", id, None, &other).unwrap_err();
        assert_eq!(e.to_string(), "get: got /other where /test was expected");
    }
}
