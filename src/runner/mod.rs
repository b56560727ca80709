//! The product's main flow: options, cluster, scenarios, reports, exit code.
pub mod author;
pub mod chaos;
pub mod clean;
pub mod cli;
pub mod cluster_up;
pub mod feature_source;
pub mod features;
pub mod history;
pub mod job;
pub mod job_pod;
pub mod mutants;
pub mod options;
pub mod preflight;
pub mod profile_cli;
pub mod setup;
pub mod shard;
pub mod suggest;
pub mod upstream;

use std::io::{IsTerminal as _, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cucumber::{World as _, WriterExt as _, writer};
use futures::FutureExt as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::harness::under_test::UnderTest;
use crate::report;
use crate::steps::{self, World};
use cli::RunArgs;
use history::History;

/// The run's options: cucumber's (`--tags`, `--name`, `--concurrency`, ...)
/// and the runner's own ([`RunArgs`]).
pub type Opts = cucumber::cli::Opts<
    cucumber::parser::basic::Cli,
    cucumber::runner::basic::Cli,
    cucumber::cli::Compose<
        cucumber::cli::Compose<
            cucumber::cli::Compose<writer::basic::Cli, cucumber::cli::Empty>,
            cucumber::cli::Empty,
        >,
        cucumber::cli::Empty,
    >,
    RunArgs,
>;

/// A report sink the runner can read back after the run.
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

/// What the run is to run: the features (sharded), how many scenarios they
/// select, and the titles the suite's files share (for the reports).
struct Selection {
    features: Vec<cucumber::gherkin::Feature>,
    count: usize,
    shared: report::collect::SharedTitles,
    /// Earlier runs' durations, which ordered `features`; this run's are
    /// added at its end.
    history: History,
    /// Where the conformance pack's scenarios are.
    pack: std::collections::BTreeSet<report::conformance::Place>,
    /// The profile of the driver they test (`None`: the suite's own).
    driver: Option<crate::profile::Profile>,
    /// Tagged gates the cluster's Kubernetes will not run with, and why.
    refused_gates: Vec<(String, String)>,
    /// How many selected scenarios own their nodes (`@OwnNodes`).
    own_nodes: usize,
    /// Control-plane and kubelet restarts during the scenarios ([`chaos`]).
    restarts: Vec<chaos::Planned>,
}

/// Where the scenarios' output goes: stdout, or stdout under a live status
/// line on a terminal.
enum ScenarioOut {
    Plain(std::io::Stdout),
    Status(report::progress::StatusOut),
}

impl Write for ScenarioOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ScenarioOut::Plain(o) => o.write(buf),
            ScenarioOut::Status(o) => o.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ScenarioOut::Plain(o) => o.flush(),
            ScenarioOut::Status(o) => o.flush(),
        }
    }
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

impl Typed {
    fn from_matches(matches: &clap::ArgMatches) -> Self {
        let raw = |id: &str| {
            matches
                .try_get_raw(id)
                .ok()
                .flatten()
                .and_then(|mut v| v.next())
                .map(|v| v.to_string_lossy().into_owned())
        };
        Typed {
            input: raw("input"),
            tags: raw("tags"),
            binaries_dir_from_env: matches.value_source("binaries_dir")
                == Some(clap::parser::ValueSource::EnvVariable),
        }
    }
}

/// The features to run (see [`features::load`]), or one error listing
/// every problem.
fn load_features(opts: &Opts, typed: &Typed) -> anyhow::Result<Vec<cucumber::gherkin::Feature>> {
    feature_source::load(
        &opts.custom.feature_sources(),
        typed.input.as_deref(),
        &opts.parser,
    )
    .map_err(feature_source::one_error)
}

/// What the run reads its scenarios from, for messages.
fn source_description(opts: &Opts, typed: &Typed) -> String {
    match &typed.input {
        Some(glob) => format!("--input {glob}"),
        None => opts
            .custom
            .feature_sources()
            .iter()
            .map(ToString::to_string)
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
                 docs/tags.md lists the tags)",
                unknown.join(", ")
            );
        }
    }
    Ok(selection(opts, parsed))
}

/// The message of a run that selected no scenario.
fn nothing_selected(opts: &Opts, typed: &Typed, total: usize) -> String {
    if let Some(shard) = opts.custom.shard {
        return format!(
            "no scenario to run: shard {shard} holds none of the selected scenarios in {} \
             (pass --allow-empty to accept an empty run)",
            source_description(opts, typed)
        );
    }
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

/// Where the local cluster's built programs are (`None`: not the local
/// cluster, or not real nodes).
#[derive(Debug, Default)]
struct Built {
    control_plane: Option<std::path::PathBuf>,
    node: Option<std::path::PathBuf>,
}

/// Report and artifact paths are usable, the versions asked for fit the
/// cluster, and the local cluster's sockets fit in the temp dir: checked
/// before anything starts; then what the local cluster runs is built.
async fn check_outputs_and_host(args: &RunArgs, typed: &Typed) -> anyhow::Result<Built> {
    if let Some(p) = &args.junit {
        preflight::check_output_file("--junit", p)?;
    }
    if let Some(p) = &args.cucumber_json {
        preflight::check_output_file("--cucumber-json", p)?;
    }
    if let Some(p) = &args.html {
        preflight::check_output_file("--html", p)?;
    }
    preflight::check_output_dir("--artifacts", &args.artifacts)?;
    let local = args.cluster.is_local(args.kubeconfig.as_deref());
    let real = args.node_kind == crate::cluster::NodeKind::Real;
    args.versions.check()?;
    if !local {
        return Ok(Built::default());
    }
    if !real {
        preflight::check_temp_dir(&std::env::temp_dir(), args.nodes)?;
    }
    // The hint to build them belongs to this error only.
    // Found from the environment variable, it is said to be.
    let explicit = args
        .binaries_dir
        .as_deref()
        .filter(|_| !typed.binaries_dir_from_env);
    let explicit = explicit.map(Path::to_owned);
    let versions = args.versions.clone();
    // Builds what is missing from the cache (the first run on a machine, or
    // the first with another version).
    tokio::task::spawn_blocking(move || {
        use setup::Part;
        let control_plane = setup::ensure(
            Part::ControlPlane,
            explicit.as_deref(),
            versions.for_part(Part::ControlPlane),
        )?;
        let node = match real {
            true => Some(setup::ensure(
                Part::Node,
                None,
                versions.for_part(Part::Node),
            )?),
            false => None,
        };
        anyhow::Ok(Built {
            control_plane: Some(control_plane),
            node,
        })
    })
    .await
    .context("the build task ended early")?
    .map_err(|e| {
        anyhow::anyhow!(
            "{e:#}; or run against a real cluster with --cluster kubeconfig --kubeconfig FILE"
        )
    })
}

/// Splits the gates the selected scenarios are tagged with (`added`, already
/// in `gates`) by whether the control plane at `dir` runs with them: those it
/// refuses (a newer release's gate, or one whose dependencies this release
/// keeps off) are taken out of `gates` and returned with why, so that their
/// scenarios are skipped saying so instead of the API server refusing to
/// start. A gate the user set that it refuses is an error.
fn refused_gates(
    dir: &Path,
    gates: &mut Vec<String>,
    added: &[String],
) -> anyhow::Result<Vec<(String, String)>> {
    let apiserver = dir.join(crate::cluster::local::binaries::KUBE_APISERVER);
    let named: Vec<(&str, bool)> = gates
        .iter()
        .filter_map(|g| g.split_once('='))
        .map(|(g, v)| (g.trim(), v.trim().eq_ignore_ascii_case("true")))
        .collect();
    let mut refused = crate::cluster::local::gates_refused_by(
        &apiserver,
        crate::cluster::local::GateProbe::ApiServer,
        &named,
    )
    .with_context(|| {
        format!(
            "asking {} which feature gates it takes",
            apiserver.display()
        )
    })?;
    // A gate the API server takes may still need a controller this
    // release's kube-controller-manager does not have.
    let kcm = dir.join(crate::cluster::local::binaries::KUBE_CONTROLLER_MANAGER);
    let controllers = crate::cluster::local::components::known_controllers(&kcm)
        .with_context(|| format!("asking {} which controllers it has", kcm.display()))?;
    // A help text this parser does not understand lists nothing: then no
    // gate is refused for a controller rather than every one.
    for (gate, on) in named.iter().filter(|_| !controllers.is_empty()) {
        let missing: Vec<String> = crate::cluster::local::components::controllers_for_gate(gate)
            .iter()
            .filter(|c| !controllers.iter().any(|k| k == *c))
            .map(|c| (*c).to_owned())
            .collect();
        if *on && !missing.is_empty() && !refused.iter().any(|(r, _)| r == gate) {
            refused.push((
                (*gate).to_owned(),
                crate::cluster::local::GateRefusal::NeedsController(missing),
            ));
        }
    }
    let version = crate::cluster::host::kube_version::program_version(&apiserver)
        .map_or_else(|| "this release".to_owned(), |v| format!("Kubernetes {v}"));
    if let Some((gate, why)) = refused.iter().find(|(g, _)| !added.contains(g)) {
        anyhow::bail!(
            "--feature-gates {gate}: the local control plane ({version}, {}) will not run with \
             it: it {why}",
            dir.display()
        );
    }
    gates.retain(|g| {
        !refused
            .iter()
            .any(|(r, _)| g.split('=').next().map(str::trim) == Some(r))
    });
    let refused: Vec<(String, String)> = refused
        .into_iter()
        .map(|(g, why)| (g, format!("{why} in {version}")))
        .collect();
    for (gate, why) in &refused {
        crate::note!("dra-e2e: feature gate {gate} {why}: its scenarios are skipped");
    }
    Ok(refused)
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
            crate::note!(
                "dra-e2e: the cluster does not serve {api}: the scenarios tagged @API:{tag} are skipped"
            );
            unserved.push(tag.to_owned());
        }
    }
    Ok(unserved)
}

/// Runs the selected scenarios; returns the process exit code. `matches`
/// are those [`cli::try_parse_from`] parsed `opts` from.
pub async fn run(opts: Opts, matches: &clap::ArgMatches) -> anyhow::Result<i32> {
    let typed = Typed::from_matches(matches);
    // Fail on malformed feature files and empty selections before starting
    // anything expensive.
    options::check_features("--features", &opts.custom.features)?;
    options::check_features("--add-features", &opts.custom.add_features)?;
    let parsed = load_features(&opts, &typed)?;
    let mut selected = check_selection(&opts, &parsed)?;
    let all_scenarios = features::scenarios(&parsed);
    let total = all_scenarios.len();
    let shared = report::collect::shared_titles(
        all_scenarios
            .iter()
            .map(|s| (s.feature.as_str(), s.name.as_str())),
    );
    // Tags are checked against every file; the shard only narrows the run.
    let parsed = match opts.custom.shard {
        Some(shard) => {
            let all = selected.len();
            let parsed = shard.apply(parsed);
            selected = selection(&opts, &parsed);
            crate::note!(
                "dra-e2e: shard {shard}: {} of the {all} selected scenarios",
                selected.len()
            );
            parsed
        }
        None => parsed,
    };
    let allow_empty = opts.custom.allow_empty;
    if opts.custom.list {
        list(&selected);
        if selected.is_empty() && !allow_empty {
            anyhow::bail!("{}", nothing_selected(&opts, &typed, total));
        }
        return Ok(0);
    }
    if selected.is_empty() {
        let message = nothing_selected(&opts, &typed, total);
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
    // Options given where they do nothing, and files that are not there,
    // are refused before anything is built or started.
    for note in options::check_run(&args, matches)? {
        crate::note!("dra-e2e: {note}");
    }
    let built = check_outputs_and_host(&args, &typed).await?;
    let mut connect = args.connect_options();
    if built.control_plane.is_some() {
        connect.binaries_dir = built.control_plane.clone();
    }
    connect.node_binaries_dir = built.node;
    let profile = driver_profile(&args)?;
    if let Some(p) = &profile {
        UnderTest::check_fits(
            p,
            connect.is_local(),
            connect.node_kind == crate::cluster::NodeKind::Real,
        )?;
        if args.interpose
            && let Err(reason) = p.interposable()
        {
            anyhow::bail!("--interpose: {reason}");
        }
        // Real local nodes always get the runner's own image.
        if args.interpose && !connect.is_local() && connect.proxy_image.contains("hostpathplugin") {
            anyhow::bail!(
                "--interpose on a kubeconfig cluster reaches the driver's sockets through proxy \
                 pods running `dra-e2e proxy-agent --connect`, which upstream's hostpathplugin \
                 image ({}) lacks: pass --proxy-image with an image carrying dra-e2e",
                connect.proxy_image
            );
        }
        // The nodes import the driver's images when they start.
        if let crate::profile::Deployment::RealNodes { image_archives, .. } = &p.deployment {
            connect
                .image_archives
                .extend(image_archives.iter().cloned());
        }
    }
    let mut refused = Vec::new();
    if connect.is_local() {
        let added = features::enable_tagged_gates(&mut connect.feature_gates, &selected);
        if let Some(dir) = &built.control_plane {
            refused = refused_gates(dir, &mut connect.feature_gates, &added)?;
        }
        let added: Vec<&String> = added
            .iter()
            .filter(|g| !refused.iter().any(|(r, _)| r == *g))
            .collect();
        if !added.is_empty() {
            crate::note!(
                "dra-e2e: enabling the feature gates the selected scenarios are tagged with: {} \
                 (--feature-gates NAME=false skips their scenarios instead)",
                added
                    .iter()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let mut restarts = args.restart_control_plane.clone();
    restarts.extend(args.restart_kubelet.iter().cloned());
    restarts.sort_by_key(|p| p.at);
    // The streams exist from here to the end, so no Ctrl-C or SIGTERM ever
    // meets the default action (which would kill the runner and leave its
    // temp dir, and a real node's links and cgroups, behind).
    let mut signals = Signals::install()?;
    if connect.is_local() {
        crate::note!(
            "dra-e2e: starting the local cluster ({} {} nodes)...",
            connect.nodes,
            connect.node_kind
        );
    }
    let connecting = Instant::now();
    let cluster = tokio::select! {
        c = Cluster::connect(&connect) => Arc::new(c?),
        // Dropping the start cleans up what it had started.
        _ = signals.next() => {
            crate::note!("\ndra-e2e: interrupted while starting the cluster; stopped it");
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
                    crate::note!(
                        "\ndra-e2e: interrupted; tearing down running scenarios (Ctrl-C again to stop at once)"
                    );
                } else {
                    crate::note!("\ndra-e2e: stopping now");
                    for note in cluster.kill_now() {
                        crate::note!("dra-e2e: {note}");
                    }
                    std::process::exit(130);
                }
            }
        })
    };
    let history = History::load(&match connect.is_local() {
        true => format!("local-{}", connect.node_kind),
        false => "kubeconfig".to_owned(),
    });
    let pack = all_scenarios
        .iter()
        .filter(|s| s.tags.iter().any(|t| t == report::conformance::TAG))
        .map(|s| (s.path.display().to_string(), s.line))
        .collect();
    let selection = Selection {
        pack,
        driver: profile,
        count: selected.len(),
        features: history.longest_first(parsed),
        shared,
        history,
        refused_gates: refused,
        own_nodes: selected
            .iter()
            .filter(|s| s.tags.iter().any(|t| t == "OwnNodes"))
            .count(),
        restarts,
    };
    let mut run_timings = vec![(report::CLUSTER_START, connecting.elapsed())];
    let ended = run_on(
        opts,
        args,
        selection,
        cluster.clone(),
        interrupt,
        count,
        &mut run_timings,
    )
    .await;
    // Stopping the cluster belongs to the run's ending and its deadline; a
    // run that failed before its scenarios gets the default one.
    let ending = match &ended {
        Ok(e) => e.ending,
        Err(_) => Ending::start(DEFAULT_TEARDOWN_TIMEOUT),
    };
    let stopped = match ending.within(cluster.shutdown()).await {
        Ok(stopped) => stopped,
        Err(overrun) => {
            crate::note!("dra-e2e: {overrun}; stopping the cluster at once");
            for note in cluster.kill_now() {
                crate::note!("dra-e2e: {note}");
            }
            handler.abort();
            return ended.map(|_| 1);
        }
    };
    handler.abort();
    for note in &stopped.notes {
        crate::note!("dra-e2e: {note}");
    }
    if !stopped.left.is_empty() {
        println!(
            "leak check: left behind on the host: {}",
            stopped.left.join(", ")
        );
        return Ok(1);
    }
    ended.map(|e| e.code)
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
/// cluster needs has died (within the run's teardown deadline).
const DEAD_CLUSTER_TEARDOWN: Duration = Duration::from_secs(60);

/// `--teardown-timeout`'s default, for runs that fail before their scenarios.
const DEFAULT_TEARDOWN_TIMEOUT: Duration = Duration::from_secs(300);

/// The deadline of the run's ending (`--teardown-timeout`): it starts when
/// the scenarios are done or told to stop, and bounds everything after.
#[derive(Debug, Clone, Copy)]
struct Ending {
    by: tokio::time::Instant,
    limit: Duration,
}

/// The run's ending went past its deadline.
#[derive(Debug)]
struct Overrun(Duration);

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
    fn start(limit: Duration) -> Self {
        Ending {
            by: tokio::time::Instant::now() + limit,
            limit,
        }
    }

    async fn within<F: std::future::Future>(&self, f: F) -> Result<F::Output, Overrun> {
        tokio::time::timeout_at(self.by, f)
            .await
            .map_err(|_| Overrun(self.limit))
    }

    /// What is left of the deadline, at most `cap`.
    fn left(&self, cap: Duration) -> Duration {
        self.by
            .saturating_duration_since(tokio::time::Instant::now())
            .min(cap)
    }
}

/// Why the scenarios ended before all of them had run.
enum Stop {
    /// `--deadline` passed.
    Deadline,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// A component the cluster needs died; its first line.
    Died(String),
}

/// What the run's scenarios ended with.
struct Ended {
    code: i32,
    ending: Ending,
}

async fn run_on(
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
    crate::note!("dra-e2e: {}", cluster.describe());
    // Which Kubernetes passed or failed is part of what a run says, most of
    // all when the kubelet is older than the control plane.
    if let Ok(v) = cluster.client().apiserver_version().await {
        crate::note!(
            "dra-e2e: control plane {}, oldest kubelet {}",
            v.git_version,
            env.kubelet_version
                .map_or_else(|| "unknown".to_owned(), |(a, b)| format!("{a}.{b}"))
        );
    }
    let under_test = match selection.driver.take() {
        None => UnderTest::builtin(),
        Some(p) => {
            crate::note!(
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

/// The profile of the driver a run tests: `--profile FILE`, KEP-5970's
/// `--driver-name` and `--device-class`, or none (the suite's own driver).
fn driver_profile(args: &RunArgs) -> anyhow::Result<Option<crate::profile::Profile>> {
    use crate::profile::{Options, Profile};
    if let Some(path) = &args.driver.profile {
        return Ok(Some(Profile::load(path, Options { check_files: true })?));
    }
    if let (Some(name), Some(class)) = (&args.driver.driver_name, &args.driver.device_class) {
        let defaulted = Profile::from_flags(name, class)?;
        crate::note!("dra-e2e: {defaulted}");
        return Ok(Some(defaulted.profile));
    }
    Ok(None)
}

/// What the run's passes prove about the kubelet, said last beside the
/// counts: on simulated nodes they prove dra-e2e's simulator.
fn kubelet_line(kubelet: crate::cluster::Kubelet) -> String {
    match kubelet {
        crate::cluster::Kubelet::Simulated => format!(
            "kubelet: {kubelet}: what passed shows the simulator does what the kubelet does; \
             real nodes (--node-kind real) or a real cluster show it of Kubernetes' kubelet"
        ),
        crate::cluster::Kubelet::Real => format!("kubelet: {kubelet}"),
    }
}

/// What the reports say about the run: the cluster, its version, its nodes
/// and gates.
async fn run_properties(
    cluster: &Cluster,
    env: &crate::cluster::Environment,
) -> Vec<(String, String)> {
    let version = match cluster.client().apiserver_version().await {
        Ok(v) => v.git_version,
        Err(e) => format!("unknown ({e})"),
    };
    vec![
        (
            "dra-e2e.version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
        ("cluster".to_owned(), cluster.describe()),
        ("kubernetes.version".to_owned(), version),
        (
            "kubelet.version".to_owned(),
            env.kubelet_version
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_else(|| "unknown".to_owned()),
        ),
        ("kubelet".to_owned(), env.kubelet.to_string()),
        ("nodes.ready".to_owned(), env.ready_nodes.to_string()),
        (
            "nodes.container-runtime".to_owned(),
            env.container_runtime().to_string(),
        ),
        (
            "feature-gates".to_owned(),
            env.enabled_gates
                .as_ref()
                .map(|g| g.join(","))
                .unwrap_or_else(|| "unknown (not a local cluster)".to_owned()),
        ),
    ]
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

/// How long after the last scenario a local component's exit may take to
/// be seen (its process reaped and the news passed on): milliseconds.
const DEATH_SEEN_WITHIN: Duration = Duration::from_millis(300);

/// Runs the scenarios until they are done or something stops them; a stop
/// starts no new scenario and gives the running ones a bounded teardown.
/// Returns why they stopped early, if they did, and the ending's deadline,
/// which starts here.
async fn scenarios(
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
            crate::note!(
                "dra-e2e: --deadline {} passed; tearing down running scenarios",
                humantime::format_duration(args.deadline)
            );
            args.teardown_timeout
        }
        Stop::Interrupted => args.teardown_timeout,
        Stop::Died(what) => {
            crate::note!(
                "\ndra-e2e: {what}\ndra-e2e: the cluster cannot work without it; stopping the run"
            );
            DEAD_CLUSTER_TEARDOWN
        }
    };
    interrupt.cancel();
    let bound = ending.left(cap);
    if !finished && tokio::time::timeout(bound, run).await.is_err() {
        crate::note!(
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

/// Waits for the checks still going on for scenarios that ended (their
/// drivers' slices wiped); a signal cuts the wait short.
/// Lets the last scenarios' teardowns finish; only the run's ending
/// deadline or a second Ctrl-C (which exits at once) cut them short.
async fn teardowns(ctx: &steps::Context) {
    let running = &ctx.teardowns;
    if !running.is_empty() {
        crate::note!(
            "dra-e2e: waiting for the teardown of {} ended scenario(s)",
            running.len()
        );
    }
    running.finish().await;
}

async fn checks_after_scenarios(
    ctx: &steps::Context,
    mut signal_count: tokio::sync::watch::Receiver<u32>,
) {
    let checks = &ctx.after_scenarios;
    checks.close();
    if checks.is_empty() {
        return;
    }
    signal_count.mark_unchanged();
    crate::note!(
        "dra-e2e: waiting for {} driver(s) of ended scenarios to have their slices wiped (Ctrl-C stops waiting)",
        checks.len()
    );
    tokio::select! {
        _ = checks.wait() => {}
        _ = signal_count.changed() => crate::note!("dra-e2e: not waiting for the drivers' slices to be wiped"),
    }
}

/// Removes the run's node host pods once every driver stopped; what fails
/// is said (the leak check then names what is left).
async fn remove_node_hosts(cluster: &Cluster) {
    if let Err(e) = cluster.remove_node_hosts().await {
        println!("{e:#}");
    }
}

/// After the scenarios: waits for their namespaces to go; a signal cuts the
/// wait short.
async fn wait_namespaces(
    cluster: &Cluster,
    run_id: &str,
    mut signal_count: tokio::sync::watch::Receiver<u32>,
) {
    // A signal from here on cuts the wait short.
    signal_count.mark_unchanged();
    crate::note!("dra-e2e: waiting for the run's namespaces to go (Ctrl-C stops waiting)");
    tokio::select! {
        r = cluster.wait_namespaces_gone(run_id) => {
            if let Err(e) = r {
                crate::note!("dra-e2e: {e}");
            }
        }
        _ = signal_count.changed() => crate::note!("dra-e2e: not waiting for the namespaces to go"),
    }
}

/// Checks nothing of the run is left. True when something was.
async fn leak_check(cluster: &Cluster, args: &RunArgs, ctx: &steps::Context) -> bool {
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

/// The pack's closer checks (`under_test::device_check`) that this run
/// cannot make for its driver, and why: the runner sees a driver's answers
/// and CDI specs only when it hosts the driver or stands in front of it, and
/// repeats calls only from in front of it.
fn unchecked(under: &crate::harness::under_test::UnderTest) -> Vec<String> {
    if under.interposed.is_some() {
        return Vec::new();
    }
    if under.is_builtin() {
        return vec![
            "prepare and unprepare asked twice (idempotency): only the interposer repeats \
             calls, in front of a driver the runner does not host"
                .to_owned(),
        ];
    }
    let how = match under.profile.interposable() {
        Ok(()) => "run with --interpose".to_owned(),
        Err(why) => format!("the interposer cannot stand in front of it: {why}"),
    };
    vec![format!(
        "the driver's NodePrepareResources answers against the claims' allocations, prepare and \
         unprepare asked twice (idempotency), and its CDI specs on the nodes after prepare and \
         unprepare: the runner sees them only in front of the driver ({how})"
    )]
}
