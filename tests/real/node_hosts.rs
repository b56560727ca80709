//! The node hosts broken on purpose (`--node-host-fault`) fail the
//! node-operation scenarios that show their duty, for the suite's own
//! driver on a real local node:
//!
//! - `exec-agents` (the driver's sockets served by agents exec'd in the
//!   node host pod, through the kubelet and containerd, as before node
//!   hosts) fails "a driver's sockets outlive a stopped kubelet": with the
//!   kubelet stopped nothing reaches the sockets, whose agents the
//!   kubelet's streaming carried;
//! - `no-redial` (a socket's connections never dialled again once the
//!   first are used or lost) fails the pack's reboot scenario: the sockets
//!   the reboot took never return.
//!
//! With working node hosts both pass (`make e2e-real`, in CI).
use std::path::Path;
use std::process::Command;

use crate::common;

const KUBELET: (&str, &str) = (
    "features/kubelet_restarts.feature",
    "a driver's sockets outlive a stopped kubelet: they answer meanwhile and are registered once more, and no more",
);
const REBOOT: (&str, &str) = (
    "features/conformance/lifecycle.feature",
    "a rebooted node prepares its claims again and the containers find their devices",
);

/// One scenario on one real node with the node hosts broken by `fault`.
fn broken(home: &Path, fault: &str, (feature, scenario): (&str, &str)) -> Command {
    let mut c = common::isolated(home);
    common::on_real_nodes(&mut c);
    c.args(["--cluster", "local", "--node-kind", "real", "--nodes", "1"])
        .args(["--node-host-fault", fault])
        .args(["--features", feature, "--name", scenario])
        // The wait that must fail gives up within this.
        .args(["--step-timeout", "240s"])
        .arg("--junit")
        .arg(home.join("junit.xml"))
        .arg("--artifacts")
        .arg(home.join("artifacts"));
    c
}

/// Runs `run`'s scenario and checks that it failed at `step`, its message
/// holding every one of `parts`; the run's output.
fn fails_at(home: &Path, mut run: Command, scenario: &str, step: &str, parts: &[&str]) -> String {
    let run = run.output().unwrap();
    let out = common::text(&run);
    assert_eq!(run.status.code(), Some(1), "{out}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    common::assert_failures(&home.join("junit.xml"), &[(scenario, step, parts)]);
    out
}

#[test]
fn node_hosts_that_never_dial_again_fail_the_reboot_scenario() {
    let home = tempfile::tempdir().unwrap();
    let mut run = broken(home.path(), "no-redial", REBOOT);
    // The plugin never comes back, so the kubelet can never unprepare the
    // pod's claim and the teardown cannot end: cut it short.
    run.args(["--teardown-timeout", "30s"]);
    let out = fails_at(
        home.path(),
        run,
        REBOOT.1,
        "Then pod \"tester-1\" runs again after the reboot",
        &["to run again after the reboot"],
    );
    // The cluster is stopped at once; nothing of it stays on the host.
    common::assert_nothing_left(home.path(), &out);
}

#[test]
fn node_hosts_served_by_exec_fail_the_stopped_kubelet_scenario() {
    let home = tempfile::tempdir().unwrap();
    let out = fails_at(
        home.path(),
        broken(home.path(), "exec-agents", KUBELET),
        KUBELET.1,
        "Then the registration socket of the driver on node 0 answers",
        &["its registration socket on node", "GetInfo failed"],
    );
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    common::assert_nothing_left(home.path(), &out);
}
