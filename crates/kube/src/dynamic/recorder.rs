//! Watches that record: what a watch on the objects of one label selector
//! delivered, event by event, and the objects it holds now. Checks read
//! the record rather than the stream, so a check may wait for a state
//! (upstream's informer cache) or take the events one at a time.
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Error, api_error};
use crate::wait::{self, Check, WaitError};

/// What happened to an object, as a watch event says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    /// The watch event's type as the API names it.
    pub fn api_name(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One recorded event: what happened to which object, at which version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// The object's resource version; none for a deletion that only a
    /// relist showed (the watch missed the event, so its version is
    /// unknown).
    pub resource_version: Option<String>,
}

impl Event {
    fn of(kind: EventKind, o: &DynamicObject) -> Self {
        Event {
            kind,
            namespace: o.metadata.namespace.clone(),
            name: o.metadata.name.clone().unwrap_or_default(),
            uid: o.metadata.uid.clone().unwrap_or_default(),
            resource_version: o.metadata.resource_version.clone(),
        }
    }

    fn missed_deletion(o: &DynamicObject) -> Self {
        Event {
            resource_version: None,
            ..Event::of(EventKind::Deleted, o)
        }
    }

    /// `namespace/name` (`/name` for a cluster-scoped object).
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace.as_deref().unwrap_or(""), self.name)
    }
}

/// `ADDED a (uid u, version 7)`.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (uid {}, version {})",
            self.kind.api_name(),
            self.name,
            self.uid,
            self.resource_version.as_deref().unwrap_or("?")
        )
    }
}

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

/// What a recorder has seen.
#[derive(Default)]
struct State {
    /// The objects the watch holds now, by key.
    cache: BTreeMap<String, DynamicObject>,
    /// The keys the list in progress delivered.
    listing: Vec<String>,
    /// The events no check has taken yet.
    events: VecDeque<Event>,
    /// The first list is done.
    synced: bool,
    /// The watch's last error (it lists again by itself, backed off).
    failed: Option<String>,
}

impl State {
    /// Records one event of the watcher. The watcher says "applied", not
    /// "added" or "modified", and lists again after an error; what it held
    /// tells which: an unknown object was added, a known one with another
    /// UID was deleted and added again, a known one at the same version is
    /// a list repeating it (no event), any other was modified; what a list
    /// no longer holds was deleted.
    fn on(&mut self, event: watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Init => self.listing.clear(),
            watcher::Event::InitApply(o) => {
                self.listing.push(key(&o));
                self.apply(o);
            }
            watcher::Event::InitDone => {
                let gone: Vec<String> = self
                    .cache
                    .keys()
                    .filter(|k| !self.listing.contains(k))
                    .cloned()
                    .collect();
                for k in gone {
                    if let Some(o) = self.cache.remove(&k) {
                        self.events.push_back(Event::missed_deletion(&o));
                    }
                }
                self.synced = true;
            }
            watcher::Event::Apply(o) => self.apply(o),
            watcher::Event::Delete(o) => {
                self.cache.remove(&key(&o));
                self.events.push_back(Event::of(EventKind::Deleted, &o));
            }
        }
    }

    fn apply(&mut self, o: DynamicObject) {
        let k = key(&o);
        match self.cache.get(&k) {
            None => self.events.push_back(Event::of(EventKind::Added, &o)),
            Some(old) if old.metadata.uid != o.metadata.uid => {
                self.events.push_back(Event::missed_deletion(old));
                self.events.push_back(Event::of(EventKind::Added, &o));
            }
            Some(old) if old.metadata.resource_version == o.metadata.resource_version => {}
            Some(_) => self.events.push_back(Event::of(EventKind::Modified, &o)),
        }
        self.cache.insert(k, o);
    }
}

/// What a check of [`Recorder::wait`] sees.
pub struct Recording<'a>(&'a State);

impl Recording<'_> {
    /// Whether the first list is done.
    pub fn synced(&self) -> bool {
        self.0.synced
    }

    /// The objects the watch holds now, by namespace and name.
    pub fn objects(&self) -> Vec<&DynamicObject> {
        self.0.cache.values().collect()
    }

    /// The names of [`Recording::objects`].
    pub fn names(&self) -> Vec<String> {
        self.0
            .cache
            .values()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    /// The events no check has taken yet, oldest first.
    pub fn events(&self) -> impl ExactSizeIterator<Item = &Event> {
        self.0.events.iter()
    }
}

/// A watch on the objects of `api` that a label selector selects, recording
/// every event and the objects it holds, until it is dropped. A failing
/// watch lists again by itself, backed off; a wait that times out says
/// when it last failed.
pub struct Recorder {
    scope: String,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Starts recording. `scope` names the watch in messages (`the
    /// cluster-wide watch on deviceclasses labelled a=b`).
    pub fn start(scope: impl Into<String>, api: Api<DynamicObject>, selector: &str) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let changed = Arc::new(Notify::new());
        let config = watcher::Config::default().labels(selector);
        let (s, n) = (state.clone(), changed.clone());
        let task = tokio::spawn(async move {
            // Backed off: a watch that keeps failing would otherwise list
            // again at once, again and again.
            let mut stream = std::pin::pin!(watcher::watcher(api, config).default_backoff());
            while let Some(event) = stream.next().await {
                {
                    let mut st = lock(&s);
                    match event {
                        Ok(e) => st.on(e),
                        Err(e) => st.failed = Some(e.to_string()),
                    }
                }
                n.notify_waiters();
            }
        });
        Recorder {
            scope: scope.into(),
            state,
            changed,
            task,
        }
    }

    /// [`Recorder::start`] for objects that are yet to be created, as
    /// upstream's informers start: waits (`within`) for the first list,
    /// which must hold nothing, so that the recorder sees every object
    /// created.
    pub async fn start_before_objects(
        scope: impl Into<String>,
        api: Api<DynamicObject>,
        selector: &str,
        within: Duration,
    ) -> Result<Self, Error> {
        let recorder = Recorder::start(scope, api, selector);
        let there = recorder.listed(within).await?;
        if !there.is_empty() {
            return Err(Error::Check(format!(
                "{} must start before they exist; there are already {there:?}",
                recorder.scope
            )));
        }
        Ok(recorder)
    }

    /// Waits for the first list; returns the names of what it held.
    async fn listed(&self, within: Duration) -> Result<Vec<String>, WaitError> {
        let what = format!("{} to list what it watches", self.scope);
        self.wait(&what, within, |rec| {
            if rec.synced() {
                Check::Done(rec.names())
            } else {
                Check::Pending("not listed yet".into())
            }
        })
        .await
    }

    /// How messages name the watch.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// Waits until `check` over the record is done, at every change, with
    /// a deadline; the timeout says what `check` last said, and the watch's
    /// last error.
    pub async fn wait<T>(
        &self,
        what: &str,
        within: Duration,
        mut check: impl FnMut(&Recording<'_>) -> Check<T>,
    ) -> Result<T, WaitError> {
        let deadline = Instant::now() + within;
        loop {
            // Made before the check, so that no change after it is missed.
            let changed = self.changed.notified();
            let last_seen = {
                let st = lock(&self.state);
                match check(&Recording(&st)) {
                    Check::Done(v) => return Ok(v),
                    Check::Pending(seen) => seen,
                    Check::Fail(message) => {
                        return Err(WaitError::Failed {
                            what: what.to_owned(),
                            message,
                        });
                    }
                }
            };
            wait::note(what, &last_seen);
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return Err(WaitError::Timeout {
                    what: what.to_owned(),
                    after: within,
                    last_seen: format!("{last_seen}{}", self.failure_note()),
                });
            }
        }
    }

    /// Takes the events no check has taken yet, oldest first.
    pub fn take_events(&self) -> Vec<Event> {
        lock(&self.state).events.drain(..).collect()
    }

    /// Takes the oldest event no check has taken, waiting for one until
    /// `deadline`; `None` if none came.
    pub async fn next_event(&self, deadline: Instant) -> Option<Event> {
        loop {
            let changed = self.changed.notified();
            if let Some(e) = lock(&self.state).events.pop_front() {
                return Some(e);
            }
            tokio::time::timeout_at(deadline, changed).await.ok()?;
        }
    }

    /// Resolves at the recorder's next change (made before looking at
    /// something else, it misses none).
    pub fn changes(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// ` (the watch last failed: ...)`, or nothing.
    pub fn failure_note(&self) -> String {
        lock(&self.state)
            .failed
            .as_ref()
            .map(|f| format!(" (the watch last failed: {f})"))
            .unwrap_or_default()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What every sequence of events must obey, whoever reads it: an object is
/// added before anything else happens to it, keeps the UID it was added
/// with until it is deleted, and resource versions never go back.
#[derive(Debug, Default)]
pub struct Lifecycles {
    /// Each object's UID as it was added, by key; a deletion ends it.
    uids: BTreeMap<String, String>,
    /// The version of the last event that had one.
    last_version: Option<u64>,
}

impl Lifecycles {
    /// Follows `e`; says what is wrong with it.
    pub fn follow(&mut self, e: &Event) -> Result<(), String> {
        let (name, uid) = (&e.name, &e.uid);
        match (e.kind, self.uids.get(&e.key())) {
            (EventKind::Added, Some(old)) => {
                return Err(format!(
                    "{name} added again (uid {uid}) while {old} was never seen deleted"
                ));
            }
            (EventKind::Added, None) => {}
            (_, Some(known)) if known != uid => {
                return Err(format!(
                    "an event about another {name} (uid {uid}, added as {known})"
                ));
            }
            (_, None) => return Err(format!("an event about {name} before it was seen added")),
            _ => {}
        }
        if let Some(version) = &e.resource_version {
            let Ok(version) = version.parse::<u64>() else {
                return Err(format!("resource version {version:?} is not a number"));
            };
            if let Some(last) = self.last_version
                && version < last
            {
                return Err(format!(
                    "resource version {version} is lower than the one before it, {last}"
                ));
            }
            self.last_version = Some(version);
        }
        match e.kind {
            EventKind::Added => {
                self.uids.insert(e.key(), uid.clone());
            }
            EventKind::Deleted => {
                self.uids.remove(&e.key());
            }
            EventKind::Modified => {}
        }
        Ok(())
    }
}

/// A scenario's watch on the objects of one kind with one label, checked
/// one expectation at a time ([`ObjectWatch::sees`]) as upstream's
/// conformance helper matches its informer's events.
pub struct ObjectWatch {
    kind: String,
    selector: String,
    recorder: Recorder,
    lifecycles: Lifecycles,
}

impl fmt::Debug for ObjectWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectWatch")
            .field("kind", &self.kind)
            .field("selector", &self.selector)
            .field("lifecycles", &self.lifecycles)
            .finish_non_exhaustive()
    }
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
    /// Starts watching the `kind` objects of `api` labelled `selector`,
    /// before they exist: the first list (within `within`) must hold none.
    pub async fn start(
        api: Api<DynamicObject>,
        kind: &str,
        selector: &str,
        within: Duration,
    ) -> Result<Self, Error> {
        let scope = format!("a watch on {kind} objects labelled {selector}");
        Ok(ObjectWatch {
            kind: kind.to_owned(),
            selector: selector.to_owned(),
            recorder: Recorder::start_before_objects(scope, api, selector, within).await?,
            lifecycles: Lifecycles::default(),
        })
    }

    /// The kind it watches.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Its label selector.
    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// Takes the events since the previous check until the one expected,
    /// waiting up to `within` for it: `Added` is the first of them;
    /// `Modified` the first MODIFIED; `Deleted` comes after MODIFIED ones
    /// only. Every event must be about `name` and obey [`Lifecycles`].
    pub async fn sees(
        &mut self,
        name: &str,
        want: EventKind,
        within: Duration,
    ) -> Result<(), Error> {
        let what = format!(
            "the watch on {} objects labelled {} to see {name} {}",
            self.kind,
            self.selector,
            format!("{want:?}").to_lowercase()
        );
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + within;
        loop {
            let Some(e) = self.recorder.next_event(deadline).await else {
                return Err(Error::Check(format!(
                    "timed out after {within:?} waiting for {what}; since the check before it saw {}{}",
                    if seen.is_empty() {
                        "nothing".to_owned()
                    } else {
                        seen.join(", ")
                    },
                    self.recorder.failure_note()
                )));
            };
            seen.push(e.to_string());
            match self.step(name, want, seen.len() - 1, &e) {
                Progress::Seen => return Ok(()),
                Progress::Waiting => {}
                Progress::Wrong(why) => {
                    return Err(Error::Check(format!(
                        "{what}: {why}; it saw {}",
                        seen.join(", ")
                    )));
                }
            }
        }
    }

    /// Checks one event of `name` against `want`, given how many events
    /// about it this check has taken already.
    fn step(&mut self, name: &str, want: EventKind, taken: usize, e: &Event) -> Progress {
        if e.name != name {
            return Progress::Wrong(format!("an event about {}, not {name}", e.name));
        }
        if let Err(why) = self.lifecycles.follow(e) {
            return Progress::Wrong(why);
        }
        match (want, e.kind) {
            (EventKind::Added, EventKind::Added) if taken == 0 => Progress::Seen,
            (EventKind::Added, kind) => Progress::Wrong(format!(
                "{} first, where ADDED was to come first",
                kind.api_name()
            )),
            (EventKind::Modified, EventKind::Modified) => Progress::Seen,
            (EventKind::Deleted, EventKind::Deleted) => Progress::Seen,
            (_, EventKind::Modified) => Progress::Waiting,
            (_, other) => Progress::Wrong(format!(
                "{} where {} was to come",
                other.api_name(),
                want.api_name()
            )),
        }
    }
}

/// Deletes the `kind` objects of `api` labelled `selector` with one
/// delete-collection request, and waits (`within`) until a watch opened
/// before it saw each of them deleted. Returns their names; fails when
/// there were none.
pub async fn delete_collection(
    api: &Api<DynamicObject>,
    kind: &str,
    selector: &str,
    within: Duration,
) -> Result<Vec<String>, Error> {
    let recorder = Recorder::start(
        format!("the watch on {kind} objects labelled {selector}"),
        api.clone(),
        selector,
    );
    let listed = recorder.listed(within).await?;
    if listed.is_empty() {
        return Err(Error::Check(format!(
            "no {kind} objects are labelled {selector}; nothing to delete"
        )));
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(selector),
    )
    .await
    .map_err(api_error(format!(
        "deleting the {kind} objects labelled {selector}"
    )))?;
    let what = format!("the watch to see the {kind} objects labelled {selector} deleted");
    recorder
        .wait(&what, within, |rec| {
            let deleted: BTreeSet<&str> = rec
                .events()
                .filter(|e| e.kind == EventKind::Deleted)
                .map(|e| e.name.as_str())
                .collect();
            let left: Vec<&String> = listed
                .iter()
                .filter(|n| !deleted.contains(n.as_str()))
                .collect();
            if left.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!("not seen deleted: {left:?}"))
            }
        })
        .await?;
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(name: &str, uid: &str, version: u64) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": { "name": name, "uid": uid, "resourceVersion": version.to_string() },
        }))
        .unwrap()
    }

    fn event(kind: EventKind, name: &str, uid: &str, version: u64) -> Event {
        Event::of(kind, &object(name, uid, version))
    }

    fn kinds(st: &mut State) -> Vec<String> {
        st.events.drain(..).map(|e| e.to_string()).collect()
    }

    #[test]
    fn the_record_tells_added_from_modified_and_sees_what_a_relist_lost() {
        use watcher::Event::*;
        let mut st = State::default();
        st.on(Init);
        st.on(InitApply(object("a", "u1", 5)));
        st.on(InitDone);
        assert!(st.synced);
        st.on(Apply(object("a", "u1", 6)));
        st.on(Apply(object("b", "u2", 7)));
        assert_eq!(
            kinds(&mut st),
            [
                "ADDED a (uid u1, version 5)",
                "MODIFIED a (uid u1, version 6)",
                "ADDED b (uid u2, version 7)"
            ]
        );
        // The watch failed and listed again: a was deleted and created
        // again meanwhile, b is unchanged, c is new.
        st.on(Init);
        st.on(InitApply(object("a", "u3", 9)));
        st.on(InitApply(object("b", "u2", 7)));
        st.on(InitApply(object("c", "u4", 10)));
        st.on(InitDone);
        st.on(Delete(object("c", "u4", 11)));
        assert_eq!(
            kinds(&mut st),
            [
                "DELETED a (uid u1, version ?)",
                "ADDED a (uid u3, version 9)",
                "ADDED c (uid u4, version 10)",
                "DELETED c (uid u4, version 11)"
            ]
        );
        // A list that no longer holds b.
        st.on(Init);
        st.on(InitApply(object("a", "u3", 9)));
        st.on(InitDone);
        assert_eq!(kinds(&mut st), ["DELETED b (uid u2, version ?)"]);
        let rec = Recording(&st);
        assert_eq!(rec.names(), ["a"]);
    }

    #[test]
    fn lifecycles_follow_objects_and_versions() {
        let mut l = Lifecycles::default();
        for e in [
            event(EventKind::Added, "a", "u1", 5),
            event(EventKind::Modified, "a", "u1", 6),
            event(EventKind::Deleted, "a", "u1", 7),
            event(EventKind::Added, "a", "u2", 8),
            Event::missed_deletion(&object("a", "u2", 8)),
        ] {
            l.follow(&e).unwrap_or_else(|why| panic!("{e}: {why}"));
        }
    }

    #[test]
    fn lifecycles_refuse_what_upstream_refuses() {
        let mut l = Lifecycles::default();
        l.follow(&event(EventKind::Added, "a", "u1", 5)).unwrap();
        let e = l
            .follow(&event(EventKind::Modified, "a", "u1", 4))
            .unwrap_err();
        assert_eq!(e, "resource version 4 is lower than the one before it, 5");
        let e = l
            .follow(&event(EventKind::Modified, "a", "u9", 6))
            .unwrap_err();
        assert_eq!(e, "an event about another a (uid u9, added as u1)");
        let e = l
            .follow(&event(EventKind::Added, "a", "u9", 6))
            .unwrap_err();
        assert_eq!(e, "a added again (uid u9) while u1 was never seen deleted");
        let e = l
            .follow(&event(EventKind::Deleted, "c", "u3", 7))
            .unwrap_err();
        assert_eq!(e, "an event about c before it was seen added");
        let mut odd = event(EventKind::Modified, "a", "u1", 8);
        odd.resource_version = Some("x".into());
        let e = l.follow(&odd).unwrap_err();
        assert_eq!(e, "resource version \"x\" is not a number");
    }

    fn watch() -> ObjectWatch {
        // A recorder whose watch never starts: the tests feed `step`.
        let state = Arc::new(Mutex::new(State::default()));
        ObjectWatch {
            kind: "DeviceClass".into(),
            selector: "crud=x".into(),
            recorder: Recorder {
                scope: "a watch".into(),
                state,
                changed: Arc::new(Notify::new()),
                task: tokio::spawn(async {}),
            },
            lifecycles: Lifecycles::default(),
        }
    }

    fn wrong(p: Progress) -> String {
        match p {
            Progress::Wrong(why) => why,
            other => panic!("expected a wrong event, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_watch_follows_one_object_through_its_life() {
        let mut w = watch();
        let added = event(EventKind::Added, "a", "u1", 5);
        assert_eq!(w.step("a", EventKind::Added, 0, &added), Progress::Seen);
        // Others' writes before the expected event are allowed.
        let by_others = event(EventKind::Modified, "a", "u1", 6);
        assert_eq!(
            w.step("a", EventKind::Deleted, 0, &by_others),
            Progress::Waiting
        );
        let ours = event(EventKind::Modified, "a", "u1", 7);
        assert_eq!(w.step("a", EventKind::Modified, 0, &ours), Progress::Seen);
        let gone = event(EventKind::Deleted, "a", "u1", 8);
        assert_eq!(w.step("a", EventKind::Deleted, 1, &gone), Progress::Seen);
        // Created again, with a new UID.
        let again = event(EventKind::Added, "a", "u2", 9);
        assert_eq!(w.step("a", EventKind::Added, 0, &again), Progress::Seen);
    }

    #[tokio::test]
    async fn a_watch_refuses_events_the_check_rules_out() {
        let mut w = watch();
        let added = event(EventKind::Added, "a", "u1", 5);
        assert_eq!(w.step("a", EventKind::Added, 0, &added), Progress::Seen);
        let other_name = event(EventKind::Modified, "b", "u1", 6);
        let why = wrong(w.step("a", EventKind::Modified, 0, &other_name));
        assert_eq!(why, "an event about b, not a");
        let deleted = event(EventKind::Deleted, "a", "u1", 6);
        let why = wrong(w.step("a", EventKind::Modified, 0, &deleted));
        assert_eq!(why, "DELETED where MODIFIED was to come");
        let mut w = watch();
        let modified = event(EventKind::Added, "a", "u1", 5);
        w.step("a", EventKind::Added, 0, &modified);
        let later = event(EventKind::Modified, "a", "u1", 6);
        let why = wrong(w.step("a", EventKind::Added, 0, &later));
        assert_eq!(why, "MODIFIED first, where ADDED was to come first");
        let back = event(EventKind::Modified, "a", "u1", 4);
        let why = wrong(w.step("a", EventKind::Modified, 0, &back));
        assert_eq!(why, "resource version 4 is lower than the one before it, 6");
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_that_sees_nothing_says_so_at_its_deadline() {
        let mut w = watch();
        let e = w
            .sees("a", EventKind::Added, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "timed out after 10s waiting for the watch on DeviceClass objects labelled crud=x to see a added; since the check before it saw nothing"
        );
        lock(&w.recorder.state)
            .events
            .push_back(event(EventKind::Added, "b", "u1", 5));
        let e = w
            .sees("a", EventKind::Added, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the watch on DeviceClass objects labelled crud=x to see a added: an event about b, not a; it saw ADDED b (uid u1, version 5)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_on_the_record_says_what_it_last_saw() {
        let w = watch();
        lock(&w.recorder.state).failed = Some("connection refused".into());
        let e = w
            .recorder
            .wait("the object", Duration::from_secs(5), |rec| {
                Check::<()>::Pending(format!("{} objects", rec.objects().len()))
            })
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "timed out after 5s waiting for the object; last seen: 0 objects (the watch last failed: connection refused)"
        );
    }
}
