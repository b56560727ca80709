//! The product's main flow: options, cluster, scenarios, reports, exit code.
pub mod author;
pub mod cli;
pub mod cluster_up;
pub mod features;
pub mod preflight;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches};
use cucumber::{World as _, WriterExt as _, writer};
use futures::FutureExt as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, Environment};
use crate::report;
use crate::steps::{self, World};
use cli::RunArgs;

type Opts = cucumber::cli::Opts<
    cucumber::parser::basic::Cli,
    cucumber::runner::basic::Cli,
    cucumber::cli::Compose<
        cucumber::cli::Compose<writer::basic::Cli, writer::junit::Cli>,
        cucumber::cli::Empty,
    >,
    RunArgs,
>;

/// A JUnit/JSON sink the runner can read back after the run.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("report buffer poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default()
    }
}

/// Hands cucumber the features the runner already parsed, marking the
/// scenarios the cluster cannot run.
struct SkipParser {
    env: Environment,
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

/// Options as typed where the parsed form does not show them.
#[derive(Default)]
struct Typed {
    /// cucumber's `--input GLOB`.
    input: Option<String>,
    /// `--tags EXPR` (or `CUCUMBER_FILTER_TAGS`).
    tags: Option<String>,
    /// `--binaries-dir` came from its environment variable.
    binaries_dir_from_env: bool,
}

fn parse_opts() -> (Opts, Typed) {
    const ABOUT: &str = "Runs Gherkin scenarios that test Kubernetes Dynamic Resource \
                         Allocation against a local cluster (default) or a real one.";
    let cmd = Opts::command()
        .name("dra-e2e")
        .about(ABOUT)
        .long_about(ABOUT)
        .after_help(cli::SUBCOMMANDS_HELP);
    let matches = cmd.get_matches();
    let raw = |id: &str| {
        matches
            .try_get_raw(id)
            .ok()
            .flatten()
            .and_then(|mut v| v.next())
            .map(|v| v.to_string_lossy().into_owned())
    };
    let typed = Typed {
        input: raw("input"),
        tags: raw("tags"),
        binaries_dir_from_env: matches.value_source("binaries_dir")
            == Some(clap::parser::ValueSource::EnvVariable),
    };
    match Opts::from_arg_matches(&matches) {
        Ok(o) => (o, typed),
        Err(e) => e.exit(),
    }
}

/// The features to run (see [`features::load`]), or one error listing
/// every problem.
fn load_features(opts: &Opts, typed: &Typed) -> anyhow::Result<Vec<cucumber::gherkin::Feature>> {
    features::load(&opts.custom.features, typed.input.as_deref(), &opts.parser).map_err(|errs| {
        anyhow::anyhow!(
            "{}",
            errs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// What the run reads its scenarios from, for messages.
fn source_description(opts: &Opts, typed: &Typed) -> String {
    match &typed.input {
        Some(glob) => format!("--input {glob}"),
        None => opts
            .custom
            .features
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The scenarios `--tags` / `--name` select.
fn selection(opts: &Opts, parsed: &[cucumber::gherkin::Feature]) -> Vec<features::ScenarioRef> {
    features::scenarios(parsed)
        .into_iter()
        .filter(|s| features::selected(opts.tags_filter.as_ref(), opts.re_filter.as_ref(), s))
        .collect()
}

/// Refuses options that would make the run test nothing or hang, and tags
/// that are typos; returns the selected scenarios.
fn check_selection(
    opts: &Opts,
    parsed: &[cucumber::gherkin::Feature],
) -> anyhow::Result<Vec<features::ScenarioRef>> {
    if opts.runner.concurrency == Some(0) {
        anyhow::bail!("--concurrency 0 would never start a scenario; give 1 or more");
    }
    if let Some(op) = &opts.tags_filter {
        let unknown = features::unknown_expression_tags(op, parsed);
        if !unknown.is_empty() {
            let (s, it) = if unknown.len() > 1 {
                ("s", "them")
            } else {
                ("", "it")
            };
            anyhow::bail!(
                "--tags: unknown tag{s} {} (no scenario has {it} and the suite does not know {it}; \
                 the README's Tags section lists the tags)",
                unknown.join(", ")
            );
        }
    }
    Ok(selection(opts, parsed))
}

/// The message of a run that selected no scenario.
fn nothing_selected(opts: &Opts, typed: &Typed, total: usize) -> String {
    let filter = match (&typed.tags, &opts.re_filter) {
        (Some(t), _) => format!("--tags '{t}'"),
        (None, Some(re)) => format!("--name '{}'", re.as_str()),
        (None, None) => {
            return format!(
                "no scenario to run: {} holds none (pass --allow-empty to accept an empty run)",
                source_description(opts, typed)
            );
        }
    };
    format!(
        "no scenario to run: {filter} selects none of the {total} scenarios in {} \
         (pass --allow-empty to accept an empty run)",
        source_description(opts, typed)
    )
}

fn list(selected: &[features::ScenarioRef]) {
    for s in selected {
        let tags: Vec<String> = s.tags.iter().map(|t| format!("@{t}")).collect();
        println!(
            "{}:{}  {}{}  {}",
            s.path.display(),
            s.line,
            s.rule
                .as_ref()
                .map(|r| format!("{r} / "))
                .unwrap_or_default(),
            s.name,
            tags.join(" ")
        );
    }
    println!("{} scenarios", selected.len());
}

/// Report and artifact paths are usable, and the local cluster's sockets
/// fit in the temp dir: checked before anything starts.
fn check_outputs_and_host(args: &RunArgs, typed: &Typed) -> anyhow::Result<()> {
    if let Some(p) = &args.junit {
        preflight::check_output_file("--junit", p)?;
    }
    if let Some(p) = &args.cucumber_json {
        preflight::check_output_file("--cucumber-json", p)?;
    }
    preflight::check_output_dir("--artifacts", &args.artifacts)?;
    if args.cluster.is_local(args.kubeconfig.as_deref()) {
        if args.node_kind == crate::cluster::NodeKind::Simulated {
            preflight::check_temp_dir(&std::env::temp_dir(), args.nodes)?;
        }
        // The hint to build them belongs to this error only.
        // Found from the environment variable, it is said to be.
        let explicit = args
            .binaries_dir
            .as_deref()
            .filter(|_| !typed.binaries_dir_from_env);
        if let Err(missing) = crate::cluster::local::Binaries::find(explicit) {
            anyhow::bail!(
                "{missing}; or run against a real cluster with --cluster kubeconfig --kubeconfig FILE"
            );
        }
    }
    Ok(())
}

/// Runs the selected scenarios; returns the process exit code.
pub async fn run() -> anyhow::Result<i32> {
    let (opts, typed) = parse_opts();
    // Fail on malformed feature files and empty selections before starting
    // anything expensive.
    let parsed = load_features(&opts, &typed)?;
    let selected = check_selection(&opts, &parsed)?;
    let allow_empty = opts.custom.allow_empty;
    if opts.custom.list {
        list(&selected);
        if selected.is_empty() && !allow_empty {
            anyhow::bail!(
                "{}",
                nothing_selected(&opts, &typed, features::scenarios(&parsed).len())
            );
        }
        return Ok(0);
    }
    if selected.is_empty() {
        let message = nothing_selected(&opts, &typed, features::scenarios(&parsed).len());
        if !allow_empty {
            anyhow::bail!("{message}");
        }
        println!(
            "{}",
            message.replace(" (pass --allow-empty to accept an empty run)", "")
        );
        println!("0 passed, 0 failed (--allow-empty)");
        return Ok(0);
    }
    let args = opts.custom.clone();
    check_outputs_and_host(&args, &typed)?;
    let connect = args.connect_options();
    // The streams exist from here to the end, so no Ctrl-C or SIGTERM ever
    // meets the default action (which would kill the runner and leave its
    // temp dir, and a real node's links and cgroups, behind).
    let mut signals = Signals::install()?;
    if connect.is_local() {
        eprintln!(
            "dra-e2e: starting the local cluster ({} {} nodes)...",
            connect.nodes, connect.node_kind
        );
    }
    let cluster = tokio::select! {
        c = Cluster::connect(&connect) => Arc::new(c?),
        // Dropping the start cleans up what it had started.
        _ = signals.next() => {
            eprintln!("\ndra-e2e: interrupted while starting the cluster; stopped it");
            return Ok(130);
        }
    };
    let interrupt = CancellationToken::new();
    let (count_tx, count) = tokio::sync::watch::channel(0u32);
    // First signal: stop starting scenarios, tear down running ones, write
    // reports; after the scenarios, end the wait for namespaces. Second: stop
    // the cluster at once and exit.
    let handler = {
        let interrupt = interrupt.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while signals.next().await {
                n += 1;
                let _ = count_tx.send(n);
                if n == 1 {
                    interrupt.cancel();
                    eprintln!(
                        "\ndra-e2e: interrupted; tearing down running scenarios (Ctrl-C again to stop at once)"
                    );
                } else {
                    eprintln!("\ndra-e2e: stopping now");
                    for note in cluster.kill_now() {
                        eprintln!("dra-e2e: {note}");
                    }
                    std::process::exit(130);
                }
            }
        })
    };
    let result = run_on(opts, args, parsed, cluster.clone(), interrupt, count).await;
    let stopped = cluster.shutdown().await;
    handler.abort();
    for note in &stopped.notes {
        eprintln!("dra-e2e: {note}");
    }
    if !stopped.left.is_empty() {
        println!(
            "leak check: left behind on the host: {}",
            stopped.left.join(", ")
        );
        return Ok(1);
    }
    result
}

/// SIGINT and SIGTERM, made once: a stream made per wait would miss a
/// signal that arrives while the previous one is being handled.
struct Signals {
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        Ok(Signals {
            sigint: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            sigterm: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    /// The next signal; false when no more can come.
    async fn next(&mut self) -> bool {
        tokio::select! {
            r = self.sigint.recv() => r.is_some(),
            r = self.sigterm.recv() => r.is_some(),
        }
    }
}

/// How long running scenarios get to tear down after a component the
/// cluster needs has died.
const DEAD_CLUSTER_TEARDOWN: Duration = Duration::from_secs(60);

async fn run_on(
    opts: Opts,
    args: RunArgs,
    parsed: Vec<cucumber::gherkin::Feature>,
    cluster: Arc<Cluster>,
    interrupt: CancellationToken,
    mut signal_count: tokio::sync::watch::Receiver<u32>,
) -> anyhow::Result<i32> {
    let env = cluster.environment().await?;
    eprintln!("dra-e2e: {}", cluster.describe());

    let run_id = format!("{:x}", rand::random::<u32>());
    steps::install(steps::Context {
        cluster: cluster.clone(),
        step_timeout: args.step_timeout,
        artifacts: args.artifacts.clone(),
        keep_on_failure: args.keep_on_failure,
        interrupt: interrupt.clone(),
        outcomes: report::Outcomes::default(),
        run_id: run_id.clone(),
    })
    .map_err(anyhow::Error::msg)?;
    let ctx = steps::context()?;

    let reports = Reports::default();
    let started = Instant::now();
    let died = run_scenarios(opts, &args, parsed, env, &reports, &cluster, &interrupt).await;
    let wall = started.elapsed();

    let records = ctx.outcomes.snapshot();
    reports.write(&args, &records)?;
    if died.is_none() {
        // A signal from here on cuts the wait short.
        signal_count.mark_unchanged();
        tokio::select! {
            r = cluster.wait_namespaces_gone(&run_id) => {
                if let Err(e) = r {
                    eprintln!("dra-e2e: {e}");
                }
            }
            _ = signal_count.changed() => eprintln!("dra-e2e: not waiting for the namespaces to go"),
        }
    }
    let leaked = leak_check(&cluster, &args, &ctx.outcomes, died.as_deref()).await;
    Ok(closing(
        &args,
        &records,
        wall,
        ctx.outcomes.teardown_failures(),
        leaked,
        died.as_deref(),
        interrupt.is_cancelled(),
    ))
}

/// The JUnit and Cucumber JSON output, kept until the run ends.
#[derive(Default)]
struct Reports {
    junit: Buffer,
    json: Buffer,
}

impl Reports {
    /// Writes the reports the options ask for; the JUnit one annotated with
    /// what the runner knows of each scenario.
    fn write(
        &self,
        args: &RunArgs,
        records: &std::collections::BTreeMap<report::ScenarioId, report::Record>,
    ) -> anyhow::Result<()> {
        if let Some(path) = &args.junit {
            let xml = String::from_utf8_lossy(&self.junit.take()).into_owned();
            std::fs::write(path, report::annotate_junit(&xml, records))
                .with_context(|| format!("writing the JUnit report {}", path.display()))?;
        }
        if let Some(path) = &args.cucumber_json {
            std::fs::write(path, self.json.take())
                .with_context(|| format!("writing the Cucumber JSON report {}", path.display()))?;
        }
        Ok(())
    }
}

/// Runs the scenarios until they end, the deadline passes, or the cluster
/// loses a process it cannot do without; returns that process's first line
/// in the last case.
async fn run_scenarios(
    opts: Opts,
    args: &RunArgs,
    parsed: Vec<cucumber::gherkin::Feature>,
    env: Environment,
    reports: &Reports,
    cluster: &Cluster,
    interrupt: &CancellationToken,
) -> Option<String> {
    let cucumber = World::cucumber::<std::path::PathBuf>()
        .with_parser(SkipParser { env })
        .with_writer(
            writer::Basic::raw(std::io::stdout(), writer::Coloring::Auto, 0)
                .summarized()
                .tee::<World, _>(writer::JUnit::for_tee(reports.junit.clone(), 0))
                .tee::<World, _>(writer::Json::for_tee(reports.json.clone()))
                .normalized(),
        )
        .fail_on_skipped_with(|_, _, sc| !report::is_marked_skipped(sc))
        .max_concurrent_scenarios(4)
        .before(|_, _, sc, w| steps::lifecycle::before(sc, w).boxed_local())
        .after(|f, _, sc, ev, w| steps::lifecycle::after(f, sc, ev, w).boxed_local())
        .with_cli(opts);

    let run = cucumber.run(parsed);
    let mut run = std::pin::pin!(run);
    let deadline = tokio::time::sleep(args.deadline);
    let death = cluster.first_death();
    tokio::select! {
        _ = &mut run => None,
        _ = deadline => {
            eprintln!(
                "dra-e2e: --deadline {} passed; tearing down running scenarios",
                humantime::format_duration(args.deadline)
            );
            interrupt.cancel();
            run.await;
            None
        }
        what = death => {
            // Nothing can pass without it: start no scenario, end the running
            // ones, and give their teardown a bounded time (an API server
            // that is gone would make every cleanup call wait).
            eprintln!("\ndra-e2e: {what}\ndra-e2e: the cluster cannot work without it; stopping the run");
            interrupt.cancel();
            if tokio::time::timeout(DEAD_CLUSTER_TEARDOWN, run).await.is_err() {
                eprintln!(
                    "dra-e2e: teardown did not finish within {}; the cluster's processes and files go with it",
                    humantime::format_duration(DEAD_CLUSTER_TEARDOWN)
                );
            }
            Some(what.lines().next().unwrap_or_default().to_owned())
        }
    }
}

/// Looks for objects of the run's scenarios left in the cluster; true if
/// some are (or the look failed). With --keep-on-failure, kept scenarios are
/// expected to remain. With a dead control plane nothing can be listed; its
/// objects go with it.
async fn leak_check(
    cluster: &Cluster,
    args: &RunArgs,
    outcomes: &report::Outcomes,
    died: Option<&str>,
) -> bool {
    if let Some(what) = died {
        println!("leak check skipped: {what}");
        return false;
    }
    if args.keep_on_failure {
        return false;
    }
    match cluster.leftovers(&outcomes.namespaces()).await {
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

/// The closing lines (skips, timings, summary, why the run stopped early,
/// an empty run) and the exit code.
fn closing(
    args: &RunArgs,
    records: &std::collections::BTreeMap<report::ScenarioId, report::Record>,
    wall: Duration,
    teardown_failures: usize,
    leaked: bool,
    died: Option<&str>,
    interrupted: bool,
) -> i32 {
    for line in report::skip_summary(records) {
        println!("{line}");
    }
    if args.timings {
        print!("{}", report::timings(records, wall));
    }
    let failed = records
        .values()
        .filter(|r| r.outcome == report::Outcome::Failed)
        .count();
    if teardown_failures > 0 {
        println!("{teardown_failures} scenario teardown(s) failed; see the messages above");
    }
    println!("{}", report::summary_line(records));
    if let Some(what) = died {
        println!("the run stopped early: {what}");
    }
    let ran = records
        .values()
        .filter(|r| r.outcome != report::Outcome::Skipped)
        .count();
    let empty = ran == 0 && !interrupted;
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
    if failed == 0
        && teardown_failures == 0
        && !leaked
        && !interrupted
        && (!empty || args.allow_empty)
    {
        0
    } else {
        1
    }
}
