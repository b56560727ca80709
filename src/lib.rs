//! dra-e2e: an end-to-end test runner for Kubernetes Dynamic Resource Allocation.
//!
//! The crates of the workspace are its floors; each depends only on floors
//! below it, and Cargo, not convention, keeps it so:
//!
//! 7. `dra-e2e` (this crate): the command line and the main flow
//!    ([`runner`]).
//! 6. `dra-e2e-steps` ([`steps`]): the Gherkin step library, the World and
//!    a scenario's lifecycle; its steps parse their sentence and call the
//!    harness (the step rule, `tests/step_rule.rs`).
//! 5. `dra-e2e-report` ([`report`]): scenario outcomes, timings and the
//!    reports written from them.
//! 4. `dra-e2e-harness` ([`harness`]): one test driver in a scenario
//!    (`harness::driver`), the run's driver under test from its profile
//!    (`harness::under_test`), and the domain logic steps call: resource
//!    quantities, the kubelet's cgroup and OOM values, the device metadata
//!    check and the pool status checks and retries.
//! 3. `dra-e2e-cluster` ([`cluster`]): starting or reaching the cluster,
//!    with this machine's processes and PKI (`cluster::host`), images
//!    (`cluster::images`), sockets on nodes reached through agents
//!    (`cluster::proxy`) and real kubelets in namespaces
//!    (`cluster::real_node`).
//! 2. `dra-e2e-plugin` ([`plugin`]: the kubelet plugin servers and the
//!    interposer) and `dra-e2e-node-sim` ([`node_sim`]: the simulated
//!    kubelet). The simulated kubelet reaches plugins only through their
//!    sockets: it does not depend on `dra-e2e-plugin`.
//! 1. `dra-e2e-proto` ([`proto`]: the kubelet's gRPC APIs), `dra-e2e-conn`
//!    ([`conn`]: connections, `conn::node_host`), `dra-e2e-kube`
//!    ([`ground`]: the Kubernetes API ground, its object builders, waits and
//!    node readiness), `dra-e2e-profile` ([`profile`]: which driver is under
//!    test) and `dra-e2e-agent` ([`agent`]: the small program that runs on
//!    nodes).
//! 0. `dra-e2e-sys` ([`sys`]): the operating system calls, safe, with every
//!    `unsafe` in one place.
//!
//! The front door names each crate once, whole, under its own name: the
//! package name without `dra-e2e-` (`-` as `_`), which is its directory in
//! `crates/`, so that `dra_e2e::cluster::proxy` is `crates/cluster/src/proxy`.
//! The one exception is `crates/kube`, whose plain name would read as the
//! `kube` crate the runner uses everywhere: it is [`ground`]
//! (`dra_e2e::ground::wait`). Nothing from inside a crate is re-exported
//! here: the runner's code names a module through its crate
//! (`crate::harness::driver` in `src/` and `crates/steps/`,
//! `dra_e2e::harness::driver` in `tests/` and `benches/`), never through
//! `dra_e2e_harness` itself. `tests/floors.rs` checks both.
pub use dra_e2e_agent as agent;
pub use dra_e2e_cluster as cluster;
pub use dra_e2e_conn as conn;
pub use dra_e2e_harness as harness;
pub use dra_e2e_kube as ground;
pub use dra_e2e_node_sim as node_sim;
pub use dra_e2e_plugin as plugin;
pub use dra_e2e_profile as profile;
pub use dra_e2e_proto as proto;
pub use dra_e2e_report as report;
pub use dra_e2e_steps as steps;
pub use dra_e2e_sys as sys;

pub mod runner;
