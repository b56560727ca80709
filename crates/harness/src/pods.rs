//! A scenario's pods as the steps wait for them and act on them: in a
//! state, unschedulable for the scheduler's own reason, staying as they
//! are for a while, restarted, with an event, an init container done, the
//! extended resources mapped to requests; deleted, and their claims marked
//! as not needed. Each wait is a watch with a deadline that says what it
//! last saw; its condition is a named function of what it sees, beside it.
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::watcher;

use dra_e2e_kube::wait::{self, Check, PodState, SteadyPodState, WaitError, describe_pod};

#[derive(Debug, thiserror::Error)]
pub enum PodError {
    #[error("deleting pod {name}")]
    Delete {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the claim statuses of pod {name}")]
    ClaimStatuses {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Waits until pod `name` is in `state` ([`wait::pod_in_state`]).
pub async fn until(
    pods: &Api<Pod>,
    name: &str,
    state: PodState,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("pod {name} to be {state:?}").to_lowercase();
    wait::pod(pods, name, &what, timeout, |p| {
        wait::pod_in_state(name, state, p)
    })
    .await
}

/// The reason of the pod's PodScheduled condition.
fn scheduled_reason(p: Option<&Pod>) -> Option<&str> {
    p?.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?
        .reason
        .as_deref()
}

/// Unschedulable as upstream means it: the scheduler tried and found no
/// node (PodScheduled=False, reason `Unschedulable`); a pod merely not
/// scheduled yet, or held back by scheduling gates, is not. Being
/// scheduled fails.
pub fn unschedulable_by_scheduler(name: &str, p: Option<&Pod>) -> Check<()> {
    match wait::pod_in_state(name, PodState::Unschedulable, p) {
        Check::Done(()) => match scheduled_reason(p) {
            Some("Unschedulable") => Check::Done(()),
            other => Check::Pending(format!(
                "PodScheduled=False with reason {:?}; {}",
                other.unwrap_or(""),
                describe_pod(p)
            )),
        },
        other => other,
    }
}

/// Waits until pod `name` is [`unschedulable_by_scheduler`].
pub async fn unschedulable(
    pods: &Api<Pod>,
    name: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    wait::pod(
        pods,
        name,
        &format!("pod {name} to be unschedulable (PodScheduled=False, reason Unschedulable)"),
        timeout,
        |p| unschedulable_by_scheduler(name, p),
    )
    .await
}

/// Waits until pod `name` is unschedulable with a scheduler message
/// containing `text` ([`wait::pod_unschedulable_with`]).
pub async fn unschedulable_with(
    pods: &Api<Pod>,
    name: &str,
    text: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("pod {name} to be unschedulable with a message containing {text:?}");
    wait::pod(pods, name, &what, timeout, |p| {
        wait::pod_unschedulable_with(name, text, p)
    })
    .await
}

/// How a message names a steady state.
fn steady_word(state: SteadyPodState) -> &'static str {
    match state {
        SteadyPodState::Pending => "Pending",
        SteadyPodState::Running => "Running",
        SteadyPodState::Terminating => "terminating",
    }
}

/// Checks that pod `name` stays in `state` for `duration` (upstream's
/// `Consistently`), reading it every 200 ms; a failure says what the
/// cluster says about the pod.
pub async fn stays(
    pods: &Api<Pod>,
    name: &str,
    state: SteadyPodState,
    duration: Duration,
) -> Result<(), WaitError> {
    let word = steady_word(state);
    let held = wait::consistently(
        &format!("pod {name} to stay {word}"),
        duration,
        Duration::from_millis(200),
        || async {
            match pods.get_opt(name).await {
                Ok(Some(p)) if state.holds(&p) => Ok(()),
                Ok(p) => Err(format!(
                    "expected pod {name} to stay {word}, observed {}",
                    describe_pod(p.as_ref())
                )),
                Err(e) => Err(format!("reading pod {name}: {e}")),
            }
        },
    )
    .await;
    wait::diagnosed(pods, name, held).await
}

/// Done once a container of the pod restarted at least `n` times.
pub fn restarted_at_least(n: i32, p: Option<&Pod>) -> Check<()> {
    let count = p
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0);
    if count >= n {
        Check::Done(())
    } else {
        Check::Pending(format!("restartCount={count}; {}", describe_pod(p)))
    }
}

/// Waits until a container of pod `name` restarted at least `n` times.
pub async fn restarted(
    pods: &Api<Pod>,
    name: &str,
    n: i32,
    timeout: Duration,
) -> Result<(), WaitError> {
    wait::pod(
        pods,
        name,
        &format!("pod {name} to restart {n} times"),
        timeout,
        |p| restarted_at_least(n, p),
    )
    .await
}

/// Done once one of `events` has `reason` and a message containing
/// `text`; pending with every event's reason and message.
pub fn has_event(events: &[Event], reason: &str, text: &str) -> Check<()> {
    if events.iter().any(|e| {
        e.reason.as_deref() == Some(reason)
            && e.message.as_deref().is_some_and(|m| m.contains(text))
    }) {
        Check::Done(())
    } else {
        Check::Pending(
            events
                .iter()
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.reason.clone().unwrap_or_default(),
                        e.message.clone().unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join(" | "),
        )
    }
}

/// Watches the events of pod `pod` until one [`has_event`].
pub async fn event(
    events: &Api<Event>,
    pod: &str,
    reason: &str,
    text: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let config = watcher::Config::default().fields(&format!("involvedObject.name={pod}"));
    wait::list(
        events,
        config,
        &format!("a {reason} event on pod {pod} containing {text:?}"),
        timeout,
        |events| has_event(events, reason, text),
    )
    .await
}

/// Waits until init container `container` of pod `pod` completed (or, a
/// sidecar, runs): [`wait::init_container_done`].
pub async fn init_container_completed(
    pods: &Api<Pod>,
    pod: &str,
    container: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    wait::pod(
        pods,
        pod,
        &format!("init container {container} of pod {pod} to complete"),
        timeout,
        |p| wait::init_container_done(p, pod, container),
    )
    .await
}

/// (container, resource, request) of each request mapping of the pod's
/// extendedResourceClaimStatus, in its order; `None` without that status.
fn request_mappings(p: Option<&Pod>) -> Option<Vec<(String, String, String)>> {
    let status = p?
        .status
        .as_ref()?
        .extended_resource_claim_status
        .as_ref()?;
    Some(
        status
            .request_mappings
            .iter()
            .map(|m| {
                (
                    m.container_name.clone(),
                    m.resource_name.clone(),
                    m.request_name.clone(),
                )
            })
            .collect(),
    )
}

/// Done once the pod's extendedResourceClaimStatus maps exactly `want`
/// (container, resource, request), `in_order` or as a set (then `want`
/// must be sorted).
pub fn maps_requests(
    p: Option<&Pod>,
    want: &[(String, String, String)],
    in_order: bool,
) -> Check<()> {
    let Some(mut got) = request_mappings(p) else {
        return Check::Pending("no extendedResourceClaimStatus".into());
    };
    if !in_order {
        got.sort();
    }
    if got == want {
        Check::Done(())
    } else {
        Check::Pending(format!("requestMappings {got:?}"))
    }
}

/// Waits until pod `pod` [`maps_requests`] `want`; sorts `want` unless
/// `in_order`.
pub async fn mapped_requests(
    pods: &Api<Pod>,
    pod: &str,
    mut want: Vec<(String, String, String)>,
    in_order: bool,
    timeout: Duration,
) -> Result<(), WaitError> {
    if !in_order {
        want.sort();
    }
    wait::pod(
        pods,
        pod,
        &format!("pod {pod} to map its extended resources to requests {want:?}"),
        timeout,
        |p| maps_requests(p, &want, in_order),
    )
    .await
}

/// Deletes pod `name`, at once with `force` (grace period 0).
pub async fn delete(pods: &Api<Pod>, name: &str, force: bool) -> Result<(), PodError> {
    let dp = if force {
        DeleteParams::default().grace_period(0)
    } else {
        DeleteParams::default()
    };
    pods.delete(name, &dp)
        .await
        .map(|_| ())
        .map_err(|source| PodError::Delete {
            name: name.to_owned(),
            source,
        })
}

/// The status patch that names each of `claims` in the pod's
/// resourceClaimStatuses without a generated claim: what the kubelet
/// reads as "not needed".
fn claims_not_needed_patch(claims: &[String]) -> serde_json::Value {
    let statuses: Vec<_> = claims
        .iter()
        .map(|c| serde_json::json!({ "name": c }))
        .collect();
    serde_json::json!({ "status": { "resourceClaimStatuses": statuses } })
}

/// Writes pod `name`'s status so that it marks `claims` (its pod claims'
/// names) as not needed.
pub async fn mark_claims_not_needed(
    pods: &Api<Pod>,
    name: &str,
    claims: &[String],
) -> Result<(), PodError> {
    let patch = claims_not_needed_patch(claims);
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| PodError::ClaimStatuses {
            name: name.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": []},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn unschedulable_needs_the_schedulers_reason() {
        let tried = pod(serde_json::json!({"conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable", "message": "no node"}]}));
        let gated = pod(serde_json::json!({"conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "SchedulingGated", "message": ""}]}));
        assert!(matches!(
            unschedulable_by_scheduler("p", Some(&tried)),
            Check::Done(())
        ));
        match unschedulable_by_scheduler("p", Some(&gated)) {
            Check::Pending(s) => assert!(s.contains("\"SchedulingGated\""), "{s}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            unschedulable_by_scheduler("p", None),
            Check::Pending(_)
        ));
        let mut scheduled = tried.clone();
        scheduled.spec.as_mut().unwrap().node_name = Some("n1".into());
        assert!(matches!(
            unschedulable_by_scheduler("p", Some(&scheduled)),
            Check::Fail(_)
        ));
    }

    #[test]
    fn restarts_count_the_most_restarted_container() {
        let p = pod(serde_json::json!({"containerStatuses": [
            {"name": "a", "image": "i", "imageID": "", "ready": true, "restartCount": 1},
            {"name": "b", "image": "i", "imageID": "", "ready": true, "restartCount": 3},
        ]}));
        assert!(matches!(restarted_at_least(3, Some(&p)), Check::Done(())));
        match restarted_at_least(4, Some(&p)) {
            Check::Pending(s) => assert!(s.starts_with("restartCount=3;"), "{s}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(restarted_at_least(1, None), Check::Pending(_)));
    }

    #[test]
    fn an_event_needs_its_reason_and_the_text() {
        let event = |reason: &str, message: &str| -> Event {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "e"},
                "involvedObject": {"name": "p"},
                "reason": reason, "message": message,
            }))
            .unwrap()
        };
        let events = [
            event("Started", "started x"),
            event("Failed", "blocked by uid-1"),
        ];
        assert!(matches!(
            has_event(&events, "Failed", "uid-1"),
            Check::Done(())
        ));
        match has_event(&events, "Failed", "uid-2") {
            Check::Pending(s) => assert_eq!(s, "Started: started x | Failed: blocked by uid-1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn request_mappings_in_order_or_as_a_set() {
        let p = pod(serde_json::json!({"extendedResourceClaimStatus": {
        "resourceClaimName": "c",
        "requestMappings": [
            {"containerName": "b", "resourceName": "r", "requestName": "q1"},
            {"containerName": "a", "resourceName": "r", "requestName": "q0"},
        ]}}));
        let t = |c: &str, q: &str| (c.to_owned(), "r".to_owned(), q.to_owned());
        let sorted = vec![t("a", "q0"), t("b", "q1")];
        let listed = vec![t("b", "q1"), t("a", "q0")];
        assert!(matches!(
            maps_requests(Some(&p), &sorted, false),
            Check::Done(())
        ));
        assert!(matches!(
            maps_requests(Some(&p), &listed, true),
            Check::Done(())
        ));
        assert!(matches!(
            maps_requests(Some(&p), &sorted, true),
            Check::Pending(_)
        ));
        match maps_requests(Some(&pod(serde_json::json!({}))), &sorted, false) {
            Check::Pending(s) => assert_eq!(s, "no extendedResourceClaimStatus"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn claims_not_needed_are_named_without_a_claim() {
        assert_eq!(
            claims_not_needed_patch(&["a".into(), "b".into()]),
            serde_json::json!({"status": {"resourceClaimStatuses": [{"name": "a"}, {"name": "b"}]}})
        );
    }
}
