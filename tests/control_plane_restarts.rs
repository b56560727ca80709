//! Evidence that the checks of the faults the suite rides out can fail:
//! the runner on tests/fixtures/control-plane-restarts (for
//! features/control_plane_restarts.feature) and tests/fixtures/node-loss
//! and tests/fixtures/node-loss-replacement (for features/node_loss.feature),
//! whose scenarios each break what one of them guards, must fail every
//! scenario with the message of that check.

use crate::common;
use common::*;

#[test]
fn every_control_plane_restart_check_fails_its_broken_variant() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 2] = [
        (
            "a pod whose claim cannot be allocated does not run after the restart",
            "Then pod \"tester-2\" is running: ",
            &[
                "did not finish within --step-timeout 1m",
                "waiting for pod tester-2 to be running",
                "cannot allocate all claims",
            ],
        ),
        // Refused at once (422), not tried again until the step's timeout.
        (
            "a refusal after the restart fails at once",
            "And the following objects are created:",
            &["ConfigMap \"Not_A_Valid_Name\" is invalid", "code: 422"],
        ),
    ];
    // The restart takes seconds; the timeout leaves it room. The refusal's
    // message is the API server's (its 422), not the step's timeout.
    broken_variants(
        "control-plane-restarts",
        &["--step-timeout", "60s"],
        &expected,
    );
}

#[test]
fn every_node_loss_check_fails_its_broken_variant() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 2] = [
        // The kubelet, not cut off, lets the pod go at once.
        (
            "a pod deleted on a node never cut off does not stay",
            "Then pod \"tester-1\" stays terminating for 10s: ",
            &["expected pod tester-1 to stay terminating, observed"],
        ),
        (
            "a node never cut off is not reported unreachable",
            "Then node 0 is reported unreachable: ",
            &[
                "did not finish within --step-timeout 1m",
                "to be reported unreachable (Ready Unknown, tainted)",
                "Ready True, not tainted unreachable",
            ],
        ),
    ];
    broken_variants("node-loss", &["--step-timeout", "60s"], &expected);
}

#[test]
fn every_replacement_check_fails_its_broken_variant() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 2] = [
        // The API server's default toleration keeps the pod for 300 s.
        (
            "a pod without a short toleration of the unreachable taint is not evicted",
            "And pod \"tester-1\" is evicted by the taint eviction controller: ",
            &[
                "did not finish within --step-timeout 1m",
                "waiting for pod tester-1 to be evicted by the taint eviction controller",
                "not being deleted: phase=\"Running\"",
            ],
        ),
        // The new pod's claim can be allocated nowhere: it stays pending.
        (
            "a replica set finds no device for its new pod on a node without the driver",
            "And replica set \"tester\" has 1 running pod on node 1: ",
            &[
                "did not finish within --step-timeout 1m",
                "waiting for replica set tester to have 1 running pod(s) on node",
                "1 live pod(s): tester-",
                "phase=\"Pending\"",
                "cannot allocate all claims",
            ],
        ),
    ];
    // Each scenario owns the node it cuts off and shares another; on four
    // nodes the two own theirs at once (on two they would queue, and the
    // second would spend its step timeout waiting for the first's node).
    broken_variants(
        "node-loss-replacement",
        &["--nodes", "4", "--step-timeout", "60s"],
        &expected,
    );
}
