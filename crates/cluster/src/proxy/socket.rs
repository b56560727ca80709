//! One proxied plugin socket: an agent creating the socket on the node plus
//! the pre-dialled pool feeding the runner's server.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::exec_agent::ExecAgent;
use super::host_link::{HostLink, HostLinkError};
use super::local::{LocalAgent, LocalAgentConfig, LocalAgentError, ProxySide};
use super::pods::{ProxyPod, ProxyPodsError};
use super::pool::{FarEnd, PoolConfig, PoolStats, PreDialled};
use super::portforward::PortForward;
use dra_e2e_conn::Incoming;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Local(#[from] LocalAgentError),
    #[error(transparent)]
    Pods(#[from] ProxyPodsError),
    #[error(transparent)]
    Host(#[from] HostLinkError),
}

#[derive(Debug)]
enum Agent {
    Local(Supervised),
    Exec(ExecAgent),
    /// The node host serves the socket for as long as the pool dials it.
    Hosted(Arc<HostLink>),
}

/// What is known of the local agent currently serving a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAgentInfo {
    pub pid: u32,
    /// Where it waits for the runner's connections.
    pub proxy: ProxySide,
    /// Agents that exited unexpectedly before this one.
    pub restarts: u32,
}

/// A local agent watched by a task: an unexpected exit is reported to the
/// pool at once, then the agent is started again at the same address, so the
/// kubelet can still reach the plugin for what cleanup needs (unprepare).
#[derive(Debug)]
struct Supervised {
    info: watch::Receiver<LocalAgentInfo>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Option<LocalAgent>>>,
}

/// Pause between attempts to start a replacement agent.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

async fn supervise(
    mut agent: LocalAgent,
    config: LocalAgentConfig,
    far_end: FarEnd,
    info: watch::Sender<LocalAgentInfo>,
    mut stop: oneshot::Receiver<()>,
) -> Option<LocalAgent> {
    let config = config.proxy_on(agent.proxy().clone());
    loop {
        let exit = agent.unexpected_exit();
        tokio::select! {
            _ = &mut stop => return Some(agent),
            exit = exit => far_end.lost(exit.to_string()),
        }
        // The dead agent's socket file goes with its handle; a new one takes
        // its place.
        drop(agent);
        agent = loop {
            match LocalAgent::start(config.clone()).await {
                Ok(a) => break a,
                Err(e) => {
                    warn!(socket = %config.socket.display(), error = %e, "restarting the proxy agent")
                }
            }
            tokio::select! {
                _ = &mut stop => return None,
                _ = tokio::time::sleep(RESTART_PAUSE) => {}
            }
        };
        info!(socket = %config.socket.display(), pid = agent.pid(), "proxy agent restarted after an unexpected exit");
        info.send_modify(|i| {
            i.pid = agent.pid();
            i.proxy = agent.proxy().clone();
            i.restarts += 1;
        });
    }
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
    /// Local cluster: an agent subprocess creates the socket and waits for the
    /// runner where `config` says (by default a unix socket only the runner's
    /// user may connect to); the pool dials it. If the agent exits without being
    /// stopped, the pool reports it at once: the [`Incoming`] yields an error
    /// naming the socket, the agent's pid and its exit status. The agent is
    /// then started again at the same address, for the cleanup that follows.
    pub async fn local(
        config: LocalAgentConfig,
        pool: PoolConfig,
    ) -> Result<(ProxiedSocket, Incoming), ProxyError> {
        let agent = LocalAgent::start(config.clone()).await?;
        let (pool, incoming) = PreDialled::start(agent.transport(), pool);
        let path = agent.socket().to_owned();
        let (info_tx, info) = watch::channel(LocalAgentInfo {
            pid: agent.pid(),
            proxy: agent.proxy().clone(),
            restarts: 0,
        });
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(supervise(agent, config, pool.far_end(), info_tx, stop_rx));
        Ok((
            ProxiedSocket {
                path,
                pool,
                agent: Agent::Local(Supervised {
                    info,
                    stop: Some(stop),
                    task: Some(task),
                }),
            },
            incoming,
        ))
    }

    /// Real cluster: the agent runs by exec in `pod` on a fresh pod port, and
    /// the pool dials it through port-forward. An exec session that ends
    /// without being stopped is reported as the local agent's exit is.
    pub async fn remote(
        client: kube::Client,
        pod: &ProxyPod,
        socket: &str,
        pool: PoolConfig,
    ) -> Result<(ProxiedSocket, Incoming), ProxyError> {
        let port = pod.allocate_port();
        let transport = Arc::new(PortForward::new(
            client.clone(),
            pod.namespace.clone(),
            pod.name.clone(),
            pod.container.clone(),
            port,
        ));
        let (pool, incoming) = PreDialled::start(transport, pool);
        let agent = ExecAgent::start(client, pod, socket, port, pool.far_end(), pool.subscribe())?;
        Ok((
            ProxiedSocket {
                path: PathBuf::from(socket),
                pool,
                agent: Agent::Exec(agent),
            },
            incoming,
        ))
    }

    /// Real cluster with a node host: the pool's connections ask the node
    /// host to serve `socket` and wait there for its clients. Nothing else
    /// runs for it: a node host started again listens once the pool has
    /// dialled it again, which the pool does after any lost connection.
    pub fn hosted(
        link: Arc<HostLink>,
        socket: &str,
        pool: PoolConfig,
    ) -> (ProxiedSocket, Incoming) {
        let (pool, incoming) = PreDialled::start(link.serving(socket), pool);
        (
            ProxiedSocket {
                path: PathBuf::from(socket),
                pool,
                agent: Agent::Hosted(link),
            },
            incoming,
        )
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

    /// The local agent serving the socket now, if it is served by one.
    pub fn local_agent(&self) -> Option<LocalAgentInfo> {
        match &self.agent {
            Agent::Local(a) => Some(a.info.borrow().clone()),
            Agent::Exec(_) | Agent::Hosted(_) => None,
        }
    }

    /// Waits until a local agent serves the socket with `cond` holding for
    /// it, at most `deadline`; the last info seen on timeout.
    pub async fn wait_local_agent(
        &self,
        cond: impl Fn(&LocalAgentInfo) -> bool,
        deadline: Duration,
    ) -> Result<LocalAgentInfo, Option<LocalAgentInfo>> {
        let Agent::Local(a) = &self.agent else {
            return Err(None);
        };
        let mut rx = a.info.clone();
        match tokio::time::timeout(deadline, rx.wait_for(|i| cond(i))).await {
            Ok(Ok(i)) => Ok(i.clone()),
            _ => Err(Some(a.info.borrow().clone())),
        }
    }

    /// Closes the pool's connections first (as upstream closes its listener
    /// first), then ends the agent and removes the socket.
    pub async fn stop(self) -> Result<(), ProxyError> {
        self.pool.shutdown().await;
        match self.agent {
            Agent::Local(mut a) => {
                if let Some(stop) = a.stop.take() {
                    let _ = stop.send(());
                }
                let agent = match a.task.take() {
                    Some(task) => task.await.ok().flatten(),
                    None => None,
                };
                if let Some(agent) = agent {
                    agent.stop().await?;
                }
            }
            Agent::Exec(a) => a.stop().await?,
            Agent::Hosted(link) => link.close(&self.path).await?,
        }
        info!(socket = %self.path.display(), "proxied socket stopped");
        Ok(())
    }
}
