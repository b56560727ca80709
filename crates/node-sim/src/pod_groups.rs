//! Claims that belong to a pod's PodGroup rather than to the pod: with the
//! kubelet's `DRAWorkloadResourceClaims` gate, a claim generated for the
//! group (owned by the PodGroup) and a claim reserved for the group count as
//! the pod's own. A pod knows its group only by name, so the group is
//! matched by name, kind and API group, never by UID.
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

const SCHEDULING_GROUP: &str = "scheduling.k8s.io";

/// The PodGroup the pod joined, if any.
fn group_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .scheduling_group
        .as_ref()?
        .pod_group_name
        .as_deref()
}

/// The claim's controller is the pod's PodGroup (any API version of the
/// scheduling group).
pub fn owned_by_group(pod: &Pod, claim: &ResourceClaim) -> bool {
    let Some(group) = group_of(pod) else {
        return false;
    };
    claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|o| {
            o.controller == Some(true)
                && o.kind == "PodGroup"
                && o.name == group
                && o.api_version.starts_with(&format!("{SCHEDULING_GROUP}/"))
        })
}

/// The claim is reserved for the pod's PodGroup.
pub fn reserved_for_group(pod: &Pod, claim: &ResourceClaim) -> bool {
    let Some(group) = group_of(pod) else {
        return false;
    };
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|r| {
            r.api_group.as_deref() == Some(SCHEDULING_GROUP)
                && r.resource == "podgroups"
                && r.name == group
        })
}

/// The pod's group name, for the kubelet's message about a claim neither
/// the pod nor its group owns.
pub fn group_name(pod: &Pod) -> Option<&str> {
    group_of(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSchedulingGroup, PodSpec};
    use k8s_openapi::api::resource::v1::{ResourceClaimConsumerReference, ResourceClaimStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod_in(group: Option<&str>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                scheduling_group: group.map(|g| PodSchedulingGroup {
                    pod_group_name: Some(g.into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn claim(owner: (&str, &str, &str), reserved: (&str, &str, &str)) -> ResourceClaim {
        let mut c = ResourceClaim::default();
        c.metadata.owner_references = Some(vec![OwnerReference {
            api_version: owner.0.into(),
            kind: owner.1.into(),
            name: owner.2.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        c.status = Some(ResourceClaimStatus {
            reserved_for: Some(vec![ResourceClaimConsumerReference {
                api_group: Some(reserved.0.into()).filter(|g: &String| !g.is_empty()),
                resource: reserved.1.into(),
                name: reserved.2.into(),
                uid: "u".into(),
            }]),
            ..Default::default()
        });
        c
    }

    #[test]
    fn only_the_pods_own_group_counts() {
        let c = claim(
            ("scheduling.k8s.io/v1beta1", "PodGroup", "g"),
            ("scheduling.k8s.io", "podgroups", "g"),
        );
        assert!(owned_by_group(&pod_in(Some("g")), &c));
        assert!(reserved_for_group(&pod_in(Some("g")), &c));
        for p in [pod_in(Some("other")), pod_in(None)] {
            assert!(!owned_by_group(&p, &c));
            assert!(!reserved_for_group(&p, &c));
        }
        // A pod of that name is not the group.
        let c = claim(("v1", "Pod", "g"), ("", "pods", "g"));
        assert!(!owned_by_group(&pod_in(Some("g")), &c));
        assert!(!reserved_for_group(&pod_in(Some("g")), &c));
    }
}
