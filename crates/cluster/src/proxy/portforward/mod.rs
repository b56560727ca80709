//! Port-forward over WebSocket: one WebSocket per forwarded TCP connection,
//! opened through the API server with `kube::Client::connect`.
pub mod codec;

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{SinkExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tracing::{Instrument, debug};

use self::codec::{Codec, Inbound};
use super::transport::{DialError, Dialled, Transport};

/// Keeps idle pre-dialled connections alive through proxies and load balancers.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(5);
/// How long one readiness check waits for the container before reporting.
pub const DEFAULT_READY_WAIT: Duration = Duration::from_secs(120);
const DUPLEX_BUFFER: usize = 256 * 1024;
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Dials `<namespace>/<pod>:<port>` through the API server.
#[derive(Clone)]
pub struct PortForward {
    client: kube::Client,
    namespace: String,
    pod: String,
    container: String,
    port: u16,
    ping_interval: Duration,
    ready_wait: Duration,
}

impl std::fmt::Debug for PortForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortForward")
            .field("target", &self.target())
            .field("container", &self.container)
            .finish()
    }
}

impl PortForward {
    /// `container` must run before dialling starts.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        pod: impl Into<String>,
        container: impl Into<String>,
        port: u16,
    ) -> Self {
        Self {
            client,
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
            port,
            ping_interval: DEFAULT_PING_INTERVAL,
            ready_wait: DEFAULT_READY_WAIT,
        }
    }

    pub fn with_ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = interval;
        self
    }

    pub fn with_ready_wait(mut self, wait: Duration) -> Self {
        self.ready_wait = wait;
        self
    }

    fn path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/pods/{}/portforward?ports={}",
            self.namespace, self.pod, self.port
        )
    }

    /// Waits (list + watch from the list's version) until the container runs.
    async fn wait_running(&self) -> Result<(), DialError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let fields = format!("metadata.name={}", self.pod);
        let mut last = "no pod yet".to_owned();
        let waited = tokio::time::timeout(self.ready_wait, async {
            loop {
                let list = api.list(&ListParams::default().fields(&fields)).await?;
                if let Some(p) = list.items.first() {
                    last = container_state(p, &self.container);
                    if container_running(p, &self.container) {
                        return Ok::<(), kube::Error>(());
                    }
                }
                let rv = list.metadata.resource_version.unwrap_or_default();
                let mut events = api
                    .watch(&WatchParams::default().fields(&fields), &rv)
                    .await?
                    .boxed();
                while let Some(ev) = events.try_next().await? {
                    match ev {
                        WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                            last = container_state(&p, &self.container);
                            if container_running(&p, &self.container) {
                                return Ok(());
                            }
                        }
                        WatchEvent::Deleted(_) => last = "pod deleted".to_owned(),
                        WatchEvent::Bookmark(_) => {}
                        // Usually "resource version too old": list again.
                        WatchEvent::Error(e) => {
                            debug!(error = %e.message, "pod watch error; listing again");
                            break;
                        }
                    }
                }
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(DialError::NotReady {
                target: self.target(),
                message: format!("watching the pod: {e}"),
            }),
            Err(_) => Err(DialError::NotReady {
                target: self.target(),
                message: format!(
                    "container {:?} not running after {:?}; last seen: {last}",
                    self.container, self.ready_wait
                ),
            }),
        }
    }
}

/// Whether `container`'s status says it runs.
pub fn container_running(pod: &Pod, container: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

pub(crate) fn container_state(pod: &Pod, container: &str) -> String {
    let status = pod.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "no phase".into());
    let state = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .and_then(|c| c.state.as_ref())
        .map(|s| {
            if s.running.is_some() {
                "running".to_owned()
            } else if let Some(w) = &s.waiting {
                format!("waiting ({})", w.reason.as_deref().unwrap_or("no reason"))
            } else if let Some(t) = &s.terminated {
                format!(
                    "terminated ({})",
                    t.reason.as_deref().unwrap_or("no reason")
                )
            } else {
                "unknown".to_owned()
            }
        })
        .unwrap_or_else(|| "no status".to_owned());
    format!("pod {phase}, container {container} {state}")
}

#[async_trait]
impl Transport for PortForward {
    async fn dial(&self) -> Result<Dialled, DialError> {
        let request = http::Request::get(self.path())
            .body(Vec::new())
            .map_err(|e| DialError::PortForward {
                target: self.target(),
                source: Box::new(kube::Error::HttpError(e)),
            })?;
        let ws = self
            .client
            .connect(request)
            .await
            .map_err(|e| DialError::PortForward {
                target: self.target(),
                source: Box::new(e),
            })?
            .into_stream();
        let (local, remote) = tokio::io::duplex(DUPLEX_BUFFER);
        let (end_tx, end) = tokio::sync::oneshot::channel();
        let span = tracing::debug_span!("portforward", target = %self.target());
        tokio::spawn(
            pump(
                ws,
                remote,
                Codec::new(self.port),
                self.ping_interval,
                end_tx,
            )
            .instrument(span),
        );
        Ok(Box::new(Forwarded { io: local, end }))
    }

    async fn ready(&self) -> Result<(), DialError> {
        self.wait_running().await
    }

    fn target(&self) -> String {
        format!("{}/{}:{}", self.namespace, self.pod, self.port)
    }
}

/// The local end of a forwarded connection. Where the kubelet ended the
/// connection on its error channel, the reader gets that error instead of
/// a plain end of stream: the pool tells "nothing listens on the port"
/// (`connection refused`) from a peer that closed.
struct Forwarded {
    io: DuplexStream,
    end: tokio::sync::oneshot::Receiver<std::io::Error>,
}

impl AsyncRead for Forwarded {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut self.io).poll_read(cx, buf) {
            std::task::Poll::Ready(Ok(())) if buf.filled().len() == before => {
                match self.end.try_recv() {
                    Ok(e) => std::task::Poll::Ready(Err(e)),
                    Err(_) => std::task::Poll::Ready(Ok(())),
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for Forwarded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The error a reader of the local end gets for what the kubelet said.
fn remote_error(message: &str) -> std::io::Error {
    let kind = if message.contains("connection refused") {
        std::io::ErrorKind::ConnectionRefused
    } else {
        std::io::ErrorKind::Other
    };
    std::io::Error::new(kind, message.to_owned())
}

/// Moves bytes between the WebSocket and the local end until either side
/// ends, then closes both: no half-close, as the agent has none either.
async fn pump<S>(
    ws: WebSocketStream<S>,
    local: DuplexStream,
    mut codec: Codec,
    ping: Duration,
    end: tokio::sync::oneshot::Sender<std::io::Error>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let (mut local_rd, mut local_wr) = tokio::io::split(local);
    let mut remote_error_seen = None;
    let inbound = async {
        while let Some(msg) = stream.next().await {
            let msg = match msg {
                Ok(m) => m,
                Err(e) => return format!("websocket error: {e}"),
            };
            match codec.decode(msg) {
                Inbound::Data(bytes) => {
                    if let Err(e) = local_wr.write_all(&bytes).await {
                        return format!("local end gone: {e}");
                    }
                }
                Inbound::Nothing => {}
                Inbound::Dead(reason) => {
                    if let codec::DeadReason::Remote(message) = &reason {
                        remote_error_seen = Some(remote_error(message));
                    }
                    return reason.to_string();
                }
            }
        }
        "websocket ended".to_owned()
    };
    let outbound = async {
        let mut buf = vec![0u8; 32 * 1024];
        let mut pings = tokio::time::interval_at(tokio::time::Instant::now() + ping, ping);
        loop {
            let msg = tokio::select! {
                r = local_rd.read(&mut buf) => match r {
                    Ok(0) => return "closed locally".to_owned(),
                    Ok(n) => Codec::encode(&buf[..n]),
                    Err(e) => return format!("local read: {e}"),
                },
                _ = pings.tick() => Message::Ping(Bytes::new()),
            };
            if let Err(e) = sink.send(msg).await {
                return format!("websocket send: {e}");
            }
        }
    };
    let why = tokio::select! {
        w = inbound => w,
        w = outbound => w,
    };
    // Said before the local end sees its EOF, so its reader finds it.
    if let Some(e) = remote_error_seen {
        let _ = end.send(e);
    }
    // The local end sees EOF first; the close handshake may take a moment.
    drop((local_rd, local_wr));
    let _ = tokio::time::timeout(CLOSE_GRACE, sink.close()).await;
    debug!(reason = %why, "port-forward connection closed");
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus, PodStatus,
    };

    fn pod(container: &str, state: ContainerState) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: container.into(),
                    state: Some(state),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn running_is_judged_by_the_named_container() {
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        };
        let waiting = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(container_running(&pod("pause", running.clone()), "pause"));
        assert!(!container_running(&pod("other", running), "pause"));
        assert!(!container_running(&pod("pause", waiting.clone()), "pause"));
        assert!(!container_running(&Pod::default(), "pause"));
        assert_eq!(
            container_state(&pod("pause", waiting), "pause"),
            "pod Pending, container pause waiting (ContainerCreating)"
        );
    }
}
