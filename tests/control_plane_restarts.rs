//! Evidence that the checks of features/control_plane_restarts.feature can
//! fail: the runner on tests/fixtures/control-plane-restarts, whose
//! scenarios each break what one of them guards, must fail every scenario
//! with the message of that check, after the restart itself was ridden out.

mod common;
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
