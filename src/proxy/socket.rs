//! One proxied plugin socket: an agent creating the socket on the node plus
//! the pre-dialled pool feeding the runner's server.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::info;

use super::exec_agent::ExecAgent;
use super::local::{LocalAgent, LocalAgentConfig, LocalAgentError};
use super::pods::{ProxyPod, ProxyPodsError};
use super::pool::{PoolConfig, PoolStats, PreDialled};
use super::portforward::PortForward;
use super::transport::TcpTransport;
use crate::conn::Incoming;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Local(#[from] LocalAgentError),
    #[error(transparent)]
    Pods(#[from] ProxyPodsError),
}

#[derive(Debug)]
enum Agent {
    Local(LocalAgent),
    Exec(ExecAgent),
}

/// A plugin socket on a node whose connections reach the runner.
///
/// Serve the returned [`Incoming`] with the plugin's gRPC server; call
/// [`ProxiedSocket::stop`] to close the connections, end the agent and remove
/// the socket.
#[derive(Debug)]
pub struct ProxiedSocket {
    path: PathBuf,
    pool: PreDialled,
    agent: Agent,
}

impl ProxiedSocket {
    /// Local cluster: an agent subprocess creates the socket and listens on
    /// loopback; the pool dials it over TCP.
    pub async fn local(
        agent: LocalAgentConfig,
        pool: PoolConfig,
    ) -> Result<(ProxiedSocket, Incoming), ProxyError> {
        let agent = LocalAgent::start(agent).await?;
        let transport = Arc::new(TcpTransport::new(agent.tcp_addr()));
        let (pool, incoming) = PreDialled::start(transport, pool);
        Ok((
            ProxiedSocket {
                path: agent.socket().to_owned(),
                pool,
                agent: Agent::Local(agent),
            },
            incoming,
        ))
    }

    /// Real cluster: the agent runs by exec in `pod` on a fresh pod port, and
    /// the pool dials it through port-forward.
    pub async fn remote(
        client: kube::Client,
        pod: &ProxyPod,
        socket: &str,
        pool: PoolConfig,
    ) -> Result<(ProxiedSocket, Incoming), ProxyError> {
        let port = pod.allocate_port();
        let agent = ExecAgent::start(client.clone(), pod, socket, port)?;
        let transport = Arc::new(PortForward::new(
            client,
            pod.namespace.clone(),
            pod.name.clone(),
            pod.container.clone(),
            port,
        ));
        let (pool, incoming) = PreDialled::start(transport, pool);
        Ok((
            ProxiedSocket {
                path: PathBuf::from(socket),
                pool,
                agent: Agent::Exec(agent),
            },
            incoming,
        ))
    }

    /// The socket path on the node.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn pool(&self) -> &PreDialled {
        &self.pool
    }

    pub fn stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// The local agent, if this socket is served by one.
    pub fn local_agent(&self) -> Option<&LocalAgent> {
        match &self.agent {
            Agent::Local(a) => Some(a),
            Agent::Exec(_) => None,
        }
    }

    /// Closes the pool's connections first (as upstream closes its listener
    /// first), then ends the agent and removes the socket.
    pub async fn stop(self) -> Result<(), ProxyError> {
        self.pool.shutdown().await;
        match self.agent {
            Agent::Local(a) => a.stop().await?,
            Agent::Exec(a) => a.stop().await?,
        }
        info!(socket = %self.path.display(), "proxied socket stopped");
        Ok(())
    }
}
