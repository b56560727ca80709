//! A pod's containers restarted in place: their processes end as a crash
//! would, and the kubelet creates them again. It does so from the claims it
//! prepared before, without asking the driver: the CDI devices of the
//! claims must still resolve, whatever the driver did meanwhile.
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::when;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::ground::wait;

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
    let policy = current
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_default();
    // With Never the pod would end, with OnFailure a container that exits 0
    // on SIGTERM would stay exited: neither restarts it.
    if policy != "Always" {
        bail!(
            "pod {pod} has restart policy {policy:?}, so the kubelet would not start its \
             containers again; create it with `| restart policy | Always |`"
        );
    }
    let statuses = current
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    if statuses.is_empty() {
        bail!(
            "pod {pod} has no container statuses yet: {}",
            wait::describe_pod(Some(&current))
        );
    }
    let not_running: Vec<&str> = statuses
        .iter()
        .filter(|c| c.state.as_ref().is_none_or(|s| s.running.is_none()))
        .map(|c| c.name.as_str())
        .collect();
    if !not_running.is_empty() {
        bail!(
            "pod {pod}: containers {not_running:?} are not running, so they cannot be \
             restarted: {}",
            wait::describe_pod(Some(&current))
        );
    }
    // Their counts now: each must go past its own.
    let before: BTreeMap<String, i32> = statuses
        .iter()
        .map(|c| (c.name.clone(), c.restart_count))
        .collect();
    for container in before.keys() {
        ctx.cluster
            .end_container_process(&w.namespace, &pod, container)
            .await
            .with_context(|| format!("restarting container {container} of pod {pod}"))?;
    }
    tracing::info!(pod, containers = ?before.keys().collect::<Vec<_>>(), "container processes ended");
    let api: Api<Pod> = w.api()?;
    let what = format!("the containers of pod {pod} to run again after they were restarted");
    wait::pod(&api, &pod, &what, RESTART_TIMEOUT, |p: Option<&Pod>| {
        wait::containers_restarted(p, &before)
    })
    .await?;
    Ok(())
}
