//! How the runner opens one connection to an agent's TCP port.
use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use dra_e2e_conn::AsyncReadWrite;

/// A freshly dialled byte stream to the agent's TCP port.
pub type Dialled = Box<dyn AsyncReadWrite>;

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("connecting to {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: std::io::Error,
    },
    #[error("port-forward to {target}: {source}")]
    PortForward {
        target: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("waiting for {target} to run: {message}")]
    NotReady { target: String, message: String },
    #[error("dialling {target} took longer than {timeout:?}")]
    Timeout { target: String, timeout: Duration },
}

/// A way to reach one agent TCP port. Dialled connections are pre-dialled:
/// they sit in the agent's accept queue until a unix client shows up.
#[async_trait]
pub trait Transport: Send + Sync + std::fmt::Debug + 'static {
    /// Opens one connection. Success only means the transport accepted it; a
    /// connection can still turn out dead (EOF) before any byte flows.
    async fn dial(&self) -> Result<Dialled, DialError>;

    /// Resolves once dialling can succeed at all (e.g. the pod runs). Called
    /// before the first dial and again after a failed one.
    async fn ready(&self) -> Result<(), DialError> {
        Ok(())
    }

    /// Where connections go, for logs.
    fn target(&self) -> String;
}

/// Plain TCP to an address: a proxy pod's agent reached some other way than
/// port-forward, and tests of that path.
#[derive(Debug, Clone)]
pub struct TcpTransport {
    addr: SocketAddr,
}

impl TcpTransport {
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr }
    }
}

#[async_trait]
impl Transport for TcpTransport {
    async fn dial(&self) -> Result<Dialled, DialError> {
        let s = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|source| DialError::Connect {
                target: self.target(),
                source,
            })?;
        // gRPC frames are small and latency-bound (1 s GetInfo deadline).
        let _ = s.set_nodelay(true);
        Ok(Box::new(s))
    }

    fn target(&self) -> String {
        format!("tcp://{}", self.addr)
    }
}

/// A unix socket: the local cluster's agents wait for the runner on one that
/// only the runner's user can connect to.
#[derive(Debug, Clone)]
pub struct UnixTransport {
    path: std::path::PathBuf,
}

impl UnixTransport {
    pub fn new(path: std::path::PathBuf) -> Self {
        Self { path }
    }
}

#[async_trait]
impl Transport for UnixTransport {
    async fn dial(&self) -> Result<Dialled, DialError> {
        let s = tokio::net::UnixStream::connect(&self.path)
            .await
            .map_err(|source| DialError::Connect {
                target: self.target(),
                source,
            })?;
        Ok(Box::new(s))
    }

    fn target(&self) -> String {
        format!("unix://{}", self.path.display())
    }
}
