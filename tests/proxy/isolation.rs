//! Only the runner's user gets into a local agent. Its kubelet socket and the
//! socket the runner's connections wait on live in a private directory, so a
//! process of another user cannot even connect; where it could (a directory
//! and sockets opened up on purpose here), the agent closes its connection
//! unused instead of pairing it. And the agent opens no TCP port at all, so
//! connecting to loopback finds nothing.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use crate::support::*;
use dra_e2e::proxy::{LocalAgent, ProxySide};

const WAIT: Duration = Duration::from_secs(20);
/// `nobody` on Debian.
const NOBODY: libc::uid_t = 65534;

fn assert_root() {
    assert_eq!(
        // SAFETY: no preconditions.
        unsafe { libc::geteuid() },
        0,
        "the isolation tests switch a child to uid {NOBODY} and must run as root"
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

/// A forked child running as `nobody` that connected (or failed to) and now
/// reads until the other end closes.
struct ForeignClient {
    pid: libc::pid_t,
    /// Whether connect(2) succeeded.
    connected: bool,
}

impl ForeignClient {
    /// Forks, drops to uid/gid `nobody`, connects to `path`; returns once the
    /// connection is made or refused.
    fn connect(path: &Path) -> ForeignClient {
        // Everything the child needs is prepared before fork: after it, in a
        // multi-threaded process, only async-signal-safe calls are allowed.
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = CString::new(path.as_os_str().as_bytes()).unwrap();
        let bytes = bytes.as_bytes_with_nul();
        assert!(bytes.len() <= addr.sun_path.len(), "{}", path.display());
        for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let mut pipe = [0; 2];
        assert_eq!(
            unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) },
            0
        );
        let (rx, tx) = (pipe[0], pipe[1]);
        // SAFETY: the child only makes raw system calls and ends with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // Keep no copy of the test process's other descriptors (other
                // tests' connections), which would hold them open: only the
                // pipe, as fd 3.
                if libc::dup2(tx, 3) != 3 {
                    libc::_exit(92);
                }
                let tx = 3;
                libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0
                {
                    libc::_exit(90);
                }
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if fd < 0 {
                    libc::_exit(91);
                }
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                    libc::_exit(100 + *libc::__errno_location());
                }
                libc::write(tx, b"c".as_ptr().cast(), 1);
                libc::close(tx);
                let mut buf = [0u8; 1];
                let n = libc::read(fd, buf.as_mut_ptr().cast(), 1);
                libc::_exit(match n {
                    0 => 0,
                    n if n > 0 => 1,
                    _ => 2,
                });
            }
        }
        unsafe { libc::close(tx) };
        // One byte once connected; end of file if the child exited first.
        let mut byte = [0u8; 1];
        let n = unsafe { libc::read(rx, byte.as_mut_ptr().cast(), 1) };
        unsafe { libc::close(rx) };
        ForeignClient {
            pid,
            connected: n == 1,
        }
    }

    /// Waits for the child to end (at most `WAIT`) and says what it got.
    async fn outcome(self) -> Foreign {
        let pid = self.pid;
        let wait = tokio::task::spawn_blocking(move || {
            let mut status = 0;
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            (r, status)
        });
        let (r, status) = match tokio::time::timeout(WAIT, wait).await {
            Ok(joined) => joined.unwrap(),
            Err(_) => {
                // Still connected and waiting: not closed by the agent.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return Foreign::Other(format!("still connected after {WAIT:?}"));
            }
        };
        assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
        if !libc::WIFEXITED(status) {
            return Foreign::Other(format!("wait status {status}"));
        }
        match libc::WEXITSTATUS(status) {
            0 => Foreign::ClosedUnused,
            1 => Foreign::GotData,
            code if code > 100 => Foreign::Refused(code - 100),
            code => Foreign::Other(format!("exit {code}")),
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
        assert!(!client.connected, "{} let nobody in", path.display());
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
    assert!(at_runner_side.connected);
    let (pool, plugin, _server) = serve_pooled(&agent);
    pool.wait_for(|s| s.waiting == 10, WAIT).await.unwrap();
    // An intruder posing as a kubelet.
    let at_kubelet_side = ForeignClient::connect(agent.socket());
    assert!(at_kubelet_side.connected);
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
