use std::io::IsTerminal as _;
use std::process::ExitCode;

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Above the status line, never on it.
        .with_writer(dra_e2e::report::terminal::LogWriter)
        // Colour codes only for a terminal, not in CI logs or files.
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn main() -> ExitCode {
    use dra_e2e::runner::{self, cli::Command};
    // The cluster crate's first-run builds are said under the status line,
    // as the runner's own are.
    dra_e2e::cluster::progress::set_sink(dra_e2e::report::terminal::note);
    let (cli, matches) =
        runner::cli::try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    // A command's option given where it does nothing is refused before the
    // command starts anything (the run checks its own, knowing its cluster).
    if cli.command.is_some()
        && let Err(r) = runner::options::check_command(&matches)
    {
        eprintln!("error: {r}");
        return ExitCode::from(runner::options::REFUSAL_EXIT);
    }
    let result: anyhow::Result<i32> = match cli.command {
        Some(Command::ProxyAgent(a)) => {
            init_tracing("info");
            dra_e2e::agent::proxy_agent::cli_main(a.args).map(|()| 0)
        }
        // Sets up its own logging: info, without the kube client's errors
        // for every 5xx of an apiserver that is still starting.
        Some(Command::Cluster(a)) => runner::cluster_up::cli_main(a).map(|()| 0),
        // Run in a pod by the real-node tests: reaches the API server with
        // the in-cluster config, as a DaemonSet driver does.
        Some(Command::InClusterCheck(a)) => {
            init_tracing("warn");
            dra_e2e::cluster::real_node::in_cluster::cli_main(a.args)
        }
        // Run in the pod of `dra-e2e job`; the runner it starts logs as a run does.
        Some(Command::JobPod(a)) => {
            init_tracing("warn");
            runner::job_pod::cli_main(a.args)
        }
        Some(Command::Job(a)) => {
            init_tracing("warn,kube_client::client::builder=off");
            runner::job::cli_main(a)
        }
        Some(Command::Setup(a)) => {
            init_tracing("warn");
            runner::setup::cli_main(a)
        }
        Some(Command::Clean(a)) => runner::clean::cli_main(a),
        Some(Command::Steps(a)) => runner::author::steps(a.markdown).map(|()| 0),
        Some(Command::Check(a)) => runner::author::check(a),
        Some(Command::Features(a)) => runner::author::features_command(a).map(|()| 0),
        Some(Command::Upstream(a)) => runner::upstream::cli_main(a),
        Some(Command::Mutants(a)) => runner::mutants::cli_main(&a),
        Some(Command::Profile(a)) => runner::profile_cli::cli_main(a),
        Some(Command::Image(a)) => dra_e2e::cluster::images::cli::cli_main(a),
        Some(Command::Options(a)) => runner::options::cli_main(&a).map(|()| 0),
        Some(Command::Completions(a)) => runner::cli::completions(&a).map(|()| 0),
        None => match tokio::runtime::Runtime::new() {
            Ok(rt) => {
                // Scenario output owns stdout; logs go to stderr, warnings
                // only unless RUST_LOG asks for more. kube-rs warns of what
                // an API server restarting does to watches, which start
                // again: the client of a stream that ended ("eof in poll",
                // "timeout in poll") and of a body that did not parse (the
                // call returns that error too); the watcher of each error
                // it starts again after (a 403 of a restarted API server
                // whose RBAC is not loaded yet), which reaches the code
                // that watches, whose waits say what they last saw.
                init_tracing(
                    "warn,kube_client::client::builder=off,kube_client::client=error,\
                     kube_runtime::watcher=error",
                );
                rt.block_on(runner::run(cli.run, &matches))
            }
            Err(e) => Err(anyhow::anyhow!("starting the async runtime: {e}")),
        },
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {}", dra_e2e::report::error_message(&e));
            // An option refused is a usage error, as clap's are.
            match e.downcast_ref::<runner::options::Refusal>() {
                Some(_) => ExitCode::from(runner::options::REFUSAL_EXIT),
                None => ExitCode::FAILURE,
            }
        }
    }
}
