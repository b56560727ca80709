//! dra-e2e: an end-to-end test runner for Kubernetes Dynamic Resource Allocation.
//!
//! The crates of the workspace are its floors; each depends only on floors
//! below it, and Cargo, not convention, keeps it so:
//!
//! 5. `dra-e2e` (this crate): the command line and the main flow
//!    ([`runner`]), the Gherkin steps with a scenario's lifecycle
//!    ([`steps`]) and the reports ([`report`]).
//! 4. `dra-e2e-harness`: one test driver in a scenario ([`driver`]), the
//!    run's driver under test from its profile ([`under_test`]), and the
//!    domain logic steps call: resource [`quantity`] parsing, the kubelet's
//!    [`cgroup`] and OOM values, the [`device_metadata`] check and the
//!    [`pool_status`] checks and retries.
//! 3. `dra-e2e-cluster`: starting or reaching the cluster ([`cluster`]),
//!    with this machine's processes and PKI ([`host`]), images ([`images`]),
//!    sockets on nodes reached through agents ([`proxy`]) and real kubelets
//!    in namespaces ([`real_node`]).
//! 2. `dra-e2e-plugin` (the kubelet plugin servers and the interposer) and
//!    `dra-e2e-node-sim` (the simulated kubelet). The simulated kubelet
//!    reaches plugins only through their sockets: it does not depend on
//!    `dra-e2e-plugin`.
//! 1. The ground: `dra-e2e-proto` (the kubelet's gRPC APIs),
//!    `dra-e2e-conn` (connections, [`node_host`]), `dra-e2e-kube` (object
//!    builders, waits, node readiness), `dra-e2e-profile` (which driver is
//!    under test) and `dra-e2e-agent` (the small program that runs on nodes).
//! 0. `dra-e2e-sys`: the operating system calls, safe, with every `unsafe`
//!    in one place.
//!
//! The names below keep every floor reachable as `dra_e2e::<module>`, the
//! paths the steps, the tests and the benchmarks use.
pub use dra_e2e_agent as agent;
pub use dra_e2e_cluster as cluster;
pub use dra_e2e_cluster::{host, images, proxy, real_node};
pub use dra_e2e_conn as conn;
pub use dra_e2e_conn::{later, node_files, node_host};
pub use dra_e2e_harness::{
    api_conformance, cgroup, device_metadata, driver, kubelet_metrics, node_lease, pool_status,
    quantity, under_test,
};
pub use dra_e2e_kube::{discovery, node_ready, objects, wait};
pub use dra_e2e_node_sim as node_sim;
pub use dra_e2e_plugin as plugin;
pub use dra_e2e_profile as profile;
pub use dra_e2e_proto as proto;
pub use dra_e2e_sys as sys;

pub mod report;
pub mod runner;
#[path = "../steps/mod.rs"]
pub mod steps;
