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
pub mod reinstall;
pub mod slice_watch;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use kube::discovery::Scope;
use kube::runtime::watcher;

use dra_e2e_cluster::Cluster;
use dra_e2e_kube::retry::{Retry, is_conflict};
use dra_e2e_kube::wait::{self, Check};
use dra_e2e_plugin::interposer::InterposerFault;
use dra_e2e_profile::{self as profile, Deployment, Profile};

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

/// Pods of the driver: a DaemonSet of its manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverPods {
    pub namespace: String,
    pub daemonset: String,
    /// Its pod selector's `matchLabels`.
    pub labels: BTreeMap<String, String>,
}

impl DriverPods {
    pub fn selector(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A rollout of the driver's DaemonSet(s) started by
/// [`UnderTest::start_roll_out`] and not yet waited for.
#[derive(Debug)]
pub struct RollOut {
    /// Each DaemonSet with the generation that carries the rollout.
    sets: Vec<(DriverPods, i64)>,
    /// Behind the interposer: the instances each node had before.
    instances_before: Option<BTreeMap<String, Vec<dra_e2e_plugin::interposer::InstanceView>>>,
}

/// Whether the DaemonSet's updates start a node's new pod before its old
/// one goes (`RollingUpdate` with a `maxSurge` above zero), so the node
/// never goes without the driver; `Err` says what it does instead.
pub fn surges(ds: &DaemonSet) -> Result<(), String> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let strategy = ds.spec.update_strategy.as_ref();
    // Absent, the API server defaults it to RollingUpdate.
    let kind = strategy
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate");
    if kind != "RollingUpdate" {
        return Err(format!(
            "updates its pods by {kind}, not by a rolling update"
        ));
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let shown = |v: Option<&IntOrString>, default: &str| match v {
        Some(IntOrString::Int(n)) => n.to_string(),
        Some(IntOrString::String(s)) => s.clone(),
        None => format!("{default} (default)"),
    };
    // A percentage is of the nodes, rounded up: any above 0 % surges.
    let above_zero = match rolling.and_then(|r| r.max_surge.as_ref()) {
        Some(IntOrString::Int(n)) => *n > 0,
        Some(IntOrString::String(s)) => s.trim_end_matches('%').parse::<u32>().is_ok_and(|n| n > 0),
        None => false,
    };
    if above_zero {
        Ok(())
    } else {
        Err(format!(
            "updates with maxSurge {} and maxUnavailable {}: a node's old pod goes before its \
             new one starts",
            shown(rolling.and_then(|r| r.max_surge.as_ref()), "0"),
            shown(rolling.and_then(|r| r.max_unavailable.as_ref()), "1"),
        ))
    }
}

/// The DaemonSets of the profile's manifests, read from its files (none
/// for a driver the runner does not deploy from manifests): what the
/// runner decides by before anything is deployed.
pub fn manifest_daemonsets(profile: &Profile) -> Result<Vec<DaemonSet>, UnderTestError> {
    let manifests = match &profile.deployment {
        Deployment::RealNodes { manifests, .. } | Deployment::Manifests { manifests } => manifests,
        _ => return Ok(Vec::new()),
    };
    let mut sets = Vec::new();
    for path in manifests {
        for obj in read_manifest(path)? {
            let is_daemonset = obj
                .types
                .as_ref()
                .is_some_and(|t| t.kind == "DaemonSet" && t.api_version == "apps/v1");
            if is_daemonset {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let ds: DaemonSet = serde_json::to_value(&obj)
                    .and_then(serde_json::from_value)
                    .map_err(|e| UnderTestError::Manifest {
                        path: path.display().to_string(),
                        message: format!("DaemonSet {name}: {e}"),
                    })?;
                sets.push(ds);
            }
        }
    }
    Ok(sets)
}

/// Every object of one manifest file, in order.
fn read_manifest(path: &std::path::Path) -> Result<Vec<DynamicObject>, UnderTestError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| UnderTestError::Manifest {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    serde_saphyr::from_multiple(&text).map_err(|e| UnderTestError::Manifest {
        path: shown,
        message: format!("not valid YAML: {e}"),
    })
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

    /// Starts `command` once per simulated node, its placeholders filled in
    /// with that node's directories (and told `devices` through the
    /// profile's deviceCount, when given).
    fn start_on_simulated_nodes(
        &self,
        cluster: &Cluster,
        command: &[String],
        devices: Option<u32>,
    ) -> Result<(), UnderTestError> {
        let driver = self.profile.driver_name.clone();
        let dirs =
            cluster
                .simulated_node_dirs()
                .ok_or_else(|| UnderTestError::NeedsSimulatedNodes {
                    profile: self.profile_name(),
                    driver: driver.clone(),
                })?;
        let logs = dirs.dir.join("driver-under-test");
        for (node, root, cdi) in &dirs.nodes {
            let start = |message: String| UnderTestError::Start {
                driver: driver.clone(),
                node: node.clone(),
                program: command.first().cloned().unwrap_or_default(),
                message,
            };
            // Behind the interposer, the driver registers where only the
            // interposer looks.
            let registration = if self.interpose.is_some() {
                interposed::private_registry(root, &driver)
            } else {
                root.join("plugins_registry")
            };
            let plugin = root.join("plugins").join(&driver);
            for d in [&registration, &plugin, cdi, &logs] {
                std::fs::create_dir_all(d)
                    .map_err(|e| start(format!("creating {}: {e}", d.display())))?;
            }
            let values: BTreeMap<&str, String> = [
                ("nodeName", node.clone()),
                ("kubeletDir", root.display().to_string()),
                ("registrationDir", registration.display().to_string()),
                ("pluginDir", plugin.display().to_string()),
                ("cdiDir", cdi.display().to_string()),
                ("kubeconfig", dirs.kubeconfig.display().to_string()),
                ("driverName", driver.clone()),
            ]
            .into_iter()
            .collect();
            let mut argv: Vec<String> = command.iter().map(|a| fill(a, &values)).collect();
            // A program given by path is the profile's, relative to its file.
            if let (Some(program), Some(file)) = (argv.first_mut(), &self.profile.file)
                && program.contains('/')
                && std::path::Path::new(program.as_str()).is_relative()
            {
                let dir = file.parent().unwrap_or(std::path::Path::new("."));
                let resolved = dir.join(program.as_str());
                *program = std::path::absolute(&resolved)
                    .unwrap_or(resolved)
                    .display()
                    .to_string();
            }
            // The kubelet's registration directory, where the profile says
            // how to pass it.
            let mut env: Vec<(String, String)> = Vec::new();
            if let Some(setting) = &self.profile.registration_dir {
                setting.apply(&mut argv, &mut env, &registration.display().to_string());
            }
            if let (Some(setting), Some(n)) = (&self.profile.device_count, devices) {
                setting.apply(&mut argv, &mut env, &n.to_string());
            }
            // `env` sets the variables and runs the program, so the process
            // is the driver's own (its signals reach the driver).
            let (program, args): (std::path::PathBuf, Vec<std::ffi::OsString>) = if env.is_empty() {
                let mut it = argv.into_iter();
                let program = it
                    .next()
                    .ok_or_else(|| start("the command is empty".to_owned()))?;
                (program.into(), it.map(Into::into).collect())
            } else {
                (
                    "env".into(),
                    env.into_iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .chain(argv)
                        .map(Into::into)
                        .collect(),
                )
            };
            let log = logs.join(format!("{node}.log"));
            let p = dra_e2e_cluster::host::process::ManagedProcess::spawn(
                &format!("driver {driver} on {node}"),
                &program,
                args,
                &log,
            )
            .map_err(|e| start(e.to_string()))?;
            self.processes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(p);
        }
        Ok(())
    }

    /// Restarts the driver telling it to offer `devices` per node (through
    /// the profile's deviceCount): a new rollout of its DaemonSet(s) where
    /// the runner applied its manifests, its processes started again on
    /// simulated nodes. Returns once the driver runs again; its slices are
    /// for the caller to watch.
    pub async fn restart_with_devices(
        &self,
        cluster: &Cluster,
        devices: u32,
    ) -> Result<(), UnderTestError> {
        let driver = self.driver_name().to_owned();
        let deploy = |message: String| UnderTestError::Deploy {
            driver: driver.clone(),
            message,
        };
        let Some(setting) = &self.profile.device_count else {
            return Err(deploy(format!(
                "cannot change how many devices it offers: profile {} has no deviceCount",
                self.profile_name()
            )));
        };
        let mut now = self.devices_now.lock().await;
        // Noted before trying: a restart that fails half-way may have
        // changed the driver, and teardown must then restore it.
        *now = (Some(devices) != self.profile.devices_per_node).then_some(devices);
        match &self.profile.deployment {
            Deployment::SimulatedNodes { command } => {
                let left = self.stop_processes();
                if !left.is_empty() {
                    tracing::warn!("driver {driver} needed SIGKILL to stop: {left:?}");
                }
                self.start_on_simulated_nodes(cluster, command, Some(devices))?;
            }
            Deployment::RealNodes { .. } | Deployment::Manifests { .. } => {
                if self.pods.is_empty() {
                    return Err(deploy(
                        "cannot restart it: its manifests have no DaemonSet".to_owned(),
                    ));
                }
                let client = cluster.client();
                for set in &self.pods {
                    roll_out_with(&client, set, setting, devices)
                        .await
                        .map_err(deploy)?;
                }
            }
            other => {
                return Err(deploy(format!(
                    "the runner restarts only a driver it deploys, not one in mode {}",
                    other.mode()
                )));
            }
        }
        Ok(())
    }

    /// Rolls the driver's DaemonSet(s) out again with nothing changed, as
    /// an update of the driver would: returns once every node runs the
    /// new pod alone.
    pub async fn roll_out(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        let started = self.start_roll_out(cluster).await?;
        self.wait_rolled_out(cluster, started).await
    }

    /// Starts a rollout of the driver's DaemonSet(s) with nothing changed
    /// and returns at once, so a scenario can act while old and new pods
    /// overlap; [`UnderTest::wait_rolled_out`] waits for its end.
    pub async fn start_roll_out(&self, cluster: &Cluster) -> Result<RollOut, UnderTestError> {
        let deploy = |message: String| self.deploy_error(message);
        match &self.profile.deployment {
            Deployment::RealNodes { .. } | Deployment::Manifests { .. } => {}
            other => {
                return Err(deploy(format!(
                    "only a driver the runner deploys from manifests rolls out, not one in \
                     mode {}",
                    other.mode()
                )));
            }
        }
        if self.pods.is_empty() {
            return Err(deploy(
                "cannot roll it out: its manifests have no DaemonSet".to_owned(),
            ));
        }
        let instances_before = match &self.interposed {
            Some(i) => Some(i.instances().await),
            None => None,
        };
        let client = cluster.client();
        let mut sets = Vec::new();
        for set in &self.pods {
            let generation = start_roll_out_again(&client, set).await.map_err(deploy)?;
            sets.push((set.clone(), generation));
        }
        Ok(RollOut {
            sets,
            instances_before,
        })
    }

    /// Waits until the rollout `started` is complete: every node runs an
    /// updated, available pod and no old one (behind the interposer: and
    /// the kubelet registered the new instances).
    pub async fn wait_rolled_out(
        &self,
        cluster: &Cluster,
        started: RollOut,
    ) -> Result<(), UnderTestError> {
        let deploy = |message: String| self.deploy_error(message);
        let client = cluster.client();
        for (set, generation) in &started.sets {
            wait_rolled_out_again(&client, set, *generation)
                .await
                .map_err(deploy)?;
        }
        // Behind the interposer the kubelet's side is known too: done once
        // the new instances are registered.
        if let (Some(i), Some(before)) = (&self.interposed, &started.instances_before) {
            i.wait_replaced(before, REGISTER_AGAIN_TIMEOUT)
                .await
                .map_err(deploy)?;
        }
        Ok(())
    }

    fn deploy_error(&self, message: String) -> UnderTestError {
        UnderTestError::Deploy {
            driver: self.driver_name().to_owned(),
            message,
        }
    }

    /// Restarts the driver with the profile's devicesPerNode if a scenario
    /// left it with another count; nothing otherwise.
    pub async fn restore_devices(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        let changed = *self.devices_now.lock().await;
        match (changed, self.profile.devices_per_node) {
            (Some(_), Some(n)) => self.restart_with_devices(cluster, n).await,
            _ => Ok(()),
        }
    }

    /// Waits until the driver publishes devicesPerNode devices (or, without
    /// it, any) on every ready node, so the next scenario finds the driver as
    /// deployed.
    pub async fn wait_devices_as_deployed(
        &self,
        client: &kube::Client,
    ) -> Result<(), UnderTestError> {
        self.wait_devices(
            client,
            self.driver_name(),
            self.profile.devices_per_node,
            DEVICES_TIMEOUT,
        )
        .await
    }

    /// Stops the driver's processes on simulated nodes (SIGTERM, then
    /// SIGKILL after a grace period); returns those that needed SIGKILL.
    fn stop_processes(&self) -> Vec<String> {
        let processes: Vec<_> =
            std::mem::take(&mut *self.processes.lock().unwrap_or_else(|e| e.into_inner()));
        let refs: Vec<&dra_e2e_cluster::host::process::ManagedProcess> = processes.iter().collect();
        dra_e2e_cluster::host::process::stop_all(&refs, Duration::from_secs(10))
    }

    /// Creates every object of one manifest file, in order, and returns the
    /// driver pods its DaemonSets make; with `remember`, they are removed at
    /// the end of the run (an installation again creates objects already
    /// remembered).
    async fn create_objects(
        &self,
        client: &kube::Client,
        path: &std::path::Path,
        remember: bool,
    ) -> Result<Vec<DriverPods>, UnderTestError> {
        let shown = path.display().to_string();
        let objs = read_manifest(path)?;
        let driver = self.profile.driver_name.clone();
        let deploy = |message: String| UnderTestError::Deploy {
            driver: driver.clone(),
            message: format!("{shown}: {message}"),
        };
        let mut pods = Vec::new();
        for mut obj in objs {
            let types = obj
                .types
                .as_ref()
                .ok_or_else(|| deploy("an object has no apiVersion and kind".to_owned()))?;
            let gvk = kube::api::GroupVersionKind::try_from(types)
                .map_err(|e| deploy(format!("{}/{}: {e}", types.api_version, types.kind)))?;
            let (resource, caps) =
                kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|e| {
                        deploy(format!(
                            "the cluster does not serve {}/{}: {e}",
                            types.api_version, types.kind
                        ))
                    })?;
            let name = obj.metadata.name.clone().unwrap_or_default();
            let namespace = (caps.scope == Scope::Namespaced).then(|| {
                obj.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_owned())
            });
            let api: Api<DynamicObject> = match &namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            if resource.kind == "DaemonSet" {
                let ds: DaemonSet = serde_json::to_value(&obj)
                    .and_then(serde_json::from_value)
                    .map_err(|e| deploy(format!("DaemonSet {name}: {e}")))?;
                let labels = ds.spec.selector.match_labels.clone().unwrap_or_default();
                pods.push(DriverPods {
                    namespace: namespace.clone().unwrap_or_default(),
                    daemonset: name.clone(),
                    labels: labels.into_iter().collect(),
                });
                if self.interpose.is_some() {
                    // Where the interposer looks for it: under the
                    // kubelet root of the cluster's nodes.
                    let dir = interposed::private_registry(&self.kubelet_root, &driver);
                    let ds = match &self.profile.registration_dir {
                        Some(setting) => register_privately(ds, setting, &dir),
                        None => register_privately_by_volume(ds, &self.kubelet_root, &dir),
                    }
                    .map_err(|e| deploy(format!("DaemonSet {name}: {e}")))?;
                    obj = serde_json::to_value(&ds)
                        .and_then(serde_json::from_value)
                        .map_err(|e| deploy(format!("DaemonSet {name}: {e}")))?;
                }
            }
            api.create(&PostParams::default(), &obj)
                .await
                .map_err(|e| deploy(format!("creating {} {name}: {e}", resource.kind)))?;
            if remember {
                self.remember(Made {
                    resource,
                    namespace,
                    name,
                    manifest: true,
                });
            }
        }
        Ok(pods)
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

    /// Waits until the driver's slices hold at least one device for every
    /// ready node.
    async fn wait_devices(
        &self,
        client: &kube::Client,
        driver: &str,
        want: Option<u32>,
        timeout: Duration,
    ) -> Result<(), UnderTestError> {
        let nodes = ready_nodes(client)
            .await
            .map_err(|e| UnderTestError::Deploy {
                driver: driver.to_owned(),
                message: format!("listing nodes: {e}"),
            })?;
        // A node falls short with no device, or with another count than
        // `want` when it is given.
        let short = |per_node: &BTreeMap<String, Vec<String>>| -> Vec<String> {
            nodes
                .iter()
                .filter(|n| {
                    per_node
                        .get(*n)
                        .is_none_or(|d| d.is_empty() || want.is_some_and(|w| d.len() != w as usize))
                })
                .cloned()
                .collect()
        };
        let (goal, expected) = match want {
            Some(w) => (
                format!("{w} devices"),
                format!("not the {w} devices per node its profile gives (devicesPerNode)"),
            ),
            None => ("devices".to_owned(), "no devices".to_owned()),
        };
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
        let what = format!("driver {driver} to publish {goal} on every ready node");
        let result = wait::list(&slices, config, &what, timeout, |items| {
            let per_node = devices_per_node(items);
            let missing = short(&per_node);
            if missing.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!(
                    "devices per node {:?}; short on {missing:?}",
                    per_node
                        .iter()
                        .map(|(n, d)| (n.clone(), d.len()))
                        .collect::<BTreeMap<_, _>>()
                ))
            }
        })
        .await;
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let per_node = slices
                    .list(&ListParams::default().fields(&format!("spec.driver={driver}")))
                    .await
                    .map(|l| devices_per_node(&l.items))
                    .unwrap_or_default();
                Err(UnderTestError::NoDevices {
                    driver: driver.to_owned(),
                    expected,
                    nodes: short(&per_node).join(", "),
                    message: e.to_string(),
                    pods: self.describe_pods(client).await,
                })
            }
        }
    }

    /// One line per driver pod: node, phase, container states; on simulated
    /// nodes the end of each process's log.
    pub async fn describe_pods(&self, client: &kube::Client) -> String {
        let mut out = self.describe_deployed_pods(client).await;
        for p in self
            .processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            out.push_str(&format!(
                "{} (pid {}, {}): {}\n{}\n",
                p.component(),
                p.pid(),
                p.log_path().display(),
                match p.exit_status() {
                    Some(s) => format!("exited, {s}"),
                    None => "running".to_owned(),
                },
                p.log_tail(10)
            ));
        }
        out
    }

    async fn describe_deployed_pods(&self, client: &kube::Client) -> String {
        let mut out = String::new();
        for set in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
            match api
                .list(&ListParams::default().labels(&set.selector()))
                .await
            {
                Ok(list) if list.items.is_empty() => out.push_str(&format!(
                    "DaemonSet {}/{} has no pods\n",
                    set.namespace, set.daemonset
                )),
                Ok(list) => {
                    for p in &list.items {
                        out.push_str(&format!(
                            "driver pod {}/{}: {}\n",
                            set.namespace,
                            p.metadata.name.as_deref().unwrap_or("?"),
                            wait::describe_pod(Some(p))
                        ));
                    }
                }
                Err(e) => out.push_str(&format!(
                    "listing the pods of DaemonSet {}/{}: {e}\n",
                    set.namespace, set.daemonset
                )),
            }
        }
        out
    }

    /// The images the driver's pods run.
    async fn pod_images(&self, client: &kube::Client) -> BTreeSet<String> {
        let mut images = BTreeSet::new();
        for set in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
            if let Ok(list) = api
                .list(&ListParams::default().labels(&set.selector()))
                .await
            {
                for p in list.items {
                    for c in p.spec.map(|s| s.containers).unwrap_or_default() {
                        images.extend(c.image);
                    }
                }
            }
        }
        images
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

/// How long a DaemonSet's new rollout may take.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the kubelet may take, after a rollout, to register the
/// driver's new instances (it does within seconds of their sockets).
const REGISTER_AGAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// Gives the DaemonSet's containers that carry `setting` the value
/// `devices` and waits until the rollout is complete: every node's pod
/// replaced and available.
async fn roll_out_with(
    client: &kube::Client,
    set: &DriverPods,
    setting: &profile::Setting,
    devices: u32,
) -> Result<(), String> {
    let name = format!("DaemonSet {}/{}", set.namespace, set.daemonset);
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), &set.namespace);
    let mut ds = api
        .get(&set.daemonset)
        .await
        .map_err(|e| format!("reading {name}: {e}"))?;
    let containers = ds
        .spec
        .template
        .spec
        .as_mut()
        .map(|s| &mut s.containers)
        .ok_or_else(|| format!("{name} has no pod spec"))?;
    let mut changed = 0;
    for c in containers.iter_mut() {
        let value = devices.to_string();
        match setting {
            // The flag may be in `command` or `args`; it is replaced where it is.
            profile::Setting::Flag(flag) => {
                let prefix = format!("{flag}=");
                for list in [&mut c.command, &mut c.args].into_iter().flatten() {
                    if list.iter().any(|a| a.starts_with(&prefix)) {
                        setting.apply(list, &mut Vec::new(), &value);
                        changed += 1;
                    }
                }
            }
            profile::Setting::Env(var) => {
                for e in c.env.iter_mut().flatten().filter(|e| &e.name == var) {
                    e.value = Some(value.clone());
                    e.value_from = None;
                    changed += 1;
                }
            }
        }
    }
    if changed == 0 {
        return Err(format!(
            "no container of {name} has {}, which the profile's deviceCount says tells the \
             driver its device count",
            setting.describe()
        ));
    }
    replace_and_roll_out(
        &api,
        &ds,
        &format!("{name} to roll out with {devices} devices per node"),
    )
    .await
}

/// Starts a new rollout of the driver's DaemonSet with nothing changed but
/// a template annotation (as `kubectl rollout restart` does): every pod is
/// replaced the way the DaemonSet's update strategy says (with `maxSurge`,
/// the new pod starts beside the old one first). Returns the DaemonSet's
/// generation that carries the change.
async fn start_roll_out_again(client: &kube::Client, set: &DriverPods) -> Result<i64, String> {
    let name = format!("DaemonSet {}/{}", set.namespace, set.daemonset);
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), &set.namespace);
    let mut ds = api
        .get(&set.daemonset)
        .await
        .map_err(|e| format!("reading {name}: {e}"))?;
    ds.spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            "dra-e2e.k8s.io/rolled-out-at".to_owned(),
            jiff::Timestamp::now().to_string(),
        );
    replace(&api, &ds).await
}

/// Waits until the rollout of `set` to `generation` is complete and only
/// one pod per node is left.
async fn wait_rolled_out_again(
    client: &kube::Client,
    set: &DriverPods,
    generation: i64,
) -> Result<(), String> {
    let name = format!("DaemonSet {}/{}", set.namespace, set.daemonset);
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), &set.namespace);
    wait_generation(
        &api,
        &set.daemonset,
        generation,
        &format!("{name} to roll out again"),
    )
    .await?;
    // With maxSurge a node runs the old pod beside the new one for a while,
    // and the DaemonSet's status says nothing of it: done once only one
    // pod per node is left.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
    let config = watcher::Config::default().labels(&set.selector());
    let what = format!("the old pods of {name} to go");
    wait::list(&pods, config, &what, ROLLOUT_TIMEOUT, |items: &[Pod]| {
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        for p in items {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            *per_node.entry(node).or_default() += 1;
        }
        if per_node.values().all(|n| *n == 1) {
            Check::Done(())
        } else {
            Check::Pending(format!("pods per node: {per_node:?}"))
        }
    })
    .await
    .map_err(|e| e.to_string())
}

/// Replaces the DaemonSet with `ds` and waits until every node runs an
/// updated, available pod and no old one.
async fn replace_and_roll_out(
    api: &Api<DaemonSet>,
    ds: &DaemonSet,
    what: &str,
) -> Result<(), String> {
    let generation = replace(api, ds).await?;
    let name = ds.metadata.name.clone().unwrap_or_default();
    wait_generation(api, &name, generation, what).await
}

/// Replaces the DaemonSet with `ds`; returns its new generation. The
/// DaemonSet controller writes the object too (its status, through the
/// status subresource, which still moves the resourceVersion): a conflict
/// is tried again on the version now stored, with `ds`'s spec, which the
/// runner alone writes, as the house's one conflict policy says.
async fn replace(api: &Api<DaemonSet>, ds: &DaemonSet) -> Result<i64, String> {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let mut first = true;
    let updated = Retry::CONFLICTS
        .run(is_conflict, || {
            let again = !std::mem::replace(&mut first, false);
            let (api, name) = (api.clone(), name.clone());
            let mut ds = ds.clone();
            async move {
                if again {
                    ds.metadata.resource_version = api.get(&name).await?.metadata.resource_version;
                }
                api.replace(&name, &PostParams::default(), &ds).await
            }
        })
        .await
        .map_err(|e| format!("updating DaemonSet {name}: {e}"))?;
    Ok(updated.metadata.generation.unwrap_or_default())
}

/// Waits until DaemonSet `name` rolled out `generation`: every node runs an
/// updated, available pod and none is unavailable.
async fn wait_generation(
    api: &Api<DaemonSet>,
    name: &str,
    generation: i64,
    what: &str,
) -> Result<(), String> {
    wait::object(api, name, what, ROLLOUT_TIMEOUT, |d: Option<&DaemonSet>| {
        let Some(status) = d.and_then(|d| d.status.as_ref()) else {
            return Check::Pending("no status yet".into());
        };
        let desired = status.desired_number_scheduled;
        let done = status.observed_generation.unwrap_or_default() >= generation
            && status.updated_number_scheduled.unwrap_or_default() == desired
            && status.number_available.unwrap_or_default() == desired
            && status.number_unavailable.unwrap_or_default() == 0;
        if done {
            Check::Done(())
        } else {
            Check::Pending(format!(
                "generation {} of {generation} observed; {} of {desired} updated, {} available",
                status.observed_generation.unwrap_or_default(),
                status.updated_number_scheduled.unwrap_or_default(),
                status.number_available.unwrap_or_default()
            ))
        }
    })
    .await
    .map_err(|e| e.to_string())
}

/// The volume the runner adds for the private registration directory.
const PRIVATE_REGISTRY_VOLUME: &str = "dra-e2e-registry";

/// `ds` with its driver container(s) told to register in `dir` (through
/// `setting`), and `dir` mounted at its host path.
/// Points the DaemonSet's host-path volume of the kubelet's
/// `plugins_registry` at `dir`: the driver then registers where it always
/// does inside its container, and the socket lands where only the
/// interposer looks. For a driver with no flag or variable for its
/// registration directory (a profile without `registrationDir`).
fn register_privately_by_volume(
    mut ds: DaemonSet,
    kubelet_root: &std::path::Path,
    dir: &std::path::Path,
) -> Result<DaemonSet, String> {
    let registry = kubelet_root.join("plugins_registry");
    let Some(pod) = ds.spec.template.spec.as_mut() else {
        return Err("it has no pod spec".to_owned());
    };
    let same = |p: &str| std::path::Path::new(p.trim_end_matches('/')) == registry;
    let mut found = false;
    for v in pod.volumes.iter_mut().flatten() {
        if let Some(h) = v.host_path.as_mut()
            && same(&h.path)
        {
            h.path = dir.display().to_string();
            // The private directory is new on every node.
            h.type_ = Some("DirectoryOrCreate".to_owned());
            found = true;
        }
    }
    if found {
        Ok(ds)
    } else {
        Err(format!(
            "the profile gives no registrationDir, and no hostPath volume of the DaemonSet is \
             the kubelet's registration directory {}: the runner cannot tell where the driver \
             registers (give registrationDir in the profile)",
            registry.display()
        ))
    }
}

fn register_privately(
    mut ds: DaemonSet,
    setting: &profile::Setting,
    dir: &std::path::Path,
) -> Result<DaemonSet, String> {
    let value = dir.display().to_string();
    let Some(pod) = ds.spec.template.spec.as_mut() else {
        return Err("it has no pod spec".to_owned());
    };
    let carries = |c: &k8s_openapi::api::core::v1::Container| match setting {
        profile::Setting::Flag(f) => {
            let prefix = format!("{f}=");
            [&c.command, &c.args]
                .into_iter()
                .flatten()
                .flatten()
                .any(|a| a.starts_with(&prefix))
        }
        profile::Setting::Env(v) => c.env.iter().flatten().any(|e| &e.name == v),
    };
    // The containers that already say where to register; without any, the
    // only container (a driver's pod with several must say which).
    let mut chosen: Vec<usize> = (0..pod.containers.len())
        .filter(|i| carries(&pod.containers[*i]))
        .collect();
    if chosen.is_empty() {
        if pod.containers.len() != 1 {
            return Err(format!(
                "none of its {} containers has {}, and the runner cannot tell which one is \
                 the kubelet plugin; give the setting in the manifest",
                pod.containers.len(),
                setting.describe()
            ));
        }
        chosen.push(0);
    }
    for i in chosen {
        let c = &mut pod.containers[i];
        match setting {
            profile::Setting::Flag(_) => {
                // The flag goes where the container's arguments are.
                let list = match (&mut c.args, &mut c.command) {
                    (Some(args), _) => args,
                    (None, Some(command)) => command,
                    (None, None) => c.args.get_or_insert_with(Vec::new),
                };
                setting.apply(list, &mut Vec::new(), &value);
            }
            profile::Setting::Env(var) => {
                let env = c.env.get_or_insert_with(Vec::new);
                env.retain(|e| &e.name != var);
                env.push(k8s_openapi::api::core::v1::EnvVar {
                    name: var.clone(),
                    value: Some(value.clone()),
                    value_from: None,
                });
            }
        }
        // Mounted even where a mount of the plugin directory covers it:
        // `DirectoryOrCreate` makes it before the driver starts, which
        // creates only its socket, not the directory.
        if !c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == PRIVATE_REGISTRY_VOLUME)
        {
            c.volume_mounts.get_or_insert_with(Vec::new).push(
                k8s_openapi::api::core::v1::VolumeMount {
                    name: PRIVATE_REGISTRY_VOLUME.to_owned(),
                    mount_path: value.clone(),
                    ..Default::default()
                },
            );
        }
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        if !volumes.iter().any(|v| v.name == PRIVATE_REGISTRY_VOLUME) {
            volumes.push(k8s_openapi::api::core::v1::Volume {
                name: PRIVATE_REGISTRY_VOLUME.to_owned(),
                host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                    path: value.clone(),
                    type_: Some("DirectoryOrCreate".to_owned()),
                }),
                ..Default::default()
            });
        }
    }
    Ok(ds)
}

/// `arg` with every `${name}` of `values` replaced.
fn fill(arg: &str, values: &BTreeMap<&str, String>) -> String {
    values.iter().fold(arg.to_owned(), |a, (k, v)| {
        a.replace(&format!("${{{k}}}"), v)
    })
}

/// Names of the ready, schedulable nodes.
pub async fn ready_nodes(client: &kube::Client) -> kube::Result<Vec<String>> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let mut names: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(dra_e2e_cluster::node_is_ready_and_schedulable)
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// Device names per node in `slices` (node-local slices only).
pub fn devices_per_node(slices: &[ResourceSlice]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in slices {
        if let Some(node) = &s.spec.node_name {
            let devices = s.spec.devices.iter().flatten().map(|d| d.name.clone());
            out.entry(node.clone()).or_default().extend(devices);
        }
    }
    for d in out.values_mut() {
        d.sort();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemonset(containers: serde_json::Value) -> DaemonSet {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "d", "namespace": "ns" },
            "spec": {
                "selector": { "matchLabels": { "app": "d" } },
                "template": {
                    "metadata": { "labels": { "app": "d" } },
                    "spec": { "containers": containers }
                }
            }
        }))
        .unwrap()
    }

    fn pod(ds: &DaemonSet) -> &k8s_openapi::api::core::v1::PodSpec {
        ds.spec.template.spec.as_ref().unwrap()
    }

    const DIR: &str = "/var/lib/kubelet/plugins/d.example.com/dra-e2e";

    fn with_strategy(strategy: serde_json::Value) -> DaemonSet {
        let mut ds = daemonset(serde_json::json!([{ "name": "c" }]));
        ds.spec.update_strategy = Some(serde_json::from_value(strategy).unwrap());
        ds
    }

    #[test]
    fn only_a_rolling_update_with_max_surge_above_zero_surges() {
        let surge = |v: serde_json::Value| {
            with_strategy(serde_json::json!({
                "type": "RollingUpdate",
                "rollingUpdate": { "maxSurge": v, "maxUnavailable": 0 }
            }))
        };
        assert_eq!(surges(&surge(serde_json::json!(1))), Ok(()));
        assert_eq!(surges(&surge(serde_json::json!("10%"))), Ok(()));
        assert_eq!(
            surges(&surge(serde_json::json!(0))),
            Err(
                "updates with maxSurge 0 and maxUnavailable 0: a node's old pod goes before \
                 its new one starts"
                    .to_owned()
            )
        );
        assert!(surges(&surge(serde_json::json!("0%"))).is_err());
        // Upstream's test driver says nothing: the defaults do not surge.
        assert_eq!(
            surges(&daemonset(serde_json::json!([{ "name": "c" }]))),
            Err(
                "updates with maxSurge 0 (default) and maxUnavailable 1 (default): a node's \
                 old pod goes before its new one starts"
                    .to_owned()
            )
        );
        assert_eq!(
            surges(&with_strategy(serde_json::json!({ "type": "OnDelete" }))),
            Err("updates its pods by OnDelete, not by a rolling update".to_owned())
        );
    }

    #[test]
    fn the_driver_container_registers_privately_and_gets_the_directory() {
        let flag = profile::Setting::Flag("--plugin-registration-path".into());
        let ds = daemonset(serde_json::json!([
            { "name": "sidecar", "image": "s" },
            { "name": "plugin", "image": "p", "command": ["/drv", "--plugin-registration-path=/var/lib/kubelet/plugins_registry", "-v=5"] }
        ]));
        let ds = register_privately(ds, &flag, std::path::Path::new(DIR)).unwrap();
        let p = pod(&ds);
        assert_eq!(
            p.containers[1].command.as_ref().unwrap()[1],
            format!("--plugin-registration-path={DIR}")
        );
        assert!(
            p.containers[0].volume_mounts.is_none(),
            "the sidecar is left alone"
        );
        let mounts = p.containers[1].volume_mounts.as_ref().unwrap();
        assert_eq!(mounts[0].mount_path, DIR);
        let volumes = p.volumes.as_ref().unwrap();
        let host = volumes[0].host_path.as_ref().unwrap();
        assert_eq!(
            (host.path.as_str(), host.type_.as_deref()),
            (DIR, Some("DirectoryOrCreate"))
        );
    }

    #[test]
    fn without_a_setting_the_registry_volume_is_pointed_at_the_private_directory() {
        let mut ds = daemonset(serde_json::json!([
            { "name": "plugin", "image": "p", "volumeMounts": [
                { "name": "reg", "mountPath": "/var/lib/kubelet/plugins_registry" },
                { "name": "data", "mountPath": "/var/lib/kubelet/plugins/d.example.com" }] }
        ]));
        let volume = |name: &str, path: &str| {
            serde_json::from_value::<k8s_openapi::api::core::v1::Volume>(serde_json::json!(
                { "name": name, "hostPath": { "path": path, "type": "Directory" } }
            ))
            .unwrap()
        };
        ds.spec.template.spec.as_mut().unwrap().volumes = Some(vec![
            volume("reg", "/var/lib/kubelet/plugins_registry/"),
            volume("data", "/var/lib/kubelet/plugins/d.example.com"),
        ]);
        let root = std::path::Path::new("/var/lib/kubelet");
        let moved =
            register_privately_by_volume(ds.clone(), root, std::path::Path::new(DIR)).unwrap();
        let p = pod(&moved);
        let volumes = p.volumes.as_ref().unwrap();
        let reg = volumes[0].host_path.as_ref().unwrap();
        assert_eq!(
            (reg.path.as_str(), reg.type_.as_deref()),
            (DIR, Some("DirectoryOrCreate"))
        );
        // The driver still writes where it always does in its container;
        // other volumes stay.
        assert_eq!(
            p.containers[0].volume_mounts.as_ref().unwrap()[0].mount_path,
            "/var/lib/kubelet/plugins_registry"
        );
        assert_eq!(
            volumes[1].host_path.as_ref().unwrap().path,
            "/var/lib/kubelet/plugins/d.example.com"
        );
        // Another kubelet root: no volume is the registry, and the error
        // says what to give instead.
        let e =
            register_privately_by_volume(ds, std::path::Path::new("/k"), std::path::Path::new(DIR))
                .unwrap_err();
        assert!(e.contains("/k/plugins_registry"), "{e}");
        assert!(e.contains("give registrationDir"), "{e}");
    }

    #[test]
    fn a_lone_container_gets_the_flag_or_variable_added() {
        let flag = profile::Setting::Flag("--reg".into());
        let ds = daemonset(serde_json::json!([{ "name": "c", "image": "i", "args": ["run"] }]));
        let ds = register_privately(ds, &flag, std::path::Path::new(DIR)).unwrap();
        assert_eq!(
            pod(&ds).containers[0].args.as_ref().unwrap(),
            &["run".to_owned(), format!("--reg={DIR}")]
        );

        let env = profile::Setting::Env("REG_DIR".into());
        let ds = daemonset(serde_json::json!([{ "name": "c", "image": "i",
            "env": [{ "name": "REG_DIR", "value": "/old" }, { "name": "X", "value": "1" }] }]));
        let ds = register_privately(ds, &env, std::path::Path::new(DIR)).unwrap();
        let vars = pod(&ds).containers[0].env.as_ref().unwrap();
        let reg: Vec<_> = vars.iter().filter(|e| e.name == "REG_DIR").collect();
        assert_eq!(reg.len(), 1);
        assert_eq!(reg[0].value.as_deref(), Some(DIR));
    }

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

    #[test]
    fn several_containers_none_saying_where_to_register_is_an_error() {
        let flag = profile::Setting::Flag("--reg".into());
        let ds = daemonset(serde_json::json!([
            { "name": "a", "image": "i" }, { "name": "b", "image": "i" }
        ]));
        let e = register_privately(ds, &flag, std::path::Path::new(DIR)).unwrap_err();
        assert!(
            e.contains("none of its 2 containers has an argument --reg=..."),
            "{e}"
        );
    }
}
