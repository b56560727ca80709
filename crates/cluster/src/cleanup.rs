//! What a run leaves on the cluster: its node host pods removed, its
//! namespaces waited out, and the objects its scenarios made that are still
//! there, found by the names every scenario gives them.
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

use crate::{Cluster, Kind, RUN_LABEL};

impl Cluster {
    /// Removes the run's node host pods (real nodes and real clusters) and
    /// waits until their namespace is gone. Call once every driver stopped.
    pub async fn remove_node_hosts(&self) -> anyhow::Result<()> {
        let remote = match &self.kind {
            Kind::Local(l) => l.real.as_ref().map(|r| &r.remote),
            Kind::Remote(r) => Some(&**r),
        };
        if let Some(r) = remote {
            r.node_pods
                .remove()
                .await
                .context("removing the node host pods")?;
        }
        Ok(())
    }

    /// Waits (briefly) until the run's namespaces are gone.
    pub async fn wait_namespaces_gone(
        &self,
        run_id: &str,
    ) -> Result<(), dra_e2e_kube::wait::WaitError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let label = format!("{}={run_id}", RUN_LABEL);
        let config = kube::runtime::watcher::Config::default().labels(&label);
        dra_e2e_kube::wait::list(
            &api,
            config,
            "the run's namespaces to be deleted",
            Duration::from_secs(120),
            dra_e2e_kube::wait::none_left(|n: &Namespace| {
                n.metadata.name.clone().unwrap_or_default()
            }),
        )
        .await
    }

    /// Objects of the run's scenarios that are still there: namespaces,
    /// device classes, slices, cluster roles and bindings, admission policies.
    /// Names of everything a scenario creates start with its namespace.
    pub async fn leftovers(&self, namespaces: &[String]) -> anyhow::Result<Vec<String>> {
        use k8s_openapi::api::admissionregistration::v1::{
            ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
        };
        use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
        use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
        if namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let lp = ListParams::default();
        let c = self.client.clone();
        let ours = |name: &str| {
            namespaces.iter().any(|ns| {
                name == ns
                    || name.starts_with(&format!("{ns}-"))
                    || name.starts_with(&format!("{ns}."))
                    || name.contains(&format!("dra-kubelet-plugin-{ns}"))
            })
        };
        let mut found = Vec::new();
        macro_rules! check {
            ($kind:ty, $label:expr, $name:expr) => {
                for o in Api::<$kind>::all(c.clone())
                    .list(&lp)
                    .await
                    .with_context(|| format!("listing {}", $label))?
                    .items
                {
                    let n: Option<String> = $name(&o);
                    if let Some(n) = n.filter(|n| ours(n)) {
                        found.push(format!("{} {n}", $label));
                    }
                }
            };
        }
        check!(Namespace, "Namespace", |o: &Namespace| o
            .metadata
            .name
            .clone());
        // The node host pods' namespace is the run's, whatever its name.
        let hosts = ListParams::default().labels(crate::proxy::node_pods::NODE_HOSTS_LABEL);
        for ns in Api::<Namespace>::all(c.clone())
            .list(&hosts)
            .await
            .context("listing the node host pods' namespaces")?
            .items
        {
            found.push(format!(
                "Namespace {} (node host pods)",
                ns.metadata.name.unwrap_or_default()
            ));
        }
        // An owned node's taint names its owner's namespace.
        for node in Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
            .list(&lp)
            .await
            .context("listing nodes")?
            .items
        {
            if dra_e2e_kube::node_ready::owner(&node).is_some_and(&ours) {
                found.push(format!(
                    "taint {} on Node {}",
                    dra_e2e_kube::node_ready::OWN_NODE_TAINT,
                    node.metadata.name.unwrap_or_default()
                ));
            }
        }
        check!(DeviceClass, "DeviceClass", |o: &DeviceClass| o
            .metadata
            .name
            .clone());
        check!(
            ResourceSlice,
            "ResourceSlice of driver",
            |o: &ResourceSlice| Some(o.spec.driver.clone())
        );
        check!(ClusterRole, "ClusterRole", |o: &ClusterRole| o
            .metadata
            .name
            .clone());
        check!(
            ClusterRoleBinding,
            "ClusterRoleBinding",
            |o: &ClusterRoleBinding| o.metadata.name.clone()
        );
        check!(
            ValidatingAdmissionPolicy,
            "ValidatingAdmissionPolicy",
            |o: &ValidatingAdmissionPolicy| o.metadata.name.clone()
        );
        check!(
            ValidatingAdmissionPolicyBinding,
            "ValidatingAdmissionPolicyBinding",
            |o: &ValidatingAdmissionPolicyBinding| o.metadata.name.clone()
        );
        Ok(found)
    }
}
