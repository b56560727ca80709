//! The simulated containers of one pod after its resources are prepared:
//! init containers in order, then the regular ones, exits and restarts by the
//! pod's restart policy, and the container statuses and phase that follow.
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus,
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
}

/// Something that happened to a container, for logs and the journal.
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
}

#[derive(Debug, Clone)]
struct Terminated {
    exit_code: i32,
    started: Timestamp,
    finished: Timestamp,
}

#[derive(Debug, Clone)]
enum State {
    Waiting { reason: &'static str },
    Running { started: Timestamp },
    Terminated(Terminated),
}

#[derive(Debug, Clone, Copy)]
enum Due {
    Exit(i32),
    Restart,
}

#[derive(Debug, Clone)]
struct Ctr {
    plan: ContainerPlan,
    state: State,
    restart_count: i32,
    last: Option<Terminated>,
    due: Option<(Instant, Due)>,
}

impl Ctr {
    fn new(plan: ContainerPlan) -> Self {
        Self {
            plan,
            state: State::Waiting {
                reason: "PodInitializing",
            },
            restart_count: 0,
            last: None,
            due: None,
        }
    }

    fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
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

impl PodRuntime {
    /// `restart_delay` is the first crash-loop delay; it doubles per restart
    /// up to `restart_delay_max`.
    pub fn new(
        pod_uid: &str,
        init: Vec<ContainerPlan>,
        main: Vec<ContainerPlan>,
        policy: RestartPolicy,
        restart_delay: Duration,
        restart_delay_max: Duration,
    ) -> Self {
        Self {
            pod_uid: pod_uid.to_owned(),
            init: init.into_iter().map(Ctr::new).collect(),
            main: main.into_iter().map(Ctr::new).collect(),
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

    /// When the next exit or restart happens, if ever.
    pub fn next_due(&self) -> Option<Instant> {
        self.init
            .iter()
            .chain(&self.main)
            .filter_map(|c| c.due.map(|(t, _)| t))
            .min()
    }

    /// Processes every exit and restart due by `now`, earliest first.
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

    /// `Some(true)` once the pod succeeded, `Some(false)` once it failed.
    pub fn finished(&self) -> Option<bool> {
        match self.stage {
            Stage::Done { succeeded } => Some(succeeded),
            _ => None,
        }
    }

    pub fn phase(&self) -> &'static str {
        match self.stage {
            Stage::Init(_) => "Pending",
            Stage::Main => "Running",
            Stage::Done { succeeded: true } => "Succeeded",
            Stage::Done { succeeded: false } => "Failed",
        }
    }

    pub fn initialized(&self) -> bool {
        !matches!(self.stage, Stage::Init(_))
    }

    /// All regular containers run.
    pub fn ready(&self) -> bool {
        self.stage == Stage::Main && self.main.iter().all(Ctr::running)
    }

    /// Env of every container that has started at least once.
    pub fn envs(&self) -> Vec<(String, Vec<(String, String)>)> {
        self.init
            .iter()
            .chain(&self.main)
            .filter(|c| !matches!(c.state, State::Waiting { .. }) || c.last.is_some())
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

    fn start_ctr(&mut self, w: Which, now: Instant, changes: &mut Vec<Change>) {
        let c = self.ctr(&w);
        c.state = State::Running {
            started: Timestamp::now(),
        };
        c.due = match c.plan.behaviour {
            Behaviour::RunForever => None,
            Behaviour::Exit { after, code } => Some((now + after, Due::Exit(code))),
        };
        changes.push(Change::Started {
            container: c.plan.name.clone(),
            restart_count: c.restart_count,
        });
    }

    /// Marks the container exited; returns whether it restarts later.
    fn exit_ctr(
        &mut self,
        w: Which,
        code: i32,
        restart: bool,
        now: Instant,
        changes: &mut Vec<Change>,
    ) {
        let (delay, max) = (self.restart_delay, self.restart_delay_max);
        let c = self.ctr(&w);
        let started = match c.state {
            State::Running { started } => started,
            _ => Timestamp::now(),
        };
        let t = Terminated {
            exit_code: code,
            started,
            finished: Timestamp::now(),
        };
        changes.push(Change::Exited {
            container: c.plan.name.clone(),
            exit_code: code,
        });
        if restart {
            let factor = 2u32.saturating_pow(c.restart_count.clamp(0, 16) as u32);
            let wait = delay.saturating_mul(factor).min(max);
            c.last = Some(t);
            c.state = State::Waiting {
                reason: "CrashLoopBackOff",
            };
            c.due = Some((now + wait, Due::Restart));
        } else {
            c.state = State::Terminated(t);
            c.due = None;
        }
    }

    fn on_init_due(&mut self, i: usize, due: Due, now: Instant, changes: &mut Vec<Change>) {
        match due {
            Due::Restart => {
                self.init[i].restart_count += 1;
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
            Due::Restart => {
                self.main[i].restart_count += 1;
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
                State::Terminated(t) => succeeded &= t.exit_code == 0,
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
                State::Running { started } => {
                    c.state = State::Terminated(Terminated {
                        exit_code: 0,
                        started: *started,
                        finished: Timestamp::now(),
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
        let conv = |c: &Ctr| self.status_of(c);
        (
            self.init.iter().map(conv).collect(),
            self.main.iter().map(conv).collect(),
        )
    }

    fn container_id(&self, c: &Ctr) -> String {
        format!("sim://{}-{}-{}", self.pod_uid, c.plan.name, c.restart_count)
    }

    fn status_of(&self, c: &Ctr) -> ContainerStatus {
        let id = self.container_id(c);
        let terminated = |t: &Terminated| ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(id.clone()),
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
        let state = match &c.state {
            State::Waiting { reason } => ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some((*reason).into()),
                    message: None,
                }),
                ..Default::default()
            },
            State::Running { started } => ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(*started)),
                }),
                ..Default::default()
            },
            State::Terminated(t) => terminated(t),
        };
        let running = c.running();
        ContainerStatus {
            name: c.plan.name.clone(),
            image: c.plan.image.clone(),
            image_id: format!("sim-image://{}", c.plan.image),
            container_id: (running || matches!(c.state, State::Terminated(_)))
                .then_some(id.clone()),
            ready: running,
            started: Some(running),
            restart_count: c.restart_count,
            state: Some(state),
            last_state: c.last.as_ref().map(terminated),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(name: &str, b: Behaviour) -> ContainerPlan {
        ContainerPlan {
            name: name.into(),
            image: "img".into(),
            behaviour: b,
            env: vec![],
            sidecar: false,
        }
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
            init,
            main,
            p,
            Duration::from_millis(10),
            Duration::from_millis(40),
        )
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
        assert!(r.ready());
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
        let t = st[1].state.as_ref().unwrap().terminated.as_ref().unwrap();
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
        assert_eq!(
            st[0]
                .last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
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
}
