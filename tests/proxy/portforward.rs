//! The port-forward transport against a stand-in API server that speaks the
//! kubelet's WebSocket port-forward protocol (`v4.channel.k8s.io`) and
//! forwards to a real local agent:
//! unix client -> agent -> TCP -> stand-in kubelet -> WebSocket -> pool -> server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use dra_e2e::cluster::proxy::{LocalAgent, LocalAgentConfig, PoolConfig, PortForward, PreDialled};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

const WAIT: Duration = Duration::from_secs(20);
const NS: &str = "ns";
const POD: &str = "proxy-pod";
const CONTAINER: &str = "pause";

/// What the stand-in API server observed.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// Port-forward WebSockets opened.
    opened: usize,
    /// WebSockets the client ended with a close frame.
    client_closes: usize,
    /// WebSockets that ended, either way.
    ended: usize,
    pings: usize,
    /// Subprotocols the client offered on the last upgrade.
    offered: String,
    watches: usize,
}

struct FakeApi {
    addr: SocketAddr,
    seen: watch::Sender<Seen>,
    running: watch::Sender<bool>,
}

impl FakeApi {
    async fn start(running: bool) -> Arc<FakeApi> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = Arc::new(FakeApi {
            addr: listener.local_addr().unwrap(),
            seen: watch::Sender::new(Seen::default()),
            running: watch::Sender::new(running),
        });
        let a = api.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(a.clone().serve(conn));
            }
        });
        api
    }

    fn client(&self) -> kube::Client {
        let config = kube::Config::new(format!("http://{}", self.addr).parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    async fn wait_seen(&self, cond: impl Fn(&Seen) -> bool) -> Seen {
        let mut rx = self.seen.subscribe();
        let r = tokio::time::timeout(WAIT, rx.wait_for(|s| cond(s))).await;
        match r {
            Ok(Ok(s)) => s.clone(),
            _ => panic!("condition not met; last seen {:?}", self.seen()),
        }
    }

    fn pod_json(&self, running: bool) -> serde_json::Value {
        let state = if running {
            serde_json::json!({ "running": {} })
        } else {
            serde_json::json!({ "waiting": { "reason": "ContainerCreating" } })
        };
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": POD, "namespace": NS, "resourceVersion": "1" },
            "status": {
                "phase": if running { "Running" } else { "Pending" },
                "containerStatuses": [{
                    "name": CONTAINER, "ready": running, "restartCount": 0,
                    "image": "img", "imageID": "", "state": state
                }]
            }
        })
    }

    /// One client connection: plain requests until it upgrades.
    async fn serve(self: Arc<Self>, conn: TcpStream) {
        let mut reader = BufReader::new(conn);
        loop {
            let mut head = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
                head.push(line.trim_end().to_owned());
            }
            let target = head[0].split_whitespace().nth(1).unwrap_or("").to_owned();
            let header = |name: &str| {
                head.iter().find_map(|h| {
                    let (k, v) = h.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                })
            };
            let pods_path = format!("/api/v1/namespaces/{NS}/pods");
            if target.starts_with(&format!("{pods_path}/{POD}/portforward?ports=")) {
                let port: u16 = target.rsplit('=').next().unwrap().parse().unwrap();
                let key = header("sec-websocket-key").unwrap();
                // Counted before the client learns of the upgrade, so a
                // finished dial is always visible here.
                self.seen.send_modify(|s| {
                    s.opened += 1;
                    s.offered = header("sec-websocket-protocol").unwrap_or_default()
                });
                let response = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                     Sec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
                    derive_accept_key(key.as_bytes())
                );
                let mut conn = reader.into_inner();
                if conn.write_all(response.as_bytes()).await.is_err() {
                    self.seen.send_modify(|s| s.ended += 1);
                    return;
                }
                let ws = WebSocketStream::from_raw_socket(conn, Role::Server, None).await;
                self.forward(ws, port).await;
                return;
            }
            if target.starts_with(&pods_path) && target.contains("watch=true") {
                self.seen.send_modify(|s| s.watches += 1);
                let mut running = self.running.subscribe();
                let _ = running.wait_for(|r| *r).await;
                let event =
                    serde_json::json!({ "type": "MODIFIED", "object": self.pod_json(true) });
                let chunk = format!("{}\n", event);
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n",
                    chunk.len(),
                    chunk
                );
                let mut conn = reader.into_inner();
                let _ = conn.write_all(resp.as_bytes()).await;
                // Keep the watch open, as an API server does, until the client leaves.
                let _ = conn.read(&mut [0u8; 1]).await;
                return;
            }
            let (status, body) = if target.starts_with(&pods_path) {
                let running = *self.running.borrow();
                let list = serde_json::json!({
                    "apiVersion": "v1", "kind": "PodList",
                    "metadata": { "resourceVersion": "1" },
                    "items": [self.pod_json(running)]
                });
                ("200 OK", list.to_string())
            } else {
                (
                    "404 Not Found",
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}"#
                        .to_owned(),
                )
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if reader.get_mut().write_all(resp.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    /// What the kubelet does for one port-forward stream pair: announce the
    /// port on both channels, connect to the port in the pod, copy bytes; on
    /// a failed connect, report on the error channel and close.
    async fn forward(&self, ws: WebSocketStream<TcpStream>, port: u16) {
        let (mut sink, mut stream) = ws.split();
        let prefix = port.to_le_bytes();
        // The client may already be closing (pool shutdown right after a dial).
        let _ = sink
            .send(Message::binary(vec![0, prefix[0], prefix[1]]))
            .await;
        let _ = sink
            .send(Message::binary(vec![1, prefix[0], prefix[1]]))
            .await;
        let mut tcp = match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(t) => t,
            Err(e) => {
                let mut msg = vec![1];
                msg.extend_from_slice(format!("dial tcp 127.0.0.1:{port}: {e}").as_bytes());
                let _ = sink.send(Message::binary(msg)).await;
                let _ = sink.close().await;
                self.drain(stream).await;
                return;
            }
        };
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            tokio::select! {
                msg = stream.next() => match msg {
                    Some(Ok(Message::Binary(b))) if b.first() == Some(&0) => {
                        if tcp.write_all(&b[1..]).await.is_err() { break; }
                    }
                    Some(Ok(Message::Ping(_))) => self.seen.send_modify(|s| s.pings += 1),
                    Some(Ok(Message::Close(_))) => {
                        self.seen.send_modify(|s| s.client_closes += 1);
                        break;
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                },
                n = tcp.read(&mut buf) => match n {
                    Ok(n) if n > 0 => {
                        let mut msg = Vec::with_capacity(n + 1);
                        msg.push(0);
                        msg.extend_from_slice(&buf[..n]);
                        if sink.send(Message::binary(msg)).await.is_err() { break; }
                    }
                    _ => break,
                },
            }
        }
        self.seen.send_modify(|s| s.ended += 1);
    }

    async fn drain(&self, mut stream: futures::stream::SplitStream<WebSocketStream<TcpStream>>) {
        while let Some(Ok(msg)) = stream.next().await {
            if msg.is_close() {
                self.seen.send_modify(|s| s.client_closes += 1);
                break;
            }
        }
        self.seen.send_modify(|s| s.ended += 1);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn agent_on(dir: &tempfile::TempDir, port: u16) -> LocalAgent {
    let cfg = LocalAgentConfig::with_program(AGENT_EXE, dir.path().join("dra.sock"))
        .listen_on(SocketAddr::from(([127, 0, 0, 1], port)));
    LocalAgent::start(cfg).await.unwrap()
}

fn transport(api: &FakeApi, port: u16) -> PortForward {
    PortForward::new(api.client(), NS, POD, CONTAINER, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_through_port_forward() {
    init_logs();
    let api = FakeApi::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_on(&dir, 0).await;
    let port = agent.tcp_addr().unwrap().port();
    let (pool, incoming) =
        PreDialled::start(Arc::new(transport(&api, port)), PoolConfig::default());
    let plugin = Plugin::default();
    let _server = plugin.serve(incoming);

    kubelet_register(agent.socket()).await.unwrap();
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();
    for _ in 0..3 {
        kubelet_get_info(agent.socket()).await.unwrap();
    }
    assert_eq!(plugin.calls(), 4);
    let seen = api.seen();
    assert!(seen.offered.contains("v4.channel.k8s.io"), "{seen:?}");
    assert_eq!(pool.stats().dead_before_use, 0);

    // Refilled: ten idle connections, none in use.
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();
    let idle = 10;
    pool.shutdown().await;
    // Every WebSocket ends; the idle ones end with the client's close frame
    // (used ones may end from the pod side first, when the kubelet hangs up).
    let seen = api.wait_seen(|s| s.ended == s.opened).await;
    assert!(seen.client_closes >= idle, "idle {idle}, {seen:?}");
    agent.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_channel_marks_connections_dead_until_the_agent_listens() {
    init_logs();
    let api = FakeApi::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (pool, incoming) =
        PreDialled::start(Arc::new(transport(&api, port)), PoolConfig::default());
    let plugin = Plugin::default();
    let _server = plugin.serve(incoming);

    // Nothing listens yet: every forward reports "connection refused".
    pool.wait_for(|s| s.dead_before_use >= 3, WAIT)
        .await
        .unwrap();
    let stats = pool.stats();
    assert_eq!(stats.handed_out, 0, "{stats:?}");
    assert_eq!(
        stats.dial_failures, 0,
        "the upgrade itself worked: {stats:?}"
    );

    let agent = agent_on(&dir, port).await;
    kubelet_register(agent.socket()).await.unwrap();
    assert_eq!(plugin.calls(), 1);

    pool.shutdown().await;
    agent.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_pinged() {
    init_logs();
    let api = FakeApi::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_on(&dir, 0).await;
    let t = transport(&api, agent.tcp_addr().unwrap().port())
        .with_ping_interval(Duration::from_millis(50));
    let config = PoolConfig {
        slots: 1,
        ..PoolConfig::default()
    };
    let (pool, incoming) = PreDialled::start(Arc::new(t), config);
    let _server = Plugin::default().serve(incoming);
    api.wait_seen(|s| s.pings >= 3).await;
    // Pings are control frames: the idle connection is still waiting, unused.
    let stats = pool.stats();
    assert_eq!(
        (stats.waiting, stats.handed_out, stats.dead_before_use),
        (1, 0, 0),
        "{stats:?}"
    );
    kubelet_get_info(agent.socket()).await.unwrap();

    pool.shutdown().await;
    agent.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialling_waits_for_the_container_to_run() {
    init_logs();
    let api = FakeApi::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_on(&dir, 0).await;
    let (pool, incoming) = PreDialled::start(
        Arc::new(transport(&api, agent.tcp_addr().unwrap().port())),
        PoolConfig::default(),
    );
    let plugin = Plugin::default();
    let _server = plugin.serve(incoming);

    // The pool lists the pod, sees it pending and watches it.
    api.wait_seen(|s| s.watches == 1).await;
    assert_eq!(
        api.seen().opened,
        0,
        "no port-forward before the container runs"
    );
    assert_eq!(pool.stats().dialled, 0);

    api.running.send_replace(true);
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();
    kubelet_register(agent.socket()).await.unwrap();

    pool.shutdown().await;
    agent.stop().await.unwrap();
}
