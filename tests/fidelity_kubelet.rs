//! Evidence that the kubelet-side assertions restored to upstream's can
//! fail: the runner on tests/fixtures/fidelity-kubelet, whose scenarios each
//! break what one of them guards, must fail every scenario with the message
//! of that assertion.

use crate::common;
use common::*;

#[test]
fn every_restored_kubelet_assertion_fails_its_broken_variant() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 26] = [
        (
            "a force-deleted claim of a running pod stays",
            "Then claim \"external-claim\" is deleted: ",
            &["reservedFor=[pods/tester-1], deleting=true"],
        ),
        (
            // The event check's own wait runs out, its text expanded (the
            // old UID, not the placeholder): the check itself failed.
            "the new pod's claim has another name",
            "And pod \"tester-2\" gets a \"FailedPrepareDynamicResources\" event",
            &[
                "the step did not finish within --step-timeout 20s",
                "a FailedPrepareDynamicResources event on pod tester-2 containing \"old ResourceClaim with same name external-claim and different UID ",
                " still exists\"",
            ],
        ),
        (
            "another claim is still prepared",
            "And the plugin on node 0 has prepared only the current claim \"second\": ",
            &["expected only claim second (", "(\"first\", "],
        ),
        (
            "the template has no admin access",
            "Then ResourceClaimTemplate \"admin-template\" has:",
            &[".spec.spec.devices.requests[0].exactly.adminAccess is false, expected true"],
        ),
        (
            "a gated pod is not unschedulable",
            "Then pod \"gated\" is unschedulable: ",
            &["PodScheduled=False with reason \"SchedulingGated\""],
        ),
        (
            "the outage lasts as long as the wipe delay",
            "Then the outage was shorter than the kubelet's wiping delay: ",
            &["not shorter than the kubelet's wiping delay of 10ms"],
        ),
        (
            "the class parameters are missing",
            "Then pod \"tester-1\" is running with env \"admin_x=y\" and \"user_a=b\" in every container: ",
            &["container with-resource of pod tester-1: expected env to contain [\"admin_x=y\"]"],
        ),
        (
            "a pod taking its turn lacks the env",
            "Then each pod in turn is running with env \"admin_x=z\" in every container and then deleted: ",
            &["expected env to contain [\"admin_x=z\"]"],
        ),
        (
            "the main container is not at index 0",
            "And pod \"tester-1\" has extended resource requests:",
            &[
                "(\"with-resource\", ",
                "\"container-3-request-0\")",
                "(\"with-resource-init\", ",
            ],
        ),
        (
            "a request does not reach the container",
            "Then container \"with-resource\" of pod \"tester-1\" gets requests ",
            &["expected the device of request container-0-request-1 of claim"],
        ),
        (
            "the quota counts fewer devices",
            "And resource quota \"test-quota\" reports 1 used for ",
            &["= Some(\"2\")"],
        ),
        (
            "the chosen subrequest has no config",
            "Then pod \"tester-1\" is running with env \"user_a=b\" in every container: ",
            &["container with-resource of pod tester-1: expected env to contain [\"user_a=b\"]"],
        ),
        (
            "the constrained claim has no config",
            "Then pod \"tester-1\" is running with env \"user_a=b\" in every container: ",
            &["container with-resource of pod tester-1: expected env to contain [\"user_a=b\"]"],
        ),
        (
            "the v1beta1 claim with alternatives has no config",
            "Then pod \"tester-1\" is running with env \"admin_x=y\" and \"user_a=b\" in every container: ",
            &["container with-resource of pod tester-1: expected env to contain [\"user_a=b\"]"],
        ),
        (
            "the already allocated claim has no config",
            "Then pod \"tester-1\" is running with env \"user_a=b\" in every container: ",
            &["container with-resource of pod tester-1: expected env to contain [\"user_a=b\"]"],
        ),
        (
            "the claim of a rolling update has no config",
            "Then pod \"tester-1\" is running with env \"user_a=b\" in every container: ",
            &["container with-resource of pod tester-1: expected env to contain [\"user_a=b\"]"],
        ),
        (
            "the capacity claim has no config",
            "Then pod \"pod-1\" is running with env \"user_a=b\" in every container: ",
            &["container with-resource of pod pod-1: expected env to contain [\"user_a=b\"]"],
        ),
        (
            "a slice holds counters and devices at once",
            "Given a driver with these slices per node:",
            &[
                "its ResourceSlice on node ",
                "only one of `sharedCounters` or `devices` is allowed",
            ],
        ),
        (
            "the health message is another",
            "Then the devices of pod \"tester-1\" are reported Healthy with message ",
            &["after 10s", "temperature: 46°C)"],
        ),
        (
            "another claim is prepared beside the old one",
            "And the plugin on node 0 has prepared only the old claim \"external-claim\": ",
            &[
                "to have only the old claim external-claim (",
                "(\"other\", ",
            ],
        ),
        (
            "a 1.37 kubelet streaming health through v1alpha1",
            "And the health stream of driver \"old\" on node 0 went through the API of its kubelet's version",
            &[
                "on dra-e2e-node-0 should stream health from ",
                "through v1 only; streams opened: v1: 0, v1alpha1: 1",
            ],
        ),
        (
            "the kubelet opens a second connection",
            "And the kubelet opened 1 connection to the DRA socket of the driver on node 0: ",
            &[
                "to have opened 1 connection(s) to the DRA socket of driver ",
                "observed 2",
            ],
        ),
        (
            "the kubelet calls again while it should not",
            "And NodePrepareResources is not called again on node 0 for 15s: ",
            &[
                "NodePrepareResources not to be called again on dra-e2e-node-0",
                "calls when the step began, now ",
            ],
        ),
        (
            "the DRA service is never stopped",
            "And the slices of the driver are removed: ",
            &["did not finish within --step-timeout 20s", "to be removed"],
        ),
        (
            "the DRA socket is never blocked",
            "Then pod \"tester-1\" stays pending for 10s: ",
            &["expected pod tester-1 to stay Pending", "phase=\"Running\""],
        ),
        (
            "the DRA socket is never unblocked",
            "Then pod \"tester-1\" is running: ",
            &[
                "did not finish within --step-timeout 20s",
                "(no pod sandbox exists)",
            ],
        ),
    ];
    // The waits that would otherwise run into their own deadlines of minutes
    // end at the step timeout; no replacement of a driver is as short as the
    // wipe delay.
    broken_variants(
        "fidelity-kubelet",
        &["--step-timeout", "20s", "--wipe-delay", "10ms"],
        &expected,
    );
}
