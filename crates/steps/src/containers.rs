//! A pod's containers restarted in place: their processes end as a crash
//! would, and the kubelet creates them again. It does so from the claims it
//! prepared before, without asking the driver: the CDI devices of the
//! claims must still resolve, whatever the driver did meanwhile.
use std::time::Duration;

use anyhow::Context as _;
use cucumber::when;
use k8s_openapi::api::core::v1::Pod;

use crate::harness::containers;

use super::World;

sentences! {
    /// Ends the process of each regular container of the pod (`kill -TERM
    /// 1` in it; on a simulated node its kubelet ends it) and waits until
    /// the kubelet has started every one of them again, running and ready.
    /// The pod needs restart policy `Always`.
    #[when(expr = "the containers of pod {string} are restarted")]
    fn containers_restarted(pod: String);
}

/// How long the kubelet may take to start the containers again: the first
/// restart after an exit comes at once; a container the runtime cannot
/// create waits in `CreateContainerError`, which this wait then reports.
const RESTART_TIMEOUT: Duration = Duration::from_secs(60);

async fn containers_restarted(w: &World, pod: String) -> anyhow::Result<()> {
    let ctx = w.context()?;
    let current = w.pod(&pod).await?;
    // Their counts now: each must go past its own.
    let before = containers::restart_counts(&pod, &current)?;
    for container in before.keys() {
        ctx.cluster
            .end_container_process(&w.namespace, &pod, container)
            .await
            .with_context(|| format!("restarting container {container} of pod {pod}"))?;
    }
    tracing::info!(pod, containers = ?before.keys().collect::<Vec<_>>(), "container processes ended");
    containers::restarted(&w.api::<Pod>()?, &pod, &before, RESTART_TIMEOUT).await?;
    Ok(())
}
