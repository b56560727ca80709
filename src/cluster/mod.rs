//! Reaching a cluster: a local control plane, or any cluster from a kubeconfig.
pub mod local;
