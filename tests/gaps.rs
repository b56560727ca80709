//! Evidence that three checks of issue 13 can fail: the CRUD watch's event
//! sequence, the DisruptionTarget condition of a DeviceTaintRule eviction,
//! and the ResourceSlice controller's slice count, size bounds and write
//! statistics. The runner on tests/fixtures/gaps, whose scenarios each break
//! what one check guards, must fail every scenario with that check's
//! message and leave nothing behind.

mod common;
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
    let with_fault = |fault: &'static str| {
        move |c: &mut std::process::Command| {
            c.env("DRA_E2E_SLICE_CONTROLLER_FAULT", fault);
        }
    };
    // Deleting and recreating a slice while nothing changed: writes beyond
    // the two creates.
    broken_variants_with(
        "slice-controller-faults",
        &["--step-timeout", "20s"],
        &[(SCENARIO, STEP, &["the controller", "1 deletes"])],
        with_fault("churn"),
    );
    // Told to publish one empty slice, it keeps its two full ones.
    broken_variants_with(
        "slice-controller-faults",
        &["--step-timeout", "20s"],
        &[(
            SCENARIO,
            STEP,
            &[
                "to have one slice without devices",
                "2 slices with 256 devices",
            ],
        )],
        with_fault("no-shrink"),
    );
}

#[test]
fn an_unknown_slice_controller_fault_is_named() {
    broken_variants_with(
        "slice-controller-faults",
        &[],
        &[(
            "creates slices with a faulty controller",
            "Then a ResourceSlice controller publishes",
            &[
                "DRA_E2E_SLICE_CONTROLLER_FAULT=\"sometimes\" is no fault of the slice controller: use churn or no-shrink",
            ],
        )],
        |c| {
            c.env("DRA_E2E_SLICE_CONTROLLER_FAULT", "sometimes");
        },
    );
}
