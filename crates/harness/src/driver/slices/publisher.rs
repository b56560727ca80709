//! The publisher that keeps one slice of a pool in place (re-created when
//! someone deletes it, rewritten when someone changes it), as the kubelet
//! plugin helper's ResourceSlice controller does, and the report of fields
//! the API server dropped, since a slice it cannot keep as written must
//! fail its wait at once rather than time out.
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{SliceContent, slot_of};

/// Keeps one slice of a pool in place with the given client until stopped or
/// dropped (a driver dropped without its teardown must not keep
/// publishing).
pub struct Publisher {
    cancel: tokio_util::sync::DropGuard,
    task: JoinHandle<()>,
    refused: tokio::sync::watch::Receiver<Option<String>>,
}

impl Publisher {
    pub fn start(client: kube::Client, desired: ResourceSlice) -> Self {
        let cancel = CancellationToken::new();
        let (refuse, refused) = tokio::sync::watch::channel(None);
        let task = tokio::spawn(publish(client, desired, cancel.clone(), refuse));
        Self {
            cancel: cancel.drop_guard(),
            task,
            refused,
        }
    }

    /// Resolves with what went wrong once the API server refused the slice
    /// as invalid or dropped fields of it: a slice written in a feature file
    /// that can never be published as written, which a wait for it should
    /// report at once. Never resolves otherwise.
    pub async fn refusal(&self) -> String {
        let mut refused = self.refused.clone();
        let message = match refused.wait_for(Option::is_some).await {
            Ok(message) => message.clone(),
            Err(_) => None,
        };
        match message {
            Some(message) => message,
            None => std::future::pending().await,
        }
    }

    pub async fn stop(self) {
        let Self { cancel, task, .. } = self;
        drop(cancel);
        let _ = task.await;
    }
}

async fn publish(
    client: kube::Client,
    desired: ResourceSlice,
    cancel: CancellationToken,
    refuse: tokio::sync::watch::Sender<Option<String>>,
) {
    let spec = desired.spec.clone();
    let pool = spec.pool.name.clone();
    let mut selector = format!("spec.driver={}", spec.driver);
    if let Some(node) = &spec.node_name {
        selector.push_str(&format!(",spec.nodeName={node}"));
    }
    let api: Api<ResourceSlice> = Api::all(client);
    // The watch only says "something changed"; each reconcile lists afresh, so
    // a failed write is simply retried on the next trigger.
    let mut changes = std::pin::pin!(
        watcher::watcher(api.clone(), watcher::Config::default().fields(&selector))
            .default_backoff()
    );
    let want = SliceContent::of_slice(&desired);
    let slot = slot_of(&desired).cloned();
    // What the API server made of the last write: it may default fields or
    // drop those of a disabled feature gate, and a slice that differs from
    // `want` only so must not be rewritten again and again.
    let mut accepted: Option<SliceContent> = None;
    let mut retry = false;
    loop {
        if retry {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        } else {
            tokio::select! {
                _ = cancel.cancelled() => return,
                e = changes.next() => match e {
                    None => return,
                    Some(Err(e)) => {
                        tracing::debug!(%pool, error = %e, "slice watch error");
                        continue;
                    }
                    Some(Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))) => {}
                    Some(Ok(_)) => continue,
                },
            }
        }
        let list = match api.list(&ListParams::default().fields(&selector)).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::debug!(%pool, error = %e, "listing slices failed");
                retry = true;
                continue;
            }
        };
        let existing = list
            .into_iter()
            .find(|s| s.spec.pool.name == pool && slot_of(s) == slot.as_ref());
        let result = match existing {
            None => api.create(&PostParams::default(), &desired).await,
            Some(existing)
                if SliceContent::of_slice(&existing) != want
                    && Some(SliceContent::of_slice(&existing)) != accepted =>
            {
                let mut updated = existing.clone();
                want.write_into(&mut updated);
                updated.spec.pool.generation += 1;
                let name = existing.metadata.name.clone().unwrap_or_default();
                api.replace(&name, &PostParams::default(), &updated).await
            }
            Some(_) => {
                retry = false;
                continue;
            }
        };
        retry = match result {
            Ok(written) => {
                let kept = SliceContent::of_slice(&written);
                if let Some(report) = dropped_report(&want, &kept) {
                    refuse.send_replace(Some(report));
                }
                accepted = Some(kept);
                false
            }
            // Invalid stays invalid: said once, tried again only when the
            // pool's slices change.
            Err(kube::Error::Api(status)) if status.code == 422 => {
                refuse.send_replace(Some(status.message));
                false
            }
            Err(e) => {
                tracing::warn!(%pool, error = %e, "publishing ResourceSlice failed, retrying");
                true
            }
        };
    }
}

/// What the API server's copy `written` of `sent` lacks, said as an
/// error, or `None` when it kept every field (see [`dropped`]).
pub fn dropped_fields(sent: &ResourceSlice, written: &ResourceSlice) -> Option<String> {
    dropped_report(
        &SliceContent::of_slice(sent),
        &SliceContent::of_slice(written),
    )
}

fn dropped_report(want: &SliceContent, kept: &SliceContent) -> Option<String> {
    let lost = dropped(want, kept);
    (!lost.is_empty()).then(|| {
        format!(
            "the API server dropped {} (is the feature gate of these fields on?)",
            lost.join(", ")
        )
    })
}

/// The fields of `want` that the API server's copy `kept` no longer has:
/// fields of a disabled feature gate are dropped without a word, and a
/// slice without them would test nothing. Only presence is compared, as
/// the server may default and normalise what it keeps.
fn dropped(want: &SliceContent, kept: &SliceContent) -> Vec<String> {
    fn fields<T: serde::Serialize>(item: &T) -> Vec<String> {
        match serde_json::to_value(item) {
            Ok(Value::Object(map)) => map
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k)
                .collect(),
            _ => Vec::new(),
        }
    }
    fn compare<T: serde::Serialize>(
        kind: &str,
        want: &[T],
        kept: &[T],
        name: impl Fn(&T) -> &str,
        lost: &mut Vec<String>,
    ) {
        for w in want {
            match kept.iter().find(|k| name(k) == name(w)) {
                None => lost.push(format!("{kind} {}", name(w))),
                Some(k) => {
                    let have = fields(k);
                    lost.extend(
                        fields(w)
                            .into_iter()
                            .filter(|f| !have.contains(f))
                            .map(|f| format!("{f} of {kind} {}", name(w))),
                    );
                }
            }
        }
    }
    let mut lost = Vec::new();
    compare(
        "device",
        &want.devices,
        &kept.devices,
        |d| &d.name,
        &mut lost,
    );
    compare(
        "counter set",
        &want.shared_counters,
        &kept.shared_counters,
        |c| &c.name,
        &mut lost,
    );
    if want.partition_type_attribute.is_some() && kept.partition_type_attribute.is_none() {
        lost.push("partitionTypeAttribute".to_owned());
    }
    lost
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_the_server_dropped_are_named_and_normalised_ones_are_not() {
        let want: SliceContent = serde_json::from_value(json!({
            "devices": [
                { "name": "a", "nodeAllocatableResources": { "cpu": { "mapping": { "deviceMultiplier": "1" } } } },
                { "name": "b", "attributes": { "x": { "int": 1 } } },
                { "name": "gone" },
            ],
            "sharedCounters": [ { "name": "set", "counters": { "c": { "value": "1" } } } ],
        }))
        .expect("valid");
        let kept: SliceContent = serde_json::from_value(json!({
            "devices": [
                { "name": "a" },
                { "name": "b", "attributes": { "x": { "int": 1 } }, "allowMultipleAllocations": false },
            ],
            "sharedCounters": [ { "name": "set", "counters": { "c": { "value": "1000m" } } } ],
        }))
        .expect("valid");
        assert_eq!(
            dropped(&want, &kept),
            ["nodeAllocatableResources of device a", "device gone"]
        );
        assert!(dropped(&want, &want).is_empty());
    }
}
