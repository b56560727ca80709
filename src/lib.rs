//! dra-e2e: an end-to-end test runner for Kubernetes Dynamic Resource Allocation.
//!
//! The modules stand on floors; each uses only floors below its own (and
//! modules beside it on the ground floor), so dependencies point one way:
//!
//! 5. `runner`: the command line, the main flow, reports, `cluster up`.
//! 4. `steps`: the Gherkin steps, with a scenario's lifecycle.
//! 3. `driver` (one test driver instance in a scenario), `cluster`
//!    (starting or reaching the cluster, its nodes and their sockets) and
//!    `under_test` (the run's driver under test, from its profile).
//! 2. `plugin` (the kubelet plugin servers), `proxy` (sockets on nodes
//!    reached through agents), `node_sim` (the simulated kubelet) and
//!    `real_node` (real kubelets in namespaces).
//! 1. The ground: `proto`, `conn`, `node_files`, `node_host` (what a plugin
//!    needs of its nodes; `cluster` implements it, `driver` uses it),
//!    `node_ready`, `host` (processes, PKI and built programs on this
//!    machine), `images`, `objects`, `wait`, `report`, `profile` (which
//!    driver is under test, from a driver profile file or flags).
//!
//! `node_sim` reaches plugins only through their sockets, never `plugin`.
pub mod cluster;
pub mod conn;
pub mod driver;
pub mod host;
pub mod images;
pub mod later;
pub mod node_files;
pub mod node_host;
pub mod node_ready;
pub mod node_sim;
pub mod objects;
pub mod plugin;
pub mod profile;
pub mod proto;
pub mod proxy;
pub mod real_node;
pub mod report;
pub mod runner;
#[path = "../steps/mod.rs"]
pub mod steps;
pub mod under_test;
pub mod wait;
