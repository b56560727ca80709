//! Evidence that the pool status checks can fail: the runner on
//! `tests/fixtures/pool-status`, whose scenarios each expect what the control
//! plane does not report, must fail every one of them with the message of the
//! check that caught it.

use crate::common;
use common::runs::{Ran, assert_each_scenario_caught};
use common::*;

#[test]
fn every_broken_pool_status_expectation_fails_with_the_check_that_caught_it() {
    let home = tempfile::tempdir().unwrap();
    let expected: [(&str, &[&str]); 13] = [
        (
            "wrong device count",
            &["pool \"network\": total devices is 10, expected 9"],
        ),
        (
            "allocated devices with nothing allocated",
            &["pool \"network\": allocated devices is 0, expected more than 0"],
        ),
        (
            "a pool that is not there",
            &["no pool \"no-such-pool\" is listed (pools: [\"network\"])"],
        ),
        // Checks already made hold on every fresh request too, and the
        // request was made again while the status differed.
        (
            "a later check on a replaced request",
            &[
                "condition Complete is \"True\", expected False",
                "timed out after 60s waiting for a pool status request with spec",
                "made with its spec",
            ],
        ),
        // The filter keeps the other node's pool out.
        (
            "a filter that should exclude",
            &["pools are [\"", "], expected [\""],
        ),
        (
            "a truncated list taken for all of it",
            &["pools listed is 1, expected 2"],
        ),
        (
            "pools of a driver that does not exist",
            &["pool count is 0, expected 1"],
        ),
        (
            "node-local pools without a node name",
            &["node name is \"", "expected none"],
        ),
        (
            "a node name for a pool on two nodes",
            &["pool \"mixed-node-pool\": node name is absent, expected set"],
        ),
        (
            "wrong partition counts",
            &[
                "the partition summary is dra.e2e.example.com/profile=Full (total 1, allocatable 1), \
                 dra.e2e.example.com/profile=Half (total 2, allocatable 2), expected",
            ],
        ),
        (
            "partition types without a declared partition type",
            &["pool \"partitioned\": the partition summary is empty, expected"],
        ),
        (
            "wrong shareable counts",
            &["pool \"shareable\": fully available devices is 2, expected 1"],
        ),
        (
            "an object that changes is not unchanged",
            &["Pod tester-1 changed within 5s: resourceVersion"],
        ),
    ];
    let ran = Ran::of(
        isolated(home.path())
            .env("DRA_E2E_AGENT", agent())
            .args(["--cluster", "local", "--nodes", "2", "--features"])
            .arg(fixtures("pool-status")),
    );
    assert_each_scenario_caught(home.path(), &ran, &expected);
}
