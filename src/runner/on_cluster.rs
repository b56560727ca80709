//! The run on a cluster that is up: the driver under test installed, the
//! scenarios run by cucumber with the runner's hooks, then the last
//! teardowns waited for, the reports written and the closing lines said.
//! Its result is the exit code and the deadline of the run's ending, which
//! [`super::run`] then stops the cluster within.
use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use cucumber::{World as _, WriterExt as _, writer};
use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::harness::under_test::UnderTest;
use crate::report;
use crate::steps::{self, World};

use super::Opts;
use super::cli::RunArgs;
use super::ending::{
    Ending, Stop, checks_after_scenarios, leak_check, remove_node_hosts, scenarios, teardowns,
    wait_namespaces,
};
use super::features;
use super::reports::{Buffer, ScenarioOut, kubelet_line, run_properties, unchecked};
use super::selection::Selection;

/// What the run's scenarios ended with.
pub(super) struct Ended {
    pub(super) code: i32,
    pub(super) ending: Ending,
}

pub(super) async fn run_on(
    mut opts: Opts,
    args: RunArgs,
    mut selection: Selection,
    cluster: Arc<Cluster>,
    interrupt: CancellationToken,
    signal_count: tokio::sync::watch::Receiver<u32>,
    run_timings: &mut report::Timings,
) -> anyhow::Result<Ended> {
    let mut env = cluster.environment().await?;
    env.refused_gates = std::mem::take(&mut selection.refused_gates);
    env.unserved_apis = unserved_apis(&cluster, &selection.features).await?;
    crate::report::note!("dra-e2e: {}", cluster.describe());
    // Which Kubernetes passed or failed is part of what a run says, most of
    // all when the kubelet is older than the control plane.
    if let Ok(v) = cluster.client().apiserver_version().await {
        crate::report::note!(
            "dra-e2e: control plane {}, oldest kubelet {}",
            v.git_version,
            env.kubelet_version
                .map_or_else(|| "unknown".to_owned(), |(a, b)| format!("{a}.{b}"))
        );
    }
    let under_test = match selection.driver.take() {
        None => UnderTest::builtin(),
        Some(p) => {
            crate::report::note!(
                "dra-e2e: driver under test: {} ({}); waiting for it to publish devices on every node",
                p.driver_name,
                p.deployment.mode()
            );
            let started = Instant::now();
            let interpose = args.interpose.then_some(args.interposer_fault);
            let u = UnderTest::install(&cluster, p, interpose).await?;
            run_timings.push((
                report::Phase::harness("install the driver under test"),
                started.elapsed(),
            ));
            u
        }
    };
    let under_test = Arc::new(under_test);
    env.driver = Some(Arc::new(under_test.profile.clone()));
    env.interposed = under_test.is_builtin() || under_test.interposed.is_some();

    let run_id = format!("{:x}", rand::random::<u32>());
    // Handed to every scenario's World by the before hook.
    // Scenarios waiting for nodes of their own are started beside the
    // running ones without taking a slot (`steps::Context::slots`).
    let local_real = cluster.is_local() && args.node_kind == crate::cluster::NodeKind::Real;
    let slots = opts
        .runner
        .concurrency
        .unwrap_or_else(|| default_concurrency(local_real));
    opts.runner.concurrency = Some(slots + selection.own_nodes);
    let run_ctx = Arc::new(steps::Context {
        cluster: cluster.clone(),
        step_timeout: args.step_timeout,
        artifacts: args.artifacts.clone(),
        keep_on_failure: args.keep_on_failure,
        interrupt: interrupt.clone(),
        outcomes: Arc::default(),
        run_id: run_id.clone(),
        teardowns: steps::lifecycle::Teardowns::default(),
        after_scenarios: tokio_util::task::TaskTracker::new(),
        nothing_left_to_run: CancellationToken::new(),
        under_test: under_test.clone(),
        node_leases: Arc::default(),
        slots: Arc::new(tokio::sync::Semaphore::new(slots)),
        slice_controller_fault: args.slice_controller_fault,
    });
    let ctx: &steps::Context = &run_ctx;

    let mut properties = run_properties(&cluster, &env).await;
    let kubelet = env.kubelet;
    properties.extend(under_test.properties());
    let collector = report::collect::Collector::default();
    let json = Buffer::default();
    // A status line only where a person watches: both streams on a terminal.
    let watched = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    // Progress follows events as they happen, before the output's
    // normalisation holds back all but one scenario.
    let live = report::collect::Collector::default();
    let (progress, out) = if watched {
        let (p, out) =
            report::progress::Progress::start(live.clone(), ctx.outcomes.clone(), selection.count);
        (Some(p), ScenarioOut::Status(out))
    } else {
        (None, ScenarioOut::Plain(std::io::stdout()))
    };
    let cucumber = World::cucumber::<std::path::PathBuf>()
        .with_parser(SkipParser { env })
        .with_writer(
            writer::Basic::raw(out, writer::Coloring::Auto, 0)
                .summarized()
                .tee::<World, _>(collector.clone())
                .tee::<World, _>(writer::Json::for_tee(json.clone()))
                .normalized()
                .tee::<World, _>(live),
        )
        .fail_on_skipped_with(|_, _, sc| !report::is_marked_skipped(sc))
        .which_scenario({
            // The interposed driver under test serves every scenario at
            // once: one that counts or breaks its calls must run alone.
            let shared = under_test.interposed.is_some();
            move |f, r, s| run_alone(f, r, s, shared)
        })
        .max_concurrent_scenarios(slots + selection.own_nodes)
        .before({
            let run_ctx = run_ctx.clone();
            move |f, r, sc, w| {
                let run_ctx = run_ctx.clone();
                async move { steps::lifecycle::before(&run_ctx, f, r, sc, w).await }.boxed_local()
            }
        })
        .after({
            let run_ctx = run_ctx.clone();
            move |f, _, sc, ev, w| {
                let run_ctx = run_ctx.clone();
                async move { steps::lifecycle::after(&run_ctx, f, sc, ev, w).await }.boxed_local()
            }
        })
        .with_cli(opts);

    let started = Instant::now();
    let (stop, ending) = scenarios(
        cucumber.run(selection.features).map(drop),
        &args,
        &cluster,
        &interrupt,
        (&selection.restarts, &run_ctx.node_leases),
    )
    .await;
    run_timings.push((report::Phase::harness("scenarios"), started.elapsed()));
    if let Some(p) = progress {
        p.finish();
    }
    let died = match &stop {
        Some(Stop::Died(what)) => Some(what.clone()),
        _ => None,
    };
    // The last scenarios' drivers' slices and namespaces go at the same
    // time; reports wait for the first (they may fail a scenario), the leak
    // check for both.
    let mut laps = report::Laps::start();
    let mut overrun = None;
    if died.is_none() {
        // The node host pods may go once every driver stopped: at once for
        // the suite's own drivers, after its removal for a driver under
        // test (the interposer's agents run in them).
        let hosts_now = under_test.is_builtin();
        let waits = async {
            tokio::join!(
                async {
                    teardowns(ctx).await;
                    ctx.nothing_left_to_run.cancel();
                    tokio::join!(checks_after_scenarios(ctx, signal_count.clone()), async {
                        if hosts_now {
                            remove_node_hosts(&cluster).await;
                        }
                    })
                },
                wait_namespaces(&cluster, &run_id, signal_count.clone()),
            )
        };
        overrun = ending.within(waits).await.err();
    }
    laps.lap(
        run_timings,
        report::Phase::wait("wait for the last drivers' slices and the namespaces to go"),
    );
    if died.is_none() && !under_test.is_builtin() {
        let problems = under_test.uninstall(&cluster.client()).await;
        for p in &problems {
            println!("removing the driver under test: {p}");
        }
        laps.lap(
            run_timings,
            report::Phase::harness("remove the driver under test"),
        );
    }
    if died.is_none() && !under_test.is_builtin() {
        remove_node_hosts(&cluster).await;
        laps.lap(
            run_timings,
            report::Phase::harness("remove the node host pods"),
        );
    }

    let records = ctx.outcomes.snapshot();
    // A stopped run's times are partial: the next run would start its
    // unfinished scenarios as if they were short.
    if stop.is_none()
        && let Err(e) = selection.history.save(&records)
    {
        tracing::warn!("saving the scenarios' durations for the next run's order: {e}");
    }
    let conformance = report::conformance::Summary::of(&records, &selection.pack).map(|mut c| {
        c.unchecked = unchecked(&under_test);
        c
    });
    if let Some(c) = &conformance {
        properties.push(("driver.conformance".to_owned(), c.counts()));
    }
    if let Some(path) = &args.junit {
        let xml = report::junit::render(
            &collector.snapshot(),
            &selection.shared,
            &records,
            &properties,
        )
        .context("rendering the JUnit report")?;
        std::fs::write(path, xml)
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    if let Some(path) = &args.html {
        let driver_name = under_test.display_name();
        let page = report::html::render(
            &collector.snapshot(),
            &selection.shared,
            &records,
            &properties,
            conformance.as_ref().map(|c| (driver_name.as_str(), c)),
            path,
        );
        std::fs::write(path, page)
            .with_context(|| format!("writing the HTML report {}", path.display()))?;
    }
    if let Some(path) = &args.cucumber_json {
        std::fs::write(path, json.take())
            .with_context(|| format!("writing the Cucumber JSON report {}", path.display()))?;
    }
    let leaked = match (&died, overrun) {
        // With a dead control plane nothing can be listed; its objects go
        // with it.
        (Some(what), _) => {
            println!("leak check skipped: {what}");
            false
        }
        (None, Some(overrun)) => {
            println!("leak check skipped: {overrun}");
            true
        }
        (None, None) => match ending.within(leak_check(&cluster, &args, ctx)).await {
            Ok(leaked) => leaked,
            Err(overrun) => {
                println!("leak check skipped: {overrun}");
                true
            }
        },
    };
    laps.lap(run_timings, report::Phase::harness("leak check"));

    for line in report::failure_summary(&collector.snapshot(), &records) {
        println!("{line}");
    }
    for line in report::skip_summary(&records) {
        println!("{line}");
    }
    if let Some(c) = &conformance {
        for line in c.lines(&under_test.display_name()) {
            println!("{line}");
        }
    }
    if args.timings {
        print!("{}", report::timings(&records, run_timings));
    }
    let failed = records
        .values()
        .filter(|r| r.outcome == report::Outcome::Failed)
        .count();
    let teardown_failures = ctx.outcomes.teardown_failures();
    if teardown_failures > 0 {
        println!("{teardown_failures} scenario teardown(s) failed; see the messages above");
    }
    println!("{}", report::summary_line(&records));
    println!("{}", kubelet_line(kubelet));
    if let Some(what) = &died {
        println!("the run stopped early: {what}");
    }
    let ran = records
        .values()
        .filter(|r| r.outcome != report::Outcome::Skipped)
        .count();
    let empty = ran == 0 && stop.is_none();
    if empty {
        println!(
            "no scenario ran: all {} selected scenarios were skipped{}",
            records.len(),
            if args.allow_empty {
                " (--allow-empty)"
            } else {
                "; a run that tests nothing fails (pass --allow-empty to accept it)"
            }
        );
    }
    let passed = failed == 0
        && teardown_failures == 0
        && !leaked
        && stop.is_none()
        && (!empty || args.allow_empty);
    Ok(Ended {
        code: if passed { 0 } else { 1 },
        ending,
    })
}

/// Hands cucumber the features the runner already parsed, marking the
/// scenarios the cluster cannot run.
struct SkipParser {
    env: crate::cluster::Environment,
}

impl cucumber::Parser<Vec<cucumber::gherkin::Feature>> for SkipParser {
    type Cli = cucumber::parser::basic::Cli;
    type Output =
        futures::stream::BoxStream<'static, cucumber::parser::Result<cucumber::gherkin::Feature>>;

    fn parse(self, input: Vec<cucumber::gherkin::Feature>, _: Self::Cli) -> Self::Output {
        use futures::StreamExt as _;
        let Self { env } = self;
        futures::stream::iter(input)
            .map(move |f| Ok(features::mark_skipped(&env, f)))
            .boxed()
    }
}

/// The APIs the features' `@API:` tags name that the cluster does not
/// serve; each is said once, and its scenarios are skipped saying so.
async fn unserved_apis(
    cluster: &Cluster,
    features: &[cucumber::gherkin::Feature],
) -> anyhow::Result<Vec<String>> {
    let scenarios = features::scenarios(features);
    let tags: std::collections::BTreeSet<&str> = scenarios
        .iter()
        .flat_map(|s| &s.tags)
        .filter_map(|t| t.strip_prefix("API:"))
        .collect();
    let mut unserved = Vec::new();
    for tag in tags {
        let Some(api) = crate::ground::discovery::NeededApi::parse(tag) else {
            continue; // `check` names malformed tags
        };
        let served = crate::ground::discovery::serves(&cluster.client(), &api)
            .await
            .with_context(|| format!("asking the cluster whether it serves {api}"))?;
        if !served {
            crate::report::note!(
                "dra-e2e: the cluster does not serve {api}: the scenarios tagged @API:{tag} are skipped"
            );
            unserved.push(tag.to_owned());
        }
    }
    Ok(unserved)
}

/// Scenarios at once per core unless `--concurrency` says: most of a
/// scenario's time is waiting on the cluster. On 2 cores, simulated nodes
/// measured fastest at 8 (4: 61 s, 8: 41 s, 16: 44 s with a longer namespace
/// backlog at the end). A scenario on the runner's real nodes waits longer on
/// kubelets and containers, with the machine mostly idle at 8 (six real
/// nodes, 2026-12-05: 8: 259 s and 273 s, 12: 205 s, 16: 222 s with every
/// scenario slower). Other clusters keep the simulated figure: unmeasured.
fn default_concurrency(local_real_nodes: bool) -> usize {
    let per_core = if local_real_nodes { 6 } else { 4 };
    per_core * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `@serial` scenarios run alone, as cucumber's default has it, except those
/// the runner skips: cucumber puts a feature with a serial scenario ahead of
/// all others, which would undo the longest-first order for nothing. With
/// `interposed_shared` (a driver under test behind the interposer, shared by
/// the run), so do `@Interposed` ones.
fn run_alone(
    feature: &cucumber::gherkin::Feature,
    rule: Option<&cucumber::gherkin::Rule>,
    scenario: &cucumber::gherkin::Scenario,
    interposed_shared: bool,
) -> cucumber::runner::ScenarioType {
    let interposed = || {
        feature
            .tags
            .iter()
            .chain(rule.iter().flat_map(|r| &r.tags))
            .chain(&scenario.tags)
            .any(|t| t == "Interposed")
    };
    if steps::lifecycle::is_serial(feature, rule, scenario)
        || (interposed_shared && !crate::report::is_marked_skipped(scenario) && interposed())
    {
        cucumber::runner::ScenarioType::Serial
    } else {
        cucumber::runner::ScenarioType::Concurrent
    }
}
