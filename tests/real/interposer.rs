//! The interposer broken on purpose (`--interposer-fault`), in front of
//! drivers on real local nodes, fails the scenario that shows its duty:
//!
//! - one that never re-registers a driver whose socket was bound again (a
//!   driver pod restarted in place, upstream's test driver) fails "a driver
//!   pod restarted behind the interposer registers again": the kubelet
//!   never validates the new process;
//! - one that ignores a second instance (the project's rolling-update
//!   driver, whose surge rollout starts the new pod beside the old) fails
//!   "a rollout of the driver's DaemonSet in the middle of a scenario": the
//!   kubelet never registers the new instance, so the new pod never gets
//!   ready (its readiness is its registration) and the rollout never ends.
//!
//! The working interposer passes both (`make interposer-real`, in CI).
use std::path::Path;
use std::process::Command;

use crate::common;

const FEATURE: &str = "features/driver_instances.feature";

/// One scenario of the feature on one real node, behind an interposer
/// broken with `fault`.
fn broken(home: &Path, profile: &str, fault: &str, scenario: &str) -> Command {
    let mut c = common::isolated(home);
    common::on_real_nodes(&mut c);
    c.args(["--cluster", "local", "--node-kind", "real", "--nodes", "1"])
        .args([
            "--profile",
            profile,
            "--interpose",
            "--interposer-fault",
            fault,
        ])
        .args(["--features", FEATURE, "--name", scenario])
        // The waits that must fail give up within this.
        .args(["--step-timeout", "240s"])
        .arg("--junit")
        .arg(home.join("junit.xml"))
        .arg("--artifacts")
        .arg(home.join("artifacts"));
    c
}

fn built(dir: &str, make: &str) {
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    assert!(
        archive.exists(),
        "{} is missing: `make {make}` builds it (make test does)",
        archive.display()
    );
}

#[test]
fn an_interposer_that_misses_a_restart_or_a_second_instance_fails_the_scenarios_that_show_them() {
    built(
        "target/dra-test-driver/dra-test-driver.oci.tar",
        "test-driver",
    );
    built(
        "target/rolling-driver/rolling-driver.oci.tar",
        "rolling-driver",
    );
    let restart_home = tempfile::tempdir().unwrap();
    let rollout_home = tempfile::tempdir().unwrap();
    let restart = "a driver pod restarted behind the interposer registers again";
    let rollout = "a rollout of the driver's DaemonSet in the middle of a scenario";
    // Both at once: each is a cluster of its own, mostly waiting.
    let mut no_reregister = broken(
        restart_home.path(),
        "profiles/dra-test-driver.yaml",
        "no-reregister",
        restart,
    );
    let no_reregister = std::thread::spawn(move || no_reregister.output().unwrap());
    let first_only = broken(
        rollout_home.path(),
        "profiles/rolling-driver.yaml",
        "first-instance-only",
        rollout,
    )
    .output()
    .unwrap();
    let no_reregister = no_reregister.join().unwrap();

    let out = common::text(&no_reregister);
    assert_eq!(no_reregister.status.code(), Some(1), "{out}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    assert!(out.contains("--interposer-fault NoReregister"), "{out}");
    common::assert_failures(
        &restart_home.path().join("junit.xml"),
        &[(
            restart,
            "Then NotifyRegistrationStatus is called on node 0",
            &["NotifyRegistrationStatus"],
        )],
    );
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    common::assert_nothing_left(restart_home.path(), &out);

    let out = common::text(&first_only);
    assert_eq!(first_only.status.code(), Some(1), "{out}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    assert!(
        out.contains("a second instance of the driver is left alone"),
        "{out}"
    );
    common::assert_failures(
        &rollout_home.path().join("junit.xml"),
        &[(
            rollout,
            "When the driver's DaemonSet is rolled out",
            &["DaemonSet dra-rolling-driver/rolling-driver"],
        )],
    );
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    common::assert_nothing_left(rollout_home.path(), &out);
}
