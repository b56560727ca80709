//! The harness a scenario drives: one DRA driver in one scenario
//! ([`driver`]: its RBAC, plugins on every node, ResourceSlices and
//! teardown) and the run's driver under test from its profile
//! ([`under_test`]: installed, deployed or interposed), with the domain
//! logic the steps call rather than hold: resource [`quantity`] arithmetic,
//! the kubelet's [`cgroup`] and OOM values, the [`device_metadata`] a
//! container reads and the [`pool_status`] request's checks and retries;
//! and the [`scenario`]'s cleanup stack with its teardown.
//! All of it stands on the cluster and plugin floors and knows nothing of
//! Gherkin; the steps parse their sentences and call it.
pub mod api_conformance;
pub mod api_requests;
pub mod calls;
pub mod cgroup;
pub mod claims;
pub mod containers;
pub mod crud;
pub mod daemonsets;
pub mod device_classes;
pub mod device_metadata;
pub mod device_plugin;
pub mod device_taints;
pub mod driver;
pub mod events;
pub mod health;
pub mod kubelet_metrics;
pub mod kubelet_plugins;
pub mod node_daemon;
pub mod node_lease;
pub mod node_loss;
pub mod nodes;
pub mod observed;
pub mod pod_finalizer;
pub mod pods;
pub mod pool_status;
#[cfg(test)]
mod props;
pub mod quantity;
pub mod quota;
pub mod resize;
pub mod scenario;
pub mod slices;
pub mod timing;
pub mod under_test;
pub mod workloads;
