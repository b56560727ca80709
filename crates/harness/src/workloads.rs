//! Workloads whose PodGroups carry claims (upstream's `WorkloadExternal`,
//! `WorkloadInline`, `PodGroup`, `GroupedPodWithClaims`): a PodGroup's
//! claims, and the wait until a pod of the group uses exactly them, each
//! reserved for the group.
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, PodGroupResourceClaim};
use kube::api::Api;

use dra_e2e_kube::wait::{self, Check, WaitError};

/// The group's claims, by pod claim name.
pub fn group_claims(group: &PodGroup) -> Vec<PodGroupResourceClaim> {
    group.spec.resource_claims.clone().unwrap_or_default()
}

/// The ResourceClaim a pod claim (or a group claim) resolves to: named, or
/// generated and written into the status; `None` while not generated yet.
fn resolved(
    name: &str,
    claim_name: &Option<String>,
    statuses: &[(String, Option<String>)],
) -> Option<String> {
    claim_name.clone().or_else(|| {
        statuses
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, c)| c.clone())
    })
}

/// A claim status list (a pod's or a pod group's; the types differ, the
/// fields do not) as (claim name in the spec, generated claim name) pairs.
fn name_pairs<S>(
    statuses: Option<&Vec<S>>,
    pair: impl Fn(&S) -> (&String, &Option<String>),
) -> Vec<(String, Option<String>)> {
    statuses
        .into_iter()
        .flatten()
        .map(|s| {
            let (name, claim) = pair(s);
            (name.clone(), claim.clone())
        })
        .collect()
}

/// The named condition of [`uses_group_claims`] over pod `p` and its
/// group `g`: each of the group's claims resolved, and the pod's claim of
/// that name resolved to the same one. Done with the claims to check for
/// the group's reservation; a pod claim missing or resolved to another
/// claim fails.
pub fn same_claims(p: &Pod, g: &PodGroup) -> Check<Vec<String>> {
    let pod = p.metadata.name.as_deref().unwrap_or_default();
    let gname = g.metadata.name.as_deref().unwrap_or_default();
    let group_status = name_pairs(
        g.status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref()),
        |s| (&s.name, &s.resource_claim_name),
    );
    let pod_status = name_pairs(
        p.status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref()),
        |s| (&s.name, &s.resource_claim_name),
    );
    let pod_claims = p
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.clone())
        .unwrap_or_default();
    let group_claims = group_claims(g);
    if group_claims.is_empty() {
        return Check::Fail(format!("PodGroup {gname} has no claims"));
    }
    let mut out = Vec::new();
    for gc in &group_claims {
        let Some(want) = resolved(&gc.name, &gc.resource_claim_name, &group_status) else {
            return Check::Pending(format!("PodGroup {gname} has no claim for {} yet", gc.name));
        };
        let Some(pc) = pod_claims.iter().find(|c| c.name == gc.name) else {
            return Check::Fail(format!(
                "pod {pod} has no pod claim {} (the pod group's claim {want})",
                gc.name
            ));
        };
        let Some(got) = resolved(&pc.name, &pc.resource_claim_name, &pod_status) else {
            return Check::Pending(format!("pod {pod} has no claim for {} yet", pc.name));
        };
        if got != want {
            return Check::Fail(format!(
                "pod {pod} uses claim {got} for {}, not the pod group's claim {want}",
                pc.name
            ));
        }
        out.push(want);
    }
    Check::Done(out)
}

/// Done once claim `c` is reserved for PodGroup `gname`.
pub fn reserved_for_group(c: &ResourceClaim, gname: &str) -> Check<()> {
    let name = c.metadata.name.as_deref().unwrap_or_default();
    let reserved: Vec<String> = c
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| format!("{}/{}", r.resource, r.name))
        .collect();
    if reserved.contains(&format!("podgroups/{gname}")) {
        Check::Done(())
    } else {
        Check::Pending(format!(
            "claim {name} is reserved for {reserved:?}, not for podgroups/{gname}"
        ))
    }
}

/// Polls (three objects, no one watch) every 500 ms until pod `pod` uses
/// the claims of PodGroup `gname` ([`same_claims`]) and each is reserved
/// for the group ([`reserved_for_group`]).
pub async fn uses_group_claims(
    pods: &Api<Pod>,
    groups: &Api<PodGroup>,
    claims: &Api<ResourceClaim>,
    pod: &str,
    gname: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("pod {pod} to use the claims of PodGroup {gname}");
    wait::poll(&what, timeout, Duration::from_millis(500), || async {
        let (p, g) = match (pods.get(pod).await, groups.get(gname).await) {
            (Ok(p), Ok(g)) => (p, g),
            (Err(e), _) => return Check::Pending(format!("pod {pod}: {e}")),
            (_, Err(e)) => return Check::Pending(format!("PodGroup {gname}: {e}")),
        };
        let wanted = match same_claims(&p, &g) {
            Check::Done(w) => w,
            Check::Pending(s) => return Check::Pending(s),
            Check::Fail(s) => return Check::Fail(s),
        };
        for want in wanted {
            let claim = match claims.get(&want).await {
                Ok(c) => c,
                Err(e) => return Check::Pending(format!("claim {want}: {e}")),
            };
            if let Check::Pending(s) = reserved_for_group(&claim, gname) {
                return Check::Pending(s);
            }
        }
        Check::Done(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn group_claims_resolve_by_name_or_status() {
        let st = vec![("c".to_owned(), Some("gen".to_owned()))];
        assert_eq!(resolved("c", &None, &st).as_deref(), Some("gen"));
        assert_eq!(
            resolved("c", &Some("ext".into()), &st).as_deref(),
            Some("ext")
        );
        assert_eq!(resolved("d", &None, &st), None);
    }

    fn group(status: serde_json::Value) -> PodGroup {
        serde_json::from_value(json!({
            "metadata": {"name": "w-group-0"},
            "spec": {
                "schedulingPolicy": {"basic": {}},
                "resourceClaims": [{"name": "my-inline-claim", "resourceClaimTemplateName": "w"}],
            },
            "status": status,
        }))
        .unwrap()
    }

    fn pod(claim: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "resourceClaims": [
                {"name": "my-inline-claim", "resourceClaimTemplateName": "w"}]},
            "status": {"resourceClaimStatuses":
                claim.map(|c| vec![json!({"name": "my-inline-claim", "resourceClaimName": c})])
                    .unwrap_or_default()},
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_must_use_the_claim_generated_for_its_group() {
        let generated = group(json!({"resourceClaimStatuses": [
            {"name": "my-inline-claim", "resourceClaimName": "w-gen"}]}));
        assert!(matches!(
            same_claims(&pod(Some("w-gen")), &generated),
            Check::Done(c) if c == ["w-gen"]
        ));
        assert!(matches!(
            same_claims(&pod(None), &generated),
            Check::Pending(_)
        ));
        match same_claims(&pod(Some("own")), &generated) {
            Check::Fail(s) => assert_eq!(
                s,
                "pod p uses claim own for my-inline-claim, not the pod group's claim w-gen"
            ),
            other => panic!("{other:?}"),
        }
        match same_claims(&pod(Some("w-gen")), &group(json!({}))) {
            Check::Pending(s) => {
                assert_eq!(s, "PodGroup w-group-0 has no claim for my-inline-claim yet")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_claim_must_be_reserved_for_the_group() {
        let claim = |resource: &str| -> ResourceClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "w-gen"},
                "spec": {},
                "status": {"reservedFor": [{"resource": resource, "name": "w-group-0", "uid": "u"}]},
            }))
            .unwrap()
        };
        assert!(matches!(
            reserved_for_group(&claim("podgroups"), "w-group-0"),
            Check::Done(())
        ));
        assert!(matches!(
            reserved_for_group(&claim("pods"), "w-group-0"),
            Check::Pending(_)
        ));
    }
}
