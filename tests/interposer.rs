//! The interposer in front of a driver nobody here wrote: upstream's test
//! driver, started by the runner on the local cluster's simulated nodes and
//! pointed at a private registration directory (`--interpose`), passes the
//! kubelet scenarios that count, fail, stall, delay and cut its calls, with
//! the outcomes the suite's own driver gets. A broken interposer that lets
//! the kubelet reach the driver directly fails the scenario that expected
//! its injection, and a run without `--interpose` skips those scenarios
//! with the reason. `make interposer-real` runs the same on real nodes.
use crate::common;

use std::path::Path;
use std::process::Command;

use common::runs::assert_test_driver_built;

/// The kubelet scenarios (features/kubelet_calls.feature) on a two-node
/// local cluster with upstream's test driver; `name` selects one.
fn run(home: &Path, interpose: bool, name: Option<&str>) -> Command {
    let mut c = common::isolated(home);
    c.env("DRA_E2E_AGENT", common::agent())
        .args(["--cluster", "local", "--nodes", "2"])
        .args(["--features", "features/kubelet_calls.feature"])
        .args(["--profile", "profiles/dra-test-driver-simulated.yaml"])
        .arg("--artifacts")
        .arg(home.join("artifacts"));
    if interpose {
        c.arg("--interpose");
    }
    match name {
        Some(n) => c.args(["--name", n]),
        None => c.args(["--tags", "@Interposed"]),
    };
    c
}

#[test]
fn upstreams_test_driver_behind_the_interposer_passes_the_kubelet_scenarios() {
    assert_test_driver_built();
    let home = tempfile::tempdir().unwrap();
    let o = run(home.path(), true, None).output().unwrap();
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("10 passed, 0 failed"), "{out}");
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    common::assert_nothing_left(home.path(), &out);
}

#[test]
fn a_driver_the_kubelet_reaches_directly_fails_the_scenario_counting_its_calls() {
    assert_test_driver_built();
    let broken = tempfile::tempdir().unwrap();
    let without = tempfile::tempdir().unwrap();
    // Both at once: each is a cluster of its own, mostly waiting.
    let mut direct = run(
        broken.path(),
        true,
        Some("a slow prepare delays the pod without failing it"),
    );
    direct.args(["--interposer-fault", "direct"]);
    let direct = std::thread::spawn(move || direct.output().unwrap());
    let plain = run(without.path(), false, None).output().unwrap();
    let direct = direct.join().unwrap();

    let out = common::text(&direct);
    assert_ne!(direct.status.code(), Some(0), "{out}");
    // The pod ran (the driver prepared its claim), but not through the
    // interposer: nothing was delayed and nothing counted.
    assert!(
        out.contains(
            "expected NodePrepareResources to have been called 1 time(s) on dra-e2e-node-"
        ),
        "{out}"
    );
    assert!(out.contains("observed 0"), "{out}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    common::assert_nothing_left(broken.path(), &out);

    // Without --interpose nothing can count the driver's calls: every
    // scenario is skipped, saying how to run it, and a run that tested
    // nothing fails.
    let out = common::text(&plain);
    assert_ne!(plain.status.code(), Some(0), "{out}");
    assert!(out.contains("no scenario ran"), "{out}");
    assert!(
        out.contains(
            "needs the interposer in front of driver test-driver.cdi.k8s.io to count, fail and \
             stall its calls: run with --interpose"
        ),
        "{out}"
    );
    assert!(out.contains("0 passed, 0 failed, 10 skipped"), "{out}");
    common::assert_nothing_left(without.path(), &out);
}
