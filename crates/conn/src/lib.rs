//! Byte-stream connections handed to the runner's gRPC servers, whatever their
//! source: a local unix listener, or connections pre-dialled through a proxy.
//!
//! Also home of the HTTP/2 `:authority` handling a kubelet needs on both
//! ends: [`authority`] says what a real kubelet sends to each plugin socket,
//! [`AcceptAnyAuthority`] lets h2-based servers of registration sockets
//! accept it (see [`KubeletSocket::server_incoming`]), and [`SendAuthority`]
//! lets a Rust client send it.
pub mod authority;
pub mod gate;
pub mod h2_rewrite;
mod hpack;
mod pass_through;

// What a plugin needs of its nodes, and the small pieces beside it.
pub mod later;
pub mod node_files;
pub mod node_host;
pub mod persisting;

pub use authority::KubeletSocket;
pub use gate::SocketGate;
pub use h2_rewrite::{AcceptAnyAuthority, SendAuthority};

use std::io;
use std::pin::Pin;

use futures::{Future as _, Stream};
use tokio::io::{AsyncRead, AsyncWrite};

/// Anything a server can read from and write to.
pub trait AsyncReadWrite: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> AsyncReadWrite for T {}

/// One accepted connection, its bytes as the peer sent them.
///
/// Its peer is a kubelet (or a stand-in for one). A kubelet sends the
/// percent-encoded socket path as `:authority` to registration sockets,
/// which h2 refuses (<https://github.com/hyperium/http/issues/836>): the
/// server of a registration socket reads its connections through
/// [`KubeletSocket::server_incoming`], which puts an [`AcceptAnyAuthority`]
/// in front of each. DRA and health connections carry `localhost` and reach
/// the server untouched.
pub struct Conn {
    inner: Box<dyn AsyncReadWrite>,
    peer: String,
    cut: CutHandle,
    /// Resolves once `cut` is used; polled by reads so that a cut wakes a
    /// connection waiting for its peer.
    cut_wait: Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl Conn {
    /// `peer` describes the connection's origin for logs.
    pub fn new(io: impl AsyncReadWrite, peer: impl Into<String>) -> Self {
        let cut = CutHandle::default();
        Self {
            inner: Box::new(io),
            peer: peer.into(),
            cut_wait: Box::pin(cut.0.clone().cancelled_owned()),
            cut,
        }
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The connection as the server of a `socket` reads it (see
    /// [`KubeletSocket::server_incoming`]).
    fn served_as(mut self, socket: KubeletSocket) -> Self {
        match socket {
            KubeletSocket::Registration => {
                self.inner = Box::new(AcceptAnyAuthority::new(self.inner));
            }
            KubeletSocket::Dra => {}
        }
        self
    }

    fn cut_now(&mut self, cx: &mut std::task::Context<'_>) -> Option<io::Error> {
        self.cut_wait.as_mut().poll(cx).is_ready().then(|| {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "connection cut by injection",
            )
        })
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("peer", &self.peer).finish()
    }
}

// A cut connection fails every read and write, so the server serving it
// drops it (and every call on it) as if the peer had gone.
impl tokio::io::AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        if let Some(e) = self.cut_now(cx) {
            return std::task::Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if let Some(e) = self.cut_now(cx) {
            return std::task::Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        if let Some(e) = self.cut_now(cx) {
            return std::task::Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Closes one accepted connection from inside a call it carries (see
/// [`dra_e2e_plugin::calls::Injection::Cut`]).
#[derive(Debug, Clone, Default)]
pub struct CutHandle(tokio_util::sync::CancellationToken);

impl CutHandle {
    pub fn cut(&self) {
        self.0.cancel();
    }

    pub fn is_cut(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// What a server's handlers learn of the connection a call came on (tonic
/// puts it into every request's extensions).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub peer: String,
    pub cut: CutHandle,
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        ConnInfo {
            peer: self.peer.clone(),
            cut: self.cut.clone(),
        }
    }
}

/// A source of connections, as `tonic::transport::Server::serve_with_incoming` takes it.
pub type Incoming = Pin<Box<dyn Stream<Item = io::Result<Conn>> + Send>>;

impl KubeletSocket {
    /// The connections of `incoming` as the server of this kind of socket
    /// must read them. A registration socket's get an [`AcceptAnyAuthority`]
    /// in front, so that h2 takes the percent-encoded path a kubelet sends
    /// as `:authority`; a DRA socket's (the DRA and health services) pass
    /// as they are, since a kubelet sends them `localhost`.
    pub fn server_incoming(self, incoming: Incoming) -> Incoming {
        use futures::TryStreamExt as _;
        match self {
            KubeletSocket::Registration => Box::pin(incoming.map_ok(move |c| c.served_as(self))),
            KubeletSocket::Dra => incoming,
        }
    }
}

/// Connections accepted on a unix listener.
pub fn unix_incoming(listener: tokio::net::UnixListener) -> Incoming {
    Box::pin(futures::stream::unfold(listener, |l| async move {
        let item = l.accept().await.map(|(s, addr)| {
            let peer = addr
                .as_pathname()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "unix".to_owned());
            Conn::new(s, peer)
        });
        Some((item, l))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Serves a unix socket as `socket`, sends it the start of a kubelet's
    /// connection with `authority` (the kubelet's for that socket when
    /// `None`), and gives what went in and what the server read.
    async fn through(socket: KubeletSocket, authority: Option<&str>) -> (Vec<u8>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let mut incoming = socket.server_incoming(unix_incoming(listener));
        let authority = authority.map_or_else(|| socket.authority(&path), str::to_owned);
        let sent = h2_rewrite::tests::kubelet_request(&authority);
        let mut client = tokio::net::UnixStream::connect(&path).await.unwrap();
        client.write_all(&sent).await.unwrap();
        // The whole request is there once the client closes its end.
        client.shutdown().await.unwrap();
        let mut conn = incoming.next().await.unwrap().unwrap();
        let mut read = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            conn.read_to_end(&mut read),
        )
        .await
        .unwrap()
        .unwrap();
        (sent, read)
    }

    /// DRA and health traffic reaches the server byte for byte: no
    /// rewriting layer is in its path (one would re-encode every header
    /// block, even one whose `localhost` it keeps).
    #[tokio::test]
    async fn a_dra_socket_reads_the_bytes_as_sent() {
        let (sent, read) = through(KubeletSocket::Dra, None).await;
        assert_eq!(read, sent);
        // Not even an authority h2 refuses is touched there.
        let (sent, read) = through(KubeletSocket::Dra, Some("%2Fx%2Fd-reg.sock")).await;
        assert_eq!(read, sent);
    }

    /// A registration socket's server reads the kubelet's percent-encoded
    /// path as `localhost`, which h2 accepts.
    #[tokio::test]
    async fn a_registration_socket_takes_the_kubelets_authority() {
        let (sent, read) = through(KubeletSocket::Registration, None).await;
        assert_ne!(read, sent);
        assert_eq!(h2_rewrite::tests::request_authorities(&read), ["localhost"]);
    }

    #[tokio::test]
    async fn a_cut_wakes_a_waiting_read_and_fails_writes() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut conn = Conn::new(a, "test");
        let cut = conn.cut.clone();
        b.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 1];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"x");
        // Nothing more to read: the read waits until the cut.
        let read = tokio::spawn(async move {
            let r = conn.read(&mut buf).await;
            (r, conn)
        });
        tokio::task::yield_now().await;
        cut.cut();
        let (r, mut conn) = read.await.unwrap();
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
        let w = conn.write(b"y").await;
        assert_eq!(w.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
    }
}
