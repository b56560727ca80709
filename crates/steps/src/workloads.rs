//! Workloads whose PodGroups carry claims (upstream's `WorkloadExternal`,
//! `WorkloadInline`, `PodGroup`, `GroupedPodWithClaims`), and eviction by a
//! DeviceTaintRule: the rule, the pod kept visible by a finalizer, and the
//! eviction's trace in the pod status.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::{
    Pod, PodResourceClaim, PodSchedulingGroup, ResourceClaim as ContainerClaim,
};
use k8s_openapi::api::resource::v1::{
    DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector, ResourceClaim,
};
use k8s_openapi::api::scheduling::v1beta1::{
    BasicSchedulingPolicy, PodGroup, PodGroupResourceClaim, PodGroupSchedulingPolicy, PodGroupSpec,
    PodGroupTemplate, Workload, WorkloadReference, WorkloadSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject};

use super::World;
use super::claims::{CLAIM_TIMEOUT, default_shape};
use super::params::{DriverRef, PodClaimsPhrase};
use super::pods::POD_TIMEOUT;
use crate::ground::objects::{self, PodShape};
use crate::ground::wait::{self, Check};

sentences! {
    #[given(expr = "a workload {string} with a pod group {podclaims}")]
    fn workload_created(name: String, claims: PodClaimsPhrase, step: Step<'_>);

    #[when(expr = "pod {string} joins the pod group of workload {string}")]
    fn pod_joins(pod: String, workload: String);

    #[then(expr = "pod {string} uses the claims of the pod group of workload {string}")]
    fn uses_group_claims(pod: String, workload: String);

    #[given(expr = "pod {string} is kept by finalizer {string}")]
    #[when(expr = "pod {string} is kept by finalizer {string}")]
    fn kept_by_finalizer(pod: String, finalizer: String);

    #[when(expr = "a DeviceTaintRule for the devices of {driver} with taint {string} is created")]
    fn taint_rule_created(d: DriverRef, taint: String);

    #[then("the taint of the DeviceTaintRule was added within a minute of now")]
    fn taint_time_added();

    #[then(expr = "pod {string} is evicted by the device taint manager")]
    fn evicted(pod: String);
}

/// The one template of a workload a step makes, as upstream names it.
const GROUP_TEMPLATE: &str = "group";

/// Upstream's names for the pod group's claims: the single external claim
/// is `resource-claim`, several keep their names; a template's is
/// `my-inline-claim`.
const EXTERNAL_POD_CLAIM: &str = "resource-claim";
const INLINE_POD_CLAIM: &str = "my-inline-claim";

/// What the device taint manager writes into the pod it evicts.
const EVICTION_REASON: &str = "DeletionByDeviceTaintManager";
const EVICTION_MESSAGE: &str = "Device Taint manager: deleting due to NoExecute taint";

/// The PodGroup a step makes for `workload` (upstream: workload, template
/// and a counter that starts at 0).
fn group_name(workload: &str) -> String {
    format!("{workload}-{GROUP_TEMPLATE}-0")
}

pub(crate) fn to_dynamic<T: serde::Serialize>(obj: &T) -> anyhow::Result<DynamicObject> {
    serde_json::to_value(obj)
        .and_then(serde_json::from_value)
        .context("converting an object for the API")
}

pub(crate) async fn create_namespaced<K>(w: &mut World, obj: &K) -> anyhow::Result<String>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> =
        Api::namespaced_with(w.client()?, &w.namespace.clone(), &resource);
    let dynamic = to_dynamic(obj)?;
    w.create_object(&api, resource, true, &dynamic).await
}

async fn workload_created(
    w: &mut World,
    name: String,
    claims: PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    let mut tolerations = Vec::new();
    if let Some(table) = &step.table {
        for row in &table.rows {
            match row.as_slice() {
                [k, v] if k.trim() == "device toleration" => {
                    tolerations.push(objects::expand(v.trim(), &w.vars())?.parse()?)
                }
                _ => bail!(
                    "workload options are rows of `| device toleration | <toleration> |` \
                     (for the template of an inline claim), got {row:?}"
                ),
            }
        }
    }
    let group_claims: Vec<PodGroupResourceClaim> = match &claims {
        PodClaimsPhrase::None => Vec::new(),
        PodClaimsPhrase::External(list) => list
            .iter()
            .map(|c| PodGroupResourceClaim {
                name: if list.len() == 1 {
                    EXTERNAL_POD_CLAIM.to_owned()
                } else {
                    c.clone()
                },
                resource_claim_name: Some(c.clone()),
                resource_claim_template_name: None,
            })
            .collect(),
        PodClaimsPhrase::Inline => vec![PodGroupResourceClaim {
            name: INLINE_POD_CLAIM.to_owned(),
            resource_claim_name: None,
            resource_claim_template_name: Some(name.clone()),
        }],
    };
    if !tolerations.is_empty() && !matches!(claims, PodClaimsPhrase::Inline) {
        bail!("`device toleration` applies to the template of an inline claim");
    }
    if matches!(claims, PodClaimsPhrase::Inline) {
        let mut shape = default_shape(w, &DriverRef::The)?;
        shape.tolerations = tolerations;
        w.create_template(&name, shape.spec()?).await?;
    }
    let policy = PodGroupSchedulingPolicy {
        // An empty object: the default (null) would leave the policy unset.
        basic: Some(BasicSchedulingPolicy(serde_json::json!({}))),
        ..Default::default()
    };
    let workload = Workload {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        spec: WorkloadSpec {
            pod_group_templates: Some(vec![PodGroupTemplate {
                name: GROUP_TEMPLATE.to_owned(),
                scheduling_policy: policy.clone(),
                resource_claims: Some(group_claims.clone()),
                ..Default::default()
            }]),
            ..Default::default()
        },
    };
    create_namespaced(w, &workload).await?;
    let group = PodGroup {
        metadata: ObjectMeta {
            name: Some(group_name(&name)),
            ..Default::default()
        },
        spec: PodGroupSpec {
            workload_ref: Some(WorkloadReference {
                workload_name: name.clone(),
                template_name: GROUP_TEMPLATE.to_owned(),
            }),
            scheduling_policy: policy,
            resource_claims: Some(group_claims),
            ..Default::default()
        },
        status: None,
    };
    create_namespaced(w, &group).await?;
    Ok(())
}

async fn pod_group(w: &World, workload: &str) -> anyhow::Result<PodGroup> {
    let name = group_name(workload);
    w.api::<PodGroup>()?
        .get(&name)
        .await
        .with_context(|| format!("reading PodGroup {name} of workload {workload}"))
}

/// The group's claims, by pod claim name.
fn group_claims(group: &PodGroup) -> Vec<PodGroupResourceClaim> {
    group.spec.resource_claims.clone().unwrap_or_default()
}

async fn pod_joins(w: &mut World, pod: String, workload: String) -> anyhow::Result<()> {
    let group = pod_group(w, &workload).await?;
    let claims = group_claims(&group);
    let mut p = PodShape::new(&pod).build()?;
    let spec = p.spec.as_mut().context("a built pod has a spec")?;
    spec.scheduling_group = Some(PodSchedulingGroup {
        pod_group_name: group.metadata.name.clone(),
    });
    spec.resource_claims = Some(
        claims
            .iter()
            .map(|c| PodResourceClaim {
                name: c.name.clone(),
                resource_claim_name: c.resource_claim_name.clone(),
                resource_claim_template_name: c.resource_claim_template_name.clone(),
            })
            .collect(),
    );
    let container = spec
        .containers
        .first_mut()
        .context("a built pod has a container")?;
    container.resources.get_or_insert_default().claims = Some(
        claims
            .iter()
            .map(|c| ContainerClaim {
                name: c.name.clone(),
                request: None,
            })
            .collect(),
    );
    let names = claims.into_iter().map(|c| c.name).collect();
    w.create_pod(&p, names).await
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

async fn uses_group_claims(w: &mut World, pod: String, workload: String) -> anyhow::Result<()> {
    let pods = w.api::<Pod>()?;
    let groups = w.api::<PodGroup>()?;
    let claims = w.api::<ResourceClaim>()?;
    let gname = group_name(&workload);
    let what = format!("pod {pod} to use the claims of PodGroup {gname}");
    wait::poll(&what, CLAIM_TIMEOUT, Duration::from_millis(500), || async {
        let (p, g) = match (pods.get(&pod).await, groups.get(&gname).await) {
            (Ok(p), Ok(g)) => (p, g),
            (Err(e), _) => return Check::Pending(format!("pod {pod}: {e}")),
            (_, Err(e)) => return Check::Pending(format!("PodGroup {gname}: {e}")),
        };
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
        let group_claims = group_claims(&g);
        if group_claims.is_empty() {
            return Check::Fail(format!("PodGroup {gname} has no claims"));
        }
        for gc in &group_claims {
            let Some(want) = resolved(&gc.name, &gc.resource_claim_name, &group_status) else {
                return Check::Pending(format!(
                    "PodGroup {gname} has no claim for {} yet",
                    gc.name
                ));
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
            let claim = match claims.get(&want).await {
                Ok(c) => c,
                Err(e) => return Check::Pending(format!("claim {want}: {e}")),
            };
            let reserved: Vec<String> = claim
                .status
                .as_ref()
                .and_then(|s| s.reserved_for.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|r| format!("{}/{}", r.resource, r.name))
                .collect();
            if !reserved.contains(&format!("podgroups/{gname}")) {
                return Check::Pending(format!(
                    "claim {want} is reserved for {reserved:?}, not for podgroups/{gname}"
                ));
            }
        }
        Check::Done(())
    })
    .await?;
    Ok(())
}

/// Puts `finalizer` on `pod`; teardown takes it off.
async fn kept_by_finalizer(w: &mut World, pod: String, finalizer: String) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    // Registered first, so a failed patch still leaves nothing behind.
    w.scenario.finalizer_added(&pod, &finalizer);
    crate::harness::pod_finalizer::add(&api, &pod, &finalizer).await?;
    Ok(())
}

/// `key=value:Effect`, as a DeviceTaint without timeAdded (the server sets it).
fn parse_taint(s: &str) -> anyhow::Result<DeviceTaint> {
    let t: objects::DeviceToleration = s.parse()?;
    match t {
        objects::DeviceToleration {
            key: Some(key),
            value,
            effect: Some(effect),
        } => Ok(DeviceTaint {
            key,
            value,
            effect,
            time_added: None,
        }),
        _ => bail!("a taint is written key=value:Effect, got {s:?}"),
    }
}

async fn taint_rule_created(w: &mut World, d: DriverRef, taint: String) -> anyhow::Result<()> {
    let driver = w.driver(&d)?.name.clone();
    let rule = DeviceTaintRule {
        metadata: ObjectMeta {
            generate_name: Some(format!("device-taint-rule-{}-", w.namespace)),
            ..Default::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(driver),
                ..Default::default()
            }),
            taint: parse_taint(&taint)?,
        },
        status: None,
    };
    let resource = ApiResource::erase::<DeviceTaintRule>(&());
    let api: Api<DynamicObject> = Api::all_with(w.client()?, &resource);
    let dynamic = to_dynamic(&rule)?;
    w.create_object(&api, resource, false, &dynamic).await?;
    Ok(())
}

/// The DeviceTaintRule the scenario created last.
fn last_rule(w: &World) -> anyhow::Result<String> {
    w.scenario
        .objects()
        .filter(|(r, _, _)| r.kind == "DeviceTaintRule")
        .map(|(_, n, _)| n.to_owned())
        .last()
        .context("the scenario created no DeviceTaintRule")
}

async fn taint_time_added(w: &mut World) -> anyhow::Result<()> {
    let name = last_rule(w)?;
    let api: Api<DeviceTaintRule> = Api::all(w.client()?);
    let rule = api
        .get(&name)
        .await
        .with_context(|| format!("reading DeviceTaintRule {name}"))?;
    let Some(added) = rule.spec.taint.time_added else {
        bail!("DeviceTaintRule {name}: the server set no timeAdded on the taint");
    };
    let now = jiff::Timestamp::now();
    let off = (now.as_second() - added.0.as_second()).abs();
    if off > 60 {
        bail!(
            "DeviceTaintRule {name}: the taint's timeAdded {} is {off}s away from now ({now}), \
             more than a minute",
            added.0
        );
    }
    Ok(())
}

async fn evicted(w: &mut World, pod: String) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    let what = format!("pod {pod} to be evicted by the device taint manager");
    wait::pod(&api, &pod, &what, POD_TIMEOUT, |p| {
        let Some(p) = p else {
            return Check::Fail(format!(
                "pod {pod} is gone; without a finalizer its status cannot be checked"
            ));
        };
        if p.metadata.deletion_timestamp.is_none() {
            return Check::Pending(format!(
                "pod {pod} is {} and not being deleted",
                wait::describe_pod(Some(p))
            ));
        }
        let conditions = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let found = conditions.iter().any(|c| {
            c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some(EVICTION_REASON)
                && c.message.as_deref() == Some(EVICTION_MESSAGE)
        });
        if found {
            Check::Done(())
        } else {
            let seen: Vec<String> = conditions
                .iter()
                .map(|c| {
                    format!(
                        "{}={} ({}: {})",
                        c.type_,
                        c.status,
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default()
                    )
                })
                .collect();
            Check::Fail(format!(
                "pod {pod} is terminating without the condition DisruptionTarget=True, \
                 reason {EVICTION_REASON}, message {EVICTION_MESSAGE:?}; its conditions: {seen:?}"
            ))
        }
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taint_needs_key_and_effect() {
        let t = parse_taint("test.example.com/evict=now:NoExecute").unwrap();
        assert_eq!(
            (t.key.as_str(), t.value.as_deref(), t.effect.as_str()),
            ("test.example.com/evict", Some("now"), "NoExecute")
        );
        assert!(t.time_added.is_none());
        assert!(parse_taint("NoExecute").is_err());
        assert!(parse_taint("k=v").is_err());
    }

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
}
