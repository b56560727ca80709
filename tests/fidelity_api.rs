//! Evidence that the API-side checks restored from upstream can fail: the
//! runner on `tests/fixtures/fidelity-api`, whose scenarios are each wrong on
//! purpose, must fail every one of them with the message of the check that
//! caught it.

use crate::common;
use common::runs::{Ran, assert_each_scenario_caught};
use common::*;

#[test]
fn every_broken_api_variant_fails_with_the_check_that_caught_it() {
    let home = tempfile::tempdir().unwrap();
    let expected: [(&str, &[&str]); 18] = [
        // A denial is tried once, and an allowed write fails the step.
        (
            "a write the policy allows is not denied",
            &["to be denied with \"may not modify\", but it was created"],
        ),
        // Updating is a real write, checked by the admission policy.
        (
            "a plugin updating a cluster slice is denied",
            &[
                "this user running on node 'dra-fictional-node' may not modify cluster resourceslices",
            ],
        ),
        // Device status is compared for equality, not as a subset.
        (
            "device status read back as a subset",
            &[
                "status.devices is not as expected (status.devices[0].networkData.hardwareAddress is there, but not expected)",
            ],
        ),
        (
            "a second slice in an all-nodes pool",
            &["2 slices of pool all-nodes-pool, expected exactly 1"],
        ),
        // Devices are compared device by device, not by name.
        (
            "a node-local device with an attribute of its own",
            &[
                "device {\"attributes\":{\"dra.example.com/version\":{\"version\":\"1.0.0\"}},\"name\":\"device-00\"}, expected {\"name\":\"device-00\"}",
            ],
        ),
        // The health stream the kubelet did open is seen.
        (
            "no stream expected on the version the kubelet chose",
            &[
                "expected no health stream of",
                "through the v1 API on",
                "/v1.DRAResourceHealth/NodeWatchResources: 1",
            ],
        ),
        // Lists are compared as a set of names, not searched for one.
        (
            "a list that holds more than expected",
            &["found [\"crud-claim\", \"other-claim\"], expected [\"crud-claim\"]"],
        ),
        // The status is read through its subresource, where the main
        // endpoint does not write.
        (
            "a status written through the main endpoint",
            &["the status of ResourceClaim crud-claim: .status.allocation is missing"],
        ),
        // An update (PUT) must be a write: a new resourceVersion.
        (
            "an update that changes nothing",
            &["updating ResourceClaim crud-claim left its resourceVersion at"],
        ),
        // The published devices are compared with their attributes.
        (
            "a published device with other attributes than expected",
            &[
                "to hold exactly these devices; last seen: slice of node",
                "device {\"attributes\":{\"healthy\":{\"bool\":true}},\"name\":\"device-00\"}, expected {\"attributes\":{\"healthy\":{\"bool\":false}},\"name\":\"device-00\"}",
            ],
        ),
        // The quota's whole status is compared: a resource left out fails.
        (
            "a quota status with a resource left out",
            &[
                "to have exactly hard {\"count/resourceclaims.resource.k8s.io\": 10000}",
                "\"count/resourceclaimtemplates.resource.k8s.io\": 5000}",
            ],
        ),
        // A refusal must be Invalid (422), not only carry the text.
        (
            "a status update forbidden rather than refused as invalid",
            &[
                "to be refused as invalid with \"is forbidden\"",
                "code: 403",
            ],
        ),
        // The size bounds need slices to measure.
        (
            "a controller with no slices to measure",
            &["no slices to measure"],
        ),
        // What an update returns must hold what was sent.
        (
            "an update whose result lacks what was sent",
            &[
                "updating the status of ResourceClaim crud-claim returned otherwise: .status.notAField is missing",
            ],
        ),
        // Upstream's CRUD procedure: discovery, each patch alone on a
        // re-created object, the watches' events.
        (
            "a resource discovery does not list",
            &[
                "the API for resource.k8s.io/v1 does not include an entry for deviceclass; it lists deviceclasses",
            ],
        ),
        (
            "a patch that does not do what the update does",
            &[
                "strategic merge patch: the object differs from what was sent: .spec.selectors[0].cel.expression is \"2 == 0\", expected \"1 == 0\"",
            ],
        ),
        (
            "a patch that needs the update before it",
            &[
                "the JSON patch (PATCH /apis/resource.k8s.io/v1/namespaces/",
                "code: 422",
            ],
        ),
        (
            "an update the watches never see",
            &[
                "timed out after 5s waiting for update: the events of the cluster-wide watch on resourceclaims; last seen: events none where (update,)+ was expected",
            ],
        ),
    ];
    let ran = Ran::of(local_run(home.path(), "fidelity-api", &[]));
    assert_each_scenario_caught(home.path(), &ran, &expected);
}
