//! The pod's status as the kubelet writes it: phase, conditions, container
//! statuses and the devices' health, written whole on every change, since
//! the kubelet's status is its own and a stale field would outlive its
//! cause.
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tracing::warn;

use super::plan::volume_mount_statuses;
use super::{PodWorker, ResourcesStatus};
use crate::health::container_resources_status;

impl PodWorker {
    /// The health of the devices prepared for each regular container's
    /// claims (the kubelet reports none for init containers). Once the
    /// claims are unprepared, the last value stands, as the kubelet's
    /// tombstoned claims keep it for a finished pod.
    pub(super) fn resources_status(&mut self, pod: &Pod) -> ResourcesStatus {
        let mut out = ResourcesStatus::new();
        let Some(health) = &self.ctx.health else {
            return out;
        };
        let devices = self.ctx.dra.claim_devices(pod);
        if devices.is_empty() {
            return self.tombstone.clone();
        }
        let snapshot = health.snapshot();
        let Some(spec) = pod.spec.as_ref() else {
            return out;
        };
        for c in &spec.containers {
            let references = c
                .resources
                .as_ref()
                .and_then(|r| r.claims.as_deref())
                .unwrap_or_default();
            let status = container_resources_status(references, &devices, &snapshot);
            if !status.is_empty() {
                out.insert(c.name.clone(), status);
            }
        }
        self.tombstone = out.clone();
        out
    }

    pub(super) async fn write_status(&mut self, pod: &Pod) {
        let resources = self.resources_status(pod);
        let patch = self.status_patch(pod, &resources);
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        match api
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            // Only what the API server has counts as written, so the next
            // health change retries a failed health update.
            Ok(_) => self.written_health = resources,
            // The next change writes the whole status again.
            Err(e) => warn!(pod = %self.key(), error = %e, "writing pod status failed"),
        }
    }

    /// The pod status as the kubelet generates it, as a strategic merge
    /// patch.
    fn status_patch(&self, pod: &Pod, resources: &ResourcesStatus) -> serde_json::Value {
        let rt = self.runtime.as_ref();
        let spec = pod.spec.clone().unwrap_or_default();
        let generation = pod.metadata.generation;
        let mut status = json!({
            "phase": rt.map_or("Pending", |r| r.phase()),
            "hostIP": self.ctx.host_ip,
            "hostIPs": [{"ip": self.ctx.host_ip}],
            "conditions": self.conditions(pod, &spec),
        });
        if let Some(g) = generation {
            status["observedGeneration"] = json!(g);
        }
        if let Some(ip) = &self.pod_ip {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        if let Some(t) = self.started {
            status["startTime"] = json!(Time(t));
        }
        let (init, main) = match rt {
            Some(rt) => {
                let (init, main) = rt.statuses();
                (json!(init), json!(main))
            }
            None => waiting_container_statuses(&spec),
        };
        status["initContainerStatuses"] = init;
        status["containerStatuses"] = main;
        add_resources_status(&mut status, resources);
        json!({ "status": status })
    }

    /// The kubelet's conditions, written whole (a field they no longer have
    /// is set to null, or the API server would keep a stale reason), in the
    /// kubelet's order; every condition, the scheduler's too, gets the pod
    /// generation as `observedGeneration`.
    fn conditions(&self, pod: &Pod, spec: &PodSpec) -> Vec<serde_json::Value> {
        let generation = pod.metadata.generation;
        let existing = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let now = jiff::Timestamp::now();
        let cond = |ty: &str, (ok, reason, message): Cond| {
            let status = if ok { "True" } else { "False" };
            // Keep the transition time while the status stays the same.
            let since = existing
                .iter()
                .find(|c| c.type_ == ty && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            let mut c = json!({
                "type": ty, "status": status, "lastTransitionTime": since,
                "reason": reason, "message": message,
            });
            if let Some(g) = generation {
                c["observedGeneration"] = json!(g);
            }
            c
        };
        const OWN: [&str; 4] = [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
        ];
        let containers_ready = self.containers_ready(spec);
        let mut conditions = vec![
            cond(OWN[0], self.sandbox_ready()),
            cond(OWN[1], self.initialized(spec)),
            cond(OWN[2], containers_ready.clone()),
            cond(OWN[3], containers_ready),
        ];
        if let Some(g) = generation {
            for c in existing.iter().filter(|c| !OWN.contains(&c.type_.as_str())) {
                conditions.push(json!({"type": c.type_, "observedGeneration": g}));
            }
        }
        conditions
    }

    /// `PodReadyToStartContainers`.
    fn sandbox_ready(&self) -> Cond {
        let rt = self.runtime.as_ref();
        match (rt, rt.and_then(|r| r.finished())) {
            (Some(_), None) => (true, None, None),
            (Some(_), Some(_)) => (
                false,
                Some("PodSandboxNotReady"),
                Some("pod sandbox is not ready".into()),
            ),
            (None, _) => (
                false,
                Some("PodSandboxNotReady"),
                Some("no pod sandbox exists".into()),
            ),
        }
    }

    /// `Initialized`.
    fn initialized(&self, spec: &PodSpec) -> Cond {
        let rt = self.runtime.as_ref();
        let init_specs = spec.init_containers.as_deref().unwrap_or_default();
        let incomplete = |names: Vec<String>| -> Cond {
            (
                false,
                Some("ContainersNotInitialized"),
                Some(containers_message("incomplete", &names)),
            )
        };
        match rt {
            _ if rt.and_then(|r| r.finished()) == Some(true) => (true, Some("PodCompleted"), None),
            Some(rt) if rt.initialized() => (true, None, None),
            Some(rt) => incomplete(rt.init_incomplete()),
            None if init_specs.is_empty() => (true, None, None),
            None => incomplete(init_specs.iter().map(|c| c.name.clone()).collect()),
        }
    }

    /// `ContainersReady`, and `Ready` alike.
    fn containers_ready(&self, spec: &PodSpec) -> Cond {
        let rt = self.runtime.as_ref();
        match rt.and_then(|r| r.finished()) {
            Some(true) => return (false, Some("PodCompleted"), None),
            Some(false) => return (false, Some("PodFailed"), None),
            None => {}
        }
        let unready = match rt {
            Some(rt) => rt.unready(),
            None => spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .chain(&spec.containers)
                .map(|c| c.name.clone())
                .collect(),
        };
        if unready.is_empty() {
            (true, None, None)
        } else {
            (
                false,
                Some("ContainersNotReady"),
                Some(containers_message("unready", &unready)),
            )
        }
    }
}

/// `(status, reason, message)` of a kubelet condition.
type Cond = (bool, Option<&'static str>, Option<String>);

/// `containers with <what> status: [a b]`, as the kubelet lists containers
/// in condition messages.
fn containers_message(what: &str, names: &[String]) -> String {
    format!("containers with {what} status: [{}]", names.join(" "))
}

/// `initContainerStatuses` and `containerStatuses` of a pod whose
/// containers were not created yet: all waiting, the regular ones for the
/// init containers if there are any.
fn waiting_container_statuses(spec: &PodSpec) -> (serde_json::Value, serde_json::Value) {
    let waiting = |c: &Container, reason: &str| {
        let mut s = json!({
            "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
            "ready": false, "started": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason}},
        });
        let mounts = volume_mount_statuses(c);
        if !mounts.is_empty() {
            s["volumeMounts"] = json!(mounts);
        }
        s
    };
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| waiting(c, "PodInitializing"))
        .collect();
    let main_reason = if init.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let main: Vec<_> = spec
        .containers
        .iter()
        .map(|c| waiting(c, main_reason))
        .collect();
    (json!(init), json!(main))
}

/// Puts each container's `allocatedResourcesStatus` into `status`. The
/// lists are written whole (they have no merge key), so a container without
/// health entries simply has none any more.
fn add_resources_status(status: &mut serde_json::Value, resources: &ResourcesStatus) {
    for list in ["initContainerStatuses", "containerStatuses"] {
        let Some(entries) = status[list].as_array_mut() else {
            continue;
        };
        for entry in entries {
            let name = entry["name"].as_str().unwrap_or_default();
            if let Some(r) = resources.get(name) {
                entry["allocatedResourcesStatus"] = json!(r);
            }
        }
    }
}
