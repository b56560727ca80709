//! Only the runner's user gets into a local agent. Its kubelet socket and the
//! socket the runner's connections wait on live in a private directory, so a
//! process of another user cannot even connect; where it could (a directory
//! and sockets opened up on purpose here), the agent closes its connection
//! unused instead of pairing it. And the agent opens no TCP port at all, so
//! connecting to loopback finds nothing.
//!
//! The other user is a thread of this test that has dropped to `nobody`
//! (`dra_e2e::sys::drop_thread_to_user`): the kernel checks a path's
//! permissions and records a socket's peer credentials per thread, so to
//! the agent and the file system it is another user's process.

use std::io::Read as _;
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use super::support::*;
use dra_e2e::cluster::proxy::{LocalAgent, ProxySide};

const WAIT: Duration = Duration::from_secs(20);
/// `nobody` on Debian.
const NOBODY: u32 = 65534;

fn assert_root() {
    assert!(
        dra_e2e::sys::is_root(),
        "the isolation tests switch a thread to uid {NOBODY} and must run as root"
    );
}

/// What a process of another user got from a unix socket.
#[derive(Debug, PartialEq, Eq)]
enum Foreign {
    /// connect(2) failed with this errno.
    Refused(i32),
    /// Connected, then the other end closed without sending a byte.
    ClosedUnused,
    /// Connected and received bytes: it was paired with someone.
    GotData,
    Other(String),
}

/// A thread of its own running as `nobody` that connected (or failed to)
/// and now reads until the other end closes.
struct ForeignClient {
    /// Its end of the connection, when connect(2) succeeded: shut down to
    /// end its read when the agent never closes it.
    connected: Option<UnixStream>,
    /// What it got, once it ends.
    outcome: mpsc::Receiver<Foreign>,
}

impl ForeignClient {
    /// Starts a thread, drops it to uid/gid `nobody` for good, connects to
    /// `path`; returns once the connection is made or refused. A thread of
    /// its own, never one of tokio's pools that other work would reuse.
    fn connect(path: &Path) -> ForeignClient {
        let path = path.to_owned();
        let (connected_tx, connected_rx) = mpsc::channel();
        let (outcome_tx, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            let got = (|| {
                if let Err(e) = dra_e2e::sys::drop_thread_to_user(NOBODY, NOBODY) {
                    return Foreign::Other(format!("becoming nobody: {e}"));
                }
                let mut stream = match UnixStream::connect(&path) {
                    Ok(s) => s,
                    Err(e) => return Foreign::Refused(e.raw_os_error().unwrap_or_default()),
                };
                match stream.try_clone() {
                    Ok(end) => drop(connected_tx.send(end)),
                    Err(e) => return Foreign::Other(format!("cloning the stream: {e}")),
                }
                match stream.read(&mut [0u8; 1]) {
                    Ok(0) => Foreign::ClosedUnused,
                    Ok(_) => Foreign::GotData,
                    Err(e) => Foreign::Other(format!("reading: {e}")),
                }
            })();
            drop(connected_tx);
            let _ = outcome_tx.send(got);
        });
        // The stream once connected; nothing if the thread ended first.
        ForeignClient {
            connected: connected_rx.recv().ok(),
            outcome,
        }
    }

    fn connected(&self) -> bool {
        self.connected.is_some()
    }

    /// Waits for the thread to end (at most `WAIT`) and says what it got.
    async fn outcome(self) -> Foreign {
        let ForeignClient { connected, outcome } = self;
        let got = tokio::task::spawn_blocking(move || outcome.recv_timeout(WAIT))
            .await
            .unwrap();
        match got {
            Ok(got) => got,
            Err(_) => {
                // Still connected and waiting: not closed by the agent.
                if let Some(s) = connected {
                    let _ = s.shutdown(Shutdown::Both);
                }
                Foreign::Other(format!("still connected after {WAIT:?}"))
            }
        }
    }
}

/// Inodes of the sockets process `pid` holds.
fn socket_inodes(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect()
}

/// The agent's TCP sockets, listening or not, in its network namespace.
fn tcp_sockets_of(pid: u32) -> Vec<String> {
    let inodes = socket_inodes(pid);
    assert!(!inodes.is_empty(), "the agent holds its unix sockets");
    let mut found = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() > 9 && inodes.iter().any(|i| i == cols[9]) {
                found.push(format!("{table}: {line}"));
            }
        }
    }
    found
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_user_cannot_reach_a_local_agent_and_it_has_no_port() {
    init_logs();
    assert_root();
    let dir = tempfile::tempdir().unwrap();
    // The cluster directory's mode; the tests' temp dir has it too.
    chmod(dir.path(), 0o700);
    let (socket, plugin, _server) = served_locally(&dir).await;
    let agent = socket.local_agent().unwrap();
    let ProxySide::Unix(runner_side) = agent.proxy.clone() else {
        panic!("a local agent waits on a unix socket: {:?}", agent.proxy);
    };
    socket
        .pool()
        .wait_for(|s| s.waiting == 10, WAIT)
        .await
        .unwrap();

    assert_eq!(tcp_sockets_of(agent.pid), Vec::<String>::new());
    for path in [socket.path(), runner_side.as_path()] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        let client = ForeignClient::connect(path);
        assert!(!client.connected(), "{} let nobody in", path.display());
        assert_eq!(
            client.outcome().await,
            Foreign::Refused(libc::EACCES),
            "{}",
            path.display()
        );
    }
    // The runner's own kubelet side still gets through.
    let info = kubelet_get_info(socket.path()).await.unwrap();
    assert_eq!(info.name, DRIVER);
    assert_eq!(plugin.calls(), 1);
    socket.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_connection_is_closed_unused_even_where_it_can_connect() {
    init_logs();
    assert_root();
    let dir = tempfile::tempdir().unwrap();
    let agent = LocalAgent::start(agent_config(&dir, "reg.sock"))
        .await
        .unwrap();
    let runner_side = runner_side(&agent);
    // Opened up on purpose: only the agent's own check is left.
    chmod(dir.path(), 0o711);
    chmod(agent.socket(), 0o666);
    chmod(&runner_side, 0o666);

    // Queued on the runner's side before any of the runner's connections,
    // as an intruder hoping to be paired with the next kubelet would be.
    let at_runner_side = ForeignClient::connect(&runner_side);
    assert!(at_runner_side.connected());
    let (pool, plugin, _server) = serve_pooled(&agent);
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();
    // An intruder posing as a kubelet.
    let at_kubelet_side = ForeignClient::connect(agent.socket());
    assert!(at_kubelet_side.connected());
    assert_eq!(at_kubelet_side.outcome().await, Foreign::ClosedUnused);

    // The next kubelet is paired with the runner's connection, not the
    // intruder's at the head of the queue, which is closed.
    let info = kubelet_get_info(agent.socket()).await.unwrap();
    assert_eq!(info.name, DRIVER);
    assert_eq!(at_runner_side.outcome().await, Foreign::ClosedUnused);
    assert_eq!(plugin.calls(), 1);
    let stats = pool.stats();
    assert_eq!(stats.handed_out, 1, "{stats:?}");

    pool.shutdown().await;
    agent.stop().await.unwrap();
}
