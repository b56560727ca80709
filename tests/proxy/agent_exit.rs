//! A local proxy agent that exits on its own is noticed by the moment it
//! exits: the pool of its socket reports it (socket, pid, status) through the
//! connection source, and a new agent takes over the socket for cleanup; an
//! agent the runner stops is not reported.

use std::time::Duration;

use super::support::*;
use dra_e2e::cluster::proxy::{LocalAgentConfig, PoolConfig, ProxiedSocket};
use futures::StreamExt as _;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_from_outside_is_reported_then_replaced() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let (socket, mut incoming) =
        ProxiedSocket::local(agent_config(&dir, "dra.sock"), PoolConfig::default())
            .await
            .unwrap();
    let pid = socket.local_agent().unwrap().pid;
    let path = socket.path().to_owned();
    socket
        .pool()
        .wait_for(|s| s.waiting == 10, WAIT)
        .await
        .unwrap();
    assert_eq!(socket.pool().broken(), None);

    // The agent child this test started.
    dra_e2e::sys::kill(pid, dra_e2e::sys::Signal::Kill).unwrap();

    let item = tokio::time::timeout(WAIT, incoming.next())
        .await
        .expect("the connection source reported nothing")
        .expect("the connection source ended instead of reporting");
    let message = match item {
        Ok(conn) => panic!("a connection instead of an error: {conn:?}"),
        Err(e) => e.to_string(),
    };
    for part in [
        path.to_str().unwrap(),
        &format!("pid {pid}"),
        "exited unexpectedly",
        "SIGKILL",
    ] {
        assert!(message.contains(part), "{part:?} missing in: {message}");
    }
    let broken = socket.pool().broken().expect("the pool records it");
    assert_eq!(broken, message);
    assert_eq!(socket.pool().stats().far_end_lost, 1);

    // A new agent serves the socket on the same port, so cleanup that needs
    // the plugin (unprepare) still reaches it.
    let info = socket
        .wait_local_agent(|i| i.restarts == 1, WAIT)
        .await
        .unwrap();
    assert_ne!(info.pid, pid);
    let plugin = Plugin::default();
    let _server = plugin.serve(incoming);
    let got = kubelet_get_info(&path).await.unwrap();
    assert_eq!(got.name, DRIVER);
    assert_eq!(socket.pool().stats().far_end_lost, 1, "reported once");

    socket.stop().await.unwrap();
    assert!(!path.exists(), "socket file removed");
    assert!(
        !std::path::Path::new(&format!("/proc/{}", info.pid)).exists(),
        "the replacement agent is gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_the_runner_stops_is_not_reported() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let (socket, incoming) =
        ProxiedSocket::local(agent_config(&dir, "dra.sock"), PoolConfig::default())
            .await
            .unwrap();
    let items = tokio::spawn(incoming.collect::<Vec<_>>());
    socket
        .pool()
        .wait_for(|s| s.waiting == 10, WAIT)
        .await
        .unwrap();
    socket.stop().await.unwrap();
    let items = tokio::time::timeout(WAIT, items).await.unwrap().unwrap();
    assert!(
        items.iter().all(|i| i.is_ok()),
        "errors after a requested stop: {items:?}"
    );
}

/// A failing agent reports its last words along with its exit status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_of_an_agent_that_fails_carries_its_stderr() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    // A stand-in agent: prints the ready line, complains, exits 3.
    let script = dir.path().join("agent.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"proxy-agent listening tcp=127.0.0.1:9 unix=x\"\nsleep 1\necho 'disk on fire' >&2\nexit 3\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    let config = LocalAgentConfig::with_program(&script, dir.path().join("dra.sock"));
    let (socket, mut incoming) = ProxiedSocket::local(config, PoolConfig::default())
        .await
        .unwrap();
    let message = loop {
        match tokio::time::timeout(WAIT, incoming.next()).await.unwrap() {
            Some(Err(e)) => break e.to_string(),
            Some(Ok(_)) => continue,
            None => panic!("ended without a report"),
        }
    };
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("disk on fire"), "{message}");
    socket.stop().await.unwrap();
}
