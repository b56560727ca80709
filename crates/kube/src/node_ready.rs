//! When a Node counts as usable for scenarios: what the runner waits for when
//! it starts nodes and counts when it decides which scenarios can run.
use k8s_openapi::api::core::v1::Node;

/// A Node that is Ready and accepts pods.
pub fn node_is_ready_and_schedulable(n: &Node) -> bool {
    let schedulable = !n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let no_schedule_taint = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        });
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    schedulable && ready && !no_schedule_taint
}
