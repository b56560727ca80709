//! Finalizers a scenario puts on its pods to keep them (a pod deleted but
//! not gone) and takes off at teardown, each retried while the pod changes
//! under it.
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};

use dra_e2e_kube::wait::{self, Check, WaitError};

/// How long adding or removing a finalizer is retried while the pod changes
/// under it (upstream retries the removal for 30 s).
pub const FINALIZER_CHANGE: Duration = Duration::from_secs(30);

/// Puts `finalizer` on `pod` (a step's, which the scenario's teardown
/// takes off with [`remove`]). The patch carries the pod's
/// resourceVersion, so it fails rather than drop a finalizer someone else
/// added meanwhile; the kubelet and the scheduler write the pod too, so a
/// conflict is tried again.
pub async fn add(api: &Api<Pod>, pod: &str, finalizer: &str) -> Result<(), WaitError> {
    let what = format!("finalizer {finalizer} to be added to pod {pod}");
    wait::poll(
        &what,
        FINALIZER_CHANGE,
        Duration::from_millis(200),
        || async {
            let current = match api.get(pod).await {
                Ok(p) => p,
                Err(e) => return Check::Fail(format!("reading pod {pod}: {e}")),
            };
            let mut finalizers = current.metadata.finalizers.unwrap_or_default();
            if finalizers.iter().any(|f| f == finalizer) {
                return Check::Done(());
            }
            finalizers.push(finalizer.to_owned());
            let patch = serde_json::json!({
                "metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": current.metadata.resource_version,
                }
            });
            match api
                .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => Check::Done(()),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    Check::Pending(format!("the pod changed meanwhile: {}", e.message))
                }
                Err(e) => Check::Fail(format!("adding it: {e}")),
            }
        },
    )
    .await
}

/// Takes `finalizer` off `pod` (if it is still there), retried while the
/// pod changes under it: the teardown of a finalizer a step put on a pod
/// (`scenario::Created::PodFinalizer`).
pub async fn remove(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    finalizer: &str,
) -> Result<(), WaitError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let what = format!("finalizer {finalizer} to be removed from pod {pod}");
    wait::poll(&what, FINALIZER_CHANGE, Duration::from_secs(1), || async {
        let current = match api.get_opt(pod).await {
            Ok(Some(p)) => p,
            Ok(None) => return Check::Done(()),
            Err(e) => return Check::Pending(format!("reading the pod: {e}")),
        };
        let finalizers = current.metadata.finalizers.unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return Check::Done(());
        }
        let rest: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
        let patch = serde_json::json!({
            "metadata": {
                "finalizers": rest,
                "resourceVersion": current.metadata.resource_version,
            }
        });
        match api
            .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Check::Done(()),
            Err(e) => Check::Pending(format!("removing it: {e}")),
        }
    })
    .await?;
    Ok(())
}
