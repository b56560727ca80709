//! A pod its controller makes again elsewhere once its node is lost.
//!
//! Why: the other half of a node loss. A pod with a short toleration of
//! the `node.kubernetes.io/unreachable` taint is evicted by the taint
//! eviction controller once the node is reported unreachable; the
//! eviction is a deletion the lost node's kubelet cannot carry out, so the
//! pod stays, terminating, and its claim stays allocated and reserved on
//! the lost node. Its ReplicaSet counts it gone all the same and makes a
//! new pod, which needs a claim of its own, allocated and prepared on
//! another node. Upstream's DRA suite has no such test; this is what DRA
//! must do when a workload, not a lone pod, loses its node.
//!
//! The ReplicaSet adopts a pod the scenario made ([`adopting`]): the
//! scenario places that first pod with a node selector on the node it
//! will cut off (a node of its own), and the ReplicaSet's template is the
//! pod's spec without that placement, so the pod it makes in its place
//! goes wherever the scheduler finds a device. The first pod keeps its
//! name, so every step about a named pod and its claim works on it.
//!
//! The waits watch the pods (a controller's pods have generated names, so
//! the conditions judge the set: [`dra_e2e_kube::controller_pods`]) with
//! deadlines, and say what they last saw.
use std::time::Duration;

use dra_e2e_kube::controller_pods::{
    allocated_for_pod_on, controlled_by, evicted_by_taint, running_on,
};
use dra_e2e_kube::node_ready::OWN_NODE_TAINT;
use dra_e2e_kube::wait::{self, Check, WaitError};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;

/// The label a ReplicaSet made here selects its pods by; its value is the
/// ReplicaSet's name.
pub const LABEL: &str = "dra-e2e.k8s.io/replica-set";

/// How long the ReplicaSet controller may take to adopt a pod.
pub const ADOPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a replacement may take to be made, scheduled, prepared and
/// run (upstream's PodStart timeout).
pub const RUNNING_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the taint eviction controller may take to evict a pod from a
/// node reported unreachable: the pod's toleration seconds (a few, in the
/// scenarios) and room; a pod with the API server's default toleration of
/// 300 s is not evicted within it, and the wait says so.
pub const EVICTION_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum ReplacementError {
    #[error("{0}")]
    Api(String),
    #[error("pod {0} has no spec to make a ReplicaSet's template of")]
    NoSpec(String),
    #[error(transparent)]
    Wait(#[from] WaitError),
}

fn api(what: String) -> impl FnOnce(kube::Error) -> ReplacementError {
    move |e| ReplacementError::Api(format!("{what}: {e}"))
}

/// A ReplicaSet `name` of 1 pod that adopts `pod`: it selects the pod by
/// [`LABEL`], and its template is the pod's spec and claims without where
/// the pod was placed (its node and node selector), so a pod made in its
/// place goes wherever the scheduler finds room. The template's pods
/// restart always (the API server takes no other policy for a
/// ReplicaSet), and the own-node toleration is left to the scenario
/// builder, which adds it to every workload of a scenario with nodes of its
/// own.
pub fn replica_set_for(pod: &Pod, name: &str) -> Result<ReplicaSet, ReplacementError> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut spec = pod
        .spec
        .clone()
        .ok_or_else(|| ReplacementError::NoSpec(pod_name.clone()))?;
    spec.node_name = None;
    spec.node_selector = None;
    spec.restart_policy = Some("Always".to_owned());
    if let Some(tolerations) = spec.tolerations.as_mut() {
        tolerations.retain(|t| t.key.as_deref() != Some(OWN_NODE_TAINT));
    }
    let labels = [(LABEL.to_owned(), name.to_owned())].into_iter().collect();
    Ok(ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some([(LABEL.to_owned(), name.to_owned())].into_iter().collect()),
                    ..Default::default()
                }),
                spec: Some(spec),
            }),
            ..Default::default()
        },
        status: None,
    })
}

/// Labels `pod` for the ReplicaSet `name` and returns that ReplicaSet
/// ([`replica_set_for`]), for the caller to create: the label is on the
/// pod before the ReplicaSet exists, so the controller finds it at its
/// first sync and adopts it instead of making a pod of its own.
pub async fn adopting(
    pods: &Api<Pod>,
    pod: &str,
    name: &str,
) -> Result<ReplicaSet, ReplacementError> {
    let patch = serde_json::json!({ "metadata": { "labels": { LABEL: name } } });
    let labelled = pods
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api(format!("labelling pod {pod} for replica set {name}")))?;
    replica_set_for(&labelled, name)
}

/// Waits until the ReplicaSet `name` controls `pod`.
pub async fn wait_adopted(
    pods: &Api<Pod>,
    sets: &Api<ReplicaSet>,
    pod: &str,
    name: &str,
) -> Result<(), ReplacementError> {
    let uid = uid_of(sets, name).await?;
    let what = format!("replica set {name} to adopt pod {pod}");
    wait::pod(pods, pod, &what, ADOPT_TIMEOUT, |p| match p {
        None => Check::Fail(format!("pod {pod} is gone")),
        Some(p) => match controlled_by(p, &uid) {
            Ok(()) => Check::Done(()),
            Err(now) => Check::Pending(now),
        },
    })
    .await?;
    Ok(())
}

async fn uid_of(sets: &Api<ReplicaSet>, name: &str) -> Result<String, ReplacementError> {
    sets.get(name)
        .await
        .map_err(api(format!("reading replica set {name}")))?
        .metadata
        .uid
        .ok_or_else(|| ReplacementError::Api(format!("replica set {name} has no UID")))
}

/// Waits until the ReplicaSet `name` has exactly `count` live pods (not
/// being deleted), each running on `node`; then each of their claims must
/// be allocated for `node` and reserved for its pod (a pod runs only once
/// its claims are prepared, so this is checked once, not waited for).
pub async fn wait_running_on(
    pods: &Api<Pod>,
    sets: &Api<ReplicaSet>,
    claims: &Api<ResourceClaim>,
    name: &str,
    node: &str,
    count: usize,
) -> Result<(), ReplacementError> {
    let uid = uid_of(sets, name).await?;
    let what = format!("replica set {name} to have {count} running pod(s) on node {node}");
    let config = watcher::Config::default().labels(&format!("{LABEL}={name}"));
    let running = wait::list(pods, config, &what, RUNNING_TIMEOUT, |ps| {
        running_on(ps, &uid, node, count)
    })
    .await?;
    let mut wrong = Vec::new();
    for p in &running {
        let pod = p.metadata.name.clone().unwrap_or_default();
        let pod_uid = p.metadata.uid.clone().unwrap_or_default();
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        for claim in statuses.into_iter().filter_map(|s| s.resource_claim_name) {
            let c = claims
                .get(&claim)
                .await
                .map_err(api(format!("reading claim {claim} of pod {pod}")))?;
            if let Err(e) = allocated_for_pod_on(&c, node, &pod_uid) {
                wrong.push(format!("pod {pod}: {e}"));
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(ReplacementError::Api(format!(
            "replica set {name} runs {count} pod(s) on node {node}, but not with claims of \
             their own there: {}",
            wrong.join("; ")
        )))
    }
}

/// Waits until the taint eviction controller has evicted `pod`: it is being
/// deleted, with the condition that controller writes first.
pub async fn wait_evicted(pods: &Api<Pod>, pod: &str) -> Result<(), ReplacementError> {
    let what = format!("pod {pod} to be evicted by the taint eviction controller");
    wait::pod(pods, pod, &what, EVICTION_TIMEOUT, |p| {
        evicted_by_taint(pod, p)
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_the_pods_spec_without_its_placement() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "tester-1", "labels": { LABEL: "tester" } },
            "spec": {
                "nodeName": "node-1",
                "nodeSelector": { "kubernetes.io/hostname": "node-1" },
                "restartPolicy": "Never",
                "containers": [{ "name": "with-resource" }],
                "resourceClaims": [{ "name": "my-inline-claim",
                    "resourceClaimTemplateName": "tester-1" }],
                "tolerations": [
                    { "key": OWN_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule" },
                    { "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                      "effect": "NoExecute", "tolerationSeconds": 5 },
                ],
            },
        }))
        .expect("a pod");
        let rs = serde_json::to_value(replica_set_for(&pod, "tester").expect("a replica set"))
            .expect("json");
        assert_eq!(rs["metadata"]["name"], "tester");
        assert_eq!(rs["spec"]["replicas"], 1);
        assert_eq!(rs["spec"]["selector"]["matchLabels"][LABEL], "tester");
        let template = &rs["spec"]["template"];
        assert_eq!(template["metadata"]["labels"][LABEL], "tester");
        let spec = &template["spec"];
        assert!(spec.get("nodeName").is_none());
        assert!(spec.get("nodeSelector").is_none());
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(
            spec["resourceClaims"][0]["resourceClaimTemplateName"],
            "tester-1"
        );
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(1));
        assert_eq!(spec["tolerations"][0]["tolerationSeconds"], 5);
        let bare: Pod = serde_json::from_value(serde_json::json!({ "metadata": { "name": "p" } }))
            .expect("a pod");
        assert!(matches!(
            replica_set_for(&bare, "x"),
            Err(ReplacementError::NoSpec(_))
        ));
    }
}
