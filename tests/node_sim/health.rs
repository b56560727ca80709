//! Device health on a simulated node: the node streams it from plugins that
//! advertise `v1alpha1.DRAResourceHealth` and reports it in the pod's
//! `containerStatuses[].allocatedResourcesStatus` (devices by their CDI
//! device ID, as the kubelet does); plugins without the service get no
//! stream and their devices stay `Unknown`.

use crate::common::allocation;

use super::support::*;
use allocation::allocation_results;
use dra_e2e::ground::objects::{PodClaims, PodShape};
use dra_e2e::node_sim::{NodeEventKind, SimNode};
use dra_e2e::plugin::{DeviceHealth, HealthApi, HealthStatus, NodeApi};
use dra_e2e::proto::method;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::Api;

const NODE: &str = "sim-0";
/// The single external claim's name inside the pod (upstream's name).
const POD_CLAIM: &str = "resource-claim";
const REQUEST: &str = "my-request";

/// Health and message of resource `id` in `container`'s
/// `allocatedResourcesStatus` entry `entry`, if the pod reports it.
fn reported(
    pod: Option<&Pod>,
    container: &str,
    entry: &str,
    id: &str,
) -> Option<(String, Option<String>)> {
    pod?.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)?
        .allocated_resources_status
        .as_ref()?
        .iter()
        .find(|s| s.name == entry)?
        .resources
        .as_ref()?
        .iter()
        .find(|r| r.resource_id == id)
        .map(|r| (r.health.clone().unwrap_or_default(), r.message.clone()))
}

/// A pod with the external claim `claim` and two containers: the first uses
/// the whole claim, the second names its request.
fn health_pod(name: &str, claim: &str) -> Pod {
    let mut shape = PodShape::new(name);
    shape.claims = PodClaims::External(vec![claim.into()]);
    shape.containers = 2;
    shape
        .container_claims
        .insert(1, vec![(POD_CLAIM.into(), Some(REQUEST.into()))]);
    shape.build().unwrap()
}

/// `(driver, pool, device)` of the claim's only allocated device.
async fn allocated_device(api: &Api<ResourceClaim>, claim: &str) -> (String, String, String) {
    let results = allocation_results(api, claim).await;
    assert_eq!(results.len(), 1, "allocation results: {results:?}");
    let r = &results[0];
    (r.driver.clone(), r.pool.clone(), r.device.clone())
}

/// The resource ID the node reports for the only device of `claim`, as the
/// kubelet does: the device's first CDI device ID. Checks that the plugin
/// prepared the allocated `(pool, device)`.
fn resource_id(node: &SimNode, ns: &str, claim: &str, pool: &str, device: &str) -> String {
    let prepared = node.prepared_claims();
    let c = prepared
        .iter()
        .find(|c| c.namespace == ns && c.name == claim)
        .unwrap_or_else(|| panic!("claim {ns}/{claim} not prepared: {prepared:?}"));
    assert_eq!(c.devices.len(), 1, "{c:?}");
    let d = &c.devices[0];
    assert_eq!(
        (d.pool_name.as_str(), d.device_name.as_str()),
        (pool, device)
    );
    d.cdi_device_ids.first().cloned().expect("a CDI device ID")
}

/// Waits until both containers of `pod` report `health` and `message` for
/// device `id`.
async fn wait_reported(
    pods: &Api<Pod>,
    pod: &str,
    id: &str,
    health: &'static str,
    message: Option<&str>,
) {
    let message = message.map(str::to_owned);
    let whole = format!("claim:{POD_CLAIM}");
    let by_request = format!("claim:{POD_CLAIM}/{REQUEST}");
    let want = Some((health.to_owned(), message.clone()));
    let id = id.to_owned();
    wait_for(
        pods,
        pod,
        &format!("{id} reported {health} ({message:?}) in both containers"),
        move |p: Option<&Pod>| {
            reported(p, "with-resource", &whole, &id) == want
                && reported(p, "with-resource-1", &by_request, &id) == want
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_health_in_pod_status() {
    let env = Env::start(1, |_| {}).await;
    let node = env.node(0);

    // A driver whose plugin serves the health stream.
    let ns = env.namespace("sim-health").await;
    let driver = Driver::start_with(&env, &ns, &[NodeApi::V1], 2, |c| {
        c.with_health_apis(HealthApi::ALL)
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &ns);
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), &ns);
    driver.create_claim("health-claim").await;
    create_pod(&env.client, &ns, &health_pod("health-pod", "health-claim")).await;
    wait_for(&pods, "health-pod", "pod running", is_running).await;
    let (d, pool, device) = allocated_device(&claims, "health-claim").await;
    assert_eq!(d, driver.name);
    let id = resource_id(node, &ns, "health-claim", &pool, &device);

    // Offered both, the node streams through the newest.
    driver
        .calls
        .wait_count(NODE, method::HEALTH_V1_WATCH, 1, DEADLINE)
        .await
        .expect("the node opens a v1 health stream");
    let view = node
        .plugins()
        .into_iter()
        .find(|p| p.driver == driver.name)
        .expect("plugin registered");
    assert_eq!(view.health, Some(HealthApi::V1), "{view:?}");
    assert_eq!(driver.calls.count(NODE, method::HEALTH_V1ALPHA1_WATCH), 0);
    // Nothing reported yet: the plugin's list starts empty.
    wait_reported(&pods, "health-pod", &id, "Unknown", None).await;

    let plugin = &driver.plugins[0];
    let long = "x".repeat(1500);
    let steps: [(HealthStatus, &str, &str, Option<&str>); 4] = [
        (
            HealthStatus::Healthy,
            "all good",
            "Healthy",
            Some("all good"),
        ),
        (
            HealthStatus::Unhealthy,
            "ECC error count exceeded",
            "Unhealthy",
            Some("ECC error count exceeded"),
        ),
        // The kubelet cuts messages to 1024 characters.
        (
            HealthStatus::Unhealthy,
            &long,
            "Unhealthy",
            Some(&long[..1024]),
        ),
        (HealthStatus::Healthy, "", "Healthy", None),
    ];
    for (health, message, want, want_message) in steps {
        plugin.set_device_health(DeviceHealth {
            pool: pool.clone(),
            device: device.clone(),
            health,
            message: message.to_owned(),
        });
        wait_reported(&pods, "health-pod", &id, want, want_message).await;
    }
    let event = node
        .wait_for_event(DEADLINE, |k| {
            matches!(k, NodeEventKind::DeviceHealth { device: dev, health, message, .. }
                if *dev == device && *health == HealthStatus::Unhealthy
                    && message == "ECC error count exceeded")
        })
        .await
        .expect("health change journaled");
    let device_ref = format!("{d}/{pool}/{device}");
    assert!(event.to_string().contains(&device_ref), "{event}");
    let known = node.device_health();
    assert!(
        known.iter().any(|h| h.driver == driver.name
            && h.pool == pool
            && h.device == device
            && h.health == HealthStatus::Healthy),
        "{known:?}"
    );

    // A driver offering only v1alpha1, as before dra-health v1: streamed
    // through v1alpha1, and its reports reach pod status the same way.
    let ns_old = env.namespace("sim-health-v1alpha1").await;
    let old = Driver::start_with(&env, &ns_old, &[NodeApi::V1], 2, |c| {
        c.with_health_apis([HealthApi::V1alpha1])
    })
    .await;
    let pods_old: Api<Pod> = Api::namespaced(env.client.clone(), &ns_old);
    let claims_old: Api<ResourceClaim> = Api::namespaced(env.client.clone(), &ns_old);
    old.create_claim("old-claim").await;
    create_pod(&env.client, &ns_old, &health_pod("old-pod", "old-claim")).await;
    wait_for(&pods_old, "old-pod", "pod running", is_running).await;
    let (_, pool_old, device_old) = allocated_device(&claims_old, "old-claim").await;
    old.calls
        .wait_count(NODE, method::HEALTH_V1ALPHA1_WATCH, 1, DEADLINE)
        .await
        .expect("the node opens a v1alpha1 health stream");
    assert_eq!(old.calls.count(NODE, method::HEALTH_V1_WATCH), 0);
    old.plugins[0].set_device_health(DeviceHealth {
        pool: pool_old.clone(),
        device: device_old.clone(),
        health: HealthStatus::Unhealthy,
        message: "fan failure".to_owned(),
    });
    let id_old = resource_id(node, &ns_old, "old-claim", &pool_old, &device_old);
    wait_reported(
        &pods_old,
        "old-pod",
        &id_old,
        "Unhealthy",
        Some("fan failure"),
    )
    .await;
    old.stop().await;

    // A driver without the health service: no stream, devices Unknown.
    let ns_off = env.namespace("sim-health-off").await;
    let plain = Driver::start(&env, &ns_off, &[NodeApi::V1], 2).await;
    let pods_off: Api<Pod> = Api::namespaced(env.client.clone(), &ns_off);
    let claims_off: Api<ResourceClaim> = Api::namespaced(env.client.clone(), &ns_off);
    plain.create_claim("plain-claim").await;
    create_pod(
        &env.client,
        &ns_off,
        &health_pod("plain-pod", "plain-claim"),
    )
    .await;
    wait_for(&pods_off, "plain-pod", "pod running", is_running).await;
    let (_, pool_off, device_off) = allocated_device(&claims_off, "plain-claim").await;
    let id_off = resource_id(node, &ns_off, "plain-claim", &pool_off, &device_off);
    wait_reported(&pods_off, "plain-pod", &id_off, "Unknown", None).await;
    assert_eq!(plain.calls.count(NODE, method::HEALTH_V1ALPHA1_WATCH), 0);
    assert_eq!(plain.calls.count(NODE, method::HEALTH_V1_WATCH), 0);
    assert!(
        node.plugins()
            .iter()
            .any(|p| p.driver == plain.name && p.health.is_none())
    );

    // Once the health plugin is gone, nothing vouches for its devices.
    let health_driver_name = driver.name.clone();
    driver.stop().await;
    wait_reported(&pods, "health-pod", &id, "Unknown", None).await;
    assert!(
        !node
            .device_health()
            .iter()
            .any(|h| h.driver == health_driver_name)
    );
    assert_eq!(plain.calls.count(NODE, method::HEALTH_V1ALPHA1_WATCH), 0);

    plain.stop().await;
    env.stop().await;
}
