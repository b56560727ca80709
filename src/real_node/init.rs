//! `dra-e2e node-init`: process 1 of a real node's PID namespace.
//!
//! A real node's containerd, kubelet, shims and containers all live in one PID
//! namespace and one mount namespace made for that node. Process 1 of the PID
//! namespace is this program. It makes the node's private mounts (so the
//! kubelet's, containerd's and CNI's hard-coded host paths land in memory
//! private to the node), starts the node's daemons in order, reaps orphans,
//! and ends the node when asked (SIGTERM/SIGINT) or when a daemon dies. When
//! it exits, the kernel kills every process left in the namespace, containers
//! included, and drops the mounts with the namespace: nothing can outlive the
//! node.
use std::ffi::CString;
use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What process 1 does, written as JSON by the runner.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InitPlan {
    /// Host directories the node sees with a private writable layer on top
    /// (mounted first, so `tmpfs` and `make_dirs` may name paths inside).
    pub overlays: Vec<Overlay>,
    /// Directories that get a fresh tmpfs, in order (a missing mount point is
    /// made first), then directories made inside them.
    pub tmpfs: Vec<PathBuf>,
    pub make_dirs: Vec<PathBuf>,
    /// Make every mount of the node's namespace shared, as a standard node's
    /// root is (kind's entrypoint runs `mount --make-rshared /`): the kubelet
    /// refuses `mountPropagation: Bidirectional` and `HostToContainer` from a
    /// private mount. The namespace's mounts were made private copies of the
    /// host's first, so the new peer groups stay inside the node.
    pub shared_mounts: bool,
    /// Run in order; a daemon must be ready before the next step starts.
    pub steps: Vec<Step>,
    /// How long daemons get to exit after SIGTERM when the node stops.
    pub stop_grace_secs: u64,
    /// Put in front of `PATH` (containerd finds its shim there).
    pub path_prepend: Vec<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum Step {
    /// A long-running process; the node ends when it exits. Ready once
    /// `ready_socket` accepts connections (when given).
    Daemon {
        name: String,
        argv: Vec<String>,
        log: PathBuf,
        ready_socket: Option<PathBuf>,
        ready_timeout_secs: u64,
    },
    /// A command that must succeed before the next step.
    Run {
        name: String,
        argv: Vec<String>,
        log: PathBuf,
    },
}

/// `target` (a host directory) seen through an overlay whose upper layer is
/// a tmpfs mounted at `layer`: the node reads the host's files and writes
/// only to memory of its own. For `/etc`, whose subdirectories such as
/// `/etc/cdi` must be private to each node without being made on the host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Overlay {
    pub target: PathBuf,
    /// An empty directory outside `target`; the tmpfs mounted on it holds the
    /// overlay's `upper` and `work` directories.
    pub layer: PathBuf,
}

/// Entry point of the `node-init` subcommand: `node-init <plan.json>`.
pub fn cli_main(args: Vec<std::ffi::OsString>) -> anyhow::Result<i32> {
    let [plan] = args.as_slice() else {
        anyhow::bail!("usage: dra-e2e node-init PLAN.json (started by the runner for a real node)");
    };
    let text = std::fs::read_to_string(plan)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", Path::new(plan).display()))?;
    let plan: InitPlan = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("parsing {}: {e}", Path::new(plan).display()))?;
    Ok(run(&plan))
}

/// A line in the node's `node-init.log` (this process's stderr, where the
/// subscriber `dra-e2e node-init` sets up writes).
fn say(msg: impl std::fmt::Display) {
    tracing::info!("{msg}");
}

struct Daemon {
    name: String,
    pid: libc::pid_t,
}

fn run(plan: &InitPlan) -> i32 {
    // Signals are taken synchronously with sigtimedwait; blocked before any
    // child exists so none is lost, and unblocked again in every child.
    let mask = signal_mask();
    // SAFETY: sigprocmask with a valid set.
    unsafe { libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()) };

    if !plan.path_prepend.is_empty() {
        let mut dirs = plan.path_prepend.clone();
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        if let Ok(path) = std::env::join_paths(dirs) {
            // SAFETY: process 1 has no other threads yet.
            unsafe { std::env::set_var("PATH", path) };
        }
    }
    if let Err(e) = make_mounts(plan) {
        say(format!("preparing the node's mounts: {e}"));
        return 1;
    }
    let mut daemons: Vec<Daemon> = Vec::new();
    for step in &plan.steps {
        let result = match step {
            Step::Daemon {
                name,
                argv,
                log,
                ready_socket,
                ready_timeout_secs,
            } => start_daemon(name, argv, log).and_then(|pid| {
                daemons.push(Daemon {
                    name: name.clone(),
                    pid,
                });
                match ready_socket {
                    Some(socket) => {
                        wait_socket(name, pid, socket, Duration::from_secs(*ready_timeout_secs))
                    }
                    None => Ok(()),
                }
            }),
            Step::Run { name, argv, log } => run_to_end(name, argv, log),
        };
        if let Err(e) = result {
            say(format!("node start failed: {e}"));
            stop(&daemons, Duration::from_secs(plan.stop_grace_secs));
            return 1;
        }
    }
    say("node started");
    supervise(&daemons, &mask, Duration::from_secs(plan.stop_grace_secs))
}

fn signal_mask() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGCHLD] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn make_mounts(plan: &InitPlan) -> Result<(), String> {
    let mkdir = |dir: &Path| {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))
    };
    for o in &plan.overlays {
        mkdir(&o.layer)?;
        mount_tmpfs(&o.layer)?;
        let (upper, work) = (o.layer.join("upper"), o.layer.join("work"));
        mkdir(&upper)?;
        mkdir(&work)?;
        mount(
            "overlay",
            &o.target,
            "overlay",
            0,
            &overlay_options(&o.target, &upper, &work)?,
        )?;
    }
    for dir in &plan.tmpfs {
        mkdir(dir)?;
        mount_tmpfs(dir)?;
    }
    for dir in &plan.make_dirs {
        mkdir(dir)?;
    }
    if plan.shared_mounts {
        // SAFETY: a null source, type and data are allowed for a
        // propagation change; the target is a valid C string.
        let rc = unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_SHARED | libc::MS_REC,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "making the node's mounts shared: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// overlayfs's mount options; its option syntax has no escaping, so paths
/// with `,` or `:` (or `=`, unsafe in older kernels) are refused.
fn overlay_options(lower: &Path, upper: &Path, work: &Path) -> Result<String, String> {
    for p in [lower, upper, work] {
        if p.to_string_lossy().contains([',', ':', '=']) {
            return Err(format!(
                "overlay path {} contains `,`, `:` or `=`, which overlayfs options cannot carry",
                p.display()
            ));
        }
    }
    Ok(format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    ))
}

fn mount_tmpfs(dir: &Path) -> Result<(), String> {
    mount(
        "tmpfs",
        dir,
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=0755",
    )
}

fn mount(
    source: &str,
    dir: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> Result<(), String> {
    let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
    let target = c(&dir.to_string_lossy())?;
    let (source_c, fstype_c, data_c) = (c(source)?, c(fstype)?, c(data)?);
    // SAFETY: all pointers are valid NUL-terminated strings for the call.
    let rc = unsafe {
        libc::mount(
            source_c.as_ptr(),
            target.as_ptr(),
            fstype_c.as_ptr(),
            flags,
            data_c.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "mounting {fstype} on {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn command(argv: &[String], log: &Path) -> Result<Command, String> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| "empty command line".to_owned())?;
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Own group: the runner's signals to process 1's group stay with it.
        .process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    Ok(cmd)
}

fn start_daemon(name: &str, argv: &[String], log: &Path) -> Result<libc::pid_t, String> {
    say(format!("starting {name}: {}", argv.join(" ")));
    let child = command(argv, log)?
        .spawn()
        .map_err(|e| format!("starting {name} ({}): {e}", argv[0]))?;
    // Reaped by `supervise` with waitpid(-1), never through the handle.
    let pid = child.id() as libc::pid_t;
    std::mem::forget(child);
    Ok(pid)
}

/// Reaps `pid` if it has exited; any other child is reaped on the way.
fn exited(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid status pointer.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (rc == pid).then_some(status)
}

fn describe(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status}")
    }
}

fn wait_socket(name: &str, pid: libc::pid_t, socket: &Path, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            say(format!("{name} is ready"));
            return Ok(());
        }
        if let Some(status) = exited(pid) {
            return Err(format!("{name} exited ({})", describe(status)));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{name} did not accept connections on {} within {limit:?}",
                socket.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_to_end(name: &str, argv: &[String], log: &Path) -> Result<(), String> {
    say(format!("running {name}: {}", argv.join(" ")));
    let status = command(argv, log)?
        .status()
        .map_err(|e| format!("running {name} ({}): {e}", argv[0]))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status}); see {}", log.display()))
    }
}

/// Reaps every orphan until a signal asks the node to stop or a daemon dies.
fn supervise(daemons: &[Daemon], mask: &libc::sigset_t, grace: Duration) -> i32 {
    loop {
        let timeout = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        // SAFETY: the mask is initialised; a null siginfo pointer is allowed.
        let sig = unsafe { libc::sigtimedwait(mask, std::ptr::null_mut(), &timeout) };
        if sig == libc::SIGTERM || sig == libc::SIGINT {
            say("stopping the node");
            stop(daemons, grace);
            return 0;
        }
        // SIGCHLD or the periodic wake-up: reap whatever has exited.
        loop {
            let mut status = 0;
            // SAFETY: waitpid on any child with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            if let Some(d) = daemons.iter().find(|d| d.pid == pid) {
                say(format!(
                    "{} exited ({}); the node stops",
                    d.name,
                    describe(status)
                ));
                let others: Vec<&Daemon> = daemons.iter().filter(|o| o.pid != pid).collect();
                stop_refs(&others, grace);
                return 2;
            }
        }
    }
}

fn stop(daemons: &[Daemon], grace: Duration) {
    stop_refs(&daemons.iter().collect::<Vec<_>>(), grace);
}

/// SIGTERM to the daemons, last started first, each given `grace` to exit.
fn stop_refs(daemons: &[&Daemon], grace: Duration) {
    for d in daemons.iter().rev() {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(d.pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        loop {
            if exited(d.pid).is_some() {
                break;
            }
            if Instant::now() >= deadline {
                say(format!(
                    "{} did not stop within {grace:?}; killing it",
                    d.name
                ));
                // SAFETY: as above.
                unsafe { libc::kill(d.pid, libc::SIGKILL) };
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_round_trip_through_json() {
        let plan = InitPlan {
            overlays: vec![Overlay {
                target: "/etc".into(),
                layer: "/n/etc-layer".into(),
            }],
            tmpfs: vec!["/run".into(), "/etc/cdi".into()],
            make_dirs: vec!["/run/containerd".into()],
            shared_mounts: true,
            steps: vec![
                Step::Daemon {
                    name: "containerd".into(),
                    argv: vec!["/bin/containerd".into()],
                    log: "/tmp/c.log".into(),
                    ready_socket: Some("/run/containerd/containerd.sock".into()),
                    ready_timeout_secs: 30,
                },
                Step::Run {
                    name: "import".into(),
                    argv: vec!["ctr".into()],
                    log: "/tmp/i.log".into(),
                },
            ],
            stop_grace_secs: 10,
            path_prepend: vec!["/bin".into()],
        };
        let text = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<InitPlan>(&text).unwrap(), plan);
    }

    #[test]
    fn overlay_options_name_the_layers_and_refuse_what_they_cannot_carry() {
        let o = overlay_options(
            Path::new("/etc"),
            Path::new("/n/l/upper"),
            Path::new("/n/l/work"),
        )
        .unwrap();
        assert_eq!(o, "lowerdir=/etc,upperdir=/n/l/upper,workdir=/n/l/work");
        for bad in ["/n/a,b", "/n/a:b", "/n/a=b"] {
            let e =
                overlay_options(Path::new("/etc"), Path::new(bad), Path::new("/w")).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn wait_statuses_read_as_words() {
        assert_eq!(describe(3 << 8), "exit status 3");
        assert_eq!(describe(9), "killed by signal 9");
    }
}
