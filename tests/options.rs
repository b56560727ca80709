//! Every option means something wherever it is accepted: the runner binary
//! refuses, with exit status 2 and before any cluster starts, an option
//! given where it does nothing (walking the whole options table at every
//! cluster and node kind) and a file an option names that is missing,
//! unreadable or not what it must be. Fast tier: no cluster is started,
//! none is needed.
use std::path::Path;

use crate::common;
use common::runs::Ran;
use common::*;

use dra_e2e::runner::options::{Place, TABLE};

/// The arguments that put a run at `place`. A kubeconfig cluster with no
/// kubeconfig anywhere: a run that reached for it would fail on that.
fn place_args(place: Place) -> &'static [&'static str] {
    match place {
        Place::LocalSimulated => &["--cluster", "local"],
        Place::LocalReal => &["--cluster", "local", "--node-kind", "real"],
        Place::Kubeconfig => &["--cluster", "kubeconfig"],
    }
}

/// The runner at `place` on one small feature, with `args`, with nothing to
/// start a local cluster from: a run that got past its checks would fail on
/// the missing binaries, with another message and exit status 1.
fn run_at(home: &Path, place: Place, args: &[&str]) -> Ran {
    Ran::of(
        isolated(home)
            .env("DRA_E2E_BINARIES_DIR", home.join("no-binaries"))
            .env("DRA_E2E_BUILD_CONTROLPLANE", "0")
            .args(["--features", "tests/fixtures/runner"])
            .args(place_args(place))
            .args(args),
    )
}

/// Refused before anything starts: exit status 2, one line saying `part`.
#[track_caller]
fn refused(ran: &Ran, part: &str) {
    ran.exits(2).error_says(part);
    for started in [
        "starting the local cluster",
        "building",
        "cannot reach",
        "make controlplane",
    ] {
        assert!(!ran.text.contains(started), "{started:?} in\n{}", ran.text);
    }
}

/// The walk: every run option of the table, at every place where it does
/// not apply, is refused by the binary saying the option, the run's cluster
/// and nodes, and where the option does apply.
#[test]
fn every_option_is_refused_at_every_place_where_it_does_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut walked = 0;
    for o in TABLE.iter().filter(|o| o.command.is_empty()) {
        for place in Place::ALL {
            if o.places.contains(&place) {
                continue; // taken: the unit walk checks it is not refused
            }
            // `--node-kind` puts the run on a place; `--cluster` decides.
            let ran = run_at(home.path(), place, o.example);
            let at = o.example.iter().position(|a| *a == o.flag);
            let value = at.and_then(|i| o.example.get(i + 1));
            let typed = match value {
                Some(v) if !v.starts_with('-') => format!("{} {v}: does nothing here", o.flag),
                _ => format!("{}: does nothing here", o.flag),
            };
            refused(&ran, &typed);
            ran.error_says(&format!("this run is on {place}"))
                .error_says(&o.where_text());
            walked += 1;
        }
    }
    // Twenty-odd refusals: a table that refused nothing would pass empty.
    assert!(walked >= 20, "{walked}");
}

/// The issue's four commands on the default local cluster (simulated
/// nodes): each refused, none ends "1 passed". (The issue's scenario title,
/// "parameters reach", has since become this one.)
#[test]
fn the_four_ignored_options_of_the_issue_are_refused_on_simulated_nodes() {
    let home = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            &["--image-archive", "/nonexist.tar"][..],
            "--image-archive /nonexist.tar: does nothing here: this run is on cluster local, nodes simulated",
        ),
        (
            &["--proxy-image", "foo/bar:1"],
            "--proxy-image foo/bar:1: does nothing here: this run is on cluster local, nodes simulated",
        ),
        (
            &["--cdi-dir", "/x"],
            "--cdi-dir /x: does nothing here: this run is on cluster local, nodes simulated",
        ),
        (
            &["--kubelet-root-dir", "/x"],
            "--kubelet-root-dir /x: does nothing here: this run is on cluster local, nodes simulated",
        ),
    ] {
        let ran = Ran::of(
            isolated(home.path())
                .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
                .args(["--name", "supports claim and class parameters"])
                .args(args),
        );
        refused(&ran, says);
        ran.error_says("(--cluster auto chose the local cluster: no kubeconfig names a cluster)");
        assert!(!ran.text.contains("passed"), "{}", ran.text);
    }
}

/// Upstream's hostpathplugin image with the interposer is refused with the
/// reason (the interposer needs `proxy-agent --connect`), on every cluster.
#[test]
fn hostpathplugin_as_the_proxy_of_the_interposer_is_refused_with_the_reason() {
    let home = tempfile::tempdir().unwrap();
    for place in [Place::LocalReal, Place::Kubeconfig] {
        let ran = run_at(
            home.path(),
            place,
            &[
                "--proxy-image",
                "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
                "--profile",
                "profiles/builtin.yaml",
                "--interpose",
            ],
        );
        refused(
            &ran,
            &format!(
                "--proxy-image registry.k8s.io/sig-storage/hostpathplugin:v1.17.1: refused here: \
                 this run is on {place}: --interpose reaches the driver's sockets through node \
                 host pods running `dra-e2e-agent proxy-agent --connect`, which upstream's \
                 hostpathplugin lacks"
            ),
        );
    }
}

/// On real local nodes, upstream's image given is used; without its
/// archive the run says, once at its start, that the name is the runner's
/// own image there (and goes on: here to the missing control plane).
#[test]
fn upstreams_proxy_image_on_real_local_nodes_is_taken_and_said() {
    let home = tempfile::tempdir().unwrap();
    let ran = run_at(
        home.path(),
        Place::LocalReal,
        &[
            "--proxy-image",
            "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
        ],
    );
    assert_ne!(ran.code, Some(2), "{}", ran.text);
    ran.says("dra-e2e: --proxy-image registry.k8s.io/sig-storage/hostpathplugin:v1.17.1: no --image-archive holds upstream's image");
}

/// A driver deployment the option does not work with is refused, naming
/// the deployment.
#[test]
fn interpose_with_a_driver_someone_else_installed_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let profile = home.path().join("installed.yaml");
    std::fs::write(
        &profile,
        "driverName: gpu.example.com\ndeviceClass:\n  name: gpu.example.com\ndeployment:\n  mode: Installed\n",
    )
    .unwrap();
    let ran = run_at(
        home.path(),
        Place::Kubeconfig,
        &["--profile", profile.to_str().unwrap(), "--interpose"],
    );
    refused(
        &ran,
        "--interpose: does nothing here: this run is on cluster kubeconfig, nodes the cluster's own, with a driver whose deployment.mode is Installed",
    );
}

/// Files the options name are checked before anything starts: missing,
/// unreadable, a directory, or an image archive that is none.
#[test]
fn files_named_by_options_are_checked_before_anything_starts() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("missing");
    let missing = missing.to_str().unwrap();
    let unreadable = home.path().join("unreadable");
    std::fs::write(&unreadable, "x").unwrap();
    std::fs::set_permissions(&unreadable, std::fs::Permissions::from_mode(0o000)).unwrap();
    let unreadable = unreadable.to_str().unwrap();
    // Root reads anything: the unreadable cases are for other users.
    let root = std::fs::read(unreadable).is_ok();
    let text = home.path().join("notes.tar");
    std::fs::write(&text, "these are notes\n").unwrap();
    let text = text.to_str().unwrap();
    let dir = home.path().to_str().unwrap();
    let mut cases = vec![
        (
            Place::LocalReal,
            vec!["--image-archive", missing],
            format!("--image-archive {missing}: cannot read it: No such file or directory"),
        ),
        (
            Place::LocalReal,
            vec!["--image-archive", text],
            format!(
                "--image-archive {text}: not an OCI or Docker image archive: it is text, starting \"these are notes\""
            ),
        ),
        (
            Place::LocalReal,
            vec!["--image-archive", dir],
            format!("--image-archive {dir}: is a directory, not a file"),
        ),
        (
            Place::LocalSimulated,
            vec!["--profile", missing],
            format!("--profile {missing}: cannot read it: No such file or directory"),
        ),
        (
            Place::Kubeconfig,
            vec!["--kubeconfig", missing],
            format!("--kubeconfig {missing}: cannot read it: No such file or directory"),
        ),
        (
            Place::LocalSimulated,
            vec!["--binaries-dir", missing],
            format!("--binaries-dir {missing}: cannot read it: No such file or directory"),
        ),
        (
            Place::LocalSimulated,
            vec!["--binaries-dir", text],
            format!("--binaries-dir {text}: is not a directory"),
        ),
        (
            Place::LocalSimulated,
            vec!["--features", "tests/fixtures/runner", "--features", missing],
            format!("--features {missing}: cannot read it: No such file or directory"),
        ),
    ];
    if !root {
        cases.push((
            Place::Kubeconfig,
            vec!["--kubeconfig", unreadable],
            format!("--kubeconfig {unreadable}: cannot read it: Permission denied"),
        ));
        cases.push((
            Place::LocalReal,
            vec!["--image-archive", unreadable],
            format!("--image-archive {unreadable}: cannot read it: Permission denied"),
        ));
    }
    for (place, args, says) in cases {
        let ran = Ran::of(
            isolated(home.path())
                .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
                .args(place_args(place))
                .args(if args[0] == "--features" {
                    &[][..]
                } else {
                    &["--features", "tests/fixtures/runner"][..]
                })
                .args(&args),
        );
        refused(&ran, &says);
    }
}

/// Broken variant of the file checks: a readable file of the right kind
/// passes them (the run goes on to fail elsewhere, not with exit 2).
#[test]
fn files_that_are_right_pass_the_checks() {
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: { server: 'https://127.0.0.1:9' }\n\
         users:\n- name: u\n  user: { token: t }\ncontexts:\n- name: x\n  context: { cluster: c, user: u }\n\
         current-context: x\n",
    )
    .unwrap();
    Ran::of(
        isolated(home.path())
            .args(["--features", "tests/fixtures/runner", "--kubeconfig"])
            .arg(&kc),
    )
    .exits(1)
    .says("cannot reach the API server at https://127.0.0.1:9");
}

/// A command's option is refused where it does nothing too, at the local
/// place of the command's own --node-kind.
#[test]
fn commands_refuse_options_that_do_nothing_with_their_node_kind() {
    let home = tempfile::tempdir().unwrap();
    let ran = Ran::of(isolated(home.path()).args(["cluster", "up", "--image-archive", "/x.tar"]));
    refused(
        &ran,
        "dra-e2e cluster up --image-archive /x.tar: does nothing here: this run is on cluster local, nodes simulated",
    );
    let ran = Ran::of(isolated(home.path()).args([
        "cluster",
        "up",
        "--node-kind",
        "real",
        "--wipe-delay",
        "1s",
    ]));
    refused(
        &ran,
        "dra-e2e cluster up --wipe-delay 1s: does nothing here: this run is on cluster local, nodes real",
    );
    let ran = Ran::of(isolated(home.path()).args(["setup", "--kubelet-version", "1.36"]));
    refused(
        &ran,
        "dra-e2e setup --kubelet-version 1.36: does nothing here",
    );
}

/// `dra-e2e options` prints where each option applies; `--markdown` is
/// what docs/cli.md holds.
#[test]
fn the_options_command_prints_the_table() {
    let home = tempfile::tempdir().unwrap();
    Ran::of(isolated(home.path()).arg("options"))
        .exits(0)
        .says("dra-e2e --cdi-dir: a kubeconfig cluster (--cluster kubeconfig; kind is one)")
        .says("dra-e2e cluster up --wipe-delay: the local cluster's simulated nodes");
    let md = Ran::of(isolated(home.path()).args(["options", "--markdown"]));
    md.exits(0);
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md")).unwrap();
    assert!(
        doc.contains(md.text.trim()),
        "docs/cli.md lacks `dra-e2e options --markdown`; run `make cli-doc`"
    );
}
