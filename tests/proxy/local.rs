//! The local proxy path end to end: unix client -> `dra-e2e proxy-agent`
//! subprocess -> pre-dialled pool over the agent's private unix socket ->
//! tonic server.

use std::time::Duration;

use super::support::*;
use dra_e2e::cluster::proxy::{LocalAgent, ProxySide};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_call_reaches_the_server_through_agent_and_pool() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let agent = LocalAgent::start(agent_config(&dir, "reg.sock"))
        .await
        .unwrap();
    let (pool, plugin, server) = serve_pooled(&agent);

    let info = kubelet_get_info(agent.socket()).await.unwrap();
    assert_eq!(info.name, DRIVER);
    assert_eq!(plugin.calls(), 1);
    let stats = pool.stats();
    assert_eq!(stats.handed_out, 1, "{stats:?}");
    assert_eq!(stats.dead_before_use, 0, "{stats:?}");

    pool.shutdown().await;
    agent.stop().await.unwrap();
    let _ = server.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_kubelet_connections_all_succeed() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let agent = LocalAgent::start(agent_config(&dir, "reg.sock"))
        .await
        .unwrap();
    let (pool, plugin, _server) = serve_pooled(&agent);
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();

    // Each client holds its connection open, so all ten slots are in use at once.
    let mut clients = Vec::new();
    for _ in 0..10 {
        let socket = agent.socket().to_owned();
        clients.push(tokio::spawn(async move {
            let channel = kubelet_channel(&socket).await.map_err(|e| e.to_string())?;
            let info = get_info(channel.clone()).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((info, channel))
        }));
    }
    let mut channels = Vec::new();
    for c in clients {
        let (info, channel) = c.await.unwrap().unwrap();
        assert_eq!(info.name, DRIVER);
        channels.push(channel);
    }
    assert_eq!(plugin.calls(), 10);
    let stats = pool.stats();
    assert_eq!(stats.handed_out, 10, "{stats:?}");
    assert_eq!(stats.in_use, 10, "{stats:?}");
    // A second call on every open connection reuses it.
    for ch in &channels {
        get_info(ch.clone()).await.unwrap();
    }
    assert_eq!(pool.stats().handed_out, 10);

    pool.shutdown().await;
    agent.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_at_the_head_of_the_queue_costs_one_failed_attempt() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let agent = LocalAgent::start(agent_config(&dir, "reg.sock"))
        .await
        .unwrap();
    // A connection that dies unused, queued before the pool's ones, as a
    // port-forward that broke after dialling would be.
    let runner_side = runner_side(&agent);
    drop(tokio::net::UnixStream::connect(&runner_side).await.unwrap());
    let (pool, plugin, _server) = serve_pooled(&agent);
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();

    let mut outcomes = Vec::new();
    for _ in 0..6 {
        outcomes.push(kubelet_get_info(agent.socket()).await.is_ok());
    }
    // The kernel may already have dropped the dead connection from the
    // agent's backlog (then nothing fails); it must never cost more than the
    // first attempt.
    assert!(
        outcomes[1..].iter().all(|ok| *ok),
        "only the first attempt may fail: {outcomes:?}"
    );
    let succeeded = outcomes.iter().filter(|ok| **ok).count();
    assert_eq!(plugin.calls(), succeeded);
    let stats = pool.stats();
    assert_eq!(stats.dead_before_use, 0, "{stats:?}");
    assert_eq!(stats.dial_failures, 0, "{stats:?}");
    assert_eq!(stats.handed_out, succeeded as u64, "{stats:?}");

    pool.shutdown().await;
    agent.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_agent_restarts_without_restarting_the_server() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let agent = LocalAgent::start(agent_config(&dir, "reg.sock"))
        .await
        .unwrap();
    let proxy = agent.proxy().clone();
    let socket = agent.socket().to_owned();
    let (pool, plugin, server) = serve_pooled(&agent);
    kubelet_get_info(&socket).await.unwrap();
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();

    let status = agent.kill().await.unwrap();
    assert!(!status.success());
    assert!(socket.exists(), "a killed agent leaves its socket behind");
    // The queued connections die with the agent and redials are refused.
    pool.wait_for(|s| s.waiting == 0 && s.dial_failures > 0, WAIT)
        .await
        .unwrap();
    assert_eq!(
        pool.stats().dead_before_use,
        10,
        "every queued connection died"
    );

    let agent = LocalAgent::start(agent_config(&dir, "reg.sock").proxy_on(proxy))
        .await
        .unwrap();
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();
    kubelet_get_info(&socket).await.unwrap();
    kubelet_register(&socket).await.unwrap();
    assert!(!server.is_finished(), "the server kept running");
    assert_eq!(plugin.calls(), 3);

    pool.shutdown().await;
    agent.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_handshake_right_after_start() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let (socket, plugin, _server) = served_locally(&dir).await;
    // The kubelet connects as soon as the socket appears: no waiting for the pool.
    let info = kubelet_register(socket.path()).await.unwrap();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.supported_versions, ["v1.DRAPlugin"]);
    let statuses = plugin.statuses.lock().unwrap().clone();
    assert_eq!(statuses.len(), 1);
    assert!(statuses[0].plugin_registered);
    socket.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_leaves_no_process_socket_or_connection() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let (socket, _plugin, server) = served_locally(&dir).await;
    let agent = socket.local_agent().unwrap();
    let ProxySide::Unix(runner_side) = agent.proxy else {
        panic!("a local agent waits on a unix socket: {:?}", agent.proxy);
    };
    let (pid, path) = (agent.pid, socket.path().to_owned());
    socket
        .pool()
        .wait_for(|s| s.waiting == 10, WAIT)
        .await
        .unwrap();
    // One connection stays in use by a client across the stop.
    let channel = kubelet_channel(&path).await.unwrap();
    get_info(channel.clone()).await.unwrap();
    assert!(!unix_sockets_at(&runner_side).is_empty());

    socket.stop().await.unwrap();

    assert!(!path.exists(), "socket file removed");
    assert!(!runner_side.exists(), "runner-side socket file removed");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "agent process {pid} is gone"
    );
    let left = eventually(WAIT, || {
        let left = unix_sockets_at(&runner_side);
        left.is_empty().then_some(())
    })
    .await;
    assert!(
        left.is_some(),
        "connections left: {:?}",
        unix_sockets_at(&runner_side)
    );
    assert!(
        get_info(channel).await.is_err(),
        "the in-use connection was closed"
    );
    // The server's connection source ended with the pool.
    tokio::time::timeout(WAIT, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
