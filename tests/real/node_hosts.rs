//! The node hosts broken on purpose (`--node-host-fault`) fail the
//! node-operation scenarios that show their duty, for the suite's own
//! driver on a real local node:
//!
//! - `exec-agents` (the driver's sockets served by agents exec'd in the
//!   node host pod, through the kubelet and containerd, as before node
//!   hosts) fails "a driver's sockets outlive a kubelet restart": the
//!   restart ends the exec sessions, the agents started again bind the
//!   sockets anew, and the kubelet registers the driver a second time;
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
    "a driver's sockets outlive a kubelet restart: registered once more, and no more",
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

#[test]
fn node_hosts_that_go_through_exec_or_never_dial_again_fail_the_scenarios_that_show_them() {
    let exec_home = tempfile::tempdir().unwrap();
    let redial_home = tempfile::tempdir().unwrap();
    // Both at once: each is a cluster of its own, mostly waiting.
    let mut exec_agents = broken(exec_home.path(), "exec-agents", KUBELET);
    let exec_agents = std::thread::spawn(move || exec_agents.output().unwrap());
    let no_redial = broken(redial_home.path(), "no-redial", REBOOT)
        .output()
        .unwrap();
    let exec_agents = exec_agents.join().unwrap();

    let expected: [(&tempfile::TempDir, _, &str, &str, &[&str]); 2] = [
        (
            &exec_home,
            exec_agents,
            KUBELET.1,
            "And NotifyRegistrationStatus is not called again on node 0 for 15s",
            &["NotifyRegistrationStatus not to be called again", "now 3"],
        ),
        (
            &redial_home,
            no_redial,
            REBOOT.1,
            "Then pod \"tester-1\" runs again after the reboot",
            &["to run again after the reboot"],
        ),
    ];
    for (home, run, scenario, step, parts) in expected {
        let out = common::text(&run);
        assert_eq!(run.status.code(), Some(1), "{out}");
        assert!(out.contains("0 passed, 1 failed"), "{out}");
        common::assert_failures(&home.path().join("junit.xml"), &[(scenario, step, parts)]);
        assert!(out.contains("leak check: nothing left behind"), "{out}");
        common::assert_nothing_left(home.path(), &out);
    }
}
