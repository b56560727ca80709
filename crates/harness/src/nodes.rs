//! The nodes a scenario may choose from: those ready and schedulable, with
//! the ones other scenarios own (which stay the run's while their owners
//! have them away). The runner counted them before the run and skipped the
//! scenarios that need more, so a node short when a scenario starts is one
//! away for a moment (its kubelet late with its status on a loaded machine,
//! a taint the node lifecycle controller has yet to lift): the scenario
//! waits for it, and when it never comes back the error says what each
//! node lacked.
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;

use dra_e2e_kube::node_ready::why_unusable;
use dra_e2e_kube::wait::{self, Check, WaitError};

/// How long a scenario waits for a node that is away for a moment: longer
/// than the node lifecycle controller's grace period for a kubelet's status
/// (40 s) and a kubelet's restart.
pub const USABLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits until at least `min` nodes are usable: ready and schedulable, or
/// in `owned` (held by a scenario). Returns them sorted.
pub async fn wait_usable(
    client: &kube::Client,
    min: usize,
    owned: &[String],
    timeout: Duration,
) -> Result<Vec<String>, WaitError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let what = format!("at least {min} ready schedulable node(s)");
    wait::list(&nodes, watcher::Config::default(), &what, timeout, |list| {
        usable(list, min, owned)
    })
    .await
}

/// The named condition of [`wait_usable`].
fn usable(list: &[Node], min: usize, owned: &[String]) -> Check<Vec<String>> {
    let mut names: Vec<String> = owned.to_vec();
    let mut away = Vec::new();
    for n in list {
        let name = n.metadata.name.clone().unwrap_or_default();
        if owned.contains(&name) {
            continue;
        }
        match why_unusable(n) {
            None => names.push(name),
            Some(why) => away.push(format!("{name}: {why}")),
        }
    }
    names.sort();
    names.dedup();
    if names.len() >= min {
        return Check::Done(names);
    }
    let mut seen = format!(
        "{} of {} node(s) usable ({})",
        names.len(),
        list.len(),
        names.join(", ")
    );
    if !away.is_empty() {
        seen.push_str(&format!("; {}", away.join("; ")));
    }
    Check::Pending(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: &str, taint: Option<&str>) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "spec": { "taints": taint.map(|k| vec![serde_json::json!({ "key": k, "effect": "NoSchedule" })]).unwrap_or_default() },
            "status": { "conditions": [{ "type": "Ready", "status": ready, "reason": "KubeletNotReady" }] },
        }))
        .expect("a node")
    }

    #[test]
    fn a_node_away_keeps_the_wait_pending_with_what_it_lacks() {
        let list = [node("a", "True", None), node("b", "False", None)];
        match usable(&list, 2, &[]) {
            Check::Pending(seen) => assert_eq!(
                seen,
                "1 of 2 node(s) usable (a); b: Ready False (KubeletNotReady)"
            ),
            other => panic!("expected pending, got {other:?}"),
        }
        let tainted = [
            node("a", "True", None),
            node("b", "True", Some("node.kubernetes.io/not-ready")),
        ];
        assert!(matches!(usable(&tainted, 2, &[]), Check::Pending(_)));
    }

    #[test]
    fn owned_nodes_count_however_they_look() {
        let list = [node("a", "True", None), node("b", "False", None)];
        match usable(&list, 2, &["b".to_owned()]) {
            Check::Done(names) => assert_eq!(names, ["a", "b"]),
            other => panic!("expected done, got {other:?}"),
        }
        match usable(&list, 1, &[]) {
            Check::Done(names) => assert_eq!(names, ["a"]),
            other => panic!("expected done, got {other:?}"),
        }
    }
}
