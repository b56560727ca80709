//! When a Node counts as usable for scenarios: what the runner waits for when
//! it starts nodes and counts when it decides which scenarios can run.
use k8s_openapi::api::core::v1::{Node, NodeCondition};

/// The taint the runner puts on a node one scenario has to itself while
/// it runs (`@OwnNodes`): it keeps other scenarios' pods off the node, but
/// the node is still one of the run's, so it does not make a node unusable
/// here; the runner's leases decide who uses it.
pub const OWN_NODE_TAINT: &str = "dra-e2e.k8s.io/own-node";

/// The namespace of the scenario that has the node to itself, from the
/// node's own-node taint; `None` while the node is shared.
pub fn owner(n: &Node) -> Option<&str> {
    n.spec
        .as_ref()?
        .taints
        .as_ref()?
        .iter()
        .find(|t| t.key == OWN_NODE_TAINT)
        .map(|t| t.value.as_deref().unwrap_or_default())
}

/// A Node that is Ready and accepts pods (the runner's own-node taint
/// aside).
pub fn node_is_ready_and_schedulable(n: &Node) -> bool {
    why_unusable(n).is_none()
}

/// Why a Node is not [`node_is_ready_and_schedulable`]: its Ready
/// condition as the kubelet last posted it, its cordon, the taints that keep
/// pods off it; `None` when it is usable.
pub fn why_unusable(n: &Node) -> Option<String> {
    let mut why = Vec::new();
    match ready_condition(n) {
        Some(c) if c.status == "True" => {}
        Some(c) => why.push(format!(
            "Ready {} ({}{})",
            c.status,
            c.reason.as_deref().unwrap_or("no reason"),
            c.message
                .as_deref()
                .filter(|m| !m.is_empty())
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
        None => why.push("no Ready condition posted yet".to_owned()),
    }
    let spec = n.spec.as_ref();
    if spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        why.push("cordoned".to_owned());
    }
    for t in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        if (t.effect == "NoSchedule" || t.effect == "NoExecute") && t.key != OWN_NODE_TAINT {
            why.push(format!("tainted {}:{}", t.key, t.effect));
        }
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// The taint the node lifecycle controller puts on a node whose kubelet
/// stopped renewing its Lease (with effects `NoSchedule` and `NoExecute`).
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// The Node's Ready condition, as its kubelet last posted it.
pub fn ready_condition(n: &Node) -> Option<&NodeCondition> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The status of the Node's Ready condition (`True`, `False`, `Unknown`).
pub fn ready_status(n: &Node) -> Option<&str> {
    ready_condition(n).map(|c| c.status.as_str())
}

/// What the control plane says of a node it lost: its Ready condition
/// `Unknown` and the unreachable taint on it; `Err` says what it says now.
pub fn reported_unreachable(n: &Node) -> Result<(), String> {
    let ready = ready_status(n).unwrap_or("missing");
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNREACHABLE_TAINT));
    match (ready, tainted) {
        ("Unknown", true) => Ok(()),
        (ready, tainted) => Err(format!(
            "Ready {ready}, {}",
            if tainted {
                "tainted unreachable"
            } else {
                "not tainted unreachable"
            }
        )),
    }
}

/// Whether the node's kubelet has posted the Node's status later than the
/// second `since` falls in (the Ready condition's heartbeat): a kubelet
/// started at `since` is up once this holds. `Err` says the last heartbeat.
pub fn posted_status_after(n: &Node, since: k8s_openapi::jiff::Timestamp) -> Result<(), String> {
    let beat = ready_condition(n).and_then(|c| c.last_heartbeat_time.as_ref());
    match beat {
        Some(t) if t.0.as_second() > since.as_second() => Ok(()),
        Some(t) => Err(format!("last heartbeat {}", t.0)),
        None => Err("no Ready condition".into()),
    }
}

/// `major.minor` of a version as Kubernetes writes it (`v1.37.2`, `1.36`,
/// `v1.37.0-alpha.1`): what version skew is reckoned in.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// The `major.minor` of the kubelet a Node reports.
pub fn kubelet_version(n: &Node) -> Option<(u32, u32)> {
    major_minor(&n.status.as_ref()?.node_info.as_ref()?.kubelet_version)
}

#[cfg(test)]
mod tests {
    use super::{OWN_NODE_TAINT, major_minor, node_is_ready_and_schedulable, owner};
    use k8s_openapi::api::core::v1::Node;

    fn node_with_taint(key: &str, effect: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "n" },
            "spec": { "taints": [{ "key": key, "effect": effect }] },
            "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
        }))
        .expect("a node")
    }

    #[test]
    fn a_status_counts_as_posted_after_only_from_the_next_second() {
        use super::posted_status_after;
        let node = |beat: &str| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "n" },
                "status": { "conditions": [{ "type": "Ready", "status": "True", "lastHeartbeatTime": beat }] },
            }))
            .expect("a node")
        };
        let since: k8s_openapi::jiff::Timestamp = "2026-12-07T03:00:10.5Z".parse().expect("a time");
        assert_eq!(
            posted_status_after(&node("2026-12-07T03:00:11Z"), since),
            Ok(())
        );
        assert_eq!(
            posted_status_after(&node("2026-12-07T03:00:10Z"), since),
            Err("last heartbeat 2026-12-07T03:00:10Z".into())
        );
        let bare: Node = serde_json::from_value(serde_json::json!({ "metadata": { "name": "n" } }))
            .expect("a node");
        assert_eq!(
            posted_status_after(&bare, since),
            Err("no Ready condition".into())
        );
    }

    #[test]
    fn unreachable_needs_both_the_unknown_condition_and_the_taint() {
        let node = |ready: &str, taint: Option<&str>| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "n" },
                "spec": { "taints": taint.map(|k| vec![serde_json::json!({ "key": k, "effect": "NoExecute" })]).unwrap_or_default() },
                "status": { "conditions": [{ "type": "Ready", "status": ready }] },
            }))
            .expect("a node")
        };
        use super::{UNREACHABLE_TAINT, reported_unreachable};
        assert_eq!(
            reported_unreachable(&node("Unknown", Some(UNREACHABLE_TAINT))),
            Ok(())
        );
        assert_eq!(
            reported_unreachable(&node("Unknown", None)),
            Err("Ready Unknown, not tainted unreachable".into())
        );
        assert_eq!(
            reported_unreachable(&node("True", Some(UNREACHABLE_TAINT))),
            Err("Ready True, tainted unreachable".into())
        );
        assert!(
            reported_unreachable(&node("False", Some("node.kubernetes.io/not-ready"))).is_err()
        );
    }

    #[test]
    fn a_no_schedule_taint_makes_a_node_unusable_except_the_runners_own() {
        assert!(!node_is_ready_and_schedulable(&node_with_taint(
            "x",
            "NoSchedule"
        )));
        assert!(!node_is_ready_and_schedulable(&node_with_taint(
            "x",
            "NoExecute"
        )));
        assert!(node_is_ready_and_schedulable(&node_with_taint(
            "x",
            "PreferNoSchedule"
        )));
        assert!(node_is_ready_and_schedulable(&node_with_taint(
            OWN_NODE_TAINT,
            "NoSchedule"
        )));
    }

    #[test]
    fn an_unusable_node_says_why() {
        use super::why_unusable;
        assert_eq!(
            why_unusable(&node_with_taint(OWN_NODE_TAINT, "NoSchedule")),
            None
        );
        assert_eq!(
            why_unusable(&node_with_taint(
                "node.kubernetes.io/not-ready",
                "NoSchedule"
            )),
            Some("tainted node.kubernetes.io/not-ready:NoSchedule".into())
        );
        let not_ready: Node = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "n" },
            "spec": { "unschedulable": true },
            "status": { "conditions": [{ "type": "Ready", "status": "False",
                "reason": "KubeletNotReady", "message": "PLEG is not healthy" }] },
        }))
        .expect("a node");
        assert_eq!(
            why_unusable(&not_ready),
            Some("Ready False (KubeletNotReady: PLEG is not healthy), cordoned".into())
        );
        let bare: Node = serde_json::from_value(serde_json::json!({ "metadata": { "name": "n" } }))
            .expect("a node");
        assert_eq!(
            why_unusable(&bare),
            Some("no Ready condition posted yet".into())
        );
    }

    #[test]
    fn an_owned_node_names_its_owner_and_a_shared_one_none() {
        let mut owned = node_with_taint(OWN_NODE_TAINT, "NoSchedule");
        if let Some(t) = owned.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            t[0].value = Some("dra-e2e-abcde".into());
        }
        assert_eq!(owner(&owned), Some("dra-e2e-abcde"));
        assert_eq!(owner(&node_with_taint("x", "NoSchedule")), None);
    }

    #[test]
    fn versions_read_as_major_and_minor() {
        assert_eq!(major_minor("v1.37.2"), Some((1, 37)));
        assert_eq!(major_minor("1.36"), Some((1, 36)));
        assert_eq!(major_minor("v1.38.0-alpha.1"), Some((1, 38)));
        assert_eq!(major_minor("v1"), None);
        assert_eq!(major_minor(""), None);
    }
}
