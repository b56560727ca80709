//! `dra-e2e-agent proxy-agent` (and the runner's hidden `dra-e2e proxy-agent`): pairs unix-socket clients with waiting TCP connections.
//!
//! Same wire behaviour as hostpathplugin's `--proxy-endpoint` mode, so either
//! can sit behind the runner's pre-dialled pool: no header or framing, pairing
//! strictly by order (the next unix client gets the oldest queued TCP
//! connection), and no half-close — when either side ends, both are closed.
//!
//! The local cluster's agents wait for the runner on a unix socket instead
//! (`--proxy-endpoint unix://<path>`): a TCP port on loopback would let any
//! user of the machine queue a connection and be paired with a kubelet, and
//! connect to the kubelet side through it. With a unix proxy endpoint both
//! sockets are created mode 0600 and every connection is checked with
//! `SO_PEERCRED`: one from another user than the agent's is closed unused.
//!
//! `--connect <socket>` is the other direction, for one connection the
//! runner opens to a socket on the node: the agent connects to the socket
//! and copies stdin/stdout to and from it (see [`crate::relay`]).
use std::ffi::OsString;
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{debug, info, warn};

use crate::endpoint::{self, Endpoint};

/// First words of the line the agent prints on stdout once both listeners are
/// open; followed by `tcp=<bound address> unix=<socket path>`.
pub const READY_PREFIX: &str = "proxy-agent listening";

/// Pause after a failed accept, so a persistent error (EMFILE) does not spin.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(100);

#[derive(Debug, Parser)]
#[command(
    name = "dra-e2e proxy-agent",
    about = "Pairs each client of a unix socket with the oldest waiting TCP connection"
)]
pub struct Args {
    /// Unix socket to create: a path or unix://<path>.
    #[arg(long, required_unless_present = "connect")]
    endpoint: Option<String>,
    /// Where the runner's connections wait: tcp://[host]:<port> (an empty host
    /// means all addresses), or unix://<path>, a socket only this user may use.
    #[arg(long = "proxy-endpoint", required_unless_present = "connect")]
    proxy_endpoint: Option<String>,
    /// Instead of pairing: connect to this unix socket and copy stdin to it
    /// and its output to stdout until either ends. Prints a line starting
    /// with "proxy-agent connected" on stderr once connected.
    #[arg(long, value_name = "SOCKET", conflicts_with_all = ["endpoint", "proxy_endpoint"])]
    connect: Option<PathBuf>,
    /// Log verbosity, accepted for hostpathplugin compatibility and ignored (use RUST_LOG).
    #[arg(long = "v", default_value_t = 0)]
    _verbosity: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("--endpoint: {0}")]
    Endpoint(#[source] endpoint::EndpointError),
    #[error("--endpoint {0:?} must be a unix socket")]
    NotUnix(String),
    #[error("--proxy-endpoint {0:?} must be tcp://[host]:port or unix://<path>")]
    BadProxyEndpoint(String),
    #[error("listening on unix socket {path}: {source}")]
    ListenUnix {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listening on tcp {addr}: {source}")]
    ListenTcp {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("installing signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

/// Entry point of the `proxy-agent` subcommand; `args` excludes the subcommand name.
pub fn cli_main(args: Vec<OsString>) -> anyhow::Result<()> {
    let args = match Args::try_parse_from(
        std::iter::once(OsString::from("dra-e2e proxy-agent")).chain(args),
    ) {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help and friends: print and succeed.
            let _ = e.print();
            return Ok(());
        }
        // main() adds its own "error: " prefix.
        Err(e) => {
            let msg = e.render().to_string();
            anyhow::bail!("{}", msg.trim_start_matches("error: ").trim_end());
        }
    };
    run(args)
}

/// Runs the agent as `args` say, until it is told to stop or, with
/// `--connect`, until the connection ends.
pub fn run(args: Args) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let (endpoint, proxy_endpoint) = match (args.connect, args.endpoint, args.proxy_endpoint) {
        (Some(socket), _, _) => return connect_main(&socket),
        (None, Some(e), Some(p)) => (e, p),
        // clap requires both without --connect; said again rather than unwrapped.
        _ => anyhow::bail!("--endpoint and --proxy-endpoint are required without --connect"),
    };
    let unix = match endpoint::parse(&endpoint).map_err(AgentError::Endpoint)? {
        Endpoint::Unix(p) => p,
        Endpoint::Tcp { .. } => return Err(AgentError::NotUnix(endpoint).into()),
    };
    let proxy = match endpoint::parse(&proxy_endpoint) {
        Ok(e @ Endpoint::Tcp { .. }) => e,
        // Only with its scheme: a bare path here is more likely a mistake.
        Ok(e @ Endpoint::Unix(_))
            if proxy_endpoint
                .get(..7)
                .is_some_and(|s| s.eq_ignore_ascii_case("unix://")) =>
        {
            e
        }
        _ => return Err(AgentError::BadProxyEndpoint(proxy_endpoint).into()),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    crate::takeover::replace_older(&endpoint);
    rt.block_on(async move {
        let stop = stop_signal()?;
        let agent = Agent::bind(&unix, &proxy).await?;
        announce(&agent);
        agent.serve(stop).await;
        Ok(())
    })
}

/// `--connect`: one connection between stdin/stdout and `socket`. Exits 0
/// when either side ends; a failed connect is the error main() prints on
/// stderr (it names the path) before exiting non-zero.
fn connect_main(socket: &Path) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let relayed = rt.block_on(crate::relay::relay(
        socket,
        tokio::io::stdin(),
        tokio::io::stdout(),
        || announce_connected(socket),
    ));
    // tokio reads stdin on a blocking thread that may still wait for input
    // the runner will never send; do not wait for it.
    rt.shutdown_background();
    let end = relayed?;
    match end.result {
        Ok(bytes) => debug!(direction = end.direction, bytes, "connection closed on EOF"),
        Err(e) => debug!(direction = end.direction, error = %e, "connection closed on error"),
    }
    Ok(())
}

/// The line the runner waits for (on stderr: stdout carries the socket's bytes).
fn announce_connected(socket: &Path) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{} unix={}",
        crate::relay::CONNECTED_PREFIX,
        socket.display()
    );
    let _ = err.flush();
}

fn announce(agent: &Agent) {
    use std::io::Write;
    // The parent may already be gone; a failed write must not kill the agent
    // before it had a chance to remove its socket.
    let mut out = std::io::stdout().lock();
    let _ = match &agent.runner {
        RunnerListener::Tcp { addr, .. } => writeln!(
            out,
            "{READY_PREFIX} tcp={addr} unix={}",
            agent.unix_path.display()
        ),
        RunnerListener::Unix { socket, .. } => writeln!(
            out,
            "{READY_PREFIX} proxy=unix://{} unix={}",
            socket.path.display(),
            agent.unix_path.display()
        ),
    };
    let _ = out.flush();
}

/// Resolves on TERM, INT, HUP or QUIT, or when the process that reads our
/// output went away (a cancelled `kubectl exec`-style session).
pub(crate) fn stop_signal() -> Result<impl Future<Output = ()>, AgentError> {
    let mut signals = Vec::new();
    for kind in [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
        SignalKind::quit(),
    ] {
        signals.push(signal(kind).map_err(AgentError::Signals)?);
    }
    let orphaned = output_reader_gone();
    Ok(async move {
        let any_signal = futures::future::select_all(
            signals
                .iter_mut()
                .map(|s| Box::pin(async move { s.recv().await })),
        );
        tokio::select! {
            _ = any_signal => info!("signal received, shutting down"),
            _ = orphaned => info!("stdout reader is gone, shutting down"),
        }
    })
}

/// Resolves when stdout is a pipe or socket whose reader closed it.
///
/// hostpathplugin dies of SIGPIPE on its next log line once its exec session
/// ends; noticing the closed pipe directly makes that deterministic even when
/// the agent is idle, so a stopped session does not leave an agent behind.
fn output_reader_gone() -> impl Future<Output = ()> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    if dra_e2e_sys::stdout_is_stream() {
        let spawned = std::thread::Builder::new()
            .name("stdout-watch".into())
            .spawn(move || {
                if let Ok(true) = dra_e2e_sys::wait_stdout_reader_gone() {
                    let _ = tx.send(());
                }
            });
        if let Err(e) = spawned {
            warn!(error = %e, "cannot watch stdout; relying on signals only");
        }
    }
    async move {
        // A dropped sender (no watcher) must not count as "gone".
        if rx.await.is_err() {
            futures::future::pending::<()>().await;
        }
    }
}

/// A unix socket file this agent created, so shutdown never removes a socket
/// that a newer agent created at the same path.
pub(crate) struct OwnSocket {
    path: PathBuf,
    ino: Option<(u64, u64)>,
}

impl OwnSocket {
    /// Replaces any stale file at `path` and listens there. The directory
    /// is made if missing: a node host serves every driver's directory,
    /// and a driver's is made when its first socket is.
    pub(crate) fn bind(path: &Path) -> Result<(UnixListener, OwnSocket), AgentError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| AgentError::ListenUnix {
                path: path.to_owned(),
                source,
            })?;
        }
        match std::fs::remove_file(path) {
            Ok(()) => debug!(path = %path.display(), "removed stale socket"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(path = %path.display(), error = %e, "cannot remove stale socket"),
        }
        let listener = UnixListener::bind(path).map_err(|source| AgentError::ListenUnix {
            path: path.to_owned(),
            source,
        })?;
        let ino = std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        Ok((
            listener,
            OwnSocket {
                path: path.to_owned(),
                ino,
            },
        ))
    }

    /// Owner only: connecting to a unix socket needs write permission on it.
    fn restrict(&self) -> Result<(), AgentError> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600)).map_err(
            |source| AgentError::ListenUnix {
                path: self.path.clone(),
                source,
            },
        )
    }

    pub(crate) fn remove(&self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if ours.is_some() && ours == self.ino {
            if let Err(e) = std::fs::remove_file(&self.path) {
                warn!(path = %self.path.display(), error = %e, "removing socket");
            } else {
                info!(path = %self.path.display(), "socket removed");
            }
        }
    }
}

/// Where the runner's connections wait for a kubelet's.
enum RunnerListener {
    /// hostpathplugin's way, for proxy pods reached by port-forward.
    Tcp {
        listener: TcpListener,
        addr: SocketAddr,
    },
    /// The local cluster's: a socket only the agent's user may connect to.
    Unix {
        listener: UnixListener,
        socket: OwnSocket,
    },
}

/// An agent with both listeners open.
pub struct Agent {
    unix: UnixListener,
    unix_path: PathBuf,
    kubelet_socket: OwnSocket,
    runner: RunnerListener,
}

/// Refuses a connection from another user than this process's.
fn check_same_user(stream: &UnixStream) -> Result<(), String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("reading the peer's credentials: {e}"))?;
    let me = dra_e2e_sys::effective_uid();
    if cred.uid() == me {
        Ok(())
    } else {
        Err(format!(
            "peer uid {} (pid {:?}) is not the agent's uid {me}",
            cred.uid(),
            cred.pid()
        ))
    }
}

impl Agent {
    /// Replaces any stale file at `unix_path`, then listens on the unix socket
    /// first and the runner's endpoint (`proxy`) second.
    pub async fn bind(unix_path: &Path, proxy: &Endpoint) -> Result<Agent, AgentError> {
        let (unix, kubelet_socket) = OwnSocket::bind(unix_path)?;
        let runner = match Self::bind_runner(proxy).await {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_file(unix_path);
                return Err(e);
            }
        };
        if let RunnerListener::Unix { socket, .. } = &runner {
            let restricted = kubelet_socket.restrict().and_then(|()| socket.restrict());
            if let Err(e) = restricted {
                kubelet_socket.remove();
                socket.remove();
                return Err(e);
            }
        }
        match &runner {
            RunnerListener::Tcp { addr, .. } => {
                info!(unix = %unix_path.display(), tcp = %addr, "listening")
            }
            RunnerListener::Unix { socket, .. } => {
                info!(unix = %unix_path.display(), proxy = %socket.path.display(), "listening")
            }
        }
        Ok(Agent {
            unix,
            unix_path: unix_path.to_owned(),
            kubelet_socket,
            runner,
        })
    }

    async fn bind_runner(proxy: &Endpoint) -> Result<RunnerListener, AgentError> {
        match proxy {
            Endpoint::Tcp { host, port } => {
                let listener = bind_tcp(host, *port).await?;
                let addr = listener
                    .local_addr()
                    .map_err(|source| AgentError::ListenTcp {
                        addr: format!("{host}:{port}"),
                        source,
                    })?;
                Ok(RunnerListener::Tcp { listener, addr })
            }
            Endpoint::Unix(path) => {
                let (listener, socket) = OwnSocket::bind(path)?;
                Ok(RunnerListener::Unix { listener, socket })
            }
        }
    }

    /// The TCP address the runner's connections arrive at, if they come by TCP.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match &self.runner {
            RunnerListener::Tcp { addr, .. } => Some(*addr),
            RunnerListener::Unix { .. } => None,
        }
    }

    /// Local agents admit only their own user on both sockets.
    fn same_user_only(&self) -> bool {
        matches!(self.runner, RunnerListener::Unix { .. })
    }

    /// The next connection the runner dialled, oldest first.
    async fn accept_runner(&self) -> std::io::Result<RunnerStream> {
        match &self.runner {
            RunnerListener::Tcp { listener, .. } => {
                let (s, peer) = listener.accept().await?;
                debug!(%peer, "tcp connection taken");
                Ok(RunnerStream::Tcp(s))
            }
            RunnerListener::Unix { listener, .. } => loop {
                let (s, _) = listener.accept().await?;
                // Someone else's connection must not be paired with a
                // kubelet; the runner's next one is behind it.
                match check_same_user(&s) {
                    Ok(()) => return Ok(RunnerStream::Unix(s)),
                    Err(e) => warn!("refused a connection on the runner's socket: {e}"),
                }
            },
        }
    }

    /// Pairs connections until `stop` resolves, then closes both listeners and
    /// removes the socket. Pairs already running are left to end on their own.
    pub async fn serve(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut next_id: u64 = 0;
        loop {
            let unix = tokio::select! {
                _ = &mut stop => break,
                r = self.unix.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        warn!(error = %e, "accepting unix client");
                        tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                        continue;
                    }
                },
            };
            if self.same_user_only()
                && let Err(e) = check_same_user(&unix)
            {
                warn!("refused a connection on the kubelet's socket: {e}");
                continue;
            }
            // Only now take a runner connection: everything dialled meanwhile
            // waits in the kernel's accept queue, oldest first.
            let runner = tokio::select! {
                _ = &mut stop => break,
                r = self.accept_runner() => match r {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(error = %e, "accepting the runner's connection; dropping the unix client");
                        tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                        continue;
                    }
                },
            };
            next_id += 1;
            tokio::spawn(pair(next_id, unix, runner));
        }
        self.kubelet_socket.remove();
        if let RunnerListener::Unix { socket, .. } = &self.runner {
            socket.remove();
        }
    }
}

/// A connection from the runner, by either transport.
enum RunnerStream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

pub(crate) async fn bind_tcp(host: &str, port: u16) -> Result<TcpListener, AgentError> {
    let err = |source| AgentError::ListenTcp {
        addr: format!("{host}:{port}"),
        source,
    };
    if !host.is_empty() {
        return TcpListener::bind((host, port)).await.map_err(err);
    }
    // Go's ":port" listens dual-stack; fall back to IPv4 where IPv6 is off.
    match TcpListener::bind(("::", port)).await {
        Ok(l) => Ok(l),
        Err(_) => TcpListener::bind(("0.0.0.0", port)).await.map_err(err),
    }
}

async fn pair(id: u64, unix: UnixStream, runner: RunnerStream) {
    debug!(id, "paired");
    let (dir, result) = match runner {
        RunnerStream::Tcp(tcp) => splice(unix, tcp).await,
        RunnerStream::Unix(other) => splice(unix, other).await,
    };
    match result {
        Ok(bytes) => debug!(id, dir, bytes, "pair closed on EOF"),
        Err(e) => debug!(id, dir, error = %e, "pair closed on error"),
    }
}

/// Copies both ways until either direction ends. Both sockets are closed
/// when the halves drop, never half-closed.
pub(crate) async fn splice<R>(unix: UnixStream, runner: R) -> (&'static str, std::io::Result<u64>)
where
    R: tokio::io::AsyncRead + tokio::io::AsyncWrite,
{
    let (mut ur, mut uw) = unix.into_split();
    let (mut rr, mut rw) = tokio::io::split(runner);
    tokio::select! {
        r = tokio::io::copy(&mut ur, &mut rw) => ("kubelet->runner", r),
        r = tokio::io::copy(&mut rr, &mut uw) => ("runner->kubelet", r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("proxy-agent").chain(args.iter().copied()))
    }

    #[test]
    fn connect_mode_needs_no_endpoints_and_takes_none() {
        let a = parse(&["--connect", "/var/lib/kubelet/plugins/d/dra.sock"]).unwrap();
        assert_eq!(
            a.connect.as_deref(),
            Some(Path::new("/var/lib/kubelet/plugins/d/dra.sock"))
        );
        assert!(parse(&["--connect", "/s", "--endpoint", "/e"]).is_err());
        assert!(parse(&["--connect", "/s", "--proxy-endpoint", "tcp://:9001"]).is_err());
    }

    #[test]
    fn pairing_mode_still_needs_both_endpoints() {
        let a = parse(&[
            "--endpoint",
            "/e",
            "--proxy-endpoint",
            "tcp://:9001",
            "--v=5",
        ])
        .unwrap();
        assert_eq!(a.endpoint.as_deref(), Some("/e"));
        assert_eq!(a.proxy_endpoint.as_deref(), Some("tcp://:9001"));
        assert!(a.connect.is_none());
        assert!(parse(&["--endpoint", "/e"]).is_err());
        assert!(parse(&[]).is_err());
    }
}
