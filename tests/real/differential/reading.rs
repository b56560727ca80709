//! Reading pods from both sides and comparing them: in the state their
//! case is about, then after deletion.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, ListParams};

use super::cases::Case;
use super::normalise::{Normaliser, diff, view};
use super::{AGREE, Remembered, SETTLE};

pub(super) struct Side {
    pub(super) label: &'static str,
    pub(super) node: String,
    pub(super) pod: String,
}

struct Snapshot {
    pod: Option<Pod>,
    events: Vec<Event>,
}

async fn snapshot(client: &kube::Client, ns: &str, name: &str) -> Snapshot {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get_opt(name).await.expect("reading pod");
    let events = match pod.as_ref().and_then(|p| p.metadata.uid.clone()) {
        Some(uid) => pod_events(client, ns, &uid).await,
        None => Vec::new(),
    };
    Snapshot { pod, events }
}

async fn pod_events(client: &kube::Client, ns: &str, uid: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .expect("listing events")
        .items
}

/// Names and UIDs in a pod's status that differ between the sides.
pub(super) async fn normaliser_for(
    client: &kube::Client,
    ns: &str,
    side: &Side,
    pod: &Pod,
) -> Normaliser {
    let mut literals = vec![
        (side.pod.clone(), "<pod>".to_owned()),
        (ns.to_owned(), "<ns>".to_owned()),
        (side.node.clone(), "<node>".to_owned()),
        (
            pod.metadata.uid.clone().unwrap_or_default(),
            "<pod-uid>".to_owned(),
        ),
    ];
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let generated = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    for c in generated {
        let Some(name) = c.resource_claim_name else {
            continue;
        };
        if let Ok(Some(claim)) = claims.get_opt(&name).await {
            literals.push((claim.metadata.uid.unwrap_or_default(), "<claim-uid>".into()));
        }
        literals.push((name, "<claim>".into()));
    }
    Normaliser::new(literals)
}

/// Waits until both pods of a case are in the state it compares and their
/// views agree; returns the differences seen last, empty when they agreed.
pub(super) async fn compare(
    client: &kube::Client,
    ns: &str,
    case: &Case,
    sides: &[Side; 2],
    deleted: bool,
) -> Vec<String> {
    let start = Instant::now();
    let mut agreeing_since: Option<Instant> = None;
    loop {
        let mut views = Vec::new();
        let mut not_settled = Vec::new();
        for side in sides {
            let snap = snapshot(client, ns, &side.pod).await;
            match (&snap.pod, deleted) {
                (Some(pod), false) => {
                    if !(case.settled)(pod, &snap.events) {
                        not_settled.push(side.label);
                    }
                    let n = normaliser_for(client, ns, side, pod).await;
                    views.push(view(case, pod, &snap.events, &n));
                }
                (None, false) => {
                    not_settled.push(side.label);
                    views.push(BTreeMap::from([("pod".to_owned(), "(gone)".to_owned())]));
                }
                (Some(_), true) => {
                    not_settled.push(side.label);
                    views.push(BTreeMap::from([(
                        "pod".to_owned(),
                        "(still there)".to_owned(),
                    )]));
                }
                (None, true) => views.push(BTreeMap::new()),
            }
        }
        let differences = diff(&views[0], &views[1]);
        let now = Instant::now();
        if not_settled.is_empty() {
            if differences.is_empty() {
                return Vec::new();
            }
            let since = *agreeing_since.get_or_insert(now);
            if now - since > AGREE {
                return differences;
            }
        } else if now - start > SETTLE {
            let mut out = vec![format!(
                "    (not in the compared state after {SETTLE:?}: {})",
                not_settled.join(", ")
            )];
            out.extend(differences);
            return out;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The events of pods already deleted, compared by the UIDs they had.
pub(super) async fn compare_deletion_events(
    client: &kube::Client,
    ns: &str,
    case: &Case,
    uids: &[Remembered; 2],
) -> Vec<String> {
    let start = Instant::now();
    loop {
        let mut views = Vec::new();
        for (uid, n) in uids {
            let mut events = pod_events(client, ns, uid).await;
            if case.restarts_vary {
                // Whether a crash-looping container runs when its pod is
                // deleted is a matter of timing.
                events.retain(|e| e.reason.as_deref() != Some("Killing"));
            }
            let mut v = view(case, &Pod::default(), &events, n);
            v.retain(|k, _| k.starts_with("event "));
            views.push(v);
        }
        let differences = diff(&views[0], &views[1]);
        if differences.is_empty() || start.elapsed() > AGREE {
            return differences;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

pub(super) async fn wait_gone(
    client: &kube::Client,
    ns: &str,
    names: &[String],
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    loop {
        let mut left = Vec::new();
        for n in names {
            if pods.get_opt(n).await.map_err(|e| e.to_string())?.is_some() {
                left.push(n.clone());
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if start.elapsed() > SETTLE {
            return Err(format!("pods not deleted after {SETTLE:?}: {left:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
