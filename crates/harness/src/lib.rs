//! The harness a scenario drives: one DRA driver in one scenario
//! ([`driver`]: its RBAC, plugins on every node, ResourceSlices and
//! teardown), the run's driver under test from its profile
//! ([`under_test`]: installed, deployed or interposed, and what the
//! conformance pack asks of it), and the [`scenario`] builder: its objects
//! created with their cleanup on one stack, its namespace, the bounds a
//! step runs within and the teardown.
//!
//! Below them, everything the steps ask of the cluster, each named after
//! its domain with its named wait conditions beside the waiting (as
//! kube-runtime keeps its `conditions`) and unit-tested there: [`pods`],
//! [`claims`], [`containers`], [`workloads`], [`daemonsets`], [`slices`],
//! [`device_classes`], [`device_taints`], [`device_plugin`],
//! [`kubelet_plugins`], [`health`], [`events`], [`nodes`] and the node
//! operations ([`node_daemon`], [`node_loss`], [`node_lease`]), the API
//! requests of the CRUD and API steps ([`crud`], [`api_requests`],
//! [`api_conformance`]), a plugin's [`calls`]; and the domain logic:
//! resource [`quantity`] arithmetic, the kubelet's [`cgroup`] and OOM
//! values, in-place [`resize`], the [`device_metadata`] a container reads,
//! the [`pool_status`] request, [`quota`] and [`kubelet_metrics`].
//!
//! All of it stands on the cluster and plugin floors and knows nothing of
//! Gherkin; the steps parse their sentences and call it (the step rule,
//! `tests/step_rule.rs`).
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
