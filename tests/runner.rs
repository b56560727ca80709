//! The runner binary end to end on the local cluster: full runs (reports,
//! artifacts, skips, shards, interrupts, nothing left behind), a dying
//! control plane, and the first run's build. Without a cluster: tests/cli.rs.
//!
//! One test binary (kube and tonic linked once), its tests in modules by
//! what they check, beside this file in tests/runner/.

#[path = "runner/builds.rs"]
mod builds;
#[path = "runner/endings.rs"]
mod endings;
#[path = "runner/reports.rs"]
mod reports;
#[path = "runner/selection.rs"]
mod selection;
#[path = "runner/terminal.rs"]
mod terminal;
