//! The scenario builder's cleanup stack, in the spirit of upstream's
//! `builder.go` and `deploy.go`: every class, claim, template, pod, driver
//! and manifest object a scenario makes leaves its typed cleanup on one
//! stack. What the scenario made is read from the same stack (`the driver`,
//! `${class}`, "all pods"), so there is no second list to keep in step.
//!
//! It lives in the harness, as upstream keeps its `Builder` in a library
//! package (`test/e2e/dra/utils`): the steps create through it and read
//! from it, but the stack and its teardown know nothing of Gherkin. The one
//! thing of the steps' it holds, how a sentence names a driver, is a type
//! parameter ([`DriverLabel`]).
//!
//! Teardown runs the stack in upstream's order. A scenario's sentences do not
//! create things in the order of upstream's `BeforeEach`/`It` (a driver may be
//! declared after a pod runs), so each cleanup belongs to a [`Phase`] and the
//! stack is run last-in-first-out within each phase: workloads and pods,
//! claims (then the waits until the plugins unprepared them), classes,
//! drivers (plugins, RBAC; the wait until their slices are wiped is handed
//! back to run beside the scenarios that follow),
//! cluster-scoped objects, the namespace. Every cleanup runs even when an
//! earlier one failed; the first error is reported.
//!
//! The stack and what is read from it are here; teardown ([`teardown`]) is a
//! module of its own, and so is creating ([`create`]): each creation
//! pushes its cleanup here in the same call.
pub mod artifacts;
pub mod bounds;
pub mod create;
pub mod namespace;
pub mod teardown;

use kube::api::ApiResource;

use crate::driver::{Driver, Unfinished};
use crate::node_lease::{Lease, Use};
use crate::timing;

/// How the steps name a driver of the scenario: by a label, or as "the
/// driver".
pub trait DriverLabel: Clone + PartialEq + std::fmt::Debug {
    /// "the driver": the unnamed one, else the scenario's first.
    fn is_the_driver(&self) -> bool;
}

/// A pod the scenario created.
#[derive(Debug, Clone)]
pub struct PodRecord {
    pub name: String,
    /// The pod claims' names.
    pub pod_claims: Vec<String>,
}

/// One thing the scenario made, and so one cleanup.
#[derive(Debug)]
pub enum Created<L> {
    /// Deleting the namespace takes whatever is left in it.
    Namespace(String),
    /// Every pod of the namespace (also those controllers made), deleted and
    /// waited for: upstream's builder `tearDown`.
    AllPods,
    /// Every claim of the namespace, deleted; then the waits until the
    /// plugins unprepared them and they are gone.
    AllClaims,
    Driver {
        label: L,
        /// Boxed: a driver is much larger than any other entry.
        driver: Box<Driver>,
    },
    DeviceClass {
        /// The driver the class selects; `None` for a copy made by name.
        for_driver: Option<L>,
        name: String,
    },
    /// Deleted by [`Created::AllClaims`].
    Claim { name: String, uid: String },
    /// Deleted with the namespace.
    Template(String),
    /// Deleted by [`Created::AllPods`].
    Pod(PodRecord),
    /// A finalizer a step put on a pod; taken off before the pods are
    /// deleted, or their deletion would never finish.
    PodFinalizer { pod: String, finalizer: String },
    /// Every ResourceSlice of a driver the harness does not run (a step's
    /// own slice controller), deleted with the drivers: a step cut short
    /// by its timeout cannot clean up after itself.
    SlicesOf(String),
    /// The run's driver under test, used by this scenario through `label`
    /// with the run's class: the run owns both, so nothing is cleaned up.
    UnderTest {
        label: L,
        driver: String,
        class: String,
    },
    /// A step restarted the run's driver under test with another device
    /// count: it is restarted with the profile's again (and its devices
    /// waited for), so the next scenario finds it as deployed.
    DeviceCount,
    /// A step uninstalled the run's driver under test and no step installed
    /// it again: its slices left behind are deleted and it is installed
    /// again before the pods are deleted (the kubelet needs the driver to
    /// let their claims go), so the next scenario finds it as deployed.
    DriverUninstalled,
    /// A daemon of a real node a step stopped and no step started again:
    /// started before the pods are deleted (a stopped kubelet would never
    /// let them go), as upstream's `DeferCleanup` restarts the kubelet.
    StoppedDaemon { node: String, daemon: &'static str },
    /// A node a step cut off the control plane and no step connected again:
    /// connected before the pods are deleted (a node away never lets them
    /// go), and Ready again before the scenario gives it back.
    CutNode(String),
    /// The own-node taint on a node the scenario has to itself
    /// (`@OwnNodes`), taken off last, once the scenario's pods, drivers and
    /// stopped daemons are dealt with.
    OwnNode(String),
    /// An object of a manifest. Namespaced ones (workloads among them) go
    /// before the pods, so no controller re-creates pods.
    Object {
        resource: ApiResource,
        name: String,
        namespaced: bool,
    },
}

/// The steps of upstream's teardown, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pods,
    Claims,
    Classes,
    Drivers,
    Namespace,
}

impl Phase {
    const ORDER: [Phase; 5] = [
        Phase::Pods,
        Phase::Claims,
        Phase::Classes,
        Phase::Drivers,
        Phase::Namespace,
    ];

    /// The phase as `--timings` shows it; drivers time their own phases.
    fn timing(self) -> Option<timing::Phase> {
        match self {
            Phase::Pods => Some(timing::Phase::wait("delete pods")),
            Phase::Claims => Some(timing::Phase::wait("delete claims and wait for unprepare")),
            Phase::Classes => Some(timing::Phase::harness("delete device classes")),
            Phase::Drivers => None,
            Phase::Namespace => Some(timing::Phase::harness("delete namespace")),
        }
    }
}

impl<L> Created<L> {
    fn phase(&self) -> Phase {
        match self {
            Created::AllPods
            | Created::Pod(_)
            | Created::PodFinalizer { .. }
            | Created::StoppedDaemon { .. }
            | Created::CutNode(_)
            | Created::DriverUninstalled => Phase::Pods,
            Created::Object {
                namespaced: true, ..
            } => Phase::Pods,
            Created::AllClaims | Created::Claim { .. } => Phase::Claims,
            Created::DeviceClass { .. } => Phase::Classes,
            Created::Driver { .. }
            | Created::SlicesOf(_)
            | Created::UnderTest { .. }
            | Created::DeviceCount => Phase::Drivers,
            Created::Namespace(_)
            | Created::Template(_)
            | Created::Object { .. }
            | Created::OwnNode(_) => Phase::Namespace,
        }
    }
}

/// What the scenario made, most recent last; `L` is how its steps name a
/// driver.
#[derive(Debug)]
pub struct Scenario<L> {
    namespace: String,
    stack: Vec<Created<L>>,
    /// The drivers' waits until their slices are wiped, left by teardown
    /// to run beside the scenarios that follow.
    unfinished: Vec<Unfinished>,
    /// The scenario's nodes, shared or its own, held until teardown ends.
    lease: Option<Lease>,
    /// Nodes a scenario with nodes of its own shares with the others
    /// besides, held as long.
    more: Vec<Lease>,
}

impl<L> Default for Scenario<L> {
    fn default() -> Self {
        Scenario {
            namespace: String::new(),
            stack: Vec::new(),
            unfinished: Vec::new(),
            lease: None,
            more: Vec::new(),
        }
    }
}

impl<L: DriverLabel> Scenario<L> {
    /// The API of a namespaced kind in the scenario's namespace, through
    /// `client`: the handle a step hands the harness for its objects.
    pub fn api<K>(&self, client: kube::Client) -> kube::Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        kube::Api::namespaced(client, &self.namespace)
    }

    /// The scenario's namespace exists: it is deleted last, after the sweeps
    /// of its pods and claims.
    pub fn namespace_created(&mut self, namespace: &str) {
        self.namespace = namespace.to_owned();
        self.stack.push(Created::Namespace(namespace.to_owned()));
        self.stack.push(Created::AllPods);
        self.stack.push(Created::AllClaims);
    }

    /// Something the scenario made (or is about to make): its cleanup goes
    /// on the stack.
    pub fn push(&mut self, created: Created<L>) {
        self.stack.push(created);
    }

    /// Slices of `driver` are about to be published by a step: teardown
    /// deletes whatever the step leaves.
    pub fn slices_published(&mut self, driver: &str) {
        self.push(Created::SlicesOf(driver.to_owned()));
    }

    /// The driver under test is about to be restarted with another device
    /// count: teardown restores it (once, however many steps change it).
    pub fn restores_device_count(&mut self) {
        if !self.stack.iter().any(|c| matches!(c, Created::DeviceCount)) {
            self.push(Created::DeviceCount);
        }
    }

    /// The driver under test is about to be uninstalled: teardown installs
    /// it again unless a step does.
    pub fn driver_uninstalled(&mut self) {
        if !self
            .stack
            .iter()
            .any(|c| matches!(c, Created::DriverUninstalled))
        {
            self.push(Created::DriverUninstalled);
        }
    }

    /// The driver under test is installed again: nothing left for teardown.
    pub fn driver_installed_again(&mut self) {
        self.stack
            .retain(|c| !matches!(c, Created::DriverUninstalled));
    }

    /// `daemon` of `node` is stopped: teardown starts it unless a step does.
    pub fn daemon_stopped(&mut self, node: &str, daemon: &'static str) {
        self.push(Created::StoppedDaemon {
            node: node.to_owned(),
            daemon,
        });
    }

    /// `daemon` of `node` runs again: nothing to start at teardown.
    pub fn daemon_started(&mut self, node: &str, daemon: &str) {
        self.stack.retain(
            |c| !matches!(c, Created::StoppedDaemon { node: n, daemon: d } if n == node && *d == daemon),
        );
    }

    /// `node` is cut off the control plane: teardown connects it again unless a
    /// step does.
    pub fn node_cut(&mut self, node: &str) {
        self.push(Created::CutNode(node.to_owned()));
    }

    /// `node` is connected again: nothing to do at teardown.
    pub fn node_connected(&mut self, node: &str) {
        self.stack
            .retain(|c| !matches!(c, Created::CutNode(n) if n == node));
    }

    /// `finalizer` is on `pod` (or about to be): teardown removes it.
    pub fn finalizer_added(&mut self, pod: &str, finalizer: &str) {
        self.push(Created::PodFinalizer {
            pod: pod.to_owned(),
            finalizer: finalizer.to_owned(),
        });
    }

    /// The drivers, in creation order.
    pub fn drivers(&self) -> impl Iterator<Item = (&L, &Driver)> {
        self.stack.iter().filter_map(|c| match c {
            Created::Driver { label, driver } => Some((label, driver.as_ref())),
            _ => None,
        })
    }

    /// The driver `wanted` names: a label, or "the driver" (the unnamed one,
    /// else the scenario's first).
    fn driver_position(&self, wanted: &L) -> Option<usize> {
        let is_driver =
            |c: &Created<L>, want: &L| matches!(c, Created::Driver { label, .. } if label == want);
        self.stack
            .iter()
            .position(|c| is_driver(c, wanted))
            .or_else(|| {
                if wanted.is_the_driver() {
                    self.stack
                        .iter()
                        .position(|c| matches!(c, Created::Driver { .. }))
                } else {
                    None
                }
            })
    }

    pub fn driver(&self, wanted: &L) -> Option<&Driver> {
        match self.stack.get(self.driver_position(wanted)?) {
            Some(Created::Driver { driver, .. }) => Some(driver.as_ref()),
            _ => None,
        }
    }

    pub fn driver_mut(&mut self, wanted: &L) -> Option<&mut Driver> {
        let i = self.driver_position(wanted)?;
        match self.stack.get_mut(i) {
            Some(Created::Driver { driver, .. }) => Some(driver.as_mut()),
            _ => None,
        }
    }

    /// The run's driver under test is this scenario's `label`.
    pub fn use_driver_under_test(&mut self, label: L, driver: &str, class: &str) {
        self.push(Created::UnderTest {
            label,
            driver: driver.to_owned(),
            class: class.to_owned(),
        });
    }

    /// Drivers the scenario uses but does not host (the run's driver under
    /// test), with their names.
    pub fn external_drivers(&self) -> impl Iterator<Item = (&L, &str)> {
        self.stack.iter().filter_map(|c| match c {
            Created::UnderTest { label, driver, .. } => Some((label, driver.as_str())),
            _ => None,
        })
    }

    /// The classes made for drivers (or the run's class of its driver
    /// under test), with the driver each selects.
    pub fn driver_classes(&self) -> impl Iterator<Item = (&L, &str)> {
        self.stack.iter().filter_map(|c| match c {
            Created::DeviceClass {
                for_driver: Some(d),
                name,
            } => Some((d, name.as_str())),
            Created::UnderTest { label, class, .. } => Some((label, class.as_str())),
            _ => None,
        })
    }

    /// The class made for `wanted`; "the driver"'s class is the first
    /// driver's when no class was made for "the driver" itself.
    pub fn class_for(&self, wanted: &L) -> Option<&str> {
        // A later class for the same driver replaces the earlier one.
        let of = |d: &L| {
            self.driver_classes()
                .filter(|(f, _)| *f == d)
                .last()
                .map(|(_, n)| n)
        };
        of(wanted).or_else(|| {
            if wanted.is_the_driver() {
                let (first, _) = self.drivers().next()?;
                of(first)
            } else {
                None
            }
        })
    }

    pub fn pods(&self) -> impl Iterator<Item = &PodRecord> {
        self.stack.iter().filter_map(|c| match c {
            Created::Pod(p) => Some(p),
            _ => None,
        })
    }

    /// The UID claim `name` had when this scenario created it.
    pub fn claim_uid(&self, name: &str) -> Option<&str> {
        // The latest claim of that name: one may be re-created.
        self.stack.iter().rev().find_map(|c| match c {
            Created::Claim { name: n, uid } if n == name => Some(uid.as_str()),
            _ => None,
        })
    }

    /// The manifest objects, with whether each is namespaced.
    pub fn objects(&self) -> impl Iterator<Item = (&ApiResource, &str, bool)> {
        self.stack.iter().filter_map(|c| match c {
            Created::Object {
                resource,
                name,
                namespaced,
            } => Some((resource, name.as_str(), *namespaced)),
            _ => None,
        })
    }

    /// A manifest object a step deleted: nothing left for teardown.
    pub fn forget_object(&mut self, kind: &str, name: &str) {
        self.stack.retain(|c| {
            !matches!(c, Created::Object { resource, name: n, .. }
                if resource.kind == kind && n == name)
        });
    }

    /// The scenario's nodes are `lease`'s until its teardown ends.
    pub fn hold_nodes(&mut self, lease: Lease) {
        self.lease = Some(lease);
    }

    /// More nodes the scenario shares with other scenarios, besides its
    /// own, until its teardown ends.
    pub fn hold_more_nodes(&mut self, lease: Lease) {
        self.more.push(lease);
    }

    /// A node of the scenario's own carries the own-node taint: teardown
    /// takes it off.
    pub fn own_node_tainted(&mut self, node: &str) {
        self.push(Created::OwnNode(node.to_owned()));
    }

    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Whether the scenario has nodes of its own: its pods tolerate their
    /// taint.
    pub fn owns_nodes(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| l.how() == Use::Own)
    }

    /// The waits teardown left: until each driver's proxy pods are gone
    /// and its slices wiped. The scenario's outcome still depends on them.
    pub fn take_unfinished(&mut self) -> Vec<Unfinished> {
        std::mem::take(&mut self.unfinished)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::resource::v1::DeviceClass;

    use super::*;

    /// How the tests name a driver: `None` is "the driver".
    #[derive(Debug, Clone, PartialEq)]
    struct Label(Option<&'static str>);

    impl DriverLabel for Label {
        fn is_the_driver(&self) -> bool {
            self.0.is_none()
        }
    }

    const THE: Label = Label(None);

    fn class(d: Label, name: &str) -> Created<Label> {
        Created::DeviceClass {
            for_driver: Some(d),
            name: name.into(),
        }
    }

    #[test]
    fn teardown_phases_keep_upstreams_order() {
        let mut s = Scenario::default();
        s.namespace_created("ns");
        s.push(class(THE, "c"));
        s.push(Created::Pod(PodRecord {
            name: "p".into(),
            pod_claims: vec![],
        }));
        s.push(Created::Object {
            resource: ApiResource::erase::<Pod>(&()),
            name: "o".into(),
            namespaced: true,
        });
        let order: Vec<Phase> = Phase::ORDER
            .into_iter()
            .flat_map(|p| s.stack.iter().rev().filter(move |c| c.phase() == p))
            .map(Created::phase)
            .collect();
        assert_eq!(
            order,
            [
                Phase::Pods,
                Phase::Pods,
                Phase::Pods,
                Phase::Claims,
                Phase::Classes,
                Phase::Namespace
            ]
        );
        // Within a phase, last in first out: the workload before the sweep.
        let pods: Vec<&Created<Label>> = s
            .stack
            .iter()
            .rev()
            .filter(|c| c.phase() == Phase::Pods)
            .collect();
        assert!(matches!(pods[0], Created::Object { .. }));
        assert!(matches!(pods[2], Created::AllPods));
    }

    #[test]
    fn the_class_of_the_driver_falls_back_to_the_first_drivers() {
        let mut s = Scenario::default();
        s.push(class(Label(Some("a")), "class-a"));
        assert_eq!(s.class_for(&Label(Some("a"))), Some("class-a"));
        assert_eq!(s.class_for(&Label(Some("b"))), None);
        // Without drivers there is no first one to fall back to.
        assert_eq!(s.class_for(&THE), None);
        s.push(class(THE, "class"));
        assert_eq!(s.class_for(&THE), Some("class"));
    }

    #[test]
    fn forgotten_objects_are_not_cleaned() {
        let mut s = Scenario::<Label>::default();
        s.push(Created::Object {
            resource: ApiResource::erase::<DeviceClass>(&()),
            name: "x".into(),
            namespaced: false,
        });
        s.forget_object("DeviceClass", "x");
        assert_eq!(s.objects().count(), 0);
    }
}
