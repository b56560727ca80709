//! Creating what a scenario makes: drivers, classes, claims, templates,
//! pods and manifest objects, each through the World so that its cleanup
//! goes on the scenario's stack in the same call (the harness's
//! `scenario::create` for all but drivers). A step never creates an
//! object any other way, so nothing a scenario made escapes teardown.
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
};
use kube::api::{ApiResource, DynamicObject};

use super::Created;
use crate::World;
use crate::harness::driver::{self, Driver, DriverOptions};
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
        let client = self.client()?;
        self.scenario
            .create_class(client, for_driver, class)
            .await?;
        Ok(())
    }

    pub async fn create_claim(
        &mut self,
        name: &str,
        spec: ResourceClaimSpec,
    ) -> anyhow::Result<()> {
        let claims = self.api::<ResourceClaim>()?;
        self.scenario.create_claim(&claims, name, spec).await?;
        Ok(())
    }

    pub async fn create_template(
        &mut self,
        name: &str,
        spec: ResourceClaimSpec,
    ) -> anyhow::Result<()> {
        let templates = self.api::<ResourceClaimTemplate>()?;
        self.scenario
            .create_template(&templates, name, spec)
            .await?;
        Ok(())
    }

    /// Creates `pod`; `pod_claims` are its pod-level claim names.
    /// A scenario with nodes of its own gives the pod the toleration of
    /// their taint.
    pub async fn create_pod(&mut self, pod: &Pod, pod_claims: Vec<String>) -> anyhow::Result<()> {
        let pods = self.api::<Pod>()?;
        self.scenario.create_pod(&pods, pod, pod_claims).await?;
        Ok(())
    }

    /// Creates a manifest object through `api` (whoever's client it holds)
    /// and returns its name. A scenario with nodes of its own gives a
    /// workload's pod template the toleration of their taint.
    pub async fn create_object(
        &mut self,
        objects: &kube::Api<DynamicObject>,
        resource: ApiResource,
        namespaced: bool,
        obj: &DynamicObject,
    ) -> anyhow::Result<String> {
        Ok(self
            .scenario
            .create_object(objects, resource, namespaced, obj)
            .await?)
    }
}
