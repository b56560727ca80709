//! The commands' options in the table. `setup` and `cluster up` work on
//! the local cluster at the place of their own `--node-kind`; the other
//! commands reach no cluster, so nearly all their options apply
//! everywhere. They are apart from the run's options because a command's
//! options change with the command, not with where the run is.
use super::{ANY, EVERYWHERE, LOCAL_REAL, Opt, SIMULATED};

/// The commands' options, command by command.
pub(super) const OPTIONS: &[Opt] = &[
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
