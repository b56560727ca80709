//! The product's main flow: options, cluster, scenarios, reports, exit code.
//!
//! This module holds the run from end to end ([`run`]); its stages are
//! modules of their own: what is selected (`selection`), what is checked
//! and built before the cluster starts (`before_cluster`), the run on the
//! cluster (`on_cluster`), its ending and deadlines (`ending`) and what
//! the run says about itself (`reports`).
pub mod author;
mod before_cluster;
pub mod chaos;
pub mod clean;
pub mod cli;
pub mod cluster_up;
mod ending;
pub mod feature_source;
pub mod features;
pub mod history;
pub mod job;
pub mod job_pod;
pub mod mutants;
mod on_cluster;
pub mod options;
pub mod preflight;
pub mod profile_cli;
mod reports;
mod selection;
pub mod setup;
pub mod shard;
pub mod suggest;
pub mod upstream;

use std::sync::Arc;
use std::time::Instant;

use cucumber::writer;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::harness::under_test::UnderTest;
use crate::report;
use before_cluster::{check_outputs_and_host, driver_profile, refused_gates};
use cli::RunArgs;
use ending::{DEFAULT_TEARDOWN_TIMEOUT, Ending, Signals};
use history::History;
use on_cluster::run_on;
use selection::{
    Selection, Typed, check_selection, list, load_features, nothing_selected, selection,
};

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
            crate::report::note!(
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
        crate::report::note!("dra-e2e: {note}");
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
            crate::report::note!(
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
        crate::report::note!(
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
            crate::report::note!("\ndra-e2e: interrupted while starting the cluster; stopped it");
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
                    crate::report::note!(
                        "\ndra-e2e: interrupted; tearing down running scenarios (Ctrl-C again to stop at once)"
                    );
                } else {
                    crate::report::note!("\ndra-e2e: stopping now");
                    for note in cluster.kill_now() {
                        crate::report::note!("dra-e2e: {note}");
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
            crate::report::note!("dra-e2e: {overrun}; stopping the cluster at once");
            for note in cluster.kill_now() {
                crate::report::note!("dra-e2e: {note}");
            }
            handler.abort();
            return ended.map(|_| 1);
        }
    };
    handler.abort();
    for note in &stopped.notes {
        crate::report::note!("dra-e2e: {note}");
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
