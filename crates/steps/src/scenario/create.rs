//! Creating what a scenario makes: drivers, classes, claims, templates,
//! pods and manifest objects, each through the World so that its cleanup
//! goes on the scenario's stack in the same call. A step never creates an
//! object any other way, so nothing a scenario made escapes teardown.
use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};

use super::Created;
use crate::World;
use crate::ground::objects;
use crate::harness::driver::{self, Driver, DriverOptions};
use crate::harness::scenario::PodRecord;
use crate::params::DriverRef;

/// Creating things: each registers its cleanup.
impl World {
    /// Starts (unless `start` is false) a driver on the scenario's nodes,
    /// choosing one node first if the scenario has not said how many.
    pub async fn add_driver(
        &mut self,
        label: DriverRef,
        options: DriverOptions,
        start: bool,
    ) -> anyhow::Result<()> {
        self.add_driver_on(label, options, start, None).await
    }

    /// [`World::add_driver`] on only some of the scenario's nodes (their
    /// names); `None` for all of them.
    pub async fn add_driver_on(
        &mut self,
        label: DriverRef,
        options: DriverOptions,
        start: bool,
        on: Option<Vec<String>>,
    ) -> anyhow::Result<()> {
        crate::drivers::default_nodes(self).await?;
        let nodes = on.unwrap_or_else(|| self.nodes.clone());
        if self.scenario.drivers().any(|(l, _)| *l == label) {
            anyhow::bail!("the scenario already has {label}");
        }
        let ctx = self.context()?.clone();
        let dctx = driver::Context {
            admin: ctx.cluster.client(),
            admin_config: ctx.cluster.kube_config(),
            namespace: self.namespace.clone(),
        };
        let driver = Box::new(Driver::new(dctx, nodes, options, ctx.cluster.clone(), None));
        // Registered before setting up, so teardown also cleans a half set-up
        // driver.
        self.scenario.push(Created::Driver {
            label: label.clone(),
            driver,
        });
        // Set up before the steps watch it: set_up races its own waits
        // against the driver breaking and says so itself.
        if start && let Some(driver) = self.scenario.driver_mut(&label) {
            let r = driver.set_up().await;
            self.setup_timings.append(&mut driver.setup_timings);
            r?;
        }
        if let Some(driver) = self.scenario.driver(&label) {
            self.broken.add(std::iter::once(driver.broken()));
        }
        Ok(())
    }

    pub async fn create_class(
        &mut self,
        for_driver: Option<DriverRef>,
        class: &DeviceClass,
    ) -> anyhow::Result<()> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let api: Api<DeviceClass> = Api::all(self.client()?);
        api.create(&PostParams::default(), class)
            .await
            .with_context(|| format!("creating DeviceClass {name}"))?;
        self.scenario
            .push(Created::DeviceClass { for_driver, name });
        Ok(())
    }

    pub async fn create_claim(
        &mut self,
        name: &str,
        spec: ResourceClaimSpec,
    ) -> anyhow::Result<()> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client()?, &self.namespace);
        let created = api
            .create(&PostParams::default(), &objects::claim(name, spec))
            .await
            .with_context(|| format!("creating ResourceClaim {name}"))?;
        self.scenario.push(Created::Claim {
            name: name.to_owned(),
            uid: created.metadata.uid.unwrap_or_default(),
        });
        Ok(())
    }

    pub async fn create_template(
        &mut self,
        name: &str,
        spec: ResourceClaimSpec,
    ) -> anyhow::Result<()> {
        let api: Api<ResourceClaimTemplate> = Api::namespaced(self.client()?, &self.namespace);
        api.create(&PostParams::default(), &objects::claim_template(name, spec))
            .await
            .with_context(|| format!("creating ResourceClaimTemplate {name}"))?;
        self.scenario.push(Created::Template(name.to_owned()));
        Ok(())
    }

    /// Creates `pod`; `pod_claims` are its pod-level claim names.
    /// A scenario with nodes of its own gives the pod the toleration of
    /// their taint.
    pub async fn create_pod(&mut self, pod: &Pod, pod_claims: Vec<String>) -> anyhow::Result<()> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client()?, &self.namespace);
        let mut pod = pod.clone();
        if self.scenario.owns_nodes()
            && let Some(spec) = pod.spec.as_mut()
        {
            spec.tolerations
                .get_or_insert_default()
                .push(crate::harness::node_lease::toleration());
        }
        api.create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating pod {name}"))?;
        self.scenario
            .push(Created::Pod(PodRecord { name, pod_claims }));
        Ok(())
    }

    /// Creates a manifest object through `api` (whoever's client it holds)
    /// and returns its name. A scenario with nodes of its own gives a
    /// workload's pod template the toleration of their taint.
    pub async fn create_object(
        &mut self,
        api: &Api<DynamicObject>,
        resource: ApiResource,
        namespaced: bool,
        obj: &DynamicObject,
    ) -> anyhow::Result<String> {
        let wanted = obj
            .metadata
            .name
            .clone()
            .or(obj.metadata.generate_name.clone())
            .unwrap_or_default();
        let mut obj = obj.clone();
        if self.scenario.owns_nodes() {
            tolerate_own_nodes(&mut obj.data);
        }
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating {} {wanted}", resource.kind))?;
        let name = created.metadata.name.unwrap_or_default();
        self.scenario.push(Created::Object {
            resource,
            name: name.clone(),
            namespaced,
        });
        Ok(name)
    }
}

/// Adds the own-node toleration to a manifest's pod spec: a pod's
/// `spec`, a workload's `spec.template.spec` or a CronJob's
/// `spec.jobTemplate.spec.template.spec`; other objects stay as they are.
fn tolerate_own_nodes(data: &mut serde_json::Value) {
    let toleration = match serde_json::to_value(crate::harness::node_lease::toleration()) {
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
        let key = crate::harness::node_lease::OWN_NODE_TAINT;
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
}
