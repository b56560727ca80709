//! Evidence that the device metadata checks of features/metadata.feature can
//! fail on a real node: the runner on tests/fixtures/metadata, whose
//! scenarios each break what one check guards (a file a container must see,
//! one it must not, a driver that writes none, a file whose first object is
//! of another version), must fail every scenario with that check's message.
//! Needs root and the node components (`make node`), like tests/real. The
//! checks of the file's fields are shown to fail by the unit tests in
//! crates/steps/src/metadata.rs.
use crate::common;
use common::*;

#[test]
fn every_metadata_check_fails_its_broken_variant_on_a_real_node() {
    const DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 4] = [
        (
            "a container reads the file of a request it does not get",
            "And container \"with-resource-1\" of pod \"tester-1\" reads the v1beta1 device metadata of request \"req0\"",
            &[
                "container with-resource-1 of pod tester-1 cannot read",
                "/resourceclaims/external-claim/req0/",
                "No such file or directory",
            ],
        ),
        (
            "a container cannot read the file of a request it gets",
            "And container \"with-resource-1\" of pod \"tester-1\" cannot read the device metadata of request \"req1\"",
            &[
                "container with-resource-1 of pod tester-1 can read",
                "/resourceclaims/external-claim/req1/",
                "the file must not be mounted there",
            ],
        ),
        (
            "a driver that writes no metadata",
            "And container \"with-resource\" of pod \"tester-1\" reads the v1beta1 device metadata of request \"my-request\"",
            &[
                "container with-resource of pod tester-1 cannot read",
                "/resourceclaims/external-claim/my-request/",
            ],
        ),
        (
            "the older version comes first in the file",
            "And container \"with-resource\" of pod \"tester-1\" reads the v1beta1 device metadata of request \"my-request\" of the claim of pod",
            &[
                "/resourceclaimtemplates/my-inline-claim/my-request/",
                "apiVersion metadata.resource.k8s.io/v1alpha1, expected metadata.resource.k8s.io/v1beta1",
            ],
        ),
    ];
    let run = broken_variants_with(
        "metadata",
        &["--node-kind", "real"],
        &expected,
        on_real_nodes,
    );
    for (scenario, message) in junit_failures(&run.junit) {
        assert!(message.contains(DIR), "{scenario}: {message}");
    }
}
