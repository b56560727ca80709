//! Pods a controller (a ReplicaSet) makes and the control plane takes away
//! again: which pods are a controller's and live, where they run, what the
//! taint eviction controller writes into a pod it evicts, and whether a
//! pod's claim was allocated where the pod runs. The named conditions of
//! the waits around a pod made again elsewhere after its node was lost.
//!
//! Why conditions of their own: a controller's pods have generated names,
//! so a wait cannot watch one pod by name as [`crate::wait::pod`] does; it
//! watches the controller's pods and judges the set.
use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::wait::{Check, describe_pod, pod_phase};

/// The reason of the `DisruptionTarget` condition the taint eviction
/// controller puts on a pod before it deletes it
/// (`pkg/controller/tainteviction`).
pub const TAINT_EVICTION_REASON: &str = "DeletionByTaintManager";
/// Its message.
pub const TAINT_EVICTION_MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";

/// The UID of the pod's controller (the owner reference marked
/// `controller`), if it has one.
pub fn controller_uid(p: &Pod) -> Option<&str> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Whether the pod's controller is the object with `uid`; `Err` says what
/// controls it now.
pub fn controlled_by(p: &Pod, uid: &str) -> Result<(), String> {
    match p.metadata.owner_references.as_ref().and_then(|os| {
        os.iter()
            .find(|o| o.controller == Some(true))
            .map(|o| (o.kind.as_str(), o.name.as_str(), o.uid.as_str()))
    }) {
        Some((_, _, u)) if u == uid => Ok(()),
        Some((kind, name, u)) => Err(format!("controlled by {kind} {name} (UID {u})")),
        None => Err("no controller".to_owned()),
    }
}

/// The pods of `pods` that the controller `uid` counts: its own, not being
/// deleted. A pod being deleted (evicted from a lost node, say) is one the
/// controller has already made again.
pub fn live_pods<'a>(pods: &'a [Pod], uid: &str) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| controller_uid(p) == Some(uid) && p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Done with the pods once exactly `count` live pods of the controller
/// `uid` run on `node`; pending otherwise, saying each live pod (name,
/// phase, node, conditions).
pub fn running_on(pods: &[Pod], uid: &str, node: &str, count: usize) -> Check<Vec<Pod>> {
    let live = live_pods(pods, uid);
    let on_node = |p: &&Pod| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            && pod_phase(p) == "Running"
    };
    if live.len() == count && live.iter().all(on_node) {
        return Check::Done(live.into_iter().cloned().collect());
    }
    let seen: Vec<String> = live
        .iter()
        .map(|p| {
            format!(
                "{}: {}",
                p.metadata.name.as_deref().unwrap_or_default(),
                describe_pod(Some(p))
            )
        })
        .collect();
    Check::Pending(format!(
        "{} live pod(s){}{}",
        live.len(),
        if seen.is_empty() { "" } else { ": " },
        seen.join("; ")
    ))
}

/// Whether pod `name` (`None`: gone) was evicted by the taint eviction
/// controller: being deleted, with the `DisruptionTarget` condition that
/// controller writes first. Pending while it is not being deleted; a pod
/// deleted without that condition, or gone, fails (someone else deleted
/// it).
pub fn evicted_by_taint(name: &str, p: Option<&Pod>) -> Check<()> {
    let Some(p) = p else {
        return Check::Fail(format!(
            "pod {name} is gone: its eviction cannot be checked"
        ));
    };
    if p.metadata.deletion_timestamp.is_none() {
        return Check::Pending(format!("not being deleted: {}", describe_pod(Some(p))));
    }
    let conditions = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let evicted = conditions.iter().any(|c| {
        c.type_ == "DisruptionTarget"
            && c.status == "True"
            && c.reason.as_deref() == Some(TAINT_EVICTION_REASON)
    });
    if evicted {
        Check::Done(())
    } else {
        Check::Fail(format!(
            "pod {name} is being deleted without the condition DisruptionTarget=True, reason \
             {TAINT_EVICTION_REASON}, that the taint eviction controller writes: {}",
            describe_pod(Some(p))
        ))
    }
}

/// Whether the claim is allocated for `node` (an allocation with a node
/// selector must name it; one without is usable on every node) and
/// reserved for the pod with `pod_uid`; `Err` says what the claim shows.
pub fn allocated_for_pod_on(
    claim: &ResourceClaim,
    node: &str,
    pod_uid: &str,
) -> Result<(), String> {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let status = claim.status.as_ref();
    let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) else {
        return Err(format!("claim {name} is not allocated"));
    };
    if let Some(selector) = &allocation.node_selector
        && !selects(selector, node)
    {
        return Err(format!(
            "claim {name} is allocated for other nodes than {node}: {}",
            serde_json::to_string(selector).unwrap_or_default()
        ));
    }
    let reserved: Vec<&str> = status
        .and_then(|s| s.reserved_for.as_ref())
        .map(|r| r.iter().map(|r| r.uid.as_str()).collect())
        .unwrap_or_default();
    if !reserved.contains(&pod_uid) {
        return Err(format!(
            "claim {name} is not reserved for the pod (UID {pod_uid}); reserved for UIDs {reserved:?}"
        ));
    }
    Ok(())
}

/// Whether a node selector as the scheduler writes it into an allocation
/// names `node`: by `metadata.name` (node-local devices) or by the
/// `kubernetes.io/hostname` label.
fn selects(selector: &NodeSelector, node: &str) -> bool {
    selector.node_selector_terms.iter().any(|t| {
        let names = |reqs: &Option<Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>>,
                     key: &str| {
            reqs.iter().flatten().any(|r| {
                r.key == key && r.operator == "In" && r.values.iter().flatten().any(|v| v == node)
            })
        };
        names(&t.match_fields, "metadata.name")
            || names(&t.match_expressions, "kubernetes.io/hostname")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>, node: &str, phase: &str, deleting: bool) -> Pod {
        let mut v = json!({
            "metadata": { "name": name },
            "spec": { "containers": [], "nodeName": node },
            "status": { "phase": phase },
        });
        if let Some(uid) = owner {
            v["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": uid, "controller": true,
            }]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(v).expect("a pod")
    }

    #[test]
    fn live_pods_are_the_controllers_own_not_being_deleted() {
        let pods = [
            pod("old", Some("u"), "a", "Running", true),
            pod("new", Some("u"), "b", "Running", false),
            pod("other", Some("x"), "b", "Running", false),
            pod("orphan", None, "b", "Running", false),
        ];
        let live: Vec<_> = live_pods(&pods, "u")
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(live, ["new"]);
        assert!(matches!(running_on(&pods, "u", "b", 1), Check::Done(p) if p.len() == 1));
        match running_on(&pods, "u", "a", 1) {
            Check::Pending(seen) => assert!(seen.contains("1 live pod(s): new:"), "{seen}"),
            other => panic!("{other:?}"),
        }
        let pending = [pod("new", Some("u"), "b", "Pending", false)];
        assert!(matches!(
            running_on(&pending, "u", "b", 1),
            Check::Pending(_)
        ));
        assert_eq!(controlled_by(&pods[1], "u"), Ok(()));
        assert_eq!(
            controlled_by(&pods[2], "u"),
            Err("controlled by ReplicaSet rs (UID x)".into())
        );
        assert_eq!(controlled_by(&pods[3], "u"), Err("no controller".into()));
    }

    #[test]
    fn a_taint_eviction_is_a_deletion_with_the_controllers_condition() {
        let running = pod("p", None, "a", "Running", false);
        assert!(matches!(
            evicted_by_taint("p", Some(&running)),
            Check::Pending(_)
        ));
        let deleted = pod("p", None, "a", "Running", true);
        assert!(matches!(
            evicted_by_taint("p", Some(&deleted)),
            Check::Fail(m) if m.contains("without the condition")
        ));
        let mut evicted = deleted.clone();
        evicted.status = serde_json::from_value(json!({
            "phase": "Running",
            "conditions": [{ "type": "DisruptionTarget", "status": "True",
                "reason": TAINT_EVICTION_REASON, "message": TAINT_EVICTION_MESSAGE }],
        }))
        .ok();
        assert!(matches!(
            evicted_by_taint("p", Some(&evicted)),
            Check::Done(())
        ));
        assert!(matches!(evicted_by_taint("p", None), Check::Fail(_)));
    }

    #[test]
    fn a_claim_counts_as_allocated_on_the_node_its_selector_names() {
        let claim = |selector: serde_json::Value, reserved: &str| -> ResourceClaim {
            serde_json::from_value(json!({
                "metadata": { "name": "c" },
                "spec": {},
                "status": {
                    "allocation": { "nodeSelector": selector },
                    "reservedFor": [{ "resource": "pods", "name": "p", "uid": reserved }],
                },
            }))
            .expect("a claim")
        };
        let by_name = json!({ "nodeSelectorTerms": [{ "matchFields": [
            { "key": "metadata.name", "operator": "In", "values": ["b"] }] }] });
        assert_eq!(
            allocated_for_pod_on(&claim(by_name.clone(), "u"), "b", "u"),
            Ok(())
        );
        let elsewhere = allocated_for_pod_on(&claim(by_name.clone(), "u"), "a", "u");
        assert!(elsewhere.is_err_and(|e| e.contains("other nodes than a")));
        let other_pod = allocated_for_pod_on(&claim(by_name, "x"), "b", "u");
        assert!(other_pod.is_err_and(|e| e.contains("not reserved")));
        let by_label = json!({ "nodeSelectorTerms": [{ "matchExpressions": [
            { "key": "kubernetes.io/hostname", "operator": "In", "values": ["b"] }] }] });
        assert_eq!(
            allocated_for_pod_on(&claim(by_label, "u"), "b", "u"),
            Ok(())
        );
        let unallocated: ResourceClaim =
            serde_json::from_value(json!({ "metadata": { "name": "c" }, "spec": {} }))
                .expect("a claim");
        assert_eq!(
            allocated_for_pod_on(&unallocated, "b", "u"),
            Err("claim c is not allocated".into())
        );
    }
}
