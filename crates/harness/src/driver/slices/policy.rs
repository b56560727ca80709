//! The admission policy that keeps a plugin to its own node's slices, and
//! the wait until it is in force: the API server takes a moment to load a
//! new policy, and scenarios check that such writes are denied from the
//! first request on.
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, PostParams};

/// Waits until the admission policy that keeps a plugin to its own node's
/// slices is in force for `plugin` (a client acting as the driver's plugin on
/// some node): a dry-run create of a slice for a node that does not exist is
/// denied. The API server takes a moment to load a new policy, and scenarios
/// check that such writes are denied from the first request on.
pub async fn wait_policy_enforced(
    plugin: &kube::Client,
    driver: &str,
    timeout: Duration,
) -> Result<(), dra_e2e_kube::wait::WaitError> {
    use dra_e2e_kube::wait::{self, Check};
    let probe = ResourceSlice {
        metadata: kube::api::ObjectMeta {
            generate_name: Some("dra-e2e-policy-probe-".to_owned()),
            ..Default::default()
        },
        spec: k8s_openapi::api::resource::v1::ResourceSliceSpec {
            driver: driver.to_owned(),
            node_name: Some(POLICY_PROBE_NODE.to_owned()),
            pool: k8s_openapi::api::resource::v1::ResourcePool {
                name: POLICY_PROBE_NODE.to_owned(),
                generation: 1,
                resource_slice_count: 1,
            },
            ..Default::default()
        },
    };
    let api: Api<ResourceSlice> = Api::all(plugin.clone());
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait::poll(
        &format!("the ResourceSlice admission policy of {driver} to be in force"),
        timeout,
        Duration::from_millis(200),
        || async {
            match api.create(&pp, &probe).await {
                Ok(_) => Check::Pending("a plugin may still write another node's slice".into()),
                Err(e)
                    if e.to_string()
                        .contains("may not modify resourceslices on node") =>
                {
                    Check::Done(())
                }
                Err(e) => Check::Pending(format!("the probe failed otherwise: {e}")),
            }
        },
    )
    .await
}

/// A node name no cluster has, for [`wait_policy_enforced`]'s probe.
const POLICY_PROBE_NODE: &str = "dra-e2e-policy-probe-node";
