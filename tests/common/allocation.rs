//! What the scheduler allocated for a claim, read back from the API server
//! by the tests that run a cluster.
use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use kube::api::Api;

/// The devices allocated to claim `name`; none while it is not allocated.
pub async fn allocation_results(
    api: &Api<ResourceClaim>,
    name: &str,
) -> Vec<DeviceRequestAllocationResult> {
    api.get(name)
        .await
        .unwrap_or_else(|e| panic!("reading ResourceClaim {name}: {e}"))
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default()
}
