//! The runner binary end to end on the local cluster: full runs (reports,
//! artifacts, skips, shards, interrupts, nothing left behind), a dying
//! control plane, and the first run's build. Without a cluster: tests/cli.rs.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::runs::{Ran, junit_case};
use common::*;

/// A kubeconfig that points nowhere: a run reaching for the cluster fails
/// on it, so a test passing with it shows the run stopped before.
const NO_CLUSTER: [&str; 4] = ["--cluster", "kubeconfig", "--kubeconfig", "/nonexistent"];

/// The JUnit report is valid against the schema CI tools read (xmllint) and
/// reads back with a JUnit parser as what happened: a suite per feature
/// with the run's properties, cases named by title with the feature as
/// classname, failures naming their first failing step and its error with the
/// step log in the body, skips with their reason.
fn check_junit(path: &Path) {
    let xml = std::fs::read_to_string(path).unwrap();
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemas/junit.xsd");
    let lint = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&schema)
        .arg(path)
        .output()
        .expect("xmllint (Debian's libxml2-utils) runs");
    assert!(lint.status.success(), "{}\n{xml}", text(&lint));

    let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes())).unwrap();
    assert_eq!(suites.suites.len(), 1, "{xml}");
    let suite = &suites.suites[0];
    assert_eq!(suite.name, "runner outcomes");
    assert_eq!(
        (suite.tests, suite.failures, suite.skipped),
        (4, 2, 1),
        "{xml}"
    );
    let props = &suite.properties.hashmap;
    assert_eq!(
        props.get("nodes.ready").map(String::as_str),
        Some("1"),
        "{xml}"
    );
    assert!(props["kubernetes.version"].starts_with("v1."), "{xml}");
    // What the run proves: the simulator, not the kubelet.
    assert_eq!(
        props.get("kubelet").map(String::as_str),
        Some("dra-e2e simulated kubelet"),
        "{xml}"
    );
    assert!(
        props["cluster"].starts_with("local cluster with 1 simulated nodes"),
        "{xml}"
    );
    assert!(
        props["feature-gates"].contains("DynamicResourceAllocation"),
        "{xml}"
    );
    let case = |name: &str| junit_case(suite, name);
    for c in &suite.cases {
        assert_eq!(c.classname.as_deref(), Some("runner outcomes"), "{xml}");
        assert!(
            !c.name.contains(".feature"),
            "no path in the name: {}",
            c.name
        );
    }
    assert!(
        case("an inline claim reaches the container")
            .status
            .is_success()
    );
    let junit_parser::TestStatus::Failure(f) = &case("fails on purpose").status else {
        panic!("fails on purpose did not fail\n{xml}");
    };
    assert_eq!(f.failure_type, "StepFailed");
    assert!(
        f.message
            .starts_with("Then every container of pod \"tester-1\" has env \"user_a=not-b\": "),
        "{}",
        f.message
    );
    assert!(f.message.contains("(artifacts: "), "{}", f.message);
    assert!(f.text.contains("[passed] Given 1 ready node"), "{}", f.text);
    assert!(
        f.text.contains("[FAILED] Then every container"),
        "{}",
        f.text
    );
    let junit_parser::TestStatus::Failure(typo) = &case("has a typo").status else {
        panic!("has a typo did not fail\n{xml}");
    };
    assert!(
        typo.message
            .starts_with("And a drvier with 1 device per node: "),
        "{}",
        typo.message
    );
    let junit_parser::TestStatus::Skipped(s) = &case("needs more nodes").status else {
        panic!("needs more nodes was not skipped\n{xml}");
    };
    assert_eq!(
        s.message,
        "needs at least 5 ready schedulable nodes, the cluster has 1"
    );
}

/// The HTML report, opened in a real headless browser (Debian's chromium):
/// it lays out (the page's own check marks the body with the timeline's
/// drawn width, its bars and the scenarios that take up space), shows the
/// summary and the failure, links artifacts that exist, and loads nothing
/// from elsewhere.
fn check_html(path: &Path) {
    let page = std::fs::read_to_string(path).unwrap();
    for external in ["src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(
            !page.contains(external),
            "{external} in a self-contained page"
        );
    }
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", path.display()))
        .output()
        .expect("chromium (Debian's chromium package) runs");
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let rendered = dom
        .split("data-rendered=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("the page never finished its layout check\n{}", text(&o)));
    let field = |name: &str| -> u64 {
        rendered
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in {rendered:?}"))
    };
    assert!(field("timeline-width") > 100, "{rendered}");
    // Three scenarios ran (one was skipped): three bars, four scenarios listed.
    assert_eq!(field("bars"), 3, "{rendered}");
    assert_eq!(field("scenarios-shown"), 4, "{rendered}");
    for shown in [
        "1 passed",
        "2 failed",
        "1 skipped",
        "Then every container of pod \"tester-1\" has env \"user_a=not-b\"",
        "needs at least 5 ready schedulable nodes",
    ] {
        let shown = shown.replace('"', "&quot;");
        assert!(
            dom.contains(&shown) || dom.contains(&shown.replace("&quot;", "\"")),
            "{shown} not shown"
        );
    }
    let dir = path.parent().unwrap();
    let links: Vec<&str> = dom
        .split("href=\"")
        .skip(1)
        .filter_map(|l| l.split('"').next())
        .filter(|l| l.ends_with("events.txt"))
        .collect();
    assert_eq!(
        links.len(),
        2,
        "an events.txt per failed scenario: {links:?}"
    );
    for l in links {
        assert!(dir.join(l).exists(), "{l} is not a file next to the report");
    }
}

/// Waits until a file under `home` is `wanted`, polling every `every`. False
/// if the run ended first or none came `within`.
fn wait_for_file(
    home: &Path,
    child: &mut std::process::Child,
    within: Duration,
    every: Duration,
    wanted: impl Fn(&Path) -> bool,
) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let found = walk(home).iter().any(|p| wanted(p));
        let exited = child.try_wait().unwrap().is_some();
        if found || exited || Instant::now() > deadline {
            return found;
        }
        // No event tells a test process that a file appeared elsewhere.
        std::thread::sleep(every);
    }
}

/// Waits until the run is mid-scenario: its claim is prepared once a CDI
/// spec file exists on the node. False if the run ended first (it was not
/// interrupted mid-scenario then) or nothing was prepared in time.
fn wait_until_prepared(home: &Path, child: &mut std::process::Child) -> bool {
    let cdi_spec = |p: &Path| {
        p.extension().is_some_and(|e| e == "json") && p.parent().is_some_and(|d| d.ends_with("cdi"))
    };
    let (within, every) = (Duration::from_secs(240), Duration::from_millis(200));
    wait_for_file(home, child, within, every, cdi_spec)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Kills one control-plane component of a local run while its scenario's
/// pod runs; returns the run's output, exit code and how long it took to end.
fn run_and_kill(component: &str) -> (String, Option<i32>, Duration) {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt", &[]));
    let prepared = wait_until_prepared(home.path(), &mut run.child);
    let needle = format!("{component} ");
    let pid = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let ours = cmd.contains(&*home.path().to_string_lossy());
        let binary = cmd.split(' ').next()?.rsplit('/').next()?.to_owned() + " ";
        (ours && binary == needle).then(|| e.file_name().to_string_lossy().parse::<u32>().ok())?
    });
    let killed_at = Instant::now();
    if let Some(pid) = pid {
        // A process of the run this test started.
        let _ = dra_e2e::sys::kill(pid, dra_e2e::sys::Signal::Kill);
    }
    let (code, t) = run.finish();
    let took = killed_at.elapsed();
    assert!(prepared, "the scenario never prepared its claim\n{t}");
    assert!(
        pid.is_some(),
        "no {component} process of the run found\n{t}"
    );
    assert_nothing_left(home.path(), &t);
    (t, code, took)
}

/// The lines a terminal shows for `raw`: a carriage return moves to the
/// line's start (what follows overwrites it), `ESC [2K` clears the line,
/// a newline ends it; other escape codes are kept as text.
fn as_a_terminal_shows(raw: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line: Vec<char> = Vec::new();
    let mut col = 0;
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("\u{1b}[2K") {
            line.clear();
            col = 0;
            rest = after;
            continue;
        }
        match c {
            '\r' => col = 0,
            '\n' => {
                lines.push(line.iter().collect());
                line.clear();
                col = 0;
            }
            c => {
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
        rest = &rest[c.len_utf8()..];
    }
    lines.push(line.into_iter().collect());
    lines
}

/// A stand-in for the control-plane build: says what it builds, waits
/// `FAKE_SLEEP` seconds, links the machine's built binaries into the build's
/// cache dir and counts its runs.
fn fake_build(home: &Path) -> PathBuf {
    let script = home.join("fake-build.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         echo \"[fake] building etcd\" >&2\n\
         sleep \"${FAKE_SLEEP:-0}\"\n\
         mkdir -p \"$FAKE_TARGET\"\n\
         for b in etcd kube-apiserver kube-scheduler kube-controller-manager; do\n\
           ln -sf \"$FAKE_SOURCE/$b\" \"$FAKE_TARGET/$b\"\n\
         done\n\
         echo built >> \"$FAKE_COUNT\"\n\
         echo \"[fake] built everything\" >&2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The runner with an empty build cache whose control plane the fake
/// build provides.
fn with_empty_cache(home: &Path, mut c: Command, sleep: u32) -> Command {
    let cache = home.join("cache");
    let sub = dra_e2e::cluster::local::binaries::Versions::pinned().cache_subdir();
    let source = dra_e2e::cluster::local::Binaries::find(None)
        .expect("the control plane is built (make controlplane)");
    c.env_remove("DRA_E2E_BINARIES_DIR")
        .env("DRA_E2E_CACHE_DIR", &cache)
        .env("DRA_E2E_BUILD_CONTROLPLANE", fake_build(home))
        .env("FAKE_TARGET", cache.join("controlplane").join(sub))
        .env("FAKE_SOURCE", source.dir())
        .env("FAKE_COUNT", home.join("builds"))
        .env("FAKE_SLEEP", sleep.to_string());
    c
}

#[test]
fn local_run_reports_passed_failed_and_skipped_and_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let artifacts = home.path().join("artifacts");
    let ran = Ran::of(local_run(
        home.path(),
        "runner",
        &[
            "--junit",
            junit.to_str().unwrap(),
            "--artifacts",
            artifacts.to_str().unwrap(),
            "--html",
            home.path().join("report.html").to_str().unwrap(),
        ],
    ));
    ran.exits(1)
        .says("1 passed, 2 failed, 1 skipped")
        .says("1 skipped: needs at least 5 ready schedulable nodes, the cluster has 1")
        .says("kubelet: dra-e2e simulated kubelet: what passed shows the simulator does what the kubelet does")
        .leak_check_clean();
    check_junit(&junit);
    check_html(&home.path().join("report.html"));
    let dirs: Vec<_> = std::fs::read_dir(&artifacts)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        dirs.len(),
        2,
        "an artifacts dir per failed scenario: {dirs:?}"
    );
    let dir = dirs
        .iter()
        .find(|d| d.to_string_lossy().contains("fails-on-purpose-dra-e2e-"))
        .unwrap_or_else(|| panic!("{dirs:?}"))
        .clone();
    for f in ["events.txt", "pods.yaml", "claims.yaml", "slices.yaml"] {
        assert!(dir.join(f).exists(), "{f} missing in {dir:?}");
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("calls-")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("kubelet-")), "{names:?}");
    let calls =
        std::fs::read_to_string(dir.join(names.iter().find(|n| n.starts_with("calls-")).unwrap()))
            .unwrap();
    assert!(calls.contains("NodePrepareResources"), "{calls}");
    ran.left_nothing(home.path());
}

#[test]
fn interrupted_run_tears_down_and_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt", &[]));
    let prepared = wait_until_prepared(home.path(), &mut run.child);
    run.sigint();
    let (code, t) = run.finish();
    assert!(prepared, "the scenario never prepared its claim\n{t}");
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("interrupted"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    assert!(t.contains("0 passed, 1 failed"), "{t}");
    assert_nothing_left(home.path(), &t);
}

/// The first Ctrl-C starts a teardown that cannot finish (unprepare is
/// stalled); the second stops everything at once.
#[test]
fn second_interrupt_stops_at_once_and_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt-twice", &[]));
    let prepared = wait_until_prepared(home.path(), &mut run.child);
    run.sigint();
    let tearing_down = run.wait_line("tearing down running scenarios", Duration::from_secs(60));
    run.sigint();
    let (code, t) = run.finish();
    assert!(prepared, "the scenario never prepared its claim\n{t}");
    assert!(tearing_down, "the first Ctrl-C started no teardown\n{t}");
    assert_eq!(code, Some(130), "{t}");
    assert!(t.contains("stopping now"), "{t}");
    assert_nothing_left_soon(home.path(), &t);
}

/// After the scenarios, a first Ctrl-C ends the wait for a namespace that
/// would not go (its object's finalizer is never removed); the leak check
/// still names it and the run fails.
#[test]
fn interrupt_after_the_scenarios_ends_the_wait_for_namespaces() {
    let home = tempfile::tempdir().unwrap();
    let run = Watched::spawn(local_run(home.path(), "held-namespace", &[]));
    let waiting = run.wait_line("waiting for the run's namespaces", Duration::from_secs(240));
    let signalled = Instant::now();
    run.sigint();
    let (code, t) = run.finish();
    let took = signalled.elapsed();
    assert!(waiting, "the run never waited for its namespaces\n{t}");
    assert!(t.contains("1 passed, 0 failed"), "{t}");
    assert!(t.contains("not waiting for the namespaces to go"), "{t}");
    assert!(
        t.contains("leak check: left behind: Namespace dra-e2e-"),
        "{t}"
    );
    assert_eq!(code, Some(1), "{t}");
    // Loose: the namespace wait alone is two minutes.
    assert!(took < Duration::from_secs(90), "took {took:?}\n{t}");
    assert_nothing_left(home.path(), &t);
}

/// After the scenarios, a second Ctrl-C (during the leak check or the
/// cluster's stop, which follow the first) stops the cluster and exits at
/// once.
#[test]
fn second_interrupt_after_the_scenarios_exits_at_once() {
    let home = tempfile::tempdir().unwrap();
    let run = Watched::spawn(local_run(home.path(), "held-namespace", &[]));
    let waiting = run.wait_line("waiting for the run's namespaces", Duration::from_secs(240));
    run.sigint();
    // Two signals sent back to back arrive as one.
    let stopped_waiting = run.wait_line("not waiting for the namespaces", Duration::from_secs(60));
    let signalled = Instant::now();
    run.sigint();
    let (code, t) = run.finish();
    let took = signalled.elapsed();
    assert!(waiting, "the run never waited for its namespaces\n{t}");
    assert!(
        stopped_waiting,
        "the first Ctrl-C did not end the wait\n{t}"
    );
    assert_eq!(code, Some(130), "{t}");
    assert!(t.contains("stopping now"), "{t}");
    assert!(took < Duration::from_secs(30), "took {took:?}\n{t}");
    assert_nothing_left_soon(home.path(), &t);
}

/// The run's ending as a whole has a deadline: a namespace that never goes
/// does not hold the run past `--teardown-timeout`; the cluster is stopped at
/// once and the run fails, leaving nothing on the host.
#[test]
fn the_runs_ending_is_bounded_by_the_teardown_timeout() {
    let home = tempfile::tempdir().unwrap();
    let run = Watched::spawn(local_run(
        home.path(),
        "held-namespace",
        &["--teardown-timeout", "5s"],
    ));
    let waiting = run.wait_line("waiting for the run's namespaces", Duration::from_secs(240));
    let since = Instant::now();
    let (code, t) = run.finish();
    let took = since.elapsed();
    assert!(waiting, "the run never waited for its namespaces\n{t}");
    assert_eq!(code, Some(1), "{t}");
    assert!(
        t.contains(
            "leak check skipped: the run's teardown did not finish within 5s (--teardown-timeout)"
        ),
        "{t}"
    );
    assert!(t.contains("stopping the cluster at once"), "{t}");
    // Loose: without the deadline the namespace wait alone is two minutes.
    assert!(took < Duration::from_secs(60), "took {took:?}\n{t}");
    assert_nothing_left_soon(home.path(), &t);
}

#[test]
fn passing_run_exits_zero_with_a_clean_junit_report() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let ran = Ran::of(local_run(
        home.path(),
        "runner",
        &[
            "--name",
            "an inline claim reaches the container",
            "--junit",
            junit.to_str().unwrap(),
        ],
    ));
    ran.exits(0).says("1 passed, 0 failed");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase").count(), 1, "{xml}");
    assert!(
        xml.contains(
            "<testcase name=\"an inline claim reaches the container\" classname=\"runner outcomes\""
        ),
        "{xml}"
    );
    assert!(
        xml.contains("tests/fixtures/runner/outcomes.feature:7"),
        "{xml}"
    );
    assert!(!xml.contains("<failure"), "{xml}");
    ran.left_nothing(home.path());
}

/// A driver whose plugin the kubelet never registered: its setup fails, and
/// teardown deletes its node slices itself instead of waiting for a wipe that
/// no kubelet would ever do (it waited out 120 s and left the slices).
#[test]
fn a_driver_never_registered_is_cleaned_up_without_waiting_for_a_wipe() {
    let home = tempfile::tempdir().unwrap();
    let ran = Ran::of(local_run(home.path(), "unregistered", &[]));
    ran.exits(1)
        .says("did not register the plugin")
        .says("0 passed, 1 failed")
        .never_says("teardown(s) failed");
    // The tail names the failed scenario, so a log cut to its last lines
    // (CI's) still says what failed.
    let tail: Vec<&str> = ran.text.lines().rev().take(12).collect();
    assert!(
        tail.iter().any(|l| l.starts_with("failed: ")
            && l.contains("tests/fixtures/unregistered/")
            && l.contains("did not register the plugin")),
        "no failure line in the run's tail\n{}",
        ran.text
    );
    let t = &ran.text;
    assert!(
        !t.contains("to be removed"),
        "teardown waited for a wipe\n{t}"
    );
    ran.leak_check_clean().left_nothing(home.path());
}

// ---- A run that tests nothing does not pass; bad input gets one clear error.

#[test]
fn a_tag_expression_selecting_nothing_fails_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    let none = "@DynamicResourceAllocation and not @DynamicResourceAllocation";
    let ran = Ran::of(
        isolated(home.path())
            .args(NO_CLUSTER)
            .args(["--tags", none]),
    );
    ran.exits(1)
        .says(&format!(
            "error: no scenario to run: --tags '{none}' selects none of the"
        ))
        .says("--allow-empty");
    let t = &ran.text;
    assert!(!t.contains("kubeconfig"), "reached for the cluster\n{t}");
    Ran::of(isolated(home.path()).args(["--list", "--tags", none])).exits(1);
    // An empty shard may be fine for a CI matrix; no cluster is needed then.
    Ran::of(
        isolated(home.path())
            .args(NO_CLUSTER)
            .args(["--tags", none, "--allow-empty"]),
    )
    .exits(0)
    .says("0 passed, 0 failed");
}

#[test]
fn a_run_where_every_scenario_was_skipped_fails_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    Ran::of(local_run(home.path(), "all-skipped", &[]))
        .exits(1)
        .says("0 passed, 0 failed, 1 skipped")
        .says("no scenario ran: all 1 selected scenarios were skipped")
        .left_nothing(home.path());
    Ran::of(local_run(home.path(), "all-skipped", &["--allow-empty"]))
        .exits(0)
        .left_nothing(home.path());
}

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let home = tempfile::tempdir().unwrap();
    let kc = kubeconfig_for(home.path(), "https://127.0.0.1:9");
    let err = Ran::of(
        isolated(home.path())
            .env("RUST_LOG", "debug")
            .args(["--cluster", "kubeconfig", "--kubeconfig"])
            .arg(&kc),
    )
    .stderr;
    assert!(err.lines().count() > 1, "no log lines to check\n{err}");
    assert!(!err.contains('\u{1b}'), "{err}");
}

/// A control-plane component that dies ends the run at once, named, with
/// its exit and its log; nothing is left (it hung for 23 minutes with etcd
/// killed, and took 10 minutes without naming a killed API server).
#[test]
fn a_dead_etcd_ends_the_run_quickly_and_says_so() {
    let (t, code, took) = run_and_kill("etcd");
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("etcd exited (signal: 9"), "{t}");
    assert!(t.contains("last lines of"), "{t}");
    assert!(t.contains("the run stopped early: etcd exited"), "{t}");
    // Loose: minutes that the old behaviour broke, not a benchmark.
    assert!(took < Duration::from_secs(180), "took {took:?}\n{t}");
}

#[test]
fn a_dead_api_server_ends_the_run_quickly_and_says_so() {
    let (t, code, took) = run_and_kill("kube-apiserver");
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("kube-apiserver exited (signal: 9"), "{t}");
    assert!(
        t.contains("the run stopped early: kube-apiserver exited"),
        "{t}"
    );
    assert!(took < Duration::from_secs(180), "took {took:?}\n{t}");
}

/// Ctrl-C while the local cluster starts stops it and removes its temp dir
/// (the runner used to die and leave PKI, kubeconfig and etcd data).
#[test]
fn interrupt_during_cluster_start_up_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt", &[]));
    // The API server is starting once its log exists; the start-up is short,
    // so it is watched closely.
    let starting = wait_for_file(
        home.path(),
        &mut run.child,
        Duration::from_secs(120),
        Duration::from_millis(50),
        |p| p.ends_with("logs/kube-apiserver.log"),
    );
    run.sigint();
    let (code, t) = run.finish();
    assert!(starting, "the cluster never started\n{t}");
    assert_eq!(code, Some(130), "{t}");
    assert!(t.contains("interrupted while starting the cluster"), "{t}");
    assert_nothing_left(home.path(), &t);
}

/// `--shard I/N` for I in 1..=N splits the selection: every scenario of the
/// suite is listed by exactly one shard.
#[test]
fn shards_partition_the_selection() {
    let home = tempfile::tempdir().unwrap();
    let listed = |extra: &[&str]| -> Vec<String> {
        let o = isolated(home.path())
            .args(["--list", "--tags", "@DynamicResourceAllocation"])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines()
            .filter(|l| l.contains(".feature:"))
            .map(str::to_owned)
            .collect()
    };
    let all = listed(&[]);
    let mut union: Vec<String> = (1..=3)
        .flat_map(|i| listed(&["--shard", &format!("{i}/3")]))
        .collect();
    assert!(!all.is_empty());
    union.sort();
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(
        union, expected,
        "the shards together list each scenario once"
    );
}

/// The JUnit reports of N shard runs together name every scenario exactly
/// once (outline rows included).
#[test]
fn shard_reports_together_name_every_scenario_once() {
    let mut names = Vec::new();
    for i in 1..=3 {
        let home = tempfile::tempdir().unwrap();
        let junit = home.path().join("junit.xml");
        let ran = Ran::of(local_run(
            home.path(),
            "shards",
            &[
                "--shard",
                &format!("{i}/3"),
                "--allow-empty",
                "--junit",
                junit.to_str().unwrap(),
            ],
        ));
        ran.exits(0);
        let xml = std::fs::read_to_string(&junit).unwrap_or_default();
        let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes())).unwrap();
        names.extend(
            suites
                .suites
                .iter()
                .flat_map(|s| &s.cases)
                .map(|c| c.original_name.clone()),
        );
        ran.left_nothing(home.path());
    }
    names.sort();
    let mut expected: Vec<String> = ["first", "second", "third", "fourth"]
        .iter()
        .map(|s| s.to_string())
        .chain((5..=8).map(|n| format!("by row [n={n}]")))
        .collect();
    expected.sort();
    assert_eq!(names, expected);
}

/// On a terminal a status line (done/total, passed/failed, what runs, the
/// clock) stays under the scenario output; off a terminal there is none.
#[test]
fn a_terminal_gets_a_live_status_line_and_a_pipe_does_not() {
    let home = tempfile::tempdir().unwrap();
    let command = local_run(home.path(), "progress", &[]);
    let argv: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Quoted for the shell script(1) starts.
    assert!(argv.iter().all(|a| !a.contains('\'')), "{argv:?}");
    let argv: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
    // script(1) runs the command on a pseudo-terminal and copies what it
    // shows.
    let mut under_terminal = Command::new("script");
    under_terminal
        .args(["--quiet", "--return", "--flush", "--command"])
        .arg(argv.join(" "))
        .arg("/dev/null")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => under_terminal.env(k, v),
            None => under_terminal.env_remove(k),
        };
    }
    // Log lines on stderr while the status line stands on stdout.
    under_terminal.env("RUST_LOG", "dra_e2e=debug");
    let o = under_terminal.output().expect("script (util-linux) runs");
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("[0/1] 0 passed, 0 failed · running 1: publishes for a while · 0m0"),
        "no status line while the scenario ran\n{shown}"
    );
    assert!(shown.contains("1 passed, 0 failed"), "{shown}");
    // As the terminal shows it: no log line shares a line with the status.
    let lines = as_a_terminal_shows(&shown);
    assert!(
        lines.iter().any(|l| l.contains("DEBUG")),
        "no log line was written during the run\n{shown}"
    );
    for l in &lines {
        assert!(
            !(l.contains("DEBUG") && l.contains(" passed, ")),
            "a log line on the status line: {l:?}"
        );
    }
    assert_nothing_left(home.path(), &shown);

    let piped = Ran::of(local_run(home.path(), "progress", &[]));
    let t = &piped.exits(0).text;
    assert!(!t.contains("[0/1]"), "a status line off a terminal\n{t}");
    assert!(!t.contains('\u{1b}'), "terminal codes off a terminal\n{t}");
}

/// The main command on a machine whose cache is empty builds the control
/// plane first (showing the build's steps and time), then runs.
#[test]
fn the_first_run_builds_the_control_plane_then_runs() {
    let home = tempfile::tempdir().unwrap();
    let run = local_run(
        home.path(),
        "runner",
        &["--name", "an inline claim reaches the container"],
    );
    Ran::of(with_empty_cache(home.path(), run, 0))
        .exits(0)
        .says("dra-e2e: building the local cluster's control plane (once per machine; no earlier build here to estimate from)")
        .says("dra-e2e: [controlplane +0s] [fake] building etcd")
        .says("dra-e2e: built the local cluster's control plane in")
        .says("1 passed, 0 failed");
    let builds = std::fs::read_to_string(home.path().join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1);
    // The next run knows the build and how long it took.
    let again = Ran::of(with_empty_cache(home.path(), isolated(home.path()), 0).arg("setup"));
    let t = &again.exits(0).text;
    let builds = std::fs::read_to_string(home.path().join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1, "built again\n{t}");
}

/// Two runs starting at once on an empty cache build once: the second
/// waits for the first's build and uses it.
#[test]
fn two_runs_at_once_build_once() {
    let home = tempfile::tempdir().unwrap();
    let setup = || {
        let mut c = with_empty_cache(home.path(), isolated(home.path()), 3);
        c.arg("setup").stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let (a, b) = (setup(), setup());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let t = format!("{}\n{}", text(&a), text(&b));
    assert!(a.status.success() && b.status.success(), "{t}");
    let builds = std::fs::read_to_string(home.path().join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1, "{t}");
    assert!(
        t.contains("another dra-e2e is building the local cluster's control plane"),
        "{t}"
    );
}

/// A build that another process holds past the deadline: the waiting run
/// stops, naming the holder and what to do, instead of waiting forever.
#[test]
fn a_run_waiting_for_a_stuck_build_names_the_holder() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let lock = cache.join("controlplane.build.lock");
    // A stuck holder: flock takes the lock and becomes `sleep`.
    let mut holder = Command::new("flock")
        .arg("--no-fork")
        .arg(&lock)
        .args(["sleep", "600"])
        .spawn()
        .expect("flock (util-linux) runs");
    let held = || {
        !Command::new("flock")
            .args(["-n"])
            .arg(&lock)
            .arg("true")
            .status()
            .unwrap()
            .success()
    };
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !held() {
        assert!(
            std::time::Instant::now() < until,
            "flock never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ran = Ran::of(
        with_empty_cache(home.path(), isolated(home.path()), 0)
            .env("DRA_E2E_BUILD_LOCK_TIMEOUT", "1s")
            .arg("setup"),
    );
    let _ = holder.kill();
    let _ = holder.wait();
    ran.exits(1);
    for want in [
        "another dra-e2e is building the local cluster's control plane",
        "waited 1s for the build of the local cluster's control plane that another process holds",
        &format!("open in pid {} (`sleep 600`)", holder.id()),
        "If it is stuck, end it (kill PID",
        "set DRA_E2E_BUILD_LOCK_TIMEOUT",
    ] {
        ran.says(want);
    }
    assert!(
        !home.path().join("builds").exists(),
        "it built while another held the lock\n{}",
        ran.text
    );
}

/// DRA_E2E_AGENT set to nothing is named as the cause, not a failed exec of
/// an empty program.
#[test]
fn an_empty_agent_variable_is_named() {
    let home = tempfile::tempdir().unwrap();
    Ran::of(
        local_run(
            home.path(),
            "runner",
            &["--name", "an inline claim reaches the container"],
        )
        .env("DRA_E2E_AGENT", ""),
    )
    .exits(1)
    .says("DRA_E2E_AGENT is set but empty")
    .leak_check_clean()
    .left_nothing(home.path());
}

/// The wait until a driver's slices are wiped runs after its scenario,
/// beside the ones that follow, and still fails the scenario when the slices
/// stay: in the summary, the exit code and the JUnit report.
#[test]
fn slices_that_stay_fail_their_scenario_after_it_ended() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let ran = Ran::of(local_run(
        home.path(),
        "slices-stay",
        &["--junit", junit.to_str().unwrap(), "--timings"],
    ));
    ran.exits(1)
        .says("1 passed, 1 failed")
        .says("of ended scenarios to have their slices wiped")
        .says("after the scenario ended: driver dra-e2e-")
        .says("to be removed");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let held = xml
        .split("<testcase ")
        .find(|c| c.contains("held by a finalizer"))
        .unwrap_or_else(|| panic!("no test case of the held scenario\n{xml}"));
    assert!(held.contains("type=\"AfterScenarioFailed\""), "{held}");
    let beside = xml
        .split("<testcase ")
        .find(|c| c.contains("beside it passes"))
        .unwrap_or_else(|| panic!("no test case of the other scenario\n{xml}"));
    assert!(!beside.contains("<failure"), "{beside}");
    // Its time is reported, apart from the scenarios' own.
    ran.says("after the scenarios, beside the ones that followed")
        .left_nothing(home.path());
}
