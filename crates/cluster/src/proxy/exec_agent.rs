//! The agent started by exec in a proxy pod, restarted whenever the exec ends.
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use super::exec::{ExecTarget, exec_capture};
use super::pods::{AgentKind, ProxyPod, ProxyPodsError};
use super::pool::{FarEnd, PoolStats};
use tokio::sync::watch;

/// Refusals at the agent's port, after it said it listens, that mean it is
/// gone: one could be a connection dialled just before it listened.
const GONE_AFTER_REFUSALS: u64 = 3;
/// How long a session whose agent stopped listening may take to end on its
/// own: one that ends is an agent that exited (a loss, reported).
const SESSION_END_GRACE: Duration = Duration::from_secs(3);

/// A run that lasted this long resets the restart backoff.
const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(300);

/// Exponential restart delays: initial, doubled each time, capped.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    cap: Duration,
    next: Duration,
}

impl Default for Backoff {
    /// 1 s doubling up to 30 s, as upstream restarts its agent execs.
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(30))
    }
}

impl Backoff {
    pub fn new(initial: Duration, cap: Duration) -> Self {
        Self {
            initial,
            cap,
            next: initial,
        }
    }

    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(self.cap);
        d
    }

    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// Fails if `socket` is too long for `agent` to listen on.
pub fn check_socket_path(agent: AgentKind, socket: &str) -> Result<(), ProxyPodsError> {
    let max = agent.max_socket_path();
    if socket.len() > max {
        return Err(ProxyPodsError::SocketPathTooLong {
            socket: socket.to_owned(),
            len: socket.len(),
            max,
        });
    }
    Ok(())
}

/// An agent kept running by exec in a proxy pod for one socket and port.
pub struct ExecAgent {
    client: kube::Client,
    target: ExecTarget,
    socket: String,
    port: u16,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ExecAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecAgent")
            .field("target", &self.target)
            .field("socket", &self.socket)
            .field("port", &self.port)
            .finish()
    }
}

impl ExecAgent {
    /// Starts the exec loop in the background. An exec session that ends
    /// without being stopped (the agent in the pod exited or was killed) is
    /// reported to `far_end` at once, then the agent is started again for
    /// the cleanup that follows.
    ///
    /// An agent can also go while its session seems to live on: a restarted
    /// kubelet or container runtime ends the exec'd process, but the API
    /// server does not always end the stream. The pool's `stats` tell: once
    /// the agent said it listens, connections to its port are refused. Such
    /// an agent is started again without a loss being reported, as the
    /// node's own restart caused it and the kubelet reconnects once it is
    /// back. Fails only if the socket path is too long for the pod's agent.
    pub fn start(
        client: kube::Client,
        pod: &ProxyPod,
        socket: &str,
        port: u16,
        far_end: FarEnd,
        stats: watch::Receiver<PoolStats>,
    ) -> Result<ExecAgent, ProxyPodsError> {
        check_socket_path(pod.agent, socket)?;
        let target = pod.exec_target();
        let command = pod.agent.command(socket, port);
        let cancel = CancellationToken::new();
        let span = tracing::info_span!("agent", pod = %target.pod, node = %pod.node, port);
        let session = Session {
            target: target.clone(),
            node: pod.node.clone(),
            socket: socket.to_owned(),
            command,
        };
        let task = tokio::spawn(
            supervise(client.clone(), session, far_end, stats, cancel.clone()).instrument(span),
        );
        Ok(ExecAgent {
            client,
            target,
            socket: socket.to_owned(),
            port,
            cancel,
            task: Some(task),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Ends the exec (which ends the agent once it notices) and removes the
    /// socket, which a killed agent leaves behind.
    pub async fn stop(mut self) -> Result<(), ProxyPodsError> {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        exec_capture(
            &self.client,
            &self.target,
            vec!["rm".into(), "-f".into(), self.socket.clone()],
        )
        .await?;
        info!(target = %self.target, socket = %self.socket, "agent stopped, socket removed");
        Ok(())
    }
}

impl Drop for ExecAgent {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What one agent exec runs, and where, for messages.
struct Session {
    target: ExecTarget,
    node: String,
    socket: String,
    command: Vec<String>,
}

impl Session {
    /// Why the kubelet's connections stopped reaching the plugin.
    fn lost(&self, how: &str) -> String {
        format!(
            "the proxy agent for socket {} in pod {}/{} on node {} exited unexpectedly ({how}); \
             the kubelet's connections to that socket no longer reach the plugin",
            self.socket, self.target.namespace, self.target.pod, self.node
        )
    }
}

async fn supervise(
    client: kube::Client,
    session: Session,
    far_end: FarEnd,
    stats: watch::Receiver<PoolStats>,
    cancel: CancellationToken,
) {
    let api: Api<Pod> = Api::namespaced(client, &session.target.namespace);
    let mut backoff = Backoff::default();
    let mut restarts = dra_e2e_conn::persisting::Persisting::default();
    loop {
        let started = Instant::now();
        let (listening_tx, listening) = watch::channel(false);
        let was_listening = listening.clone();
        let run = run_once(&api, &session.target, &session.command, listening_tx);
        tokio::pin!(run);
        let outcome = tokio::select! {
            _ = cancel.cancelled() => return,
            r = &mut run => Some(r),
            _ = refused_after_listening(listening, stats.clone()) => {
                tokio::time::timeout(SESSION_END_GRACE, &mut run).await.ok()
            }
        };
        // Each restart below is one a scenario's node operation causes (a
        // kubelet or container runtime restarted): shown at -v, and a
        // warning only when restarts go on for a minute (`Persisting`).
        let why = match outcome {
            // An exec that ends before its agent listened lost nothing: a
            // kubelet that has just restarted answers "pod does not exist"
            // until it has synced its pods again (a 1.34 kubelet, seen by
            // make e2e-skew), and the next try works.
            Some(Ok(status)) if !*was_listening.borrow() => {
                format!("agent exec ended before the agent listened ({status}); starting it again")
            }
            // The agent exited 0: it shuts down when the reader of its
            // stdout goes, as when a restarting kubelet (1.34, seen by make
            // e2e-skew) ends its exec sessions. The node's own restart, as
            // below; a killed agent ends with a non-zero code instead.
            Some(Ok(status)) if status.starts_with(EXITED_CLEANLY) => format!(
                "agent exec ended with its session ({status}; the node's kubelet restarted?); \
                 starting it again"
            ),
            // The session was up: the agent ended under the plugin's feet.
            Some(Ok(status)) => {
                far_end.lost(session.lost(&status));
                format!("agent exec ended ({status}); restarting")
            }
            // Not started (yet): the pool's dialling tells when it works.
            Some(Err(e)) => format!("agent exec failed ({e}); restarting"),
            None => "the agent no longer listens while its exec session seems alive (the node's \
                     kubelet or container runtime restarted?); starting it again"
                .to_owned(),
        };
        if restarts.worth_a_warning(std::time::Instant::now()) {
            warn!("{why} (restarting for over a minute)");
        } else {
            info!("{why}");
        }
        if started.elapsed() >= BACKOFF_RESET_AFTER {
            backoff.reset();
            restarts.ended();
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Resolves once the agent said it listens and then
/// [`GONE_AFTER_REFUSALS`] connections to its port were refused.
async fn refused_after_listening(
    mut listening: watch::Receiver<bool>,
    mut stats: watch::Receiver<PoolStats>,
) {
    if listening.wait_for(|l| *l).await.is_err() {
        return futures::future::pending().await;
    }
    let before = stats.borrow_and_update().refused;
    if stats
        .wait_for(|s| s.refused >= before + GONE_AFTER_REFUSALS)
        .await
        .is_err()
    {
        futures::future::pending::<()>().await;
    }
}

/// How [`run_once`] reports an exec whose process exited 0.
const EXITED_CLEANLY: &str = "Success:";

/// One exec session; returns how it ended. `listening` turns true when the
/// agent says it listens.
async fn run_once(
    api: &Api<Pod>,
    target: &ExecTarget,
    command: &[String],
    listening: watch::Sender<bool>,
) -> Result<String, kube::Error> {
    let params = AttachParams::default()
        .container(target.container.clone())
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let mut proc = api.exec(&target.pod, command.to_vec(), &params).await?;
    info!(command = %command.join(" "), "agent exec started");
    let listening = &listening;
    let log = |r: Option<tokio::io::ReadHalf<tokio::io::SimplexStream>>| async move {
        if let Some(r) = r {
            let mut lines = BufReader::new(r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with(dra_e2e_agent::proxy_agent::READY_PREFIX) {
                    listening.send_replace(true);
                }
                debug!("agent: {line}");
            }
        }
    };
    let status = proc.take_status();
    let (_, _, status) = tokio::join!(log(proc.stdout()), log(proc.stderr()), async {
        match status {
            Some(s) => s.await,
            None => None,
        }
    });
    Ok(match status {
        Some(s) => format!(
            "{}: {}",
            s.status.unwrap_or_default(),
            s.message.unwrap_or_default()
        ),
        None => "stream closed without a status".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = Backoff::default();
        let secs: Vec<u64> = (0..7).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn socket_path_limits_follow_the_agent() {
        let dir = "/var/lib/kubelet/plugins_registry/";
        let at = |len: usize| format!("{dir}{}", "d".repeat(len - dir.len()));
        check_socket_path(AgentKind::HostPathPlugin, &at(106)).unwrap();
        assert!(matches!(
            check_socket_path(AgentKind::HostPathPlugin, &at(107)),
            Err(ProxyPodsError::SocketPathTooLong {
                len: 107,
                max: 106,
                ..
            })
        ));
        check_socket_path(AgentKind::DraE2e, &at(107)).unwrap();
        assert!(check_socket_path(AgentKind::DraE2e, &at(108)).is_err());
    }
}
