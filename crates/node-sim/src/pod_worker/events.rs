//! What the kubelet tells of a pod besides its status: container changes
//! journaled and reported as events, aggregated as the kubelet's recorder
//! aggregates them, so that scenarios can read the same events (and
//! counts) a real node writes.
use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::{debug, info, warn};

use super::PodWorker;
use crate::containers::Change;
use crate::journal::NodeEventKind;

/// `(type, reason, message, fieldPath)` of an event.
pub(super) type EventKey = (String, String, String, String);

/// `spec.containers{<name>}` or `spec.initContainers{<name>}`: the part of
/// the pod a container event is about.
pub(super) fn field_path(pod: &Pod, container: &str) -> String {
    let init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.name == container);
    if init {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

impl PodWorker {
    /// Records container changes and reports them as the kubelet does
    /// (events, then status), unless the pod just finished: then the status
    /// waits until its claims are unprepared.
    pub(super) async fn apply_changes(&mut self, pod: &Pod, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let image = |name: &str| {
            let spec = pod.spec.as_ref();
            spec.into_iter()
                .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
                .find(|c| c.name == name)
                .and_then(|c| c.image.clone())
                .unwrap_or_default()
        };
        let pulled = |name: &str| {
            format!(
                "Container image \"{}\" already present on machine and can be accessed by the pod",
                image(name)
            )
        };
        for c in &changes {
            match c {
                Change::Started {
                    container,
                    restart_count,
                } => {
                    info!(pod = %self.key(), container, restart_count, "container started");
                    self.ctx.journal.record(NodeEventKind::ContainerStarted {
                        pod: self.key(),
                        container: container.clone(),
                        restart_count: *restart_count,
                    });
                    let at = field_path(pod, container);
                    self.event(pod, &at, "Normal", "Pulled", pulled(container))
                        .await;
                    self.event(pod, &at, "Normal", "Created", "Container created".into())
                        .await;
                    self.event(pod, &at, "Normal", "Started", "Container started".into())
                        .await;
                }
                Change::Exited {
                    container,
                    exit_code,
                } => {
                    info!(pod = %self.key(), container, exit_code, "container exited");
                    self.ctx.journal.record(NodeEventKind::ContainerExited {
                        pod: self.key(),
                        container: container.clone(),
                        exit_code: *exit_code,
                    });
                }
                Change::CreateFailed { container, error } => {
                    // Expected in scenarios about broken CDI specs; the
                    // journal has the details.
                    info!(pod = %self.key(), container, error = %error.detail, "creating container failed");
                    self.ctx
                        .journal
                        .record(NodeEventKind::ContainerCreateFailed {
                            pod: self.key(),
                            container: container.clone(),
                            error: error.detail.clone(),
                        });
                    let at = field_path(pod, container);
                    self.event(pod, &at, "Normal", "Pulled", pulled(container))
                        .await;
                    let message = format!("Error: {}", error.message);
                    self.event(pod, &at, "Warning", "Failed", message).await;
                }
                Change::BackOff { container, delay } => {
                    debug!(pod = %self.key(), container, ?delay, "container waits before restarting");
                    let at = field_path(pod, container);
                    let message = format!(
                        "Back-off restarting failed container {container} in pod {}",
                        self.pod_ref()
                    );
                    self.event(pod, &at, "Warning", "BackOff", message).await;
                }
            }
        }
        if let Some(rt) = &self.runtime {
            let envs: HashMap<_, _> = rt.envs().into_iter().collect();
            self.ctx
                .envs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    (self.ns.clone(), self.name.clone()),
                    (self.uid.clone(), envs),
                );
            if rt.finished().is_some() {
                return;
            }
        }
        self.write_status(pod).await;
    }

    /// Writes an event about the pod (or, with `field_path`, one of its
    /// containers), aggregated like the kubelet's recorder does: a repeat of
    /// an earlier event bumps that event's count.
    pub(super) async fn event(
        &mut self,
        pod: &Pod,
        field_path: &str,
        type_: &str,
        reason: &str,
        message: String,
    ) {
        let api: Api<Event> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let now = Time(jiff::Timestamp::now());
        let key: EventKey = (
            type_.to_owned(),
            reason.to_owned(),
            message.clone(),
            field_path.to_owned(),
        );
        if let Some((name, count)) = self.events.get_mut(&key) {
            *count += 1;
            let patch = json!({"count": *count, "lastTimestamp": now});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                Err(e) => debug!(error = %e, "updating event failed, creating a new one"),
            }
        }
        let name = format!("{}.{:x}", self.name, jiff::Timestamp::now().as_nanosecond());
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.ns.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(self.name.clone()),
                namespace: Some(self.ns.clone()),
                uid: Some(self.uid.clone()),
                resource_version: pod.resource_version(),
                field_path: Some(field_path.to_owned()).filter(|p| !p.is_empty()),
            },
            reason: Some(reason.into()),
            message: Some(message),
            type_: Some(type_.into()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some("kubelet".into()),
                host: Some(self.ctx.node.clone()),
            }),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some(self.ctx.node.clone()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ev).await {
            Ok(_) => {
                self.events.insert(key, (name, 1));
            }
            Err(e) => warn!(pod = %self.key(), error = %e, "writing event failed"),
        }
    }
}
