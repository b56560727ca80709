//! The local cluster's side of a driver's sockets: each socket is created by a
//! local `dra-e2e proxy-agent` in the simulated node's kubelet directory and
//! reached through the pre-dialled pool over a unix socket private to the
//! runner's user, so every local scenario runs the same pairing as a real
//! cluster's proxy pods.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt as _;

use crate::proxy::{LocalAgentConfig, PoolConfig, ProxiedSocket};
use dra_e2e_conn::node_files::{LocalDir, NodeFiles};
use dra_e2e_conn::node_host::{Dialled, NodeHost, Served, SocketError, SocketFile};

/// Node name -> (kubelet root dir, CDI dir).
pub struct LocalHost {
    nodes: BTreeMap<String, (PathBuf, PathBuf)>,
    /// The agent program named in code ([`LocalHost::with_agent`]).
    agent: Option<PathBuf>,
}

impl LocalHost {
    pub fn new(nodes: Vec<(String, PathBuf, PathBuf)>) -> Self {
        Self {
            nodes: nodes.into_iter().map(|(n, r, c)| (n, (r, c))).collect(),
            agent: None,
        }
    }

    /// Runs the sockets' agents from `program` (dra-e2e or dra-e2e-agent),
    /// whatever DRA_E2E_AGENT says: for tests that host drivers in a binary
    /// of their own, which cannot set the variable for themselves safely
    /// once threads run.
    pub fn with_agent(mut self, program: impl Into<PathBuf>) -> Self {
        self.agent = Some(program.into());
        self
    }
}

#[async_trait]
impl NodeHost for LocalHost {
    fn kubelet_root(&self, node: &str) -> PathBuf {
        self.nodes
            .get(node)
            .map(|(r, _)| r.clone())
            .unwrap_or_default()
    }

    fn cdi_files(&self, node: &str) -> Arc<dyn NodeFiles> {
        Arc::new(LocalDir::new(
            self.nodes
                .get(node)
                .map(|(_, c)| c.clone())
                .unwrap_or_default(),
        ))
    }

    async fn serve(&self, node: &str, socket: &Path) -> Result<Served, SocketError> {
        let err = |message: String| SocketError::new(node, socket, message);
        if !self.nodes.contains_key(node) {
            return Err(err("not a simulated node of this cluster".to_owned()));
        }
        if let Some(dir) = socket.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        }
        // The agent is this executable's `proxy-agent`; tests that host drivers
        // in another binary name a program that has one (dra-e2e or
        // dra-e2e-agent) with `with_agent` or DRA_E2E_AGENT, which real
        // nodes take too.
        let config = match (&self.agent, std::env::var_os("DRA_E2E_AGENT")) {
            (Some(program), _) => LocalAgentConfig::with_program(program, socket),
            (None, Some(program)) if program.is_empty() => {
                return Err(err(
                    "DRA_E2E_AGENT is set but empty: unset it (the runner then uses its own \
                     proxy-agent) or name a dra-e2e-agent program"
                        .to_owned(),
                ));
            }
            (None, Some(program)) => LocalAgentConfig::with_program(program, socket),
            (None, None) => LocalAgentConfig::new(socket).map_err(|e| err(e.to_string()))?,
        };
        let (proxied, incoming) = ProxiedSocket::local(config, PoolConfig::default())
            .await
            .map_err(|e| err(e.to_string()))?;
        let path = socket.display().to_string();
        let stop = async move {
            if let Err(e) = proxied.stop().await {
                tracing::warn!(socket = %path, error = %e, "stopping the local agent");
            }
        }
        .boxed();
        Ok(Served::new(incoming, stop))
    }

    /// A simulated node's directories are this machine's: the socket is
    /// reached directly.
    async fn dial(&self, node: &str, socket: &Path) -> Result<Dialled, SocketError> {
        if !self.nodes.contains_key(node) {
            return Err(SocketError::new(
                node,
                socket,
                "not a simulated node of this cluster",
            ));
        }
        let s = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| SocketError::new(node, socket, format!("connecting: {e}")))?;
        Ok(Box::new(s))
    }

    /// A simulated node's directories are this machine's: listed directly.
    async fn sockets(&self, node: &str, dir: &Path) -> Result<Vec<SocketFile>, SocketError> {
        if !self.nodes.contains_key(node) {
            return Err(SocketError::new(
                node,
                dir,
                "not a simulated node of this cluster",
            ));
        }
        let listed = dra_e2e_agent::sockets::list(dir)
            .map_err(|e| SocketError::new(node, dir, format!("listing the directory: {e}")))?;
        Ok(listed
            .into_iter()
            .map(|e| SocketFile {
                name: e.name,
                identity: e.identity,
            })
            .collect())
    }
}
