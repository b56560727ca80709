//! What a failed scenario's namespace held, as text for its artifacts
//! directory: the events in time order, the pods and the claims as YAML.
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, ListParams};

/// The namespace's state, each part as the file it goes into.
#[derive(Debug)]
pub struct NamespaceState {
    /// `events.txt`: one line per event, oldest first.
    pub events: String,
    /// `pods.yaml`.
    pub pods: String,
    /// `claims.yaml`.
    pub claims: String,
}

/// Reading the namespace failed.
#[derive(Debug, thiserror::Error)]
#[error("listing {what} of namespace {namespace}: {source}")]
pub struct ArtifactsError {
    what: &'static str,
    namespace: String,
    #[source]
    source: kube::Error,
}

/// Reads events, pods and claims of `namespace`.
pub async fn namespace_state(
    client: &kube::Client,
    namespace: &str,
) -> Result<NamespaceState, ArtifactsError> {
    let failed = |what| {
        move |source| ArtifactsError {
            what,
            namespace: namespace.to_owned(),
            source,
        }
    };
    let lp = ListParams::default();
    let events = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .map_err(failed("events"))?
        .items;
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .map_err(failed("pods"))?
        .items;
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .map_err(failed("claims"))?
        .items;
    Ok(NamespaceState {
        events: events_text(events),
        pods: yaml_of(&pods),
        claims: yaml_of(&claims),
    })
}

/// Objects as YAML documents, one per object.
pub fn yaml_of<T: serde::Serialize>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| serde_saphyr::to_string(i).unwrap_or_else(|e| format!("# unprintable: {e}\n")))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Events oldest first, a line each: time, type, object, reason, message.
fn events_text(mut events: Vec<Event>) -> String {
    events.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} {}/{} {}: {}",
                e.last_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
                e.type_.as_deref().unwrap_or_default(),
                e.involved_object.kind.as_deref().unwrap_or_default(),
                e.involved_object.name.as_deref().unwrap_or_default(),
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_listed_oldest_first_a_line_each() {
        let event = |at: &str, reason: &str| -> Event {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": reason },
                "involvedObject": { "kind": "Pod", "name": "tester-1" },
                "lastTimestamp": at, "type": "Warning", "reason": reason, "message": "m",
            }))
            .expect("an event")
        };
        let text = events_text(vec![
            event("2026-12-07T10:00:02Z", "Later"),
            event("2026-12-07T10:00:01Z", "Earlier"),
        ]);
        assert_eq!(
            text,
            "2026-12-07T10:00:01Z Warning Pod/tester-1 Earlier: m\n\
             2026-12-07T10:00:02Z Warning Pod/tester-1 Later: m"
        );
    }
}
