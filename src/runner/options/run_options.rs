//! The run's options in the table: cucumber's, which select and run
//! scenarios anywhere, and the runner's own, most of which reach only the
//! clusters and nodes the runner starts itself. Kept apart from the
//! commands' options because the run's are the ones a user most often
//! gives in the wrong place, and the ones the reference sets out per place.
use super::{
    ANY, DEPLOYED, EVERYWHERE, Finer, Given, KUBECONFIG, LOCAL, LOCAL_REAL, NOT_STARTED, Opt,
    Place, REAL_NODES, SIMULATED,
};
use crate::cluster::proxy::pods::DEFAULT_IMAGE as UPSTREAM_PROXY_IMAGE;

/// The run's options, in the order the reference lists them.
pub(super) const OPTIONS: &[Opt] = &[
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
];

/// `--proxy-image`: the interposer needs an agent that connects to a
/// socket, which upstream's hostpathplugin cannot; on real local nodes the
/// image has to be on the nodes (they pull nothing), and upstream's name
/// without its archive is the runner's own image under that name.
pub(super) fn proxy_image_where_it_runs(g: &Given) -> Option<Finer> {
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
pub(super) fn archive_used(g: &Given) -> Option<Finer> {
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
