//! One pod on a simulated node, from binding to removal: prepare its claims,
//! run its containers, unprepare, write the final status or finish deletion.
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, Event, LinuxContainerUser, ObjectReference, Pod, PodSpec, ResourceStatus,
    VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::backoff::{Backoff, Delays};
use super::cdi::{CdiError, CdiSpecs, merge_env};
use super::command;
use super::containers::{Change, ContainerPlan, CreateError, PodRuntime, RestartPolicy};
use super::dra_manager::{DraError, DraManager, PrepareOutcome};
use super::health::{HealthStore, container_resources_status};
use super::journal::{Journal, NodeEventKind};

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

/// `(type, reason, message, fieldPath)` of an event.
type EventKey = (String, String, String, String);

/// `spec.containers{<name>}` or `spec.initContainers{<name>}`: the part of
/// the pod a container event is about.
fn field_path(pod: &Pod, container: &str) -> String {
    let init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.name == container);
    if init {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

/// The identity of a container's process: the security context's user and
/// group (container over pod), else root as in an image without a `USER`;
/// its groups are the primary one, the pod's `fsGroup` and
/// `supplementalGroups` (group memberships inside the image are unknown).
fn container_user(pod: &Pod, c: &Container) -> LinuxContainerUser {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let uid = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user))
        .unwrap_or(0);
    let gid = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group))
        .unwrap_or(0);
    let mut groups = vec![gid];
    let extra = pod_sc.and_then(|s| s.fs_group).into_iter().chain(
        pod_sc
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default(),
    );
    for g in extra {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    LinuxContainerUser {
        uid,
        gid,
        supplemental_groups: Some(groups),
    }
}

/// `volumeMounts` of a container's status: its spec's mounts; a read-only
/// mount is not recursively read-only unless the spec asks for it.
fn volume_mount_statuses(c: &Container) -> Vec<VolumeMountStatus> {
    c.volume_mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let read_only = m.read_only.unwrap_or(false);
            VolumeMountStatus {
                name: m.name.clone(),
                mount_path: m.mount_path.clone(),
                read_only: read_only.then_some(true),
                recursive_read_only: read_only.then(|| {
                    match m.recursive_read_only.as_deref() {
                        Some("Enabled") => "Enabled",
                        _ => "Disabled",
                    }
                    .to_owned()
                }),
                ..Default::default()
            }
        })
        .collect()
}

/// `containers with <what> status: [a b]`, as the kubelet lists containers
/// in condition messages.
fn containers_message(what: &str, names: &[String]) -> String {
    format!("containers with {what} status: [{}]", names.join(" "))
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

    /// Plans one container: command, spec env and CDI env, as the runtime
    /// would create it now. A CDI device the runtime cannot resolve makes a
    /// plan whose creation fails, worded as containerd words it.
    fn plan_container(
        &self,
        pod: &Pod,
        c: &Container,
        specs: &Result<CdiSpecs, CdiError>,
    ) -> ContainerPlan {
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
        let cdi_env = match specs {
            Ok(specs) => specs.env_for(&ids),
            Err(e) => Err(CdiError::ReadDir {
                dir: self.ctx.cdi_dir.clone(),
                source: std::io::Error::other(e.to_string()),
            }),
        };
        let runtime_error = |e: String| {
            format!("failed to create containerd container: CDI device injection failed: {e}")
        };
        let (cdi_env, create_error) = match cdi_env {
            Ok(env) => (env, None),
            Err(e) => (
                Vec::new(),
                Some(CreateError {
                    message: runtime_error(e.to_string()),
                    detail: runtime_error(e.detail()),
                }),
            ),
        };
        let env = merge_env(spec_env, cdi_env);
        let mut plan = ContainerPlan::new(
            c.name.clone(),
            c.image.clone().unwrap_or_default(),
            // Scripts that check the env (`env | grep ...`) see this env.
            command::behaviour(
                c.command.as_deref().unwrap_or_default(),
                c.args.as_deref().unwrap_or_default(),
                &env,
            ),
        );
        plan.env = env;
        plan.sidecar = c.restart_policy.as_deref() == Some("Always");
        plan.create_error = create_error;
        plan.volume_mounts = volume_mount_statuses(c);
        plan.user = container_user(pod, c);
        plan.claims = c
            .resources
            .as_ref()
            .and_then(|r| r.claims.clone())
            .unwrap_or_default();
        plan
    }

    /// Plans every container and the pod's runtime.
    fn build_runtime(&self, pod: &Pod) -> PodRuntime {
        let specs = CdiSpecs::load(&self.ctx.cdi_dir);
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec
            .init_containers
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|c| self.plan_container(pod, c, &specs))
            .collect();
        let main = spec
            .containers
            .iter()
            .map(|c| self.plan_container(pod, c, &specs))
            .collect();
        PodRuntime::new(
            &self.uid,
            &self.pod_ref(),
            init,
            main,
            RestartPolicy::parse(spec.restart_policy.as_deref()),
            self.ctx.restart_delay.initial,
            self.ctx.restart_delay.max,
        )
    }

    /// Plans anew the containers about to be created again, since the
    /// runtime resolves their CDI devices for every new container.
    fn replan_due(&mut self, pod: &Pod, now: Instant) {
        let Some(names) = self.runtime.as_ref().map(|rt| rt.creations_due(now)) else {
            return;
        };
        if names.is_empty() {
            return;
        }
        let specs = CdiSpecs::load(&self.ctx.cdi_dir);
        let spec = pod.spec.clone().unwrap_or_default();
        let containers = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers);
        let plans: Vec<ContainerPlan> = containers
            .filter(|c| names.contains(&c.name))
            .map(|c| self.plan_container(pod, c, &specs))
            .collect();
        if let Some(rt) = self.runtime.as_mut() {
            for plan in plans {
                rt.replan(plan);
            }
        }
    }

    /// Records container changes and reports them as the kubelet does
    /// (events, then status), unless the pod just finished: then the status
    /// waits until its claims are unprepared.
    async fn apply_changes(&mut self, pod: &Pod, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let image = |name: &str| {
            let spec = pod.spec.as_ref();
            spec.into_iter()
                .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
                .find(|c| c.name == name)
                .and_then(|c| c.image.clone())
                .unwrap_or_default()
        };
        let pulled = |name: &str| {
            format!(
                "Container image \"{}\" already present on machine and can be accessed by the pod",
                image(name)
            )
        };
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
                    let at = field_path(pod, container);
                    self.event(pod, &at, "Normal", "Pulled", pulled(container))
                        .await;
                    self.event(pod, &at, "Normal", "Created", "Container created".into())
                        .await;
                    self.event(pod, &at, "Normal", "Started", "Container started".into())
                        .await;
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
                Change::CreateFailed { container, error } => {
                    // Expected in scenarios about broken CDI specs; the
                    // journal has the details.
                    info!(pod = %self.key(), container, error = %error.detail, "creating container failed");
                    self.ctx
                        .journal
                        .record(NodeEventKind::ContainerCreateFailed {
                            pod: self.key(),
                            container: container.clone(),
                            error: error.detail.clone(),
                        });
                    let at = field_path(pod, container);
                    self.event(pod, &at, "Normal", "Pulled", pulled(container))
                        .await;
                    let message = format!("Error: {}", error.message);
                    self.event(pod, &at, "Warning", "Failed", message).await;
                }
                Change::BackOff { container, delay } => {
                    debug!(pod = %self.key(), container, ?delay, "container waits before restarting");
                    let at = field_path(pod, container);
                    let message = format!(
                        "Back-off restarting failed container {container} in pod {}",
                        self.pod_ref()
                    );
                    self.event(pod, &at, "Warning", "BackOff", message).await;
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

    /// The health of the devices prepared for each regular container's
    /// claims (the kubelet reports none for init containers). Once the
    /// claims are unprepared, the last value stands, as the kubelet's
    /// tombstoned claims keep it for a finished pod.
    fn resources_status(&mut self, pod: &Pod) -> ResourcesStatus {
        let mut out = ResourcesStatus::new();
        let Some(health) = &self.ctx.health else {
            return out;
        };
        let devices = self.ctx.dra.claim_devices(pod);
        if devices.is_empty() {
            return self.tombstone.clone();
        }
        let snapshot = health.snapshot();
        let Some(spec) = pod.spec.as_ref() else {
            return out;
        };
        for c in &spec.containers {
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
        self.tombstone = out.clone();
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

    /// The pod status as the kubelet generates it, as a strategic merge
    /// patch.
    fn status_patch(&self, pod: &Pod, resources: &ResourcesStatus) -> serde_json::Value {
        let rt = self.runtime.as_ref();
        let spec = pod.spec.clone().unwrap_or_default();
        let generation = pod.metadata.generation;
        let mut status = json!({
            "phase": rt.map_or("Pending", |r| r.phase()),
            "hostIP": self.ctx.host_ip,
            "hostIPs": [{"ip": self.ctx.host_ip}],
            "conditions": self.conditions(pod, &spec),
        });
        if let Some(g) = generation {
            status["observedGeneration"] = json!(g);
        }
        if let Some(ip) = &self.pod_ip {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        if let Some(t) = self.started {
            status["startTime"] = json!(Time(t));
        }
        let (init, main) = match rt {
            Some(rt) => {
                let (init, main) = rt.statuses();
                (json!(init), json!(main))
            }
            None => waiting_container_statuses(&spec),
        };
        status["initContainerStatuses"] = init;
        status["containerStatuses"] = main;
        add_resources_status(&mut status, resources);
        json!({ "status": status })
    }

    /// The kubelet's conditions, written whole (a field they no longer have
    /// is set to null, or the API server would keep a stale reason), in the
    /// kubelet's order; every condition, the scheduler's too, gets the pod
    /// generation as `observedGeneration`.
    fn conditions(&self, pod: &Pod, spec: &PodSpec) -> Vec<serde_json::Value> {
        let generation = pod.metadata.generation;
        let existing = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let now = jiff::Timestamp::now();
        let cond = |ty: &str, (ok, reason, message): Cond| {
            let status = if ok { "True" } else { "False" };
            // Keep the transition time while the status stays the same.
            let since = existing
                .iter()
                .find(|c| c.type_ == ty && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            let mut c = json!({
                "type": ty, "status": status, "lastTransitionTime": since,
                "reason": reason, "message": message,
            });
            if let Some(g) = generation {
                c["observedGeneration"] = json!(g);
            }
            c
        };
        const OWN: [&str; 4] = [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
        ];
        let containers_ready = self.containers_ready(spec);
        let mut conditions = vec![
            cond(OWN[0], self.sandbox_ready()),
            cond(OWN[1], self.initialized(spec)),
            cond(OWN[2], containers_ready.clone()),
            cond(OWN[3], containers_ready),
        ];
        if let Some(g) = generation {
            for c in existing.iter().filter(|c| !OWN.contains(&c.type_.as_str())) {
                conditions.push(json!({"type": c.type_, "observedGeneration": g}));
            }
        }
        conditions
    }

    /// `PodReadyToStartContainers`.
    fn sandbox_ready(&self) -> Cond {
        let rt = self.runtime.as_ref();
        match (rt, rt.and_then(|r| r.finished())) {
            (Some(_), None) => (true, None, None),
            (Some(_), Some(_)) => (
                false,
                Some("PodSandboxNotReady"),
                Some("pod sandbox is not ready".into()),
            ),
            (None, _) => (
                false,
                Some("PodSandboxNotReady"),
                Some("no pod sandbox exists".into()),
            ),
        }
    }

    /// `Initialized`.
    fn initialized(&self, spec: &PodSpec) -> Cond {
        let rt = self.runtime.as_ref();
        let init_specs = spec.init_containers.as_deref().unwrap_or_default();
        let incomplete = |names: Vec<String>| -> Cond {
            (
                false,
                Some("ContainersNotInitialized"),
                Some(containers_message("incomplete", &names)),
            )
        };
        match rt {
            _ if rt.and_then(|r| r.finished()) == Some(true) => (true, Some("PodCompleted"), None),
            Some(rt) if rt.initialized() => (true, None, None),
            Some(rt) => incomplete(rt.init_incomplete()),
            None if init_specs.is_empty() => (true, None, None),
            None => incomplete(init_specs.iter().map(|c| c.name.clone()).collect()),
        }
    }

    /// `ContainersReady`, and `Ready` alike.
    fn containers_ready(&self, spec: &PodSpec) -> Cond {
        let rt = self.runtime.as_ref();
        match rt.and_then(|r| r.finished()) {
            Some(true) => return (false, Some("PodCompleted"), None),
            Some(false) => return (false, Some("PodFailed"), None),
            None => {}
        }
        let unready = match rt {
            Some(rt) => rt.unready(),
            None => spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .chain(&spec.containers)
                .map(|c| c.name.clone())
                .collect(),
        };
        if unready.is_empty() {
            (true, None, None)
        } else {
            (
                false,
                Some("ContainersNotReady"),
                Some(containers_message("unready", &unready)),
            )
        }
    }

    /// Writes an event about the pod (or, with `field_path`, one of its
    /// containers), aggregated like the kubelet's recorder does: a repeat of
    /// an earlier event bumps that event's count.
    async fn event(
        &mut self,
        pod: &Pod,
        field_path: &str,
        type_: &str,
        reason: &str,
        message: String,
    ) {
        let api: Api<Event> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let now = Time(jiff::Timestamp::now());
        let key: EventKey = (
            type_.to_owned(),
            reason.to_owned(),
            message.clone(),
            field_path.to_owned(),
        );
        if let Some((name, count)) = self.events.get_mut(&key) {
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
                field_path: Some(field_path.to_owned()).filter(|p| !p.is_empty()),
            },
            reason: Some(reason.into()),
            message: Some(message),
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
            Ok(_) => {
                self.events.insert(key, (name, 1));
            }
            Err(e) => warn!(pod = %self.key(), error = %e, "writing event failed"),
        }
    }
}

/// `(status, reason, message)` of a kubelet condition.
type Cond = (bool, Option<&'static str>, Option<String>);

/// `initContainerStatuses` and `containerStatuses` of a pod whose
/// containers were not created yet: all waiting, the regular ones for the
/// init containers if there are any.
fn waiting_container_statuses(spec: &PodSpec) -> (serde_json::Value, serde_json::Value) {
    let waiting = |c: &Container, reason: &str| {
        let mut s = json!({
            "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
            "ready": false, "started": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason}},
        });
        let mounts = volume_mount_statuses(c);
        if !mounts.is_empty() {
            s["volumeMounts"] = json!(mounts);
        }
        s
    };
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| waiting(c, "PodInitializing"))
        .collect();
    let main_reason = if init.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let main: Vec<_> = spec
        .containers
        .iter()
        .map(|c| waiting(c, main_reason))
        .collect();
    (json!(init), json!(main))
}

/// Puts each container's `allocatedResourcesStatus` into `status`. The
/// lists are written whole (they have no merge key), so a container without
/// health entries simply has none any more.
fn add_resources_status(status: &mut serde_json::Value, resources: &ResourcesStatus) {
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
}
