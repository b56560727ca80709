//! The simulated containers of one pod after its resources are prepared:
//! init containers in order, then the regular ones, exits and restarts by the
//! pod's restart policy, containers the runtime cannot create, and the
//! container statuses and phase that follow, as a kubelet reports them.
mod lifecycle;
mod status;
#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::api::core::v1::{LinuxContainerUser, ResourceClaim, VolumeMountStatus};
use tokio::time::Instant;

use super::command::Behaviour;
use lifecycle::{Ctr, Due};

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
}
