//! What a driver's kubelet plugin needs of the nodes it runs on: where the
//! kubelet's directories are, how to write CDI files there, and how to accept
//! the kubelet's connections to a socket path. `driver` uses these; `cluster`
//! implements them for its nodes (local agents on the local cluster, proxy
//! pods on a real one), so neither depends on the other.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;

use crate::{AsyncReadWrite, Incoming};

/// The longest unix socket path: `sun_path` holds 108 bytes including the
/// terminating NUL; hostpathplugin v1.17.1 adds a leading `/`.
pub const MAX_SOCKET_PATH: usize = 107;

/// A connection the runner opened to a socket on a node.
pub type Dialled = Box<dyn AsyncReadWrite>;
use crate::node_files::NodeFiles;

/// A served socket: connections made by the node's kubelet to the socket path.
pub struct Served {
    pub incoming: Incoming,
    stop: Option<BoxFuture<'static, ()>>,
}

impl Served {
    pub fn new(incoming: Incoming, stop: BoxFuture<'static, ()>) -> Self {
        Self {
            incoming,
            stop: Some(stop),
        }
    }

    /// A socket that never receives connections (a driver not registered with
    /// the kubelet).
    pub fn none() -> Self {
        Self {
            incoming: Box::pin(futures::stream::pending()),
            stop: None,
        }
    }

    /// Splits off the stopper, handing the connections to a server.
    pub fn into_parts(mut self) -> (Incoming, Stopper) {
        (
            self.incoming,
            Stopper(self.stop.take().map(crate::later::Later::from_boxed)),
        )
    }
}

/// Stops serving a socket: ends the agent and removes the socket file.
pub struct Stopper(Option<crate::later::Later<()>>);

impl Stopper {
    pub async fn stop(self) {
        if let Some(stop) = self.0 {
            stop.run().await;
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("serving socket {socket} on node {node}: {message}")]
pub struct SocketError {
    pub node: String,
    pub socket: PathBuf,
    pub message: String,
}

impl SocketError {
    pub fn new(node: &str, socket: &Path, message: impl Into<String>) -> Self {
        Self {
            node: node.to_owned(),
            socket: socket.to_owned(),
            message: message.into(),
        }
    }
}

/// A unix socket in a directory of a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SocketFile {
    /// The file name, without the directory.
    pub name: String,
    /// Tells a socket bound again under the same name (a restarted driver)
    /// from the one before it.
    pub identity: String,
}

/// The nodes of one driver instance, as the plugin sees them.
#[async_trait]
pub trait NodeHost: Send + Sync {
    /// The kubelet root directory on `node` (host path).
    fn kubelet_root(&self, node: &str) -> PathBuf;
    /// The node's CDI spec directory.
    fn cdi_files(&self, node: &str) -> Arc<dyn NodeFiles>;
    /// The driver's plugin directory on `node` (`<kubelet root>/plugins/<driver>`),
    /// where device metadata files go; `None` where no container runtime
    /// could mount them.
    fn plugin_files(&self, _node: &str, _driver: &str) -> Option<Arc<dyn NodeFiles>> {
        None
    }
    /// The plugin's API identity may carry the pod it runs in.
    fn pod_of(&self, _node: &str) -> Option<(String, String)> {
        None
    }
    /// Starts accepting the kubelet's connections to `socket` (a host path).
    async fn serve(&self, node: &str, socket: &Path) -> Result<Served, SocketError>;
    /// Opens one connection to the unix socket `socket` on `node` (a host
    /// path), as a process on the node would: how the interposer reaches
    /// the sockets of a driver running there.
    async fn dial(&self, node: &str, socket: &Path) -> Result<Dialled, SocketError> {
        Err(SocketError::new(
            node,
            socket,
            "this kind of node host cannot connect to sockets on its nodes",
        ))
    }
    /// The unix sockets in the directory `dir` on `node` (a host path),
    /// sorted by name; none when the directory does not exist: how the
    /// interposer finds every instance of a driver, whatever it names its
    /// sockets.
    async fn sockets(&self, node: &str, dir: &Path) -> Result<Vec<SocketFile>, SocketError> {
        Err(SocketError::new(
            node,
            dir,
            "this kind of node host cannot list directories on its nodes",
        ))
    }
}

/// The driver instance a [`NodeHost`] is made for.
#[derive(Clone, Copy, Debug)]
pub struct HostedDriver<'a> {
    pub driver: &'a str,
    /// The nodes it runs on; the host serves these alone.
    pub nodes: &'a [String],
}

/// Provides the [`NodeHost`] of a driver instance.
#[async_trait]
pub trait HostProvider: Send + Sync {
    async fn node_host(&self, hosted: HostedDriver<'_>) -> anyhow::Result<Arc<dyn NodeHost>>;
}
