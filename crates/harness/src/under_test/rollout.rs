//! Restarting and rolling out a deployed driver: its DaemonSet(s) rolled
//! out again, with nothing changed or with another device count, and the
//! wait until every node runs the new pod alone (behind the interposer:
//! until the kubelet registered the new instances).
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;

use dra_e2e_cluster::Cluster;
use dra_e2e_kube::retry::{Retry, is_conflict};
use dra_e2e_kube::wait::{self, Check};
use dra_e2e_profile::{self as profile, Deployment};

use super::{DriverPods, UnderTest, UnderTestError};

/// A rollout of the driver's DaemonSet(s) started by
/// [`UnderTest::start_roll_out`] and not yet waited for.
#[derive(Debug)]
pub struct RollOut {
    /// Each DaemonSet with the generation that carries the rollout.
    sets: Vec<(DriverPods, i64)>,
    /// Behind the interposer: the instances each node had before.
    instances_before: Option<BTreeMap<String, Vec<dra_e2e_plugin::interposer::InstanceView>>>,
}

impl UnderTest {
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

    /// Restarts the driver with the profile's devicesPerNode if a scenario
    /// left it with another count; nothing otherwise.
    pub async fn restore_devices(&self, cluster: &Cluster) -> Result<(), UnderTestError> {
        let changed = *self.devices_now.lock().await;
        match (changed, self.profile.devices_per_node) {
            (Some(_), Some(n)) => self.restart_with_devices(cluster, n).await,
            _ => Ok(()),
        }
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
