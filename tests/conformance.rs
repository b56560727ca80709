//! The driver conformance pack (features/conformance) run as a driver
//! author runs it, on the local cluster's simulated nodes: the suite's own
//! driver passes it through its profile, and broken variants show the pack
//! able to fail, each at the scenario that guards against what it breaks,
//! with a message naming the driver, the node and what was expected.
//!
//! The broken variants are the suite's own driver with a profile that
//! breaks it (`deployment.faults`) or asks containers for what it never
//! injects, and upstream's test driver told its device count in a way it
//! does not heed (tests/fixtures/conformance/). Upstream's test driver runs the
//! pack on real nodes in `make conformance-real`.
use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::runs::{Ran, assert_test_driver_built};

/// The pack on a two-node local cluster with `profile`, only the scenarios
/// `names` (regexes) select.
fn pack(home: &Path, profile: &str, names: &[&str], extra: &[&str]) -> Command {
    let mut c = common::isolated(home);
    c.env("DRA_E2E_AGENT", common::agent())
        .args(["--cluster", "local", "--nodes", "2"])
        .args(["--features", "features/conformance"])
        .args(["--profile", profile])
        .arg("--junit")
        .arg(home.join("junit.xml"))
        .arg("--artifacts")
        .arg(home.join("artifacts"));
    // cucumber takes either tags or names.
    if names.is_empty() {
        c.args(["--tags", "@DriverConformance"]);
    }
    for n in names {
        c.args(["--name", n]);
    }
    c.args(extra);
    c
}

/// The JUnit properties of a run's report.
fn properties(junit: &Path) -> BTreeMap<String, String> {
    let xml = std::fs::read_to_string(junit).unwrap();
    let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes())).unwrap();
    let mut out = BTreeMap::new();
    for suite in &suites.suites {
        for (k, v) in &suite.properties.hashmap {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// The pack run with `profile` passed, its report's properties say
/// `expected` (name, value), and nothing was left behind; returns what the
/// run printed and all the properties.
fn passes(
    home: &Path,
    profile: &str,
    extra: &[&str],
    expected: &[(&str, &str)],
) -> (String, BTreeMap<String, String>) {
    let ran = Ran::of(pack(home, profile, &[], extra));
    ran.exits(0).leak_check_clean().left_nothing(home);
    let props = properties(&home.join("junit.xml"));
    for (name, value) in expected {
        assert_eq!(
            props.get(*name).map(String::as_str),
            Some(*value),
            "{name}: {props:?}"
        );
    }
    (ran.text, props)
}

#[test]
fn the_suites_own_driver_passes_the_pack_through_its_profile() {
    let home = tempfile::tempdir().unwrap();
    let html = home.path().join("report.html");
    let (out, props) = passes(
        home.path(),
        "profiles/builtin.yaml",
        &["--html", html.to_str().unwrap()],
        &[
            ("driver.conformance", "29 passed, 8 skipped, 0 failed"),
            ("driver.profile", "profiles/builtin.yaml"),
            ("driver.deployment", "Builtin"),
            ("kubelet", "dra-e2e simulated kubelet"),
        ],
    );
    // Every scenario but the three needing a deployed driver's pods, the one
    // rolling its DaemonSet out, the one uninstalling the driver, the two
    // restarting a real node's kubelet or the node, and the one restarting
    // the driver with fewer devices (its profile gives no deviceCount).
    assert!(
        out.contains(
            "driver conformance of the suite's own driver (profiles/builtin.yaml): \
             37 behaviours: 29 passed, 8 skipped, 0 failed"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "  skipped: uninstalling the driver leaves none of its slices (needs to uninstall \
             the driver and install it again; the suite's own driver is hosted by the runner"
        ),
        "{out}"
    );
    assert!(
        out.contains("  skipped: the driver's pod restarted while claims are prepared (needs the pods of driver"),
        "{out}"
    );
    assert!(
        out.contains(
            "  skipped: a surging rollout of the driver keeps its slices and serves new pods \
             (needs to roll out the driver's DaemonSet; the suite's own driver is hosted by the \
             runner and has none"
        ),
        "{out}"
    );
    assert!(
        out.contains("  skipped: containers restarted after the driver's restart find their devices (needs the pods of driver"),
        "{out}"
    );
    assert!(
        out.contains("  skipped: a claim prepared before the driver's restart is unprepared by the restarted driver (needs the pods of driver"),
        "{out}"
    );
    assert!(
        out.contains("  skipped: a rebooted node prepares its claims again and the containers find their devices (needs node operations"),
        "{out}"
    );
    assert!(
        out.contains(
            "  skipped: a restarted kubelet finds its claims prepared (needs node operations"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "  skipped: slices follow a device that goes away (needs to make a device of driver"
        ),
        "{out}"
    );
    assert!(
        props
            .get("driver.capabilities")
            .is_some_and(|c| c.contains("AdminAccess")),
        "{props:?}"
    );
    // The HTML report shows the same summary, behaviour by behaviour, and
    // which kubelet it was.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("dra-e2e simulated kubelet"), "{page}");
    assert!(
        page.contains("Driver conformance of the suite's own driver"),
        "{page}"
    );
    assert!(
        page.contains("37 behaviours: 29 passed, 8 skipped, 0 failed"),
        "{page}"
    );
    assert!(
        page.contains("<li class=\"passed\">passed: a claim from a template is allocated"),
        "{page}"
    );
    assert!(
        page.contains("<li class=\"skipped\">skipped: a rebooted node prepares its claims again"),
        "{page}"
    );
}

#[test]
fn upstreams_test_driver_passes_the_pack_on_simulated_nodes() {
    assert_test_driver_built();
    let home = tempfile::tempdir().unwrap();
    // Nothing left includes the driver's processes: their command lines name
    // the run's kubeconfig, under `home`.
    let (out, _) = passes(
        home.path(),
        "profiles/dra-test-driver-simulated.yaml",
        &[],
        &[
            ("driver.deployment", "SimulatedNodes"),
            ("driver.device-class", "dra-e2e-test-driver-cdi-k8s-io"),
        ],
    );
    // The runner started the driver's kubelet plugin on the host for each
    // node; it knows no driver pods to restart. Without the interposer it
    // cannot hold a prepare back either.
    assert!(
        out.contains(
            "driver conformance of test-driver.cdi.k8s.io: 37 behaviours: 30 passed, 7 skipped, 0 failed"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "  skipped: a pod deleted while its claim is being prepared (needs the interposer in \
             front of driver test-driver.cdi.k8s.io to count, fail and stall its calls: run with \
             --interpose)"
        ),
        "{out}"
    );
}

/// One broken variant: its profile, the scenario that must fail, the step
/// its failure starts with, and the parts its message must say.
struct Broken {
    profile: &'static str,
    scenario: &'static str,
    step: &'static str,
    parts: &'static [&'static str],
}

const BROKEN: &[Broken] = &[
    Broken {
        profile: "wrong-device-check",
        scenario: "the pod runs with access to its device",
        step: "Then every container of pod \"tester-1\" has its device: container with-resource of pod tester-1 on node dra-e2e-node-",
        parts: &[
            "did not get its device from driver dra-e2e-",
            "no variable matches \"GPU_VISIBLE_DEVICES=*\"",
            "variables the driver injected: [\"claim_tester_1_my_inline_claim_",
        ],
    },
    Broken {
        profile: "fail-prepare",
        scenario: "the driver prepares the claim of a pod",
        step: "Then pod \"tester-1\" runs without a \"FailedPrepareDynamicResources\" event: pod tester-1 on node dra-e2e-node-",
        parts: &[
            "got a FailedPrepareDynamicResources event before it ran (driver dra-e2e-",
            "NodePrepareResources",
            "planted fault FailPrepare",
        ],
    },
    Broken {
        profile: "fail-unprepare",
        scenario: "the driver unprepares when the pod is deleted",
        step: "When pod \"tester-1\" is deleted and the driver lets its claims go: pod tester-1 on node dra-e2e-node-",
        parts: &[
            "was not gone 120s after its deletion",
            "once driver dra-e2e-",
            "has unprepared its claims",
        ],
    },
    // The prepare the pod was deleted during completed: its CDI spec must
    // go with the unprepare that follows.
    Broken {
        profile: "cdi-spec-kept",
        scenario: "a pod deleted while its claim is being prepared",
        step: "Then the driver lets the claims of pod \"tester-1\" go: driver dra-e2e-",
        parts: &[
            "unprepared claim claim on node dra-e2e-node-",
            "yet its CDI spec is still there: dra-e2e-",
            "-my-request.json defines dra-e2e-",
        ],
    },
    // Devices answered without a spec: the pod would stay pending to the
    // step timeout; the device step names the missing spec at once.
    Broken {
        profile: "no-cdi-spec",
        scenario: "the pod runs with access to its device",
        step: "Then every container of pod \"tester-1\" has its device: pod tester-1 on node dra-e2e-node-",
        parts: &[
            "cannot start with its device: driver dra-e2e-",
            "answered NodePrepareResources for claim tester-1-my-inline-claim-",
            "with CDI devices that no spec in the node's CDI directory defines: dra-e2e-",
            "-my-request; spec files seen: none",
        ],
    },
    Broken {
        profile: "no-devices",
        scenario: "the driver publishes ResourceSlices with devices",
        step: "Then the driver publishes devices on every node: timed out after 120s waiting for driver dra-e2e-",
        parts: &[
            "waiting for driver dra-e2e-",
            "to publish complete pools with devices on dra-e2e-node-",
            "last seen: node dra-e2e-node-",
            "no device",
        ],
    },
    // Noting no devices would let "publishes the devices noted" hold on
    // nothing.
    Broken {
        profile: "no-devices",
        scenario: "slices stay the same while pods come and go",
        step: "Given the driver's devices are noted: driver dra-e2e-",
        parts: &[
            "publishes no devices on [\"dra-e2e-node-",
            "there is nothing to note",
        ],
    },
    Broken {
        profile: "kept-device",
        scenario: "slices follow a device that goes away",
        step: "Then the driver publishes one device fewer than noted: timed out after 120s waiting for driver test-driver.cdi.k8s.io's devices on dra-e2e-node-",
        parts: &["expected one device fewer than noted", "4 of the 4 noted"],
    },
];

#[test]
fn broken_drivers_fail_the_scenario_that_guards_against_them() {
    // The runs at once: each is a cluster of its own, mostly waiting.
    let runs: Vec<_> = BROKEN
        .iter()
        .map(|b| {
            std::thread::spawn(move || {
                let home = tempfile::tempdir().unwrap();
                let profile = format!("tests/fixtures/conformance/{}.yaml", b.profile);
                let name = format!("^{}$", regex::escape(b.scenario));
                // A step that waits for what never comes ends at the step
                // timeout; the unprepare wait (2 minutes) fits inside it.
                let o = pack(home.path(), &profile, &[&name], &["--step-timeout", "150s"])
                    .output()
                    .unwrap();
                (b, home, common::text(&o), o.status.code())
            })
        })
        .collect();
    for run in runs {
        let (b, home, out, code) = run.join().unwrap();
        assert_eq!(code, Some(1), "{}: {out}", b.profile);
        assert!(
            out.contains("1 behaviour: 0 passed, 0 skipped, 1 failed"),
            "{}: {out}",
            b.profile
        );
        assert!(
            out.contains(&format!("  failed: {}", b.scenario)),
            "{}: {out}",
            b.profile
        );
        common::assert_failures(
            &home.path().join("junit.xml"),
            &[(b.scenario, b.step, b.parts)],
        );
        assert!(
            out.contains("leak check: nothing left behind"),
            "{}: {out}",
            b.profile
        );
        common::assert_nothing_left(home.path(), &out);
    }
}

/// The uninstalling scenario's check able to fail: a slice of the driver
/// without spec.nodeName (one no kubelet wipes) outlives it, standing for
/// one the driver never deletes (tests/fixtures/uninstall/). The failure
/// names the slice; teardown deletes it and installs the driver again, so
/// the next scenario passes and nothing is left.
#[test]
fn a_slice_left_behind_by_an_uninstalled_driver_fails_and_is_cleaned_up() {
    assert_test_driver_built();
    let home = tempfile::tempdir().unwrap();
    let mut c = common::isolated(home.path());
    c.env("DRA_E2E_AGENT", common::agent())
        .args(["--cluster", "local", "--nodes", "2"])
        .args(["--features", "tests/fixtures/uninstall"])
        .args(["--profile", "profiles/dra-test-driver-simulated.yaml"])
        .arg("--junit")
        .arg(home.path().join("junit.xml"))
        .arg("--artifacts")
        .arg(home.path().join("artifacts"));
    let ran = Ran::of(c);
    ran.exits(1)
        .says("2 behaviours: 1 passed, 0 skipped, 1 failed")
        .leak_check_clean()
        .left_nothing(home.path());
    let got = common::junit_failures(&home.path().join("junit.xml"));
    assert_eq!(
        got.get("the next scenario finds the driver installed again")
            .map(String::as_str),
        Some("did not fail: Success"),
        "{got:#?}"
    );
    let failed = &got["a slice without a node name outlives the driver"];
    assert!(
        failed.starts_with(
            "Then none of the driver's ResourceSlices remain: driver test-driver.cdi.k8s.io left \
             1 ResourceSlice(s) behind 120s after it was uninstalled"
        ),
        "{failed}"
    );
    for part in [
        "left-behind-dra-e2e-",
        "(pool left-behind generation 1, all nodes, 1 device(s))",
        "no kubelet wipes a slice without spec.nodeName",
    ] {
        assert!(failed.contains(part), "{part:?} in {failed}");
    }
}
