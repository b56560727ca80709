//! The device health stream: the sorted list at once, after changes and
//! every interval, served only in the configured versions.
use std::time::Duration;

use dra_e2e::plugin::{DeviceHealth, HealthApi, HealthStatus};
use dra_e2e::proto::health::watch_health;
use dra_e2e::proto::method;
use futures::StreamExt as _;

use super::support::*;

#[tokio::test]
async fn health_stream_sends_the_sorted_list_at_once_and_after_changes() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = node
        .start(
            env.config(&node)
                // Long enough that only changes produce the messages below.
                .with_health_interval(Duration::from_secs(3600)),
        )
        .await;
    let set = |pool: &str, device: &str, health: HealthStatus, message: &str| {
        plugin.set_device_health(DeviceHealth {
            pool: pool.into(),
            device: device.into(),
            health,
            message: message.into(),
        })
    };
    set("pool-b", "device-00", HealthStatus::Healthy, "");
    set("pool-a", "device-01", HealthStatus::Unhealthy, "fan");
    set("pool-a", "device-00", HealthStatus::Healthy, "");

    let mut stream = open_health(HealthApi::V1alpha1, dial_dra_patient(&node).await).await;
    let first = health_view(stream.next().await.unwrap().unwrap());
    let healthy = HealthStatus::Healthy;
    let unhealthy = HealthStatus::Unhealthy;
    assert_eq!(
        first,
        [
            ("pool-a".into(), "device-00".into(), healthy, String::new()),
            ("pool-a".into(), "device-01".into(), unhealthy, "fan".into()),
            ("pool-b".into(), "device-00".into(), healthy, String::new()),
        ]
    );
    assert_eq!(env.calls.count("node-a", method::HEALTH_V1ALPHA1_WATCH), 1);

    set("pool-a", "device-01", HealthStatus::Healthy, "fixed");
    let second = health_view(stream.next().await.unwrap().unwrap());
    assert_eq!(
        second[1],
        ("pool-a".into(), "device-01".into(), healthy, "fixed".into())
    );

    // The v1 service, on the same socket, sends the same list.
    let mut v1_stream = open_health(HealthApi::V1, dial_dra_patient(&node).await).await;
    let v1_report = v1_stream.next().await.unwrap().unwrap();
    assert_eq!(health_view(v1_report), second);
    assert_eq!(env.calls.count("node-a", method::HEALTH_V1_WATCH), 1);
    assert_eq!(env.calls.count("node-a", method::HEALTH_V1ALPHA1_WATCH), 1);

    // Stopping ends the open streams instead of waiting for the kubelet.
    plugin.stop().await.unwrap();
    assert!(matches!(stream.next().await, None | Some(Err(_))));
    assert!(matches!(v1_stream.next().await, None | Some(Err(_))));
}

#[tokio::test]
async fn health_is_served_only_in_the_configured_versions() {
    let node = Node::new("node-a");
    let plugin = node
        .start(
            Env::new()
                .config(&node)
                .with_health_apis([HealthApi::V1alpha1]),
        )
        .await;
    let info = register(&node).await;
    assert_eq!(
        info.supported_versions,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1alpha1.DRAResourceHealth"
        ]
    );
    let Err(status) = watch_health(HealthApi::V1, dial_dra_patient(&node).await).await else {
        panic!("v1 health served although not configured");
    };
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn health_stream_repeats_the_list_every_interval() {
    let node = Node::new("node-a");
    let plugin = node
        .start(
            Env::new()
                .config(&node)
                .with_health_interval(Duration::from_millis(20)),
        )
        .await;
    plugin.set_device_health(DeviceHealth {
        pool: "p".into(),
        device: "d".into(),
        health: HealthStatus::Healthy,
        message: String::new(),
    });
    let mut stream = open_health(HealthApi::V1alpha1, dial_dra_patient(&node).await).await;
    for _ in 0..3 {
        let report = stream.next().await.unwrap().unwrap();
        assert_eq!(report.devices.len(), 1);
    }
    plugin.stop().await.unwrap();
}
