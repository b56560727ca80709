//! Evidence that the assertions of features/optional_node_operations.feature
//! and features/compatibility_groups.feature can fail: the runner on
//! tests/fixtures/node-ops, whose scenarios each break what one of them
//! guards, must fail every scenario with the message of that assertion.

use crate::common;
use crate::common::allocation;
use allocation::allocation_results;
use common::*;

#[test]
fn every_node_operations_and_compatibility_assertion_fails_its_broken_variant() {
    // (scenario, the failing step, what its message must say)
    let expected: [(&str, &str, &[&str]); 9] = [
        (
            "the driver skips only the unprepare where all is expected",
            "And NodePrepareResources was called 0 times on node 0: ",
            &[
                "expected NodePrepareResources to have been called 0 time(s)",
                "observed 1",
            ],
        ),
        (
            "the driver skips nothing where the unprepare is to be skipped",
            "Then NodeUnprepareResources was called 0 times on node 0: ",
            &[
                "expected NodeUnprepareResources to have been called 0 time(s)",
                "observed 1",
            ],
        ),
        (
            "a claim unprepared by hand is still expected",
            "Then the plugin on node 0 has prepared claim \"external-claim\": ",
            &["to have prepared claim external-claim; prepared: []"],
        ),
        (
            "a node plugin is registered where none should be",
            "And NotifyRegistrationStatus was called 0 times on node 0: ",
            &[
                "expected NotifyRegistrationStatus to have been called 0 time(s)",
                "observed 1",
            ],
        ),
        (
            "the kubelet failed to prepare where no failure should be",
            "And pod \"tester-1\" got no \"FailedPrepareDynamicResources\" event: ",
            &[
                "expected no FailedPrepareDynamicResources event on pod tester-1, found 1: ",
                "is not registered",
            ],
        ),
        (
            "the kubelet prepares nothing and so fails nothing",
            "And pod \"tester-1\" gets a \"FailedPrepareDynamicResources\" event containing ",
            &[
                "did not finish within --step-timeout 20s",
                "waiting for a FailedPrepareDynamicResources event on pod tester-1",
            ],
        ),
        (
            "the remaining device is compatible after all",
            "Then pod \"pod-2\" is unschedulable: ",
            &["expected pod pod-2 to stay unscheduled, but it was scheduled"],
        ),
        (
            "the second device shares no group",
            "Then pod \"pod-2\" is running with env \"user_a=b\" in every container: ",
            &[
                "did not finish within --step-timeout 20s",
                "waiting for pod pod-2 to be running",
                "cannot allocate all claims",
            ],
        ),
        (
            "the slice does not carry the groups the check expects",
            "Then the slice of the driver with device \"gpu-0\" on node 0 has:",
            &[
                ".spec.devices[0].consumesCounters[0].compatibilityGroups[0] is \"vgpu\", expected \"mig\"",
            ],
        ),
    ];
    // Waits for what never comes (an event, a pod that stays pending) end at
    // the step timeout rather than at their own deadlines of minutes.
    broken_variants("node-ops", &["--step-timeout", "20s"], &expected);
}

/// What the simulated kubelet's `DRAOptionalNodeOperations` gate changes,
/// against the real scheduler: only a node that declares the feature gets a
/// device whose slice skips node operations, and there the pod runs without
/// any plugin registered. One node of two has the gate off; each has one
/// such device of a driver of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_node_declaring_optional_node_operations_gets_devices_that_skip_them() {
    use dra_e2e::cluster::local::{FeatureGates, LocalCluster, LocalClusterOptions};
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
    use kube::api::{Api, PostParams};
    use serde::de::DeserializeOwned;
    use serde_json::json;
    use std::time::Duration;

    async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
    where
        K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        let object: K = serde_json::from_value(value).unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {object:?}: {e}"))
    }

    /// Polls `api` for `name` until `done` says yes, for at most two minutes.
    async fn wait_until<K>(api: &Api<K>, name: &str, what: &str, done: impl Fn(&K) -> bool) -> K
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let mut last = None;
        for _ in 0..600 {
            if let Ok(Some(o)) = api.get_opt(name).await {
                if done(&o) {
                    return o;
                }
                last = Some(o);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("timed out waiting for {what}; last seen: {last:#?}");
    }

    let gate = "DRAOptionalNodeOperations";
    let cluster = LocalCluster::start(LocalClusterOptions {
        feature_gates: FeatureGates::new().with(gate, true),
        ..LocalClusterOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("starting the local cluster: {e}"));
    let nodes = cluster
        .start_nodes(2, |c| {
            if c.name.ends_with("-1") {
                c.optional_node_operations = false;
            }
        })
        .await
        .unwrap_or_else(|e| panic!("starting the simulated nodes: {e}"));
    let names = nodes.names();
    let (declaring, other) = (names[0].clone(), names[1].clone());
    let client = cluster.client();

    let node_api: Api<Node> = Api::all(client.clone());
    let declared = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.declared_features.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        declared(&node_api.get(&declaring).await.unwrap()),
        vec![gate.to_string()]
    );
    assert!(declared(&node_api.get(&other).await.unwrap()).is_empty());

    let ns = "dra-node-ops";
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await;
    wait_until(
        &Api::<ServiceAccount>::namespaced(client.clone(), ns),
        "default",
        "the default service account",
        |_| true,
    )
    .await;
    for (node, driver) in [(&declaring, "declaring"), (&other, "other")] {
        let driver = format!("{driver}.node-ops.example.com");
        create(
            &Api::<ResourceSlice>::all(client.clone()),
            json!({
                "metadata": {"name": format!("{node}-{driver}")},
                "spec": {
                    "driver": driver, "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "skipNodeOperations": ["*"],
                    "devices": [{"name": "device-0"}],
                },
            }),
        )
        .await;
        create(
            &Api::<DeviceClass>::all(client.clone()),
            json!({
                "metadata": {"name": driver},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{driver}'")}}]},
            }),
        )
        .await;
        let name = driver.split('.').next().unwrap_or_default().to_owned();
        create(
            &Api::<ResourceClaim>::namespaced(client.clone(), ns),
            json!({
                "metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": driver}}]}},
            }),
        )
        .await;
        create(
            &Api::<Pod>::namespaced(client.clone(), ns),
            json!({
                "metadata": {"name": name},
                "spec": {
                    "resourceClaims": [{"name": "c", "resourceClaimName": name}],
                    "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "c"}]}}],
                },
            }),
        )
        .await;
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    // No plugin of either driver is registered anywhere: the pod runs only
    // because its node skips the prepare the allocation says to skip.
    let running = wait_until(&pods, "declaring", "pod declaring to run", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    assert_eq!(
        running.spec.as_ref().and_then(|s| s.node_name.clone()),
        Some(declaring.clone())
    );
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), ns);
    let results = allocation_results(&claims, "declaring").await;
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].skip_node_operations, Some(vec!["*".to_string()]));
    // The other node has the only device of its driver but does not declare
    // the feature, so the scheduler leaves the pod unschedulable.
    let pending = wait_until(&pods, "other", "pod other to be unschedulable", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
            })
    })
    .await;
    assert_eq!(pending.spec.and_then(|s| s.node_name), None);

    nodes
        .stop()
        .await
        .unwrap_or_else(|e| panic!("stopping the simulated nodes: {e}"));
    cluster
        .stop()
        .await
        .unwrap_or_else(|e| panic!("stopping the local cluster: {e}"));
}
