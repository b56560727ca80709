//! The local cluster's control plane restarted in the middle of a
//! scenario: what scenarios in flight must ride out.
use cucumber::when;

use super::World;
use super::params::phrase_words;

sentences! {
    /// Stopped as an operator would (SIGTERM) and started again on the
    /// same address and certificates; done when it answers its readiness
    /// probe again. The local cluster only: on a kubeconfig cluster the
    /// step fails saying so.
    #[when(expr = "the {controlplane} is restarted")]
    fn restarted(component: Component);
}

/// A control-plane component the runner can restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component(&'static str);

phrase_words! {
    Component as "controlplane", "control-plane component" {
        "kube-apiserver" => Component("kube-apiserver"),
        "kube-scheduler" => Component("kube-scheduler"),
        "kube-controller-manager" => Component("kube-controller-manager"),
    }
}

async fn restarted(w: &mut World, Component(name): Component) -> anyhow::Result<()> {
    w.context()?.cluster.restart_component(name).await
}
