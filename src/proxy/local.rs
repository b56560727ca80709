//! The agent as a local subprocess, for the local cluster's simulated nodes.
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::agent::READY_PREFIX;

/// How to run one local agent.
#[derive(Debug, Clone)]
pub struct LocalAgentConfig {
    /// The dra-e2e executable; `proxy-agent` is its subcommand.
    pub program: PathBuf,
    /// The unix socket the agent creates.
    pub socket: PathBuf,
    /// Where the agent's TCP side listens; port 0 lets the agent pick a free
    /// port and report it, so there is no race over a probed port.
    pub listen: SocketAddr,
    /// How long the agent may take to report that it listens.
    pub ready_timeout: Duration,
    /// How long a TERMed agent may take to exit before it is killed.
    pub stop_timeout: Duration,
}

impl LocalAgentConfig {
    /// An agent for `socket` run from the current executable, listening on a
    /// free loopback port.
    pub fn new(socket: impl Into<PathBuf>) -> Result<Self, LocalAgentError> {
        let program = std::env::current_exe().map_err(LocalAgentError::CurrentExe)?;
        Ok(Self::with_program(program, socket))
    }

    pub fn with_program(program: impl Into<PathBuf>, socket: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            socket: socket.into(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            ready_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
        }
    }

    pub fn listen_on(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalAgentError {
    #[error("finding the dra-e2e executable: {0}")]
    CurrentExe(#[source] io::Error),
    #[error("starting {program} proxy-agent for {socket}: {source}")]
    Spawn {
        program: PathBuf,
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("proxy agent for {socket} exited before listening ({status}); stderr: {stderr}")]
    EarlyExit {
        socket: PathBuf,
        status: String,
        stderr: String,
    },
    #[error(
        "proxy agent for {socket} did not report listening within {timeout:?}; stderr: {stderr}"
    )]
    NotReady {
        socket: PathBuf,
        timeout: Duration,
        stderr: String,
    },
    #[error("proxy agent for {socket} printed an unreadable ready line {line:?}")]
    BadReadyLine { socket: PathBuf, line: String },
    #[error("stopping proxy agent for {socket}: {source}")]
    Stop {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("removing socket {socket}: {source}")]
    RemoveSocket {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A running `dra-e2e proxy-agent` subprocess.
///
/// It dies with the runner (`PR_SET_PDEATHSIG`). [`LocalAgent::stop`] ends it
/// cleanly; dropping it kills it and removes the socket file.
#[derive(Debug)]
pub struct LocalAgent {
    child: Option<Child>,
    pid: u32,
    socket: PathBuf,
    tcp_addr: SocketAddr,
    stop_timeout: Duration,
    output: Vec<JoinHandle<()>>,
}

impl LocalAgent {
    /// Starts the agent and waits until it listens on both ends.
    pub async fn start(config: LocalAgentConfig) -> Result<LocalAgent, LocalAgentError> {
        let socket = config.socket.clone();
        let mut cmd = Command::new(&config.program);
        cmd.arg("proxy-agent")
            .arg("--endpoint")
            .arg(&config.socket)
            .arg("--proxy-endpoint")
            .arg(format!("tcp://{}", config.listen))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // Its own process group: a terminal's Ctrl-C reaches the runner,
            // which then stops agents in teardown order.
            .process_group(0);
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe calls (prctl, getppid), without allocating.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The runner may have died between fork and prctl.
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let mut child =
            spawn_from_long_lived_thread(cmd)
                .await
                .map_err(|source| LocalAgentError::Spawn {
                    program: config.program.clone(),
                    socket: socket.clone(),
                    source,
                })?;
        let pid = child.id().unwrap_or_default();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let mut stdout = stdout.map(|s| BufReader::new(s).lines());

        let first_line = async {
            match stdout.as_mut() {
                Some(lines) => loop {
                    match lines.next_line().await {
                        Ok(Some(line)) if line.starts_with(READY_PREFIX) => return Some(line),
                        Ok(Some(line)) => debug!(socket = %socket.display(), "agent: {line}"),
                        _ => return None,
                    }
                },
                None => None,
            }
        };
        let ready = tokio::time::timeout(config.ready_timeout, first_line).await;
        let line = match ready {
            Ok(Some(line)) => line,
            outcome => {
                // Not ready: make sure it is gone, then report what it said.
                let _ = child.start_kill();
                let status = child.wait().await;
                let stderr = read_all(stderr).await;
                return Err(match outcome {
                    Ok(None) => LocalAgentError::EarlyExit {
                        socket,
                        status: status
                            .map(|s| s.to_string())
                            .unwrap_or_else(|e| e.to_string()),
                        stderr,
                    },
                    _ => LocalAgentError::NotReady {
                        socket,
                        timeout: config.ready_timeout,
                        stderr,
                    },
                });
            }
        };
        let Some(tcp_addr) = parse_ready_line(&line) else {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(LocalAgentError::BadReadyLine { socket, line });
        };
        info!(socket = %socket.display(), %tcp_addr, pid, "local proxy agent listening");

        // Keep draining both pipes for the agent's whole life: it treats a
        // closed stdout as "my session is gone" and exits.
        let mut output = Vec::new();
        if let Some(mut lines) = stdout {
            let s = socket.clone();
            output.push(tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    debug!(socket = %s.display(), "agent: {line}");
                }
            }));
        }
        if let Some(err) = stderr {
            let s = socket.clone();
            output.push(tokio::spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    debug!(socket = %s.display(), "agent: {line}");
                }
            }));
        }
        Ok(LocalAgent {
            child: Some(child),
            pid,
            socket,
            tcp_addr,
            stop_timeout: config.stop_timeout,
            output,
        })
    }

    /// The address the agent's TCP side listens on.
    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp_addr
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// TERM, wait, KILL if it lingers, then remove the socket file (a killed
    /// agent leaves it behind).
    pub async fn stop(mut self) -> Result<(), LocalAgentError> {
        if let Some(mut child) = self.child.take() {
            let stop_err = |source| LocalAgentError::Stop {
                socket: self.socket.clone(),
                source,
            };
            if let Ok(pid) = i32::try_from(self.pid)
                && pid > 0
                && child.try_wait().map_err(stop_err)?.is_none()
            {
                // SAFETY: plain kill(2) on our own, not yet reaped child.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            match tokio::time::timeout(self.stop_timeout, child.wait()).await {
                Ok(status) => {
                    let status = status.map_err(stop_err)?;
                    debug!(socket = %self.socket.display(), %status, "local proxy agent exited");
                }
                Err(_) => {
                    warn!(socket = %self.socket.display(), timeout = ?self.stop_timeout, "agent ignored TERM; killing it");
                    child.kill().await.map_err(stop_err)?;
                }
            }
        }
        for task in self.output.drain(..) {
            let _ = task.await;
        }
        remove_socket(&self.socket)
    }

    /// SIGKILL, as a crash would: the socket file stays behind.
    pub async fn kill(mut self) -> Result<ExitStatus, LocalAgentError> {
        let Some(mut child) = self.child.take() else {
            return Err(LocalAgentError::Stop {
                socket: self.socket.clone(),
                source: io::Error::other("already stopped"),
            });
        };
        let stop_err = |source| LocalAgentError::Stop {
            socket: self.socket.clone(),
            source,
        };
        child.kill().await.map_err(stop_err)?;
        let status = child.wait().await.map_err(stop_err)?;
        for task in self.output.drain(..) {
            let _ = task.await;
        }
        Ok(status)
    }
}

impl Drop for LocalAgent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // tokio reaps the orphaned child in the background.
            let _ = child.start_kill();
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

fn remove_socket(socket: &Path) -> Result<(), LocalAgentError> {
    match std::fs::remove_file(socket) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(LocalAgentError::RemoveSocket {
            socket: socket.to_owned(),
            source,
        }),
    }
}

/// `proxy-agent listening tcp=<addr> unix=<path>` -> addr.
fn parse_ready_line(line: &str) -> Option<SocketAddr> {
    line.strip_prefix(READY_PREFIX)?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("tcp="))?
        .parse()
        .ok()
}

async fn read_all(r: Option<impl AsyncRead + Unpin>) -> String {
    let mut out = String::new();
    if let Some(mut r) = r {
        let _ = tokio::time::timeout(Duration::from_secs(2), r.read_to_string(&mut out)).await;
    }
    out.trim().to_owned()
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Spawns `cmd` from a thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not
/// the process. Tokio's blocking-pool threads retire after a few idle seconds,
/// and test threads end with their test, so forking from an arbitrary thread
/// could kill a healthy agent at a random moment.
async fn spawn_from_long_lived_thread(mut cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Option<std::sync::mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("agent-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .ok()
            .map(|_| tx)
    });
    let Some(spawner) = spawner else {
        return Err(io::Error::other("cannot start the agent-spawner thread"));
    };
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    spawner
        .send(Box::new(move || {
            // The child is reaped by the caller's runtime.
            let _guard = handle.enter();
            let _ = tx.send(cmd.spawn());
        }))
        .map_err(|_| io::Error::other("agent-spawner thread is gone"))?;
    rx.await
        .map_err(|_| io::Error::other("agent-spawner thread dropped the request"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_gives_the_bound_address() {
        assert_eq!(
            parse_ready_line("proxy-agent listening tcp=127.0.0.1:40123 unix=/tmp/a b/x.sock"),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        assert_eq!(
            parse_ready_line("proxy-agent listening tcp=[::]:9001 unix=/x"),
            Some("[::]:9001".parse().unwrap())
        );
        assert_eq!(parse_ready_line("something else tcp=1.2.3.4:5"), None);
    }
}
