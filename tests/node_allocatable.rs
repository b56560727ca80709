//! Evidence that the node-allocatable checks of
//! features/node_allocatable.feature can fail on a real node: the runner on
//! tests/fixtures/node-allocatable, whose scenarios each expect one value
//! without the devices' share (the pod's CPU request, a container's CPU and
//! memory limits, a container's oom_score_adj) or, after a resize, a
//! container's allocated resources with it, must fail every scenario with a
//! message naming what was read and what was expected. Needs root
//! and the node components (`make node`), like tests/real. The arithmetic
//! (cpu.shares, quotas, cgroup v2 weights, Burstable scores) is checked by
//! the unit tests in crates/steps/src/node_allocatable.rs.
use crate::common;
use common::*;

#[test]
fn every_node_allocatable_check_fails_its_broken_variant_on_a_real_node() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 4] = [
        (
            "the pod cgroup without the devices' CPU",
            "Then the cgroups of pod \"tester-1\" are:",
            // 400m: 100m per container and 100m per device.
            &["pod tester-1: cpu.shares is 409, expected 204 (cpu request 200m)"],
        ),
        (
            "a container cgroup without its device's share",
            "Then the cgroups of pod \"tester-1\" are:",
            &[
                "container c1 of pod tester-1: cpu.cfs_quota_us is 30000, expected 20000 (cpu limit 200m)",
                // 2Gi plus device-01's 1000Mi.
                "container c1 of pod tester-1: memory.limit_in_bytes is 3196059648, expected 2147483648 (memory limit 2048Mi)",
            ],
        ),
        (
            "an oom_score_adj scored without the device's memory",
            "Then container \"c1\" of pod \"tester-1\" has the oom_score_adj of its QoS class for a memory request of \"1024Mi\"",
            &[
                "container c1 of pod tester-1: oom_score_adj is ",
                "(Burstable: 1000 - 1000 × 1024Mi / ",
            ],
        ),
        (
            "a container's allocated resources with the device's share",
            "Then pod \"tester-1\" has allocated resources:",
            &[
                "container c1 of pod tester-1: allocatedResources are cpu 500m, memory 1000Mi, expected cpu 1500m, memory 2000Mi",
            ],
        ),
    ];
    let run = broken_variants_with(
        "node-allocatable",
        &["--node-kind", "real"],
        &expected,
        on_real_nodes,
    );
    // c2's row was right: only c1's values are reported.
    let failures = junit_failures(&run.junit);
    let container = &failures["a container cgroup without its device's share"];
    assert!(!container.contains("container c2"), "{container}");
    // The pod's allocation was right after the resize: only c1's is reported.
    let resized = &failures["a container's allocated resources with the device's share"];
    assert_eq!(
        resized.matches("allocatedResources are").count(),
        1,
        "{resized}"
    );
}
