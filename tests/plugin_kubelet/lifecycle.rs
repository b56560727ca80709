//! The plugin's life: stop and drop end serving and remove its sockets,
//! a start replaces stale socket files, and the sockets take connections
//! as a kubelet makes them.
use std::sync::Mutex;
use std::time::Duration;

use dra_e2e::conn::authority::{CLIENT_URI, KubeletSocket};
use dra_e2e::plugin::{CallOutcome, NodeApi};
use dra_e2e::proto::method;
use dra_e2e::proto::pluginregistration::{InfoRequest, registration_client::RegistrationClient};
use hyper_util::rt::TokioIo;
use tonic::transport::Endpoint;

use super::support::*;

#[tokio::test]
async fn stop_cancels_stalled_calls_and_removes_sockets() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    let channel = dial_dra_patient(&node).await;
    let stalled = env
        .stalled(&node, method::V1_PREPARE, async move {
            prepare(NodeApi::V1, channel, &refs).await
        })
        .await;
    plugin.stop().await.unwrap();
    let err = stalled.await.unwrap().unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert_eq!(env.calls.log("node-a")[0].outcome, CallOutcome::Cancelled);
    assert!(!node.dra_socket().exists() && !node.registration_socket().exists());
    assert!(
        tokio::net::UnixStream::connect(node.dra_socket())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn dropping_the_handle_stops_serving() {
    let node = Node::new("node-a");
    let plugin = Env::new().start(&node).await;
    let mut client = RegistrationClient::new(dial_registration(&node).await);
    client.get_info(InfoRequest {}).await.unwrap();
    drop(plugin);
    assert!(!node.registration_socket().exists());
    assert!(!node.dra_socket().exists());
    // The established connection is shut down and cannot be re-dialled.
    assert!(client.get_info(InfoRequest {}).await.is_err());
}

#[tokio::test]
async fn start_replaces_stale_socket_files_and_keeps_a_successors_socket() {
    let node = Node::new("node-a");
    let env = Env::new();
    std::fs::create_dir_all(node.registration_socket().parent().unwrap()).unwrap();
    std::fs::write(node.registration_socket(), b"stale").unwrap();
    let old = env.start(&node).await;
    register(&node).await;

    // A new instance at the same paths, before the old handle goes away.
    let new = env.start(&node).await;
    drop(old);
    assert!(
        node.registration_socket().exists(),
        "old instance removed new socket"
    );
    register(&node).await;
    new.wait_registered(WAIT).await.unwrap();
    new.stop().await.unwrap();
    assert!(!node.registration_socket().exists());
}

/// A real kubelet's grpc-go client dials the registration socket by bare
/// path and so sends the percent-encoded path as `:authority`
/// (`%2F…%2Fplugins_registry%2F<driver>-reg.sock`); h2 on its own answers
/// that with RST_STREAM(PROTOCOL_ERROR), and the kubelet logs "failed to get
/// plugin info using RPC GetInfo". Every call of the handshake, repeated on
/// one connection, must work with it.
#[tokio::test]
async fn registration_accepts_the_authority_a_kubelet_sends() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let socket = node.registration_socket();
    let authority = KubeletSocket::Registration.authority(&socket);
    assert_eq!(authority, socket.display().to_string().replace('/', "%2F"));
    assert!(
        http::uri::Authority::try_from(authority.as_str()).is_err(),
        "h2 accepts {authority} anyway: this test no longer proves anything"
    );

    let mut client = RegistrationClient::new(dial(KubeletSocket::Registration, &socket).await);
    for _ in 0..2 {
        let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
        assert_eq!(info.name, DRIVER);
    }
    notify_registered(&mut client).await;
    plugin.wait_registered(WAIT).await.unwrap();
    assert_eq!(env.calls.count("node-a", method::GET_INFO), 2);
    plugin.stop().await.unwrap();
}

/// The rewrite that lets the registration socket take a kubelet's
/// percent-encoded path is that socket's alone: calls to the DRA socket (a
/// kubelet sends `localhost` there) reach tonic as they were sent. Sent the
/// kind of authority only a registration socket accepts, a DRA call is
/// refused by h2 itself, before the plugin sees it; sent `localhost`, as a
/// kubelet does, it is served.
#[tokio::test]
async fn the_dra_socket_reads_calls_as_sent() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let socket = node.dra_socket();
    let authority = KubeletSocket::Registration.authority(&socket);
    assert!(
        http::uri::Authority::try_from(authority.as_str()).is_err(),
        "h2 accepts {authority} anyway: this test no longer proves anything"
    );
    let refs = [claim_ref("gone", "uid-9")];

    let as_registration = dial(KubeletSocket::Registration, &socket).await;
    let refused = unprepare(NodeApi::V1, as_registration, &refs).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 0);

    let unprepared = unprepare(NodeApi::V1, dial_dra(&node).await, &refs)
        .await
        .unwrap();
    assert_eq!(unprepared.len(), 1, "{unprepared:?}");
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 1);
    plugin.stop().await.unwrap();
}

/// Pre-dialled proxy connections may sit idle for a long time before the
/// kubelet's HTTP/2 preface arrives; the server must not give up on them.
/// Paused time lets an hour pass without waiting for it.
#[tokio::test(start_paused = true)]
async fn accepted_connections_have_no_handshake_deadline() {
    let node = Node::new("node-a");
    let plugin = Env::new().start(&node).await;
    let socket = node.registration_socket();
    let idle = tokio::net::UnixStream::connect(&socket).await.unwrap();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    let conn = Mutex::new(Some(idle));
    let channel = Endpoint::from_static(CLIENT_URI)
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let stream = conn.lock().unwrap().take();
            let stream = stream.map(|s| KubeletSocket::Registration.client_io(&socket, s));
            async move {
                stream
                    .map(TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("connection already used"))
            }
        }))
        .await
        .unwrap();
    let info = RegistrationClient::new(channel)
        .get_info(InfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, DRIVER);
    plugin.stop().await.unwrap();
}
