//! How a run ends: its scenarios finish, or `--deadline`, a signal or a
//! dead cluster component stops them, and then everything after them (the
//! last teardowns, the namespaces' removal, the leak check) is bounded by
//! one deadline, `--teardown-timeout`. Kept in one place so that every wait
//! of the ending answers to the same deadline and the same signals.
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::steps;

use super::chaos;
use super::cli::RunArgs;

/// SIGINT and SIGTERM, made once: a stream made per wait would miss a
/// signal that arrives while the previous one is being handled.
pub(super) struct Signals {
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn install() -> anyhow::Result<Signals> {
        Ok(Signals {
            sigint: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            sigterm: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    /// The next signal; false when no more can come.
    pub(super) async fn next(&mut self) -> bool {
        tokio::select! {
            r = self.sigint.recv() => r.is_some(),
            r = self.sigterm.recv() => r.is_some(),
        }
    }
}

/// How long running scenarios get to tear down after a component the
/// cluster needs has died (within the run's teardown deadline).
const DEAD_CLUSTER_TEARDOWN: Duration = Duration::from_secs(60);

/// `--teardown-timeout`'s default, for runs that fail before their scenarios.
pub(super) const DEFAULT_TEARDOWN_TIMEOUT: Duration = Duration::from_secs(300);

/// The deadline of the run's ending (`--teardown-timeout`): it starts when
/// the scenarios are done or told to stop, and bounds everything after.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ending {
    by: tokio::time::Instant,
    limit: Duration,
}

/// The run's ending went past its deadline.
#[derive(Debug)]
pub(super) struct Overrun(Duration);

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the run's teardown did not finish within {} (--teardown-timeout)",
            humantime::format_duration(self.0)
        )
    }
}

impl Ending {
    pub(super) fn start(limit: Duration) -> Self {
        Ending {
            by: tokio::time::Instant::now() + limit,
            limit,
        }
    }

    pub(super) async fn within<F: std::future::Future>(&self, f: F) -> Result<F::Output, Overrun> {
        tokio::time::timeout_at(self.by, f)
            .await
            .map_err(|_| Overrun(self.limit))
    }

    /// What is left of the deadline, at most `cap`.
    pub(super) fn left(&self, cap: Duration) -> Duration {
        self.by
            .saturating_duration_since(tokio::time::Instant::now())
            .min(cap)
    }
}

/// Why the scenarios ended before all of them had run.
pub(super) enum Stop {
    /// `--deadline` passed.
    Deadline,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// A component the cluster needs died; its first line.
    Died(String),
}

/// How long after the last scenario a local component's exit may take to
/// be seen (its process reaped and the news passed on): milliseconds.
const DEATH_SEEN_WITHIN: Duration = Duration::from_millis(300);

/// Runs the scenarios until they are done or something stops them; a stop
/// starts no new scenario and gives the running ones a bounded teardown.
/// Returns why they stopped early, if they did, and the ending's deadline,
/// which starts here.
pub(super) async fn scenarios(
    run: impl std::future::Future<Output = ()>,
    args: &RunArgs,
    cluster: &Arc<Cluster>,
    interrupt: &CancellationToken,
    (restarts, leases): (
        &[chaos::Planned],
        &Arc<crate::harness::node_lease::NodeLeases>,
    ),
) -> (Option<Stop>, Ending) {
    let mut run = std::pin::pin!(run);
    let mut finished = false;
    let stop = tokio::select! {
        _ = &mut run => {
            finished = true;
            None
        }
        _ = tokio::time::sleep(args.deadline) => Some(Stop::Deadline),
        // The signal handler has said so already.
        _ = interrupt.cancelled() => Some(Stop::Interrupted),
        what = cluster.first_death() => Some(Stop::Died(what)),
        what = cluster.api_outage() => Some(Stop::Died(what)),
        // Pending once done: restarts never end a run.
        _ = chaos::run(restarts, cluster, leases) => None,
    };
    // A component killed mid-step fails the step at once (its connections
    // break), and the last scenario may end before the component's exit is
    // seen: a run that ended so is still one a dead component stopped.
    let stop = match stop {
        None if cluster.is_local() => {
            tokio::time::timeout(DEATH_SEEN_WITHIN, cluster.first_death())
                .await
                .ok()
                .map(Stop::Died)
        }
        other => other,
    };
    let ending = Ending::start(args.teardown_timeout);
    let Some(stop) = stop else {
        return (None, ending);
    };
    // A dead component makes every cleanup call wait: its teardown gets
    // less time than the ending allows.
    let cap = match &stop {
        Stop::Deadline => {
            crate::report::note!(
                "dra-e2e: --deadline {} passed; tearing down running scenarios",
                humantime::format_duration(args.deadline)
            );
            args.teardown_timeout
        }
        Stop::Interrupted => args.teardown_timeout,
        Stop::Died(what) => {
            crate::report::note!(
                "\ndra-e2e: {what}\ndra-e2e: the cluster cannot work without it; stopping the run"
            );
            DEAD_CLUSTER_TEARDOWN
        }
    };
    interrupt.cancel();
    let bound = ending.left(cap);
    if !finished && tokio::time::timeout(bound, run).await.is_err() {
        crate::report::note!(
            "dra-e2e: the running scenarios' teardown did not finish within {}; the cluster's processes and files go with it",
            humantime::format_duration(bound)
        );
    }
    let stop = match stop {
        Stop::Died(what) => Stop::Died(what.lines().next().unwrap_or_default().to_owned()),
        other => other,
    };
    (Some(stop), ending)
}

/// Lets the last scenarios' teardowns finish; only the run's ending
/// deadline or a second Ctrl-C (which exits at once) cut them short.
pub(super) async fn teardowns(ctx: &steps::Context) {
    let running = &ctx.teardowns;
    if !running.is_empty() {
        crate::report::note!(
            "dra-e2e: waiting for the teardown of {} ended scenario(s)",
            running.len()
        );
    }
    running.finish().await;
}

/// Waits for the checks still going on for scenarios that ended (their
/// drivers' slices gone); a signal cuts the wait short.
pub(super) async fn checks_after_scenarios(
    ctx: &steps::Context,
    mut signal_count: tokio::sync::watch::Receiver<u32>,
) {
    let checks = &ctx.after_scenarios;
    checks.close();
    if checks.is_empty() {
        return;
    }
    signal_count.mark_unchanged();
    // The kubelets' 30 s delay before a wipe is worth waiting out only
    // beside other scenarios: the waits are cut short (see
    // `harness::driver::Unfinished`).
    crate::report::note!(
        "dra-e2e: nothing left to run beside the kubelets' wipe of {} driver(s) of ended scenarios: deleting their slices and waiting until they are gone (Ctrl-C stops waiting)",
        checks.len()
    );
    tokio::select! {
        _ = checks.wait() => {}
        _ = signal_count.changed() => crate::report::note!("dra-e2e: not waiting for the drivers' slices to be wiped"),
    }
}

/// Removes the run's node host pods once every driver stopped; what fails
/// is said (the leak check then names what is left).
pub(super) async fn remove_node_hosts(cluster: &Cluster) {
    if let Err(e) = cluster.remove_node_hosts().await {
        println!("{e:#}");
    }
}

/// After the scenarios: waits for their namespaces to go; a signal cuts the
/// wait short.
pub(super) async fn wait_namespaces(
    cluster: &Cluster,
    run_id: &str,
    mut signal_count: tokio::sync::watch::Receiver<u32>,
) {
    // A signal from here on cuts the wait short.
    signal_count.mark_unchanged();
    crate::report::note!("dra-e2e: waiting for the run's namespaces to go (Ctrl-C stops waiting)");
    tokio::select! {
        r = cluster.wait_namespaces_gone(run_id) => {
            if let Err(e) = r {
                crate::report::note!("dra-e2e: {e}");
            }
        }
        _ = signal_count.changed() => crate::report::note!("dra-e2e: not waiting for the namespaces to go"),
    }
}

/// Checks nothing of the run is left. True when something was.
pub(super) async fn leak_check(cluster: &Cluster, args: &RunArgs, ctx: &steps::Context) -> bool {
    // With --keep-on-failure, kept scenarios are expected to remain.
    if args.keep_on_failure {
        return false;
    }
    match cluster.leftovers(&ctx.outcomes.namespaces()).await {
        Ok(left) if left.is_empty() => {
            println!("leak check: nothing left behind");
            false
        }
        Ok(left) => {
            println!("leak check: left behind: {}", left.join(", "));
            true
        }
        Err(e) => {
            println!("leak check failed: {e:#}");
            true
        }
    }
}
