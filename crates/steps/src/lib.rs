//! The cucumber World and the step library. Steps are parse-then-call: a
//! sentence is matched into typed parameters ([`params`]) and mapped onto a
//! plain async function of harness calls (driver, objects, wait, the
//! [`scenario`] builder). One file per topic.
//!
//! A crate of its own, above the reports and below the runner's main flow,
//! so that the step rule (`tests/step_rule.rs`) has a boundary to hold:
//! what a step may reach is this crate's dependencies, and what it should
//! not do itself goes down into `dra-e2e-harness` or `dra-e2e-kube`.

/// Declares step sentences, each mapped onto the plain async function of the
/// same name in the declaring module:
///
/// ```text
/// sentences! {
///     #[then(expr = "pod {string} is {podstate}")]
///     fn pod_is(name: String, state: PodState);
///
///     #[then(expr = "the status of {kind} {string} has:")]
///     fn status_has(kind: Kind, name: String, step: Step<'_>) => has(Part::Status);
/// }
///
/// async fn pod_is(w: &mut World, name: String, state: PodState) -> anyhow::Result<()> {
///     ...
/// }
/// ```
///
/// A sentence that is a variant of another (`the status of ...`, `... as
/// {identity}`) names the function it shares after `=>`, with the arguments
/// that tell the variant apart; they follow the sentence's own. One function
/// per behaviour, however many ways a scenario may say it.
///
/// The step cucumber sees parses the sentence into the typed arguments and
/// calls the function through [`run`] within the World's
/// [`World::step_bounds`], so every step gets the step timeout, the run's
/// interrupt and the race against the scenario's drivers breaking without
/// saying so. An argument `step: Step<'_>` hands on the gherkin step
/// (its table or doc string) as `&Step`. Argument types are single names, as
/// cucumber's attributes read them.
macro_rules! sentences {
    ($( $(#[$attr:meta])* fn $name:ident ( $($arg:ident : $ty:ident $(<$lt:lifetime>)?),* $(,)? )
        $(=> $target:ident ( $($extra:expr),* $(,)? ))? ; )*) => {
        mod sentences {
            #![allow(unused_imports)]
            use super::*;

            /// How the generated steps take the gherkin step.
            #[allow(dead_code)]
            type Step<'a> = &'a ::cucumber::gherkin::Step;

            $(
                $(#[$attr])*
                async fn $name(
                    w: &mut $crate::World,
                    $($arg: $ty $(<$lt>)?),*
                ) -> ::std::result::Result<(), ::std::string::String> {
                    let bounds = w.step_bounds()?;
                    $crate::run(
                        bounds,
                        sentences!(@call $name $(=> $target ($($extra),*))? ; w $(, $arg)*),
                    )
                    .await
                }
            )*
        }
    };
    (@call $name:ident ; $($a:expr),*) => { super::$name($($a),*) };
    (@call $name:ident => $target:ident ($($extra:expr),*) ; $($a:expr),*) => {
        super::$target($($a),* $(, $extra)*)
    };
}

pub mod api;
pub mod calls;
pub mod catalogue;
pub mod claims;
pub mod containers;
pub mod control_plane;
pub mod controllers;
pub mod crud;
pub mod device_plugin;
pub mod driver_installs;
pub mod driver_updates;
pub mod drivers;
pub mod health;
pub mod kubelet_metrics;
pub mod lifecycle;
pub mod metadata;
pub mod node_allocatable;
pub mod node_ops;
pub mod params;
pub mod pods;
pub mod pool_status;
pub mod resource_conformance;
pub mod scenario;
pub mod slices;
pub mod under_test;
pub mod workloads;

// The floors below, named as the runner names them (`crate::harness::driver`),
// so that a step reads the same here as it did inside the runner's crate.
use dra_e2e_cluster as cluster;
use dra_e2e_conn as conn;
use dra_e2e_harness as harness;
use dra_e2e_kube as ground;
use dra_e2e_plugin as plugin;
use dra_e2e_profile as profile;
use dra_e2e_proto as proto;
use dra_e2e_report as report;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::harness::driver::Driver;
use crate::harness::scenario::bounds::{self, Ended, StepBounds, Watched};
use crate::report::Outcomes;
use params::DriverRef;
use scenario::Scenario;

/// What every scenario of a run shares. The runner makes it and hands it to
/// each scenario's World in the before hook ([`lifecycle::before`]).
pub struct Context {
    pub cluster: Arc<Cluster>,
    pub step_timeout: Duration,
    pub artifacts: std::path::PathBuf,
    pub keep_on_failure: bool,
    /// Cancelled on the first Ctrl-C or when the run's deadline passes.
    pub interrupt: CancellationToken,
    pub outcomes: Arc<Outcomes>,
    /// Label value put on every namespace of this run.
    pub run_id: String,
    /// Teardowns of ended scenarios, running beside later scenarios; the
    /// runner lets them finish (a first Ctrl-C does not cut them short,
    /// lest objects stay behind).
    pub teardowns: lifecycle::Teardowns,
    /// Checks that go on after their scenario's teardown (a driver's slices
    /// wiped); the runner waits for them before it reports.
    pub after_scenarios: tokio_util::task::TaskTracker,
    /// Cancelled by the runner once every scenario ended and was torn
    /// down: the checks still going on then have nothing to run beside, and
    /// those that can are cut short (the kubelet's 30 s wipe of the last
    /// drivers' slices, see `harness::driver::Unfinished`).
    pub nothing_left_to_run: CancellationToken,
    /// The driver the run tests (the suite's own unless a profile says).
    pub under_test: Arc<crate::harness::under_test::UnderTest>,
    /// Which scenario uses which node (`@OwnNodes` ones have theirs alone).
    pub node_leases: Arc<crate::harness::node_lease::NodeLeases>,
    /// How many scenarios that share nodes run at once (`--concurrency`).
    /// Those that own nodes take no slot: the nodes they own bound how many
    /// run at once, and they spend their time waiting on kubelets and
    /// containerd. Cucumber starts them all beside the slots, so a queue of
    /// node operations waiting for nodes does not hold up the others.
    pub slots: Arc<tokio::sync::Semaphore>,
    /// The suite's slice controller broken on purpose
    /// (`--slice-controller-fault`).
    pub slice_controller_fault: crate::harness::driver::slices::ControllerFault,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("run_id", &self.run_id)
            .field("step_timeout", &self.step_timeout)
            .finish_non_exhaustive()
    }
}

/// One scenario's state. A fresh World is built for every scenario (and
/// retry); the before hook hands it the run's [`Context`].
#[derive(Debug, Default, cucumber::World)]
pub struct World {
    /// The run's context, from the before hook; `None` outside a run.
    pub run: Option<Arc<Context>>,
    /// The broken signals of the scenario's drivers, which every step races
    /// against; a driver is added when the scenario adds it.
    pub broken: Watched,
    /// `dra-e2e-<random>`, created by the before hook.
    pub namespace: String,
    /// Why the before hook could not prepare the scenario.
    pub setup_error: Option<String>,
    /// Nodes the scenario uses, sorted (upstream's `Nodenames()`).
    pub nodes: Vec<String>,
    /// Whether the scenario has its nodes to itself (`@OwnNodes`).
    pub owns_nodes: bool,
    /// Whether the runner's faults may hit its nodes
    /// (`@FaultExempt:<reason>` says no).
    pub faults: crate::harness::node_lease::Faults,
    /// Its place among the owners, from its start until it has its nodes.
    pub own_ticket: Option<crate::harness::node_lease::Ticket>,
    /// The scenario's slot among those running at once ([`Context::slots`]),
    /// from its start to its end; none for one that owns its nodes.
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// What the scenario made, each with its cleanup.
    pub scenario: Scenario,
    // What the steps of each topic remember between steps, one field per
    // topic; the module that declares each says what and why.
    /// Call counts, for "has been called again" ([`calls`]).
    pub calls: calls::CallMemory,
    /// Slices noted and their UIDs ([`slices`]).
    pub slices: slices::SliceMemory,
    /// Claims generated for pods that are gone ([`claims`], [`pods`]).
    pub claims: claims::ClaimMemory,
    /// A hosted driver instance replaced by another: the outage ([`drivers`]).
    pub replacement: drivers::ReplacementMemory,
    /// The pool status request ([`pool_status`]).
    pub pool_status: pool_status::PoolStatusMemory,
    /// The CRUD steps' watch ([`crud`]).
    pub crud: crud::CrudMemory,
    /// The conformance pack's noted devices and deleted pods ([`under_test`]).
    pub conformance: under_test::ConformanceMemory,
    /// An update of the driver under test: its slice watch, which stops
    /// with the World at the end of the scenario, and its rollout
    /// ([`driver_updates`]).
    pub driver_update: driver_updates::DriverUpdateMemory,
    /// When the scenario started (for timings).
    pub started: Option<std::time::Instant>,
    /// Time of each setup and teardown phase.
    pub setup_timings: crate::report::Timings,
    pub teardown_timings: crate::report::Timings,
}

impl World {
    /// The run's context, once the before hook handed it over.
    pub fn context(&self) -> anyhow::Result<&Arc<Context>> {
        self.run
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("steps run outside a dra-e2e run (no cluster context)"))
    }

    /// Waits for one of the run's slots ([`Context::slots`]) unless the
    /// scenario has one.
    pub async fn take_slot(&mut self) {
        if self.slot.is_some() {
            return;
        }
        if let Some(ctx) = &self.run {
            // The run never closes its semaphore.
            self.slot = ctx.slots.clone().acquire_owned().await.ok();
        }
    }

    /// What the next step runs within (see [`run`]).
    pub fn step_bounds(&self) -> Result<StepBounds, String> {
        let ctx = self.context().map_err(|e| e.to_string())?;
        let mut calls: Vec<crate::plugin::Calls> = self
            .scenario
            .drivers()
            .map(|(_, d)| d.calls().clone())
            .collect();
        calls.extend(ctx.under_test.interposed.as_ref().map(|i| i.calls.clone()));
        Ok(StepBounds {
            step_timeout: ctx.step_timeout,
            interrupt: ctx.interrupt.clone(),
            broken: self.broken.clone(),
            driver_notes: (!calls.is_empty()).then(|| calls::prepare_errors(calls)),
        })
    }

    /// The driver `d` names; "the driver" is the unnamed one, or else the
    /// scenario's first.
    pub fn driver(&self, d: &DriverRef) -> anyhow::Result<&Driver> {
        self.scenario.driver(d).ok_or_else(|| self.no_driver(d))
    }

    pub fn driver_mut(&mut self, d: &DriverRef) -> anyhow::Result<&mut Driver> {
        // Looked up twice: the error borrows what the mutable lookup would hold.
        if self.scenario.driver(d).is_none() {
            return Err(self.no_driver(d));
        }
        self.scenario
            .driver_mut(d)
            .ok_or_else(|| anyhow::anyhow!("{d} went away"))
    }

    /// The name of driver `d`: one the scenario hosts, or the run's driver
    /// under test.
    pub fn driver_name(&self, d: &DriverRef) -> anyhow::Result<String> {
        if let Some(name) = self.external_driver(d) {
            return Ok(name.to_owned());
        }
        Ok(self.driver(d)?.name.clone())
    }

    /// Driver `d` as the harness sees its calls, with its name: a hosted
    /// driver, or the driver under test through the interposer
    /// (`--interpose`).
    pub fn observed(
        &self,
        d: &DriverRef,
    ) -> anyhow::Result<(String, &dyn crate::harness::observed::ObservedPlugin)> {
        if let Some(name) = self.external_driver(d) {
            return match &self.context()?.under_test.interposed {
                Some(i) => Ok((name.to_owned(), i)),
                None => Err(self.no_driver(d)),
            };
        }
        let driver = self.driver(d)?;
        Ok((driver.name.clone(), driver))
    }

    /// The calls of driver `d` ([`World::observed`]).
    pub fn calls_of(&self, d: &DriverRef) -> anyhow::Result<crate::plugin::Calls> {
        Ok(self.observed(d)?.1.calls().clone())
    }

    /// The claims driver `d` has prepared on `node`, as the harness saw
    /// them ([`World::observed`]).
    pub fn prepared_of(
        &self,
        d: &DriverRef,
        node: &str,
    ) -> anyhow::Result<crate::plugin::Prepared> {
        let (name, seen) = self.observed(d)?;
        seen.prepared(node)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("driver {name} has no {} on node {node}", seen.stand()))
    }

    /// The CDI spec directory driver `d` writes on `node`
    /// ([`World::observed`]).
    pub fn cdi_of(
        &self,
        d: &DriverRef,
        node: &str,
    ) -> anyhow::Result<std::sync::Arc<dyn crate::conn::node_files::NodeFiles>> {
        let (name, seen) = self.observed(d)?;
        seen.cdi_files(node)
            .ok_or_else(|| anyhow::anyhow!("driver {name} has no {} on node {node}", seen.stand()))
    }

    /// The name of `d` when it is the run's driver under test, which the
    /// scenario does not host (so it has no call counts nor faults).
    pub fn external_driver(&self, d: &DriverRef) -> Option<&str> {
        self.scenario
            .external_drivers()
            .find(|(label, _)| *label == d)
            .map(|(_, name)| name)
    }

    fn no_driver(&self, d: &DriverRef) -> anyhow::Error {
        if let Some(name) = self.external_driver(d) {
            return anyhow::anyhow!(
                "{d} is the run's driver under test, {name}, which the runner does not host: \
                 this step needs a driver whose calls the runner sees (call counts, faults, \
                 prepared claims): run with --interpose and tag the scenario @Interposed, or \
                 write it with the pod's, claim's and slices' effects instead"
            );
        }
        let known: Vec<String> = self
            .scenario
            .drivers()
            .map(|(l, driver)| format!("{l} ({})", driver.name))
            .collect();
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        match d {
            DriverRef::The => anyhow::anyhow!(
                "this scenario has no default driver; add a step like `Given a driver with 1 device per node` (drivers: {known})"
            ),
            DriverRef::Named(l) => {
                anyhow::anyhow!("this scenario has no driver \"{l}\" (drivers: {known})")
            }
        }
    }

    /// The class made for driver `d` (see [`Scenario::class_for`]).
    pub fn class_name(&self, d: &DriverRef) -> anyhow::Result<String> {
        self.scenario
            .class_for(d)
            .map(str::to_owned)
            .ok_or_else(|| match d {
                DriverRef::The => {
                    anyhow::anyhow!("no device class for the driver; add `Given a device class`")
                }
                DriverRef::Named(l) => anyhow::anyhow!(
                    "no device class for driver \"{l}\"; add `Given a device class for driver \"{l}\"`"
                ),
            })
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
        if let Some(e) = &self.setup_error {
            anyhow::bail!("the scenario could not be set up: {e}");
        }
        if self.namespace.is_empty() {
            anyhow::bail!("the scenario has no namespace (the run was interrupted?)");
        }
        Ok(self.context()?.cluster.client())
    }

    /// The API of a namespaced kind in the scenario's namespace, as the admin.
    pub fn api<K>(&self) -> anyhow::Result<kube::Api<K>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Ok(self.scenario.api(self.client()?))
    }

    /// Pod `name` of the scenario's namespace as the API server has it.
    pub async fn pod(&self, name: &str) -> anyhow::Result<Pod> {
        self.api::<Pod>()?
            .get(name)
            .await
            .with_context(|| format!("reading pod {name}"))
    }

    /// Claim `name` of the scenario's namespace as the API server has it.
    pub async fn claim(&self, name: &str) -> anyhow::Result<ResourceClaim> {
        self.api::<ResourceClaim>()?
            .get(name)
            .await
            .with_context(|| format!("reading ResourceClaim {name}"))
    }

    /// `${namespace}`, `${driver}`, `${class}`, `${node0}`... for manifests.
    pub fn vars(&self) -> BTreeMap<String, String> {
        let mut v = BTreeMap::new();
        v.insert("namespace".to_owned(), self.namespace.clone());
        for (label, d) in self.scenario.drivers() {
            let (key, class) = match label {
                DriverRef::The => ("driver".to_owned(), "class".to_owned()),
                DriverRef::Named(l) => (format!("driver:{l}"), format!("class:{l}")),
            };
            v.insert(key, d.name.clone());
            // Replaced below once the class exists under another name.
            v.insert(class, drivers::class_name(&self.namespace, d));
        }
        for (label, name) in self.scenario.external_drivers() {
            let key = match label {
                DriverRef::The => "driver".to_owned(),
                DriverRef::Named(l) => format!("driver:{l}"),
            };
            v.insert(key, name.to_owned());
        }
        for (label, c) in self.scenario.driver_classes() {
            let key = match label {
                DriverRef::The => "class".to_owned(),
                DriverRef::Named(l) => format!("class:{l}"),
            };
            v.insert(key, c.to_owned());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            v.insert(format!("node{i}"), n.clone());
        }
        v
    }
}

/// Runs a step body within `bounds` (the step timeout, the run's interrupt,
/// the scenario's drivers breaking: [`bounds::run`]), and turns its error
/// into the message cucumber reports.
pub async fn run<T>(
    bounds: StepBounds,
    fut: impl std::future::Future<Output = anyhow::Result<T>>,
) -> Result<T, String> {
    bounds::run(bounds, fut).await.map_err(|e| match e {
        // Each cause once: several errors quote their source already.
        Ended::Failed(e) => crate::report::error_message(&e),
        Ended::Cut(why) => why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> StepBounds {
        StepBounds::within(Duration::from_secs(10), CancellationToken::new())
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_ends_with_its_body_or_its_message() {
        assert_eq!(run(bounds(), async { Ok(7) }).await, Ok(7));
        let e = run::<()>(bounds(), async {
            Err(anyhow::anyhow!("no").context("reading pod tester-1"))
        })
        .await;
        assert_eq!(e, Err("reading pod tester-1: no".to_owned()));
    }

    #[test]
    fn a_world_outside_a_run_says_so_and_its_getters_change_nothing() {
        let w = World::default();
        assert_eq!(
            w.step_bounds().err().as_deref(),
            Some("steps run outside a dra-e2e run (no cluster context)")
        );
        assert!(w.client().is_err());
        assert!(w.driver(&DriverRef::The).is_err());
        assert_eq!(format!("{:?}", w.broken), "Watched(0 signal(s))");
    }
}
