//! `dra-e2e cluster …`: the local cluster for people, e.g. to try a driver or
//! a scenario by hand with kubectl.
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;

use crate::cluster::NodeKind;
use crate::cluster::local::{FeatureGates, LocalCluster, LocalClusterOptions};

/// The options of `dra-e2e cluster`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Start the local cluster and keep it running until Ctrl-C",
    long_about = "The local cluster for people: start it, e.g. to try a driver or a scenario \
                  by hand with kubectl."
)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start etcd, kube-apiserver, kube-scheduler and kube-controller-manager
    /// and run until Ctrl-C (SIGINT) or SIGTERM.
    Up(UpArgs),
}

#[derive(Debug, clap::Args)]
struct UpArgs {
    /// Directory with etcd, kube-apiserver, kube-scheduler and
    /// kube-controller-manager [default: $DRA_E2E_BINARIES_DIR, else the
    /// cache `make controlplane` builds into]
    #[arg(long, value_name = "DIR")]
    binaries_dir: Option<PathBuf>,

    /// Feature gates for every component, e.g. DRADeviceTaints=true,DRAAdminAccess=false
    #[arg(long, value_name = "NAME=BOOL,...", default_value = "")]
    feature_gates: FeatureGates,

    /// kube-apiserver --runtime-config entries, comma-separated
    /// [default: resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true]
    #[arg(long, value_name = "API=BOOL,...", value_delimiter = ',')]
    runtime_config: Option<Vec<String>>,

    /// Keep the cluster's directory (logs, PKI, kubeconfig) after stopping
    #[arg(long)]
    keep: bool,

    /// Nodes to run (their kubelet dirs are below the cluster's directory)
    #[arg(long, value_name = "N", default_value_t = 2)]
    nodes: usize,

    /// Simulated kubelets, or real ones (kubelet + containerd + runc, as root)
    #[arg(long, value_enum, value_name = "KIND", default_value = "simulated")]
    node_kind: NodeKind,

    /// Real nodes: an OCI image archive to import into every node; repeatable
    #[arg(long, value_name = "FILE", action = clap::ArgAction::Append)]
    image_archive: Vec<PathBuf>,

    /// How long a simulated kubelet waits before wiping the slices of a driver that went away
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "3s")]
    wipe_delay: std::time::Duration,
}

/// Entry point of the `cluster` subcommand.
pub fn cli_main(cli: ClusterArgs) -> anyhow::Result<()> {
    init_tracing();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("creating the async runtime")?;
    match cli.command {
        ClusterCommand::Up(args) => {
            // The first `cluster up` on a machine builds what it needs, as a run does.
            super::setup::ensure(
                super::setup::Part::ControlPlane,
                args.binaries_dir.as_deref(),
                None,
            )?;
            if args.node_kind == crate::cluster::NodeKind::Real {
                super::setup::ensure(super::setup::Part::Node, None, None)?;
            }
            runtime.block_on(up(args))
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,kube_client::client::builder=off")
    });
    // Already initialised when called from a program that set up tracing.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Install the handlers before the slow start, so an early Ctrl-C still
    // goes through the orderly stop instead of killing the process.
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;

    let mut options = LocalClusterOptions {
        binaries_dir: args.binaries_dir,
        feature_gates: args.feature_gates,
        keep_files: args.keep,
        ..LocalClusterOptions::default()
    };
    if let Some(runtime_config) = args.runtime_config {
        options.runtime_config = runtime_config;
    }

    let start = LocalCluster::start(options);
    let cluster = tokio::select! {
        result = start => result.context("starting the local cluster")?,
        // Dropping the start future cleans up whatever had been started.
        _ = interrupt.recv() => anyhow::bail!("interrupted while starting"),
        _ = terminate.recv() => anyhow::bail!("terminated while starting"),
    };

    let mut real = None;
    let mut nodes = Vec::new();
    match args.node_kind {
        NodeKind::Simulated => {
            match cluster
                .start_nodes(args.nodes, |c| c.wipe_delay = args.wipe_delay)
                .await
            {
                Ok(n) => nodes = n.into_nodes(),
                Err(e) => {
                    let _ = cluster.stop().await;
                    return Err(e).context("starting the simulated nodes");
                }
            }
        }
        NodeKind::Real => {
            let options = crate::cluster::real_node::RealNodesOptions {
                extra_archives: args.image_archive.clone(),
                ..crate::cluster::real_node::RealNodesOptions::new(args.nodes)
            };
            let start = crate::cluster::real_node::RealNodes::start(&cluster, &options);
            let started = tokio::select! {
                r = start => r,
                _ = interrupt.recv() => Err(anyhow::anyhow!("interrupted while starting the real nodes")),
                _ = terminate.recv() => Err(anyhow::anyhow!("terminated while starting the real nodes")),
            };
            match started {
                Ok(r) => real = Some(r),
                Err(e) => {
                    let _ = cluster.stop().await;
                    return Err(e);
                }
            }
        }
    }

    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    println!("local cluster is up at {}", cluster.server_url());
    for n in &nodes {
        println!(
            "  node:       {} (kubelet dir {})",
            n.name(),
            n.root_dir().display()
        );
    }
    for n in real.iter().flat_map(|r| r.nodes()) {
        println!(
            "  real node:  {} at {} (files and logs in {})",
            n.name,
            n.net.node_ip,
            n.dir.display()
        );
    }
    println!("  kubeconfig: {kubeconfig}");
    println!("  logs:       {}", cluster.log_dir().display());
    if !cluster.feature_gates().is_empty() {
        println!("  gates:      {}", cluster.feature_gates());
    }
    println!("  try:        kubectl --kubeconfig {kubeconfig} get resourceslices,deviceclasses");
    println!("press Ctrl-C to stop");

    let crashed = tokio::select! {
        _ = interrupt.recv() => None,
        _ = terminate.recv() => None,
        e = cluster.component_exited() => Some(e),
    };
    println!("stopping the local cluster");
    for n in nodes {
        if let Err(e) = n.stop().await {
            eprintln!("stopping simulated node: {e}");
        }
    }
    if let Some(mut r) = real {
        let left = tokio::task::spawn_blocking(move || r.stop()).await?;
        if !left.is_empty() {
            eprintln!("left behind by the real nodes: {}", left.join(", "));
        }
    }
    let kept = cluster.keeps_files().then(|| cluster.dir().to_owned());
    let stopped = cluster.stop().await;
    if let Some(dir) = kept {
        eprintln!("local cluster files kept in {}", dir.display());
    }
    if let Some(e) = crashed {
        return Err(e).context("a control-plane component stopped unexpectedly");
    }
    stopped.context("stopping the local cluster")
}
