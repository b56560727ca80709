//! Evidence that the workload and DeviceTaintRule assertions can fail: the
//! runner on tests/fixtures/workloads, whose scenarios each break what one
//! of them guards, must fail every scenario with that assertion's message
//! and leave nothing behind (the DeviceTaintRules and the finalizer-held pod
//! included).

use crate::common;
use common::*;

#[test]
fn every_workload_and_eviction_assertion_fails_its_broken_variant() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 3] = [
        (
            // Failed by the check of the condition itself, at once: the
            // pod is terminating, but not by the taint manager's hand.
            "a pod deleted by hand is not evicted",
            "Then pod \"tester-1\" is evicted by the device taint manager: ",
            &[
                "pod tester-1 is terminating without the condition DisruptionTarget=True, \
                 reason DeletionByDeviceTaintManager, \
                 message \"Device Taint manager: deleting due to NoExecute taint\"; its conditions: ",
            ],
        ),
        (
            "the taint was added long ago",
            "Then the taint of the DeviceTaintRule was added within a minute of now: ",
            &[
                "the taint's timeAdded 2020-01-01T00:00:00Z is",
                "more than a minute",
            ],
        ),
        (
            "a pod outside the group does not get the group's claim",
            "Then pod \"tester-2\" uses the claims of the pod group of workload \"tester-0\": ",
            &[
                "pod tester-2 uses claim tester-2-my-inline-claim-",
                "not the pod group's claim tester-0-group-0-",
            ],
        ),
    ];
    // A guard: a variant that no longer fails at once would otherwise wait
    // out the steps' own deadlines of minutes.
    broken_variants("workloads", &["--step-timeout", "20s"], &expected);
}
