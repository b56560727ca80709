//! Workloads whose PodGroups carry claims (upstream's `WorkloadExternal`,
//! `WorkloadInline`, `PodGroup`, `GroupedPodWithClaims`), and eviction by a
//! DeviceTaintRule: the rule, the pod kept visible by a finalizer, and the
//! eviction's trace in the pod status.
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
use kube::api::DynamicObject;

use super::World;
use super::claims::{CLAIM_TIMEOUT, default_shape};
use super::params::{DriverRef, PodClaimsPhrase};
use super::pods::POD_TIMEOUT;
use crate::ground::objects::{self, PodShape};
use crate::harness::device_taints;
use crate::harness::workloads::{self, group_claims};

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
    let dynamic = to_dynamic(obj)?;
    let client = w.client()?;
    Ok(w.scenario
        .create_typed::<K>(client, Some(&w.namespace), &dynamic)
        .await?)
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

async fn uses_group_claims(w: &mut World, pod: String, workload: String) -> anyhow::Result<()> {
    workloads::uses_group_claims(
        &w.api::<Pod>()?,
        &w.api::<PodGroup>()?,
        &w.api::<ResourceClaim>()?,
        &pod,
        &group_name(&workload),
        CLAIM_TIMEOUT,
    )
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
    let dynamic = to_dynamic(&rule)?;
    let client = w.client()?;
    w.scenario
        .create_typed::<DeviceTaintRule>(client, None, &dynamic)
        .await?;
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
    device_taints::taint_added_just_now(w.client()?, &name).await?;
    Ok(())
}

async fn evicted(w: &mut World, pod: String) -> anyhow::Result<()> {
    device_taints::evicted(&w.api::<Pod>()?, &pod, POD_TIMEOUT).await?;
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
}
