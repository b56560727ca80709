//! Evidence that the checks of features/device_plugin.feature can fail on
//! real nodes: the runner on tests/fixtures/device-plugin, two real kubelets
//! running upstream's sample device plugin, must fail every broken variant
//! with the message of the check it breaks: DRA expected where the device
//! plugin serves, a pod created before the uninstalled plugin's allocatable
//! is gone, another allocatable count, the two nodes' roles swapped, and a
//! pod expecting a driver on a node the driver does not run on. Needs root
//! and the node components (`make node`), like tests/real. The variant that
//! needs no container runtime also runs on simulated nodes.
use crate::common;
use common::*;

#[test]
fn every_device_plugin_check_fails_its_broken_variant_on_real_nodes() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let artifacts = home.path().join("artifacts");
    let o = isolated(home.path())
        .env("DRA_E2E_AGENT", agent())
        // HOME is the test's; the node components stay where the build put them.
        .env(
            "DRA_E2E_NODE_BINARIES_DIR",
            dra_e2e::cluster::real_node::binaries::locate(None).dir,
        )
        .args(["--cluster", "local", "--node-kind", "real", "--nodes", "2"])
        // Waits that can only time out (a count never reached, a pod never
        // scheduled) are cut short: the step's message still says what it
        // waited for and what it saw last.
        .args(["--step-timeout", "60s"])
        .arg("--features")
        .arg(fixtures("device-plugin"))
        .arg("--junit")
        .arg(&junit)
        .arg("--artifacts")
        .arg(&artifacts)
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("0 passed, 5 failed"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");

    const DRA_ENV_STEP: &str = "And container \"with-resource\" of the pod on node 0 gets request \"container-0-request-0\" of its extended resource claim";
    const SERVED_BY_PLUGIN: &[&str] = &[
        "the pod on node 0 is tester-1",
        "expected the DRA driver to serve its extended resources, but it has no extended resource claim",
    ];
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 5] = [
        (
            "DRA is expected where the device plugin serves",
            DRA_ENV_STEP,
            SERVED_BY_PLUGIN,
        ),
        (
            "the pod is scheduled before the allocatable is gone",
            DRA_ENV_STEP,
            SERVED_BY_PLUGIN,
        ),
        (
            "a node advertises another count",
            "Then node 0 has 3 allocatable \"example.com/resource\"",
            &[
                "waiting for node 0 (",
                "to have 3 allocatable example.com/resource",
                "last seen: allocatable example.com/resource: 2, capacity: 2",
            ],
        ),
        (
            "the pods' nodes are taken for one another",
            "And the pod on node 0 has no extended resource claim",
            &[
                "the pod on node 0 is tester-",
                "expected no extended resource claim, but the scheduler made tester-",
                "-extended-resources-",
            ],
        ),
        (
            "a pod expects the driver on a node it does not run on",
            "Then pod \"tester-1\" is running",
            &[
                "waiting for pod tester-1 to be running",
                "PodScheduled=False",
                "1 cannot allocate all claims",
            ],
        ),
    ];
    assert_failures(&junit, &expected);
    assert_nothing_left(home.path(), &t);
}

/// The driver setting `on node N` on simulated nodes: the variant needing no
/// container runtime fails there as on real nodes (the others are skipped).
#[test]
fn a_driver_on_some_nodes_leaves_the_others_without_devices_on_simulated_nodes() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let o = isolated(home.path())
        .env("DRA_E2E_AGENT", agent())
        .args([
            "--cluster",
            "local",
            "--nodes",
            "2",
            "--step-timeout",
            "20s",
        ])
        .arg("--features")
        .arg(fixtures("device-plugin"))
        .arg("--junit")
        .arg(&junit)
        .arg("--artifacts")
        .arg(home.path().join("artifacts"))
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("0 passed, 1 failed, 4 skipped"), "{t}");
    let failures = junit_failures(&junit);
    let message = &failures["a pod expects the driver on a node it does not run on"];
    for part in [
        "Then pod \"tester-1\" is running",
        "waiting for pod tester-1 to be running",
        "PodScheduled=False",
        "1 cannot allocate all claims",
    ] {
        assert!(message.contains(part), "expected {part:?} in {message}");
    }
    assert_nothing_left(home.path(), &t);
}
