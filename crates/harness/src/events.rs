//! A pod's events as a scenario checks them once, as upstream lists them
//! once the pod runs: an event the kubelet recorded before starting the
//! pod has been written by then.
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("listing the events of pod {pod}")]
    List {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("expected no {reason} event on pod {pod}, found {}: {}", messages.len(), messages.join(" | "))]
    Found {
        pod: String,
        reason: String,
        messages: Vec<String>,
    },
}

/// Checks that pod `pod` of `events`' namespace has no event of `reason`.
pub async fn none_of_pod(events: &Api<Event>, pod: &str, reason: &str) -> Result<(), EventsError> {
    let lp = ListParams::default().fields(&format!(
        "involvedObject.name={pod},involvedObject.kind=Pod"
    ));
    let listed = events.list(&lp).await.map_err(|source| EventsError::List {
        pod: pod.to_owned(),
        source,
    })?;
    none_with_reason(&listed.items, pod, reason)
}

/// The check of [`none_of_pod`] over the pod's events.
fn none_with_reason(events: &[Event], pod: &str, reason: &str) -> Result<(), EventsError> {
    let messages: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.message.clone().unwrap_or_default())
        .collect();
    if messages.is_empty() {
        return Ok(());
    }
    Err(EventsError::Found {
        pod: pod.to_owned(),
        reason: reason.to_owned(),
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str, message: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": reason,
            "message": message,
        }))
        .unwrap()
    }

    #[test]
    fn only_events_of_that_reason_are_named() {
        let events = [
            event("Started", "ok"),
            event("FailedPrepareDynamicResources", "boom"),
        ];
        assert!(none_with_reason(&events, "p", "Killing").is_ok());
        let e = none_with_reason(&events, "p", "FailedPrepareDynamicResources").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected no FailedPrepareDynamicResources event on pod p, found 1: boom"
        );
    }
}
