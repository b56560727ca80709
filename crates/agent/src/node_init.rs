//! `dra-e2e node-init`: process 1 of a real node's PID namespace.
//!
//! A real node's containerd, kubelet, shims and containers all live in one PID
//! namespace and one mount namespace made for that node. Process 1 of the PID
//! namespace is this program. It makes the node's private mounts (so the
//! kubelet's, containerd's and CNI's hard-coded host paths land in memory
//! private to the node), starts the node's daemons in order, reaps orphans,
//! reboots the node when asked (SIGUSR1, see [`power_cycle`]), stops, starts
//! or restarts one daemon when asked (SIGUSR2, see [`DaemonRequest`]) and ends the
//! node when asked (SIGTERM/SIGINT) or when a daemon dies. When
//! it exits, the kernel kills every process left in the namespace, containers
//! included, and drops the mounts with the namespace: nothing can outlive the
//! node.
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use dra_e2e_sys::{self as sys, Signal, SignalSet};
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
    /// Of `tmpfs`, those a reboot clears (`/run`, as on a real machine);
    /// the others (`/var/lib`, `/var/log`) and the overlays are kept.
    #[serde(default)]
    pub volatile: Vec<PathBuf>,
    /// A file bound over `/proc/sys/kernel/random/boot_id`, given a new ID at
    /// every boot: the kubelet reports it as the Node's `bootID` and tells a
    /// reboot by its change, as on a real machine.
    #[serde(default)]
    pub boot_id: Option<PathBuf>,
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
    /// Where the runner leaves a [`DaemonRequest`] (this path) before it
    /// sends SIGUSR2, and where process 1 answers (this path with
    /// `.reply` appended): how a scenario stops, starts or restarts one
    /// daemon of the node (the kubelet, containerd) without a reboot.
    #[serde(default)]
    pub control: Option<PathBuf>,
}

/// What the runner asks of one daemon of the node.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DaemonOp {
    Stop,
    Start,
    Restart,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DaemonRequest {
    /// Echoed in the reply, so that an answer to an earlier request is
    /// never taken for this one's.
    pub id: u64,
    pub op: DaemonOp,
    /// A daemon step's name in the plan.
    pub daemon: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DaemonReply {
    pub id: u64,
    /// The daemon's pid after the request (none when stopped), or why the
    /// request failed.
    pub result: Result<Option<u32>, String>,
}

/// Where process 1 answers a request left at `control`.
pub fn reply_path(control: &Path) -> PathBuf {
    let mut p = control.as_os_str().to_owned();
    p.push(".reply");
    PathBuf::from(p)
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

/// The `node-init` subcommand's arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node's plan (JSON), written by the runner.
    #[arg(value_name = "PLAN.json")]
    pub plan: PathBuf,
}

/// Reads the plan and runs the node; returns the exit code.
pub fn main(args: &Args) -> anyhow::Result<i32> {
    let plan = &args.plan;
    let text = std::fs::read_to_string(plan)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", plan.display()))?;
    let plan: InitPlan = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("parsing {}: {e}", plan.display()))?;
    Ok(run(&plan))
}

/// A line in the node's `node-init.log` (this process's stderr, where the
/// subscriber `dra-e2e node-init` sets up writes).
fn say(msg: impl std::fmt::Display) {
    tracing::info!("{msg}");
}

struct Daemon {
    name: String,
    pid: u32,
}

/// The `PATH` of the node's processes: the plan's directories in front of
/// this process's own (`None`: this process's, unchanged).
fn child_path(plan: &InitPlan) -> Option<OsString> {
    if plan.path_prepend.is_empty() {
        return None;
    }
    let mut dirs = plan.path_prepend.clone();
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).ok()
}

fn run(plan: &InitPlan) -> i32 {
    // Signals are taken synchronously with sigtimedwait; blocked before any
    // child exists so none is lost, and unblocked again in every child.
    let signals = match sys::block_signals(&[
        Signal::Term,
        Signal::Int,
        Signal::Child,
        Signal::Usr1,
        Signal::Usr2,
    ]) {
        Ok(s) => s,
        Err(e) => {
            say(format!("blocking the signals process 1 takes: {e}"));
            return 1;
        }
    };
    if let Err(e) = make_mounts(plan).and_then(|()| new_boot_id(plan, true)) {
        say(format!("preparing the node's mounts: {e}"));
        return 1;
    }
    let grace = Duration::from_secs(plan.stop_grace_secs);
    loop {
        let mut daemons = match boot(plan) {
            Ok(d) => d,
            Err(code) => return code,
        };
        say("node started");
        match supervise(plan, &mut daemons, &signals, grace) {
            Ended::Stopped(code) => return code,
            Ended::RebootAsked => {
                say("rebooting the node");
                stop(&daemons, grace);
                if let Err(e) = power_cycle(plan) {
                    say(format!("rebooting the node failed: {e}"));
                    return 1;
                }
            }
        }
    }
}

/// Starts the plan's steps in order; on a failure stops what started and
/// gives the exit code.
fn boot(plan: &InitPlan) -> Result<Vec<Daemon>, i32> {
    let path = child_path(plan);
    let path = path.as_deref();
    let mut daemons: Vec<Daemon> = Vec::new();
    for step in &plan.steps {
        let result = match step {
            Step::Daemon { .. } => start_ready(step, path).map(|d| daemons.push(d)),
            Step::Run { name, argv, log } => run_to_end(name, argv, log, path),
        };
        if let Err(e) = result {
            say(format!("node start failed: {e}"));
            stop(&daemons, Duration::from_secs(plan.stop_grace_secs));
            return Err(1);
        }
    }
    Ok(daemons)
}

/// Starts a daemon step and waits until it is ready (its socket, when it
/// has one).
fn start_ready(step: &Step, path: Option<&std::ffi::OsStr>) -> Result<Daemon, String> {
    let Step::Daemon {
        name,
        argv,
        log,
        ready_socket,
        ready_timeout_secs,
    } = step
    else {
        return Err("not a daemon".into());
    };
    let pid = start_daemon(name, argv, log, path)?;
    if let Some(socket) = ready_socket {
        wait_socket(name, pid, socket, Duration::from_secs(*ready_timeout_secs))?;
    }
    Ok(Daemon {
        name: name.clone(),
        pid,
    })
}

/// Carries out the runner's request left at the plan's `control` path and
/// answers it. A stopped daemon is no longer supervised: its end does not
/// end the node.
fn control(plan: &InitPlan, daemons: &mut Vec<Daemon>, grace: Duration) {
    let Some(control) = &plan.control else {
        say("SIGUSR2 without a control path in the plan; ignored");
        return;
    };
    let request: DaemonRequest = match std::fs::read(control)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            say(format!("reading the request at {}: {e}", control.display()));
            return;
        }
    };
    let result = carry_out(plan, daemons, &request, grace);
    match &result {
        Ok(pid) => say(format!(
            "{:?} {}: done (pid {pid:?})",
            request.op, request.daemon
        )),
        Err(e) => say(format!("{:?} {}: {e}", request.op, request.daemon)),
    }
    let reply = DaemonReply {
        id: request.id,
        result,
    };
    let path = reply_path(control);
    let tmp = path.with_extension("tmp");
    let written = serde_json::to_vec(&reply)
        .map_err(|e| e.to_string())
        .and_then(|b| std::fs::write(&tmp, b).map_err(|e| e.to_string()))
        .and_then(|()| std::fs::rename(&tmp, &path).map_err(|e| e.to_string()));
    if let Err(e) = written {
        say(format!("answering at {}: {e}", path.display()));
    }
}

fn carry_out(
    plan: &InitPlan,
    daemons: &mut Vec<Daemon>,
    request: &DaemonRequest,
    grace: Duration,
) -> Result<Option<u32>, String> {
    let step = plan
        .steps
        .iter()
        .find(|s| matches!(s, Step::Daemon { name, .. } if *name == request.daemon))
        .ok_or_else(|| format!("the node has no daemon {:?}", request.daemon))?;
    let running = daemons.iter().position(|d| d.name == request.daemon);
    if matches!(request.op, DaemonOp::Stop | DaemonOp::Restart)
        && let Some(i) = running
    {
        let d = daemons.remove(i);
        stop_refs(&[&d], grace);
    }
    match request.op {
        DaemonOp::Stop => Ok(None),
        DaemonOp::Start if running.is_some() => Err(format!("{} already runs", request.daemon)),
        DaemonOp::Start | DaemonOp::Restart => {
            let d = start_ready(step, child_path(plan).as_deref())?;
            let pid = d.pid;
            daemons.push(d);
            Ok(Some(pid))
        }
    }
}

/// What a real machine's reboot does to the node, short of the kernel: every
/// process ends (containers included, with no chance to clean up), every
/// mount made at run time goes (container root filesystems, volumes, network
/// namespace pins), `/run` starts empty, and the boot ID changes; `/var/lib`
/// (the kubelet's checkpoints, containerd's metadata), `/var/log` and `/etc`
/// are kept. The daemons' steps then run again as at the first boot. This is
/// the situation of kubernetes#141433: a driver whose checkpoint says a claim
/// is prepared while the CDI spec it wrote below `/run` is gone.
fn power_cycle(plan: &InitPlan) -> Result<(), String> {
    kill_all_others(Duration::from_secs(30))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
    let kept: Vec<&PathBuf> = plan
        .tmpfs
        .iter()
        .filter(|t| !plan.volatile.contains(t))
        .collect();
    let mut below_kept: Vec<PathBuf> = mount_points(&mounts)
        .into_iter()
        .filter(|m| kept.iter().any(|k| m.starts_with(k) && m != *k))
        .collect();
    // Deepest first; a mount already gone with its parent is no error.
    below_kept.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    for m in &below_kept {
        let _ = unmount_detached(m);
    }
    for v in &plan.volatile {
        unmount_detached(v)?;
        mount_tmpfs(v)?;
    }
    for d in plan
        .make_dirs
        .iter()
        .filter(|d| plan.volatile.iter().any(|v| d.starts_with(v)))
    {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    if plan.shared_mounts {
        make_shared()?;
    }
    new_boot_id(plan, false)
}

/// SIGKILL to every process of the node's PID namespace but this one, then
/// reaps them all (they are this process's children or orphans by now).
fn kill_all_others(limit: Duration) -> Result<(), String> {
    // From process 1 of a PID namespace, exactly the other processes of
    // that namespace. None left (ESRCH) is no error.
    let _ = sys::kill_all_others(Signal::Kill);
    let deadline = Instant::now() + limit;
    loop {
        match sys::try_wait_any() {
            // ECHILD: nothing is left.
            Err(_) => return Ok(()),
            Ok(Some(_)) => {}
            Ok(None) => {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "processes of the node still run {limit:?} after SIGKILL"
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Mount points in `/proc/self/mountinfo` text (field 5, octal escapes
/// such as `\040` for a space undone).
fn mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_octal(p)))
        .collect()
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unmount_detached(dir: &Path) -> Result<(), String> {
    sys::unmount_detached(dir).map_err(|e| format!("unmounting {}: {e}", dir.display()))
}

/// Writes a fresh random ID into the plan's boot ID file; at the first boot
/// also binds that file over the kernel's.
fn new_boot_id(plan: &InitPlan, first: bool) -> Result<(), String> {
    let Some(file) = &plan.boot_id else {
        return Ok(());
    };
    let id = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map_err(|e| format!("reading a random ID: {e}"))?;
    // Written in place: the bind mount holds this inode.
    std::fs::write(file, id.trim()).map_err(|e| format!("writing {}: {e}", file.display()))?;
    if first {
        sys::mount_bind(file, Path::new(KERNEL_BOOT_ID))
            .map_err(|e| format!("binding {} over {KERNEL_BOOT_ID}: {e}", file.display()))?;
    }
    Ok(())
}

const KERNEL_BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

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
        sys::mount_overlay(&o.target, &overlay_options(&o.target, &upper, &work)?)
            .map_err(|e| format!("mounting overlay on {}: {e}", o.target.display()))?;
    }
    for dir in &plan.tmpfs {
        mkdir(dir)?;
        mount_tmpfs(dir)?;
    }
    for dir in &plan.make_dirs {
        mkdir(dir)?;
    }
    if plan.shared_mounts {
        make_shared()?;
    }
    Ok(())
}

/// Makes every mount of the namespace shared (see `InitPlan::shared_mounts`).
fn make_shared() -> Result<(), String> {
    sys::make_shared_recursive(Path::new("/"))
        .map_err(|e| format!("making the node's mounts shared: {e}"))
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
    sys::mount_tmpfs(dir, "mode=0755")
        .map_err(|e| format!("mounting tmpfs on {}: {e}", dir.display()))
}

/// `argv` started as a daemon of the node: output appended to `log`, in a
/// process group of its own, with no signal blocked and `PATH` set to
/// `path` when given.
fn command(argv: &[String], log: &Path, path: Option<&std::ffi::OsStr>) -> Result<Command, String> {
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
    if let Some(path) = path {
        // Also where `program` itself is looked up.
        cmd.env("PATH", path);
    }
    sys::unblock_signals_on_exec(&mut cmd);
    Ok(cmd)
}

fn start_daemon(
    name: &str,
    argv: &[String],
    log: &Path,
    path: Option<&std::ffi::OsStr>,
) -> Result<u32, String> {
    say(format!("starting {name}: {}", argv.join(" ")));
    let child = command(argv, log, path)?
        .spawn()
        .map_err(|e| format!("starting {name} ({}): {e}", argv[0]))?;
    // Reaped by `supervise` with waitpid(-1), never through the handle.
    let pid = child.id();
    std::mem::forget(child);
    Ok(pid)
}

/// Reaps `pid` if it has exited.
fn exited(pid: u32) -> Option<ExitStatus> {
    sys::try_wait(pid).ok().flatten()
}

fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        format!("exit status {code}")
    } else if let Some(signal) = status.signal() {
        format!("killed by signal {signal}")
    } else {
        format!("wait status {}", status.into_raw())
    }
}

fn wait_socket(name: &str, pid: u32, socket: &Path, limit: Duration) -> Result<(), String> {
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

fn run_to_end(
    name: &str,
    argv: &[String],
    log: &Path,
    path: Option<&std::ffi::OsStr>,
) -> Result<(), String> {
    say(format!("running {name}: {}", argv.join(" ")));
    let status = command(argv, log, path)?
        .status()
        .map_err(|e| format!("running {name} ({}): {e}", argv[0]))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status}); see {}", log.display()))
    }
}

/// How supervising a boot ended.
enum Ended {
    /// The node ends with this exit code (asked to, or a daemon died).
    Stopped(i32),
    /// SIGUSR1: the runner asks for a reboot.
    RebootAsked,
}

/// Reaps every orphan until a signal asks the node to stop or reboot, or a
/// daemon dies.
fn supervise(
    plan: &InitPlan,
    daemons: &mut Vec<Daemon>,
    signals: &SignalSet,
    grace: Duration,
) -> Ended {
    loop {
        match signals.wait(Duration::from_secs(1)) {
            Some(Signal::Term | Signal::Int) => {
                say("stopping the node");
                stop(daemons, grace);
                return Ended::Stopped(0);
            }
            Some(Signal::Usr1) => return Ended::RebootAsked,
            Some(Signal::Usr2) => control(plan, daemons, grace),
            _ => {}
        }
        // SIGCHLD or the periodic wake-up: reap whatever has exited.
        while let Ok(Some((pid, status))) = sys::try_wait_any() {
            if let Some(d) = daemons.iter().find(|d| d.pid == pid) {
                say(format!(
                    "{} exited ({}); the node stops",
                    d.name,
                    describe(status)
                ));
                let others: Vec<&Daemon> = daemons.iter().filter(|o| o.pid != pid).collect();
                stop_refs(&others, grace);
                return Ended::Stopped(2);
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
        let _ = sys::kill(d.pid, Signal::Term);
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
                let _ = sys::kill(d.pid, Signal::Kill);
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
            volatile: vec!["/run".into()],
            boot_id: Some("/n/boot_id".into()),
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
            control: Some("/tmp/node/control".into()),
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
    fn mount_points_are_read_from_mountinfo_with_escapes_undone() {
        let info = "36 35 98:0 / /run rw,nosuid - tmpfs tmpfs rw\n\
                    37 36 0:5 / /var/lib/kubelet/pods/a\\040b/volumes rw - tmpfs tmpfs rw\n\
                    38 36 0:6 / /odd\\134x rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mount_points(info),
            vec![
                PathBuf::from("/run"),
                PathBuf::from("/var/lib/kubelet/pods/a b/volumes"),
                PathBuf::from("/odd\\x"),
            ]
        );
        assert_eq!(unescape_octal("end\\04"), "end\\04");
    }

    #[test]
    fn wait_statuses_read_as_words() {
        assert_eq!(describe(ExitStatus::from_raw(3 << 8)), "exit status 3");
        assert_eq!(describe(ExitStatus::from_raw(9)), "killed by signal 9");
    }
}
