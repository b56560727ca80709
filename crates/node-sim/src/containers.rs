//! The simulated containers of one pod after its resources are prepared:
//! init containers in order, then the regular ones, exits and restarts by the
//! pod's restart policy, containers the runtime cannot create, and the
//! container statuses and phase that follow, as a kubelet reports them.
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, ContainerUser, LinuxContainerUser, ResourceClaim, ResourceRequirements,
    VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::time::Instant;

use super::command::Behaviour;

/// Which containers restart after they exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// The pod spec's value; unknown or missing means `Always`, the default.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        }
    }
}

/// One container as the runtime will run it.
#[derive(Debug, Clone)]
pub struct ContainerPlan {
    pub name: String,
    pub image: String,
    pub behaviour: Behaviour,
    /// Spec env plus CDI env, as the process sees it.
    pub env: Vec<(String, String)>,
    /// An init container with `restartPolicy: Always`: it keeps running
    /// beside the regular containers.
    pub sidecar: bool,
    /// Why the runtime cannot create the container (a CDI device it cannot
    /// resolve): it then waits in `CreateContainerError` and is tried again
    /// later with a fresh plan.
    pub create_error: Option<CreateError>,
    /// `volumeMounts` of its status: the spec's mounts.
    pub volume_mounts: Vec<VolumeMountStatus>,
    /// The identity of its process (`user.linux` of its status).
    pub user: LinuxContainerUser,
    /// The spec's `resources.claims`, which its status repeats once the
    /// container exists.
    pub claims: Vec<ResourceClaim>,
}

impl ContainerPlan {
    pub fn new(name: impl Into<String>, image: impl Into<String>, behaviour: Behaviour) -> Self {
        Self {
            name: name.into(),
            image: image.into(),
            behaviour,
            env: Vec::new(),
            sidecar: false,
            create_error: None,
            volume_mounts: Vec::new(),
            user: LinuxContainerUser {
                uid: 0,
                gid: 0,
                supplemental_groups: Some(vec![0]),
            },
            claims: Vec::new(),
        }
    }
}

/// Why a container cannot be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateError {
    /// As the runtime reports it (status message and event).
    pub message: String,
    /// With what the node knows besides, for its journal.
    pub detail: String,
}

/// Something that happened to a container, for events, logs and the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Started {
        container: String,
        restart_count: i32,
    },
    Exited {
        container: String,
        exit_code: i32,
    },
    /// The runtime could not create it; it is tried again later.
    CreateFailed {
        container: String,
        error: CreateError,
    },
    /// It exited and waits this long before it restarts.
    BackOff {
        container: String,
        delay: Duration,
    },
}

#[derive(Debug, Clone)]
struct Terminated {
    exit_code: i32,
    started: Timestamp,
    finished: Timestamp,
    id: String,
}

#[derive(Debug, Clone)]
enum State {
    Waiting {
        reason: &'static str,
        message: Option<String>,
    },
    Running {
        started: Timestamp,
        id: String,
    },
    Terminated(Terminated),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Exit(i32),
    Restart,
    /// Another attempt to create a container the runtime could not create.
    Retry,
}

#[derive(Debug, Clone)]
struct Ctr {
    plan: ContainerPlan,
    state: State,
    /// Container instances created so far; `restartCount` is one less.
    instances: i32,
    /// Failed creations in a row, for the retry delay.
    create_failures: u32,
    last: Option<Terminated>,
    due: Option<(Instant, Due)>,
}

impl Ctr {
    fn new(plan: ContainerPlan, reason: &'static str) -> Self {
        Self {
            plan,
            state: State::Waiting {
                reason,
                message: None,
            },
            instances: 0,
            create_failures: 0,
            last: None,
            due: None,
        }
    }

    fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    fn restart_count(&self) -> i32 {
        (self.instances - 1).max(0)
    }

    /// A regular init container that completed, or a sidecar that runs.
    fn initialized(&self) -> bool {
        if self.plan.sidecar {
            self.running()
        } else {
            matches!(&self.state, State::Terminated(t) if t.exit_code == 0)
        }
    }

    /// Waiting for its first instance: the pod is still `Pending`.
    fn never_ran(&self) -> bool {
        matches!(self.state, State::Waiting { .. }) && self.last.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Init(usize),
    Main,
    Done { succeeded: bool },
}

/// Runtime state of one pod's containers.
#[derive(Debug, Clone)]
pub struct PodRuntime {
    pod_uid: String,
    /// `<name>_<namespace>(<uid>)`, as the kubelet names pods in messages.
    pod_ref: String,
    init: Vec<Ctr>,
    main: Vec<Ctr>,
    policy: RestartPolicy,
    restart_delay: Duration,
    restart_delay_max: Duration,
    stage: Stage,
}

enum Which {
    Init(usize),
    Main(usize),
}

/// A delay as Go prints a `time.Duration` (`500ms`, `10s`, `1m20s`), as in
/// the kubelet's back-off messages.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (m, s) = (ms / 60_000, (ms % 60_000) as f64 / 1000.0);
    let secs = format!("{s}s");
    if m == 0 { secs } else { format!("{m}m{secs}") }
}

impl PodRuntime {
    /// `restart_delay` is the crash-loop delay before the second restart (the
    /// first comes at once, as in the kubelet); it doubles per restart up to
    /// `restart_delay_max`. It also spaces out attempts to create containers
    /// the runtime could not create.
    pub fn new(
        pod_uid: &str,
        pod_ref: &str,
        init: Vec<ContainerPlan>,
        main: Vec<ContainerPlan>,
        policy: RestartPolicy,
        restart_delay: Duration,
        restart_delay_max: Duration,
    ) -> Self {
        let main_reason = if init.is_empty() {
            "ContainerCreating"
        } else {
            "PodInitializing"
        };
        Self {
            pod_uid: pod_uid.to_owned(),
            pod_ref: pod_ref.to_owned(),
            init: init
                .into_iter()
                .map(|p| Ctr::new(p, "PodInitializing"))
                .collect(),
            main: main.into_iter().map(|p| Ctr::new(p, main_reason)).collect(),
            policy,
            // A zero delay would let `true` under `Always` restart forever
            // without time passing.
            restart_delay: restart_delay.max(Duration::from_millis(1)),
            restart_delay_max: restart_delay_max.max(Duration::from_millis(1)),
            stage: Stage::Init(0),
        }
    }

    /// Starts the first init container (or the regular ones), then runs
    /// everything already due.
    pub fn start(&mut self, now: Instant) -> Vec<Change> {
        let mut changes = Vec::new();
        self.enter_init(0, now, &mut changes);
        changes.extend(self.advance(now));
        changes
    }

    /// When the next exit, restart or creation attempt happens, if ever.
    pub fn next_due(&self) -> Option<Instant> {
        self.init
            .iter()
            .chain(&self.main)
            .filter_map(|c| c.due.map(|(t, _)| t))
            .min()
    }

    /// Containers about to be created again by `now` (restarts and retries
    /// of failed creations): their plans may be replaced first, since the
    /// runtime resolves their CDI devices anew for every creation.
    pub fn creations_due(&self, now: Instant) -> Vec<String> {
        self.init
            .iter()
            .chain(&self.main)
            .filter(|c| matches!(c.due, Some((t, Due::Restart | Due::Retry)) if t <= now))
            .map(|c| c.plan.name.clone())
            .collect()
    }

    /// Replaces the plan of the container with the same name.
    pub fn replan(&mut self, plan: ContainerPlan) {
        if let Some(c) = self
            .init
            .iter_mut()
            .chain(self.main.iter_mut())
            .find(|c| c.plan.name == plan.name)
        {
            let sidecar = c.plan.sidecar;
            c.plan = plan;
            c.plan.sidecar = sidecar;
        }
    }

    /// Processes every exit, restart and creation attempt due by `now`,
    /// earliest first.
    pub fn advance(&mut self, now: Instant) -> Vec<Change> {
        let mut changes = Vec::new();
        loop {
            let next = self
                .init
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.due.map(|d| (d, Which::Init(i))))
                .chain(
                    self.main
                        .iter()
                        .enumerate()
                        .filter_map(|(i, c)| c.due.map(|d| (d, Which::Main(i)))),
                )
                .filter(|((t, _), _)| *t <= now)
                .min_by_key(|((t, _), _)| *t);
            let Some(((_, due), which)) = next else {
                return changes;
            };
            match which {
                Which::Init(i) => {
                    self.init[i].due = None;
                    self.on_init_due(i, due, now, &mut changes);
                }
                Which::Main(i) => {
                    self.main[i].due = None;
                    self.on_main_due(i, due, now, &mut changes);
                }
            }
        }
    }

    /// Ends the running regular container `name` with status 0, as the
    /// pod builder's default command ends on SIGTERM (`kill -TERM 1` in it
    /// on a real node); its restart follows the pod's policy, the first at
    /// once. Whoever restarts it should replan it first
    /// ([`PodRuntime::creations_due`]): the runtime resolves its CDI devices
    /// anew. An error says why nothing ended.
    pub fn end(&mut self, name: &str, now: Instant) -> Result<Vec<Change>, String> {
        let i = self
            .main
            .iter()
            .position(|c| c.plan.name == name)
            .ok_or_else(|| format!("pod {} has no regular container {name}", self.pod_ref))?;
        if self.stage != Stage::Main || !self.main[i].running() {
            return Err(format!(
                "container {name} of pod {} is not running",
                self.pod_ref
            ));
        }
        let mut changes = Vec::new();
        self.main[i].due = None;
        self.on_main_due(i, Due::Exit(0), now, &mut changes);
        Ok(changes)
    }

    /// `Some(true)` once the pod succeeded, `Some(false)` once it failed.
    pub fn finished(&self) -> Option<bool> {
        match self.stage {
            Stage::Done { succeeded } => Some(succeeded),
            _ => None,
        }
    }

    /// The pod phase: `Pending` until every init container completed and
    /// every regular container ran at least once.
    pub fn phase(&self) -> &'static str {
        match self.stage {
            Stage::Init(_) => "Pending",
            Stage::Main if self.main.iter().any(Ctr::never_ran) => "Pending",
            Stage::Main => "Running",
            Stage::Done { succeeded: true } => "Succeeded",
            Stage::Done { succeeded: false } => "Failed",
        }
    }

    /// The `Initialized` condition: init containers done (or the pod
    /// succeeded, or a regular container started already).
    pub fn initialized(&self) -> bool {
        match self.stage {
            Stage::Init(_) => false,
            Stage::Main => true,
            Stage::Done { succeeded } => {
                succeeded
                    || self.main.iter().any(|c| c.instances > 0)
                    || self.init.iter().all(Ctr::initialized)
            }
        }
    }

    /// Init containers that have not completed (sidecars: that do not run),
    /// for the `Initialized` condition's message.
    pub fn init_incomplete(&self) -> Vec<String> {
        self.init
            .iter()
            .filter(|c| !c.initialized())
            .map(|c| c.plan.name.clone())
            .collect()
    }

    /// Sidecars, then regular containers, that are not ready, for the
    /// `ContainersReady` condition.
    pub fn unready(&self) -> Vec<String> {
        self.init
            .iter()
            .filter(|c| c.plan.sidecar)
            .chain(&self.main)
            .filter(|c| !c.running())
            .map(|c| c.plan.name.clone())
            .collect()
    }

    /// Containers that run now, as `(name, is init container)`.
    pub fn running(&self) -> Vec<(String, bool)> {
        let init = self.init.iter().map(|c| (c, true));
        let main = self.main.iter().map(|c| (c, false));
        init.chain(main)
            .filter(|(c, _)| c.running())
            .map(|(c, is_init)| (c.plan.name.clone(), is_init))
            .collect()
    }

    /// Env of every container that has started at least once.
    pub fn envs(&self) -> Vec<(String, Vec<(String, String)>)> {
        self.init
            .iter()
            .chain(&self.main)
            .filter(|c| c.instances > 0)
            .map(|c| (c.plan.name.clone(), c.plan.env.clone()))
            .collect()
    }

    fn enter_init(&mut self, mut i: usize, now: Instant, changes: &mut Vec<Change>) {
        while i < self.init.len() && self.init[i].plan.sidecar {
            self.start_ctr(Which::Init(i), now, changes);
            i += 1;
        }
        if i < self.init.len() {
            self.stage = Stage::Init(i);
            self.start_ctr(Which::Init(i), now, changes);
        } else {
            self.stage = Stage::Main;
            for m in 0..self.main.len() {
                self.start_ctr(Which::Main(m), now, changes);
            }
            self.check_done(changes);
        }
    }

    fn ctr(&mut self, w: &Which) -> &mut Ctr {
        match *w {
            Which::Init(i) => &mut self.init[i],
            Which::Main(i) => &mut self.main[i],
        }
    }

    /// `restart_delay` doubled `n` times, at most `restart_delay_max`.
    fn delay(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.min(16));
        self.restart_delay
            .saturating_mul(factor)
            .min(self.restart_delay_max)
    }

    /// Creates and starts a new instance of the container, or records that
    /// the runtime could not create it.
    fn start_ctr(&mut self, w: Which, now: Instant, changes: &mut Vec<Change>) {
        let retry = {
            let c = self.ctr(&w);
            c.plan.create_error.as_ref().map(|_| c.create_failures)
        };
        let retry_delay = retry.map(|n| self.delay(n));
        let uid = self.pod_uid.clone();
        let c = self.ctr(&w);
        if let (Some(error), Some(delay)) = (c.plan.create_error.clone(), retry_delay) {
            c.create_failures += 1;
            c.state = State::Waiting {
                reason: "CreateContainerError",
                message: Some(error.message.clone()),
            };
            c.due = Some((now + delay, Due::Retry));
            changes.push(Change::CreateFailed {
                container: c.plan.name.clone(),
                error,
            });
            return;
        }
        c.create_failures = 0;
        c.instances += 1;
        c.state = State::Running {
            started: Timestamp::now(),
            id: format!("sim://{uid}-{}-{}", c.plan.name, c.instances - 1),
        };
        c.due = match c.plan.behaviour {
            Behaviour::RunForever => None,
            Behaviour::Exit { after, code } => Some((now + after, Due::Exit(code))),
        };
        changes.push(Change::Started {
            container: c.plan.name.clone(),
            restart_count: c.restart_count(),
        });
    }

    /// Marks the container exited; with `restart`, it is created again: at
    /// once after its first exit, then after a doubling back-off
    /// (`CrashLoopBackOff`), as the kubelet does.
    fn exit_ctr(
        &mut self,
        w: Which,
        code: i32,
        restart: bool,
        now: Instant,
        changes: &mut Vec<Change>,
    ) {
        let restarts = self.ctr(&w).restart_count();
        let wait = if restarts == 0 {
            Duration::ZERO
        } else {
            self.delay(restarts as u32 - 1)
        };
        let pod_ref = self.pod_ref.clone();
        let c = self.ctr(&w);
        let (started, id) = match &c.state {
            State::Running { started, id } => (*started, id.clone()),
            _ => (Timestamp::now(), String::new()),
        };
        let t = Terminated {
            exit_code: code,
            started,
            finished: Timestamp::now(),
            id,
        };
        changes.push(Change::Exited {
            container: c.plan.name.clone(),
            exit_code: code,
        });
        if !restart {
            c.state = State::Terminated(t);
            c.due = None;
            return;
        }
        c.last = Some(t.clone());
        c.due = Some((now + wait, Due::Restart));
        if wait.is_zero() {
            // Restarted within this same step; nobody sees it wait.
            c.state = State::Terminated(t);
        } else {
            c.state = State::Waiting {
                reason: "CrashLoopBackOff",
                message: Some(format!(
                    "back-off {} restarting failed container={} pod={pod_ref}",
                    go_duration(wait),
                    c.plan.name
                )),
            };
            changes.push(Change::BackOff {
                container: c.plan.name.clone(),
                delay: wait,
            });
        }
    }

    fn on_init_due(&mut self, i: usize, due: Due, now: Instant, changes: &mut Vec<Change>) {
        match due {
            Due::Restart | Due::Retry => {
                self.start_ctr(Which::Init(i), now, changes);
            }
            Due::Exit(code) if self.init[i].plan.sidecar => {
                let restart = !matches!(self.stage, Stage::Done { .. });
                self.exit_ctr(Which::Init(i), code, restart, now, changes);
            }
            Due::Exit(0) => {
                self.exit_ctr(Which::Init(i), 0, false, now, changes);
                if self.stage == Stage::Init(i) {
                    self.enter_init(i + 1, now, changes);
                }
            }
            Due::Exit(code) => {
                let restart = self.policy != RestartPolicy::Never;
                self.exit_ctr(Which::Init(i), code, restart, now, changes);
                if !restart {
                    self.finish(false, changes);
                }
            }
        }
    }

    fn on_main_due(&mut self, i: usize, due: Due, now: Instant, changes: &mut Vec<Change>) {
        match due {
            Due::Restart | Due::Retry => {
                self.start_ctr(Which::Main(i), now, changes);
            }
            Due::Exit(code) => {
                let restart = match self.policy {
                    RestartPolicy::Always => true,
                    RestartPolicy::OnFailure => code != 0,
                    RestartPolicy::Never => false,
                };
                self.exit_ctr(Which::Main(i), code, restart, now, changes);
                self.check_done(changes);
            }
        }
    }

    fn check_done(&mut self, changes: &mut Vec<Change>) {
        if self.stage != Stage::Main {
            return;
        }
        let mut succeeded = true;
        for c in &self.main {
            match &c.state {
                State::Terminated(t) if c.due.is_none() => succeeded &= t.exit_code == 0,
                _ => return,
            }
        }
        self.finish(succeeded, changes);
    }

    /// The pod is over: sidecars and anything still running stop.
    fn finish(&mut self, succeeded: bool, changes: &mut Vec<Change>) {
        self.stage = Stage::Done { succeeded };
        for c in self.init.iter_mut().chain(self.main.iter_mut()) {
            c.due = None;
            match &c.state {
                State::Running { started, id } => {
                    c.state = State::Terminated(Terminated {
                        exit_code: 0,
                        started: *started,
                        finished: Timestamp::now(),
                        id: id.clone(),
                    });
                    changes.push(Change::Exited {
                        container: c.plan.name.clone(),
                        exit_code: 0,
                    });
                }
                State::Waiting { .. } => {
                    if let Some(t) = c.last.clone() {
                        c.state = State::Terminated(t);
                    }
                }
                State::Terminated(_) => {}
            }
        }
    }

    /// `(initContainerStatuses, containerStatuses)`.
    pub fn statuses(&self) -> (Vec<ContainerStatus>, Vec<ContainerStatus>) {
        (
            self.init.iter().map(|c| self.status_of(c, true)).collect(),
            self.main.iter().map(|c| self.status_of(c, false)).collect(),
        )
    }

    fn status_of(&self, c: &Ctr, init: bool) -> ContainerStatus {
        let terminated = |t: &Terminated| ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(t.id.clone()),
                exit_code: t.exit_code,
                reason: Some(
                    if t.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    }
                    .into(),
                ),
                started_at: Some(Time(t.started)),
                finished_at: Some(Time(t.finished)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (state, id) = match &c.state {
            State::Waiting { reason, message } => (
                ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some((*reason).into()),
                        message: message.clone(),
                    }),
                    ..Default::default()
                },
                // A container waiting to restart is still known by its last
                // instance.
                c.last.as_ref().map(|t| t.id.clone()),
            ),
            State::Running { started, id } => (
                ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(*started)),
                    }),
                    ..Default::default()
                },
                Some(id.clone()),
            ),
            State::Terminated(t) => (terminated(t), Some(t.id.clone())),
        };
        let running = c.running();
        let ready = if init && !c.plan.sidecar {
            c.initialized()
        } else {
            running
        };
        let created = c.instances > 0;
        ContainerStatus {
            name: c.plan.name.clone(),
            image: c.plan.image.clone(),
            image_id: if created {
                format!("sim-image://{}", c.plan.image)
            } else {
                String::new()
            },
            container_id: id.filter(|id| !id.is_empty()),
            ready,
            started: Some(running),
            restart_count: c.restart_count(),
            state: Some(state),
            last_state: c.last.as_ref().map(terminated),
            // The runtime reports who runs the process once it created one.
            user: created.then(|| ContainerUser {
                linux: Some(c.plan.user.clone()),
            }),
            resources: (created && !c.plan.claims.is_empty()).then(|| ResourceRequirements {
                claims: Some(c.plan.claims.clone()),
                ..Default::default()
            }),
            volume_mounts: Some(c.plan.volume_mounts.clone()).filter(|m| !m.is_empty()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(name: &str, b: Behaviour) -> ContainerPlan {
        ContainerPlan::new(name, "img", b)
    }

    fn exit(ms: u64, code: i32) -> Behaviour {
        Behaviour::Exit {
            after: Duration::from_millis(ms),
            code,
        }
    }

    fn rt(init: Vec<ContainerPlan>, main: Vec<ContainerPlan>, p: RestartPolicy) -> PodRuntime {
        PodRuntime::new(
            "uid",
            "p_ns(uid)",
            init,
            main,
            p,
            Duration::from_millis(10),
            Duration::from_millis(40),
        )
    }

    fn terminated(state: Option<&ContainerState>) -> &ContainerStateTerminated {
        state
            .and_then(|s| s.terminated.as_ref())
            .expect("a terminated state")
    }

    /// Steps simulated time to each due moment until `until`.
    fn run_until(r: &mut PodRuntime, start: Instant, until: Duration) -> Vec<Change> {
        let mut all = Vec::new();
        while let Some(t) = r.next_due() {
            if t > start + until {
                break;
            }
            all.extend(r.advance(t));
        }
        all
    }

    #[test]
    fn runs_forever_by_default() {
        let now = Instant::now();
        let mut r = rt(
            vec![],
            vec![plan("c", Behaviour::RunForever)],
            RestartPolicy::Never,
        );
        let ch = r.start(now);
        assert_eq!(ch.len(), 1);
        assert_eq!(r.phase(), "Running");
        assert!(r.unready().is_empty());
        assert_eq!(r.next_due(), None);
    }

    #[test]
    fn never_policy_succeeds_or_fails() {
        let now = Instant::now();
        let mut r = rt(
            vec![],
            vec![plan("a", exit(5, 0)), plan("b", exit(10, 3))],
            RestartPolicy::Never,
        );
        r.start(now);
        run_until(&mut r, now, Duration::from_secs(1));
        assert_eq!(r.finished(), Some(false));
        assert_eq!(r.phase(), "Failed");
        let (_, st) = r.statuses();
        let t = terminated(st[1].state.as_ref());
        assert_eq!(t.exit_code, 3);
        assert_eq!(t.reason.as_deref(), Some("Error"));

        let mut r = rt(vec![], vec![plan("a", exit(0, 0))], RestartPolicy::Never);
        r.start(now);
        assert_eq!(r.finished(), Some(true));
    }

    #[test]
    fn always_policy_restarts_with_growing_delay() {
        let now = Instant::now();
        let mut r = rt(vec![], vec![plan("c", exit(1, 1))], RestartPolicy::Always);
        r.start(now);
        let changes = run_until(&mut r, now, Duration::from_millis(200));
        let starts = changes
            .iter()
            .filter(|c| matches!(c, Change::Started { .. }))
            .count();
        assert!(starts >= 3, "{changes:?}");
        assert_eq!(r.finished(), None);
        assert_eq!(r.phase(), "Running");
        let (_, st) = r.statuses();
        assert!(st[0].restart_count >= 3);
        assert_eq!(terminated(st[0].last_state.as_ref()).exit_code, 1);
        // Delays: 10, 20, 40, 40 ms: in 200 ms about five restarts, not 100.
        assert!(st[0].restart_count < 10);
    }

    #[test]
    fn on_failure_restarts_until_success() {
        let now = Instant::now();
        let mut r = rt(
            vec![],
            vec![plan("c", exit(1, 0))],
            RestartPolicy::OnFailure,
        );
        r.start(now);
        run_until(&mut r, now, Duration::from_secs(1));
        assert_eq!(r.finished(), Some(true));

        let mut r = rt(
            vec![],
            vec![plan("c", exit(1, 2))],
            RestartPolicy::OnFailure,
        );
        r.start(now);
        run_until(&mut r, now, Duration::from_millis(100));
        assert_eq!(r.finished(), None);
    }

    #[test]
    fn init_containers_run_in_order_before_regular_ones() {
        let now = Instant::now();
        let mut sidecar = plan("side", Behaviour::RunForever);
        sidecar.sidecar = true;
        let mut r = rt(
            vec![plan("i1", exit(5, 0)), sidecar, plan("i2", exit(5, 0))],
            vec![plan("main", exit(5, 0))],
            RestartPolicy::Never,
        );
        let first = r.start(now);
        assert_eq!(
            first,
            vec![Change::Started {
                container: "i1".into(),
                restart_count: 0
            }]
        );
        assert_eq!(r.phase(), "Pending");
        assert!(!r.initialized());
        let rest = run_until(&mut r, now, Duration::from_secs(1));
        let order: Vec<String> = rest
            .iter()
            .map(|c| match c {
                Change::Started { container, .. } => format!("+{container}"),
                Change::Exited { container, .. } => format!("-{container}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            order,
            ["-i1", "+side", "+i2", "-i2", "+main", "-main", "-side"]
        );
        assert_eq!(r.finished(), Some(true));
    }

    #[test]
    fn failing_init_container() {
        let now = Instant::now();
        let mut r = rt(
            vec![plan("i", exit(0, 1))],
            vec![plan("m", Behaviour::RunForever)],
            RestartPolicy::Never,
        );
        r.start(now);
        assert_eq!(r.finished(), Some(false));

        let mut r = rt(
            vec![plan("i", exit(0, 1))],
            vec![plan("m", Behaviour::RunForever)],
            RestartPolicy::Always,
        );
        r.start(now);
        run_until(&mut r, now, Duration::from_millis(100));
        assert_eq!(r.phase(), "Pending");
        let (init, main) = r.statuses();
        assert!(init[0].restart_count >= 2);
        assert!(main[0].state.as_ref().unwrap().waiting.is_some());
    }

    fn waiting(s: &ContainerStatus) -> (String, String) {
        let w = s.state.as_ref().unwrap().waiting.as_ref().unwrap();
        (
            w.reason.clone().unwrap_or_default(),
            w.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn first_restart_at_once_then_crash_loop_back_off() {
        let now = Instant::now();
        let mut r = rt(vec![], vec![plan("c", exit(5, 1))], RestartPolicy::Always);
        r.start(now);
        // First exit: restarted in the same step, no back-off.
        let ch = r.advance(now + Duration::from_millis(5));
        assert_eq!(
            ch,
            vec![
                Change::Exited {
                    container: "c".into(),
                    exit_code: 1
                },
                Change::Started {
                    container: "c".into(),
                    restart_count: 1
                },
            ]
        );
        // Second exit: waits, and says why.
        let ch = r.advance(now + Duration::from_millis(10));
        assert!(ch.contains(&Change::BackOff {
            container: "c".into(),
            delay: Duration::from_millis(10)
        }));
        let (_, st) = r.statuses();
        assert_eq!(
            waiting(&st[0]),
            (
                "CrashLoopBackOff".into(),
                "back-off 10ms restarting failed container=c pod=p_ns(uid)".into()
            )
        );
        assert_eq!(st[0].restart_count, 1);
        assert_eq!(st[0].container_id.as_deref(), Some("sim://uid-c-1"));
        assert!(st[0].user.is_some());
        assert_eq!(r.phase(), "Running");
        assert_eq!(r.unready(), vec!["c".to_string()]);
    }

    #[test]
    fn an_ended_container_restarts_at_once_from_a_new_plan() {
        let now = Instant::now();
        let mut r = rt(
            vec![],
            vec![plan("c", Behaviour::RunForever)],
            RestartPolicy::Always,
        );
        r.start(now);
        let ch = r.end("c", now).expect("ends");
        assert!(
            matches!(&ch[..], [Change::Exited { container, exit_code: 0 }] if container == "c")
        );
        // Due at once; created again only after a replan, as the worker
        // does, so a CDI device gone meanwhile is seen.
        assert_eq!(r.creations_due(now), vec!["c".to_string()]);
        let mut gone = plan("c", Behaviour::RunForever);
        gone.create_error = Some(CreateError {
            message: "unresolvable CDI devices x/y=z".into(),
            detail: "unresolvable CDI devices x/y=z: not in /cdi".into(),
        });
        r.replan(gone);
        let ch = r.advance(now);
        assert!(matches!(&ch[..], [Change::CreateFailed { container, .. }] if container == "c"));
        assert_eq!(r.unready(), vec!["c".to_string()]);
        // Only a running regular container can be ended.
        assert!(r.end("c", now).unwrap_err().contains("is not running"));
        assert!(
            r.end("x", now)
                .unwrap_err()
                .contains("no regular container x")
        );

        // Under Never the pod ends.
        let mut r = rt(
            vec![],
            vec![plan("c", Behaviour::RunForever)],
            RestartPolicy::Never,
        );
        r.start(now);
        r.end("c", now).expect("ends");
        assert_eq!(r.finished(), Some(true));
    }

    #[test]
    fn a_container_the_runtime_cannot_create_waits_and_is_retried() {
        let now = Instant::now();
        let mut broken = plan("b", Behaviour::RunForever);
        broken.create_error = Some(CreateError {
            message: "unresolvable CDI devices x/y=z".into(),
            detail: "unresolvable CDI devices x/y=z: not in /cdi".into(),
        });
        let mut r = rt(
            vec![],
            vec![plan("a", Behaviour::RunForever), broken],
            RestartPolicy::Never,
        );
        let ch = r.start(now);
        assert!(matches!(&ch[1], Change::CreateFailed { container, error }
            if container == "b" && error.message == "unresolvable CDI devices x/y=z"));
        // One container never ran: the pod is still pending.
        assert_eq!(r.phase(), "Pending");
        assert!(!r.unready().is_empty());
        let (_, st) = r.statuses();
        assert_eq!(
            waiting(&st[1]),
            (
                "CreateContainerError".into(),
                "unresolvable CDI devices x/y=z".into()
            )
        );
        assert_eq!(st[1].container_id, None);
        assert_eq!(st[1].user, None);
        assert_eq!(st[1].restart_count, 0);

        // Retried with a fresh plan once due; the runtime resolves again.
        let due = r.next_due().unwrap();
        assert_eq!(r.creations_due(due), vec!["b".to_string()]);
        r.replan(plan("b", Behaviour::RunForever));
        let ch = r.advance(due);
        assert_eq!(
            ch,
            vec![Change::Started {
                container: "b".into(),
                restart_count: 0
            }]
        );
        assert_eq!(r.phase(), "Running");
        assert!(r.unready().is_empty());
    }

    #[test]
    fn completed_init_containers_are_ready_and_initialize_the_pod() {
        let now = Instant::now();
        let mut r = rt(
            vec![plan("i", exit(0, 0))],
            vec![plan("m", Behaviour::RunForever)],
            RestartPolicy::Never,
        );
        r.start(now);
        let (init, main) = r.statuses();
        assert!(init[0].ready);
        assert!(main[0].ready);
        assert!(r.initialized());
        assert!(r.init_incomplete().is_empty());

        // A failed init container leaves the pod uninitialized.
        let mut r = rt(
            vec![plan("i", exit(0, 2))],
            vec![plan("m", Behaviour::RunForever)],
            RestartPolicy::Never,
        );
        r.start(now);
        assert_eq!(r.finished(), Some(false));
        assert!(!r.initialized());
        assert_eq!(r.init_incomplete(), vec!["i".to_string()]);
        let (init, main) = r.statuses();
        assert!(!init[0].ready);
        assert_eq!(waiting(&main[0]).0, "PodInitializing");
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
    }
}
