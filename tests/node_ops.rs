//! Evidence that the assertions of features/optional_node_operations.feature
//! and features/compatibility_groups.feature can fail: the runner on
//! tests/fixtures/node-ops, whose scenarios each break what one of them
//! guards, must fail every scenario with the message of that assertion.
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::*;

/// Each scenario's failure message, by scenario name.
fn failures(junit: &Path) -> BTreeMap<String, String> {
    let xml = std::fs::read_to_string(junit).unwrap();
    let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes())).unwrap();
    let mut out = BTreeMap::new();
    for suite in &suites.suites {
        for case in &suite.cases {
            let message = match &case.status {
                junit_parser::TestStatus::Failure(f) => f.message.clone(),
                other => format!("did not fail: {other:?}"),
            };
            out.insert(case.original_name.clone(), message);
        }
    }
    out
}

#[test]
fn every_node_operations_and_compatibility_assertion_fails_its_broken_variant() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let artifacts = home.path().join("artifacts");
    // Waits for what never comes (an event, a pod that stays pending) end at
    // the step timeout rather than at their own deadlines of minutes.
    let o = local_run(
        home.path(),
        "node-ops",
        &[
            "--step-timeout",
            "20s",
            "--junit",
            junit.to_str().unwrap(),
            "--artifacts",
            artifacts.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("0 passed, 9 failed"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");

    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 9] = [
        (
            "the driver skips only the unprepare where all is expected",
            "And NodePrepareResources was called 0 times on node 0: ",
            &[
                "expected NodePrepareResources to have been called 0 time(s)",
                "observed 1",
            ],
        ),
        (
            "the driver skips nothing where the unprepare is to be skipped",
            "Then NodeUnprepareResources was called 0 times on node 0: ",
            &[
                "expected NodeUnprepareResources to have been called 0 time(s)",
                "observed 1",
            ],
        ),
        (
            "a claim unprepared by hand is still expected",
            "Then the plugin on node 0 has prepared claim \"external-claim\": ",
            &["to have prepared claim external-claim; prepared: []"],
        ),
        (
            "a node plugin is registered where none should be",
            "And NotifyRegistrationStatus was called 0 times on node 0: ",
            &[
                "expected NotifyRegistrationStatus to have been called 0 time(s)",
                "observed 1",
            ],
        ),
        (
            "the kubelet failed to prepare where no failure should be",
            "And pod \"tester-1\" got no \"FailedPrepareDynamicResources\" event: ",
            &[
                "expected no FailedPrepareDynamicResources event on pod tester-1, found 1: ",
                "is not registered",
            ],
        ),
        (
            "the kubelet prepares nothing and so fails nothing",
            "And pod \"tester-1\" gets a \"FailedPrepareDynamicResources\" event containing ",
            &[
                "did not finish within --step-timeout 20s",
                "waiting for a FailedPrepareDynamicResources event on pod tester-1",
            ],
        ),
        (
            "the remaining device is compatible after all",
            "Then pod \"pod-2\" is unschedulable: ",
            &["expected pod pod-2 to stay unscheduled, but it was scheduled"],
        ),
        (
            "the second device shares no group",
            "Then pod \"pod-2\" is running with env \"user_a=b\" in every container: ",
            &[
                "did not finish within --step-timeout 20s",
                "waiting for pod pod-2 to be running",
                "cannot allocate all claims",
            ],
        ),
        (
            "the slice does not carry the groups the check expects",
            "Then ResourceSlice \"${namespace}-devices\" has:",
            &[
                ".spec.devices[0].consumesCounters[0].compatibilityGroups[0] is \"vgpu\", expected \"mig\"",
            ],
        ),
    ];
    let got = failures(&junit);
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for (scenario, step, parts) in expected {
        let message = got
            .get(scenario)
            .unwrap_or_else(|| panic!("no scenario {scenario:?} in {got:#?}"));
        assert!(
            message.starts_with(step),
            "{scenario}: expected the failure of {step:?}, got {message}"
        );
        for part in parts {
            assert!(
                message.contains(part),
                "{scenario}: expected {part:?} in {message}"
            );
        }
    }
    assert_nothing_left(home.path(), &t);
}
