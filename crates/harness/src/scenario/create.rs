//! Creating what a scenario makes, as upstream's `Builder`
//! (`test/e2e/dra/utils`) does: classes, claims, templates, pods and
//! manifest objects, each created and its cleanup put on the scenario's
//! stack in the same call, so nothing a scenario made escapes teardown. A
//! scenario with nodes of its own gives its pods, and the pod templates of
//! its workloads, the toleration of their taint.
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};

use super::{Created, DriverLabel, PodRecord, Scenario};
use crate::node_lease;
use dra_e2e_kube::objects;

#[derive(Debug, thiserror::Error)]
#[error("creating {kind} {name}")]
pub struct CreateError {
    kind: String,
    name: String,
    #[source]
    source: kube::Error,
}

impl CreateError {
    fn new(kind: &str, name: &str) -> impl FnOnce(kube::Error) -> CreateError {
        let (kind, name) = (kind.to_owned(), name.to_owned());
        move |source| CreateError { kind, name, source }
    }
}

impl<L: DriverLabel> Scenario<L> {
    /// Creates DeviceClass `class`; `for_driver` is the driver it selects
    /// (`None` for a copy made by name).
    pub async fn create_class(
        &mut self,
        client: Client,
        for_driver: Option<L>,
        class: &DeviceClass,
    ) -> Result<(), CreateError> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let api: Api<DeviceClass> = Api::all(client);
        api.create(&PostParams::default(), class)
            .await
            .map_err(CreateError::new("DeviceClass", &name))?;
        self.push(Created::DeviceClass { for_driver, name });
        Ok(())
    }

    /// Creates ResourceClaim `name` with `spec` in `claims`' namespace.
    pub async fn create_claim(
        &mut self,
        claims: &Api<ResourceClaim>,
        name: &str,
        spec: ResourceClaimSpec,
    ) -> Result<(), CreateError> {
        let created = claims
            .create(&PostParams::default(), &objects::claim(name, spec))
            .await
            .map_err(CreateError::new("ResourceClaim", name))?;
        self.push(Created::Claim {
            name: name.to_owned(),
            uid: created.metadata.uid.unwrap_or_default(),
        });
        Ok(())
    }

    /// Creates ResourceClaimTemplate `name` with `spec` in `templates`'
    /// namespace.
    pub async fn create_template(
        &mut self,
        templates: &Api<ResourceClaimTemplate>,
        name: &str,
        spec: ResourceClaimSpec,
    ) -> Result<(), CreateError> {
        templates
            .create(&PostParams::default(), &objects::claim_template(name, spec))
            .await
            .map_err(CreateError::new("ResourceClaimTemplate", name))?;
        self.push(Created::Template(name.to_owned()));
        Ok(())
    }

    /// Creates `pod` in `pods`' namespace; `pod_claims` are its pod-level
    /// claim names.
    pub async fn create_pod(
        &mut self,
        pods: &Api<Pod>,
        pod: &Pod,
        pod_claims: Vec<String>,
    ) -> Result<(), CreateError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut pod = pod.clone();
        if self.owns_nodes()
            && let Some(spec) = pod.spec.as_mut()
        {
            spec.tolerations
                .get_or_insert_default()
                .push(node_lease::toleration());
        }
        pods.create(&PostParams::default(), &pod)
            .await
            .map_err(CreateError::new("pod", &name))?;
        self.push(Created::Pod(PodRecord { name, pod_claims }));
        Ok(())
    }

    /// Creates a manifest object through `api` (whoever's client it
    /// holds) and returns its name.
    pub async fn create_object(
        &mut self,
        api: &Api<DynamicObject>,
        resource: ApiResource,
        namespaced: bool,
        obj: &DynamicObject,
    ) -> Result<String, CreateError> {
        let wanted = obj
            .metadata
            .name
            .clone()
            .or(obj.metadata.generate_name.clone())
            .unwrap_or_default();
        let mut obj = obj.clone();
        if self.owns_nodes() {
            tolerate_own_nodes(&mut obj.data);
        }
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .map_err(CreateError::new(&resource.kind, &wanted))?;
        let name = created.metadata.name.unwrap_or_default();
        self.push(Created::Object {
            resource,
            name: name.clone(),
            namespaced,
        });
        Ok(name)
    }

    /// Creates `obj`, an object of kind `K` as a [`DynamicObject`], in
    /// `namespace` (`None` for a cluster-scoped kind) and returns its
    /// name, as [`Scenario::create_object`].
    pub async fn create_typed<K>(
        &mut self,
        client: Client,
        namespace: Option<&str>,
        obj: &DynamicObject,
    ) -> Result<String, CreateError>
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let resource = ApiResource::erase::<K>(&());
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        };
        self.create_object(&api, resource, namespace.is_some(), obj)
            .await
    }
}

/// Adds the own-node toleration to a manifest's pod spec: a pod's
/// `spec`, a workload's `spec.template.spec` or a CronJob's
/// `spec.jobTemplate.spec.template.spec`; other objects stay as they are.
fn tolerate_own_nodes(data: &mut serde_json::Value) {
    let toleration = match serde_json::to_value(node_lease::toleration()) {
        Ok(t) => t,
        Err(_) => return,
    };
    let pod_spec = if data.pointer("/spec/containers").is_some() {
        data.pointer_mut("/spec")
    } else if data.pointer("/spec/template/spec").is_some() {
        data.pointer_mut("/spec/template/spec")
    } else {
        data.pointer_mut("/spec/jobTemplate/spec/template/spec")
    };
    if let Some(serde_json::Value::Object(spec)) = pod_spec {
        match spec
            .entry("tolerations")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()))
        {
            serde_json::Value::Array(list) => list.push(toleration),
            other => *other = serde_json::Value::Array(vec![toleration]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_specs_of_manifests_get_the_own_node_toleration() {
        let mut pod = serde_json::json!({ "spec": { "containers": [] } });
        let mut job = serde_json::json!({ "spec": { "template": { "spec": {
            "tolerations": [{ "key": "other", "operator": "Exists" }] } } } });
        let mut cron = serde_json::json!({ "spec": { "jobTemplate": { "spec": {
            "template": { "spec": {} } } } } });
        let mut class = serde_json::json!({ "spec": { "selectors": [] } });
        for v in [&mut pod, &mut job, &mut cron, &mut class] {
            tolerate_own_nodes(v);
        }
        let key = node_lease::OWN_NODE_TAINT;
        assert_eq!(pod["spec"]["tolerations"][0]["key"], key);
        assert_eq!(
            job["spec"]["template"]["spec"]["tolerations"][0]["key"],
            "other"
        );
        assert_eq!(
            job["spec"]["template"]["spec"]["tolerations"][1]["key"],
            key
        );
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["tolerations"][0]["key"],
            key
        );
        assert!(class["spec"].get("tolerations").is_none());
    }

    #[test]
    fn a_failed_creation_names_what_it_created() {
        let bad = serde_json::from_str::<Pod>("{").unwrap_err();
        let e = CreateError::new("ResourceClaim", "c1")(kube::Error::SerdeError(bad));
        assert_eq!(e.to_string(), "creating ResourceClaim c1");
        assert!(std::error::Error::source(&e).is_some());
    }
}
