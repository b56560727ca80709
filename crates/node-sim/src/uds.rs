//! gRPC channels to a plugin's unix socket, with a live-connection count the
//! node watches to tell whether a plugin is still reachable (the kubelet uses
//! a gRPC stats handler for the same purpose).
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint, Uri};

use dra_e2e_conn::authority::{CLIENT_URI, KubeletSocket};

/// Counts the open transport connections of one channel.
#[derive(Debug, Clone)]
pub struct ConnCount(Arc<watch::Sender<usize>>);

impl Default for ConnCount {
    fn default() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }
}

impl ConnCount {
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.0.subscribe()
    }

    pub fn current(&self) -> usize {
        *self.0.borrow()
    }
}

/// A unix stream that keeps [`ConnCount`] up to date for as long as it lives;
/// hyper drops it when the peer closes the connection.
struct CountedStream {
    inner: UnixStream,
    count: ConnCount,
}

impl CountedStream {
    fn new(inner: UnixStream, count: ConnCount) -> Self {
        count.0.send_modify(|n| *n += 1);
        Self { inner, count }
    }
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        self.count.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

dra_e2e_conn::pass_through_io!([] CountedStream, inner);

#[derive(Debug, thiserror::Error)]
#[error("dial unix socket {path}: {detail}")]
pub struct DialError {
    pub path: PathBuf,
    pub detail: String,
}

/// Connects a gRPC channel to the DRA endpoint `path` (DRA and health
/// services), as the kubelet's DRA manager does; see [`dial_as`].
pub async fn dial(path: &Path, limit: Duration, count: ConnCount) -> Result<Channel, DialError> {
    dial_as(KubeletSocket::Dra, path, limit, count).await
}

/// Connects a gRPC channel to the plugin socket `path`, retrying refused or
/// missing sockets until `limit` passes (the kubelet's blocking dial). Every
/// request carries the `:authority` a kubelet sends to that kind of socket:
/// the percent-encoded path for registration sockets, `localhost` for DRA
/// endpoints (see [`dra_e2e_conn::authority`]).
pub async fn dial_as(
    socket: KubeletSocket,
    path: &Path,
    limit: Duration,
    count: ConnCount,
) -> Result<Channel, DialError> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut pause = Duration::from_millis(20);
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt =
            tokio::time::timeout(remaining, connect_once(socket, path, count.clone())).await;
        let detail = match attempt {
            Ok(Ok(ch)) => return Ok(ch),
            Ok(Err(e)) => e,
            Err(_) => format!("no connection within {limit:?}"),
        };
        if tokio::time::Instant::now() + pause >= deadline {
            return Err(DialError {
                path: path.to_owned(),
                detail,
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// A channel to the DRA endpoint `path` that connects only when used, for a
/// plugin whose DRA service does not listen yet: the kubelet's gRPC client
/// is made at registration and connects on demand.
pub fn dial_lazy(path: &Path, count: ConnCount) -> Channel {
    Endpoint::from_static(CLIENT_URI).connect_with_connector_lazy(connector(
        KubeletSocket::Dra,
        path,
        count,
    ))
}

/// One attempt to connect the DRA endpoint `path`, without waiting for it.
pub async fn dial_once(path: &Path, count: ConnCount) -> Result<Channel, DialError> {
    connect_once(KubeletSocket::Dra, path, count)
        .await
        .map_err(|detail| DialError {
            path: path.to_owned(),
            detail,
        })
}

/// Connects the unix socket `path` for each transport a channel makes,
/// counted, with the `:authority` a kubelet sends to that kind of socket.
fn connector(
    socket: KubeletSocket,
    path: &Path,
    count: ConnCount,
) -> impl tower::Service<
    Uri,
    Response = TokioIo<impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static>,
    Error = io::Error,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let path = path.to_owned();
    // A DRA channel connects once. The kubelet keeps one gRPC connection per
    // plugin and, when it ends, makes the next one itself; here the node's
    // monitor dials a fresh channel instead (`plugins::monitor`). Were the
    // old channel also to reconnect on its own, a call or health stream
    // still holding it would open a second connection beside the monitor's,
    // which a kubelet never does (seen as 3 connections after a blocked
    // socket was unblocked, where the kubelet opens 2).
    let spent = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tower::service_fn(move |_: Uri| {
        let path = path.clone();
        let count = count.clone();
        let spent = spent.clone();
        async move {
            let once = socket == KubeletSocket::Dra;
            if once && spent.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "this channel's connection ended; the node dials a new one",
                ));
            }
            let stream = UnixStream::connect(&path).await?;
            if once {
                spent.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let stream = CountedStream::new(stream, count);
            Ok::<_, io::Error>(TokioIo::new(socket.client_io(&path, stream)))
        }
    })
}

async fn connect_once(
    socket: KubeletSocket,
    path: &Path,
    count: ConnCount,
) -> Result<Channel, String> {
    Endpoint::from_static(CLIENT_URI)
        .connect_with_connector(connector(socket, path, count))
        .await
        .map_err(|e| {
            // tonic's transport error hides the io error in its source chain.
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg = format!("{msg}: {s}");
                src = s.source();
            }
            msg
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_e2e_conn::h2_rewrite::tests::request_authorities;
    use dra_e2e_proto::pluginregistration::InfoRequest;
    use dra_e2e_proto::pluginregistration::registration_client::RegistrationClient;
    use tokio::io::AsyncReadExt;

    /// What the simulated kubelet puts on the wire to each kind of socket:
    /// the percent-encoded path to a registration socket (dialled by bare
    /// path), `localhost` to a DRA endpoint (dialled as `unix:`).
    #[tokio::test]
    async fn sends_the_kubelet_authority_of_each_socket() {
        let tmp = tempfile::tempdir().unwrap();
        for socket in [KubeletSocket::Registration, KubeletSocket::Dra] {
            let path = tmp.path().join(format!("{socket:?}.sock"));
            let expected = match socket {
                // Temp dir names are letters, digits and dots: only `/` is escaped.
                KubeletSocket::Registration => path.display().to_string().replace('/', "%2F"),
                KubeletSocket::Dra => "localhost".to_owned(),
            };
            let listener = tokio::net::UnixListener::bind(&path).unwrap();
            let channel = dial_as(socket, &path, Duration::from_secs(5), ConnCount::default())
                .await
                .unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            let call = tokio::spawn(async move {
                RegistrationClient::new(channel)
                    .get_info(InfoRequest {})
                    .await
            });
            let mut wire = Vec::new();
            let authorities = loop {
                let mut buf = [0u8; 4096];
                let n = server.read(&mut buf).await.unwrap();
                assert!(n > 0, "connection closed before a request");
                wire.extend_from_slice(&buf[..n]);
                let found = request_authorities(&wire);
                if !found.is_empty() {
                    break found;
                }
            };
            assert_eq!(authorities, [expected], "{socket:?}");
            call.abort();
        }
    }

    #[tokio::test]
    async fn dial_counts_connections_and_gives_up_on_missing_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.sock");
        let err = dial(&path, Duration::from_millis(200), ConnCount::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("x.sock"), "{err}");

        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let count = ConnCount::default();
        let mut rx = count.subscribe();
        let accept = tokio::spawn(async move { listener.accept().await.unwrap().0 });
        let ch = dial(&path, Duration::from_secs(5), count.clone())
            .await
            .unwrap();
        assert_eq!(count.current(), 1);
        // The server closing its end is what a stopping plugin does.
        drop(accept.await.unwrap());
        rx.wait_for(|n| *n == 0).await.unwrap();
        drop(ch);
    }
}
