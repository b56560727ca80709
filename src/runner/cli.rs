//! The runner's own options. They are merged with cucumber's (`--tags`,
//! `--name`, `--concurrency`, `--fail-fast`, `--retry`, `-v`, ...) into one
//! `--help`.
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::host::kube_version::KubeVersion;
use crate::cluster::proxy::pods::DEFAULT_IMAGE as DEFAULT_PROXY_IMAGE;
use crate::cluster::{ClusterChoice, ConnectOptions};

/// Which driver a run tests: the options `dra-e2e` and `dra-e2e job` share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DriverArgs {
    /// The driver under test, from a driver profile (docs/driver-profile.md).
    /// Without it, and without --driver-name, runs test the suite's own
    /// driver (profiles/builtin.yaml), which `dra-e2e job` cannot host.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["driver_name", "device_class"])]
    pub profile: Option<PathBuf>,

    /// KEP-5970's invocation: the name of a driver already installed in the
    /// kubeconfig cluster (with --device-class; the rest of its profile is
    /// defaulted and printed).
    #[arg(long, value_name = "NAME", requires = "device_class")]
    pub driver_name: Option<String>,

    /// With --driver-name: the DeviceClass that selects the driver's devices.
    #[arg(long, value_name = "CLASS", requires = "driver_name")]
    pub device_class: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Feature file or directory of feature files to run instead of the
    /// built-in ones; repeat for several.
    #[arg(long, value_name = "PATH", action = clap::ArgAction::Append)]
    pub features: Vec<PathBuf>,

    /// Feature file or directory of feature files to run besides the
    /// built-in ones (or those of --features), e.g. a driver repository's
    /// own scenarios; repeat for several.
    #[arg(long, value_name = "PATH", action = clap::ArgAction::Append)]
    pub add_features: Vec<PathBuf>,

    /// Print the selected scenarios with their tags and locations, then exit (no cluster needed).
    #[arg(long)]
    pub list: bool,

    /// Run only shard I of N of the selected scenarios (e.g. 2/4), for CI
    /// matrices; a scenario's shard depends only on its own feature, title
    /// and example row.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<super::shard::Shard>,

    /// Accept a run that tests nothing (no scenario selected, or every one
    /// skipped) as a success, e.g. for CI shards that may be empty.
    #[arg(long)]
    pub allow_empty: bool,

    /// Cluster to run against.
    #[arg(long, value_enum, default_value = "auto", value_name = "KIND")]
    pub cluster: ClusterChoice,

    /// Kubeconfig of a real cluster (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    #[command(flatten)]
    pub driver: DriverArgs,

    /// Put the runner's interposer between the kubelet and the driver under
    /// test: the driver registers in a directory of the runner's choosing
    /// (its profile's registrationDir) and every kubelet call passes the
    /// runner, which counts, fails, stalls, delays or cuts it on demand, so
    /// that scenarios tagged @Interposed run against the driver
    /// (docs/interposer.md).
    #[arg(long, requires = "profile")]
    pub interpose: bool,

    /// With --interpose: break the interposer on purpose, to see the
    /// scenarios that must notice fail (docs/interposer.md#broken-variants):
    /// `direct` (the kubelet reaches the driver directly),
    /// `first-instance-only` (a driver's second instance, as in a surge
    /// rollout, is never registered), `no-reregister` (a driver pod that
    /// restarts keeps its old registration: the kubelet never sees it).
    #[arg(long, value_name = "FAULT", requires = "interpose", value_parser = parse_interposer_fault, default_value = "none")]
    pub interposer_fault: crate::plugin::interposer::InterposerFault,

    /// Break the suite's own ResourceSlice controller on purpose, to see
    /// the checks of upstream's "creates slices" scenarios fail
    /// (docs/development.md): `churn` (it rewrites a slice every second
    /// although nothing changed), `no-shrink` (it ignores being told to
    /// publish fewer slices).
    #[arg(long, value_name = "FAULT", value_parser = parse_slice_controller_fault, default_value = "none")]
    pub slice_controller_fault: crate::harness::driver::slices::ControllerFault,

    /// Local cluster: restart control-plane components at these moments
    /// after the scenarios start, to show that a run rides them out:
    /// `COMPONENT@TIME`, comma-separated or repeated (e.g.
    /// `kube-apiserver@20s,kube-scheduler@1m`; components kube-apiserver,
    /// kube-scheduler, kube-controller-manager).
    #[arg(long, value_name = "COMPONENT@TIME", value_delimiter = ',', action = clap::ArgAction::Append, value_parser = super::chaos::parse_one)]
    pub restart_control_plane: Vec<super::chaos::Planned>,

    /// Local cluster, real nodes: restart a node's kubelet at these moments
    /// after the scenarios start, to show that the scenarios sharing the
    /// node ride it out: `[NODE]@TIME`, comma-separated or repeated; no
    /// node is one the runner picks at random among those no scenario owns
    /// (e.g. `@30s,dra-e2e-node-2@1m`).
    #[arg(long, value_name = "[NODE]@TIME", value_delimiter = ',', action = clap::ArgAction::Append, value_parser = super::chaos::parse_kubelet_one)]
    pub restart_kubelet: Vec<super::chaos::Planned>,

    /// Real nodes: break the node hosts on purpose, to see the
    /// node-operation scenarios that must notice fail: `exec-agents`
    /// (sockets served by agents exec'd through the kubelet, as before node
    /// hosts), `no-redial` (a socket's connections are not dialled again
    /// once the first ones are used or lost).
    #[arg(long, value_enum, value_name = "FAULT", default_value = "none")]
    pub node_host_fault: crate::cluster::proxy::NodeHostFault,

    /// Local cluster: number of nodes.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub nodes: usize,

    /// Local cluster: simulated kubelets, or real ones (kubelet + containerd +
    /// runc, as root; `make node` builds them).
    #[arg(long, value_enum, value_name = "KIND", default_value = "simulated")]
    pub node_kind: crate::cluster::NodeKind,

    /// Local real nodes: an OCI image archive to import into every node
    /// (e.g. the hostpathplugin image for `--proxy-image`); repeatable.
    #[arg(long, value_name = "FILE", action = clap::ArgAction::Append)]
    pub image_archive: Vec<PathBuf>,

    /// Local cluster: feature gates for every component, e.g. `DRAConsumableCapacity=true`.
    #[arg(long, value_name = "GATES", value_delimiter = ',')]
    pub feature_gates: Vec<String>,

    #[command(flatten)]
    pub versions: VersionArgs,

    /// Local cluster: directory with etcd, kube-apiserver, kube-scheduler and
    /// kube-controller-manager (default: the cache filled by `make controlplane`).
    #[arg(long, value_name = "DIR", env = "DRA_E2E_BINARIES_DIR")]
    pub binaries_dir: Option<PathBuf>,

    /// Local cluster: how long a simulated kubelet waits before wiping the
    /// ResourceSlices of a driver whose plugin went away (the kubelet's is 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "3s")]
    pub wipe_delay: Duration,

    /// Write a JUnit XML report (one test case per scenario; its time is
    /// the scenario's own, without what it waited for a slot or its nodes).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Write an HTML report: one self-contained file with the summary, a
    /// timeline of the scenarios in concurrency lanes, and per scenario its
    /// steps, failure and artifacts.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Write a Cucumber JSON report.
    #[arg(long = "cucumber-json", value_name = "FILE")]
    pub cucumber_json: Option<PathBuf>,

    /// Where failed scenarios leave their artifacts (events, objects, plugin calls, kubelet log).
    #[arg(long, value_name = "DIR", default_value = "target/dra-e2e-artifacts")]
    pub artifacts: PathBuf,

    /// Keep a failed scenario's namespace and driver for debugging (their names are printed).
    #[arg(long)]
    pub keep_on_failure: bool,

    /// Real cluster: the kubelet's root directory on the nodes.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/kubelet")]
    pub kubelet_root_dir: PathBuf,

    /// Real nodes: image of the node host pods that proxy the plugin
    /// sockets (upstream's hostpathplugin, or one carrying `dra-e2e-agent`)
    /// [default: upstream's hostpathplugin:v1.17.1; on the local cluster's
    /// real nodes the runner's own agent image].
    #[arg(long, value_name = "IMAGE")]
    pub proxy_image: Option<String>,

    /// Real cluster: the nodes' CDI spec directory, as their container
    /// runtime is configured (containerd's `cdi_spec_dirs`).
    #[arg(long, value_name = "DIR", default_value = "/var/run/cdi")]
    pub cdi_dir: String,

    /// Default limit of one step (waits inside a step have their own, shorter deadlines).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10m")]
    pub step_timeout: Duration,

    /// Limit of the whole run; when it passes, running scenarios are torn down and reports written.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "2h")]
    pub deadline: Duration,

    /// Limit of the run's ending, from the moment its scenarios are done or
    /// told to stop: the running scenarios' teardown, the wait for their
    /// namespaces, the leak check and stopping the cluster. When it passes,
    /// the cluster is stopped at once and the run fails.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5m")]
    pub teardown_timeout: Duration,

    /// Local cluster: keep its processes' files after the run and print where they are.
    #[arg(long)]
    pub keep_cluster_files: bool,

    /// Print the wall time, time per scenario (median, slowest five) and where teardown time goes.
    #[arg(long)]
    pub timings: bool,
}

impl RunArgs {
    /// Where the run's scenarios come from (the built-in set unless
    /// --features names others).
    pub fn feature_sources(&self) -> Vec<super::feature_source::FeatureSource> {
        super::feature_source::FeatureSource::resolve(&self.features, &self.add_features)
    }

    /// How the cluster is reached, as these options say.
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            choice: self.cluster,
            kubeconfig: self.kubeconfig.clone(),
            nodes: self.nodes,
            node_kind: self.node_kind,
            image_archives: self.image_archive.clone(),
            cdi_dir: self.cdi_dir.clone(),
            feature_gates: self.feature_gates.clone(),
            binaries_dir: self.binaries_dir.clone(),
            node_binaries_dir: None,
            wipe_delay: self.wipe_delay,
            keep_files: self.keep_cluster_files,
            kubelet_root: self.kubelet_root_dir.clone(),
            proxy_image: self
                .proxy_image
                .clone()
                .unwrap_or_else(|| DEFAULT_PROXY_IMAGE.to_owned()),
            // Given, it is used as it is (real local nodes otherwise swap
            // upstream's name for the runner's own image).
            proxy_image_given: self.proxy_image.is_some(),
            node_host_fault: self.node_host_fault,
        }
    }
}

/// Which Kubernetes the local cluster runs: each version is built from the
/// Go module proxy into the cache the first time it is asked for.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct VersionArgs {
    /// Local cluster: the control plane's Kubernetes, `1.MINOR` (the release
    /// hack/versions.env pins for it) or `v1.MINOR.PATCH` [default: the
    /// pinned KUBE_VERSION].
    #[arg(long, value_name = "VERSION")]
    pub kube_version: Option<KubeVersion>,

    /// Local real nodes: the kubelet's Kubernetes, as --kube-version; at most
    /// three minors older than the control plane, never newer (the version
    /// skew policy) [default: the control plane's].
    #[arg(long, value_name = "VERSION")]
    pub kubelet_version: Option<KubeVersion>,
}

impl VersionArgs {
    /// The version asked for `part`, `None` when the pinned one is meant.
    pub fn for_part(&self, part: super::setup::Part) -> Option<KubeVersion> {
        match part {
            super::setup::Part::ControlPlane => self.kube_version,
            super::setup::Part::Node => self.kubelet_version.or(self.kube_version),
        }
    }

    /// Refuses a kubelet the control plane cannot have (the version skew
    /// policy), before anything is built or started. Where the versions
    /// apply at all is the options table's to say ([`super::options`]).
    pub fn check(&self) -> anyhow::Result<()> {
        let control_plane = self.kube_version.unwrap_or_else(KubeVersion::pinned);
        if let Some(kubelet) = self.kubelet_version {
            KubeVersion::check_kubelet_skew(control_plane, kubelet)
                .map_err(|e| anyhow::anyhow!("--kubelet-version: {e}"))?;
        }
        Ok(())
    }
}

/// Examples under `dra-e2e --help`.
pub const EXAMPLES: &str = "\
Examples:
  dra-e2e --tags @DynamicResourceAllocation
  dra-e2e --tags '@DynamicResourceAllocation and not @slow' --junit junit.xml
  dra-e2e --cluster kubeconfig --kubeconfig ~/.kube/kind --tags '@FeatureGate:DRADeviceTaints'
  dra-e2e --list --tags 'not @KubeletMinVersion:1.34'
  dra-e2e --cluster kubeconfig --profile my-driver.yaml --tags @DriverConformance
  dra-e2e check features/my.feature
  dra-e2e <COMMAND> --help";

const ABOUT: &str = "Runs Gherkin scenarios that test Kubernetes Dynamic Resource Allocation \
                     against a local cluster (default) or a real one.";

/// `dra-e2e`: without a command it runs scenarios, with all of [`RunArgs`]
/// and cucumber's options; the commands do the rest.
#[derive(Debug, clap::Parser)]
#[command(
    name = "dra-e2e",
    about = ABOUT,
    long_about = ABOUT,
    after_help = EXAMPLES,
    // `dra-e2e --tags @x setup` is a mistake, not a run with a stray word.
    args_conflicts_with_subcommands = true,
)]
pub struct Cli {
    /// The run's options (no command given).
    #[command(flatten)]
    pub run: super::Opts,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The options of `dra-e2e steps`.
#[derive(Debug, clap::Args)]
pub struct StepsArgs {
    /// Print the catalogue as Markdown, as docs/steps.md holds it.
    #[arg(long)]
    pub markdown: bool,
}

/// The commands. Those whose options live in their own module take their
/// `about` and `long_about` from there (a doc comment here would replace
/// them).
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Setup(super::setup::SetupArgs),
    /// Print the step catalogue: every step's pattern, description and example.
    Steps(StepsArgs),
    Check(super::author::CheckArgs),
    Features(super::author::FeaturesArgs),
    Upstream(super::upstream::UpstreamArgs),
    Mutants(super::mutants::MutantsArgs),
    Cluster(super::cluster_up::ClusterArgs),
    Clean(super::clean::CleanArgs),
    Profile(super::profile_cli::ProfileArgs),
    Image(crate::cluster::images::cli::ImageArgs),
    Job(super::job::JobArgs),
    /// Print where each option applies: on which cluster, nodes and driver.
    Options(super::options::OptionsArgs),
    /// Print a shell completion script, e.g. `dra-e2e completions bash > ~/.local/share/bash-completion/completions/dra-e2e`.
    Completions(CompletionsArgs),
    /// The socket proxy agent of proxy pods and local nodes (run by the runner).
    #[command(hide = true, disable_help_flag = true)]
    ProxyAgent(Passthrough),
    /// Run in a pod by the real-node tests: reaches the API server as a driver does.
    #[command(hide = true, disable_help_flag = true)]
    InClusterCheck(Passthrough),
    /// Run in the pod of `dra-e2e job`: runs the runner, stores its results in ConfigMaps.
    #[command(hide = true, disable_help_flag = true)]
    JobPod(Passthrough),
}

/// The arguments of an internal command, handed as they are to its own
/// parser (`proxy-agent --help` is the agent's help).
#[derive(Debug, clap::Args)]
pub struct Passthrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<std::ffi::OsString>,
}

/// The options of `dra-e2e completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The whole command tree. cucumber's options (`--tags`, `--concurrency`,
/// ...) are the run's: cucumber makes them global, which would offer them
/// to every command.
pub fn command() -> clap::Command {
    use clap::CommandFactory as _;
    let mut cmd = Cli::command();
    let global: Vec<String> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().to_string())
        .collect();
    for id in global {
        cmd = cmd.mut_arg(id, |a| a.global(false));
    }
    cmd
}

/// Parses a command line (the program's name first). The matches are
/// returned too: the run reads how some options were given from them.
pub fn try_parse_from<I, T>(args: I) -> Result<(Cli, clap::ArgMatches), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    match parse_with(command(), &args) {
        // The run's options come from the environment too (`--tags` from
        // CUCUMBER_FILTER_TAGS): one the run could not take is no reason
        // for a command to fail.
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let without_env = command().mut_arg("tags", |a| a.env(None));
            match parse_with(without_env, &args) {
                Ok(parsed) if parsed.0.command.is_some() => Ok(parsed),
                _ => Err(e),
            }
        }
        parsed => parsed,
    }
}

fn parse_with(
    mut cmd: clap::Command,
    args: &[std::ffi::OsString],
) -> Result<(Cli, clap::ArgMatches), clap::Error> {
    use clap::FromArgMatches as _;
    let matches = cmd.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))?;
    Ok((cli, matches))
}

/// `dra-e2e completions SHELL`: the completion script on stdout. It
/// completes the commands people use, not the runner's internal ones.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    let full = command();
    let mut shown = clap::Command::new("dra-e2e")
        .about(full.get_about().cloned().unwrap_or_default())
        .args(full.get_arguments().cloned());
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        shown = shown.subcommand(sub.clone());
    }
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut shown, "dra-e2e", &mut script);
    match std::io::stdout().write_all(&script) {
        // `dra-e2e completions bash | head` is no failure.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("writing the completion script: {e}"))
        }
        _ => Ok(()),
    }
}

/// `--slice-controller-fault`'s value.
fn parse_slice_controller_fault(
    s: &str,
) -> Result<crate::harness::driver::slices::ControllerFault, String> {
    crate::harness::driver::slices::ControllerFault::named(s)
}

/// `--interposer-fault`'s value, by the names the interposer gives its
/// faults.
fn parse_interposer_fault(s: &str) -> Result<crate::plugin::interposer::InterposerFault, String> {
    use crate::plugin::interposer::InterposerFault;
    InterposerFault::ALL
        .iter()
        .find(|(name, _)| *name == s)
        .map(|(_, f)| *f)
        .ok_or_else(|| {
            let names: Vec<&str> = InterposerFault::ALL.iter().map(|(n, _)| *n).collect();
            format!("no interposer fault {s:?}; one of: {}", names.join(", "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<(Cli, clap::ArgMatches), clap::Error> {
        try_parse_from(std::iter::once("dra-e2e").chain(args.iter().copied()))
    }

    fn help_of(args: &[&str]) -> String {
        match parse(args) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.render().to_string(),
            Err(e) => panic!("{args:?}: {e}"),
            Ok(_) => panic!("{args:?}: no help"),
        }
    }

    #[test]
    fn the_tree_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn without_a_command_it_is_the_run_with_its_options() {
        let (cli, matches) = parse(&[
            "--cluster",
            "local",
            "--features",
            "features/kubelet.feature",
            "--tags",
            "@DynamicResourceAllocation and not @slow",
            "-c",
            "3",
            "--step-timeout",
            "1m",
        ])
        .unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.run.custom.cluster, crate::cluster::ClusterChoice::Local);
        assert_eq!(
            cli.run.custom.features,
            [std::path::PathBuf::from("features/kubelet.feature")]
        );
        assert_eq!(cli.run.runner.concurrency, Some(3));
        assert!(cli.run.tags_filter.is_some());
        assert_eq!(
            matches.get_raw("tags").unwrap().next().unwrap(),
            "@DynamicResourceAllocation and not @slow"
        );
        let (cli, _) = parse(&[]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.run.custom.features.is_empty(), "the built-in set");
        let (cli, _) = parse(&["--add-features", "mine", "--add-features", "more"]).unwrap();
        assert!(cli.run.custom.features.is_empty());
        assert_eq!(cli.run.custom.add_features.len(), 2);
    }

    #[test]
    fn every_command_has_its_own_help() {
        for (args, wants) in [
            (
                &["setup", "--help"][..],
                &["dra-e2e setup", "--node-kind"][..],
            ),
            (&["steps", "--help"], &["dra-e2e steps", "step catalogue"]),
            (&["check", "--help"], &["dra-e2e check", "[PATH]..."]),
            (
                &["upstream", "--help"],
                &["--write <FILE>", "--check <FILE>"],
            ),
            (&["cluster", "--help"], &["dra-e2e cluster", "up"]),
            (
                &["cluster", "up", "--help"],
                &["--node-kind", "--keep", "--runtime-config"],
            ),
            (&["clean", "--help"], &["dra-e2e clean", "live run"]),
            (&["profile", "--help"], &["check", "show"]),
            (&["profile", "check", "--help"], &["<FILE>", "--no-files"]),
            (
                &["profile", "show", "--help"],
                &["--driver-name", "--device-class"],
            ),
            (
                &["image", "--help"],
                &["--binary", "--reference", "--out", "--gzip"],
            ),
            (
                &["options", "--help"],
                &["dra-e2e options", "--markdown", "--write"],
            ),
            (
                &["completions", "--help"],
                &["bash", "zsh", "fish", "powershell", "elvish"],
            ),
            (
                &["--help"],
                &["--tags", "--cluster", "--junit", "setup", "completions"],
            ),
        ] {
            let help = help_of(args);
            for want in wants {
                assert!(help.contains(want), "{args:?}: no {want:?} in\n{help}");
            }
            // The run's options are the run's alone.
            if args[0] != "--help" {
                assert!(!help.contains("--concurrency"), "{args:?}:\n{help}");
                assert!(!help.contains("--tags"), "{args:?}:\n{help}");
            }
        }
        // The internal commands are not offered.
        let help = help_of(&["--help"]);
        let commands = &help[help.find("Commands:").unwrap()..help.find("Options:").unwrap()];
        assert!(commands.contains("  setup "), "{commands}");
        for internal in ["proxy-agent", "in-cluster-check", "job-pod"] {
            assert!(!commands.contains(internal), "{commands}");
        }
    }

    #[test]
    fn commands_keep_their_options() {
        let (cli, _) = parse(&["setup", "--node-kind", "real"]).unwrap();
        match cli.command {
            Some(Command::Setup(a)) => assert_eq!(a.node_kind, crate::cluster::NodeKind::Real),
            c => panic!("{c:?}"),
        }
        let (cli, _) = parse(&["check", "features", "tests/fixtures/misspelt"]).unwrap();
        match cli.command {
            Some(Command::Check(a)) => assert_eq!(a.paths.len(), 2),
            c => panic!("{c:?}"),
        }
        let (cli, _) = parse(&["check"]).unwrap();
        match cli.command {
            Some(Command::Check(a)) => {
                assert!(a.paths.is_empty(), "the built-in set");
            }
            c => panic!("{c:?}"),
        }
        for args in [
            &["upstream", "--write", "README.md"][..],
            &["upstream", "--check", "README.md", "--data", "d.tsv"],
            &["cluster", "up", "--node-kind", "real", "--nodes", "2"],
            &["clean"],
            &["profile", "check", "p.yaml", "--no-files"],
            &[
                "profile",
                "show",
                "--driver-name",
                "d",
                "--device-class",
                "c",
            ],
            &[
                "image",
                "--binary",
                "b",
                "--reference",
                "localhost/x:v1",
                "--out",
                "o.tar",
            ],
            &["completions", "zsh"],
        ] {
            parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn internal_commands_get_their_arguments_as_they_are() {
        let (cli, _) = parse(&[
            "proxy-agent",
            "--v=5",
            "--endpoint",
            "/p/dra.sock",
            "--help",
            "-x",
        ])
        .unwrap();
        match cli.command {
            Some(Command::ProxyAgent(a)) => assert_eq!(
                a.args,
                ["--v=5", "--endpoint", "/p/dra.sock", "--help", "-x"]
            ),
            c => panic!("{c:?}"),
        }
        let (cli, _) = parse(&["in-cluster-check"]).unwrap();
        assert!(matches!(cli.command, Some(Command::InClusterCheck(a)) if a.args.is_empty()));
    }

    #[test]
    fn mistakes_are_clap_errors_naming_them() {
        use clap::error::ErrorKind;
        for (args, kind, names) in [
            (&["stup"][..], ErrorKind::InvalidSubcommand, "stup"),
            (&["--bogus"], ErrorKind::UnknownArgument, "--bogus"),
            (&["setup", "--bogus"], ErrorKind::UnknownArgument, "--bogus"),
            (
                &["setup", "--node-kind", "vm"],
                ErrorKind::InvalidValue,
                "vm",
            ),
            (
                &["setup", "--tags", "@x"],
                ErrorKind::UnknownArgument,
                "--tags",
            ),
            (
                &["--tags", "@x", "setup"],
                ErrorKind::ArgumentConflict,
                "setup",
            ),
            (
                &["profile"],
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                "check",
            ),
            (
                &["profile", "check"],
                ErrorKind::MissingRequiredArgument,
                "<FILE>",
            ),
            (&["completions", "tcsh"], ErrorKind::InvalidValue, "tcsh"),
        ] {
            let e = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert_eq!(e.kind(), kind, "{args:?}: {e}");
            assert!(e.render().to_string().contains(names), "{args:?}: {e}");
        }
    }
}
