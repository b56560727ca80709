//! Where each option means something: one table, [`TABLE`], of every option
//! of every command, saying on which cluster and node kind (and, for the
//! run, with which driver deployment) it takes effect. The run and the
//! commands refuse an option given where it does nothing, before anything
//! starts ([`check_run`], [`check_command`]); docs/cli.md's option reference
//! is printed from the same table ([`markdown`], `dra-e2e options
//! --markdown`), and tests keep the table, the command tree and the document
//! equal.
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::cluster::NodeKind;
use crate::cluster::proxy::pods::DEFAULT_IMAGE as UPSTREAM_PROXY_IMAGE;
use crate::profile::Mode;

/// Where a run happens: the cluster and its kind of nodes. A kubeconfig
/// cluster (kind, or any other) has the nodes it was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    LocalSimulated,
    LocalReal,
    Kubeconfig,
}

impl Place {
    pub const ALL: [Place; 3] = [Place::LocalSimulated, Place::LocalReal, Place::Kubeconfig];

    pub fn of(local: bool, node_kind: NodeKind) -> Place {
        match (local, node_kind) {
            (false, _) => Place::Kubeconfig,
            (true, NodeKind::Simulated) => Place::LocalSimulated,
            (true, NodeKind::Real) => Place::LocalReal,
        }
    }

    /// The cluster's kind, as `--cluster` says it.
    pub fn cluster(self) -> &'static str {
        match self {
            Place::LocalSimulated | Place::LocalReal => "local",
            Place::Kubeconfig => "kubeconfig",
        }
    }

    /// The kind of its nodes.
    pub fn nodes(self) -> &'static str {
        match self {
            Place::LocalSimulated => "simulated",
            Place::LocalReal => "real",
            Place::Kubeconfig => "the cluster's own",
        }
    }

    /// How a user gets there.
    fn how(self) -> &'static str {
        match self {
            Place::LocalSimulated => "the local cluster's simulated nodes (the default)",
            Place::LocalReal => "the local cluster's real nodes (--node-kind real)",
            Place::Kubeconfig => "a kubeconfig cluster (--cluster kubeconfig; kind is one)",
        }
    }

    /// A column heading of the generated reference.
    fn heading(self) -> &'static str {
        match self {
            Place::LocalSimulated => "local, simulated nodes",
            Place::LocalReal => "local, real nodes",
            Place::Kubeconfig => "kubeconfig (kind or any)",
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cluster {}, nodes {}", self.cluster(), self.nodes())
    }
}

const EVERYWHERE: &[Place] = &Place::ALL;
const LOCAL: &[Place] = &[Place::LocalSimulated, Place::LocalReal];
const SIMULATED: &[Place] = &[Place::LocalSimulated];
const LOCAL_REAL: &[Place] = &[Place::LocalReal];
const KUBECONFIG: &[Place] = &[Place::Kubeconfig];
const REAL_NODES: &[Place] = &[Place::LocalReal, Place::Kubeconfig];
/// Any driver under test.
const ANY: &[Mode] = &[];
/// The drivers the interposer can stand in front of: those the runner
/// deploys itself.
const DEPLOYED: &[Mode] = &[
    Mode::Builtin,
    Mode::RealNodes,
    Mode::Manifests,
    Mode::SimulatedNodes,
];

/// What a given option is, beyond where: its values and the run around it,
/// for the entries whose verdict depends on them.
pub struct Given<'a> {
    pub place: Place,
    /// The values as typed (none for a flag).
    pub values: Vec<String>,
    /// The image references each `--image-archive` holds.
    pub archives: &'a [(PathBuf, Vec<String>)],
    /// The proxy image, when `--proxy-image` was given.
    pub proxy_image: Option<&'a str>,
    /// The text of the driver profile's manifests (what images they name).
    pub manifests: &'a str,
    /// `--interpose` was given.
    pub interpose: bool,
}

/// A verdict finer than the place: refused with a reason, or taken with a
/// note said once in the run's opening lines.
#[derive(Debug, PartialEq, Eq)]
pub enum Finer {
    Refuse(String),
    Note(String),
}

/// One option of one command and where it applies.
#[derive(Clone)]
pub struct Opt {
    /// The command: `""` for the run, else as typed (`"cluster up"`).
    pub command: &'static str,
    /// As typed: `--image-archive`, or `-v` for an option without a long name.
    pub flag: &'static str,
    /// Where it takes effect. A command of the local cluster (`setup`,
    /// `cluster up`) is at the local place of its own `--node-kind`; the
    /// other commands reach no cluster, and all their options apply.
    pub places: &'static [Place],
    /// The driver deployments (the profile's `deployment.mode`) it takes
    /// effect with; empty: any.
    pub modes: &'static [Mode],
    /// Why it does nothing elsewhere: said when it is refused.
    pub elsewhere: &'static str,
    /// What it means, for the reference.
    pub meaning: &'static str,
    /// Arguments that give it in a test.
    pub example: &'static [&'static str],
    /// A verdict depending on the value, where the place is right.
    pub finer: Option<fn(&Given) -> Option<Finer>>,
}

impl Opt {
    pub fn applies(&self, place: Place, mode: Option<Mode>) -> bool {
        self.places.contains(&place)
            && (self.modes.is_empty() || mode.is_none_or(|m| self.modes.contains(&m)))
    }

    /// Where it applies, in words.
    pub fn where_text(&self) -> String {
        let places = if self.places == EVERYWHERE {
            "every cluster".to_owned()
        } else {
            self.places
                .iter()
                .map(|p| p.how())
                .collect::<Vec<_>>()
                .join(" and ")
        };
        match self.modes {
            [] => places,
            modes => format!(
                "{places}, with a driver whose deployment.mode is {}",
                modes
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

macro_rules! opt {
    ($command:expr, $flag:expr, $places:expr, $modes:expr, $example:expr, $elsewhere:expr, $meaning:expr $(, $finer:expr)?) => {
        Opt {
            command: $command,
            flag: $flag,
            places: $places,
            modes: $modes,
            example: $example,
            elsewhere: $elsewhere,
            meaning: $meaning,
            finer: opt!(@finer $($finer)?),
        }
    };
    (@finer) => { None };
    (@finer $f:expr) => { Some($f) };
}

/// Why a local-cluster option does nothing on a kubeconfig cluster.
const NOT_STARTED: &str = "a kubeconfig cluster is not started by the runner: it has the \
                           nodes, components and settings it was made with";

/// Every option of every command, and where it applies. A test walks the
/// command tree and fails for an option missing here.
pub static TABLE: &[Opt] = &[
    // cucumber's options: the run's selection and execution, on any cluster.
    opt!(
        "",
        "--name",
        EVERYWHERE,
        ANY,
        &["--name", "x"],
        "",
        "`-n REGEX`: scenarios whose title matches (not together with `--tags`)"
    ),
    opt!(
        "",
        "--tags",
        EVERYWHERE,
        ANY,
        &["--tags", "@DynamicResourceAllocation"],
        "",
        "`-t EXPR`: scenarios whose tags match ([tags.md](tags.md)); a tag no scenario has and the suite does not know is an error, as in `dra-e2e check`"
    ),
    opt!(
        "",
        "--input",
        EVERYWHERE,
        ANY,
        &["--input", "features/*.feature"],
        "",
        "`-i GLOB`: feature files by glob instead of `--features`"
    ),
    opt!(
        "",
        "--concurrency",
        EVERYWHERE,
        ANY,
        &["--concurrency", "2"],
        "",
        "`-c N`: how many scenarios sharing nodes run at once (see below)"
    ),
    opt!(
        "",
        "--fail-fast",
        EVERYWHERE,
        ANY,
        &["--fail-fast"],
        "",
        "stop at the first failed scenario"
    ),
    opt!(
        "",
        "--retry",
        EVERYWHERE,
        ANY,
        &["--retry", "1"],
        "",
        "run a failed scenario again, up to N times"
    ),
    opt!(
        "",
        "--retry-after",
        EVERYWHERE,
        ANY,
        &["--retry-after", "1s"],
        "",
        "wait before a retry"
    ),
    opt!(
        "",
        "--retry-tag-filter",
        EVERYWHERE,
        ANY,
        &["--retry-tag-filter", "@serial"],
        "",
        "retry only the scenarios this tag expression selects"
    ),
    opt!(
        "",
        "-v",
        EVERYWHERE,
        ANY,
        &["-v"],
        "",
        "more output per step (`-vv`, `-vvv`: more)"
    ),
    opt!(
        "",
        "--color",
        EVERYWHERE,
        ANY,
        &["--color", "never"],
        "",
        "`auto`, `always` or `never`"
    ),
    // The runner's own.
    opt!(
        "",
        "--features",
        EVERYWHERE,
        ANY,
        &["--features", "features"],
        "",
        "feature file or directory to run instead of the built-in ones (the suite's `features/`, carried by the runner: `dra-e2e features export DIR` writes them out); repeat for several; a path that is missing or unreadable is refused with why"
    ),
    opt!(
        "",
        "--add-features",
        EVERYWHERE,
        ANY,
        &["--add-features", "features"],
        "",
        "feature file or directory to run besides the built-in ones (a driver repository's own scenarios beside the pack); repeat for several; checked as `--features` is"
    ),
    opt!(
        "",
        "--list",
        EVERYWHERE,
        ANY,
        &["--list"],
        "",
        "print the selected scenarios with tags and locations, then exit (no cluster needed; the cluster options are not looked at)"
    ),
    opt!(
        "",
        "--shard",
        EVERYWHERE,
        ANY,
        &["--shard", "1/2"],
        "",
        "run shard I of N of the selected scenarios, for CI matrices: a scenario's shard follows from its feature, rule, title and example row alone (a fixed hash), so it stays put when other scenarios come and go; the shards' JUnit reports together name every scenario once"
    ),
    opt!(
        "",
        "--allow-empty",
        EVERYWHERE,
        ANY,
        &["--allow-empty"],
        "",
        "accept a run that tests nothing as a success; without it, a selection of no scenario, an `--input`/`--features` path matching no feature file, or a run where every scenario was skipped exits 1 (for CI matrices whose shards may be empty)"
    ),
    opt!(
        "",
        "--cluster",
        EVERYWHERE,
        ANY,
        &["--cluster", "auto"],
        "",
        "`auto`, `local` or `kubeconfig`: which cluster ([clusters.md](clusters.md)); `auto` is the kubeconfig cluster when `--kubeconfig`, `KUBECONFIG` or `~/.kube/config` names one, else the local cluster"
    ),
    opt!(
        "",
        "--kubeconfig",
        KUBECONFIG,
        ANY,
        &["--kubeconfig", "/nonexistent/kubeconfig"],
        "the local cluster writes a kubeconfig of its own",
        "the kubeconfig of a real cluster (default `KUBECONFIG`, then `~/.kube/config`); a missing or unreadable file is refused with why"
    ),
    opt!(
        "",
        "--profile",
        EVERYWHERE,
        ANY,
        &["--profile", "profiles/builtin.yaml"],
        "",
        "the driver under test, from a driver profile ([driver-conformance.md](driver-conformance.md), [driver-profile.md](driver-profile.md)); without it (and without `--driver-name`) the suite's own driver. A missing or unreadable file is refused with why; a profile whose deployment does not fit the cluster (a `RealNodes` driver without `--node-kind real`, an `Installed` one on the local cluster) is refused before anything starts; a deployed driver must publish devices on every ready node within 3 minutes, or the run stops saying which nodes have none and what its pods do. The reports' properties name the driver, its profile, deployment, capabilities, class, version (its pods' images) and the conformance counts"
    ),
    opt!(
        "",
        "--driver-name",
        KUBECONFIG,
        ANY,
        &["--driver-name", "d.example.com", "--device-class", "c"],
        "it names a driver already installed (deployment.mode Installed), and the local cluster starts with none",
        "KEP-5970's invocation, with `--device-class`: a driver already installed in the cluster; the rest of its profile is defaulted and printed"
    ),
    opt!(
        "",
        "--device-class",
        KUBECONFIG,
        ANY,
        &["--driver-name", "d.example.com", "--device-class", "c"],
        "it comes with --driver-name, which names a driver already installed, and the local cluster starts with none",
        "with `--driver-name`: the DeviceClass that selects the installed driver's devices"
    ),
    opt!(
        "",
        "--interpose",
        EVERYWHERE,
        DEPLOYED,
        &["--interpose", "--profile", "profiles/builtin.yaml"],
        "the interposer stands only in front of a driver the runner deploys itself, pointed at a registration directory of its own",
        "with `--profile`: put the runner's interposer between the kubelet and the driver under test, so that `@Interposed` scenarios count, fail and stall its calls ([interposer.md](interposer.md)); on a kubeconfig cluster the proxy image must carry dra-e2e (`--proxy-image`)"
    ),
    opt!(
        "",
        "--interposer-fault",
        EVERYWHERE,
        DEPLOYED,
        &[
            "--interposer-fault",
            "direct",
            "--interpose",
            "--profile",
            "profiles/builtin.yaml"
        ],
        "it breaks the interposer, which stands only in front of a driver the runner deploys itself",
        "with `--interpose`: break the interposer on purpose (`direct`, `first-instance-only`, `no-reregister`) to see the scenarios that must notice fail ([interposer.md](interposer.md#broken-variants))"
    ),
    opt!(
        "",
        "--nodes",
        LOCAL,
        ANY,
        &["--nodes", "3"],
        NOT_STARTED,
        "how many nodes the local cluster starts (default 2)"
    ),
    opt!(
        "",
        "--node-kind",
        LOCAL,
        ANY,
        &["--node-kind", "simulated"],
        NOT_STARTED,
        "`simulated` (kubelets inside the runner) or `real` (kubelet, containerd and runc as root; `make node` builds them)"
    ),
    opt!(
        "",
        "--image-archive",
        LOCAL_REAL,
        ANY,
        &["--image-archive", "/nonexistent/image.tar"],
        "only the local cluster's real nodes import image archives: simulated nodes run no images, and a kubeconfig cluster pulls its own (kind: `kind load image-archive`)",
        "an OCI or Docker image archive every real node imports (e.g. the image of `--proxy-image`); repeatable. A missing or unreadable file, or one that is no image archive, is refused saying what it is; an archive whose images neither the proxy image nor the driver's manifests name is said once at the start (only scenarios' own manifests can use it)",
        archive_used
    ),
    opt!(
        "",
        "--feature-gates",
        LOCAL,
        ANY,
        &["--feature-gates", "DRADeviceTaints=true"],
        NOT_STARTED,
        "`G=true,...`: feature gates for every component of the local cluster; the gates the selected scenarios are tagged with are added"
    ),
    opt!(
        "",
        "--kube-version",
        LOCAL,
        ANY,
        &["--kube-version", "1.36"],
        "versions are chosen for the local cluster only; a kubeconfig cluster runs the Kubernetes it was made with",
        "the control plane's Kubernetes, `1.MINOR` (the release `hack/versions.env` pins) or `v1.MINOR.PATCH`, built from the Go module proxy into the cache on first use ([versions.md](versions.md))"
    ),
    opt!(
        "",
        "--kubelet-version",
        LOCAL_REAL,
        ANY,
        &["--kubelet-version", "1.36"],
        "simulated nodes are the runner's own kubelet, not a built one, and a kubeconfig cluster runs the kubelets it was made with",
        "the real nodes' kubelet, as `--kube-version`; a kubelet newer than the control plane or more than three minors older is refused (the version skew policy)"
    ),
    opt!(
        "",
        "--binaries-dir",
        LOCAL,
        ANY,
        &["--binaries-dir", "/nonexistent/bin"],
        NOT_STARTED,
        "directory with etcd, kube-apiserver, kube-scheduler and kube-controller-manager (default `DRA_E2E_BINARIES_DIR`, then the cache `make controlplane` fills); a missing or unreadable directory is refused with why. Given by its environment variable it is not refused where it does not apply (it is the machine's setting, not the run's)"
    ),
    opt!(
        "",
        "--wipe-delay",
        SIMULATED,
        ANY,
        &["--wipe-delay", "1s"],
        "only a simulated kubelet's delay is the runner's to choose: a real kubelet keeps its own 30s",
        "how long a simulated kubelet waits before removing the slices of a driver whose plugin went away (default 3s; the kubelet's is 30s)"
    ),
    opt!(
        "",
        "--junit",
        EVERYWHERE,
        ANY,
        &["--junit", "/nonexistent/junit.xml"],
        "",
        "a JUnit XML report (see [the reports](#the-reports)); its directory must exist and be writable, checked before the cluster starts"
    ),
    opt!(
        "",
        "--html",
        EVERYWHERE,
        ANY,
        &["--html", "/nonexistent/report.html"],
        "",
        "an HTML report in one self-contained file (see [the reports](#the-reports))"
    ),
    opt!(
        "",
        "--cucumber-json",
        EVERYWHERE,
        ANY,
        &["--cucumber-json", "/nonexistent/c.json"],
        "",
        "a Cucumber JSON report"
    ),
    opt!(
        "",
        "--artifacts",
        EVERYWHERE,
        ANY,
        &["--artifacts", "target/dra-e2e-artifacts"],
        "",
        "where failed scenarios leave artifacts (default `target/dra-e2e-artifacts`; created when needed, checked up front)"
    ),
    opt!(
        "",
        "--keep-on-failure",
        EVERYWHERE,
        ANY,
        &["--keep-on-failure"],
        "",
        "keep a failed scenario's namespace and driver running; their names are printed"
    ),
    opt!(
        "",
        "--kubelet-root-dir",
        KUBECONFIG,
        ANY,
        &["--kubelet-root-dir", "/x"],
        "the runner knows the kubelet root of the nodes it starts itself",
        "the kubelet's root directory on the cluster's nodes (default `/var/lib/kubelet`; [clusters.md](clusters.md#running-on-kind))"
    ),
    opt!(
        "",
        "--proxy-image",
        REAL_NODES,
        ANY,
        &["--proxy-image", "foo/bar:1"],
        "simulated nodes run no pods: the runner reaches their plugin sockets directly",
        "the image of the node host pods that proxy the plugin sockets (default upstream's hostpathplugin, as upstream's suite uses it; on the local cluster's real nodes the runner's own agent image). Given on real local nodes it is used as it is and must be on the nodes: from an `--image-archive` (said at the start otherwise; upstream's name is also the runner's own image there, see below). With `--interpose` an image of upstream's hostpathplugin is refused: the interposer needs `dra-e2e-agent proxy-agent --connect`",
        proxy_image_where_it_runs
    ),
    opt!(
        "",
        "--slice-controller-fault",
        EVERYWHERE,
        ANY,
        &["--slice-controller-fault", "churn"],
        "",
        "break the suite's own ResourceSlice controller on purpose (`churn`, `no-shrink`) to see the checks of upstream's \"creates slices\" scenarios fail ([development.md](development.md#from-a-step-sentence-to-the-code))"
    ),
    opt!(
        "",
        "--restart-control-plane",
        LOCAL,
        ANY,
        &["--restart-control-plane", "kube-apiserver@20s"],
        "a kubeconfig cluster's control plane is not the runner's to restart",
        "restart control-plane components at these moments after the scenarios start (`kube-apiserver@20s,kube-scheduler@1m`), to show that the run rides them out (`make chaos-api`, [local-cluster.md](local-cluster.md))"
    ),
    opt!(
        "",
        "--restart-kubelet",
        LOCAL_REAL,
        ANY,
        &["--restart-kubelet", "@20s"],
        "only the local cluster's real nodes have kubelets the runner restarts",
        "restart a real node's kubelet at these moments after the scenarios start (`@20s,dra-e2e-node-2@1m`: no node is one the runner picks among those no scenario owns), to show that the scenarios sharing it ride it out (`make soak SOAK_CHAOS=N`, [local-cluster.md](local-cluster.md))"
    ),
    opt!(
        "",
        "--node-host-fault",
        REAL_NODES,
        ANY,
        &["--node-host-fault", "no-redial"],
        "simulated nodes run no node hosts: the runner reaches their plugin sockets directly",
        "break the node hosts on purpose (`exec-agents`, `no-redial`) to see the node-operation scenarios that must notice fail ([development.md](development.md#broken-variants-of-the-node-hosts)); refused with upstream's hostpathplugin image, which runs no node host"
    ),
    opt!(
        "",
        "--cdi-dir",
        KUBECONFIG,
        ANY,
        &["--cdi-dir", "/x"],
        "the runner knows the CDI directory of the nodes it starts itself",
        "the nodes' CDI spec directory as their container runtime reads it (containerd's `cdi_spec_dirs`, default `/var/run/cdi`), where the proxy pods write the specs"
    ),
    opt!(
        "",
        "--step-timeout",
        EVERYWHERE,
        ANY,
        &["--step-timeout", "1m"],
        "",
        "limit of one step (default 10m); a step cut off says what it was waiting for and last saw"
    ),
    opt!(
        "",
        "--deadline",
        EVERYWHERE,
        ANY,
        &["--deadline", "1h"],
        "",
        "limit of the whole run (default 2h), after which running scenarios are torn down and reports written"
    ),
    opt!(
        "",
        "--teardown-timeout",
        EVERYWHERE,
        ANY,
        &["--teardown-timeout", "1m"],
        "",
        "limit of the run's ending (default 5m), from the moment its scenarios are done or stopped: the running scenarios' teardown, the wait for their namespaces, the leak check and stopping the cluster; past it the cluster is stopped at once and the run fails"
    ),
    opt!(
        "",
        "--keep-cluster-files",
        LOCAL,
        ANY,
        &["--keep-cluster-files"],
        "the runner keeps only the files of a cluster it started",
        "keep the local cluster's files (logs, PKI, kubeconfig) after the run and print where they are"
    ),
    opt!(
        "",
        "--timings",
        EVERYWHERE,
        ANY,
        &["--timings"],
        "",
        "print the run's phases, the floor (cluster start and the longest scenario) and the run's ratio to it, time per scenario (median, slowest five), the fixed cost per scenario, every setup and teardown phase"
    ),
    // The commands. `setup` and `cluster up` are at the local place of
    // their own --node-kind; the others work on no cluster.
    opt!(
        "setup",
        "--node-kind",
        EVERYWHERE,
        ANY,
        &["--node-kind", "real"],
        "",
        "also build what real nodes need"
    ),
    opt!(
        "setup",
        "--kube-version",
        EVERYWHERE,
        ANY,
        &["--kube-version", "1.36"],
        "",
        "the control plane's Kubernetes to build"
    ),
    opt!(
        "setup",
        "--kubelet-version",
        LOCAL_REAL,
        ANY,
        &["--kubelet-version", "1.36"],
        "simulated nodes build no kubelet",
        "the real nodes' kubelet to build"
    ),
    opt!(
        "steps",
        "--markdown",
        EVERYWHERE,
        ANY,
        &["--markdown"],
        "",
        "print the catalogue as docs/steps.md holds it"
    ),
    opt!(
        "upstream",
        "--features",
        EVERYWHERE,
        ANY,
        &["--features", "features"],
        "",
        "the feature files the table is made from"
    ),
    opt!(
        "upstream",
        "--data",
        EVERYWHERE,
        ANY,
        &["--data", "docs/upstream-tests.tsv"],
        "",
        "the list of upstream's tests"
    ),
    opt!(
        "upstream",
        "--write",
        EVERYWHERE,
        ANY,
        &["--write", "docs/upstream-tests.md"],
        "",
        "write the table into the file"
    ),
    opt!(
        "upstream",
        "--check",
        EVERYWHERE,
        ANY,
        &["--check", "docs/upstream-tests.md"],
        "",
        "check that the file holds the table"
    ),
    opt!(
        "upstream",
        "--drop-ported-reasons",
        EVERYWHERE,
        ANY,
        &["--drop-ported-reasons"],
        "",
        "drop the reasons of ported tests from the data"
    ),
    opt!(
        "mutants",
        "--mutant",
        EVERYWHERE,
        ANY,
        &["--mutant", "first-claim-only"],
        "",
        "run only this mutant of docs/driver-mutants.yaml"
    ),
    opt!(
        "mutants",
        "--way",
        EVERYWHERE,
        ANY,
        &["--way", "builtin"],
        "",
        "run only this way of realising the mutants"
    ),
    opt!(
        "mutants",
        "--real-nodes",
        EVERYWHERE,
        ANY,
        &["--real-nodes"],
        "",
        "also run the mutants only real nodes show"
    ),
    opt!(
        "mutants",
        "--jobs",
        EVERYWHERE,
        ANY,
        &["--jobs", "2"],
        "",
        "how many runs at once"
    ),
    opt!(
        "mutants",
        "--out",
        EVERYWHERE,
        ANY,
        &["--out", "target/mutants/runs"],
        "",
        "where each run's profile, output and report are kept"
    ),
    opt!(
        "mutants",
        "--run-deadline",
        EVERYWHERE,
        ANY,
        &["--run-deadline", "20m"],
        "",
        "limit of one run of the pack; a run past it and its teardown is stopped and counted as an error"
    ),
    opt!(
        "mutants",
        "--list",
        EVERYWHERE,
        ANY,
        &["--list"],
        "",
        "print the catalogue as a Markdown table"
    ),
    opt!(
        "mutants",
        "--write-docs",
        EVERYWHERE,
        ANY,
        &["--write-docs"],
        "",
        "write the catalogue's tables into docs/driver-mutants.md and docs/driver-conformance.md"
    ),
    opt!(
        "cluster up",
        "--binaries-dir",
        EVERYWHERE,
        ANY,
        &["--binaries-dir", "/nonexistent/bin"],
        "",
        "the control plane's programs"
    ),
    opt!(
        "cluster up",
        "--feature-gates",
        EVERYWHERE,
        ANY,
        &["--feature-gates", "DRADeviceTaints=true"],
        "",
        "feature gates for every component"
    ),
    opt!(
        "cluster up",
        "--runtime-config",
        EVERYWHERE,
        ANY,
        &["--runtime-config", "resource.k8s.io/v1beta1=true"],
        "",
        "kube-apiserver's `--runtime-config`"
    ),
    opt!(
        "cluster up",
        "--keep",
        EVERYWHERE,
        ANY,
        &["--keep"],
        "",
        "keep the cluster's directory after stopping"
    ),
    opt!(
        "cluster up",
        "--nodes",
        EVERYWHERE,
        ANY,
        &["--nodes", "1"],
        "",
        "how many nodes"
    ),
    opt!(
        "cluster up",
        "--node-kind",
        EVERYWHERE,
        ANY,
        &["--node-kind", "real"],
        "",
        "simulated or real nodes"
    ),
    opt!(
        "cluster up",
        "--image-archive",
        LOCAL_REAL,
        ANY,
        &["--image-archive", "/nonexistent/image.tar"],
        "simulated nodes run no images",
        "an image archive every real node imports; repeatable"
    ),
    opt!(
        "cluster up",
        "--wipe-delay",
        SIMULATED,
        ANY,
        &["--wipe-delay", "1s"],
        "a real kubelet keeps its own 30s",
        "how long a simulated kubelet waits before wiping a gone driver's slices"
    ),
    opt!(
        "features export",
        "--force",
        EVERYWHERE,
        ANY,
        &["--force"],
        "",
        "overwrite files in DIR whose content differs from the built-in ones (without it such a file is refused and nothing is written)"
    ),
    opt!(
        "profile check",
        "--no-files",
        EVERYWHERE,
        ANY,
        &["--no-files"],
        "",
        "do not require the files the profile names"
    ),
    opt!(
        "profile show",
        "--driver-name",
        EVERYWHERE,
        ANY,
        &["--driver-name", "d"],
        "",
        "the installed driver's name"
    ),
    opt!(
        "profile show",
        "--device-class",
        EVERYWHERE,
        ANY,
        &["--device-class", "c"],
        "",
        "its DeviceClass"
    ),
    opt!(
        "profile init",
        "--manifests",
        EVERYWHERE,
        ANY,
        &["--manifests", "m.yaml"],
        "",
        "the driver's rendered manifests, in the order to apply them"
    ),
    opt!(
        "profile init",
        "--image-archive",
        EVERYWHERE,
        ANY,
        &["--image-archive", "/nonexistent/image.tar"],
        "",
        "an image archive of the manifests' images, listed as the profile's imageArchives; repeatable"
    ),
    opt!(
        "profile init",
        "--out",
        EVERYWHERE,
        ANY,
        &["--out", "p.yaml"],
        "",
        "write the profile there (its paths relative to it), not to stdout"
    ),
    opt!(
        "profile init",
        "--force",
        EVERYWHERE,
        ANY,
        &["--force"],
        "",
        "overwrite an existing --out"
    ),
    opt!(
        "profile init",
        "--daemonset",
        EVERYWHERE,
        ANY,
        &["--daemonset", "d"],
        "",
        "the kubelet plugin's DaemonSet, when several look like one"
    ),
    opt!(
        "profile init",
        "--driver-name",
        EVERYWHERE,
        ANY,
        &["--driver-name", "d"],
        "",
        "the driver's name, when no DeviceClass names it"
    ),
    opt!(
        "profile init",
        "--device-class",
        EVERYWHERE,
        ANY,
        &["--device-class", "c"],
        "",
        "the DeviceClass, when the manifests have several"
    ),
    opt!(
        "profile init",
        "--schema",
        EVERYWHERE,
        ANY,
        &["--schema", "s.json"],
        "",
        "the JSON Schema the profile's first line names for editors (a path relative to it, or a URL; default profile.schema.json beside it)"
    ),
    opt!(
        "profile schema",
        "--out",
        EVERYWHERE,
        ANY,
        &["--out", "s.json"],
        "",
        "write the JSON Schema of profiles there, not to stdout"
    ),
    opt!(
        "image",
        "--binary",
        EVERYWHERE,
        ANY,
        &["--binary", "b"],
        "",
        "the static binary the image runs"
    ),
    opt!(
        "image",
        "--reference",
        EVERYWHERE,
        ANY,
        &["--reference", "localhost/x:1"],
        "",
        "the image's reference"
    ),
    opt!(
        "image",
        "--out",
        EVERYWHERE,
        ANY,
        &["--out", "o.tar"],
        "",
        "the archive to write"
    ),
    opt!(
        "image",
        "--path",
        EVERYWHERE,
        ANY,
        &["--path", "/bin/x"],
        "",
        "where the binary is in the image"
    ),
    opt!(
        "image",
        "--entrypoint",
        EVERYWHERE,
        ANY,
        &["--entrypoint", "x"],
        "",
        "the entrypoint's arguments"
    ),
    opt!(
        "image",
        "--env",
        EVERYWHERE,
        ANY,
        &["--env", "A=b"],
        "",
        "environment of the image"
    ),
    opt!(
        "image",
        "--with-shared-libs",
        EVERYWHERE,
        ANY,
        &["--with-shared-libs"],
        "",
        "add the binary's shared libraries"
    ),
    opt!(
        "image",
        "--with-busybox",
        EVERYWHERE,
        ANY,
        &["--with-busybox"],
        "",
        "add busybox and its applets (a shell)"
    ),
    opt!(
        "image",
        "--gzip",
        EVERYWHERE,
        ANY,
        &["--gzip"],
        "",
        "compress the layer"
    ),
    opt!(
        "image runner",
        "--out",
        EVERYWHERE,
        ANY,
        &["--out", "r.tar"],
        "",
        "the archive to write"
    ),
    opt!(
        "image runner",
        "--reference",
        EVERYWHERE,
        ANY,
        &["--reference", "localhost/runner:v1"],
        "",
        "the image's full reference [default: `dra-e2e.local/runner:<version>`]"
    ),
    opt!(
        "image runner",
        "--gzip",
        EVERYWHERE,
        ANY,
        &["--gzip"],
        "",
        "compress the layer"
    ),
    opt!(
        "job",
        "--kubeconfig",
        EVERYWHERE,
        ANY,
        &["--kubeconfig", "/nonexistent/kubeconfig"],
        "",
        "the cluster's kubeconfig (default `KUBECONFIG`, then `~/.kube/config`)"
    ),
    opt!(
        "job",
        "--image",
        EVERYWHERE,
        ANY,
        &["--image", "localhost/runner:v1"],
        "",
        "the runner image the Job runs, as the nodes know it [default: `dra-e2e image runner`'s reference]"
    ),
    opt!(
        "job",
        "--image-pull-policy",
        EVERYWHERE,
        ANY,
        &["--image-pull-policy", "Never"],
        "",
        "the Job container's imagePullPolicy"
    ),
    opt!(
        "job",
        "--profile",
        EVERYWHERE,
        ANY,
        &["--profile", "p.yaml"],
        "",
        "the driver under test: a profile whose `deployment.mode` is Installed or Manifests (its manifests travel in a ConfigMap)"
    ),
    opt!(
        "job",
        "--driver-name",
        EVERYWHERE,
        ANY,
        &["--driver-name", "d.example.com", "--device-class", "c"],
        "",
        "KEP-5970's invocation: a driver installed in the cluster (with `--device-class`)"
    ),
    opt!(
        "job",
        "--device-class",
        EVERYWHERE,
        ANY,
        &["--driver-name", "d.example.com", "--device-class", "c"],
        "",
        "with `--driver-name`: the DeviceClass of its devices"
    ),
    opt!(
        "job",
        "--tags",
        EVERYWHERE,
        ANY,
        &["--tags", "@DriverConformance"],
        "",
        "the runner's `--tags` in the pod [default, without `--name`: `@DriverConformance`]"
    ),
    opt!(
        "job",
        "--name",
        EVERYWHERE,
        ANY,
        &["--name", "^the kubelet"],
        "",
        "the runner's `--name` in the pod (instead of `--tags`)"
    ),
    opt!(
        "job",
        "--out",
        EVERYWHERE,
        ANY,
        &["--out", "results"],
        "",
        "where junit.xml, report.html, run.log and artifacts/ are written"
    ),
    opt!(
        "job",
        "--timeout",
        EVERYWHERE,
        ANY,
        &["--timeout", "20m"],
        "",
        "the Job's activeDeadlineSeconds; past it the pod is stopped and the command fails"
    ),
    opt!(
        "job",
        "--remove-leftovers",
        EVERYWHERE,
        ANY,
        &["--remove-leftovers"],
        "",
        "stop and remove what `dra-e2e job` commands killed outright left (namespaces and bindings labelled `dra-e2e.k8s.io/job`), then exit"
    ),
    opt!(
        "options",
        "--markdown",
        EVERYWHERE,
        ANY,
        &["--markdown"],
        "",
        "print the reference as docs/cli.md holds it"
    ),
    opt!(
        "options",
        "--write",
        EVERYWHERE,
        ANY,
        &["--write", "docs/cli.md"],
        "",
        "write the reference into the file, between its markers"
    ),
];

/// `--proxy-image`: the interposer needs an agent that connects to a
/// socket, which upstream's hostpathplugin cannot; on real local nodes the
/// image has to be on the nodes (they pull nothing), and upstream's name
/// without its archive is the runner's own image under that name.
fn proxy_image_where_it_runs(g: &Given) -> Option<Finer> {
    let image = g.values.first()?;
    if g.interpose && image.contains("hostpathplugin") {
        return Some(Finer::Refuse(format!(
            "--interpose reaches the driver's sockets through node host pods running \
             `dra-e2e-agent proxy-agent --connect`, which upstream's hostpathplugin lacks: give \
             --proxy-image an image carrying dra-e2e-agent (on real local nodes: drop \
             --proxy-image, and they run the runner's own, {})",
            crate::cluster::real_node::proxy_image()
        )));
    }
    if g.place != Place::LocalReal {
        return None;
    }
    let imported = g.archives.iter().any(|(_, refs)| refs.contains(image));
    match (imported, image == UPSTREAM_PROXY_IMAGE) {
        (true, _) => None,
        (false, true) => Some(Finer::Note(format!(
            "--proxy-image {image}: no --image-archive holds upstream's image, so its name is \
             the runner's own image on the real nodes (a /hostpathplugin that runs \
             dra-e2e-agent with hostpathplugin's flags); import upstream's archive with \
             --image-archive to run upstream's hostpathplugin"
        ))),
        (false, false) => Some(Finer::Note(format!(
            "--proxy-image {image}: no --image-archive holds it, and real local nodes pull \
             nothing: its node host pods start only if the nodes have it already"
        ))),
    }
}

/// `--image-archive` on real local nodes: said once when no image the
/// runner itself starts comes from it.
fn archive_used(g: &Given) -> Option<Finer> {
    if g.place != Place::LocalReal {
        return None;
    }
    let unused: Vec<String> = g
        .archives
        .iter()
        .filter(|(_, refs)| {
            !refs
                .iter()
                .any(|r| Some(r.as_str()) == g.proxy_image || g.manifests.contains(r.as_str()))
        })
        .map(|(p, refs)| format!("{} ({})", p.display(), refs.join(", ")))
        .collect();
    (!unused.is_empty()).then(|| {
        Finer::Note(format!(
            "--image-archive {}: neither the proxy image nor the driver's manifests name its \
             images; every node imports them, and only scenarios' own manifests can use them",
            unused.join(", ")
        ))
    })
}

/// An option refused where it was given: the run stops before anything
/// starts, with exit status 2 (a usage error, as clap's).
#[derive(Debug)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// The exit status of a refusal.
pub const REFUSAL_EXIT: u8 = 2;

/// The table's entry for `flag` of `command`.
pub fn entry(command: &str, flag: &str) -> Option<&'static Opt> {
    TABLE
        .iter()
        .find(|o| o.command == command && o.flag == flag)
}

/// How an argument is typed: `--long`, else `-s`.
fn flag_of(arg: &clap::Arg) -> Option<String> {
    arg.get_long()
        .map(|l| format!("--{l}"))
        .or_else(|| arg.get_short().map(|s| format!("-{s}")))
}

/// The options of a command that take part in the table: everything typed
/// with a dash, but help and version.
fn options_of(cmd: &clap::Command) -> impl Iterator<Item = (&clap::Arg, String)> {
    cmd.get_arguments()
        .filter(|a| !a.is_positional())
        .filter(|a| {
            !matches!(
                a.get_action(),
                clap::ArgAction::Help
                    | clap::ArgAction::HelpShort
                    | clap::ArgAction::HelpLong
                    | clap::ArgAction::Version
            )
        })
        .filter_map(|a| flag_of(a).map(|f| (a, f)))
}

/// Every command of the tree with its path (`""` for the run, `"cluster
/// up"`), the hidden internal ones too.
fn commands(root: &clap::Command) -> Vec<(String, &clap::Command)> {
    fn walk<'a>(path: String, cmd: &'a clap::Command, out: &mut Vec<(String, &'a clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let p = match path.as_str() {
                "" => sub.get_name().to_owned(),
                _ => format!("{path} {}", sub.get_name()),
            };
            walk(p, sub, out);
        }
        out.push((path, cmd));
    }
    let mut out = Vec::new();
    walk(String::new(), root, &mut out);
    out
}

/// Where `table` and the command tree differ: options the tree has and the
/// table lacks, and entries for options the tree does not have.
pub fn differences(table: &[Opt], root: &clap::Command) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for (path, cmd) in commands(root) {
        for (_, flag) in options_of(cmd) {
            let shown = format!("{} {flag}", if path.is_empty() { "dra-e2e" } else { &path });
            match table.iter().find(|o| o.command == path && o.flag == flag) {
                Some(_) => seen.push((path.clone(), flag)),
                None => out.push(format!("{shown}: not in the options table")),
            }
        }
    }
    for o in table {
        if !seen.iter().any(|(c, f)| c == o.command && f == o.flag) {
            out.push(format!(
                "{} {}: in the options table, not in the command tree",
                o.command, o.flag
            ));
        }
    }
    out
}

/// The options given on the command line in `matches` (of `cmd`), with
/// their values as typed. Values from the environment are the machine's,
/// not the run's: they are not refused where they do nothing.
fn given(cmd: &clap::Command, matches: &clap::ArgMatches) -> Vec<(String, Vec<String>)> {
    options_of(cmd)
        .filter(|(a, _)| {
            matches.value_source(a.get_id().as_str())
                == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|(a, flag)| {
            // A flag's parsed value (`true`, a count) is no value typed.
            if !a.get_action().takes_values() {
                return (flag, Vec::new());
            }
            let values = matches
                .get_raw(a.get_id().as_str())
                .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            (flag, values)
        })
        .collect()
}

/// The refusal of `flag` (typed with `values`) where `place` and `mode`
/// are, by `table`; `None` where it applies.
fn refusal(
    table: &[Opt],
    command: &str,
    flag: &str,
    values: &[String],
    place: Place,
    mode: Option<Mode>,
) -> Option<Refusal> {
    let o = table
        .iter()
        .find(|o| o.command == command && o.flag == flag)?;
    if o.applies(place, mode) {
        return None;
    }
    let typed = match values {
        [] => flag.to_owned(),
        vs => format!("{flag} {}", vs.join(",")),
    };
    let here = match (o.places.contains(&place), mode) {
        (false, _) | (true, None) => format!("this run is on {place}"),
        (true, Some(m)) => {
            format!("this run is on {place}, with a driver whose deployment.mode is {m}")
        }
    };
    let command = match command {
        "" => String::new(),
        c => format!("dra-e2e {c} "),
    };
    Some(Refusal(format!(
        "{command}{typed}: does nothing here: {here}, and {}. It applies on {} only; drop it, \
         or run there",
        o.elsewhere,
        o.where_text()
    )))
}

/// The refusals of the run's options given in `matches` (parsed by
/// [`super::cli::try_parse_from`]) at `place` with a driver of `mode`, by
/// `table`. An option the table lacks is taken (a test keeps the table
/// whole).
pub fn refusals_at(
    table: &[Opt],
    matches: &clap::ArgMatches,
    place: Place,
    mode: Option<Mode>,
) -> Vec<Refusal> {
    given(&super::cli::command(), matches)
        .iter()
        .filter_map(|(flag, values)| refusal(table, "", flag, values, place, mode))
        .collect()
}

/// Every refusal at once, one a line: a user who gave several options
/// that do nothing learns of all of them in one go.
fn all(refusals: Vec<Refusal>) -> Result<(), Refusal> {
    match refusals.as_slice() {
        [] => Ok(()),
        rs => Err(Refusal(
            rs.iter()
                .map(|r| r.0.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        )),
    }
}

/// The run's options: refuses any given where it does nothing (by the
/// table), then checks the files they name; returns the notes to say once
/// in the run's opening lines.
pub fn check_run(
    args: &super::cli::RunArgs,
    matches: &clap::ArgMatches,
) -> Result<Vec<String>, Refusal> {
    let root = super::cli::command();
    let place = Place::of(
        args.cluster.is_local(args.kubeconfig.as_deref()),
        args.node_kind,
    );
    let given = given(&root, matches);
    // Where first: an option that does nothing here is refused as such,
    // whatever its file is.
    // `auto` chose the cluster: say how, the user did not.
    let auto = match (args.cluster, place) {
        (crate::cluster::ClusterChoice::Auto, Place::Kubeconfig) => {
            " (--cluster auto chose the kubeconfig cluster: --kubeconfig, KUBECONFIG or \
             ~/.kube/config names one; --cluster local runs on the local cluster)"
        }
        (crate::cluster::ClusterChoice::Auto, _) => {
            " (--cluster auto chose the local cluster: no kubeconfig names a cluster)"
        }
        _ => "",
    };
    all(refusals_at(TABLE, matches, place, None)).map_err(|r| Refusal(format!("{}{auto}", r.0)))?;
    check_run_files(args, matches)?;
    let profile = match &args.driver.profile {
        Some(p) => Some(
            crate::profile::Profile::load(p, crate::profile::Options { check_files: false })
                .map_err(|e| Refusal(format!("--profile {}: {e}", p.display())))?,
        ),
        None => None,
    };
    // --driver-name makes an Installed profile (KEP-5970's defaults).
    let mode = match (&profile, &args.driver.driver_name) {
        (Some(p), _) => Some(p.deployment.mode()),
        (None, Some(_)) => Some(Mode::Installed),
        (None, None) => None,
    };
    all(refusals_at(TABLE, matches, place, mode))?;
    let archives = args
        .image_archive
        .iter()
        .map(|p| archive_kind(p).map(|k| (p.clone(), k.refs)))
        .collect::<Result<Vec<_>, _>>()?;
    let manifests = manifests_text(profile.as_ref());
    let proxy_image = given
        .iter()
        .find(|(f, _)| f == "--proxy-image")
        .and_then(|(_, v)| v.first().map(String::as_str));
    let mut notes = Vec::new();
    for (flag, values) in &given {
        let Some(finer) = entry("", flag).and_then(|o| o.finer) else {
            continue;
        };
        let g = Given {
            place,
            values: values.clone(),
            archives: &archives,
            proxy_image,
            manifests: &manifests,
            interpose: args.interpose,
        };
        match finer(&g) {
            Some(Finer::Refuse(why)) => {
                return Err(Refusal(format!(
                    "{flag} {}: refused here: this run is on {place}: {why}",
                    values.join(",")
                )));
            }
            Some(Finer::Note(n)) => notes.push(n),
            None => {}
        }
    }
    Ok(notes)
}

/// The manifests a profile deploys, as one text (to find image names in).
fn manifests_text(profile: Option<&crate::profile::Profile>) -> String {
    use crate::profile::Deployment;
    let paths: &[PathBuf] = match profile.map(|p| &p.deployment) {
        Some(Deployment::RealNodes { manifests, .. } | Deployment::Manifests { manifests }) => {
            manifests
        }
        _ => &[],
    };
    paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A command's options (`setup`, `cluster up`, ...): refuses any given
/// where it does nothing, at the local place of the command's own
/// `--node-kind`, and checks the image archives it names.
pub fn check_command(matches: &clap::ArgMatches) -> Result<(), Refusal> {
    let root = super::cli::command();
    let mut cmd = &root;
    let mut m = matches;
    let mut path: Vec<String> = Vec::new();
    while let Some((name, sub)) = m.subcommand() {
        let Some(c) = cmd.find_subcommand(name) else {
            break;
        };
        path.push(name.to_owned());
        cmd = c;
        m = sub;
    }
    let command = path.join(" ");
    let real = cmd.get_arguments().any(|a| a.get_id() == "node_kind")
        && m.get_one::<NodeKind>("node_kind") == Some(&NodeKind::Real);
    let place = Place::of(
        true,
        if real {
            NodeKind::Real
        } else {
            NodeKind::Simulated
        },
    );
    let given = given(cmd, m);
    all(given
        .iter()
        .filter_map(|(flag, values)| refusal(TABLE, &command, flag, values, place, None))
        .collect())?;
    for (flag, values) in given {
        if flag == "--image-archive" {
            for v in &values {
                archive_kind(Path::new(v))?;
            }
        }
    }
    Ok(())
}

/// A file the run reads can be read: it exists, is no directory, and opens.
fn readable_file(flag: &str, path: &Path) -> Result<std::fs::File, Refusal> {
    let refuse = |why: String| Refusal(format!("{flag} {}: {why}", path.display()));
    if path.is_dir() {
        return Err(refuse("is a directory, not a file".to_owned()));
    }
    std::fs::File::open(path).map_err(|e| refuse(format!("cannot read it: {e}")))
}

/// A directory the run reads can be listed.
fn readable_dir(flag: &str, path: &Path) -> Result<(), Refusal> {
    let refuse = |why: String| Refusal(format!("{flag} {}: {why}", path.display()));
    if path.exists() && !path.is_dir() {
        return Err(refuse("is not a directory".to_owned()));
    }
    std::fs::read_dir(path)
        .map(drop)
        .map_err(|e| refuse(format!("cannot read it: {e}")))
}

/// The feature paths can be read: each a file or a directory. Checked
/// first of all, before they are parsed (and before `--list`).
pub fn check_features(flag: &str, paths: &[PathBuf]) -> Result<(), Refusal> {
    for f in paths {
        if f.is_dir() {
            readable_dir(flag, f)?;
        } else {
            readable_file(flag, f)?;
        }
    }
    Ok(())
}

/// The files and directories the run's options name, checked before
/// anything starts; the image archives are looked into too.
fn check_run_files(args: &super::cli::RunArgs, matches: &clap::ArgMatches) -> Result<(), Refusal> {
    check_features("--features", &args.features)?;
    check_features("--add-features", &args.add_features)?;
    if let Some(p) = &args.kubeconfig {
        readable_file("--kubeconfig", p)?;
    }
    if let Some(p) = &args.driver.profile {
        readable_file("--profile", p)?;
    }
    if let Some(d) = &args.binaries_dir
        && matches.value_source("binaries_dir") == Some(clap::parser::ValueSource::CommandLine)
    {
        readable_dir("--binaries-dir", d)?;
    }
    for a in &args.image_archive {
        archive_kind(a)?;
    }
    Ok(())
}

/// What an image archive is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// "OCI" or "Docker".
    pub format: &'static str,
    /// The image references it names.
    pub refs: Vec<String>,
}

/// Reads `path` as an OCI image layout or a `docker save` archive (either
/// may be gzip-compressed), or refuses it saying what it is instead.
pub fn archive_kind(path: &Path) -> Result<Archive, Refusal> {
    let flag = "--image-archive";
    let mut file = readable_file(flag, path)?;
    let refuse = |what: String| {
        Refusal(format!(
            "{flag} {}: not an OCI or Docker image archive: it is {what}",
            path.display()
        ))
    };
    let mut head = [0u8; 512];
    let n = read_up_to(&mut file, &mut head)
        .map_err(|e| Refusal(format!("{flag} {}: cannot read it: {e}", path.display())))?;
    let head = &head[..n];
    let file = std::fs::File::open(path)
        .map_err(|e| Refusal(format!("{flag} {}: cannot read it: {e}", path.display())))?;
    let (gz, reader): (bool, Box<dyn std::io::Read>) = if head.starts_with(&[0x1f, 0x8b]) {
        (true, Box::new(flate2::read::GzDecoder::new(file)))
    } else if is_tar(head) {
        (false, Box::new(file))
    } else {
        return Err(refuse(describe(head)));
    };
    let tar_what = if gz {
        "a gzip-compressed tar"
    } else {
        "a tar archive"
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|_| refuse(format!("{tar_what} that cannot be read")))?;
    let (mut oci, mut index, mut manifest): (bool, Option<String>, Option<String>) =
        (false, None, None);
    let mut names = Vec::new();
    for e in entries {
        let Ok(mut e) = e else {
            if gz && names.is_empty() {
                return Err(refuse("gzip-compressed data, not a tar archive".to_owned()));
            }
            return Err(refuse(format!("{tar_what} that ends early or is damaged")));
        };
        let name = e
            .path()
            .map(|p| p.to_string_lossy().trim_start_matches("./").to_owned())
            .unwrap_or_default();
        let mut text = || {
            let mut s = String::new();
            e.read_to_string(&mut s).ok().map(|_| s)
        };
        match name.as_str() {
            "oci-layout" => oci = true,
            "index.json" => index = text(),
            "manifest.json" => manifest = text(),
            _ => {}
        }
        if names.len() < 5 && !name.is_empty() {
            names.push(name);
        }
    }
    if oci || index.is_some() {
        return Ok(Archive {
            format: "OCI",
            refs: index.as_deref().map(oci_refs).unwrap_or_default(),
        });
    }
    if let Some(m) = manifest {
        return Ok(Archive {
            format: "Docker",
            refs: docker_refs(&m),
        });
    }
    Err(refuse(match names.as_slice() {
        [] => format!("an empty {}", tar_what.trim_start_matches("a ")),
        _ => format!(
            "{tar_what} holding neither oci-layout and index.json nor manifest.json (it starts \
             with {})",
            names.join(", ")
        ),
    }))
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// A POSIX or GNU tar header: "ustar" at offset 257.
fn is_tar(head: &[u8]) -> bool {
    head.len() >= 262 && &head[257..262] == b"ustar"
}

/// What a file that is no tar is, by its first bytes.
fn describe(head: &[u8]) -> String {
    if head.is_empty() {
        return "an empty file".to_owned();
    }
    for (magic, what) in [
        (&b"\x7fELF"[..], "an ELF program"),
        (b"PK\x03\x04", "a zip archive"),
        (b"BZh", "bzip2-compressed data"),
        (b"\xfd7zXZ", "xz-compressed data"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
        (b"%PDF", "a PDF document"),
    ] {
        if head.starts_with(magic) {
            return what.to_owned();
        }
    }
    match std::str::from_utf8(head) {
        Ok(text) => {
            let first: String = text.lines().next().unwrap_or("").chars().take(40).collect();
            format!("text, starting {first:?}")
        }
        Err(_) => format!("{} bytes of data of no kind it knows", head.len()),
    }
}

/// The image names an OCI index gives its manifests.
fn oci_refs(index: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(index) else {
        return Vec::new();
    };
    v["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let a = &m["annotations"];
            a["io.containerd.image.name"]
                .as_str()
                .or_else(|| a["org.opencontainers.image.ref.name"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

/// The tags a `docker save` manifest lists.
fn docker_refs(manifest: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(manifest) else {
        return Vec::new();
    };
    v.as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["RepoTags"].as_array().into_iter().flatten())
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}

/// Begins the generated reference in docs/cli.md.
pub const BEGIN: &str = "<!-- options: generated by `dra-e2e options --markdown` (make cli-doc) from src/runner/options.rs; edit there -->";
/// Ends it.
pub const END: &str = "<!-- end of options -->";

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The option reference docs/cli.md holds between [`BEGIN`] and [`END`],
/// from `table`.
pub fn markdown(table: &[Opt]) -> String {
    let mut out = format!("{BEGIN}\n\n");
    out.push_str("The run's options, and where each takes effect. Given where it does nothing, an option is refused before anything starts (exit status 2), naming the run's cluster and nodes and where it applies.\n\n");
    out.push_str("| option |");
    for p in Place::ALL {
        out.push_str(&format!(" {} |", p.heading()));
    }
    out.push_str(" driver under test | meaning |\n|---|");
    for _ in Place::ALL {
        out.push_str("---|");
    }
    out.push_str("---|---|\n");
    for o in table.iter().filter(|o| o.command.is_empty()) {
        out.push_str(&format!("| `{}` |", o.flag));
        for p in Place::ALL {
            let mark = match (o.places.contains(&p), o.finer.is_some()) {
                (false, _) => "refused",
                (true, false) => "yes",
                (true, true) => "yes (see meaning)",
            };
            out.push_str(&format!(" {mark} |"));
        }
        let modes = match o.modes {
            [] => "any".to_owned(),
            ms => ms.iter().map(|m| m.name()).collect::<Vec<_>>().join(", "),
        };
        out.push_str(&format!(" {modes} | {} |\n", cell(o.meaning)));
    }
    out.push_str("\nThe commands' options. `setup` and `cluster up` are about the local cluster, with the nodes of their own `--node-kind`; the others need no cluster.\n\n| command | option | applies | meaning |\n|---|---|---|---|\n");
    for o in table.iter().filter(|o| !o.command.is_empty()) {
        let applies = match o.places {
            p if p == EVERYWHERE => "always".to_owned(),
            p => p
                .iter()
                .map(|p| format!("{} nodes", p.nodes()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {applies} | {} |\n",
            o.command,
            o.flag,
            cell(o.meaning)
        ));
    }
    out.push('\n');
    out.push_str(END);
    out.push('\n');
    out
}

/// The generated part of `doc`: from [`BEGIN`] through [`END`] and its
/// line end.
pub fn generated_part(doc: &str) -> Option<&str> {
    let start = doc.find(BEGIN)?;
    let end = doc[start..].find(END)? + start + END.len();
    let end = if doc[end..].starts_with('\n') {
        end + 1
    } else {
        end
    };
    Some(&doc[start..end])
}

/// The options of `dra-e2e options`.
#[derive(Debug, clap::Args)]
pub struct OptionsArgs {
    /// Print the reference as Markdown, as docs/cli.md holds it.
    #[arg(long)]
    pub markdown: bool,

    /// Write the reference into FILE, between its markers (docs/cli.md).
    #[arg(long, value_name = "FILE", conflicts_with = "markdown")]
    pub write: Option<PathBuf>,
}

/// `dra-e2e options`: where each option applies.
pub fn cli_main(args: &OptionsArgs) -> anyhow::Result<()> {
    if args.markdown {
        print!("{}", markdown(TABLE));
        return Ok(());
    }
    if let Some(path) = &args.write {
        use anyhow::Context as _;
        let doc = std::fs::read_to_string(path)
            .with_context(|| format!("--write {}: reading it", path.display()))?;
        let Some(old) = generated_part(&doc) else {
            anyhow::bail!(
                "--write {}: it has no generated part ({BEGIN} ... {END}) to replace",
                path.display()
            );
        };
        let new = doc.replacen(old, &markdown(TABLE), 1);
        std::fs::write(path, new)
            .with_context(|| format!("--write {}: writing it", path.display()))?;
        return Ok(());
    }
    for o in TABLE {
        let command = match o.command {
            "" => "dra-e2e".to_owned(),
            c => format!("dra-e2e {c}"),
        };
        println!("{command} {}: {}", o.flag, o.where_text());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
