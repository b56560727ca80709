//! What a full run reports: the JUnit and HTML reports as CI tools and
//! people read them, the exit code and the closing lines, and a failure
//! found after its scenario ended (a driver's slices that stay) still
//! failing that scenario. Each run also leaves nothing behind.
use std::path::Path;
use std::process::Command;

use crate::common::runs::{Ran, junit_case};
use crate::common::*;

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

/// A wait for the kubelet's wipe still going when nothing is left to run
/// is cut short: the runner deletes the slices and sees them go. With a
/// wipe delay far beyond the wait's two minutes, a run that waited would
/// fail its scenario ("to be removed").
#[test]
fn the_last_drivers_slices_are_deleted_at_the_runs_end_not_waited_for() {
    let home = tempfile::tempdir().unwrap();
    let ran = Ran::of(local_run(
        home.path(),
        "slices-stay",
        &[
            "--name",
            "beside it passes",
            "--wipe-delay",
            "10m",
            "--timings",
        ],
    ));
    ran.exits(0)
        .says("1 passed, 0 failed")
        .says("deleting their slices and waiting until they are gone")
        .says("delete the slices left at the run's end and see them go (mean");
    assert!(
        !ran.text.contains("to be removed"),
        "the run waited for the wipe\n{}",
        ran.text
    );
    ran.leak_check_clean().left_nothing(home.path());
}

// ---- A run that tests nothing does not pass; bad input gets one clear error.

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
        .says("deleting their slices and waiting until they are gone")
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
