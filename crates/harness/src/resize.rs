//! Upstream's node-allocatable test pod (`dra_node_allocatable_resources.go`)
//! and its in-place resize: the pod built from a scenario's rows of
//! containers, resources and claims; the strategic merge patch a resize
//! sends to the `resize` subresource; and the resize carried out and
//! awaited as upstream's WaitForPodResizeActuation, in place.
use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use dra_e2e_kube::objects::{SLEEP_UNTIL_TERMINATED, TEST_IMAGE};
use dra_e2e_kube::wait::{self, Check, WaitError};

use crate::cgroup::NODE_CGROUP_MOUNT;
use crate::quantity::{Quantity, QuantityError};

#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// A row of the scenario's table that says no pod or resize.
    #[error("{0}")]
    Table(String),
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error("building the pod")]
    Build(#[source] serde_json::Error),
    #[error("resizing pod {pod} with {patch}")]
    Patch {
        pod: String,
        patch: Value,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Wait(#[from] WaitError),
    #[error("reading pod {pod}")]
    Read {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("pod {pod} was resized by restarting containers: {}", restarted.join(", "))]
    Restarted { pod: String, restarted: Vec<String> },
}

/// Resource requirements as written in a cell: `cpu 1/2, memory 1Gi/2Gi`
/// (request/limit), `cpu 1000m` (request only), `cpu -/2` (limit only),
/// `none`.
pub fn requirements(cell: &str) -> Result<Value, ResizeError> {
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    let cell = cell.trim();
    if !(cell.is_empty() || cell == "none" || cell == "-") {
        for item in cell.split(',').map(str::trim) {
            let (resource, q) = item.split_once(' ').ok_or_else(|| {
                ResizeError::Table(format!(
                    "{item:?} must be `<resource> <request>[/<limit>]` (e.g. `cpu 1/2`)"
                ))
            })?;
            let (req, lim) = q.trim().split_once('/').unwrap_or((q.trim(), "-"));
            for (v, into) in [(req, &mut requests), (lim, &mut limits)] {
                if v != "-" {
                    Quantity::parse(v)?;
                    into.insert(resource.to_owned(), json!(v));
                }
            }
        }
    }
    let mut r = serde_json::Map::new();
    if !requests.is_empty() {
        r.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        r.insert("limits".into(), Value::Object(limits));
    }
    Ok(Value::Object(r))
}

fn claim_list(cell: &str) -> Vec<String> {
    cell.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty() && *c != "-" && *c != "none")
        .map(str::to_owned)
        .collect()
}

/// Upstream's test pod: busybox containers that sleep until stopped,
/// restartPolicy Never, the node's cgroup tree mounted in the first
/// container, pod claims (sorted) naming external claims of the same name.
pub fn test_pod(name: &str, rows: &[Vec<String>]) -> Result<(Pod, Vec<String>), ResizeError> {
    let mut containers = Vec::new();
    let mut pod_resources = None;
    let mut claims = BTreeSet::new();
    for row in rows {
        let [who, resources, used] = &row[..] else {
            return Err(ResizeError::Table(format!(
                "each row is | container | resources | claims |, got {row:?}"
            )));
        };
        let used = claim_list(used);
        claims.extend(used.iter().cloned());
        if who == "pod" {
            // Pod-level resources; its claims are referenced by no container.
            let r = requirements(resources)?;
            if r.as_object().is_some_and(|m| !m.is_empty()) {
                pod_resources = Some(r);
            }
            continue;
        }
        let mut resources = requirements(resources)?;
        if !used.is_empty() {
            resources["claims"] = json!(
                used.iter()
                    .map(|c| json!({ "name": c }))
                    .collect::<Vec<_>>()
            );
        }
        containers.push(json!({
            "name": who,
            "image": TEST_IMAGE,
            "command": ["/bin/sh"],
            "args": ["-c", SLEEP_UNTIL_TERMINATED],
            "resources": resources,
        }));
    }
    let Some(first) = containers.first_mut() else {
        return Err(ResizeError::Table(
            "the pod needs at least one container row".to_owned(),
        ));
    };
    first["volumeMounts"] = json!([{ "name": "sysfscgroup", "mountPath": NODE_CGROUP_MOUNT }]);
    let claims: Vec<String> = claims.into_iter().collect();
    let mut spec = json!({
        "restartPolicy": "Never",
        "containers": containers,
        "volumes": [{ "name": "sysfscgroup", "hostPath": { "path": "/sys/fs/cgroup" } }],
        "resourceClaims": claims.iter().map(|c| json!({ "name": c, "resourceClaimName": c })).collect::<Vec<_>>(),
    });
    if let Some(r) = pod_resources {
        spec["resources"] = r;
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .map_err(ResizeError::Build)?;
    Ok((pod, claims))
}

/// The strategic merge patch that asks for these resources: containers by
/// name, the row `pod` for pod-level resources. Fields the row leaves out
/// are removed, as upstream's two-way patch from the original to the
/// desired pod does.
pub fn patch(pod: &Pod, rows: &[Vec<String>]) -> Result<Value, ResizeError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut containers = Vec::new();
    let mut patch = json!({ "spec": {} });
    for row in rows {
        let [who, resources] = &row[..] else {
            return Err(ResizeError::Table(format!(
                "each row is | container | resources |, got {row:?}"
            )));
        };
        let want = requirements(resources)?;
        let mut r = serde_json::Map::new();
        for key in ["requests", "limits"] {
            let mut list = want.get(key).cloned().unwrap_or_else(|| json!({}));
            // A resource the pod has and the row does not: removed.
            let had = if who == "pod" {
                spec.resources.as_ref().and_then(|r| {
                    if key == "requests" {
                        r.requests.clone()
                    } else {
                        r.limits.clone()
                    }
                })
            } else {
                let c = spec
                    .containers
                    .iter()
                    .find(|c| &c.name == who)
                    .ok_or_else(|| ResizeError::Table(format!("pod has no container {who:?}")))?;
                c.resources.as_ref().and_then(|r| {
                    if key == "requests" {
                        r.requests.clone()
                    } else {
                        r.limits.clone()
                    }
                })
            };
            for name in had.iter().flat_map(|h| h.keys()) {
                if list.get(name).is_none() {
                    list[name] = Value::Null;
                }
            }
            if list.as_object().is_some_and(|m| !m.is_empty()) {
                r.insert(key.into(), list);
            }
        }
        if r.is_empty() {
            // Nothing asked and nothing to remove: not part of the resize.
            continue;
        }
        if who == "pod" {
            patch["spec"]["resources"] = Value::Object(r);
        } else {
            let mut c = json!({ "name": who });
            c["resources"] = Value::Object(r);
            containers.push(c);
        }
    }
    if !containers.is_empty() {
        patch["spec"]["containers"] = Value::Array(containers);
    }
    Ok(patch)
}

/// Sends `patch` ([`patch`]) to pod `name`'s `resize` subresource and
/// waits until the kubelet actuated it ([`actuated`]) and no container
/// restarted for it (the default policy); returns the pod then.
pub async fn resize(
    pods: &Api<Pod>,
    name: &str,
    patch: &Value,
    timeout: Duration,
) -> Result<Pod, ResizeError> {
    let patched = pods
        .patch_subresource(
            "resize",
            name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map_err(|source| ResizeError::Patch {
            pod: name.to_owned(),
            patch: patch.clone(),
            source,
        })?;
    let generation = patched.metadata.generation.unwrap_or(0);
    let what = format!("the resize of pod {name} to be actuated");
    wait::pod(pods, name, &what, timeout, |p| {
        actuated(p, name, generation)
    })
    .await?;
    let pod = pods.get(name).await.map_err(|source| ResizeError::Read {
        pod: name.to_owned(),
        source,
    })?;
    let restarted: Vec<String> = pod
        .status
        .clone()
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .filter(|c| c.restart_count != 0)
        .map(|c| format!("{} restarted {} time(s)", c.name, c.restart_count))
        .collect();
    if !restarted.is_empty() {
        return Err(ResizeError::Restarted {
            pod: name.to_owned(),
            restarted,
        });
    }
    Ok(pod)
}

/// The named condition of [`resize`], as upstream's
/// WaitForPodResizeActuation: no resize pending or in progress (one the
/// kubelet finds infeasible fails at once), the status observed the
/// resize's `generation`, and the pod ready.
fn actuated(p: Option<&Pod>, name: &str, generation: i64) -> Check<()> {
    let Some(p) = p else {
        return Check::Fail(format!("pod {name} is gone"));
    };
    let status = p.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    if let Some(c) = conditions
        .iter()
        .find(|c| c.type_ == "PodResizePending" && c.reason.as_deref() == Some("Infeasible"))
    {
        return Check::Fail(format!(
            "the kubelet finds the resize of pod {name} infeasible: {}",
            c.message.clone().unwrap_or_default()
        ));
    }
    if let Some(c) = conditions
        .iter()
        .find(|c| c.type_ == "PodResizePending" || c.type_ == "PodResizeInProgress")
    {
        return Check::Pending(format!(
            "condition {} ({}: {})",
            c.type_,
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default()
        ));
    }
    let observed = status.observed_generation.unwrap_or(0);
    if observed < generation {
        return Check::Pending(format!(
            "status.observedGeneration {observed} < generation {generation}"
        ));
    }
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if !ready {
        return Check::Pending("the pod is not ready".to_owned());
    }
    Check::Done(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table rows as the steps get them.
    fn rows<const N: usize>(r: &[[&str; N]]) -> Vec<Vec<String>> {
        r.iter()
            .map(|r| r.iter().map(|s| (*s).to_owned()).collect())
            .collect()
    }

    #[test]
    fn a_resize_patch_asks_for_the_rows_and_removes_what_they_leave_out() {
        let (pod, _) = test_pod(
            "p",
            &rows(&[["pod", "none", "-"], ["c1", "cpu 1/2, memory 1Gi/2Gi", "a"]]),
        )
        .expect("valid");
        let patch =
            patch(&pod, &rows(&[["pod", "none"], ["c1", "cpu 1500m/2500m"]])).expect("valid");
        assert_eq!(
            patch,
            json!({ "spec": { "containers": [{ "name": "c1", "resources": {
                "requests": { "cpu": "1500m", "memory": null },
                "limits": { "cpu": "2500m", "memory": null },
            }}]}})
        );
        assert!(super::patch(&pod, &rows(&[["c9", "cpu 1"]])).is_err());
        assert!(requirements("cpu 1x").is_err());
    }

    #[test]
    fn the_pod_has_upstreams_shape() {
        let rows = rows(&[
            ["pod", "cpu 2/4, memory 2Gi/4Gi", "unused"],
            ["c1", "cpu 1/2, memory 1Gi/2Gi", "a"],
            ["c2", "none", "b, a"],
        ]);
        let (pod, claims) = test_pod("tester-1", &rows).expect("valid");
        assert_eq!(claims, ["a", "b", "unused"]);
        let v = serde_json::to_value(&pod).expect("serializes");
        assert_eq!(v["spec"]["resources"]["limits"]["cpu"], json!("4"));
        assert_eq!(
            v["spec"]["containers"][0]["resources"]["requests"]["memory"],
            json!("1Gi")
        );
        assert_eq!(
            v["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
            json!(NODE_CGROUP_MOUNT)
        );
        assert_eq!(
            v["spec"]["containers"][1]["resources"]["claims"],
            json!([{"name": "b"}, {"name": "a"}])
        );
        assert!(
            v["spec"]["containers"][1]["resources"]
                .get("limits")
                .is_none()
        );
        assert_eq!(
            v["spec"]["resourceClaims"][2],
            json!({"name": "unused", "resourceClaimName": "unused"})
        );
        assert!(test_pod("p", &[]).is_err());
    }

    fn pod(conditions: Value, observed: i64) -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "p", "generation": 2 },
            "status": { "conditions": conditions, "observedGeneration": observed },
        }))
        .unwrap()
    }

    #[test]
    fn a_resize_is_actuated_once_observed_and_ready_and_infeasible_fails() {
        let ready = json!([{ "type": "Ready", "status": "True" }]);
        assert!(matches!(
            actuated(Some(&pod(ready.clone(), 2)), "p", 2),
            Check::Done(())
        ));
        match actuated(Some(&pod(ready, 1)), "p", 2) {
            Check::Pending(seen) => {
                assert_eq!(seen, "status.observedGeneration 1 < generation 2")
            }
            other => panic!("expected pending, got {other:?}"),
        }
        let infeasible = json!([{ "type": "PodResizePending", "status": "True",
            "reason": "Infeasible", "message": "too much" }]);
        match actuated(Some(&pod(infeasible, 2)), "p", 2) {
            Check::Fail(m) => {
                assert_eq!(
                    m,
                    "the kubelet finds the resize of pod p infeasible: too much"
                )
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        let in_progress = json!([{ "type": "PodResizeInProgress", "status": "True" }]);
        assert!(matches!(
            actuated(Some(&pod(in_progress, 2)), "p", 2),
            Check::Pending(_)
        ));
        assert!(matches!(actuated(None, "p", 2), Check::Fail(_)));
    }
}
