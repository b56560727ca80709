//! The runner's own options. They are merged with cucumber's (`--tags`,
//! `--name`, `--concurrency`, `--fail-fast`, `--retry`, `-v`, ...) into one
//! `--help`.
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::{ClusterChoice, ConnectOptions};
use crate::proxy::pods::manifest::DEFAULT_IMAGE as DEFAULT_PROXY_IMAGE;

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Feature file or directory of feature files to run; repeat for several.
    #[arg(long, value_name = "PATH", default_value = "features", action = clap::ArgAction::Append)]
    pub features: Vec<PathBuf>,

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

    /// The driver under test, from a driver profile (docs/driver-profile.md).
    /// Without it, and without --driver-name, runs test the suite's own
    /// driver (profiles/builtin.yaml).
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

    /// Put the runner's interposer between the kubelet and the driver under
    /// test: the driver registers in a directory of the runner's choosing
    /// (its profile's registrationDir) and every kubelet call passes the
    /// runner, which counts, fails, stalls, delays or cuts it on demand, so
    /// that scenarios tagged @Interposed run against the driver
    /// (docs/interposer.md).
    #[arg(long, requires = "profile")]
    pub interpose: bool,

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

    /// Local cluster: directory with etcd, kube-apiserver, kube-scheduler and
    /// kube-controller-manager (default: the cache filled by `make controlplane`).
    #[arg(long, value_name = "DIR", env = "DRA_E2E_BINARIES_DIR")]
    pub binaries_dir: Option<PathBuf>,

    /// Local cluster: how long a simulated kubelet waits before wiping the
    /// ResourceSlices of a driver whose plugin went away (the kubelet's is 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "3s")]
    pub wipe_delay: Duration,

    /// Write a JUnit XML report (one test case per scenario).
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

    /// Real cluster: image of the proxy pods (upstream's hostpathplugin, or one carrying `dra-e2e proxy-agent`).
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_PROXY_IMAGE)]
    pub proxy_image: String,

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
            wipe_delay: self.wipe_delay,
            keep_files: self.keep_cluster_files,
            kubelet_root: self.kubelet_root_dir.clone(),
            proxy_image: self.proxy_image.clone(),
        }
    }
}

pub const SUBCOMMANDS_HELP: &str = "\
Other commands:
  dra-e2e setup [--node-kind real]  build what the local cluster needs (the first run does it too)
  dra-e2e steps [--markdown]    print the step catalogue (patterns, descriptions, examples;
                                --markdown: as docs/steps.md)
  dra-e2e check [PATH...]       check feature files for undefined/ambiguous steps and unknown tags
  dra-e2e upstream [--write F]  the table of upstream's tests and their scenarios
                                (docs/upstream-tests.md)
  dra-e2e cluster up            start the local cluster and keep it running until Ctrl-C
  dra-e2e clean                 remove what killed runs left on this host
  dra-e2e profile check|show    check a driver profile, or print one from --driver-name
  dra-e2e image --binary P --reference R --out F
                                an OCI image archive from a static binary, for real local nodes
  dra-e2e proxy-agent ...       the socket proxy agent used inside proxy pods and by the local cluster

Examples:
  dra-e2e --tags @DynamicResourceAllocation
  dra-e2e --tags '@DynamicResourceAllocation and not @slow' --junit junit.xml
  dra-e2e --cluster kubeconfig --kubeconfig ~/.kube/kind --tags '@FeatureGate:DRADeviceTaints'
  dra-e2e --list --tags 'not @KubeletMinVersion:1.34'
  dra-e2e --cluster kubeconfig --profile my-driver.yaml --tags @DriverConformance";
