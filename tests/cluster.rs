//! The tests that need root, Go (the control plane's first build) or a
//! running control plane, in one binary, so that an edit links them once.
//! `make test` turns on the `cluster-tests` feature that builds it and runs
//! its modules side by side (`hack/test-parallel.sh`, one job per module).
//! Each module is a file beside this one (or a directory's `main.rs`).
mod common;

/// The driver conformance pack's broken variants on the local cluster.
mod conformance;
/// Control-plane restarts on the local cluster.
mod control_plane_restarts;
/// Device plugins on the local cluster.
mod device_plugin;
/// Broken variants of the API checks on the local cluster.
mod fidelity_api;
/// Broken variants of the kubelet checks on the local cluster.
mod fidelity_kubelet;
/// Broken variants on the local cluster.
mod gaps;
/// The interposer in front of upstream's test driver.
mod interposer;
/// The local control plane.
mod local_cluster;
/// Device metadata on real nodes.
mod metadata;
/// Node-allocatable checks on real nodes.
mod node_allocatable;
/// Node operations on the local cluster.
mod node_ops;
/// The simulated kubelet against the control plane.
#[path = "node_sim/main.rs"]
mod node_sim;
/// Pool status on the local cluster.
mod pool_status;
/// Socket proxies, port-forward and the runner on the local cluster.
#[path = "proxy/main.rs"]
mod proxy;
/// Real kubelet nodes (root).
#[path = "real/main.rs"]
mod real;
/// Full runs on the local cluster.
mod runner;
/// Workloads on the local cluster.
mod workloads;
