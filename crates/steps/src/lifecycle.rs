//! The scenario lifecycle: a namespace before, and after — pass or fail —
//! artifacts of a failure and teardown in upstream's order.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use cucumber::event::ScenarioFinished;
use cucumber::gherkin;

use super::{Context, World};
use crate::cluster::RUN_LABEL;
use crate::harness::driver::{Ended, Unfinished};
use crate::harness::node_lease::Faults;
use crate::harness::scenario::{artifacts, namespace};
use crate::report::{
    self, Laps, Outcome, Phase, Record, SKIP_PREFIX, ScenarioId, is_marked_skipped,
};

/// Where a failed scenario's artifacts go.
pub fn artifacts_dir(ctx: &Context, scenario: &gherkin::Scenario, namespace: &str) -> PathBuf {
    ctx.artifacts
        .join(format!("{}-{namespace}", report::slug(&scenario.name)))
}

/// Whether `tag` is on the scenario, its rule or its feature.
fn tagged(
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
    tag: &str,
) -> bool {
    feature
        .tags
        .iter()
        .chain(rule.iter().flat_map(|r| &r.tags))
        .chain(&scenario.tags)
        .any(|t| t == tag)
}

/// Whether the scenario runs alone (`@serial` on it, its rule or its
/// feature); a scenario the runner skips never does.
pub fn is_serial(
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
) -> bool {
    !is_marked_skipped(scenario) && tagged(feature, rule, scenario, "serial")
}

/// Whether the scenario has its nodes to itself (`@OwnNodes`): no other
/// scenario uses them while it runs, and other pods are kept off them.
pub fn owns_nodes(
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
) -> bool {
    tagged(feature, rule, scenario, "OwnNodes")
}

/// Whether the runner's faults (`--restart-kubelet`) may hit the
/// scenario's nodes: not when it, its rule or its feature is tagged
/// `@FaultExempt:<reason>` (docs/tags.md).
pub fn faults(
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
) -> Faults {
    let exempt = feature
        .tags
        .iter()
        .chain(rule.iter().flat_map(|r| &r.tags))
        .chain(&scenario.tags)
        .any(|t| t.starts_with(FAULT_EXEMPT));
    if exempt {
        Faults::Exempt
    } else {
        Faults::RideOut
    }
}

/// The tag that exempts a scenario from the runner's faults, before its
/// reason.
pub const FAULT_EXEMPT: &str = "FaultExempt:";

/// Hands the scenario's World the run's context, then (unless the runner
/// skips the scenario or the run was interrupted) creates its namespace.
pub async fn before(
    ctx: &Arc<Context>,
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
    w: &mut World,
) {
    w.started = Some(Instant::now());
    w.run = Some(ctx.clone());
    w.owns_nodes = owns_nodes(feature, rule, scenario);
    w.faults = faults(feature, rule, scenario);
    if is_marked_skipped(scenario) {
        return;
    }
    if ctx.interrupt.is_cancelled() {
        return;
    }
    if w.owns_nodes {
        // In the order scenarios start: the longest first.
        w.own_ticket = Some(ctx.node_leases.ticket());
    }
    let mut laps = Laps::start();
    if !w.owns_nodes {
        w.take_slot().await;
        laps.lap(&mut w.setup_timings, Phase::queue("wait for a free slot"));
    }
    if is_serial(feature, rule, scenario) && !ctx.teardowns.is_empty() {
        tracing::info!(
            scenario = %scenario.name,
            teardowns = ctx.teardowns.len(),
            "a serial scenario waits for earlier scenarios' teardowns"
        );
        ctx.teardowns.idle().await;
        laps.lap(
            &mut w.setup_timings,
            Phase::queue("wait for earlier scenarios' teardowns"),
        );
    }
    let client = ctx.cluster.client();
    let ns = namespace::object(RUN_LABEL, &ctx.run_id);
    match namespace::create(&client, &ns).await {
        Ok(name) => {
            w.namespace = name;
            ctx.outcomes.namespace_created(&w.namespace);
            w.scenario.namespace_created(&w.namespace);
        }
        Err(e) => {
            w.setup_error = Some(e.to_string());
            return;
        }
    }
    laps.lap(&mut w.setup_timings, Phase::harness("create namespace"));
    if let Err(e) = namespace::default_service_account(&client, &w.namespace).await {
        w.setup_error = Some(e.to_string());
    }
    laps.lap(
        &mut w.setup_timings,
        Phase::harness("create the default service account"),
    );
}

pub async fn after(
    ctx: &Arc<Context>,
    feature: &gherkin::Feature,
    scenario: &gherkin::Scenario,
    finished: &ScenarioFinished,
    world: Option<&mut World>,
) {
    // Only the runner's own skip marker skips a scenario; a step that
    // matches no definition is a mistake in the scenario and fails it.
    let skip_reason = scenario
        .steps
        .first()
        .and_then(|s| s.value.strip_prefix(SKIP_PREFIX))
        .map(str::to_owned);
    let outcome = match finished {
        ScenarioFinished::StepPassed => Outcome::Passed,
        ScenarioFinished::StepSkipped if skip_reason.is_some() => Outcome::Skipped,
        ScenarioFinished::StepSkipped
        | ScenarioFinished::StepFailed(..)
        | ScenarioFinished::BeforeHookFailed(..) => Outcome::Failed,
    };
    let skip_reason = skip_reason.filter(|_| outcome == Outcome::Skipped);
    let mut record = Record {
        skip_reason,
        ..Record::new(outcome)
    };
    let id = ScenarioId::of(feature, scenario);
    let mut teardown = None;
    if let Some(w) = world {
        if !w.namespace.is_empty() {
            if outcome == Outcome::Failed {
                let dir = artifacts_dir(ctx, scenario, &w.namespace);
                record.artifacts = Some(dir.clone());
                if let Err(e) = write_artifacts(ctx, w, &dir).await {
                    tracing::error!(
                        "writing artifacts of {:?} to {}: {e:#}",
                        scenario.name,
                        dir.display()
                    );
                }
            }
            if outcome == Outcome::Failed && ctx.keep_on_failure {
                let drivers: Vec<&str> =
                    w.scenario.drivers().map(|(_, d)| d.name.as_str()).collect();
                tracing::warn!(
                    "kept namespace {} and driver(s) {} of failed scenario {:?} (--keep-on-failure)",
                    w.namespace,
                    drivers.join(", "),
                    scenario.name
                );
                // Nodes of its own stay its own, tainted, for the rest of
                // the run, as its objects stay; nodes it shared are free.
                if w.scenario.owns_nodes()
                    && let Some(lease) = w.scenario.lease().cloned()
                {
                    tracing::warn!(
                        "kept node(s) {} out of the run's use",
                        lease.nodes().join(", ")
                    );
                    std::mem::forget(lease);
                }
            } else {
                teardown = Some(Teardown {
                    client: w.client(),
                    stack: std::mem::take(&mut w.scenario),
                    namespace: w.namespace.clone(),
                    title: scenario.name.clone(),
                });
            }
        }
        record.setup = std::mem::take(&mut w.setup_timings);
        record.teardown = std::mem::take(&mut w.teardown_timings);
        record.duration = w.started.map(|s| s.elapsed()).unwrap_or_default();
    }
    ctx.outcomes.record(id.clone(), record);
    if let Some(t) = teardown {
        ctx.teardowns.spawn(t.run(ctx.clone(), id));
    }
}

/// Teardowns of ended scenarios, running beside later scenarios. A
/// `@serial` scenario waits for them: it must find the cluster as if it ran
/// alone, without an earlier scenario's pods still terminating.
#[derive(Debug)]
pub struct Teardowns {
    tracker: tokio_util::task::TaskTracker,
    running: tokio::sync::watch::Sender<usize>,
}

impl Default for Teardowns {
    fn default() -> Self {
        Self {
            tracker: tokio_util::task::TaskTracker::new(),
            running: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Teardowns {
    fn spawn(&self, teardown: impl std::future::Future<Output = ()> + Send + 'static) {
        // Counted down when the task ends, even by a panic.
        struct Running(tokio::sync::watch::Sender<usize>);
        impl Drop for Running {
            fn drop(&mut self) {
                self.0.send_modify(|n| *n -= 1);
            }
        }
        self.running.send_modify(|n| *n += 1);
        let running = Running(self.running.clone());
        self.tracker.spawn(async move {
            let _running = running;
            teardown.await;
        });
    }

    /// How many are still running.
    pub fn len(&self) -> usize {
        *self.running.borrow()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Until none is running; more may start afterwards.
    pub async fn idle(&self) {
        let mut running = self.running.subscribe();
        // The sender lives in `self`, so the channel cannot close here.
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Until every one has ended, none starting any more.
    pub async fn finish(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// A scenario's cleanup stack, taken from its world when its steps ended.
/// Teardown runs in upstream's order but beside the scenarios that follow:
/// the scenario's slot is free for the next one while its pods terminate
/// and its drivers' waits run. What teardown finds wrong still counts: a
/// failed cleanup fails the run, a failed wait the scenario.
struct Teardown {
    client: anyhow::Result<kube::Client>,
    stack: super::scenario::Scenario,
    namespace: String,
    title: String,
}

impl Teardown {
    async fn run(mut self, ctx: Arc<Context>, id: ScenarioId) {
        let mut timings = Vec::new();
        let torn_down = match &self.client {
            Ok(client) => self
                .stack
                .tear_down(client, &ctx.cluster, &ctx.under_test, &mut timings)
                .await
                .map_err(anyhow::Error::from),
            Err(e) => Err(anyhow::anyhow!("{e:#}")),
        };
        if let Err(e) = torn_down {
            tracing::error!(
                "teardown of scenario {:?} (namespace {}) failed: {e:#}",
                self.title,
                self.namespace
            );
            ctx.outcomes.teardown_failed();
        }
        ctx.outcomes.torn_down(&id, timings);
        // The scenario's nodes are free once this ends: the waits after it
        // hold none (see `node_lease`).
        for wait in self.stack.take_unfinished() {
            finish_later(ctx.clone(), id.clone(), wait);
        }
    }
}

/// Leaves the waits that end a driver's teardown (its proxy pods gone, its
/// slices wiped: seconds on a simulated node, 30 s on a real kubelet) to run
/// beside the scenarios that follow; if one fails, the scenario fails after
/// all. Those still going when nothing is left to run are cut short.
fn finish_later(ctx: Arc<Context>, id: ScenarioId, wait: Unfinished) {
    let checks = ctx.after_scenarios.clone();
    checks.spawn(async move {
        let (mut phase, started) = (wait.phase(), Instant::now());
        let ended = wait
            .wait_or_cut_short(ctx.nothing_left_to_run.cancelled())
            .await;
        if let Ok(Ended::CutShort) = ended {
            phase = Unfinished::SLICES_DELETED;
        }
        let failure = ended.err().map(|e| {
            let message = format!("after the scenario ended: {e}");
            tracing::error!(scenario = %id, "{message}");
            message
        });
        ctx.outcomes
            .finished_late(&id, phase, started.elapsed(), failure);
    });
}

/// Events, pods, claims, slices, plugin calls and simulated kubelet logs.
async fn write_artifacts(ctx: &Context, w: &World, dir: &std::path::Path) -> anyhow::Result<()> {
    let state = artifacts::namespace_state(&w.client()?, &w.namespace).await?;
    report::write_artifact(dir, "events.txt", &state.events)?;
    report::write_artifact(dir, "pods.yaml", &state.pods)?;
    report::write_artifact(dir, "claims.yaml", &state.claims)?;
    let mut slices = Vec::new();
    for (_, d) in w.scenario.drivers() {
        slices.extend(d.slices().await.context("listing slices")?);
        report::write_artifact(dir, &format!("calls-{}.txt", d.name), &d.call_log_text())?;
    }
    report::write_artifact(dir, "slices.yaml", &artifacts::yaml_of(&slices))?;
    for node in &w.nodes {
        if let Some(log) = ctx.cluster.node_log(node) {
            report::write_artifact(dir, &format!("kubelet-{node}.log"), &log)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Teardowns;
    use futures::FutureExt as _;

    #[tokio::test]
    async fn a_serial_scenario_waits_until_every_running_teardown_ended() {
        let teardowns = Teardowns::default();
        let (end_first, first) = tokio::sync::oneshot::channel::<()>();
        let (end_second, second) = tokio::sync::oneshot::channel::<()>();
        teardowns.spawn(async move {
            let _ = first.await;
        });
        teardowns.spawn(async move {
            let _ = second.await;
        });
        assert_eq!(teardowns.len(), 2);
        let mut idle = Box::pin(teardowns.idle());
        assert!((&mut idle).now_or_never().is_none());
        let _ = end_first.send(());
        let mut running = teardowns.running.subscribe();
        let _ = running.wait_for(|n| *n == 1).await;
        assert!(
            (&mut idle).now_or_never().is_none(),
            "idle while one teardown still runs"
        );
        let _ = end_second.send(());
        idle.await;
        assert!(teardowns.is_empty());
        // Counted down by a panicking teardown too.
        teardowns.spawn(async { panic!("a teardown that panics") });
        teardowns.idle().await;
        teardowns.finish().await;
    }
}
