//! Byte-stream connections handed to the runner's gRPC servers, whatever their
//! source: a local unix listener, or connections pre-dialled through a proxy.
//!
//! Also home of the HTTP/2 `:authority` handling a kubelet needs on both
//! ends: [`authority`] says what a real kubelet sends to each plugin socket,
//! [`AcceptAnyAuthority`] lets h2-based servers accept it, and
//! [`SendAuthority`] lets a Rust client send it.
pub mod authority;
pub(crate) mod h2_rewrite;
mod hpack;
mod pass_through;

pub use h2_rewrite::{AcceptAnyAuthority, SendAuthority};
pub(crate) use pass_through::{pass_through_io, pass_through_read, pass_through_write};

use std::io;
use std::pin::Pin;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite};

/// Anything a server can read from and write to.
pub trait AsyncReadWrite: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> AsyncReadWrite for T {}

/// One accepted connection.
///
/// Its peer is a kubelet (or a stand-in for one), so requests whose
/// `:authority` h2 would refuse are let through: a kubelet sends the
/// percent-encoded socket path to registration sockets
/// (<https://github.com/hyperium/http/issues/836>; see
/// [`AcceptAnyAuthority`]).
pub struct Conn {
    inner: Box<dyn AsyncReadWrite>,
    peer: String,
}

impl Conn {
    /// `peer` describes the connection's origin for logs.
    pub fn new(io: impl AsyncReadWrite, peer: impl Into<String>) -> Self {
        Self {
            inner: Box::new(AcceptAnyAuthority::new(io)),
            peer: peer.into(),
        }
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("peer", &self.peer).finish()
    }
}

pass_through_io!([] Conn, inner);

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = String;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.peer.clone()
    }
}

/// A source of connections, as `tonic::transport::Server::serve_with_incoming` takes it.
pub type Incoming = Pin<Box<dyn Stream<Item = io::Result<Conn>> + Send>>;

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
