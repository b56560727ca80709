//! One pod on a simulated node, from binding to removal: prepare its claims,
//! run its containers, unprepare, write the final status or finish deletion.
mod events;
mod plan;
mod status;

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, ResourceStatus};
use kube::api::{DeleteParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::backoff::{Backoff, Delays};
use super::containers::PodRuntime;
use super::dra_manager::{DraError, DraManager, PrepareOutcome};
use super::health::HealthStore;
use super::journal::{Journal, NodeEventKind};
use events::{EventKey, field_path};

/// Container env by `(namespace, pod)`, then container name; with the pod UID
/// so a successor pod of the same name is not clobbered.
pub type EnvTable =
    Mutex<HashMap<(String, String), (String, HashMap<String, Vec<(String, String)>>)>>;

/// A request to end a running container (by name) of a pod, answered
/// once it ended, or with why it could not.
pub type EndRequest = (String, oneshot::Sender<Result<(), String>>);

/// Where to send [`EndRequest`]s, by `(namespace, pod)`; with the pod UID
/// so a successor pod of the same name is not clobbered.
pub type EndTable = Mutex<HashMap<(String, String), (String, mpsc::UnboundedSender<EndRequest>)>>;

/// Pod IPs handed out round-robin from one /24.
#[derive(Debug)]
pub struct IpPool {
    base: Ipv4Addr,
    next: AtomicU32,
}

impl IpPool {
    pub fn new(base: Ipv4Addr) -> Self {
        Self {
            base,
            next: AtomicU32::new(0),
        }
    }

    pub fn allocate(&self) -> Ipv4Addr {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % 253 + 2;
        let [a, b, c, _] = self.base.octets();
        Ipv4Addr::new(a, b, c, n as u8)
    }
}

/// What all pod workers of a node share.
pub struct NodeCtx {
    pub client: kube::Client,
    pub node: String,
    pub host_ip: String,
    pub cdi_dir: PathBuf,
    pub dra: Arc<DraManager>,
    /// Device health for `allocatedResourcesStatus`; `None` when the node's
    /// `ResourceHealthStatus` gate is off.
    pub health: Option<Arc<HealthStore>>,
    pub journal: Journal,
    pub envs: EnvTable,
    /// The pod workers' ears for containers to end.
    pub enders: EndTable,
    pub ips: IpPool,
    /// Retries of failed prepares, unprepares and deletions.
    pub retry: Backoff,
    pub restart_delay: Backoff,
}

/// Why a wait ended.
enum Wake {
    Changed,
    Timer,
    Stop,
}

/// Why a wait of a running pod ended.
enum RunningWake {
    Pod(Wake),
    /// Some device's health changed.
    Health,
    /// A container is to end.
    End(EndRequest),
}

/// `allocatedResourcesStatus` by container name; containers without entries
/// are left out.
type ResourcesStatus = BTreeMap<String, Vec<ResourceStatus>>;

pub struct PodWorker {
    ctx: Arc<NodeCtx>,
    uid: String,
    ns: String,
    name: String,
    rx: watch::Receiver<Option<Arc<Pod>>>,
    cancel: CancellationToken,
    runtime: Option<PodRuntime>,
    pod_ip: Option<String>,
    started: Option<jiff::Timestamp>,
    /// Events written for this pod, by type, reason, message and field
    /// path: the event's name and count, so a repeat bumps the count.
    events: HashMap<EventKey, (String, i32)>,
    /// Changes with device health, when the node reports it.
    health_rx: Option<watch::Receiver<u64>>,
    /// Containers to end (taken while a running pod waits).
    end_rx: Option<mpsc::UnboundedReceiver<EndRequest>>,
    /// The `allocatedResourcesStatus` of the last status written, so a
    /// health change rewrites only pods it affects.
    written_health: ResourcesStatus,
    /// The last `allocatedResourcesStatus` while the pod's claims were
    /// prepared: the kubelet keeps unprepared claims a while (tombstones),
    /// so a finished pod's final status still lists its devices.
    tombstone: ResourcesStatus,
}

fn is_deleting(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn api_phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// The parts of a pod that can make a failed prepare succeed.
fn prepare_inputs(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    json!([
        is_deleting(pod),
        status.and_then(|s| s.resource_claim_statuses.as_ref()),
        status.and_then(|s| s.extended_resource_claim_status.as_ref()),
    ])
    .to_string()
}

impl PodWorker {
    pub fn new(
        ctx: Arc<NodeCtx>,
        pod: &Pod,
        rx: watch::Receiver<Option<Arc<Pod>>>,
        cancel: CancellationToken,
    ) -> Self {
        let (end_tx, end_rx) = mpsc::unbounded_channel();
        ctx.enders.lock().unwrap_or_else(|e| e.into_inner()).insert(
            (pod.namespace().unwrap_or_default(), pod.name_any()),
            (pod.uid().unwrap_or_default(), end_tx),
        );
        Self {
            uid: pod.uid().unwrap_or_default(),
            ns: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            rx,
            cancel,
            runtime: None,
            pod_ip: None,
            started: None,
            events: HashMap::new(),
            health_rx: ctx.health.as_ref().map(|h| h.subscribe()),
            end_rx: Some(end_rx),
            written_health: ResourcesStatus::new(),
            tombstone: ResourcesStatus::new(),
            ctx,
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }

    /// `<name>_<namespace>(<uid>)`, as the kubelet names pods in messages.
    fn pod_ref(&self) -> String {
        format!("{}_{}({})", self.name, self.ns, self.uid)
    }

    fn current(&self) -> Option<Arc<Pod>> {
        self.rx.borrow().clone()
    }

    /// Waits for a pod update, `until`, or the node stopping.
    async fn wait(&mut self, until: Option<Instant>) -> Wake {
        let timer = async {
            match until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.cancel.cancelled() => Wake::Stop,
            r = self.rx.changed() => if r.is_ok() { Wake::Changed } else { Wake::Stop },
            _ = timer => Wake::Timer,
        }
    }

    /// Like [`PodWorker::wait`], and also wakes when device health changed
    /// or a container is to end.
    async fn wait_running(&mut self, until: Option<Instant>) -> RunningWake {
        let mut health = self.health_rx.take();
        let mut ends = self.end_rx.take();
        let health_changed = async {
            // The sender lives in the node context this worker holds, so it
            // cannot close; if it ever did, health would just stop waking us.
            let changed = match health.as_mut() {
                Some(h) => h.changed().await.is_ok(),
                None => false,
            };
            if !changed {
                std::future::pending::<()>().await;
            }
        };
        let end = async {
            // The sender stays in the node's table while this worker runs.
            match ends.as_mut() {
                Some(rx) => match rx.recv().await {
                    Some(request) => request,
                    None => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        let woke = tokio::select! {
            w = self.wait(until) => RunningWake::Pod(w),
            _ = health_changed => RunningWake::Health,
            request = end => RunningWake::End(request),
        };
        self.health_rx = health;
        self.end_rx = ends;
        woke
    }

    /// Runs the pod until it is gone from the API server and cleaned up, or
    /// the node stops.
    pub async fn run(mut self) {
        self.lifecycle().await;
        let key = (self.ns.clone(), self.name.clone());
        let mut enders = self.ctx.enders.lock().unwrap_or_else(|e| e.into_inner());
        if enders.get(&key).is_some_and(|(uid, _)| *uid == self.uid) {
            enders.remove(&key);
        }
        drop(enders);
        let mut envs = self.ctx.envs.lock().unwrap_or_else(|e| e.into_inner());
        if envs.get(&key).is_some_and(|(uid, _)| *uid == self.uid) {
            envs.remove(&key);
        }
    }

    async fn lifecycle(&mut self) {
        let mut delays = self.ctx.retry.delays();
        loop {
            let Some(pod) = self.current() else {
                self.stop_containers();
                self.unprepare_until_done().await;
                return;
            };
            if is_deleting(&pod) {
                self.terminate().await;
                return;
            }
            let step = if self.runtime.is_some() {
                self.tend_running(&pod).await
            } else {
                self.try_start(&pod, &mut delays).await
            };
            if step.is_break() {
                return;
            }
        }
    }

    /// One step of a pod whose containers were started: finish it, or wait
    /// for the next container change, pod change or health change and act
    /// on it.
    async fn tend_running(&mut self, pod: &Pod) -> ControlFlow<()> {
        let Some(rt) = &self.runtime else {
            return ControlFlow::Continue(());
        };
        if rt.finished().is_some() {
            self.finished(pod).await;
            return ControlFlow::Break(());
        }
        let due = rt.next_due();
        match self.wait_running(due).await {
            RunningWake::Pod(Wake::Stop) => return ControlFlow::Break(()),
            RunningWake::Pod(Wake::Changed) => {}
            RunningWake::Health => {
                if self.resources_status(pod) != self.written_health {
                    debug!(pod = %self.key(), "device health changed, rewriting status");
                    self.write_status(pod).await;
                }
            }
            RunningWake::End((container, reply)) => {
                let now = Instant::now();
                let ended = match self.runtime.as_mut() {
                    Some(rt) => rt.end(&container, now),
                    None => Err(format!(
                        "the containers of pod {} are not running",
                        self.key()
                    )),
                };
                let changes = match ended {
                    Ok(changes) => {
                        info!(pod = %self.key(), container, "container process ended on request");
                        changes
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return ControlFlow::Continue(());
                    }
                };
                self.apply_changes(pod, changes).await;
                // Its restart (at once, the first time) creates it from a
                // new plan: the CDI specs are read again.
                self.replan_due(pod, now);
                if let Some(rt) = self.runtime.as_mut() {
                    let changes = rt.advance(now);
                    self.apply_changes(pod, changes).await;
                }
                let _ = reply.send(Ok(()));
            }
            RunningWake::Pod(Wake::Timer) => {
                let now = Instant::now();
                self.replan_due(pod, now);
                if let Some(rt) = self.runtime.as_mut() {
                    let changes = rt.advance(now);
                    self.apply_changes(pod, changes).await;
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// One attempt to start a pod: prepare its claims, then give it its IP
    /// and start its containers. A failed prepare is reported and retried
    /// after the backoff in `delays`.
    async fn try_start(&mut self, pod: &Pod, delays: &mut Delays) -> ControlFlow<()> {
        if matches!(api_phase(pod), Some("Succeeded" | "Failed")) {
            // Finished before this node (re)started; nothing runs.
            self.finished(pod).await;
            return ControlFlow::Break(());
        }
        if self.started.is_none() {
            self.started = Some(jiff::Timestamp::now());
            self.write_status(pod).await;
        }
        let outcome = tokio::select! {
            _ = self.cancel.cancelled() => return ControlFlow::Break(()),
            r = self.ctx.dra.prepare_pod(pod) => r,
        };
        match outcome {
            Ok(PrepareOutcome::Prepared) => {
                self.start_containers(pod).await;
                ControlFlow::Continue(())
            }
            Ok(PrepareOutcome::Waiting(why)) => {
                debug!(pod = %self.key(), reason = %why, "waiting before prepare");
                match self.wait(None).await {
                    Wake::Stop => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                }
            }
            Err(e) => {
                self.prepare_failed(pod, e).await;
                self.wait_to_retry_prepare(pod, delays.next_delay()).await
            }
        }
    }

    /// The sandbox: the pod gets its IP once its resources are prepared;
    /// then its containers start.
    async fn start_containers(&mut self, pod: &Pod) {
        self.pod_ip = Some(self.ctx.ips.allocate().to_string());
        let mut rt = self.build_runtime(pod);
        let changes = rt.start(Instant::now());
        self.runtime = Some(rt);
        self.apply_changes(pod, changes).await;
    }

    async fn prepare_failed(&mut self, pod: &Pod, e: DraError) {
        self.ctx.journal.record(NodeEventKind::PrepareFailed {
            pod: self.key(),
            error: e.to_string(),
        });
        let reason = "FailedPrepareDynamicResources";
        let message =
            format!("Failed to prepare dynamic resources: prepare dynamic resources: {e}");
        // Expected in many scenarios (injected failures, drivers without a
        // kubelet plugin); the Warning event and the journal carry it, so
        // the runner's default output stays quiet.
        info!(pod = %self.key(), reason, message = %message, "pod cannot start yet");
        self.event(pod, "", "Warning", reason, message).await;
    }

    /// Waits `delay` before the next prepare, or less when the pod changed
    /// in a way that can make a difference.
    async fn wait_to_retry_prepare(&mut self, pod: &Pod, delay: Duration) -> ControlFlow<()> {
        let deadline = Instant::now() + delay;
        let before = prepare_inputs(pod);
        loop {
            match self.wait(Some(deadline)).await {
                Wake::Stop => return ControlFlow::Break(()),
                Wake::Timer => return ControlFlow::Continue(()),
                Wake::Changed => match self.current() {
                    Some(p) if prepare_inputs(&p) == before => {}
                    _ => return ControlFlow::Continue(()),
                },
            }
        }
    }

    fn stop_containers(&mut self) {
        if self.runtime.take().is_some() {
            debug!(pod = %self.key(), "containers stopped");
        }
    }

    /// The pod's containers are done: unprepare, then write the final
    /// status, then wait for the pod to be deleted.
    async fn finished(&mut self, pod: &Pod) {
        if !self.unprepare_until_done().await {
            return;
        }
        if self.runtime.is_some() {
            self.write_status(pod).await;
            let phase = self.runtime.as_ref().map(|r| r.phase()).unwrap_or_default();
            info!(pod = %self.key(), phase, "pod finished");
            self.ctx.journal.record(NodeEventKind::PodFinished {
                pod: self.key(),
                phase: phase.to_owned(),
            });
        }
        loop {
            match self.current() {
                None => return,
                Some(p) if is_deleting(&p) => {
                    self.terminate().await;
                    return;
                }
                Some(_) => {}
            }
            if let Wake::Stop = self.wait(None).await {
                return;
            }
        }
    }

    /// Deletion requested: containers stop at once, claims are unprepared,
    /// then the deletion is finished with grace period 0.
    async fn terminate(&mut self) {
        let running = self
            .runtime
            .as_ref()
            .map(|rt| rt.running())
            .unwrap_or_default();
        if let Some(pod) = self.current() {
            for (container, _) in running {
                let at = field_path(&pod, &container);
                let message = format!("Stopping container {container}");
                self.event(&pod, &at, "Normal", "Killing", message).await;
            }
        }
        self.stop_containers();
        if !self.unprepare_until_done().await {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let mut delays = self.ctx.retry.delays();
        loop {
            match api.delete(&self.name, &dp).await {
                Ok(_) => break,
                // Gone already, or replaced by a pod with another UID.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => break,
                Err(e) => warn!(pod = %self.key(), error = %e, "finishing pod deletion failed"),
            }
            match self.wait(Some(Instant::now() + delays.next_delay())).await {
                Wake::Stop => return,
                _ if self.current().is_none() => break,
                _ => {}
            }
        }
        info!(pod = %self.key(), "pod deleted");
        self.ctx
            .journal
            .record(NodeEventKind::PodDeleted { pod: self.key() });
        // A finalizer may keep the object around; the worker ends with it.
        while self.current().is_some() {
            if let Wake::Stop = self.wait(None).await {
                return;
            }
        }
    }

    /// Unprepares until it works; false if the node stopped first.
    async fn unprepare_until_done(&mut self) -> bool {
        let mut delays = self.ctx.retry.delays();
        loop {
            let result = tokio::select! {
                _ = self.cancel.cancelled() => return false,
                r = self.ctx.dra.unprepare_pod(&self.uid) => r,
            };
            match result {
                Ok(()) => return true,
                // Injected in scenarios; journaled and retried like the kubelet does.
                Err(e) => info!(pod = %self.key(), error = %e, "unprepare failed, will retry"),
            }
            let deadline = Instant::now() + delays.next_delay();
            loop {
                match self.wait(Some(deadline)).await {
                    Wake::Stop => return false,
                    Wake::Timer => break,
                    Wake::Changed => {}
                }
            }
        }
    }
}
