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
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Notify;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatchType {
    StrategicMerge,
    Apply,
    JsonMerge,
    Json,
}

impl PatchType {
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::JsonMerge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }

    fn name(self) -> &'static str {
        match self {
            PatchType::JsonMerge => "JSON merge",
            PatchType::StrategicMerge => "strategic merge",
            PatchType::Json => "JSON",
            PatchType::Apply => "apply",
        }
    }
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
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// Merges `patch` into `target` as a JSON merge patch (RFC 7386) does.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
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
    fn matches(self, events: &[EventType]) -> bool {
        use EventType::*;
        let updates = |s: &[EventType]| s.iter().all(|e| *e == Update);
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventType {
    Add,
    Update,
    Delete,
}

#[derive(Debug, Clone)]
struct Event {
    kind: EventType,
    /// namespace/name, uid
    id: String,
    versions: Vec<String>,
}

#[derive(Default)]
struct WatchState {
    cache: BTreeMap<String, DynamicObject>,
    events: Vec<Event>,
    synced: bool,
    failed: Option<String>,
    /// The highest resource version seen so far.
    last_version: Option<u64>,
}

/// An informer: a watch with its cache and the events it delivered.
struct Recorder {
    scope: &'static str,
    state: Arc<Mutex<WatchState>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
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

impl Recorder {
    fn start(scope: &'static str, api: Api<DynamicObject>, selector: &str) -> Self {
        let state = Arc::new(Mutex::new(WatchState::default()));
        let changed = Arc::new(Notify::new());
        let config = watcher::Config::default().labels(selector);
        let (s, n) = (state.clone(), changed.clone());
        let task = tokio::spawn(async move {
            // Backed off: a watch that keeps failing would otherwise retry
            // at once, again and again, until the deadline.
            let mut stream = std::pin::pin!(watcher::watcher(api, config).default_backoff());
            let mut listed: Vec<String> = Vec::new();
            while let Some(event) = stream.next().await {
                {
                    let Ok(mut st) = s.lock() else { return };
                    match event {
                        Ok(watcher::Event::Init) => listed.clear(),
                        Ok(watcher::Event::InitApply(o)) => {
                            listed.push(key(&o));
                            apply(&mut st, o);
                        }
                        Ok(watcher::Event::InitDone) => {
                            // A relist: what it no longer holds was deleted.
                            let gone: Vec<String> = st
                                .cache
                                .keys()
                                .filter(|k| !listed.contains(k))
                                .cloned()
                                .collect();
                            for k in gone {
                                if let Some(o) = st.cache.remove(&k) {
                                    record(&mut st, EventType::Delete, &o);
                                }
                            }
                            st.synced = true;
                        }
                        Ok(watcher::Event::Apply(o)) => apply(&mut st, o),
                        Ok(watcher::Event::Delete(o)) => {
                            st.cache.remove(&key(&o));
                            record(&mut st, EventType::Delete, &o);
                        }
                        Err(e) => st.failed = Some(e.to_string()),
                    }
                }
                n.notify_waiters();
            }
        });
        Recorder {
            scope,
            state,
            changed,
            task,
        }
    }

    /// Waits until `done` holds for the state, or says what it last saw.
    async fn wait(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&WatchState) -> Result<(), String>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        loop {
            let notified = self.changed.notified();
            let last = {
                let st = self.lock()?;
                match done(&st) {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                }
            };
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let failed = self
                    .lock()?
                    .failed
                    .clone()
                    .map(|f| format!(" (the watch last failed: {f})"))
                    .unwrap_or_default();
                return Err(Error::Check(format!(
                    "{what}: the {} watch did not get there within {within:?}; last seen: {last}{failed}",
                    self.scope
                )));
            }
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, WatchState>, Error> {
        self.state
            .lock()
            .map_err(|_| Error::Check(format!("the {} watch's state was poisoned", self.scope)))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn apply(st: &mut WatchState, o: DynamicObject) {
    let kind = if st.cache.contains_key(&key(&o)) {
        EventType::Update
    } else {
        EventType::Add
    };
    record(st, kind, &o);
    st.cache.insert(key(&o), o);
}

fn record(st: &mut WatchState, kind: EventType, o: &DynamicObject) {
    let versions = o.metadata.resource_version.iter().cloned().collect();
    st.events.push(Event {
        kind,
        id: id(o),
        versions,
    });
}

/// Checks `actual` against `expected`: every field `expected` holds must
/// be in `actual` with the same value; maps may hold more keys and lists
/// more entries after those sent (a controller appends a condition), as
/// upstream's `compareObjects` ignores what `expected` lacks.
pub fn missing_fields(expected: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                match a.get(k) {
                    Some(av) => missing_fields(ev, av, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}: want {ev}, missing")),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() <= a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                missing_fields(ev, av, &format!("{path}[{i}]"), out);
            }
        }
        (e, a) if e == a => {}
        (e, a) => out.push(format!("{path}: want {e}, got {a}")),
    }
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
    /// The resource's URL in its namespace (or cluster-wide), without name.
    url: String,
    resource: ApiResource,
    /// The object the events must be about: the last one a call returned.
    last_id: Option<String>,
    name: String,
    namespace: Option<String>,
    watches: Vec<Recorder>,
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
    let mut watches = vec![Recorder::start("cluster-wide", all.clone(), &selector)];
    let api = match &namespace {
        Some(ns) => {
            let api = Api::namespaced_with(client.clone(), ns, &ar);
            watches.push(Recorder::start("namespace", api.clone(), &selector));
            api
        }
        None => all.clone(),
    };
    let mut run = Run {
        client,
        case,
        url: api.resource_url().to_owned(),
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
        for w in &self.watches {
            w.wait(CATCH_UP, "the initial list", |st| {
                if !st.synced {
                    return Err("not synced".into());
                }
                if !st.cache.is_empty() || !st.events.is_empty() {
                    return Err(format!(
                        "{} objects and {} events before anything was created",
                        st.cache.len(),
                        st.events.len()
                    ));
                }
                Ok(())
            })
            .await?;
        }
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

        let existing = self.update("", &got, &self.case.update).await?;
        self.verify("update", Some(&updated), Some(&existing), Seen::Updated)
            .await?;
        let updated_version = version(&existing).map_err(Error::Check)?;
        if updated_version <= created_version {
            return Err(Error::Check(format!(
                "the resourceVersion did not increase with the update (before: {created_version}, after: {updated_version})"
            )));
        }
        let mut existing = existing;

        if let (Some(status), Some(with_status)) = (&self.case.update_status, &updated_with_status)
        {
            existing = self.update("/status", &existing, status).await?;
            self.verify(
                "update status",
                Some(with_status),
                Some(&existing),
                Seen::Updated,
            )
            .await?;
            existing = self.get("/status").await?;
            self.verify(
                "get status",
                Some(with_status),
                Some(&existing),
                Seen::MaybeUpdated,
            )
            .await?;
        }

        for patch in &self.case.patches {
            self.recreate(initial).await?;
            existing = self.patch("", patch).await?;
            self.verify(
                &format!("{} patch", patch.patch_type.name()),
                Some(&updated),
                Some(&existing),
                Seen::ReaddedAndUpdated,
            )
            .await?;
        }

        if self.case.update_status.is_some() {
            for patch in &self.case.status_patches {
                let fresh = self.recreate(initial).await?;
                self.update("", &fresh, &self.case.update).await?;
                existing = self.patch("/status", patch).await?;
                self.verify(
                    &format!("{} patch of the status", patch.patch_type.name()),
                    Some(&updated),
                    Some(&existing),
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
        let scoped: Api<DynamicObject> = match &self.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => all.clone(),
        };
        let items = scoped
            .list(&list_params)
            .await
            .map_err(api_err("list with the label selector"))?;
        let one = self.typed(exactly_one(items.items, "list with the label selector")?);
        self.verify("list", Some(&updated), Some(&one), Seen::MaybeUpdated)
            .await?;
        if self.namespace.is_some() {
            let items = all
                .list(&list_params)
                .await
                .map_err(api_err("list in all namespaces"))?;
            let one = self.typed(exactly_one(items.items, "list in all namespaces")?);
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

    /// A list's items carry no apiVersion and kind; the Go client fills
    /// them in from the list, and so does this.
    fn typed(&self, mut o: DynamicObject) -> DynamicObject {
        o.types = Some(kube::api::TypeMeta {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
        });
        o
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

    /// Merges `change` into `from`, writes it whole; on a conflict, reads
    /// the object again and retries (until the watch deadline).
    async fn update(
        &self,
        sub: &str,
        from: &DynamicObject,
        change: &Value,
    ) -> Result<DynamicObject, Error> {
        let deadline = Instant::now() + CATCH_UP;
        let mut from = from.clone();
        loop {
            let mut object = serde_json::to_value(&from)
                .map_err(|e| Error::Check(format!("encoding the object: {e}")))?;
            merge(&mut object, change);
            match self
                .send(
                    "PUT",
                    &format!("/{}{sub}", self.name),
                    "application/json",
                    &object,
                )
                .await
            {
                Err(Error::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.code == 409 && Instant::now() < deadline => {
                    from = self.get(sub).await?;
                }
                other => return other,
            }
        }
    }

    async fn patch(&self, sub: &str, patch: &PatchCase) -> Result<DynamicObject, Error> {
        let mut body = patch.data.clone();
        if patch.patch_type != PatchType::Json {
            // The patch names what it patches (upstream's createPatchObject).
            let existing = self.get("").await?;
            let Some(obj) = body.as_object_mut() else {
                return Err(Error::Case(format!(
                    "a {} patch must be a mapping",
                    patch.patch_type.name()
                )));
            };
            let types = existing.types.clone().unwrap_or_default();
            obj.insert("apiVersion".into(), types.api_version.into());
            obj.insert("kind".into(), types.kind.into());
            let meta = obj
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()));
            merge(
                meta,
                &serde_json::json!({
                    "name": self.name,
                    "namespace": self.namespace,
                    "uid": existing.metadata.uid,
                }),
            );
        }
        let mut query = String::from("?fieldValidation=Strict");
        if patch.patch_type == PatchType::Apply {
            query.push_str("&fieldManager=test-apply&force=true");
        }
        self.send(
            "PATCH",
            &format!("/{}{sub}{query}", self.name),
            patch.patch_type.content_type(),
            &body,
        )
        .await
        .map_err(|e| match e {
            Error::Api { what, source } => Error::Api {
                what: format!("the {} patch ({what})", patch.patch_type.name()),
                source,
            },
            e => e,
        })
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
            let notified = self.watches[0].changed.notified();
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
            self.same_object(what, expected, actual)?;
            version(actual).map_err(|e| Error::Check(format!("{what}: {e}")))?;
        }
        if let Some(actual) = actual {
            self.last_id = Some(id(actual));
        }
        for w in &self.watches {
            w.wait(
                CATCH_UP,
                &format!("{what}: the watch's cache"),
                |st| match (expected, st.cache.values().collect::<Vec<_>>().as_slice()) {
                    (None, []) => Ok(()),
                    (Some(e), [one]) => self
                        .same_object(what, e, &self.typed((*one).clone()))
                        .map_err(|e| e.to_string()),
                    (_, objects) => Err(format!(
                        "{} object(s): {:?}",
                        objects.len(),
                        objects.iter().map(|o| key(o)).collect::<Vec<_>>()
                    )),
                },
            )
            .await?;
            w.wait(
                EVENT_DELIVERY,
                &format!("{what}: the watch's events"),
                |st| {
                    let kinds: Vec<EventType> = st.events.iter().map(|e| e.kind).collect();
                    if !seen.matches(&kinds) {
                        return Err(format!(
                            "events {} where {} was expected",
                            types(&kinds),
                            seen.pattern()
                        ));
                    }
                    Ok(())
                },
            )
            .await?;
            let mut st = w.lock()?;
            let events = std::mem::take(&mut st.events);
            for e in &events {
                if let Some(want) = self.last_id.as_deref()
                    && e.id != want
                {
                    return Err(Error::Check(format!(
                        "{what}: the {} watch saw an event for {} where only {want} was expected",
                        w.scope, e.id
                    )));
                }
                for v in &e.versions {
                    let v: u64 = v.parse().map_err(|_| {
                        Error::Check(format!("{what}: an event carried resourceVersion {v:?}"))
                    })?;
                    if let Some(last) = st.last_version
                        && v < last
                    {
                        return Err(Error::Check(format!(
                            "{what}: the {} watch saw resourceVersion {v} of {} after {last}",
                            w.scope, e.id
                        )));
                    }
                    st.last_version = Some(v);
                }
            }
        }
        Ok(())
    }

    fn same_object(
        &self,
        what: &str,
        expected: &Value,
        actual: &DynamicObject,
    ) -> Result<(), Error> {
        let name = actual.metadata.name.as_deref().unwrap_or("");
        let namespace = actual.metadata.namespace.as_deref();
        if name != self.name || namespace != self.namespace.as_deref() {
            return Err(Error::Check(format!(
                "{what}: got {} where {}/{} was expected",
                key(actual),
                self.namespace.as_deref().unwrap_or(""),
                self.name
            )));
        }
        if self.case.verify_content {
            let actual = serde_json::to_value(actual)
                .map_err(|e| Error::Check(format!("{what}: encoding the answer: {e}")))?;
            let mut missing = Vec::new();
            missing_fields(expected, &actual, "", &mut missing);
            if !missing.is_empty() {
                return Err(Error::Check(format!(
                    "{what}: the object differs from what was sent: {}",
                    missing.join("; ")
                )));
            }
        }
        Ok(())
    }
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

fn types(kinds: &[EventType]) -> String {
    kinds
        .iter()
        .map(|k| match k {
            EventType::Add => "add,",
            EventType::Update => "update,",
            EventType::Delete => "delete,",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use EventType::*;

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
    }

    #[test]
    fn content_check_allows_added_fields_only() {
        let sent = serde_json::json!({"spec": {"a": 1, "l": [{"x": 1}]}});
        let mut out = Vec::new();
        missing_fields(
            &sent,
            &serde_json::json!({"spec": {"a": 1, "b": 2, "l": [{"x": 1, "y": 2}]}}),
            "",
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        missing_fields(
            &sent,
            &serde_json::json!({"spec": {"a": 1, "l": [{"x": 1}, {"x": 2}]}}),
            "",
            &mut out,
        );
        assert!(
            out.is_empty(),
            "entries after those sent are allowed: {out:?}"
        );
        missing_fields(
            &sent,
            &serde_json::json!({"spec": {"a": 2, "l": []}}),
            "",
            &mut out,
        );
        assert_eq!(out.len(), 2, "{out:?}");
    }
}
