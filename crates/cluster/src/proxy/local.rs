//! The agent as a local subprocess, for the local cluster's simulated nodes.
//!
//! The runner reaches it through a unix socket next to the kubelet's (see
//! [`ProxySide::Unix`]), not a loopback port: a port is open to every user of
//! the machine, a socket in the cluster's private directory only to the
//! runner's, and the agent checks each connection's uid as well.
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::transport::{TcpTransport, Transport, UnixTransport};
use dra_e2e_agent::proxy_agent::READY_PREFIX;

/// Where an agent waits for the runner's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxySide {
    /// A TCP address, as hostpathplugin listens in a proxy pod; port 0 lets
    /// the agent pick a free port and report it.
    Tcp(SocketAddr),
    /// A unix socket that only the runner's user may connect to: the agent
    /// creates it mode 0600 and refuses connections from other uids.
    Unix(PathBuf),
}

impl ProxySide {
    /// The agent's `--proxy-endpoint`.
    fn endpoint_arg(&self) -> std::ffi::OsString {
        match self {
            ProxySide::Tcp(addr) => format!("tcp://{addr}").into(),
            ProxySide::Unix(path) => {
                let mut s = std::ffi::OsString::from("unix://");
                s.push(path.as_os_str());
                s
            }
        }
    }

    /// How the runner dials it.
    pub fn transport(&self) -> Arc<dyn Transport> {
        match self {
            ProxySide::Tcp(addr) => Arc::new(TcpTransport::new(*addr)),
            ProxySide::Unix(path) => Arc::new(UnixTransport::new(path.clone())),
        }
    }
}

impl std::fmt::Display for ProxySide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxySide::Tcp(addr) => write!(f, "tcp://{addr}"),
            ProxySide::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// The runner's side of the agent for the kubelet socket `socket`: a hidden
/// socket in the same directory, which the kubelet's plugin watcher skips as
/// every dot file. Its name is at most as long as the names the local
/// cluster's sockets already have in that directory, so it fits wherever they
/// fit (see `runner::preflight`), and a hash of the kubelet socket's name
/// keeps two agents in one directory apart.
pub fn runner_socket_for(socket: &Path) -> PathBuf {
    // FNV-1a: stable across runs and builds, unlike the std hasher.
    let mut hash: u32 = 0x811c_9dc5;
    for b in socket
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default()
    {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let dir = socket.parent().unwrap_or_else(|| Path::new("."));
    dir.join(format!(".proxy-{hash:08x}"))
}

/// The running executable as the kernel holds it. Executing this path starts
/// the very image this process runs, even after a rebuild unlinked or replaced
/// the file it was started from (`current_exe()` would then name a path that
/// is gone, or a different binary).
pub const SELF_EXE: &str = "/proc/self/exe";

/// How to run one local agent.
#[derive(Debug, Clone)]
pub struct LocalAgentConfig {
    /// The dra-e2e executable; `proxy-agent` is its subcommand.
    pub program: PathBuf,
    /// What the agent sees as its `argv[0]` (by default `program`).
    pub arg0: Option<std::ffi::OsString>,
    /// The unix socket the agent creates.
    pub socket: PathBuf,
    /// Where the agent waits for the runner's connections: by default the
    /// private unix socket [`runner_socket_for`] `socket`.
    pub proxy: ProxySide,
    /// How long the agent may take to report that it listens.
    pub ready_timeout: Duration,
    /// How long a TERMed agent may take to exit before it is killed.
    pub stop_timeout: Duration,
}

impl LocalAgentConfig {
    /// An agent for `socket` run from the current executable ([`SELF_EXE`]),
    /// reached through [`runner_socket_for`] `socket`. Its `argv[0]` is the
    /// path the runner was started from, for `ps`.
    pub fn new(socket: impl Into<PathBuf>) -> Result<Self, LocalAgentError> {
        let mut config = Self::with_program(SELF_EXE, socket);
        config.arg0 = std::env::current_exe()
            .ok()
            .map(|p| p.into_os_string())
            .or_else(|| std::env::args_os().next());
        Ok(config)
    }

    pub fn with_program(program: impl Into<PathBuf>, socket: impl Into<PathBuf>) -> Self {
        let socket = socket.into();
        Self {
            program: program.into(),
            arg0: None,
            proxy: ProxySide::Unix(runner_socket_for(&socket)),
            socket,
            ready_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
        }
    }

    /// Waits for the runner on TCP at `addr` instead, as a proxy pod's agent
    /// does (for tests of the port-forward path).
    pub fn listen_on(self, addr: SocketAddr) -> Self {
        self.proxy_on(ProxySide::Tcp(addr))
    }

    pub fn proxy_on(mut self, proxy: ProxySide) -> Self {
        self.proxy = proxy;
        self
    }

    /// A TCP side on a free loopback port.
    pub fn on_loopback_tcp(self) -> Self {
        self.listen_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
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

/// How a local agent ended.
#[derive(Debug, Clone)]
pub struct AgentExit {
    pub socket: PathBuf,
    pub pid: u32,
    /// The exit status, or why it could not be read.
    pub status: Result<ExitStatus, String>,
    /// The runner ended it (stop, kill or drop); otherwise it died on its own
    /// or someone else killed it.
    pub requested: bool,
    /// The agent's last lines on stderr.
    pub stderr_tail: Vec<String>,
}

impl std::fmt::Display for AgentExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = match &self.status {
            Ok(s) => s.to_string(),
            Err(e) => format!("status unknown: {e}"),
        };
        write!(
            f,
            "the proxy agent for socket {} (pid {}) ",
            self.socket.display(),
            self.pid
        )?;
        if self.requested {
            return write!(f, "stopped ({status})");
        }
        write!(
            f,
            "exited unexpectedly ({status}); the kubelet's connections to that socket no longer reach the plugin"
        )?;
        // A signal says it all; a failure exit usually explains itself last.
        let signalled = matches!(&self.status, Ok(s) if std::os::unix::process::ExitStatusExt::signal(s).is_some());
        if !signalled && !self.stderr_tail.is_empty() {
            write!(f, "; its last output: {}", self.stderr_tail.join(" | "))?;
        }
        Ok(())
    }
}

/// The agent's command line and process settings.
fn agent_command(config: &LocalAgentConfig) -> Command {
    let mut cmd = Command::new(&config.program);
    if let Some(arg0) = &config.arg0 {
        cmd.arg0(arg0);
    }
    cmd.arg("proxy-agent")
        .arg("--endpoint")
        .arg(&config.socket)
        .arg("--proxy-endpoint")
        .arg(config.proxy.endpoint_arg())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Killed with its handle, even when a runtime shuts down with the
        // task that watches it.
        .kill_on_drop(true)
        // Its own process group: a terminal's Ctrl-C reaches the runner,
        // which then stops agents in teardown order.
        .process_group(0);
    dra_e2e_sys::die_with_parent(cmd.as_std_mut());
    cmd
}

type StdoutLines = tokio::io::Lines<BufReader<ChildStdout>>;

/// Why an agent never said it listens.
enum NotListening {
    /// Its stdout ended first: it exited.
    Exited,
    TimedOut,
    BadLine(String),
}

impl NotListening {
    /// The error for the (killed and reaped) agent, with its stderr.
    async fn into_error(
        self,
        config: &LocalAgentConfig,
        status: io::Result<ExitStatus>,
        stderr: Option<ChildStderr>,
    ) -> LocalAgentError {
        let socket = config.socket.clone();
        match self {
            NotListening::BadLine(line) => LocalAgentError::BadReadyLine { socket, line },
            NotListening::Exited => LocalAgentError::EarlyExit {
                socket,
                status: status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string()),
                stderr: read_all(stderr).await,
            },
            NotListening::TimedOut => LocalAgentError::NotReady {
                socket,
                timeout: config.ready_timeout,
                stderr: read_all(stderr).await,
            },
        }
    }
}

/// Reads the agent's stdout up to its ready line and returns where it waits
/// for the runner (for TCP, the address it bound).
async fn wait_listening(
    config: &LocalAgentConfig,
    stdout: &mut Option<StdoutLines>,
) -> Result<ProxySide, NotListening> {
    let socket = &config.socket;
    let first_line = async {
        let lines = stdout.as_mut()?;
        loop {
            match lines.next_line().await {
                Ok(Some(line)) if line.starts_with(READY_PREFIX) => return Some(line),
                Ok(Some(line)) => debug!(socket = %socket.display(), "agent: {line}"),
                _ => return None,
            }
        }
    };
    let line = match tokio::time::timeout(config.ready_timeout, first_line).await {
        Ok(Some(line)) => line,
        Ok(None) => return Err(NotListening::Exited),
        Err(_) => return Err(NotListening::TimedOut),
    };
    match &config.proxy {
        ProxySide::Tcp(_) => parse_ready_line(&line)
            .map(ProxySide::Tcp)
            .ok_or(NotListening::BadLine(line)),
        ProxySide::Unix(path) => Ok(ProxySide::Unix(path.clone())),
    }
}

/// Keeps draining both pipes for the agent's whole life (it treats a closed
/// stdout as "my session is gone" and exits), logging them and keeping the
/// last lines of stderr for the exit report.
fn drain_output(
    socket: &Path,
    stdout: Option<StdoutLines>,
    stderr: Option<ChildStderr>,
) -> (Vec<JoinHandle<()>>, Arc<Mutex<VecDeque<String>>>) {
    let mut output = Vec::new();
    if let Some(mut lines) = stdout {
        let s = socket.to_owned();
        output.push(tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                debug!(socket = %s.display(), "agent: {line}");
            }
        }));
    }
    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
    if let Some(err) = stderr {
        let s = socket.to_owned();
        let tail = tail.clone();
        output.push(tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                debug!(socket = %s.display(), "agent: {line}");
                let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }));
    }
    (output, tail)
}

/// Lines of stderr kept for the exit report.
const STDERR_TAIL: usize = 5;

/// What the runner asks of a running agent.
#[derive(Debug)]
enum Ctl {
    Term,
    Kill,
}

/// A running `dra-e2e proxy-agent` subprocess.
///
/// A task owns the child process and notices its exit the moment it happens:
/// [`LocalAgent::unexpected_exit`] resolves when the agent ends without the
/// runner asking. It dies with the runner (`PR_SET_PDEATHSIG`).
/// [`LocalAgent::stop`] ends it cleanly; dropping it kills it and removes the
/// socket file.
#[derive(Debug)]
pub struct LocalAgent {
    pid: u32,
    socket: PathBuf,
    proxy: ProxySide,
    stop_timeout: Duration,
    control: Option<mpsc::UnboundedSender<Ctl>>,
    exit: watch::Receiver<Option<AgentExit>>,
    reaper: Option<JoinHandle<()>>,
}

impl LocalAgent {
    /// Starts the agent and waits until it listens on both ends.
    pub async fn start(config: LocalAgentConfig) -> Result<LocalAgent, LocalAgentError> {
        let socket = config.socket.clone();
        let mut child = spawn_from_long_lived_thread(agent_command(&config))
            .await
            .map_err(|source| LocalAgentError::Spawn {
                program: config.program.clone(),
                socket: socket.clone(),
                source,
            })?;
        let pid = child.id().unwrap_or_default();
        let mut stdout = child.stdout.take().map(|s| BufReader::new(s).lines());
        let stderr = child.stderr.take();
        let proxy = match wait_listening(&config, &mut stdout).await {
            Ok(addr) => addr,
            Err(not_ready) => {
                // Make sure it is gone, then report what it said.
                let _ = child.start_kill();
                let status = child.wait().await;
                return Err(not_ready.into_error(&config, status, stderr).await);
            }
        };
        info!(socket = %socket.display(), %proxy, pid, "local proxy agent listening");

        let (output, tail) = drain_output(&socket, stdout, stderr);
        let (control, control_rx) = mpsc::unbounded_channel();
        let (exit_tx, exit) = watch::channel(None);
        let reaper = tokio::spawn(reap(
            child,
            pid,
            socket.clone(),
            control_rx,
            output,
            tail,
            exit_tx,
        ));
        Ok(LocalAgent {
            pid,
            socket,
            proxy,
            stop_timeout: config.stop_timeout,
            control: Some(control),
            exit,
            reaper: Some(reaper),
        })
    }

    /// Where the agent waits for the runner's connections.
    pub fn proxy(&self) -> &ProxySide {
        &self.proxy
    }

    /// The address the agent's TCP side listens on, if it has one.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match self.proxy {
            ProxySide::Tcp(addr) => Some(addr),
            ProxySide::Unix(_) => None,
        }
    }

    /// A transport that dials the agent's runner side.
    pub fn transport(&self) -> Arc<dyn Transport> {
        self.proxy.transport()
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// How the agent ended, once it has.
    pub fn exited(&self) -> Option<AgentExit> {
        self.exit.borrow().clone()
    }

    /// Resolves when the agent exits without the runner asking for it (a
    /// crash, a kill from outside); never resolves if the runner ends it.
    /// Independent of `self`, so a pool can watch it.
    pub fn unexpected_exit(&self) -> impl Future<Output = AgentExit> + Send + 'static {
        let mut rx = self.exit.clone();
        async move {
            match wait_exit(&mut rx).await {
                Some(exit) if !exit.requested => exit,
                _ => futures::future::pending().await,
            }
        }
    }

    /// TERM, wait, KILL if it lingers, then remove the socket file (a killed
    /// agent leaves it behind). An agent that already died is only cleaned up.
    pub async fn stop(mut self) -> Result<(), LocalAgentError> {
        let exit = self.end(Ctl::Term).await?;
        debug!(socket = %self.socket.display(), "local proxy agent: {exit}");
        remove_socket(&self.socket)?;
        match &self.proxy {
            ProxySide::Unix(path) => remove_socket(path),
            ProxySide::Tcp(_) => Ok(()),
        }
    }

    /// SIGKILL, as a crash would: the socket file stays behind.
    pub async fn kill(mut self) -> Result<ExitStatus, LocalAgentError> {
        let exit = self.end(Ctl::Kill).await?;
        exit.status.map_err(|e| LocalAgentError::Stop {
            socket: self.socket.clone(),
            source: io::Error::other(e),
        })
    }

    async fn end(&mut self, how: Ctl) -> Result<AgentExit, LocalAgentError> {
        let stop_err = |e: &str| LocalAgentError::Stop {
            socket: self.socket.clone(),
            source: io::Error::other(e.to_owned()),
        };
        let control = self
            .control
            .take()
            .ok_or_else(|| stop_err("already stopped"))?;
        let term = matches!(how, Ctl::Term);
        let _ = control.send(how);
        let mut rx = self.exit.clone();
        let mut exit = tokio::time::timeout(self.stop_timeout, wait_exit(&mut rx)).await;
        if exit.is_err() && term {
            warn!(socket = %self.socket.display(), timeout = ?self.stop_timeout, "agent ignored TERM; killing it");
            let _ = control.send(Ctl::Kill);
            exit = tokio::time::timeout(self.stop_timeout, wait_exit(&mut rx)).await;
        }
        if let Some(reaper) = self.reaper.take() {
            let _ = reaper.await;
        }
        match exit {
            Ok(Some(exit)) => Ok(exit),
            Ok(None) => Err(stop_err("the task watching the agent ended early")),
            Err(_) => Err(stop_err("the agent did not exit after SIGKILL")),
        }
    }
}

impl Drop for LocalAgent {
    fn drop(&mut self) {
        // Closing the control channel makes the reaper kill the agent.
        if self.control.take().is_some() {
            let _ = std::fs::remove_file(&self.socket);
            if let ProxySide::Unix(path) = &self.proxy {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

async fn wait_exit(rx: &mut watch::Receiver<Option<AgentExit>>) -> Option<AgentExit> {
    rx.wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|e| e.clone())
}

/// Owns the agent process until it exits, then publishes how it ended.
#[allow(clippy::too_many_arguments)]
async fn reap(
    mut child: Child,
    pid: u32,
    socket: PathBuf,
    mut control: mpsc::UnboundedReceiver<Ctl>,
    output: Vec<JoinHandle<()>>,
    tail: Arc<Mutex<VecDeque<String>>>,
    exit: watch::Sender<Option<AgentExit>>,
) {
    let mut requested = false;
    let mut control_open = true;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            ctl = control.recv(), if control_open => match ctl {
                Some(Ctl::Term) => {
                    requested = true;
                    // Our own child, not reaped yet: only this task waits
                    // for it.
                    let _ = dra_e2e_sys::kill(pid, dra_e2e_sys::Signal::Term);
                }
                Some(Ctl::Kill) => {
                    requested = true;
                    let _ = child.start_kill();
                }
                None => {
                    // The LocalAgent was dropped.
                    control_open = false;
                    requested = true;
                    let _ = child.start_kill();
                }
            },
        }
    };
    // The pipes close with the process; drain them so the report has its
    // last words.
    for task in output {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    let report = AgentExit {
        socket,
        pid,
        status: status.map_err(|e| e.to_string()),
        requested,
        stderr_tail: tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect(),
    };
    if requested {
        debug!("{report}");
    } else {
        warn!("{report}");
    }
    exit.send_replace(Some(report));
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
    fn agents_run_the_image_of_this_process_not_a_path() {
        let config = LocalAgentConfig::new("/tmp/x.sock").unwrap();
        assert_eq!(config.program, Path::new(SELF_EXE));
        assert!(config.arg0.is_some());
        let explicit = LocalAgentConfig::with_program("/opt/dra-e2e", "/tmp/x.sock");
        assert_eq!(explicit.program, Path::new("/opt/dra-e2e"));
        assert_eq!(explicit.arg0, None);
    }

    #[test]
    fn the_runner_side_is_a_private_socket_beside_the_kubelet_one() {
        let config = LocalAgentConfig::with_program("/opt/dra-e2e", "/c/n/0/plugins/d/dra.sock");
        let ProxySide::Unix(path) = &config.proxy else {
            panic!("{:?}", config.proxy);
        };
        assert_eq!(path.parent(), Some(Path::new("/c/n/0/plugins/d")));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(".proxy-"), "{name}");
        // Not longer than the longest socket name preflight allows for there.
        assert!(name.len() <= "dra-xxxxxxxx.sock".len(), "{name}");
        assert_ne!(
            runner_socket_for(Path::new("/d/a-reg.sock")),
            runner_socket_for(Path::new("/d/b-reg.sock"))
        );
        assert_eq!(
            runner_socket_for(Path::new("/d/a-reg.sock")),
            runner_socket_for(Path::new("/d/a-reg.sock"))
        );
        assert_eq!(
            config.proxy.endpoint_arg(),
            std::ffi::OsString::from(format!("unix://{}", path.display()))
        );
    }

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
