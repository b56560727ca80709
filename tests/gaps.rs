//! Evidence that three checks of issue 13 can fail: the CRUD watch's event
//! sequence, the DisruptionTarget condition of a DeviceTaintRule eviction,
//! and the ResourceSlice controller's slice count, size bounds and write
//! statistics. The runner on tests/fixtures/gaps, whose scenarios each break
//! what one check guards, must fail every scenario with that check's
//! message and leave nothing behind.

use crate::common;
use common::*;

#[test]
fn every_restored_check_fails_its_broken_variant() {
    const CONDITION: &str = "is terminating without the condition DisruptionTarget=True, \
         reason DeletionByDeviceTaintManager, message \"Device Taint manager: deleting due to NoExecute taint\"";
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 9] = [
        (
            "a patch that changes nothing is not seen modified",
            "Then the watch sees DeviceClass \"${namespace}-same\" modified: ",
            &[
                "timed out after 10s waiting for the watch on DeviceClass objects labelled crud=",
                "-same modified; since the check before it saw nothing",
            ],
        ),
        (
            "the watch sees another object first",
            "Then the watch sees DeviceClass \"${namespace}-second\" added: ",
            &["-first, not dra-e2e-", "; it saw ADDED dra-e2e-"],
        ),
        (
            "an object that was only created is not seen deleted",
            "Then the watch sees DeviceClass \"${namespace}-kept\" deleted: ",
            &["ADDED where DELETED was to come; it saw ADDED dra-e2e-"],
        ),
        (
            "a watch opened after the object exists",
            "Given a watch on DeviceClass objects labelled \"crud=${namespace}\": ",
            &["must start before they exist; there are already [\"dra-e2e-"],
        ),
        (
            "a pod its user deleted before the rule is not evicted",
            "Then pod \"tester-1\" is evicted by the device taint manager: ",
            &[
                CONDITION,
                "its conditions: [\"PodReadyToStartContainers=True",
            ],
        ),
        (
            "a DisruptionTarget condition with another message",
            "Then pod \"tester-1\" is evicted by the device taint manager: ",
            &[
                CONDITION,
                "\"DisruptionTarget=True (DeletionByDeviceTaintManager: Device Taint manager: deleting for no reason)\"",
            ],
        ),
        (
            "a slice of another pool of the driver",
            "Then a ResourceSlice controller publishes 0 maximum-size slices, rests for 1s and shrinks them to one empty slice: ",
            &[
                "1 slices of dra-e2e-",
                "more than the 0 the controller publishes: dra-e2e-",
                "-other (pool other)",
            ],
        ),
        (
            "a stale slice in the controller's pool",
            "Then a ResourceSlice controller publishes 2 maximum-size slices, rests for 1s and shrinks them to one empty slice: ",
            // The controller rewrites the stale slice as one of its own (an
            // update) where it had nothing else to rewrite.
            &[
                "the controller wrote 1 creates, 1 updates, 0 deletes, more than the 2 creates, 0 updates, 0 deletes expected",
            ],
        ),
        (
            "size bounds no slice of the API reaches",
            "Then a ResourceSlice controller publishes 1 maximum-size slice, rests for 1s and shrinks them to one empty slice: ",
            &["slices not between 1048576 and 2097152 bytes in protobuf: dra-e2e-"],
        ),
    ];
    broken_variants("gaps", &["--step-timeout", "20s"], &expected);
}

/// The rest periods and the shrink of "creates slices", against the slice
/// controller given each fault on purpose (nothing a scenario does can make
/// the controller churn or ignore its new slices mid-step).
#[test]
fn a_churning_or_never_shrinking_slice_controller_fails_creates_slices() {
    const STEP: &str = "Then a ResourceSlice controller publishes 2 maximum-size slices, rests for 3s and shrinks them to one empty slice: ";
    const SCENARIO: &str = "creates slices with a faulty controller";
    // Deleting and recreating a slice while nothing changed: writes beyond
    // the two creates.
    broken_variants(
        "slice-controller-faults",
        &["--step-timeout", "20s", "--slice-controller-fault", "churn"],
        &[(SCENARIO, STEP, &["the controller", "1 deletes"])],
    );
    // Told to publish one empty slice, it keeps its two full ones.
    broken_variants(
        "slice-controller-faults",
        &[
            "--step-timeout",
            "20s",
            "--slice-controller-fault",
            "no-shrink",
        ],
        &[(
            SCENARIO,
            STEP,
            &[
                "to have one slice without devices",
                "2 slices with 256 devices",
            ],
        )],
    );
}

#[test]
fn an_unknown_slice_controller_fault_is_named() {
    let o = std::process::Command::new(bin())
        .args(["--slice-controller-fault", "sometimes", "--list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--slice-controller-fault")
            && err.contains(
                "\"sometimes\" is no fault of the slice controller; one of: none, churn, no-shrink"
            ),
        "{err}"
    );
}

/// Issue 44: a pod wait that fails says why, as the cluster says it, after
/// what it last saw: whether the step's timeout cut it (a claim the driver
/// cannot prepare) or the pod reached a state it cannot leave (a container
/// that exited with an error). The same text is in the step's failure, the
/// JUnit message and the HTML report.
#[test]
fn a_failed_pod_wait_says_what_the_cluster_says_about_the_pod() {
    let html = tempfile::tempdir().unwrap();
    let report = html.path().join("report.html");
    let expected: [(&str, &str, &[&str]); 2] = [
        (
            "a pod whose claim the driver cannot prepare",
            "Then pod \"tester-1\" is running: ",
            &[
                "the step did not finish within --step-timeout 20s \
                 (waiting for pod tester-1 to be running; last seen: phase=\"Pending\"",
                "\ndiagnosis of pod tester-1:\n  container with-resource: waiting ContainerCreating\n",
                "\n  event Warning FailedPrepareDynamicResources (",
                "x from kubelet on ",
                "): Failed to prepare dynamic resources: ",
                "injected error",
                "\n  claim tester-1-my-inline-claim-",
                " (my-inline-claim): allocated on ",
                ", reserved for pods/tester-1\n",
                "\n  driver dra-e2e-",
                " failed NodePrepareResources call(s) on ",
                ": injected error (injected)",
            ],
        ),
        (
            "a pod whose container exits with an error",
            "Then pod \"tester-1\" is completed: ",
            &[
                "pod tester-1 failed instead of completing: phase=\"Failed\"",
                "\ndiagnosis of pod tester-1:\n  container with-resource: terminated with exit code 3 Error",
            ],
        ),
    ];
    let run = broken_variants_with("diagnosis", &["--step-timeout", "20s"], &expected, |c| {
        c.arg("--html").arg(&report);
    });
    // As the step's failure in the run's output and in the HTML report.
    let prepare = scenario_output(&run.output, expected[0].0);
    for part in [
        "diagnosis of pod tester-1:",
        "container with-resource: waiting ContainerCreating",
        "event Warning FailedPrepareDynamicResources (",
        "failed NodePrepareResources call(s) on ",
    ] {
        assert!(prepare.contains(part), "{part:?} missing in\n{prepare}");
    }
    let page = std::fs::read_to_string(&report).unwrap();
    for part in [
        "diagnosis of pod tester-1:\n  container with-resource: waiting ContainerCreating\n",
        "\n  event Warning FailedPrepareDynamicResources (",
        "container with-resource: terminated with exit code 3 Error",
    ] {
        assert!(page.contains(part), "{part:?} missing in the HTML report");
    }
}
