//! Evidence that the workload and DeviceTaintRule assertions can fail: the
//! runner on tests/fixtures/workloads, whose scenarios each break what one
//! of them guards, must fail every scenario with that assertion's message
//! and leave nothing behind (the DeviceTaintRules and the finalizer-held pod
//! included).
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
fn every_workload_and_eviction_assertion_fails_its_broken_variant() {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    // The eviction wait would otherwise run into its own deadline of minutes.
    let o = local_run(
        home.path(),
        "workloads",
        &["--step-timeout", "20s", "--junit", junit.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("0 passed, 3 failed"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");

    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 3] = [
        (
            "a rule whose selector matches nothing evicts nobody",
            "Then pod \"tester-1\" is evicted by the device taint manager: ",
            &[
                "the step did not finish within --step-timeout 20s",
                "and not being deleted",
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
    let got = failures(&junit);
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for (scenario, step, parts) in expected {
        let message = got
            .get(scenario)
            .unwrap_or_else(|| panic!("no result for {scenario:?}: {got:#?}"));
        assert!(
            message.contains(step),
            "{scenario}: expected the failing step {step:?} in {message}"
        );
        for p in parts {
            assert!(
                message.contains(p),
                "{scenario}: expected {p:?} in {message}"
            );
        }
    }
    assert_nothing_left(home.path(), &t);
}
