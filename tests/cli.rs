//! The runner binary without a cluster: listing, checking feature files,
//! and the clear errors of a run that stops before it reaches one (bad or
//! missing kubeconfigs, servers that are not Kubernetes, bad paths, a
//! temp dir too long for sockets, no Go for a first run). Part of the fast
//! tier: no root, Go or control plane needed.
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

mod common;
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

/// The runner against the cluster of kubeconfig `kc`, run to its end.
fn against(home: &Path, kc: &Path) -> Output {
    isolated(home)
        .args(["--cluster", "kubeconfig", "--kubeconfig"])
        .arg(kc)
        .output()
        .unwrap()
}

#[test]
fn list_needs_no_cluster() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .args([
            "--list",
            "--cluster",
            "kubeconfig",
            "--kubeconfig",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("features/kubelet_calls.feature:"), "{t}");
    assert!(t.contains("registers plugin"), "{t}");
    assert!(t.contains("@KubeletMinVersion:1.34"), "{t}");
    let o = isolated(home.path())
        .args(["--list", "--tags", "@KubeletMinVersion:1.34"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(t.contains("blocks new pod after force-delete"), "{t}");
    assert!(!t.contains("registers plugin"), "{t}");
    // Several --features: the scenarios of each, and only those.
    let o = isolated(home.path())
        .args(["--list", "--features", "features/kubelet_calls.feature"])
        .args(["--features", "features/device_health.feature"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("registers plugin"), "{t}");
    assert!(t.contains("must reflect device health changes"), "{t}");
    assert!(!t.contains("must manage ResourceSlices"), "{t}");
    let o = isolated(home.path())
        .args(["--list", "--features", "features/kubelet_calls.feature"])
        .args(["--features", "no-such.feature"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("no-such.feature"), "{}", text(&o));
}

#[test]
fn check_reports_misspelt_steps_with_their_location() {
    let home = tempfile::tempdir().unwrap();
    let bad = isolated(home.path())
        .args(["check", fixtures("misspelt").to_str().unwrap()])
        .output()
        .unwrap();
    let t = text(&bad);
    assert!(!bad.status.success(), "{t}");
    assert!(
        t.contains("misspelt.feature:6: undefined step: And a drvier with 1 device per node"),
        "{t}"
    );
    let good = isolated(home.path())
        .args(["check", "features"])
        .output()
        .unwrap();
    assert!(good.status.success(), "{}", text(&good));
}

#[test]
fn bad_kubeconfig_gives_one_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("broken");
    std::fs::write(&kc, "this: is: not a kubeconfig: [").unwrap();
    let started = Instant::now();
    let o = against(home.path(), &kc);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("error: reading kubeconfig"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
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
    let o = isolated(home.path())
        .args(["--kubeconfig", kc.to_str().unwrap()])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("cannot reach the API server at https://127.0.0.1:9"),
        "{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
}

#[test]
fn no_cluster_at_all_says_how_to_get_one() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert_eq!(t.matches("make controlplane").count(), 1, "said once\n{t}");
    assert!(t.contains("--kubeconfig"), "{t}");
    assert!(!t.contains("starting the local cluster"), "{t}");
}

#[test]
fn paths_matching_no_feature_file_fail() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .args(NO_CLUSTER)
        .args(["--input", "no-such-dir/*.feature"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_eq!(
        stderr(&o).trim(),
        "error: --input no-such-dir/*.feature: the glob matches no feature file"
    );
    // A glob that matches: its scenarios, once each.
    let o = isolated(home.path())
        .args(["--list", "--input", "tests/fixtures/runner/*.feature"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("\n4 scenarios"), "{t}");
    let o = isolated(home.path())
        .args(NO_CLUSTER)
        .arg("--features")
        .arg(fixtures("no-features"))
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("no feature files found in"), "{t}");
}

#[test]
fn unknown_tags_on_the_command_line_are_reported() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .args([
            "--list",
            "--tags",
            "not @Typo and @DynamicResourceAllocation",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        stderr(&o).starts_with("error: --tags: unknown tag @Typo "),
        "{t}"
    );
    // Known tags, with colons, are fine.
    let o = isolated(home.path())
        .args(["--list", "--tags", "@FeatureGate:DRADeviceTaints"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn concurrency_zero_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .args(NO_CLUSTER)
        .args(["--concurrency", "0"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        stderr(&o).starts_with("error: --concurrency 0 would never start a scenario"),
        "{t}"
    );
}

#[test]
fn a_gherkin_syntax_error_says_where_and_why_once() {
    let home = tempfile::tempdir().unwrap();
    let want =
        "tests/fixtures/syntax-error/broken.feature:8:5: `Blah` starts with no Gherkin keyword";
    let o = isolated(home.path())
        .args(NO_CLUSTER)
        .args(["--features", "tests/fixtures/syntax-error"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(want), "{t}");
    assert_eq!(t.matches("broken.feature").count(), 1, "{t}");
    let o = isolated(home.path())
        .args(["check", "tests/fixtures/syntax-error"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(want), "{t}");
    assert_eq!(t.matches("broken.feature").count(), 1, "{t}");
}

#[test]
fn a_missing_kubeconfig_says_its_cause_once() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path()).args(NO_CLUSTER).output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_eq!(
        stderr(&o).trim(),
        "error: reading kubeconfig /nonexistent: No such file or directory (os error 2)"
    );
}

#[test]
fn an_unauthorised_kubeconfig_says_check_the_credentials() {
    let home = tempfile::tempdir().unwrap();
    let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
    let server = http_server("401 Unauthorized", "application/json", status.to_owned());
    let kc = kubeconfig_for(home.path(), &server);
    let o = against(home.path(), &kc);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{t}");
    assert!(
        err.contains(&format!(
            "the API server at {server}/ answered 401 Unauthorized: check the credentials"
        )),
        "{t}"
    );
    assert!(!err.contains("Status {"), "a Debug dump\n{t}");
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
    let o = against(home.path(), &kc);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_eq!(
        stderr(&o).trim(),
        format!(
            "error: the API server at {server}/ answered 403 Forbidden: the kubeconfig's user may \
             not read the API groups; check its permissions"
        )
    );
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
        let o = against(home.path(), &kc);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{status}\n{t}");
        assert!(
            err.contains(&format!("{server}/ is not a Kubernetes API server")),
            "{status}\n{t}"
        );
        assert!(!err.contains("<p>"), "{status}\n{t}");
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
        let o = isolated(home.path())
            .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
            .args(["--cluster", "local", "--features", "tests/fixtures/runner"])
            .arg(option)
            .arg(&path)
            .output()
            .unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("error: {option} {}", path.display())),
            "{t}"
        );
        assert!(err.contains(why), "{t}");
        assert!(!t.contains("starting the local cluster"), "{t}");
    }
}

#[test]
fn a_temp_dir_too_long_for_unix_sockets_is_refused_up_front() {
    let home = tempfile::tempdir().unwrap();
    // 40 characters in all, as a CI runner's TMPDIR may be.
    let pad = 40usize.saturating_sub(home.path().as_os_str().len() + 1);
    let tmp = home.path().join("t".repeat(pad.max(1)));
    std::fs::create_dir_all(&tmp).unwrap();
    let o = isolated(home.path())
        .env("TMPDIR", &tmp)
        .env("DRA_E2E_BINARIES_DIR", home.path().join("no-binaries"))
        .args(["--cluster", "local", "--features", "tests/fixtures/runner"])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("error: TMPDIR {} (", tmp.display())),
        "{t}"
    );
    assert!(err.contains("use a TMPDIR of at most 24 bytes"), "{t}");
    assert!(!t.contains("starting the local cluster"), "{t}");
}

#[test]
fn check_checks_every_path_given() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .args(["check", "features"])
        .arg(fixtures("misspelt"))
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("undefined step: And a drvier"), "{t}");
}

/// Without Go, a first run says what to install, in one message.
#[test]
fn a_first_run_without_go_says_what_to_install() {
    let home = tempfile::tempdir().unwrap();
    let o = isolated(home.path())
        .env_remove("DRA_E2E_BINARIES_DIR")
        .env_remove("DRA_E2E_BUILD_CONTROLPLANE")
        .env("DRA_E2E_CACHE_DIR", home.path().join("cache"))
        .env("PATH", "/nonexistent")
        .arg("setup")
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{t}");
    assert!(
        t.contains("`go` is not on PATH: building the local cluster's control plane needs Go 1."),
        "{t}"
    );
}
