//! What the cluster says is wrong with a pod, added to a pod wait that
//! failed: each container's waiting or terminated reason and message, the
//! pod's latest Warning events, the allocation and reservation of its
//! claims, and whatever the runner knows of its drivers (their failed
//! prepare calls, through [`DriverNotes`]).
//!
//! A diagnosis never fails: what cannot be read is said in one line, and
//! every list is cut to a few entries.
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};

/// The Warning events shown, the newest.
pub const EVENTS: usize = 5;
/// Container statuses shown.
pub const CONTAINERS: usize = 8;
/// Claims shown.
pub const CLAIMS: usize = 5;
/// Devices shown per claim.
pub const DEVICES: usize = 4;
/// Lines a [`DriverNotes`] may add.
pub const DRIVER_LINES: usize = 3;
/// A message longer than this many characters is cut.
pub const MESSAGE: usize = 400;
/// How long the API calls of a diagnosis may take together.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What the runner knows about a pod's drivers beyond the API, given the
/// pod's node and the UIDs of its claims: lines such as a hosted or
/// interposed driver's failed prepare calls (at most [`DRIVER_LINES`] are
/// shown).
pub type DriverNotes = Arc<dyn Fn(&str, &[String]) -> Vec<String> + Send + Sync>;

/// A claim of the pod as the diagnosis found it.
#[derive(Debug)]
pub struct ClaimSeen {
    /// The pod's name for the claim (`spec.resourceClaims[].name`), or
    /// "extended resources".
    pub pod_claim: String,
    /// The ResourceClaim's name, once there is one.
    pub name: Option<String>,
    /// The object: `Ok(None)` when it does not exist.
    pub claim: Result<Option<ResourceClaim>, String>,
}

/// Reads what the cluster says about pod `name` in `namespace` and says it
/// in a few indented lines after a heading. Takes at most [`TIMEOUT`].
pub async fn diagnose_pod(
    client: Client,
    namespace: &str,
    name: &str,
    driver: Option<&DriverNotes>,
) -> String {
    let read = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let pod = match pods.get_opt(name).await {
            Ok(p) => p,
            Err(e) => return format!("{}\n  cannot read the pod: {e}", heading(name)),
        };
        let events: Api<Event> = Api::namespaced(client.clone(), namespace);
        let params = ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={name}"
        ));
        let events = events
            .list(&params)
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string());
        let claims_api: Api<ResourceClaim> = Api::namespaced(client, namespace);
        let mut claims = Vec::new();
        for (pod_claim, claim_name) in pod.as_ref().map(pod_claims).unwrap_or_default() {
            let claim = match &claim_name {
                Some(n) => claims_api.get_opt(n).await.map_err(|e| e.to_string()),
                None => Ok(None),
            };
            claims.push(ClaimSeen {
                pod_claim,
                name: claim_name,
                claim,
            });
        }
        let node = pod
            .as_ref()
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.node_name.clone());
        let notes = match (driver, node) {
            (Some(notes), Some(node)) => {
                let uids: Vec<String> = claims
                    .iter()
                    .filter_map(|c| c.claim.as_ref().ok()?.as_ref()?.metadata.uid.clone())
                    .collect();
                notes(&node, &uids)
            }
            _ => Vec::new(),
        };
        format_diagnosis(
            name,
            pod.as_ref(),
            events.as_deref().map_err(String::as_str),
            &claims,
            &notes,
        )
    };
    tokio::time::timeout(TIMEOUT, read)
        .await
        .unwrap_or_else(|_| {
            format!(
                "{}\n  the API server did not answer within {TIMEOUT:?}",
                heading(name)
            )
        })
}

fn heading(pod: &str) -> String {
    format!("diagnosis of pod {pod}:")
}

/// The pod's claims: (its name for the claim, the ResourceClaim's name once
/// known), the claim for extended resources last.
pub fn pod_claims(pod: &Pod) -> Vec<(String, Option<String>)> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out: Vec<(String, Option<String>)> = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let generated = statuses
                .into_iter()
                .flatten()
                .find(|s| s.name == c.name)
                .and_then(|s| s.resource_claim_name.clone());
            (c.name.clone(), c.resource_claim_name.clone().or(generated))
        })
        .collect();
    if let Some(s) = pod
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.as_ref())
    {
        out.push((
            "extended resources".to_owned(),
            Some(s.resource_claim_name.clone()),
        ));
    }
    out
}

/// The diagnosis as it is shown: a heading naming the pod, then one
/// indented line per container, Warning event, claim and driver note, each
/// list cut to its bound with how many were left out.
pub fn format_diagnosis(
    name: &str,
    pod: Option<&Pod>,
    events: Result<&[Event], &str>,
    claims: &[ClaimSeen],
    driver: &[String],
) -> String {
    let mut out = heading(name);
    let Some(pod) = pod else {
        out.push_str("\n  the pod does not exist");
        return out;
    };
    containers(&mut out, pod);
    warnings(&mut out, pod, events);
    for c in claims.iter().take(CLAIMS) {
        let _ = write!(out, "\n  {}", claim_line(c));
    }
    more(&mut out, claims.len(), CLAIMS, "claims");
    for line in driver.iter().take(DRIVER_LINES) {
        let _ = write!(out, "\n  {}", cut(line));
    }
    more(&mut out, driver.len(), DRIVER_LINES, "driver notes");
    out
}

fn more(out: &mut String, len: usize, shown: usize, what: &str) {
    if len > shown {
        let _ = write!(out, "\n  ... {} more {what}", len - shown);
    }
}

/// `text` cut to [`MESSAGE`] characters, on one line.
fn cut(text: &str) -> String {
    let one_line = text.replace('\n', " ");
    match one_line.char_indices().nth(MESSAGE) {
        Some((at, _)) => format!("{}...", &one_line[..at]),
        None => one_line,
    }
}

fn containers(out: &mut String, pod: &Pod) {
    let status = pod.status.as_ref();
    let listed: Vec<(&str, &ContainerStatus)> = [
        (
            "init container",
            status.and_then(|s| s.init_container_statuses.as_ref()),
        ),
        (
            "container",
            status.and_then(|s| s.container_statuses.as_ref()),
        ),
    ]
    .into_iter()
    .flat_map(|(kind, list)| list.into_iter().flatten().map(move |c| (kind, c)))
    .collect();
    if listed.is_empty() {
        out.push_str("\n  no container status yet");
        return;
    }
    for (kind, c) in listed.iter().take(CONTAINERS) {
        let _ = write!(out, "\n  {kind} {}: {}", c.name, container_state(c));
    }
    more(out, listed.len(), CONTAINERS, "containers");
}

fn container_state(c: &ContainerStatus) -> String {
    let with_message = |reason: Option<&String>, message: Option<&String>| {
        let mut s = reason.cloned().unwrap_or_default();
        if let Some(m) = message.filter(|m| !m.is_empty()) {
            let _ = write!(s, "{}{}", if s.is_empty() { "" } else { ": " }, cut(m));
        }
        s
    };
    let terminated = |t: &k8s_openapi::api::core::v1::ContainerStateTerminated| {
        format!(
            "terminated with exit code {} {}",
            t.exit_code,
            with_message(t.reason.as_ref(), t.message.as_ref())
        )
        .trim_end()
        .to_owned()
    };
    let state = c.state.clone().unwrap_or_default();
    let mut s = match (&state.waiting, &state.terminated, &state.running) {
        (Some(w), _, _) => format!(
            "waiting {}",
            with_message(w.reason.as_ref(), w.message.as_ref())
        )
        .trim_end()
        .to_owned(),
        (_, Some(t), _) => terminated(t),
        (_, _, Some(_)) => format!("running, {}", if c.ready { "ready" } else { "not ready" }),
        _ => "no state".to_owned(),
    };
    if let Some(t) = c.last_state.as_ref().and_then(|l| l.terminated.as_ref()) {
        let _ = write!(
            s,
            " (restarted {} times; last {})",
            c.restart_count,
            terminated(t)
        );
    }
    s
}

/// When an event last happened, as well as it says.
fn event_time(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or(e.last_timestamp.as_ref().map(|t| t.0))
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.first_timestamp.as_ref().map(|t| t.0))
        .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn warnings(out: &mut String, pod: &Pod, events: Result<&[Event], &str>) {
    let events = match events {
        Ok(events) => events,
        Err(e) => {
            let _ = write!(out, "\n  cannot read the pod's events: {}", cut(e));
            return;
        }
    };
    let uid = pod.metadata.uid.as_deref();
    let mut warnings: Vec<&Event> = events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        // Events of an earlier pod of the same name are not this pod's.
        .filter(|e| match (uid, e.involved_object.uid.as_deref()) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        })
        .collect();
    if warnings.is_empty() {
        out.push_str("\n  no Warning events");
        return;
    }
    warnings.sort_by_key(|e| event_time(e));
    let skipped = warnings.len().saturating_sub(EVENTS);
    if skipped > 0 {
        let _ = write!(out, "\n  ... {skipped} earlier Warning events");
    }
    for e in &warnings[skipped..] {
        let count = e
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(e.count)
            .unwrap_or(1);
        let source = e
            .source
            .as_ref()
            .and_then(|s| s.component.clone().map(|c| (c, s.host.clone())))
            .or(e
                .reporting_component
                .clone()
                .filter(|c| !c.is_empty())
                .map(|c| (c, e.reporting_instance.clone())))
            .map(
                |(c, host)| match host.filter(|h| !h.is_empty() && *h != c) {
                    Some(h) => format!("{c} on {h}"),
                    None => c,
                },
            )
            .unwrap_or_else(|| "unknown source".to_owned());
        let when = event_time(e)
            .map(|t| format!(", last at {}", t.strftime("%H:%M:%SZ")))
            .unwrap_or_default();
        let _ = write!(
            out,
            "\n  event Warning {} ({count}x from {source}{when}): {}",
            e.reason.as_deref().unwrap_or(""),
            cut(e.message.as_deref().unwrap_or(""))
        );
    }
}

fn claim_line(c: &ClaimSeen) -> String {
    let Some(name) = &c.name else {
        return format!("claim {}: not generated yet", c.pod_claim);
    };
    let label = if c.pod_claim == *name {
        format!("claim {name}")
    } else {
        format!("claim {name} ({})", c.pod_claim)
    };
    let claim = match &c.claim {
        Err(e) => return format!("{label}: cannot read it: {}", cut(e)),
        Ok(None) => return format!("{label}: does not exist"),
        Ok(Some(claim)) => claim,
    };
    let status = claim.status.as_ref();
    let mut s = label;
    match status.and_then(|s| s.allocation.as_ref()) {
        None => s.push_str(": not allocated"),
        Some(a) => {
            s.push_str(": allocated");
            let nodes: Vec<&str> = a
                .node_selector
                .iter()
                .flat_map(|n| &n.node_selector_terms)
                .flat_map(|t| t.match_fields.iter().flatten())
                .filter(|f| f.key == "metadata.name")
                .flat_map(|f| f.values.iter().flatten())
                .map(String::as_str)
                .collect();
            match (nodes.is_empty(), a.node_selector.is_some()) {
                (false, _) => {
                    let _ = write!(s, " on {}", nodes.join(", "));
                }
                (true, true) => s.push_str(" on the nodes of a selector"),
                (true, false) => s.push_str(" on any node"),
            }
            let results = a
                .devices
                .as_ref()
                .and_then(|d| d.results.as_deref())
                .unwrap_or(&[]);
            let devices: Vec<String> = results
                .iter()
                .take(DEVICES)
                .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
                .collect();
            let _ = write!(
                s,
                " (devices {}{})",
                if devices.is_empty() {
                    "none".to_owned()
                } else {
                    devices.join(", ")
                },
                if results.len() > DEVICES {
                    format!(" and {} more", results.len() - DEVICES)
                } else {
                    String::new()
                }
            );
        }
    }
    let reserved: Vec<String> = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| format!("{}/{}", r.resource, r.name))
        .collect();
    if reserved.is_empty() {
        s.push_str(", reserved for no one");
    } else {
        let _ = write!(s, ", reserved for {}", reserved.join(", "));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        s.push_str(", being deleted");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "tester-1", "uid": "pod-uid"},
            "spec": {
                "nodeName": "node-1",
                "containers": [],
                "resourceClaims": [
                    {"name": "my-inline-claim", "resourceClaimTemplateName": "t"},
                    {"name": "shared", "resourceClaimName": "external-claim"},
                    {"name": "later", "resourceClaimTemplateName": "t"},
                ],
            },
            "status": {
                "phase": "Pending",
                "resourceClaimStatuses": [
                    {"name": "my-inline-claim", "resourceClaimName": "tester-1-my-inline-claim-x"},
                ],
                "initContainerStatuses": [{
                    "name": "init", "image": "i", "imageID": "", "restartCount": 2, "ready": false,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                }],
                "containerStatuses": [{
                    "name": "with-resource", "image": "i", "imageID": "", "restartCount": 0,
                    "ready": false,
                    "state": {"waiting": {
                        "reason": "CreateContainerError",
                        "message": "CDI device injection failed: unresolvable CDI devices x/y=z",
                    }},
                }],
            },
        }))
        .unwrap()
    }

    fn event(reason: &str, kind: &str, at: &str, count: i32, uid: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("tester-1.{reason}")},
            "involvedObject": {"kind": "Pod", "name": "tester-1", "uid": uid},
            "type": kind, "reason": reason, "message": format!("{reason} happened"),
            "count": count, "lastTimestamp": at,
            "source": {"component": "kubelet", "host": "node-1"},
        }))
        .unwrap()
    }

    fn claim(allocated: bool, reserved: bool) -> ResourceClaim {
        let mut status = json!({});
        if allocated {
            status["allocation"] = json!({
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
                "devices": {"results": [
                    {"request": "r", "driver": "d.k8s.io", "pool": "node-1", "device": "dev-0"}]},
            });
        }
        if reserved {
            status["reservedFor"] =
                json!([{"resource": "pods", "name": "tester-1", "uid": "pod-uid"}]);
        }
        serde_json::from_value(json!({
            "metadata": {"name": "c", "uid": "claim-uid"},
            "spec": {},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_diagnosis_says_containers_warnings_claims_and_driver_notes() {
        let p = pod();
        assert_eq!(
            pod_claims(&p),
            [
                (
                    "my-inline-claim".to_owned(),
                    Some("tester-1-my-inline-claim-x".to_owned())
                ),
                ("shared".to_owned(), Some("external-claim".to_owned())),
                ("later".to_owned(), None),
            ]
        );
        // Seven Warning events (newest first as listed), one Normal, one of
        // an earlier pod of the same name.
        let mut events: Vec<Event> = (0..7)
            .rev()
            .map(|i| {
                event(
                    &format!("W{i}"),
                    "Warning",
                    &format!("2026-12-06T12:00:0{i}Z"),
                    i + 1,
                    "pod-uid",
                )
            })
            .collect();
        events.push(event(
            "Scheduled",
            "Normal",
            "2026-12-06T12:00:09Z",
            1,
            "pod-uid",
        ));
        events.push(event(
            "Old",
            "Warning",
            "2026-12-06T12:00:09Z",
            1,
            "old-uid",
        ));
        let claims = [
            ClaimSeen {
                pod_claim: "my-inline-claim".into(),
                name: Some("tester-1-my-inline-claim-x".into()),
                claim: Ok(Some(claim(true, true))),
            },
            ClaimSeen {
                pod_claim: "shared".into(),
                name: Some("external-claim".into()),
                claim: Ok(None),
            },
            ClaimSeen {
                pod_claim: "later".into(),
                name: None,
                claim: Ok(None),
            },
        ];
        let driver =
            ["driver d.k8s.io on node-1: NodePrepareResources error: injected error".to_owned()];
        let text = format_diagnosis("tester-1", Some(&p), Ok(&events), &claims, &driver);
        assert_eq!(
            text,
            "diagnosis of pod tester-1:\n  \
             init container init: waiting CrashLoopBackOff: back-off 20s (restarted 2 times; \
             last terminated with exit code 1 Error)\n  \
             container with-resource: waiting CreateContainerError: CDI device injection failed: \
             unresolvable CDI devices x/y=z\n  \
             ... 2 earlier Warning events\n  \
             event Warning W2 (3x from kubelet on node-1, last at 12:00:02Z): W2 happened\n  \
             event Warning W3 (4x from kubelet on node-1, last at 12:00:03Z): W3 happened\n  \
             event Warning W4 (5x from kubelet on node-1, last at 12:00:04Z): W4 happened\n  \
             event Warning W5 (6x from kubelet on node-1, last at 12:00:05Z): W5 happened\n  \
             event Warning W6 (7x from kubelet on node-1, last at 12:00:06Z): W6 happened\n  \
             claim tester-1-my-inline-claim-x (my-inline-claim): allocated on node-1 \
             (devices d.k8s.io/node-1/dev-0), reserved for pods/tester-1\n  \
             claim external-claim (shared): does not exist\n  \
             claim later: not generated yet\n  \
             driver d.k8s.io on node-1: NodePrepareResources error: injected error"
        );
    }

    #[test]
    fn what_cannot_be_read_is_one_line_and_long_lists_and_messages_are_cut() {
        let p = pod();
        let unallocated = ClaimSeen {
            pod_claim: "c".into(),
            name: Some("c".into()),
            claim: Ok(Some(claim(false, false))),
        };
        let text = format_diagnosis(
            "tester-1",
            Some(&p),
            Err("events is forbidden"),
            &[unallocated],
            &["x".repeat(MESSAGE + 10), "b".into(), "c".into(), "d".into()],
        );
        assert!(
            text.contains("\n  cannot read the pod's events: events is forbidden\n"),
            "{text}"
        );
        assert!(
            text.contains("\n  claim c: not allocated, reserved for no one\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n  {}...\n", "x".repeat(MESSAGE))),
            "{text}"
        );
        assert!(text.ends_with("\n  c\n  ... 1 more driver notes"), "{text}");
        assert_eq!(
            format_diagnosis("gone", None, Ok(&[]), &[], &[]),
            "diagnosis of pod gone:\n  the pod does not exist"
        );
        // A pod the scheduler has not placed has no statuses and no events yet.
        let bare: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert_eq!(
            format_diagnosis("p", Some(&bare), Ok(&[]), &[], &[]),
            "diagnosis of pod p:\n  no container status yet\n  no Warning events"
        );
    }
}
