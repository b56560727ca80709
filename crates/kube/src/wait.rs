//! Waits with deadlines. Objects are watched; only things without a watch (a
//! plugin's in-process state) are polled, briefly. On timeout the error says
//! what was awaited and what was last seen.
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("timed out after {after:?} waiting for {what}; last seen: {last_seen}")]
    Timeout {
        what: String,
        after: Duration,
        last_seen: String,
    },
    #[error("{what}: {message}")]
    Failed { what: String, message: String },
    #[error("watching for {what}: {source}")]
    Watch {
        what: String,
        #[source]
        source: watcher::Error,
    },
}

impl WaitError {
    /// The error with `text` on the lines after what it says.
    pub fn with_diagnosis(self, text: &str) -> Self {
        match self {
            WaitError::Timeout {
                what,
                after,
                last_seen,
            } => WaitError::Timeout {
                what,
                after,
                last_seen: format!("{last_seen}\n{text}"),
            },
            WaitError::Failed { what, message } => WaitError::Failed {
                what,
                message: format!("{message}\n{text}"),
            },
            watch @ WaitError::Watch { .. } => watch,
        }
    }
}

pub mod diagnose;

tokio::task_local! {
    /// What the innermost wait of the current task last saw, for a caller
    /// whose own deadline (a step timeout) ends the wait before it can say.
    static PROGRESS: Progress;
}

/// Says what the cluster says about one pod (see [`diagnose`]).
pub type Diagnoser = Arc<dyn Fn() -> BoxFuture<'static, String> + Send + Sync>;

/// Shared with [`with_progress`]: the latest "waiting for X; last seen: Y",
/// the pod waits running in the scope (to diagnose the one named there when
/// the caller's deadline cuts it) and what the caller knows of drivers.
#[derive(Clone, Default)]
pub struct Progress {
    state: Arc<Mutex<ProgressState>>,
    driver_notes: Option<diagnose::DriverNotes>,
}

#[derive(Default)]
struct ProgressState {
    /// (what, last seen)
    last: Option<(String, String)>,
    /// Pod waits running, by what they wait for.
    pods: Vec<(String, Diagnoser)>,
}

impl Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("last", &self.last())
            .field("driver_notes", &self.driver_notes.is_some())
            .finish()
    }
}

impl Progress {
    /// A progress whose pod diagnoses add what `notes` says of the pod's
    /// drivers.
    pub fn with_driver_notes(notes: diagnose::DriverNotes) -> Self {
        Progress {
            driver_notes: Some(notes),
            ..Default::default()
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The last state a wait inside the scope reported, if any.
    pub fn last(&self) -> Option<String> {
        self.state()
            .last
            .as_ref()
            .map(|(what, seen)| format!("waiting for {what}; last seen: {seen}"))
    }

    /// When the wait [`Progress::last`] names is a pod wait still running
    /// (its caller's deadline cut it): what the cluster says about the pod.
    pub async fn diagnosis(&self) -> Option<String> {
        let diagnose = {
            let state = self.state();
            let (what, _) = state.last.as_ref()?;
            state
                .pods
                .iter()
                .find(|(w, _)| w == what)
                .map(|(_, d)| d.clone())?
        };
        Some(diagnose().await)
    }
}

/// Runs `fut`; waits inside it record what they last saw in `progress`.
pub async fn with_progress<F: Future>(progress: Progress, fut: F) -> F::Output {
    PROGRESS.scope(progress, fut).await
}

/// Records what a wait for `what` last saw, for [`with_progress`]: the
/// waits here do it on every change; a wait of its own (a loop with a
/// deadline elsewhere) calls it as well.
pub fn note(what: &str, seen: &str) {
    let _ = PROGRESS.try_with(|p| {
        p.state().last = Some((what.to_owned(), seen.to_owned()));
    });
}

/// The outcome of checking an observed state.
#[derive(Debug)]
pub enum Check<T> {
    /// Done, with a value.
    Done(T),
    /// Not yet; the string describes what is seen now (for the timeout message).
    Pending(String),
    /// Can never succeed any more (for example a pod that must not be scheduled was).
    Fail(String),
}

/// Watches the object `name` until `check` is done, with a deadline. `check`
/// sees `None` while the object does not exist.
pub async fn object<K, T>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    mut check: impl FnMut(Option<&K>) -> Check<T>,
) -> Result<T, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    list(api, config, what, timeout, |items| check(items.first())).await
}

/// [`object`] for pod `name`. A wait that fails (its deadline passes, or
/// `check` sees a state the pod cannot leave) says after what it last saw
/// what the cluster says about the pod ([`diagnose`]); for a wait its
/// caller's deadline cuts, [`Progress::diagnosis`] says it.
pub async fn pod<T>(
    api: &Api<Pod>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl FnMut(Option<&Pod>) -> Check<T>,
) -> Result<T, WaitError> {
    let diagnoser = pod_diagnoser(api, name);
    let _ = PROGRESS.try_with(|p| p.state().pods.push((what.to_owned(), diagnoser.clone())));
    let result = object(api, name, what, timeout, check).await;
    let _ = PROGRESS.try_with(|p| {
        p.state().pods.retain(|(_, d)| !Arc::ptr_eq(d, &diagnoser));
    });
    match result {
        Ok(v) => Ok(v),
        Err(e) => Err(e.with_diagnosis(&diagnoser().await)),
    }
}

/// For a pod check that is not a [`pod`] wait (one that must hold for a
/// while): `result`, with what the cluster says about pod `name` added
/// when it failed.
pub async fn diagnosed<T>(
    api: &Api<Pod>,
    name: &str,
    result: Result<T, WaitError>,
) -> Result<T, WaitError> {
    match result {
        Ok(v) => Ok(v),
        Err(e) => Err(e.with_diagnosis(&pod_diagnoser(api, name)().await)),
    }
}

/// Diagnoses pod `name` of `api`'s namespace, with the driver notes of the
/// current [`with_progress`] scope.
fn pod_diagnoser(api: &Api<Pod>, name: &str) -> Diagnoser {
    let namespace = api.namespace().unwrap_or("default").to_owned();
    let client = api.clone().into_client();
    let name = name.to_owned();
    let notes = PROGRESS.try_with(|p| p.driver_notes.clone()).ok().flatten();
    Arc::new(move || {
        let (client, namespace, name, notes) = (
            client.clone(),
            namespace.clone(),
            name.clone(),
            notes.clone(),
        );
        Box::pin(
            async move { diagnose::diagnose_pod(client, &namespace, &name, notes.as_ref()).await },
        )
    })
}

/// The named condition for [`list`] that waits for nothing to be left:
/// done on an empty list, else pending with each item as `describe` says
/// it, so a timeout reports what was still there.
pub fn none_left<K>(describe: impl Fn(&K) -> String) -> impl FnMut(&[K]) -> Check<()> {
    move |items| {
        if items.is_empty() {
            Check::Done(())
        } else {
            Check::Pending(items.iter().map(&describe).collect::<Vec<_>>().join("; "))
        }
    }
}

/// Watches objects of a list selection until `check` over the current set is done.
pub async fn list<K, T>(
    api: &Api<K>,
    config: watcher::Config,
    what: &str,
    timeout: Duration,
    mut check: impl FnMut(&[K]) -> Check<T>,
) -> Result<T, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    use kube::runtime::{WatchStreamExt as _, reflector};
    let (reader, writer) = reflector::store();
    // Backoff keeps a failing watch (apiserver restarting) from spinning.
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api.clone(), config).default_backoff(),
    );
    let mut stream = std::pin::pin!(stream);
    let deadline = Instant::now() + timeout;
    let mut last_seen = "nothing yet".to_owned();
    let mut initialized = false;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        match next {
            Err(_) => {
                return Err(WaitError::Timeout {
                    what: what.to_owned(),
                    after: timeout,
                    last_seen,
                });
            }
            Ok(None) => {
                return Err(WaitError::Failed {
                    what: what.to_owned(),
                    message: "watch ended".to_owned(),
                });
            }
            Ok(Some(Err(source))) => {
                // The watcher re-lists by itself after an error.
                tracing::debug!(%what, error = %source, "watch error, retrying");
                last_seen = format!("watch error: {source}");
                continue;
            }
            Ok(Some(Ok(event))) => {
                if matches!(event, watcher::Event::InitDone) {
                    initialized = true;
                }
                if !initialized {
                    continue;
                }
            }
        }
        let items: Vec<K> = reader.state().iter().map(|o| (**o).clone()).collect();
        match check(&items) {
            Check::Done(v) => return Ok(v),
            Check::Pending(seen) => {
                note(what, &seen);
                last_seen = seen;
            }
            Check::Fail(message) => {
                return Err(WaitError::Failed {
                    what: what.to_owned(),
                    message,
                });
            }
        }
    }
}

/// Polls `probe` every `interval` until it is done, with a deadline. For state
/// that has no watch, such as a plugin's call counters.
pub async fn poll<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut probe: F,
) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Check<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last_seen = match probe().await {
            Check::Done(v) => return Ok(v),
            Check::Pending(seen) => {
                note(what, &seen);
                seen
            }
            Check::Fail(message) => {
                return Err(WaitError::Failed {
                    what: what.to_owned(),
                    message,
                });
            }
        };
        if Instant::now() + interval > deadline {
            return Err(WaitError::Timeout {
                what: what.to_owned(),
                after: timeout,
                last_seen,
            });
        }
        tokio::time::sleep(interval).await;
    }
}

/// Checks that `probe` holds for the whole `duration` (upstream's
/// `Consistently`), polling every `interval`. Fails at the first violation.
pub async fn consistently<F, Fut>(
    what: &str,
    duration: Duration,
    interval: Duration,
    mut probe: F,
) -> Result<(), WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let end = Instant::now() + duration;
    loop {
        if let Err(message) = probe().await {
            return Err(WaitError::Failed {
                what: what.to_owned(),
                message,
            });
        }
        if Instant::now() >= end {
            return Ok(());
        }
        tokio::time::sleep(interval.min(end - Instant::now())).await;
    }
}

/// What a pod wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    Running,
    Scheduled,
    /// Not scheduled, with the scheduler's reason; being scheduled fails.
    Unschedulable,
    /// Succeeded; failing instead fails.
    Completed,
    Failed,
    Gone,
    Pending,
}

/// A pod state that must hold for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteadyPodState {
    /// Pending, or not given a phase yet.
    Pending,
    /// Running and not being deleted (an eviction sets the deletion mark first).
    Running,
    /// Deleted but still there: its kubelet has not let it go (a node
    /// away, a claim not unprepared).
    Terminating,
}

impl SteadyPodState {
    pub fn holds(self, p: &Pod) -> bool {
        match self {
            SteadyPodState::Pending => pod_phase(p) == "Pending" || pod_phase(p).is_empty(),
            SteadyPodState::Running => {
                pod_phase(p) == "Running" && p.metadata.deletion_timestamp.is_none()
            }
            SteadyPodState::Terminating => p.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// The pod's phase, empty before the kubelet wrote one.
pub fn pod_phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub fn pod_scheduled(p: &Pod) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
}

/// The scheduler's message once it found no node for the pod.
pub fn pod_unschedulable_message(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| c.message.clone().unwrap_or_default())
}

/// Phase, node and conditions: what a timed-out pod wait reports.
pub fn describe_pod(p: Option<&Pod>) -> String {
    let Some(p) = p else {
        return "pod does not exist".to_owned();
    };
    let status = p.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let node = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let conditions: Vec<String> = status
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            format!(
                "{}={}{}",
                c.type_,
                c.status,
                c.message.map(|m| format!(" ({m})")).unwrap_or_default()
            )
        })
        .collect();
    // Set when the kubelet rejected or evicted the pod (conditions may be
    // empty then): what says why.
    let why = status
        .and_then(|s| s.reason.as_ref().map(|r| (r, s.message.as_deref())))
        .map(|(r, m)| format!(" reason={r:?} message={:?}", m.unwrap_or_default()))
        .unwrap_or_default();
    format!(
        "phase={phase:?}{why} node={node:?} conditions=[{}]{}",
        conditions.join(", "),
        if p.metadata.deletion_timestamp.is_some() {
            " deleting"
        } else {
            ""
        }
    )
}

/// Whether pod `name` (`None`: it does not exist) is in `state`.
pub fn pod_in_state(name: &str, state: PodState, p: Option<&Pod>) -> Check<()> {
    let done = match (state, p) {
        (PodState::Gone, None) => true,
        (_, None) => false,
        (PodState::Running, Some(p)) => {
            // Both phases are final: such a pod never runs (again), and a
            // wait for it would only time out.
            if matches!(pod_phase(p), "Failed" | "Succeeded") {
                return Check::Fail(format!(
                    "pod {name} ended instead of running: {}",
                    describe_pod(Some(p))
                ));
            }
            pod_phase(p) == "Running"
        }
        (PodState::Scheduled, Some(p)) => pod_scheduled(p),
        (PodState::Unschedulable, Some(p)) => {
            if pod_scheduled(p) {
                return Check::Fail(format!(
                    "expected pod {name} to stay unscheduled, but it was scheduled: {}",
                    describe_pod(Some(p))
                ));
            }
            pod_unschedulable_message(p).is_some()
        }
        (PodState::Completed, Some(p)) => {
            if pod_phase(p) == "Failed" {
                return Check::Fail(format!(
                    "pod {name} failed instead of completing: {}",
                    describe_pod(Some(p))
                ));
            }
            pod_phase(p) == "Succeeded"
        }
        (PodState::Failed, Some(p)) => pod_phase(p) == "Failed",
        (PodState::Pending, Some(p)) => pod_phase(p) == "Pending",
        (PodState::Gone, Some(_)) => false,
    };
    if done {
        Check::Done(())
    } else {
        Check::Pending(describe_pod(p))
    }
}

/// Unschedulable with a scheduler message containing `text`; being
/// scheduled fails.
pub fn pod_unschedulable_with(name: &str, text: &str, p: Option<&Pod>) -> Check<()> {
    match p {
        Some(p) if pod_scheduled(p) => Check::Fail(format!(
            "pod {name} was scheduled: {}",
            describe_pod(Some(p))
        )),
        Some(p) => match pod_unschedulable_message(p) {
            Some(m) if m.contains(text) => Check::Done(()),
            _ => Check::Pending(describe_pod(Some(p))),
        },
        None => Check::Pending("pod does not exist".into()),
    }
}

/// What an init container's status says about its run: `Done` once it
/// exited 0 (or, for a sidecar, runs), `Fail` once it exited otherwise.
pub fn init_container_done(p: Option<&Pod>, pod: &str, container: &str) -> Check<()> {
    let Some(p) = p else {
        return Check::Pending("pod does not exist".into());
    };
    let spec = p
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container));
    let Some(spec) = spec else {
        return Check::Fail(format!("pod {pod} has no init container {container}"));
    };
    let sidecar = spec.restart_policy.as_deref() == Some("Always");
    let status = p
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container));
    let Some(status) = status else {
        return Check::Pending(format!(
            "no status of init container {container} yet; {}",
            describe_pod(Some(p))
        ));
    };
    let state = status.state.clone().unwrap_or_default();
    let command: Vec<&String> = spec.command.iter().chain(&spec.args).flatten().collect();
    let failed = |t: &ContainerStateTerminated| {
        Check::Fail(format!(
            "init container {container} of pod {pod} exited with code {} ({}{}); the pod \
             builder's init script fails when its env lacks an entry it checks; command: {command:?}",
            t.exit_code,
            t.reason.clone().unwrap_or_default(),
            t.message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default(),
        ))
    };
    let last_failure = status
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .filter(|t| t.exit_code != 0);
    match (&state.terminated, &state.running, last_failure) {
        (Some(t), _, _) if t.exit_code == 0 => Check::Done(()),
        (Some(t), _, _) => failed(t),
        (None, Some(_), _) if sidecar => Check::Done(()),
        // Restarting after a failure (restart policy Always or OnFailure).
        (None, None, Some(last)) => failed(last),
        _ => Check::Pending(format!(
            "init container {container}: {}",
            serde_json::to_string(&state).unwrap_or_default()
        )),
    }
}

/// Whether every regular container of the pod restarted since `before`
/// (its `restartCount` then, by container name; a container missing there
/// counts as 0) and is running and ready again. Pending, it says per
/// container what it sees, a container the runtime cannot create (waiting
/// in `CreateContainerError` with the runtime's message) included.
pub fn containers_restarted(
    p: Option<&Pod>,
    before: &std::collections::BTreeMap<String, i32>,
) -> Check<()> {
    let statuses = p
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let again = !statuses.is_empty()
        && statuses.iter().all(|c| {
            c.restart_count > before.get(&c.name).copied().unwrap_or(0)
                && c.ready
                && c.state.as_ref().is_some_and(|s| s.running.is_some())
        });
    if again {
        return Check::Done(());
    }
    let containers: Vec<String> = statuses
        .iter()
        .map(|c| {
            let state = c.state.clone().unwrap_or_default();
            let now = match (&state.running, &state.waiting, &state.terminated) {
                (Some(_), _, _) => "running".to_owned(),
                (_, Some(w), _) => format!(
                    "waiting {}{}",
                    w.reason.clone().unwrap_or_default(),
                    w.message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
                (_, _, Some(t)) => format!("terminated with code {}", t.exit_code),
                _ => "no state".to_owned(),
            };
            format!(
                "container {} restarts {} (before {}), {now}{}",
                c.name,
                c.restart_count,
                before.get(&c.name).copied().unwrap_or(0),
                if c.ready { ", ready" } else { ", not ready" }
            )
        })
        .collect();
    Check::Pending(format!("{}; [{}]", describe_pod(p), containers.join("; ")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn none_left_is_done_on_nothing_and_names_what_is_left() {
        use super::*;
        let mut check = none_left(|s: &&str| format!("pod {s}"));
        assert!(matches!(check(&[]), Check::Done(())));
        match check(&["a", "b"]) {
            Check::Pending(seen) => assert_eq!(seen, "pod a; pod b"),
            _ => panic!("two items left, yet not pending"),
        }
    }

    #[tokio::test]
    async fn progress_keeps_what_a_wait_last_saw_after_it_is_cut_off() {
        use super::*;
        let progress = Progress::default();
        let cut = tokio::time::timeout(
            Duration::from_millis(200),
            with_progress(
                progress.clone(),
                poll(
                    "the answer",
                    Duration::from_secs(60),
                    Duration::from_millis(10),
                    || async { Check::<()>::Pending("41".into()) },
                ),
            ),
        )
        .await;
        assert!(cut.is_err());
        assert_eq!(
            progress.last().as_deref(),
            Some("waiting for the answer; last seen: 41")
        );
        // Outside any scope, waits still work and record nothing.
        let r = poll(
            "x",
            Duration::from_millis(1),
            Duration::from_millis(1),
            || async { Check::<()>::Pending("y".into()) },
        )
        .await;
        assert!(r.is_err());
    }

    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A step timeout that cuts a pod wait diagnoses the pod the last note
    /// names, only while that wait is the one noted last.
    #[tokio::test]
    async fn a_cut_pod_wait_is_diagnosed_while_it_is_the_last_noted() {
        let progress = Progress::default();
        let diagnoser: Diagnoser = Arc::new(|| Box::pin(async { "why: no node".to_owned() }));
        with_progress(progress.clone(), async {
            note("pod p to be running", "phase=\"Pending\"");
        })
        .await;
        assert_eq!(progress.diagnosis().await, None);
        progress
            .state()
            .pods
            .push(("pod p to be running".to_owned(), diagnoser));
        assert_eq!(progress.diagnosis().await.as_deref(), Some("why: no node"));
        with_progress(progress.clone(), async { note("something else", "x") }).await;
        assert_eq!(progress.diagnosis().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn poll_reports_last_seen_on_timeout() {
        let err = poll(
            "the answer",
            Duration::from_secs(1),
            Duration::from_millis(100),
            || async { Check::<()>::Pending("41".into()) },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("waiting for the answer"), "{err}");
        assert!(err.contains("last seen: 41"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn poll_returns_value_once_done() {
        let n = AtomicU32::new(0);
        let v = poll(
            "three",
            Duration::from_secs(5),
            Duration::from_millis(10),
            || {
                let i = n.fetch_add(1, Ordering::SeqCst);
                async move {
                    if i >= 3 {
                        Check::Done(i)
                    } else {
                        Check::Pending(i.to_string())
                    }
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn consistently_fails_on_first_violation() {
        let n = AtomicU32::new(0);
        let err = consistently(
            "stable",
            Duration::from_secs(10),
            Duration::from_millis(100),
            || {
                let i = n.fetch_add(1, Ordering::SeqCst);
                async move {
                    if i < 5 {
                        Ok(())
                    } else {
                        Err(format!("changed at {i}"))
                    }
                }
            },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("changed at 5"), "{err}");
    }

    /// A pod the kubelet rejected is Failed for good: a wait for it to run
    /// fails at once and says why; one still pending or running does not.
    #[test]
    fn a_wait_for_running_ends_on_a_rejected_pod_with_its_reason() {
        use super::*;
        let pod = |phase: &str, reason: Option<&str>| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "tester-1" },
                "spec": { "nodeName": "node-1", "containers": [] },
                "status": {
                    "phase": phase,
                    "reason": reason,
                    "message": reason.map(|_| "Pod was rejected: no healthy devices"),
                },
            }))
            .unwrap()
        };
        let rejected = pod("Failed", Some("UnexpectedAdmissionError"));
        match pod_in_state("tester-1", PodState::Running, Some(&rejected)) {
            Check::Fail(m) => {
                assert!(m.contains("ended instead of running"), "{m}");
                assert!(m.contains("reason=\"UnexpectedAdmissionError\""), "{m}");
                assert!(m.contains("no healthy devices"), "{m}");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        assert!(matches!(
            pod_in_state("tester-1", PodState::Running, Some(&pod("Succeeded", None))),
            Check::Fail(_)
        ));
        assert!(matches!(
            pod_in_state("tester-1", PodState::Running, Some(&pod("Pending", None))),
            Check::Pending(_)
        ));
        assert!(matches!(
            pod_in_state("tester-1", PodState::Running, Some(&pod("Running", None))),
            Check::Done(())
        ));
        // The Failed state itself is what a wait for failure waits for.
        assert!(matches!(
            pod_in_state("tester-1", PodState::Failed, Some(&rejected)),
            Check::Done(())
        ));
    }

    #[test]
    fn containers_restarted_needs_every_container_past_its_count_and_running_ready() {
        let pod = |statuses: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p"},
                "status": {"phase": "Running", "containerStatuses": statuses},
            }))
            .expect("a pod")
        };
        let status = |name: &str, restarts: i32, state: serde_json::Value, ready: bool| {
            serde_json::json!({
                "name": name, "image": "i", "imageID": "", "restartCount": restarts,
                "ready": ready, "state": state,
            })
        };
        let running = serde_json::json!({"running": {}});
        let before: std::collections::BTreeMap<String, i32> =
            [("a".to_owned(), 1), ("b".to_owned(), 0)].into();
        let both = pod(serde_json::json!([
            status("a", 2, running.clone(), true),
            status("b", 1, running.clone(), true),
        ]));
        assert!(matches!(
            containers_restarted(Some(&both), &before),
            Check::Done(())
        ));
        // A count not past its baseline, or a container not ready, is pending.
        let a_same = pod(serde_json::json!([
            status("a", 1, running.clone(), true),
            status("b", 1, running.clone(), true),
        ]));
        assert!(matches!(
            containers_restarted(Some(&a_same), &before),
            Check::Pending(_)
        ));
        let creating = pod(serde_json::json!([
            status("a", 2, running.clone(), true),
            status(
                "b",
                1,
                serde_json::json!({"waiting": {
                "reason": "CreateContainerError",
                "message": "CDI device injection failed: unresolvable CDI devices x"}}),
                false
            ),
        ]));
        match containers_restarted(Some(&creating), &before) {
            Check::Pending(seen) => assert!(
                seen.contains("container b restarts 1 (before 0), waiting CreateContainerError: CDI device injection failed"),
                "{seen}"
            ),
            other => panic!("expected pending, got {other:?}"),
        }
        // Without a baseline (a reboot), one restart of each is enough.
        assert!(matches!(
            containers_restarted(Some(&both), &Default::default()),
            Check::Done(())
        ));
        assert!(matches!(
            containers_restarted(None, &before),
            Check::Pending(_)
        ));
    }
}
