//! `dra-e2e proxy-agent`: pairs unix-socket clients with waiting TCP connections.
//!
//! Same wire behaviour as hostpathplugin's `--proxy-endpoint` mode, so either
//! can sit behind the runner's pre-dialled pool: no header or framing, pairing
//! strictly by order (the next unix client gets the oldest queued TCP
//! connection), and no half-close — when either side ends, both are closed.
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

use super::endpoint::{self, Endpoint};

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
struct Args {
    /// Unix socket to create: a path or unix://<path>.
    #[arg(long)]
    endpoint: String,
    /// TCP address to listen on: tcp://[host]:<port>; an empty host means all addresses.
    #[arg(long = "proxy-endpoint")]
    proxy_endpoint: String,
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
    #[error("--proxy-endpoint {0:?} must be tcp://[host]:port")]
    NotTcp(String),
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
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let unix = match endpoint::parse(&args.endpoint).map_err(AgentError::Endpoint)? {
        Endpoint::Unix(p) => p,
        Endpoint::Tcp { .. } => return Err(AgentError::NotUnix(args.endpoint).into()),
    };
    let tcp = match endpoint::parse(&args.proxy_endpoint) {
        Ok(e @ Endpoint::Tcp { .. }) => e,
        _ => return Err(AgentError::NotTcp(args.proxy_endpoint).into()),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let stop = stop_signal()?;
        let agent = Agent::bind(&unix, &tcp).await?;
        announce(&agent);
        agent.serve(stop).await;
        Ok(())
    })
}

fn announce(agent: &Agent) {
    use std::io::Write;
    // The parent may already be gone; a failed write must not kill the agent
    // before it had a chance to remove its socket.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{READY_PREFIX} tcp={} unix={}",
        agent.tcp_addr,
        agent.unix_path.display()
    );
    let _ = out.flush();
}

/// Resolves on TERM, INT, HUP or QUIT, or when the process that reads our
/// output went away (a cancelled `kubectl exec`-style session).
fn stop_signal() -> Result<impl Future<Output = ()>, AgentError> {
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
    // SAFETY: fstat on fd 1 with a valid, zeroed out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let is_stream = unsafe { libc::fstat(1, &mut st) } == 0
        && matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK);
    if is_stream {
        let spawned = std::thread::Builder::new()
            .name("stdout-watch".into())
            .spawn(move || {
                loop {
                    // events = 0: only POLLERR/POLLHUP/POLLNVAL are reported.
                    let mut pfd = libc::pollfd {
                        fd: 1,
                        events: 0,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd, infinite timeout.
                    let n = unsafe { libc::poll(&mut pfd, 1, -1) };
                    if n < 0 {
                        if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                        {
                            continue;
                        }
                        return;
                    }
                    if pfd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                        let _ = tx.send(());
                    }
                    return;
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

/// An agent with both listeners open.
pub struct Agent {
    unix: UnixListener,
    unix_path: PathBuf,
    /// Identifies the socket file we created, so shutdown never removes a
    /// socket that a newer agent created at the same path.
    unix_ino: Option<(u64, u64)>,
    tcp: TcpListener,
    tcp_addr: SocketAddr,
}

impl Agent {
    /// Replaces any stale file at `unix_path`, then listens on the unix socket
    /// first and the TCP endpoint second.
    pub async fn bind(unix_path: &Path, tcp: &Endpoint) -> Result<Agent, AgentError> {
        let Endpoint::Tcp { host, port } = tcp else {
            return Err(AgentError::NotTcp(format!("{tcp:?}")));
        };
        match std::fs::remove_file(unix_path) {
            Ok(()) => debug!(path = %unix_path.display(), "removed stale socket"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(path = %unix_path.display(), error = %e, "cannot remove stale socket"),
        }
        let unix = UnixListener::bind(unix_path).map_err(|source| AgentError::ListenUnix {
            path: unix_path.to_owned(),
            source,
        })?;
        let unix_ino = std::fs::symlink_metadata(unix_path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let tcp = match bind_tcp(host, *port).await {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_file(unix_path);
                return Err(e);
            }
        };
        let tcp_addr = tcp.local_addr().map_err(|source| AgentError::ListenTcp {
            addr: format!("{host}:{port}"),
            source,
        })?;
        info!(unix = %unix_path.display(), tcp = %tcp_addr, "listening");
        Ok(Agent {
            unix,
            unix_path: unix_path.to_owned(),
            unix_ino,
            tcp,
            tcp_addr,
        })
    }

    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp_addr
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
            // Only now take a TCP connection: everything dialled meanwhile
            // waits in the kernel's accept queue, oldest first.
            let tcp = tokio::select! {
                _ = &mut stop => break,
                r = self.tcp.accept() => match r {
                    Ok((s, peer)) => { debug!(%peer, "tcp connection taken"); s }
                    Err(e) => {
                        warn!(error = %e, "accepting tcp connection; dropping the unix client");
                        tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                        continue;
                    }
                },
            };
            next_id += 1;
            tokio::spawn(pair(next_id, unix, tcp));
        }
        self.remove_socket();
    }

    fn remove_socket(&self) {
        let ours = std::fs::symlink_metadata(&self.unix_path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if ours.is_some() && ours == self.unix_ino {
            if let Err(e) = std::fs::remove_file(&self.unix_path) {
                warn!(path = %self.unix_path.display(), error = %e, "removing socket");
            } else {
                info!(path = %self.unix_path.display(), "socket removed");
            }
        }
    }
}

async fn bind_tcp(host: &str, port: u16) -> Result<TcpListener, AgentError> {
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

async fn pair(id: u64, unix: UnixStream, tcp: TcpStream) {
    debug!(id, "paired");
    let (mut ur, mut uw) = unix.into_split();
    let (mut tr, mut tw) = tcp.into_split();
    // Whichever direction ends first ends the pair: both sockets are closed
    // when the halves drop, never half-closed.
    let (dir, result) = tokio::select! {
        r = tokio::io::copy(&mut ur, &mut tw) => ("unix->tcp", r),
        r = tokio::io::copy(&mut tr, &mut uw) => ("tcp->unix", r),
    };
    match result {
        Ok(bytes) => debug!(id, dir, bytes, "pair closed on EOF"),
        Err(e) => debug!(id, dir, error = %e, "pair closed on error"),
    }
}
