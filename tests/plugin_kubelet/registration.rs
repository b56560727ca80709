//! Registration as the kubelet's plugin watcher does it: the handshake
//! within the kubelet's deadline, and the API versions a plugin advertises
//! and serves.
use std::time::Duration;

use dra_e2e::plugin::{HealthApi, NodeApi, RegistrationStatus};
use dra_e2e::proto::health::watch_health;
use dra_e2e::proto::method;
use dra_e2e::proto::pluginregistration::{
    RegistrationStatus as PbStatus, registration_client::RegistrationClient,
};

use super::support::*;

#[tokio::test]
async fn registration_handshake_completes_within_the_kubelet_deadline() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    assert!(node.dra_socket().exists() && node.registration_socket().exists());
    assert_eq!(plugin.registration_status(), RegistrationStatus::Pending);

    let info = register(&node).await;
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, node.dra_socket().display().to_string());
    assert_eq!(
        info.supported_versions,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1.DRAResourceHealth",
            "v1alpha1.DRAResourceHealth"
        ]
    );
    plugin.wait_registered(WAIT).await.unwrap();
    assert!(plugin.is_registered());
    assert_eq!(env.calls.count("node-a", method::GET_INFO), 1);
    assert_eq!(
        env.calls
            .count("node-a", method::NOTIFY_REGISTRATION_STATUS),
        1
    );

    // A rejection is recorded and answered with an error, as the helper does.
    let mut client = RegistrationClient::new(dial_registration(&node).await);
    let err = client
        .notify_registration_status(PbStatus {
            plugin_registered: false,
            error: "no matching version".to_owned(),
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("no matching version"), "{err:?}");
    assert_eq!(
        plugin.registration_status(),
        RegistrationStatus::Rejected("no matching version".to_owned())
    );

    plugin.stop().await.unwrap();
    assert!(!node.dra_socket().exists(), "DRA socket left behind");
    assert!(
        !node.registration_socket().exists(),
        "registration socket left behind"
    );
}

#[tokio::test]
async fn wait_registered_times_out_with_the_last_status() {
    let node = Node::new("node-a");
    let plugin = Env::new().start(&node).await;
    let err = plugin
        .wait_registered(Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not yet notified"), "{err}");
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn plugin_offering_only_v1beta1_advertises_only_it_and_rejects_v1_calls() {
    let node = Node::new("node-a");
    let env = Env::new();
    let config = env
        .config(&node)
        .with_node_apis([NodeApi::V1beta1])
        .with_health_apis([]);
    let plugin = node.start(config).await;
    let info = register(&node).await;
    assert_eq!(info.supported_versions, ["v1beta1.DRAPlugin"]);

    let refs = env.two_claims();
    let channel = dial_dra(&node).await;
    let err = prepare(NodeApi::V1, channel.clone(), &refs)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    let err = prepare(NodeApi::V1alpha4, channel.clone(), &refs)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    let Err(err) = watch_health(HealthApi::V1alpha1, channel.clone()).await else {
        panic!("health served although not configured");
    };
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    assert!(plugin.prepared_claims().is_empty());

    let prepared = prepare(NodeApi::V1beta1, channel, &refs).await.unwrap();
    assert_eq!(prepared.len(), 2);
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn v1alpha4_alone_is_advertised_with_the_legacy_version() {
    let node = Node::new("node-a");
    let config = Env::new()
        .config(&node)
        .with_node_apis([NodeApi::V1alpha4])
        .with_health_apis([]);
    let plugin = node.start(config).await;
    assert_eq!(register(&node).await.supported_versions, ["1.0.0"]);
    plugin.stop().await.unwrap();
}
