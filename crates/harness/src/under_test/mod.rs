//! The driver under test for a whole run, as its profile says.
//!
//! Scenarios of the conformance pack do not make a driver of their own:
//! they use the one the run tests. For the suite's own driver
//! ([`Deployment::Builtin`]) that still means one hosted driver per
//! scenario, made by the scenario. Every other driver is one installation
//! shared by the run: already there ([`Deployment::Installed`], KEP-5970's
//! setting: the suite installs nothing), or deployed here from the
//! profile's manifests: onto the local cluster's real nodes
//! ([`Deployment::RealNodes`]; the nodes imported its image archives when
//! they started) or onto a kubeconfig cluster ([`Deployment::Manifests`];
//! its nodes have the images already, or pull them). Either way the run
//! starts only once the driver publishes devices on every ready node, so a
//! driver that never comes up fails once, with what was seen, instead of
//! failing every scenario with a timeout.
//!
//! What this module made (the manifests' objects, a DeviceClass from a
//! selector) it removes at the end of the run, most recent first.
//!
//! With `--interpose`, the driver registers in a private directory and
//! the runner's interposer stands between it and the kubelet
//! ([`interposed`]), so scenarios count, fail and stall its calls.
//!
//! Floor 3: uses `cluster`, `plugin` and the ground.
pub mod device_check;
pub mod interposed;
mod manifests;
pub mod pack;
mod publishing;
pub mod reinstall;
mod rollout;
mod simulated;
pub mod slice_watch;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;

use dra_e2e_cluster::Cluster;
use dra_e2e_kube::wait::{self, Check};
use dra_e2e_plugin::interposer::InterposerFault;
use dra_e2e_profile::{self as profile, Deployment, Profile};

pub use manifests::{DriverPods, manifest_daemonsets, surges};
pub use publishing::{devices_per_node, ready_nodes};
pub use rollout::RollOut;

/// How long a deployed driver may take to publish devices on every node.
const DEVICES_TIMEOUT: Duration = Duration::from_secs(180);

/// How long the objects the run made may take to go.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum UnderTestError {
    #[error(
        "the profile {profile} deploys driver {driver} on the local cluster's real nodes \
         (deployment.mode: RealNodes); run with --cluster local --node-kind real"
    )]
    NeedsRealNodes { profile: String, driver: String },
    #[error(
        "the profile {profile} says driver {driver} is already installed (deployment.mode: \
         Installed), but this run starts its own local cluster, where nothing is installed; \
         run against the driver's cluster with --cluster kubeconfig [--kubeconfig FILE]"
    )]
    NeedsInstalled { profile: String, driver: String },
    #[error(
        "the profile {profile} has the runner apply the manifests of driver {driver} to the \
         kubeconfig cluster (deployment.mode: Manifests), but this run starts its own local \
         cluster; run against that cluster with --cluster kubeconfig [--kubeconfig FILE] (for \
         the local cluster's real nodes, use deployment.mode RealNodes)"
    )]
    NeedsKubeconfig { profile: String, driver: String },
    #[error(
        "the profile {profile} starts driver {driver} on the local cluster's simulated nodes \
         (deployment.mode: SimulatedNodes); run with --cluster local (and the default \
         --node-kind simulated)"
    )]
    NeedsSimulatedNodes { profile: String, driver: String },
    #[error("starting driver {driver} on node {node} ({program}): {message}")]
    Start {
        driver: String,
        node: String,
        program: String,
        message: String,
    },
    #[error("putting the interposer between the kubelet and driver {driver}: {message}\n{pods}")]
    Interpose {
        driver: String,
        message: String,
        pods: String,
    },
    #[error("reading manifest {path}: {message}")]
    Manifest { path: String, message: String },
    #[error("deploying driver {driver}: {message}")]
    Deploy { driver: String, message: String },
    #[error("DeviceClass {class} of driver {driver}: {message}")]
    Class {
        driver: String,
        class: String,
        message: String,
    },
    #[error(
        "driver {driver} publishes {expected} on node(s) {nodes}: {message}\n{pods}The run \
         needs the driver running on every ready node before its scenarios start."
    )]
    NoDevices {
        driver: String,
        /// What it should publish and does not, e.g. "no devices".
        expected: String,
        nodes: String,
        message: String,
        pods: String,
    },
}

/// Something the run made for the driver, removed at the end.
#[derive(Debug, Clone)]
struct Made {
    resource: ApiResource,
    namespace: Option<String>,
    name: String,
    /// An object of the profile's manifests (the driver's own), not one the
    /// runner made for it (a DeviceClass from a selector).
    manifest: bool,
}

/// The run's driver under test.
#[derive(Debug)]
pub struct UnderTest {
    pub profile: Profile,
    /// The DeviceClass the scenarios' claims ask for; `None` for the
    /// built-in driver, whose scenarios each make their own.
    pub class: Option<String>,
    /// Where the driver's pods are, when its manifests say (a DaemonSet).
    pub pods: Vec<DriverPods>,
    /// The images the driver's pods run (for the reports).
    pub images: BTreeSet<String>,
    made: std::sync::Mutex<Vec<Made>>,
    /// The driver's processes on simulated nodes, one per node.
    processes: std::sync::Mutex<Vec<dra_e2e_cluster::host::process::ManagedProcess>>,
    /// The device count a scenario restarted the driver with; `None`: as
    /// deployed (the profile's devicesPerNode).
    devices_now: tokio::sync::Mutex<Option<u32>>,
    /// Whether the run puts the interposer in front of the driver (and
    /// whether it is broken on purpose).
    interpose: Option<InterposerFault>,
    /// The kubelet's root directory on the cluster's nodes, under which
    /// the driver behind the interposer registers privately.
    kubelet_root: std::path::PathBuf,
    /// The interposer, once started.
    pub interposed: Option<interposed::Interposed>,
    /// A scenario uninstalled the driver and has not installed it again
    /// ([`reinstall`]).
    uninstalled: std::sync::atomic::AtomicBool,
}

impl UnderTest {
    /// The suite's own driver: nothing to install.
    pub fn builtin() -> Self {
        Self::nothing_made(
            profile::builtin(),
            None,
            dra_e2e_cluster::real_node::kubelet::ROOT_DIR.into(),
        )
    }

    /// `profile`'s driver before anything of it exists.
    fn nothing_made(
        profile: Profile,
        interpose: Option<InterposerFault>,
        kubelet_root: std::path::PathBuf,
    ) -> Self {
        UnderTest {
            profile,
            class: None,
            pods: Vec::new(),
            images: BTreeSet::new(),
            made: Default::default(),
            processes: Default::default(),
            devices_now: Default::default(),
            interpose,
            kubelet_root,
            interposed: None,
            uninstalled: Default::default(),
        }
    }

    pub fn is_builtin(&self) -> bool {
        matches!(self.profile.deployment, Deployment::Builtin)
    }

    pub fn driver_name(&self) -> &str {
        &self.profile.driver_name
    }

    /// The driver as the closing lines name it.
    pub fn display_name(&self) -> String {
        if self.is_builtin() {
            format!("the suite's own driver ({})", self.profile_name())
        } else {
            self.profile.driver_name.clone()
        }
    }

    fn profile_name(&self) -> String {
        match &self.profile.file {
            Some(f) => f.display().to_string(),
            None => "given by --driver-name and --device-class".to_owned(),
        }
    }

    /// Checks before a cluster starts that `profile` fits the run: a local
    /// cluster with `real_nodes` or not, or a kubeconfig cluster.
    pub fn check_fits(
        profile: &Profile,
        local: bool,
        real_nodes: bool,
    ) -> Result<(), UnderTestError> {
        let name = match &profile.file {
            Some(f) => f.display().to_string(),
            None => "given by --driver-name and --device-class".to_owned(),
        };
        let driver = profile.driver_name.clone();
        match &profile.deployment {
            Deployment::Builtin => Ok(()),
            Deployment::Installed if local => Err(UnderTestError::NeedsInstalled {
                profile: name,
                driver,
            }),
            Deployment::Installed => Ok(()),
            Deployment::RealNodes { .. } if local && real_nodes => Ok(()),
            Deployment::RealNodes { .. } => Err(UnderTestError::NeedsRealNodes {
                profile: name,
                driver,
            }),
            Deployment::Manifests { .. } if local => Err(UnderTestError::NeedsKubeconfig {
                profile: name,
                driver,
            }),
            Deployment::Manifests { .. } => Ok(()),
            Deployment::SimulatedNodes { .. } if local && !real_nodes => Ok(()),
            Deployment::SimulatedNodes { .. } => Err(UnderTestError::NeedsSimulatedNodes {
                profile: name,
                driver,
            }),
        }
    }

    /// Gets the driver of `profile` running in `cluster` and waits until it
    /// publishes devices on every ready node. On failure, what was made is
    /// removed again.
    /// With `interpose`, the driver registers in a private directory and
    /// the interposer registers with the kubelet in its place.
    pub async fn install(
        cluster: &Cluster,
        profile: Profile,
        interpose: Option<InterposerFault>,
    ) -> Result<Self, UnderTestError> {
        let mut under = Self::nothing_made(profile, interpose, cluster.kubelet_root());
        if under.is_builtin() {
            return Ok(under);
        }
        if !under.profile.faults.is_empty() && interpose.is_none() {
            let names: Vec<&str> = under.profile.faults.iter().map(|f| f.name()).collect();
            return Err(UnderTestError::Deploy {
                driver: under.profile.driver_name.clone(),
                message: format!(
                    "the profile plants faults ({}) in the driver's answers, which only the \
                     interposer can do in front of a driver the runner did not build: run with \
                     --interpose",
                    names.join(", ")
                ),
            });
        }
        if interpose.is_some()
            && let Err(reason) = under.profile.interposable()
        {
            return Err(UnderTestError::Deploy {
                driver: under.profile.driver_name.clone(),
                message: format!("--interpose: {reason}"),
            });
        }
        let client = cluster.client();
        if let Deployment::SimulatedNodes { command } = &under.profile.deployment {
            let command = command.clone();
            if let Err(e) = under.start_on_simulated_nodes(cluster, &command, None) {
                under.stop_processes();
                return Err(e);
            }
        }
        match under.set_up(cluster).await {
            Ok(()) => Ok(under),
            Err(e) => {
                for problem in under.uninstall(&client).await {
                    tracing::warn!("{problem}");
                }
                Err(e)
            }
        }
    }

    async fn set_up(&mut self, cluster: &Cluster) -> Result<(), UnderTestError> {
        let client = &cluster.client();
        let driver = self.profile.driver_name.clone();
        if let Deployment::RealNodes { manifests, .. } | Deployment::Manifests { manifests } =
            &self.profile.deployment
        {
            for path in manifests.clone() {
                let pods = self.create_objects(client, &path, true).await?;
                self.pods.extend(pods);
            }
        }
        self.class = Some(self.class_ready(client).await?);
        if let Some(fault) = self.interpose {
            let nodes = ready_nodes(client)
                .await
                .map_err(|e| UnderTestError::Deploy {
                    driver: driver.clone(),
                    message: format!("listing nodes: {e}"),
                })?;
            let faults = dra_e2e_plugin::fault::Faults::new(self.profile.faults.iter().copied());
            let started = match interposed::Interposed::start(
                cluster, &driver, &nodes, fault, faults,
            )
            .await
            {
                Ok(i) => i,
                Err(message) => {
                    return Err(UnderTestError::Interpose {
                        driver: driver.clone(),
                        message,
                        pods: self.describe_pods(client).await,
                    });
                }
            };
            self.interposed = Some(started);
        }
        self.wait_devices(client, &driver, None, DEVICES_TIMEOUT)
            .await?;
        self.images = self.pod_images(client).await;
        Ok(())
    }

    fn deploy_error(&self, message: String) -> UnderTestError {
        UnderTestError::Deploy {
            driver: self.driver_name().to_owned(),
            message,
        }
    }

    /// The class scenarios use: the profile's existing one (which must
    /// exist), or one made from its selector.
    async fn class_ready(&mut self, client: &kube::Client) -> Result<String, UnderTestError> {
        let driver = self.profile.driver_name.clone();
        let classes: Api<DeviceClass> = Api::all(client.clone());
        match self.profile.device_class.clone() {
            profile::DeviceClass::Existing(name) => {
                let found = classes
                    .get_opt(&name)
                    .await
                    .map_err(|e| UnderTestError::Class {
                        driver: driver.clone(),
                        class: name.clone(),
                        message: format!("reading it: {e}"),
                    })?;
                if found.is_none() {
                    return Err(UnderTestError::Class {
                        driver,
                        class: name,
                        message: "the cluster has no DeviceClass of that name (the profile's \
                                  deviceClass.name must name an existing class, or give \
                                  deviceClass.selector to have one made)"
                            .to_owned(),
                    });
                }
                Ok(name)
            }
            profile::DeviceClass::Selector(cel) => {
                let name = format!("dra-e2e-{}", driver.replace('.', "-"));
                let class = dra_e2e_kube::objects::device_class(&name, &driver, None, Some(&cel))
                    .map_err(|e| UnderTestError::Class {
                    driver: driver.clone(),
                    class: name.clone(),
                    message: e.to_string(),
                })?;
                classes
                    .create(&PostParams::default(), &class)
                    .await
                    .map_err(|e| UnderTestError::Class {
                        driver: driver.clone(),
                        class: name.clone(),
                        message: format!("creating it with selector {cel:?}: {e}"),
                    })?;
                self.remember(Made {
                    resource: ApiResource::erase::<DeviceClass>(&()),
                    namespace: None,
                    name: name.clone(),
                    manifest: false,
                });
                Ok(name)
            }
        }
    }

    /// Removes what the run made, most recent first, and waits until it is
    /// gone; returns what could not be removed.
    pub async fn uninstall(&self, client: &kube::Client) -> Vec<String> {
        // The interposer goes first: the kubelet's registration of it goes
        // with its socket, before the driver behind it stops.
        let mut problems = Vec::new();
        if let Some(i) = &self.interposed {
            problems.extend(i.stop().await);
        }
        problems.extend(
            self.stop_processes()
                .into_iter()
                .map(|p| format!("{p} did not stop on SIGTERM within 10s")),
        );
        loop {
            let next = self.made.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some(m) = next else { break };
            problems.extend(self.remove(client, &m).await);
        }
        // A driver the run deployed takes its slices with it: the kubelets
        // would wipe those of its nodes only after their wiping delay, and
        // a next run would count them as the new driver's devices.
        if self.deploys() {
            let slices: Api<ResourceSlice> = Api::all(client.clone());
            let lp = ListParams::default().fields(&format!("spec.driver={}", self.driver_name()));
            if let Err(e) = slices
                .delete_collection(&DeleteParams::default(), &lp)
                .await
            {
                problems.push(format!(
                    "deleting the slices of driver {}: {e}",
                    self.driver_name()
                ));
            }
        }
        problems
    }

    /// Deletes one object the run made and waits until it is gone; returns
    /// what went wrong.
    async fn remove(&self, client: &kube::Client, m: &Made) -> Option<String> {
        let api: Api<DynamicObject> = match &m.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &m.resource),
            None => Api::all_with(client.clone(), &m.resource),
        };
        let what = format!(
            "{} {} of driver {}",
            m.resource.kind, m.name, self.profile.driver_name
        );
        match api.delete(&m.name, &DeleteParams::foreground()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return None,
            Err(e) => return Some(format!("deleting {what}: {e}")),
        }
        // A dynamic type has no watch here; its deletion is short.
        wait::poll(
            &format!("{what} to be gone"),
            REMOVE_TIMEOUT,
            Duration::from_millis(500),
            || {
                let api = api.clone();
                let name = m.name.clone();
                async move {
                    match api.get_opt(&name).await {
                        Ok(None) => Check::Done(()),
                        Ok(Some(_)) => Check::Pending("still there".to_owned()),
                        Err(e) => Check::Pending(format!("reading it: {e}")),
                    }
                }
            },
        )
        .await
        .err()
        .map(|e| e.to_string())
    }

    /// Whether the runner deployed the driver (and so removes it).
    fn deploys(&self) -> bool {
        matches!(
            self.profile.deployment,
            Deployment::RealNodes { .. }
                | Deployment::Manifests { .. }
                | Deployment::SimulatedNodes { .. }
        )
    }

    fn remember(&self, made: Made) {
        self.made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(made);
    }

    /// What the reports say about the driver.
    pub fn properties(&self) -> Vec<(String, String)> {
        let interposer = if self.is_builtin() {
            "not needed (the runner hosts the driver)"
        } else if self.interposed.is_some() {
            "yes: the kubelet's calls pass the runner"
        } else {
            "no"
        };
        let mut v = vec![
            ("driver.interposer".to_owned(), interposer.to_owned()),
            ("driver.name".to_owned(), self.profile.driver_name.clone()),
            ("driver.profile".to_owned(), self.profile_name()),
            (
                "driver.deployment".to_owned(),
                self.profile.deployment.mode().to_string(),
            ),
            (
                "driver.capabilities".to_owned(),
                self.profile
                    .capabilities
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ];
        if let Some(class) = &self.class {
            v.push(("driver.device-class".to_owned(), class.clone()));
        }
        v.push((
            "driver.version".to_owned(),
            if self.is_builtin() {
                format!("built in (dra-e2e {})", env!("CARGO_PKG_VERSION"))
            } else if self.images.is_empty() {
                "unknown (no driver pods in its manifests)".to_owned()
            } else {
                self.images.iter().cloned().collect::<Vec<_>>().join(",")
            },
        ));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifests_profile_fits_only_a_kubeconfig_cluster() {
        let profile = Profile {
            deployment: Deployment::Manifests {
                manifests: vec!["/p/driver.yaml".into()],
            },
            file: Some("/p/d.yaml".into()),
            ..profile::Profile::from_flags("d.example.com", "c")
                .unwrap()
                .profile
        };
        assert!(UnderTest::check_fits(&profile, false, false).is_ok());
        for real_nodes in [false, true] {
            let e = UnderTest::check_fits(&profile, true, real_nodes).unwrap_err();
            assert_eq!(
                e.to_string(),
                "the profile /p/d.yaml has the runner apply the manifests of driver \
                 d.example.com to the kubeconfig cluster (deployment.mode: Manifests), but this \
                 run starts its own local cluster; run against that cluster with --cluster \
                 kubeconfig [--kubeconfig FILE] (for the local cluster's real nodes, use \
                 deployment.mode RealNodes)"
            );
        }
    }
}
