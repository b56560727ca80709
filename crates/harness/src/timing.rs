//! Timed phases of a scenario's setup and teardown: the harness records
//! them, the reports add them up.
use std::time::Duration;

/// Whose time a phase of a scenario's setup or teardown is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cost {
    /// The harness's own work (namespace, RBAC, plugins, deletions): the
    /// fixed cost every scenario pays.
    Harness,
    /// A wait upstream's test makes as well (pods gone, claims unprepared,
    /// slices wiped), set by the cluster's pace rather than ours.
    Wait,
    /// Waiting for other scenarios to let go of what this one needs (the
    /// nodes it owns, the cluster a `@serial` scenario has to itself): the
    /// run's scheduling, neither the harness's cost nor the scenario's own
    /// time.
    Queue,
}

/// A timed phase of a scenario's setup or teardown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Phase {
    pub name: &'static str,
    pub cost: Cost,
}

impl Phase {
    pub const fn harness(name: &'static str) -> Self {
        Phase {
            name,
            cost: Cost::Harness,
        }
    }

    pub const fn wait(name: &'static str) -> Self {
        Phase {
            name,
            cost: Cost::Wait,
        }
    }

    pub const fn queue(name: &'static str) -> Self {
        Phase {
            name,
            cost: Cost::Queue,
        }
    }
}

/// The run's first phase; with the longest scenario, the floor of its wall
/// time.
pub const CLUSTER_START: Phase = Phase::harness("start the cluster");

/// Phases and their times, in the order they ran.
pub type Timings = Vec<(Phase, Duration)>;

/// Times consecutive phases: each lap is the time since the previous one.
#[derive(Debug)]
pub struct Laps(std::time::Instant);

impl Laps {
    pub fn start() -> Self {
        Laps(std::time::Instant::now())
    }

    pub fn lap(&mut self, into: &mut Timings, phase: Phase) {
        into.push((phase, self.0.elapsed()));
        self.0 = std::time::Instant::now();
    }
}
