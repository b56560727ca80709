//! ResourceClaims as the steps and checks read them: the claim a pod's
//! status names, what a claim's status says (for messages), its
//! allocation's results and the pods it is reserved for, and the waits on
//! them that report the claim as last seen.
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams};

use dra_e2e_kube::wait::{self, Check, WaitError};

/// The claim the pod status names: generated for its (first) inline claim,
/// or made by the scheduler for its extended resources.
pub fn generated_claim(pod: &Pod, extended: bool) -> Option<String> {
    let status = pod.status.as_ref()?;
    if extended {
        status
            .extended_resource_claim_status
            .as_ref()
            .map(|s| s.resource_claim_name.clone())
            .filter(|n| !n.is_empty())
    } else {
        status
            .resource_claim_statuses
            .as_deref()?
            .iter()
            .find_map(|s| s.resource_claim_name.clone())
    }
}

/// What a claim's status says, for the message of a wait on it.
pub fn describe(c: Option<&ResourceClaim>) -> String {
    let Some(c) = c else {
        return "claim does not exist".to_owned();
    };
    let status = c.status.as_ref();
    let allocated = status.and_then(|s| s.allocation.as_ref()).is_some();
    let reserved: Vec<String> = status
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| format!("{}/{}", r.resource, r.name))
        .collect();
    format!(
        "allocated={allocated}, reservedFor=[{}], deleting={}",
        reserved.join(", "),
        c.metadata.deletion_timestamp.is_some()
    )
}

/// The pods the claim is reserved for.
pub fn reserved_for_pods(c: Option<&ResourceClaim>) -> Vec<String> {
    c.and_then(|c| c.status.as_ref())
        .and_then(|s| s.reserved_for.as_ref())
        .map(|r| {
            r.iter()
                .filter(|r| r.resource == "pods")
                .map(|r| r.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The named conditions of [`until`], on the claim as last seen (`None`:
/// it does not exist).
pub mod conditions {
    use k8s_openapi::api::resource::v1::ResourceClaim;

    /// The claim has an allocation.
    pub fn allocated(c: Option<&ResourceClaim>) -> bool {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.allocation.as_ref())
            .is_some()
    }

    /// The claim exists without an allocation.
    pub fn deallocated(c: Option<&ResourceClaim>) -> bool {
        c.is_some() && !allocated(c)
    }

    /// The claim exists and no pod holds it.
    pub fn not_reserved(c: Option<&ResourceClaim>) -> bool {
        c.is_some() && super::reserved_for_pods(c).is_empty()
    }

    /// The claim is gone.
    pub fn deleted(c: Option<&ResourceClaim>) -> bool {
        c.is_none()
    }

    /// The claim is reserved for pod `pod`.
    pub fn reserved_for(pod: &str) -> impl Fn(Option<&ResourceClaim>) -> bool + '_ {
        move |c| super::reserved_for_pods(c).iter().any(|p| p == pod)
    }
}

/// `request (driver/pool/device)` of each allocation result, in order.
pub fn allocation_results(c: &ResourceClaim) -> Option<Vec<(String, String)>> {
    let allocation = c.status.as_ref()?.allocation.as_ref()?;
    let results = allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    Some(
        results
            .iter()
            .map(|r| {
                (
                    r.request.clone(),
                    format!("{}/{}/{}", r.driver, r.pool, r.device),
                )
            })
            .collect(),
    )
}

/// Waits until the pod's status names its generated claim (for its first
/// inline claim), or with `extended` the claim the scheduler made for its
/// extended resources; returns the claim's name.
pub async fn generated_name(
    pods: &Api<Pod>,
    pod: &str,
    extended: bool,
    timeout: Duration,
) -> Result<String, WaitError> {
    let what = if extended {
        format!("the extended resource claim of pod {pod} to be made")
    } else {
        format!("the claim of pod {pod} to be generated")
    };
    wait::pod(pods, pod, &what, timeout, |p| {
        let Some(p) = p else {
            return Check::Pending("pod does not exist".into());
        };
        match generated_claim(p, extended) {
            Some(n) => Check::Done(n),
            None if extended => Check::Pending("no extendedResourceClaimStatus yet".into()),
            None => Check::Pending("no resourceClaimStatuses yet".into()),
        }
    })
    .await
}

/// Watches claim `name` until `done` holds for it (`None`: it does not
/// exist): "ResourceClaim `name` to be `what`".
pub async fn until(
    claims: &Api<ResourceClaim>,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(Option<&ResourceClaim>) -> bool,
) -> Result<(), WaitError> {
    let what = format!("ResourceClaim {name} to be {what}");
    wait::object(claims, name, &what, timeout, |c| {
        if done(c) {
            Check::Done(())
        } else {
            Check::Pending(describe(c))
        }
    })
    .await
}

/// Waits until claim `name` is allocated and returns its results
/// ([`allocation_results`]); an allocation never changes once made, so
/// the first one decides.
pub async fn allocation(
    claims: &Api<ResourceClaim>,
    name: &str,
    timeout: Duration,
) -> Result<Vec<(String, String)>, WaitError> {
    let what = format!("ResourceClaim {name} to be allocated");
    wait::object(claims, name, &what, timeout, |c| {
        match c.and_then(allocation_results) {
            Some(r) => Check::Done(r),
            None => Check::Pending(describe(c)),
        }
    })
    .await
}

/// Deletes claim `name`, with `force` at once (grace period 0). Only the
/// grace period differs: the claim's finalizer stays, so the control plane
/// (the resourceclaim controller) has to release the claim once no pod
/// reserves it, as it does for upstream's force-delete.
pub async fn delete(
    claims: &Api<ResourceClaim>,
    name: &str,
    force: bool,
) -> Result<(), kube::Error> {
    let dp = if force {
        DeleteParams::default().grace_period(0)
    } else {
        DeleteParams::default()
    };
    claims.delete(name, &dp).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(status: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c"},
            "spec": {},
            "status": status,
        }))
        .unwrap()
    }

    /// What the waits report and decide by: results in order, pods among
    /// the consumers, the claim's state in a line, the pod's claim names.
    #[test]
    fn a_claims_status_read_for_the_waits() {
        let c = claim(serde_json::json!({
            "allocation": {"devices": {"results": [
                {"request": "r0", "driver": "d", "pool": "p", "device": "dev-0"},
                {"request": "r1", "driver": "d", "pool": "p", "device": "dev-1"},
            ]}},
            "reservedFor": [
                {"resource": "pods", "name": "tester-1", "uid": "u1"},
                {"resource": "workloads", "name": "w", "uid": "u2"},
            ],
        }));
        assert_eq!(
            allocation_results(&c).unwrap(),
            [
                ("r0".into(), "d/p/dev-0".into()),
                ("r1".into(), "d/p/dev-1".into())
            ]
        );
        assert_eq!(reserved_for_pods(Some(&c)), ["tester-1"]);
        assert_eq!(
            describe(Some(&c)),
            "allocated=true, reservedFor=[pods/tester-1, workloads/w], deleting=false"
        );
        assert_eq!(describe(None), "claim does not exist");
        let unallocated = claim(serde_json::json!({}));
        assert_eq!(allocation_results(&unallocated), None);
        assert!(reserved_for_pods(Some(&unallocated)).is_empty());

        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "tester-1"},
            "status": {
                "resourceClaimStatuses": [{"name": "my-inline-claim", "resourceClaimName": "tester-1-my-inline-claim-x"}],
                "extendedResourceClaimStatus": {"resourceClaimName": "tester-1-extended-resources-y", "requestMappings": []},
            },
        }))
        .unwrap();
        assert_eq!(
            generated_claim(&pod, false).as_deref(),
            Some("tester-1-my-inline-claim-x")
        );
        assert_eq!(
            generated_claim(&pod, true).as_deref(),
            Some("tester-1-extended-resources-y")
        );
        assert_eq!(generated_claim(&Pod::default(), false), None);
    }

    #[test]
    fn the_claim_conditions_read_allocation_and_reservations() {
        use super::conditions::*;
        let claim = |status: serde_json::Value| -> ResourceClaim {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "c" }, "spec": {}, "status": status,
            }))
            .expect("a claim")
        };
        let free = claim(serde_json::json!({}));
        let held = claim(serde_json::json!({
            "allocation": { "devices": { "results": [] } },
            "reservedFor": [{ "resource": "pods", "name": "tester-1", "uid": "u" }],
        }));
        assert!(!allocated(Some(&free)) && deallocated(Some(&free)) && not_reserved(Some(&free)));
        assert!(allocated(Some(&held)) && !deallocated(Some(&held)) && !not_reserved(Some(&held)));
        assert!(reserved_for("tester-1")(Some(&held)) && !reserved_for("tester-2")(Some(&held)));
        assert!(
            deleted(None) && !deleted(Some(&free)) && !deallocated(None) && !not_reserved(None)
        );
    }
}
