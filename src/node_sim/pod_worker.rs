//! One pod on a simulated node, from binding to removal: prepare its claims,
//! run its containers, unprepare, write the final status or finish deletion.
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Container, Event, ObjectReference, Pod, ResourceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::backoff::Backoff;
use super::cdi::{CdiSpecs, merge_env};
use super::command;
use super::containers::{Change, ContainerPlan, PodRuntime, RestartPolicy};
use super::dra_manager::{DraManager, PrepareOutcome};
use super::health::{HealthStore, container_resources_status};
use super::journal::{Journal, NodeEventKind};

/// Container env by `(namespace, pod)`, then container name; with the pod UID
/// so a successor pod of the same name is not clobbered.
pub type EnvTable =
    Mutex<HashMap<(String, String), (String, HashMap<String, Vec<(String, String)>>)>>;

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
    /// The last event written for this pod: reason, message, object name, count.
    last_event: Option<(String, String, String, i32)>,
    /// Changes with device health, when the node reports it.
    health_rx: Option<watch::Receiver<u64>>,
    /// The `allocatedResourcesStatus` of the last status written, so a
    /// health change rewrites only pods it affects.
    written_health: ResourcesStatus,
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
        Self {
            uid: pod.uid().unwrap_or_default(),
            ns: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            rx,
            cancel,
            runtime: None,
            pod_ip: None,
            started: None,
            last_event: None,
            health_rx: ctx.health.as_ref().map(|h| h.subscribe()),
            written_health: ResourcesStatus::new(),
            ctx,
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
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

    /// Like [`PodWorker::wait`], and also wakes when device health changed.
    async fn wait_running(&mut self, until: Option<Instant>) -> RunningWake {
        let Some(mut health) = self.health_rx.take() else {
            return RunningWake::Pod(self.wait(until).await);
        };
        let health_changed = async {
            // The sender lives in the node context this worker holds, so it
            // cannot close; if it ever did, health would just stop waking us.
            if health.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let woke = tokio::select! {
            w = self.wait(until) => RunningWake::Pod(w),
            _ = health_changed => RunningWake::Health,
        };
        self.health_rx = Some(health);
        woke
    }

    /// Runs the pod until it is gone from the API server and cleaned up, or
    /// the node stops.
    pub async fn run(mut self) {
        self.lifecycle().await;
        let mut envs = self.ctx.envs.lock().unwrap_or_else(|e| e.into_inner());
        let key = (self.ns.clone(), self.name.clone());
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
            if let Some(rt) = &self.runtime {
                if rt.finished().is_some() {
                    self.finished(&pod).await;
                    return;
                }
                let due = rt.next_due();
                match self.wait_running(due).await {
                    RunningWake::Pod(Wake::Stop) => return,
                    RunningWake::Pod(Wake::Changed) => continue,
                    RunningWake::Health => {
                        if self.resources_status(&pod) != self.written_health {
                            debug!(pod = %self.key(), "device health changed, rewriting status");
                            self.write_status(&pod).await;
                        }
                    }
                    RunningWake::Pod(Wake::Timer) => {
                        let now = Instant::now();
                        if let Some(rt) = self.runtime.as_mut() {
                            let changes = rt.advance(now);
                            self.apply_changes(&pod, changes).await;
                        }
                    }
                }
                continue;
            }
            if matches!(api_phase(&pod), Some("Succeeded" | "Failed")) {
                // Finished before this node (re)started; nothing runs.
                self.finished(&pod).await;
                return;
            }
            if self.pod_ip.is_none() {
                self.pod_ip = Some(self.ctx.ips.allocate().to_string());
                self.started = Some(jiff::Timestamp::now());
                self.write_status(&pod).await;
            }
            let outcome = tokio::select! {
                _ = self.cancel.cancelled() => return,
                r = self.ctx.dra.prepare_pod(&pod) => r,
            };
            let failure = match outcome {
                Ok(PrepareOutcome::Prepared) => match self.build_runtime(&pod) {
                    Ok(rt) => {
                        self.runtime = Some(rt);
                        let changes = self
                            .runtime
                            .as_mut()
                            .map(|rt| rt.start(Instant::now()))
                            .unwrap_or_default();
                        self.apply_changes(&pod, changes).await;
                        continue;
                    }
                    Err(msg) => ("Failed", msg),
                },
                Ok(PrepareOutcome::Waiting(why)) => {
                    debug!(pod = %self.key(), reason = %why, "waiting before prepare");
                    if let Wake::Stop = self.wait(None).await {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    self.ctx.journal.record(NodeEventKind::PrepareFailed {
                        pod: self.key(),
                        error: e.to_string(),
                    });
                    (
                        "FailedPrepareDynamicResources",
                        format!("Failed to prepare dynamic resources: {e}"),
                    )
                }
            };
            // Expected in many scenarios (injected failures, drivers without a
            // kubelet plugin); the Warning event and the journal carry it, so
            // the runner's default output stays quiet.
            info!(pod = %self.key(), reason = failure.0, message = %failure.1, "pod cannot start yet");
            self.event(&pod, "Warning", failure.0, failure.1).await;
            // Retry after the backoff, or sooner when the pod changed in a
            // way that can make a difference.
            let deadline = Instant::now() + delays.next_delay();
            let before = prepare_inputs(&pod);
            loop {
                match self.wait(Some(deadline)).await {
                    Wake::Stop => return,
                    Wake::Timer => break,
                    Wake::Changed => match self.current() {
                        Some(p) if prepare_inputs(&p) == before => {}
                        _ => break,
                    },
                }
            }
        }
    }

    /// Plans every container: command, spec env and CDI env.
    fn build_runtime(&self, pod: &Pod) -> Result<PodRuntime, String> {
        let specs = CdiSpecs::load(&self.ctx.cdi_dir)
            .map_err(|e| format!("Error: CDI device injection failed: {e}"))?;
        let plan = |c: &Container, sidecar: bool| -> Result<ContainerPlan, String> {
            let spec_env: Vec<(String, String)> = c
                .env
                .as_deref()
                .unwrap_or_default()
                .iter()
                // Only literal values: there is nothing to resolve references against.
                .filter(|e| e.value_from.is_none())
                .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
                .collect();
            let ids = self.ctx.dra.container_cdi_ids(pod, c);
            let cdi_env = specs
                .env_for(&ids)
                .map_err(|e| format!("Error: CDI device injection failed: {e}"))?;
            let env = merge_env(spec_env, cdi_env);
            Ok(ContainerPlan {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                // Scripts that check the env (`env | grep ...`) see this env.
                behaviour: command::behaviour(
                    c.command.as_deref().unwrap_or_default(),
                    c.args.as_deref().unwrap_or_default(),
                    &env,
                ),
                env,
                sidecar,
            })
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec
            .init_containers
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|c| plan(c, c.restart_policy.as_deref() == Some("Always")))
            .collect::<Result<Vec<_>, _>>()?;
        let main = spec
            .containers
            .iter()
            .map(|c| plan(c, false))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PodRuntime::new(
            &self.uid,
            init,
            main,
            RestartPolicy::parse(spec.restart_policy.as_deref()),
            self.ctx.restart_delay.initial,
            self.ctx.restart_delay.max,
        ))
    }

    /// Records container changes and reports them, unless the pod just
    /// finished: then the status waits until its claims are unprepared.
    async fn apply_changes(&mut self, pod: &Pod, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        for c in &changes {
            match c {
                Change::Started {
                    container,
                    restart_count,
                } => {
                    info!(pod = %self.key(), container, restart_count, "container started");
                    self.ctx.journal.record(NodeEventKind::ContainerStarted {
                        pod: self.key(),
                        container: container.clone(),
                        restart_count: *restart_count,
                    });
                }
                Change::Exited {
                    container,
                    exit_code,
                } => {
                    info!(pod = %self.key(), container, exit_code, "container exited");
                    self.ctx.journal.record(NodeEventKind::ContainerExited {
                        pod: self.key(),
                        container: container.clone(),
                        exit_code: *exit_code,
                    });
                }
            }
        }
        if let Some(rt) = &self.runtime {
            let envs: HashMap<_, _> = rt.envs().into_iter().collect();
            self.ctx
                .envs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    (self.ns.clone(), self.name.clone()),
                    (self.uid.clone(), envs),
                );
            if rt.finished().is_some() {
                return;
            }
        }
        self.write_status(pod).await;
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

    /// The health of the devices allocated to each container's claims, for
    /// claims prepared on this node.
    fn resources_status(&self, pod: &Pod) -> ResourcesStatus {
        let mut out = ResourcesStatus::new();
        let Some(health) = &self.ctx.health else {
            return out;
        };
        let devices = self.ctx.dra.claim_devices(pod);
        if devices.is_empty() {
            return out;
        }
        let snapshot = health.snapshot();
        let Some(spec) = pod.spec.as_ref() else {
            return out;
        };
        let containers = spec
            .init_containers
            .as_deref()
            .unwrap_or_default()
            .iter()
            .chain(&spec.containers);
        for c in containers {
            let references = c
                .resources
                .as_ref()
                .and_then(|r| r.claims.as_deref())
                .unwrap_or_default();
            let status = container_resources_status(references, &devices, &snapshot);
            if !status.is_empty() {
                out.insert(c.name.clone(), status);
            }
        }
        out
    }

    async fn write_status(&mut self, pod: &Pod) {
        let resources = self.resources_status(pod);
        let patch = self.status_patch(pod, &resources);
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        match api
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            // Only what the API server has counts as written, so the next
            // health change retries a failed health update.
            Ok(_) => self.written_health = resources,
            // The next change writes the whole status again.
            Err(e) => warn!(pod = %self.key(), error = %e, "writing pod status failed"),
        }
    }

    fn status_patch(&self, pod: &Pod, resources: &ResourcesStatus) -> serde_json::Value {
        let rt = self.runtime.as_ref();
        let (phase, initialized, ready, started) = match rt {
            Some(rt) => (rt.phase(), rt.initialized(), rt.ready(), true),
            None => ("Pending", false, false, false),
        };
        let existing = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let now = jiff::Timestamp::now();
        let cond = |ty: &str, ok: bool, reason: Option<&str>| {
            let status = if ok { "True" } else { "False" };
            // Keep the transition time while the status stays the same.
            let since = existing
                .iter()
                .find(|c| c.type_ == ty && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            let mut c = json!({"type": ty, "status": status, "lastTransitionTime": since});
            if let Some(r) = reason.filter(|_| !ok) {
                c["reason"] = json!(r);
            }
            c
        };
        let done = rt.is_some_and(|r| r.finished().is_some());
        let not_ready_reason = if done {
            "PodCompleted"
        } else {
            "ContainersNotReady"
        };
        let mut status = json!({
            "phase": phase,
            "hostIP": self.ctx.host_ip,
            "hostIPs": [{"ip": self.ctx.host_ip}],
            "conditions": [
                cond("PodReadyToStartContainers", started && !done, None),
                cond("Initialized", initialized, Some(if done { "PodCompleted" } else { "ContainersNotInitialized" })),
                cond("ContainersReady", ready, Some(not_ready_reason)),
                cond("Ready", ready, Some(not_ready_reason)),
            ],
        });
        if let Some(ip) = &self.pod_ip {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        if let Some(t) = self.started {
            status["startTime"] = json!(Time(t));
        }
        let spec = pod.spec.clone().unwrap_or_default();
        match rt {
            Some(rt) => {
                let (init, main) = rt.statuses();
                status["initContainerStatuses"] = json!(init);
                status["containerStatuses"] = json!(main);
            }
            None => {
                let waiting = |c: &Container, reason: &str| {
                    json!({
                        "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                        "ready": false, "started": false, "restartCount": 0,
                        "state": {"waiting": {"reason": reason}},
                    })
                };
                let init: Vec<_> = spec
                    .init_containers
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .map(|c| waiting(c, "PodInitializing"))
                    .collect();
                let has_init = !init.is_empty();
                status["initContainerStatuses"] = json!(init);
                status["containerStatuses"] = json!(
                    spec.containers
                        .iter()
                        .map(|c| waiting(
                            c,
                            if has_init {
                                "PodInitializing"
                            } else {
                                "ContainerCreating"
                            }
                        ))
                        .collect::<Vec<_>>()
                );
            }
        }
        // The lists are written whole (they have no merge key), so a
        // container without health entries simply has none any more.
        for list in ["initContainerStatuses", "containerStatuses"] {
            let Some(entries) = status[list].as_array_mut() else {
                continue;
            };
            for entry in entries {
                let name = entry["name"].as_str().unwrap_or_default();
                if let Some(r) = resources.get(name) {
                    entry["allocatedResourcesStatus"] = json!(r);
                }
            }
        }
        json!({ "status": status })
    }

    /// Writes an event on the pod; a repeat of the last one bumps its count.
    async fn event(&mut self, pod: &Pod, type_: &str, reason: &str, message: String) {
        let api: Api<Event> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let now = Time(jiff::Timestamp::now());
        if let Some((r, m, name, count)) = &mut self.last_event
            && r == reason
            && *m == message
        {
            *count += 1;
            let patch = json!({"count": *count, "lastTimestamp": now});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                Err(e) => debug!(error = %e, "updating event failed, creating a new one"),
            }
        }
        let name = format!("{}.{:x}", self.name, jiff::Timestamp::now().as_nanosecond());
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.ns.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(self.name.clone()),
                namespace: Some(self.ns.clone()),
                uid: Some(self.uid.clone()),
                resource_version: pod.resource_version(),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.clone()),
            type_: Some(type_.into()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some("kubelet".into()),
                host: Some(self.ctx.node.clone()),
            }),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some(self.ctx.node.clone()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ev).await {
            Ok(_) => self.last_event = Some((reason.into(), message, name, 1)),
            Err(e) => warn!(pod = %self.key(), error = %e, "writing event failed"),
        }
    }
}
