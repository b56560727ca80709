//! One container's life and the pod's containers' transitions: created (or
//! not, when the runtime cannot), running, exited, restarted by the
//! restart policy after the kubelet's back-off, and the pod's stage moving
//! from init containers to regular ones to its end.
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

use super::{Change, ContainerPlan, PodRuntime, RestartPolicy, Stage, Which, go_duration};
use crate::command::Behaviour;

#[derive(Debug, Clone)]
pub(super) struct Terminated {
    pub(super) exit_code: i32,
    pub(super) started: Timestamp,
    pub(super) finished: Timestamp,
    pub(super) id: String,
}

#[derive(Debug, Clone)]
pub(super) enum State {
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
pub(super) enum Due {
    Exit(i32),
    Restart,
    /// Another attempt to create a container the runtime could not create.
    Retry,
}

#[derive(Debug, Clone)]
pub(super) struct Ctr {
    pub(super) plan: ContainerPlan,
    pub(super) state: State,
    /// Container instances created so far; `restartCount` is one less.
    pub(super) instances: i32,
    /// Failed creations in a row, for the retry delay.
    pub(super) create_failures: u32,
    pub(super) last: Option<Terminated>,
    pub(super) due: Option<(Instant, Due)>,
}

impl Ctr {
    pub(super) fn new(plan: ContainerPlan, reason: &'static str) -> Self {
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

    pub(super) fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    pub(super) fn restart_count(&self) -> i32 {
        (self.instances - 1).max(0)
    }

    /// A regular init container that completed, or a sidecar that runs.
    pub(super) fn initialized(&self) -> bool {
        if self.plan.sidecar {
            self.running()
        } else {
            matches!(&self.state, State::Terminated(t) if t.exit_code == 0)
        }
    }

    /// Waiting for its first instance: the pod is still `Pending`.
    pub(super) fn never_ran(&self) -> bool {
        matches!(self.state, State::Waiting { .. }) && self.last.is_none()
    }
}

impl PodRuntime {
    pub(super) fn enter_init(&mut self, mut i: usize, now: Instant, changes: &mut Vec<Change>) {
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

    pub(super) fn ctr(&mut self, w: &Which) -> &mut Ctr {
        match *w {
            Which::Init(i) => &mut self.init[i],
            Which::Main(i) => &mut self.main[i],
        }
    }

    /// `restart_delay` doubled `n` times, at most `restart_delay_max`.
    pub(super) fn delay(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.min(16));
        self.restart_delay
            .saturating_mul(factor)
            .min(self.restart_delay_max)
    }

    /// Creates and starts a new instance of the container, or records that
    /// the runtime could not create it.
    pub(super) fn start_ctr(&mut self, w: Which, now: Instant, changes: &mut Vec<Change>) {
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
    pub(super) fn exit_ctr(
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

    pub(super) fn on_init_due(
        &mut self,
        i: usize,
        due: Due,
        now: Instant,
        changes: &mut Vec<Change>,
    ) {
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

    pub(super) fn on_main_due(
        &mut self,
        i: usize,
        due: Due,
        now: Instant,
        changes: &mut Vec<Change>,
    ) {
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

    pub(super) fn check_done(&mut self, changes: &mut Vec<Change>) {
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
    pub(super) fn finish(&mut self, succeeded: bool, changes: &mut Vec<Change>) {
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
}
