//! The runner binary without a cluster: listing, checking feature files,
//! and the clear errors of a run that stops before it reaches one (bad or
//! missing kubeconfigs, servers that are not Kubernetes, bad paths, a
//! temp dir too long for sockets, no Go for a first run). Part of the fast
//! tier: no root, Go or control plane needed.
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;
use common::runs::Ran;
use common::*;

/// A kubeconfig that points nowhere: a run reaching for the cluster fails
/// on it, so a test passing with it shows the run stopped before.
const NO_CLUSTER: [&str; 4] = ["--cluster", "kubeconfig", "--kubeconfig", "/nonexistent"];

/// A plain HTTP server on loopback that answers every request with
/// `status` and `body`; returns its URL.
fn http_server(status: &str, content_type: &str, body: String) -> String {
    let (status, content_type) = (status.to_owned(), content_type.to_owned());
    http_server_by_path(move |_| (status.clone(), content_type.clone(), body.clone()))
}

/// A plain HTTP server on loopback whose answer to a request for a path is
/// `answer(path)`: status line, content type and body; returns its URL.
fn http_server_by_path(
    answer: impl Fn(&str) -> (String, String, String) + Send + Sync + 'static,
) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&seen).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                let (status, content_type, body) = answer(&path);
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes());
            });
        }
    });
    url
}

/// The runner with `args`, run to its end.
fn run(home: &Path, args: &[&str]) -> Ran {
    Ran::of(isolated(home).args(args))
}

/// [`run`] with a cluster the run must not reach for.
fn run_off_cluster(home: &Path, args: &[&str]) -> Ran {
    Ran::of(isolated(home).args(NO_CLUSTER).args(args))
}

/// The runner against the cluster of kubeconfig `kc`, run to its end.
fn against(home: &Path, kc: &Path) -> Ran {
    Ran::of(
        isolated(home)
            .args(["--cluster", "kubeconfig", "--kubeconfig"])
            .arg(kc),
    )
}

#[test]
fn list_needs_no_cluster() {
    let home = tempfile::tempdir().unwrap();
    let list = |args: &[&str]| Ran::of(isolated(home.path()).arg("--list").args(args));
    list(&NO_CLUSTER)
        .exits(0)
        .says("features/kubelet_calls.feature:")
        .says("registers plugin")
        .says("@KubeletMinVersion:1.34");
    list(&["--tags", "@KubeletMinVersion:1.34"])
        .says("blocks new pod after force-delete")
        .never_says("registers plugin");
    // Several --features: the scenarios of each, and only those.
    let kubelet_calls = ["--features", "features/kubelet_calls.feature"];
    list(
        &[
            &kubelet_calls[..],
            &["--features", "features/device_health.feature"],
        ]
        .concat(),
    )
    .exits(0)
    .says("registers plugin")
    .says("must reflect device health changes")
    .never_says("must manage ResourceSlices");
    list(&[&kubelet_calls[..], &["--features", "no-such.feature"]].concat())
        .fails()
        .says("no-such.feature");
}

/// The runner carries the suite: from a directory with no feature files it
/// lists, checks and exports the built-in ones, and a repository's own
/// scenarios run beside them with --add-features.
#[test]
fn the_built_in_features_run_from_any_directory() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let at = |args: &[&str]| {
        let mut c = isolated(home.path());
        c.current_dir(elsewhere.path()).args(args);
        Ran::of(&mut c)
    };
    at(&["--list", "--tags", "@DriverConformance"])
        .exits(0)
        .says("features/conformance/kep5970.feature:")
        .says("the kubelet registers the driver's plugin")
        .never_says("registers plugin");
    at(&["check"])
        .exits(0)
        .says("every step is defined once")
        .says("the built-in features");
    // Written out, they are the same scenarios and check as clean.
    at(&["features", "export", "pack"])
        .exits(0)
        .says("built-in feature files into pack");
    let exported = elsewhere.path().join("pack/conformance/kep5970.feature");
    assert!(exported.is_file(), "{}", exported.display());
    at(&["check", "pack"]).exits(0);
    // A file of the author's own changed there is not overwritten.
    std::fs::write(&exported, "Feature: mine\n").unwrap();
    at(&["features", "export", "pack"])
        .fails()
        .says("pack/conformance/kep5970.feature already exists and differs")
        .says("--force");
    // A repository's own scenarios beside the built-in ones; --features
    // replaces them.
    let own = elsewhere.path().join("own.feature");
    std::fs::write(
        &own,
        "Feature: our own\n  @DriverConformance\n  Scenario: our driver's own check\n    Given 1 ready node\n",
    )
    .unwrap();
    at(&[
        "--list",
        "--tags",
        "@DriverConformance",
        "--add-features",
        "own.feature",
    ])
    .exits(0)
    .says("our driver's own check")
    .says("the kubelet registers the driver's plugin");
    at(&["--list", "--features", "own.feature"])
        .exits(0)
        .says("our driver's own check")
        .never_says("the kubelet registers the driver's plugin");
    at(&["--list", "--add-features", "missing.feature"])
        .fails()
        .says("--add-features missing.feature");
}

#[test]
fn check_reports_misspelt_steps_with_their_location() {
    let home = tempfile::tempdir().unwrap();
    let misspelt = fixtures("misspelt");
    run(home.path(), &["check", misspelt.to_str().unwrap()])
        .fails()
        .says("misspelt.feature:6: undefined step: And a drvier with 1 device per node");
    run(home.path(), &["check", "features"]).exits(0);
}

#[test]
fn bad_kubeconfig_gives_one_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("broken");
    std::fs::write(&kc, "this: is: not a kubeconfig: [").unwrap();
    let started = Instant::now();
    against(home.path(), &kc)
        .fails()
        .says("error: reading kubeconfig")
        .never_says("panicked");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn unreachable_server_gives_one_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: { server: 'https://127.0.0.1:9' }\n\
         users:\n- name: u\n  user: { token: t }\ncontexts:\n- name: x\n  context: { cluster: c, user: u }\n\
         current-context: x\n",
    )
    .unwrap();
    run(home.path(), &["--kubeconfig", kc.to_str().unwrap()])
        .fails()
        .says("cannot reach the API server at https://127.0.0.1:9")
        .never_says("panicked");
}

#[test]
fn no_cluster_at_all_says_how_to_get_one() {
    let home = tempfile::tempdir().unwrap();
    let ran =
        Ran::of(isolated(home.path()).env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries")));
    ran.fails()
        .says("--kubeconfig")
        .never_says("starting the local cluster");
    let t = &ran.text;
    assert_eq!(t.matches("make controlplane").count(), 1, "said once\n{t}");
}

#[test]
fn paths_matching_no_feature_file_fail() {
    let home = tempfile::tempdir().unwrap();
    run_off_cluster(home.path(), &["--input", "no-such-dir/*.feature"])
        .fails_with_only("error: --input no-such-dir/*.feature: the glob matches no feature file");
    // A glob that matches: its scenarios, once each.
    run(
        home.path(),
        &["--list", "--input", "tests/fixtures/runner/*.feature"],
    )
    .exits(0)
    .says("\n4 scenarios");
    let none = fixtures("no-features");
    run_off_cluster(home.path(), &["--features", none.to_str().unwrap()])
        .exits(1)
        .says("no feature files found in");
}

#[test]
fn unknown_tags_on_the_command_line_are_reported() {
    let home = tempfile::tempdir().unwrap();
    run(
        home.path(),
        &[
            "--list",
            "--tags",
            "not @Typo and @DynamicResourceAllocation",
        ],
    )
    .fails_with("error: --tags: unknown tag @Typo ");
    // Known tags, with colons, are fine.
    run(
        home.path(),
        &["--list", "--tags", "@FeatureGate:DRADeviceTaints"],
    )
    .exits(0);
}

#[test]
fn concurrency_zero_is_refused() {
    let home = tempfile::tempdir().unwrap();
    run_off_cluster(home.path(), &["--concurrency", "0"])
        .fails_with("error: --concurrency 0 would never start a scenario");
}

#[test]
fn a_gherkin_syntax_error_says_where_and_why_once() {
    let home = tempfile::tempdir().unwrap();
    let dir = "tests/fixtures/syntax-error";
    let want =
        "tests/fixtures/syntax-error/broken.feature:8:5: `Blah` starts with no Gherkin keyword";
    for ran in [
        run_off_cluster(home.path(), &["--features", dir]),
        run(home.path(), &["check", dir]),
    ] {
        ran.exits(1).says(want);
        let t = &ran.text;
        assert_eq!(t.matches("broken.feature").count(), 1, "{t}");
    }
}

#[test]
fn a_missing_kubeconfig_says_its_cause_once() {
    let home = tempfile::tempdir().unwrap();
    // Refused before anything starts, as a usage error (exit status 2).
    let ran = run_off_cluster(home.path(), &[]);
    ran.exits(2);
    assert_eq!(
        ran.stderr.trim(),
        "error: --kubeconfig /nonexistent: cannot read it: No such file or directory (os error 2)",
        "{}",
        ran.text
    );
}

#[test]
fn an_unauthorised_kubeconfig_says_check_the_credentials() {
    let home = tempfile::tempdir().unwrap();
    let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
    let server = http_server("401 Unauthorized", "application/json", status.to_owned());
    let kc = kubeconfig_for(home.path(), &server);
    let ran = against(home.path(), &kc);
    ran.fails_in_one_line_saying(&format!(
        "the API server at {server}/ answered 401 Unauthorized: check the credentials"
    ));
    assert!(
        !ran.stderr.contains("Status {"),
        "a Debug dump\n{}",
        ran.text
    );
}

/// An API server that shows its version to anyone but refuses the user
/// everything else: said as such, not as "does not serve resource.k8s.io/v1".
#[test]
fn a_user_forbidden_the_api_groups_is_told_so() {
    let home = tempfile::tempdir().unwrap();
    let server = http_server_by_path(|path| {
        if path == "/version" {
            let v = r#"{"major":"1","minor":"35","gitVersion":"v1.35.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            ("200 OK".into(), "application/json".into(), v.into())
        } else {
            let s = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden","reason":"Forbidden","code":403}"#;
            ("403 Forbidden".into(), "application/json".into(), s.into())
        }
    });
    let kc = kubeconfig_for(home.path(), &server);
    against(home.path(), &kc).fails_with_only(&format!(
        "error: the API server at {server}/ answered 403 Forbidden: the kubeconfig's user may \
         not read the API groups; check its permissions"
    ));
}

#[test]
fn a_server_that_is_not_kubernetes_gives_one_line() {
    let home = tempfile::tempdir().unwrap();
    let page: String = (0..80)
        .map(|i| format!("<p>line {i} of a web page</p>\n"))
        .collect();
    let page = format!("<html><body>\n{page}</body></html>\n");
    for status in ["404 Not Found", "200 OK"] {
        let server = http_server(status, "text/html", page.clone());
        let kc = kubeconfig_for(home.path(), &server);
        let ran = against(home.path(), &kc);
        ran.fails_in_one_line_saying(&format!("{server}/ is not a Kubernetes API server"));
        assert!(!ran.stderr.contains("<p>"), "{status}\n{}", ran.text);
    }
}

#[test]
fn report_and_artifact_paths_are_checked_before_the_cluster_starts() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let cases = [
        (
            "--junit",
            home.path().join("missing/junit.xml"),
            "does not exist",
        ),
        ("--cucumber-json", home.path().to_owned(), "is a directory"),
        ("--artifacts", file.join("artifacts"), "is not a directory"),
    ];
    for (option, path, why) in cases {
        // No control-plane binaries: reaching for the cluster would fail on those.
        Ran::of(
            isolated(home.path())
                .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
                .args(["--cluster", "local", "--features", "tests/fixtures/runner"])
                .arg(option)
                .arg(&path),
        )
        .fails_with(&format!("error: {option} {}", path.display()))
        .error_says(why)
        .never_says("starting the local cluster");
    }
}

#[test]
fn a_temp_dir_too_long_for_unix_sockets_is_refused_up_front() {
    let home = tempfile::tempdir().unwrap();
    // 40 characters in all, as a CI runner's TMPDIR may be.
    let pad = 40usize.saturating_sub(home.path().as_os_str().len() + 1);
    let tmp = home.path().join("t".repeat(pad.max(1)));
    std::fs::create_dir_all(&tmp).unwrap();
    Ran::of(
        isolated(home.path())
            .env("TMPDIR", &tmp)
            .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
            .args(["--cluster", "local", "--features", "tests/fixtures/runner"]),
    )
    .fails_with(&format!("error: TMPDIR {} (", tmp.display()))
    .error_says("use a TMPDIR of at most 24 bytes")
    .never_says("starting the local cluster");
}

#[test]
fn check_checks_every_path_given() {
    let home = tempfile::tempdir().unwrap();
    let misspelt = fixtures("misspelt");
    run(
        home.path(),
        &["check", "features", misspelt.to_str().unwrap()],
    )
    .exits(1)
    .says("undefined step: And a drvier");
}

/// Without Go, a first run says what to install, in one message.
#[test]
fn a_first_run_without_go_says_what_to_install() {
    let home = tempfile::tempdir().unwrap();
    Ran::of(
        isolated(home.path())
            .env_remove("DRA_E2E_BINARIES_DIR")
            .env_remove("DRA_E2E_BUILD_CONTROLPLANE")
            .env("DRA_E2E_CACHE_DIR", home.path().join("cache"))
            .env("PATH", "/nonexistent")
            .arg("setup"),
    )
    .fails_in_one_line_saying(
        "`go` is not on PATH: building the local cluster's control plane needs Go 1.",
    );
}

/// Versions a run cannot honour are refused before anything is built or
/// started, each saying what the user gave and what would do.
#[test]
fn kubernetes_versions_the_run_cannot_honour_are_refused_up_front() {
    let home = tempfile::tempdir().unwrap();
    let local = |extra: &[&str]| {
        let mut args = vec![
            "--cluster",
            "local",
            "--features",
            "features/kubelet_calls.feature",
        ];
        args.extend_from_slice(extra);
        run(home.path(), &args)
    };
    local(&["--node-kind", "real", "--kubelet-version", "1.33"])
        .fails()
        .error_says(
            "no release of Kubernetes 1.33 is pinned in hack/versions.env (pinned: v1.37.2",
        );
    local(&["--node-kind", "real", "--kubelet-version", "v1.33.0"])
        .fails()
        .error_says(
            "--kubelet-version: kubelet v1.33.0 is 4 minor versions older than the control plane \
         v1.37.2: the version skew policy allows at most 3, so the oldest kubelet for it is 1.34",
        );
    local(&[
        "--node-kind",
        "real",
        "--kube-version",
        "1.35",
        "--kubelet-version",
        "1.36",
    ])
    .fails()
    .error_says("kubelet v1.36.3 is newer than the control plane v1.35.4");
    local(&["--kubelet-version", "1.36"]).exits(2).error_says(
        "--kubelet-version 1.36: does nothing here: this run is on cluster local, nodes simulated, \
         and simulated nodes are the runner's own kubelet, not a built one",
    );
    local(&["--kube-version", "latest"])
        .fails()
        .error_says("\"latest\" is not a Kubernetes version");
    run_off_cluster(home.path(), &["--kube-version", "1.36"])
        .fails()
        .error_says("--kube-version 1.36: does nothing here: this run is on cluster kubeconfig")
        .error_says("versions are chosen for the local cluster only");
}

/// A directory the user named that holds another release than the one
/// asked for is refused, naming both, instead of silently running the
/// wrong Kubernetes.
#[test]
fn a_binaries_dir_of_another_release_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("bin");
    std::fs::create_dir(&dir).unwrap();
    for b in [
        "etcd",
        "kube-apiserver",
        "kube-scheduler",
        "kube-controller-manager",
    ] {
        let p = dir.join(b);
        std::fs::write(&p, "#!/bin/sh\necho Kubernetes v1.37.2\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Ran::of(
        isolated(home.path())
            .env("DRA_E2E_BINARIES_DIR", &dir)
            .args(["--cluster", "local", "--kube-version", "1.35"])
            .args(["--features", "features/kubelet_calls.feature"]),
    )
    .fails()
    .error_says(&format!(
        "--kube-version asks for v1.35.4, but {} (from DRA_E2E_BINARIES_DIR) holds kube-apiserver \
         v1.37.2",
        dir.display()
    ));
}
