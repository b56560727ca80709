//! dra-e2e: an end-to-end test runner for Kubernetes Dynamic Resource Allocation.
//!
//! Dependencies point one way: steps -> driver/objects/wait -> plugin/proxy/cluster -> proto.
//! `cluster` may use `node_sim`; `node_sim` reaches plugins only through their sockets.
pub mod cluster;
pub mod conn;
pub mod driver;
pub mod host;
pub mod images;
pub mod node_files;
pub mod node_host;
pub mod node_ready;
pub mod node_sim;
pub mod objects;
pub mod plugin;
pub mod proto;
pub mod proxy;
pub mod real_node;
pub mod report;
pub mod runner;
#[path = "../steps/mod.rs"]
pub mod steps;
pub mod wait;
