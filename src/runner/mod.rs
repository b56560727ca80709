//! The product's main flow: options, cluster, scenarios, reports, exit code.
pub mod author;
pub mod cli;
pub mod features;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches};
use cucumber::{World as _, WriterExt as _, writer};
use futures::FutureExt as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, ConnectOptions};
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

/// Parses features and marks the scenarios the cluster cannot run.
struct SkipParser {
    inner: cucumber::parser::Basic,
    env: features::Environment,
}

/// Every `--features` path, in order.
impl cucumber::Parser<Vec<std::path::PathBuf>> for SkipParser {
    type Cli = cucumber::parser::basic::Cli;
    type Output =
        futures::stream::BoxStream<'static, cucumber::parser::Result<cucumber::gherkin::Feature>>;

    fn parse(self, input: Vec<std::path::PathBuf>, cli: Self::Cli) -> Self::Output {
        use futures::StreamExt as _;
        let Self { inner, env } = self;
        futures::stream::iter(input)
            .flat_map(move |path| inner.clone().parse(path, cli.clone()))
            .map(move |f| f.map(|f| features::mark_skipped(&env, f)))
            .boxed()
    }
}

fn parse_opts() -> Opts {
    const ABOUT: &str = "Runs Gherkin scenarios that test Kubernetes Dynamic Resource \
                         Allocation against a local cluster (default) or a real one.";
    let cmd = Opts::command()
        .name("dra-e2e")
        .about(ABOUT)
        .long_about(ABOUT)
        .after_help(cli::SUBCOMMANDS_HELP);
    let matches = cmd.get_matches();
    match Opts::from_arg_matches(&matches) {
        Ok(o) => o,
        Err(e) => e.exit(),
    }
}

/// All features under `paths`, or one error listing every file that failed.
fn parse_features(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<cucumber::gherkin::Feature>> {
    let mut parsed = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match features::parse_all(path) {
            Ok(f) => parsed.extend(f),
            Err(errs) => errors.extend(errs.iter().map(ToString::to_string)),
        }
    }
    if errors.is_empty() {
        Ok(parsed)
    } else {
        Err(anyhow::anyhow!("{}", errors.join("\n")))
    }
}

fn list(opts: &Opts) -> anyhow::Result<()> {
    let parsed = parse_features(&opts.custom.features)?;
    let mut n = 0;
    for s in features::scenarios(&parsed) {
        if !features::selected(opts.tags_filter.as_ref(), opts.re_filter.as_ref(), &s) {
            continue;
        }
        n += 1;
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
    println!("{n} scenarios");
    Ok(())
}

/// Runs the selected scenarios; returns the process exit code.
pub async fn run() -> anyhow::Result<i32> {
    let opts = parse_opts();
    if opts.custom.list {
        list(&opts)?;
        return Ok(0);
    }
    // Fail on malformed feature files before starting anything expensive.
    parse_features(&opts.custom.features)?;
    let args = opts.custom.clone();
    let connect = ConnectOptions::from_args(&args);
    let cluster = Arc::new(Cluster::connect(&connect).await?);
    let result = run_on(opts, args, cluster.clone()).await;
    let left = cluster.shutdown().await;
    if !left.is_empty() {
        println!("leak check: left behind on the host: {}", left.join(", "));
        return Ok(1);
    }
    result
}

async fn run_on(opts: Opts, args: RunArgs, cluster: Arc<Cluster>) -> anyhow::Result<i32> {
    let env = cluster.environment().await?;
    eprintln!("dra-e2e: {}", cluster.describe());

    let interrupt = CancellationToken::new();
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

    // First Ctrl-C: stop starting scenarios, tear down running ones, write
    // reports. Second: stop the local cluster at once and exit.
    // The signal streams are made once, before the task starts: a stream
    // made per iteration would miss a second Ctrl-C that arrives while the
    // first is being handled.
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let signals = {
        let interrupt = interrupt.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let mut n = 0;
            loop {
                let got = tokio::select! {
                    r = sigint.recv() => r.is_some(),
                    r = sigterm.recv() => r.is_some(),
                };
                if !got {
                    return;
                }
                n += 1;
                if n == 1 {
                    interrupt.cancel();
                    eprintln!(
                        "\ndra-e2e: interrupted; tearing down running scenarios (Ctrl-C again to stop at once)"
                    );
                } else {
                    eprintln!("\ndra-e2e: stopping now");
                    cluster.kill_now();
                    std::process::exit(130);
                }
            }
        })
    };

    let junit = Buffer::default();
    let json = Buffer::default();
    let cucumber = World::cucumber::<std::path::PathBuf>()
        .with_parser(SkipParser {
            inner: cucumber::parser::Basic::new(),
            env,
        })
        .with_writer(
            writer::Basic::raw(std::io::stdout(), writer::Coloring::Auto, 0)
                .summarized()
                .tee::<World, _>(writer::JUnit::for_tee(junit.clone(), 0))
                .tee::<World, _>(writer::Json::for_tee(json.clone()))
                .normalized(),
        )
        .fail_on_skipped_with(|_, _, sc| !features::is_marked_skipped(sc))
        .max_concurrent_scenarios(4)
        .before(|_, _, sc, w| steps::lifecycle::before(sc, w).boxed_local())
        .after(|f, _, sc, ev, w| steps::lifecycle::after(f, sc, ev, w).boxed_local())
        .with_cli(opts);

    let started = Instant::now();
    let run = cucumber.run(args.features.clone());
    let mut run = std::pin::pin!(run);
    let deadline = tokio::time::sleep(args.deadline);
    tokio::select! {
        _ = &mut run => {},
        _ = deadline => {
            eprintln!(
                "dra-e2e: --deadline {} passed; tearing down running scenarios",
                humantime::format_duration(args.deadline)
            );
            interrupt.cancel();
            run.await;
        }
    }
    signals.abort();
    let wall = started.elapsed();

    let records = ctx.outcomes.snapshot();
    if let Some(path) = &args.junit {
        let xml = String::from_utf8_lossy(&junit.take()).into_owned();
        std::fs::write(path, report::annotate_junit(&xml, &records))
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    if let Some(path) = &args.cucumber_json {
        std::fs::write(path, json.take())
            .with_context(|| format!("writing the Cucumber JSON report {}", path.display()))?;
    }
    cluster.wait_namespaces_gone(&run_id).await;
    // With --keep-on-failure, kept scenarios are expected to remain.
    let mut leaked = false;
    if !args.keep_on_failure {
        match cluster.leftovers(&ctx.outcomes.namespaces()).await {
            Ok(left) if left.is_empty() => println!("leak check: nothing left behind"),
            Ok(left) => {
                leaked = true;
                println!("leak check: left behind: {}", left.join(", "));
            }
            Err(e) => {
                leaked = true;
                println!("leak check failed: {e:#}");
            }
        }
    }

    for line in report::skip_summary(&records) {
        println!("{line}");
    }
    if args.timings {
        print!("{}", report::timings(&records, wall));
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
    Ok(
        if failed == 0 && teardown_failures == 0 && !leaked && !interrupt.is_cancelled() {
            0
        } else {
            1
        },
    )
}
