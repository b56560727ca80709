//! The cucumber World and the step library. Steps are thin: each sentence maps
//! onto harness calls (driver, objects, wait). One file per topic.
pub mod api;
pub mod calls;
pub mod catalogue;
pub mod claims;
pub mod crud;
pub mod drivers;
pub mod health;
pub mod lifecycle;
pub mod params;
pub mod pods;
pub mod slices;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceSlice;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::driver::Driver;
use crate::driver::sockets::Broken;
use crate::report::Outcomes;

/// What every scenario of a run shares. Set once by the runner before the run.
pub struct Context {
    pub cluster: Arc<Cluster>,
    pub step_timeout: Duration,
    pub artifacts: std::path::PathBuf,
    pub keep_on_failure: bool,
    /// Cancelled on the first Ctrl-C or when the run's deadline passes.
    pub interrupt: CancellationToken,
    pub outcomes: Outcomes,
    /// Label value put on every namespace of this run.
    pub run_id: String,
}

static CONTEXT: OnceLock<Context> = OnceLock::new();

/// Installs the run's context; the runner calls it once.
pub fn install(ctx: Context) -> Result<(), &'static str> {
    CONTEXT
        .set(ctx)
        .map_err(|_| "the run context was already installed")
}

pub fn context() -> anyhow::Result<&'static Context> {
    CONTEXT
        .get()
        .ok_or_else(|| anyhow::anyhow!("steps run outside a dra-e2e run (no cluster context)"))
}

/// A pod the scenario created, remembered for teardown and references.
#[derive(Debug, Clone)]
pub struct PodRecord {
    pub name: String,
    /// The pod claims' names.
    pub pod_claims: Vec<String>,
}

/// One scenario's state. A fresh World is built for every scenario (and retry).
#[derive(Debug, Default, cucumber::World)]
pub struct World {
    /// `dra-e2e-<random>`, created by the before hook.
    pub namespace: String,
    /// Why the before hook could not prepare the scenario.
    pub setup_error: Option<String>,
    /// Nodes the scenario uses, sorted (upstream's `Nodenames()`).
    pub nodes: Vec<String>,
    /// Drivers by label (`""` is "the driver"), in creation order.
    pub drivers: Vec<(String, Driver)>,
    /// DeviceClasses created, by driver label.
    pub classes: BTreeMap<String, String>,
    /// Extra DeviceClasses created by name (copies), deleted at teardown.
    pub extra_classes: Vec<String>,
    pub pods: Vec<PodRecord>,
    /// Cluster-scoped objects created from manifests, deleted at teardown.
    pub cluster_objects: Vec<(kube::api::ApiResource, String)>,
    /// Namespaced objects created from manifests (workloads among them),
    /// deleted first at teardown so no controller re-creates pods.
    pub namespaced_objects: Vec<(kube::api::ApiResource, String)>,
    /// Call counts remembered by "is called" for "has been called again".
    pub marks: BTreeMap<(String, String), u64>,
    /// Slices remembered by "the driver's slices are noted".
    pub noted_slices: Option<Vec<ResourceSlice>>,
    /// Claims generated for pods, remembered before a pod is deleted.
    pub generated_claims: BTreeMap<params::ClaimRef, String>,
    /// UIDs of claims as first seen, to tell old from new ones.
    pub claim_uids: BTreeMap<String, String>,
    /// UIDs of pools' slices as noted, for "recreated with a new UID".
    pub slice_uids: BTreeMap<String, String>,
    /// How long the plugin was gone while one driver instance replaced another.
    pub outage: Option<Duration>,
    /// When the scenario started (for timings).
    pub started: Option<std::time::Instant>,
    /// Time of each teardown phase.
    pub teardown_timings: Vec<(&'static str, Duration)>,
}

tokio::task_local! {
    /// The broken signals of the drivers the running step's scenario has.
    static WATCHED: Watched;
}

/// What [`run`] races a step against: the scenario's drivers breaking. The
/// step body adds them through the [`World`] it uses ([`World::client`],
/// [`World::driver`]), so every step that touches the scenario fails as soon
/// as one of its drivers breaks, with the reason, instead of running into a
/// timeout.
#[derive(Clone, Default)]
struct Watched {
    signals: Arc<std::sync::Mutex<Vec<Broken>>>,
    added: Arc<tokio::sync::Notify>,
}

impl Watched {
    fn add(&self, signals: impl Iterator<Item = Broken>) {
        let mut list = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        let before = list.len();
        for s in signals {
            if !list.iter().any(|known| known.same(&s)) {
                list.push(s);
            }
        }
        if list.len() > before {
            self.added.notify_one();
        }
    }

    /// Resolves with the first reason any watched signal reports.
    async fn first_broken(&self) -> String {
        loop {
            let added = self.added.notified();
            tokio::pin!(added);
            added.as_mut().enable();
            let list = self
                .signals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(reason) = list.iter().find_map(Broken::reason) {
                return reason;
            }
            if list.is_empty() {
                added.await;
                continue;
            }
            let any = futures::future::select_all(list.iter().map(|b| Box::pin(b.wait())));
            tokio::select! {
                (reason, _, _) = any => return reason,
                _ = added => {}
            }
        }
    }
}

impl World {
    /// Makes the running step fail as soon as one of the scenario's drivers
    /// breaks (see [`run`]).
    fn watch_drivers(&self) {
        let _ = WATCHED.try_with(|w| w.add(self.drivers.iter().map(|(_, d)| d.broken())));
    }

    fn driver_index(&self, label: &str) -> Option<usize> {
        self.drivers
            .iter()
            .position(|(l, _)| l == label)
            // "the driver" is the scenario's first driver when none is unnamed.
            .or_else(|| (label.is_empty() && !self.drivers.is_empty()).then_some(0))
    }

    /// The driver with `label`; `""` means "the driver": the unnamed one, or
    /// else the scenario's first.
    pub fn driver(&self, label: &str) -> anyhow::Result<&Driver> {
        self.watch_drivers();
        match self.driver_index(label) {
            Some(i) => Ok(&self.drivers[i].1),
            None => Err(self.no_driver(label)),
        }
    }

    pub fn driver_mut(&mut self, label: &str) -> anyhow::Result<&mut Driver> {
        self.watch_drivers();
        match self.driver_index(label) {
            Some(i) => Ok(&mut self.drivers[i].1),
            None => Err(self.no_driver(label)),
        }
    }

    fn no_driver(&self, label: &str) -> anyhow::Error {
        let known: Vec<String> = self
            .drivers
            .iter()
            .map(|(l, d)| {
                if l.is_empty() {
                    format!("the driver ({})", d.name)
                } else {
                    format!("driver \"{l}\" ({})", d.name)
                }
            })
            .collect();
        if label.is_empty() {
            anyhow::anyhow!(
                "this scenario has no default driver; add a step like `Given a driver with 1 device per node` (drivers: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )
        } else {
            anyhow::anyhow!(
                "this scenario has no driver \"{label}\" (drivers: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )
        }
    }

    /// The node at `index` among the scenario's nodes.
    pub fn node(&self, index: usize) -> anyhow::Result<&str> {
        self.nodes.get(index).map(String::as_str).ok_or_else(|| {
            anyhow::anyhow!(
                "node {index} does not exist: the scenario uses {} node(s) ({}); state how many with `Given 1 ready node`",
                self.nodes.len(),
                self.nodes.join(", ")
            )
        })
    }

    /// The admin client, once the scenario's namespace is ready.
    pub fn client(&self) -> anyhow::Result<kube::Client> {
        self.watch_drivers();
        if let Some(e) = &self.setup_error {
            anyhow::bail!("the scenario could not be set up: {e}");
        }
        if self.namespace.is_empty() {
            anyhow::bail!("the scenario has no namespace (the run was interrupted?)");
        }
        Ok(context()?.cluster.client())
    }

    /// `${namespace}`, `${driver}`, `${class}`, `${node0}`... for manifests.
    pub fn vars(&self) -> BTreeMap<String, String> {
        let mut v = BTreeMap::new();
        v.insert("namespace".to_owned(), self.namespace.clone());
        for (label, d) in &self.drivers {
            let key = if label.is_empty() {
                "driver".to_owned()
            } else {
                format!("driver:{label}")
            };
            v.insert(key, d.name.clone());
        }
        for (label, c) in &self.classes {
            let key = if label.is_empty() {
                "class".to_owned()
            } else {
                format!("class:{label}")
            };
            v.insert(key, c.clone());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            v.insert(format!("node{i}"), n.clone());
        }
        v
    }
}

/// Runs a step body with the step timeout and the run's interrupt, and turns
/// its error into the message cucumber reports. A driver of the scenario that
/// breaks meanwhile (a proxy agent died) ends the step at once with the
/// reason.
pub async fn run<T>(
    fut: impl std::future::Future<Output = anyhow::Result<T>>,
) -> Result<T, String> {
    let ctx = context().map_err(|e| e.to_string())?;
    if ctx.interrupt.is_cancelled() {
        return Err("the run was interrupted; not starting this step".to_owned());
    }
    let progress = crate::wait::Progress::default();
    let watched = Watched::default();
    let fut = WATCHED.scope(
        watched.clone(),
        crate::wait::with_progress(progress.clone(), fut),
    );
    tokio::select! {
        r = tokio::time::timeout(ctx.step_timeout, fut) => match r {
            Ok(Ok(v)) => Ok(v),
            // Each cause once: several errors quote their source already.
            Ok(Err(e)) => Err(crate::report::error_message(&e)),
            Err(_) => Err(format!(
                "the step did not finish within --step-timeout {}{}",
                humantime::format_duration(ctx.step_timeout),
                progress.last().map(|p| format!(" ({p})")).unwrap_or_default()
            )),
        },
        reason = watched.first_broken() => Err(format!(
            "{reason}{}",
            progress.last().map(|p| format!(" (the step was {p})")).unwrap_or_default()
        )),
        _ = ctx.interrupt.cancelled() => Err("the run was interrupted (Ctrl-C or --deadline)".to_owned()),
    }
}
