//! Provisioning: the first run builds what the local cluster needs. When
//! the control plane's binaries (or, for real nodes, the kubelet and
//! containerd) are not in the build cache, the runner runs the same build
//! the Makefile does (`hack/build-controlplane.sh`, `hack/build-node.sh`),
//! into the same cache, showing which component builds, for how long, and
//! how long the last build took on this machine. One build at a time per
//! cache (a lock; a second run waits and then uses the result), and the
//! scripts write each binary under a temporary name, so an interrupted build
//! leaves nothing a later run would trust. `dra-e2e setup` does only this.
use std::io::{BufRead as _, IsTerminal as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::cluster::host::binaries::{BinariesDir, DirSource};
use crate::cluster::host::kube_version::KubeVersion;

/// What a build provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// etcd, kube-apiserver, kube-scheduler, kube-controller-manager.
    ControlPlane,
    /// kubelet, containerd and the rest a real node runs.
    Node,
}

impl Part {
    fn describe(self) -> &'static str {
        match self {
            Part::ControlPlane => "the local cluster's control plane",
            Part::Node => "the real nodes' kubelet and containerd",
        }
    }

    fn script(self) -> &'static str {
        match self {
            Part::ControlPlane => "build-controlplane.sh",
            Part::Node => "build-node.sh",
        }
    }

    /// A program to run instead of the script (tests use a fake build).
    fn override_env(self) -> &'static str {
        match self {
            Part::ControlPlane => "DRA_E2E_BUILD_CONTROLPLANE",
            Part::Node => "DRA_E2E_BUILD_NODE",
        }
    }

    /// The Go module whose `go` line says which Go the build needs.
    fn go_module(self) -> &'static str {
        match self {
            Part::ControlPlane => "k8s",
            Part::Node => "containerd",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Part::ControlPlane => "controlplane",
            Part::Node => "node",
        }
    }

    /// Where the built programs are looked for (at `version`, the pinned
    /// one when `None`), and what is missing there.
    fn lookup(
        self,
        explicit: Option<&Path>,
        version: Option<KubeVersion>,
    ) -> (BinariesDir, Option<String>) {
        match self {
            Part::ControlPlane => {
                use crate::cluster::local::binaries::{Versions, locate_at, verify};
                let versions = version.map_or_else(Versions::pinned, Versions::at);
                let dir = locate_at(explicit, &versions);
                let missing = verify(dir.clone()).err().map(|m| m.to_string());
                (dir, missing)
            }
            Part::Node => {
                use crate::cluster::real_node::binaries::{NodeVersions, locate_at, verify_with};
                let versions =
                    version.map_or_else(NodeVersions::pinned, NodeVersions::with_kubelet);
                let dir = locate_at(explicit, &versions);
                let missing = verify_with(dir.clone(), std::env::var_os("PATH"), Path::new("/"))
                    .err()
                    .map(|m| m.to_string());
                (dir, missing)
            }
        }
    }

    /// The program whose `--version` says which Kubernetes a build is.
    fn versioned_program(self) -> &'static str {
        match self {
            Part::ControlPlane => crate::cluster::local::binaries::KUBE_APISERVER,
            Part::Node => crate::cluster::real_node::binaries::KUBELET,
        }
    }

    /// The build script's variable that selects a version other than the
    /// pinned one.
    fn version_env(self) -> &'static str {
        match self {
            Part::ControlPlane => "DRA_E2E_KUBE_VERSION",
            Part::Node => "DRA_E2E_KUBELET_VERSION",
        }
    }

    /// The option a user gives the version with.
    fn version_option(self) -> &'static str {
        match self {
            Part::ControlPlane => "--kube-version",
            Part::Node => "--kubelet-version",
        }
    }
}

/// Makes sure `part` is built, at `version` when one was asked for (else
/// the pinned one), and says where; builds it into the cache when it is not
/// and the cache is where it is looked for. `explicit` is `--binaries-dir`
/// (for the control plane) as the user gave it. A directory the user chose
/// that holds another version than the one asked for is refused, naming both.
pub fn ensure(
    part: Part,
    explicit: Option<&Path>,
    version: Option<KubeVersion>,
) -> anyhow::Result<PathBuf> {
    let (dir, missing) = part.lookup(explicit, version);
    let Some(missing) = missing else {
        if dir.origin != DirSource::Cache
            && let Some(want) = version
        {
            let program = dir.dir.join(part.versioned_program());
            let have = crate::cluster::host::kube_version::program_version(&program);
            if have != Some(want) {
                anyhow::bail!(
                    "{} asks for {want}, but {} ({}) holds {}: unset it (or the option) so that \
                     the runner builds {want} into its cache",
                    part.version_option(),
                    dir.dir.display(),
                    dir.origin,
                    have.map_or_else(
                        || format!(
                            "a {} that does not say its version",
                            part.versioned_program()
                        ),
                        |v| format!("{} {v}", part.versioned_program())
                    ),
                );
            }
        }
        return Ok(dir.dir);
    };
    // A directory the user chose is theirs to fill.
    if dir.origin != DirSource::Cache {
        anyhow::bail!("{missing}");
    }
    let cache_root = cache_root(&dir.dir, part);
    std::fs::create_dir_all(&cache_root)
        .with_context(|| format!("creating the build cache {}", cache_root.display()))?;
    let build = BuildCommand::find(part, &cache_root)?;
    let deadline = lock_deadline(
        std::env::var_os(LOCK_TIMEOUT_ENV),
        last_build(&cache_root, part),
    )?;
    let _lock = BuildLock::take(&cache_root, part, deadline)?;
    // Another run may have built it while this one waited.
    if part.lookup(explicit, version).1.is_none() {
        return Ok(dir.dir);
    }
    build.run(part, version, &cache_root)?;
    match part.lookup(explicit, version).1 {
        None => Ok(dir.dir),
        Some(still) => anyhow::bail!("the build of {} finished, yet: {still}", part.describe()),
    }
}

/// `<cache root>` of a build directory `<cache root>/<part>/<versions>`.
fn cache_root(dir: &Path, part: Part) -> PathBuf {
    dir.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == part.name()))
        .and_then(Path::parent)
        .unwrap_or(dir)
        .to_owned()
}

/// Where the time of the last build of `part` is kept.
fn timing_file(cache_root: &Path, part: Part) -> PathBuf {
    cache_root.join(format!("{}.build-seconds", part.name()))
}

/// How long the last build of `part` took here, if one did.
fn last_build(cache_root: &Path, part: Part) -> Option<Duration> {
    std::fs::read_to_string(timing_file(cache_root, part))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// The program that builds a part.
struct BuildCommand {
    program: PathBuf,
}

impl BuildCommand {
    /// The build script, from the build sources the runner carries
    /// (written into `cache_root` once, see
    /// [`crate::cluster::host::build_sources`]), or the program the part's override
    /// variable names.
    fn find(part: Part, cache_root: &Path) -> anyhow::Result<BuildCommand> {
        if let Some(p) = std::env::var_os(part.override_env()).filter(|p| !p.is_empty()) {
            return Ok(BuildCommand { program: p.into() });
        }
        let hack = crate::cluster::host::build_sources::write(cache_root)?;
        let program = hack.join(part.script());
        check_go(&hack.join(part.go_module()).join("go.mod"), part)?;
        Ok(BuildCommand { program })
    }

    /// Runs the build, its output shown as progress; the build's time is
    /// kept for the next estimate.
    fn run(
        &self,
        part: Part,
        version: Option<KubeVersion>,
        cache_root: &Path,
    ) -> anyhow::Result<()> {
        let timing = timing_file(cache_root, part);
        let last = last_build(cache_root, part);
        let mut cmd = Command::new(&self.program);
        if let Some(v) = version {
            cmd.env(part.version_env(), v.to_string());
        }
        cmd.env_remove(crate::cluster::local::binaries::BINARIES_DIR_ENV)
            .env_remove(crate::cluster::real_node::binaries::NODE_BINARIES_DIR_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // The build is waited for on this thread: it dies with the runner.
        crate::sys::die_with_parent(&mut cmd);
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.program.display()))?;
        let mut shown = Shown::new(part, last);
        let mut tail = std::collections::VecDeque::new();
        if let Some(err) = child.stderr.take() {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                shown.line(&line, started.elapsed());
                tail.push_back(line);
                if tail.len() > 15 {
                    tail.pop_front();
                }
            }
        }
        let status = child
            .wait()
            .with_context(|| format!("waiting for {}", self.program.display()))?;
        let took = started.elapsed();
        shown.finish(status.success(), took);
        if !status.success() {
            anyhow::bail!(
                "building {} failed ({status}); {}'s last lines:\n{}",
                part.describe(),
                self.program.display(),
                Vec::from(tail).join("\n")
            );
        }
        let _ = std::fs::write(&timing, took.as_secs().to_string());
        Ok(())
    }
}

/// The Go the build needs, from its module's `go` line, against the `go` on
/// PATH: a missing, unreadable or old toolchain is one message naming what
/// to install.
fn check_go(go_mod: &Path, part: Part) -> anyhow::Result<()> {
    use crate::cluster::host::go_toolchain;
    let text =
        std::fs::read_to_string(go_mod).with_context(|| format!("reading {}", go_mod.display()))?;
    let needed = go_toolchain::module_requirement(&text)
        .with_context(|| format!("{} has no `go` line", go_mod.display()))?;
    let install = format!(
        "building {} needs Go {needed} or newer (https://go.dev/dl/, or your distribution's \
         golang package), or prebuilt binaries given with {}",
        part.describe(),
        match part {
            Part::ControlPlane => "--binaries-dir",
            Part::Node => crate::cluster::real_node::binaries::NODE_BINARIES_DIR_ENV,
        }
    );
    match go_toolchain::installed() {
        Ok(found) if found.satisfies(&needed) => Ok(()),
        Ok(found) => anyhow::bail!("found {found}: {install}"),
        Err(e) => anyhow::bail!("{e}: {install}"),
    }
}

/// How long a run waits for another's build before it says so and stops:
/// `DRA_E2E_BUILD_LOCK_TIMEOUT`, else twice the last build here (at least
/// 20 minutes), else 45 minutes (a cold build takes 14-19 on 2 cores).
pub const LOCK_TIMEOUT_ENV: &str = "DRA_E2E_BUILD_LOCK_TIMEOUT";

fn lock_deadline(
    setting: Option<std::ffi::OsString>,
    last_build: Option<Duration>,
) -> anyhow::Result<Duration> {
    if let Some(v) = setting {
        let v = v.to_string_lossy();
        return humantime::parse_duration(v.trim()).with_context(|| {
            format!("{LOCK_TIMEOUT_ENV}={v:?} is not a duration (such as 30m or 90s)")
        });
    }
    Ok(match last_build {
        Some(d) => (d * 2).max(Duration::from_secs(20 * 60)),
        None => Duration::from_secs(45 * 60),
    })
}

/// A lock on the cache's build of one part, held while building (the
/// kernel lets go when the file closes, also when the runner dies). The
/// holder writes who it is into the file, so that a run waiting for it can
/// name it.
struct BuildLock {
    _file: std::fs::File,
}

impl BuildLock {
    fn take(cache_root: &Path, part: Part, deadline: Duration) -> anyhow::Result<BuildLock> {
        use std::io::{Seek as _, Write as _};
        let path = cache_root.join(format!("{}.build.lock", part.name()));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if !try_lock(&file).with_context(|| format!("locking {}", path.display()))? {
            wait_for_lock(&file, &path, part, deadline)?;
        }
        // Who holds it, for a run that waits (best effort: the lock itself
        // is what counts).
        let me = Holder {
            pid: std::process::id(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        };
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", me.record(jiff::Timestamp::now())));
        Ok(BuildLock { _file: file })
    }
}

/// Takes the lock if it is free; `false` when another holds it. std's
/// `File::try_lock` is `flock(LOCK_EX | LOCK_NB)` on Linux: the lock goes
/// with the open file, so also with a runner that dies, and `flock(1)`
/// (the tests' stand-in holder) sees the same lock.
fn try_lock(file: &std::fs::File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Waits until the lock is free, naming its holders now and then; past the
/// deadline, says who holds it and what to do. flock has no deadline and
/// no event to watch, so this polls, every 200 ms.
fn wait_for_lock(
    file: &std::fs::File,
    path: &Path,
    part: Part,
    deadline: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    crate::report::note!(
        "dra-e2e: another dra-e2e is building {} ({}); waiting for it (at most {}): {}",
        part.describe(),
        path.display(),
        humantime::format_duration(deadline),
        describe_holders(path)
    );
    let mut next_note = Duration::from_secs(60);
    loop {
        if try_lock(file).with_context(|| format!("locking {}", path.display()))? {
            return Ok(());
        }
        let waited = started.elapsed();
        if waited >= deadline {
            anyhow::bail!(
                "waited {} for the build of {} that another process holds ({}): {}. If it is \
                 stuck, end it (kill PID; the lock goes with the process) and run again; to \
                 wait longer, set {LOCK_TIMEOUT_ENV} (such as 90m)",
                humantime::format_duration(Duration::from_secs(waited.as_secs())),
                part.describe(),
                path.display(),
                describe_holders(path)
            );
        }
        if waited >= next_note {
            crate::report::note!(
                "dra-e2e: still waiting for the build of {} ({} so far): {}",
                part.describe(),
                humantime::format_duration(Duration::from_secs(waited.as_secs())),
                describe_holders(path)
            );
            next_note += Duration::from_secs(60);
        }
        std::thread::sleep(Duration::from_millis(200).min(deadline.saturating_sub(waited)));
    }
}

/// A process that holds (or recorded that it took) a build lock.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    pid: u32,
    command: String,
}

impl Holder {
    /// The line a holder writes into the lock file.
    fn record(&self, since: jiff::Timestamp) -> String {
        format!("pid={} since={since} command={}", self.pid, self.command)
    }

    /// Reads [`Holder::record`]'s line back: the holder and since when.
    fn parse(line: &str) -> Option<(Holder, String)> {
        let rest = line.trim().strip_prefix("pid=")?;
        let (pid, rest) = rest.split_once(" since=")?;
        let (since, command) = rest.split_once(" command=")?;
        Some((
            Holder {
                pid: pid.parse().ok()?,
                command: command.to_owned(),
            },
            since.to_owned(),
        ))
    }
}

/// Who holds the lock file `path`: the processes that have it open (from
/// /proc, which also finds a process that inherited it from a holder that
/// is gone), and the holder it names.
fn describe_holders(path: &Path) -> String {
    let recorded = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.lines().next().and_then(Holder::parse));
    holders_message(recorded, &open_by(path))
}

fn holders_message(recorded: Option<(Holder, String)>, open: &[Holder]) -> String {
    let mut parts = Vec::new();
    if let Some((h, since)) = &recorded {
        let state = if open.iter().any(|o| o.pid == h.pid) {
            "holds it"
        } else {
            "took it and is gone"
        };
        parts.push(format!(
            "pid {} (`{}`) {state}, since {since}",
            h.pid, h.command
        ));
    }
    let others: Vec<String> = open
        .iter()
        .filter(|o| recorded.as_ref().is_none_or(|(h, _)| h.pid != o.pid))
        .map(|o| format!("pid {} (`{}`)", o.pid, o.command))
        .collect();
    if !others.is_empty() {
        parts.push(format!("open in {}", others.join(", ")));
    }
    if parts.is_empty() {
        "no process found holding it".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The processes with `path` open, from /proc (those this user may see).
fn open_by(path: &Path) -> Vec<Holder> {
    let Ok(target) = path.canonicalize() else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Holder> = procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten()
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == target))
            })
        })
        .map(|pid| Holder {
            pid,
            command: std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .split('\0')
                        .filter(|a| !a.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
        })
        .filter(|h| h.pid != std::process::id())
        .collect();
    found.sort_by_key(|h| h.pid);
    found
}

/// How a build shows itself: where a person watches (stdout and stderr on
/// a terminal), a status line with a spinner, the time so far and the
/// build's current step, below any log line; timestamped lines elsewhere.
struct Shown {
    spinner: Option<Spinner>,
    part: Part,
}

/// The ticker that redraws a build's status line; it ends when dropped.
struct Spinner {
    step: std::sync::Arc<std::sync::Mutex<String>>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn start() -> Spinner {
        let step = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let shown = step.clone();
        let ticker = std::thread::spawn(move || {
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let started = Instant::now();
            let terminal = crate::report::terminal::process();
            for frame in frames.iter().cycle() {
                let secs = started.elapsed().as_secs();
                let step = shown.lock().map(|s| s.clone()).unwrap_or_default();
                terminal.set_status(format!(
                    "{frame} [{:02}:{:02}:{:02}] {step}",
                    secs / 3600,
                    secs / 60 % 60,
                    secs % 60
                ));
                // The tick; a message or a dropped sender ends the line.
                match stopped.recv_timeout(Duration::from_millis(200)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
            terminal.clear_status();
        });
        Spinner {
            step,
            stop: Some(stop),
            ticker: Some(ticker),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl Shown {
    fn new(part: Part, last: Option<Duration>) -> Shown {
        let estimate = match last {
            Some(d) => format!("the last build here took {}", humantime::format_duration(d)),
            None => "no earlier build here to estimate from".to_owned(),
        };
        crate::report::note!(
            "dra-e2e: building {} (once per machine; {estimate})",
            part.describe()
        );
        let watched = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        Shown {
            spinner: watched.then(Spinner::start),
            part,
        }
    }

    fn line(&self, line: &str, elapsed: Duration) {
        match &self.spinner {
            Some(s) => {
                if let Ok(mut step) = s.step.lock() {
                    *step = line.to_owned();
                }
            }
            None => crate::report::note!(
                "dra-e2e: [{} +{}s] {line}",
                self.part.name(),
                elapsed.as_secs()
            ),
        }
    }

    fn finish(&mut self, ok: bool, took: Duration) {
        // Stops the ticker, which takes its line away.
        self.spinner = None;
        let took = humantime::format_duration(Duration::from_secs(took.as_secs()));
        if ok {
            crate::report::note!("dra-e2e: built {} in {took}", self.part.describe());
        }
    }
}

/// The options of `dra-e2e setup`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Build what the local cluster needs, as the first run does, then exit",
    long_about = "Build what the local cluster needs, as the first run does, then exit: the \
                  control plane (etcd, kube-apiserver, kube-scheduler, \
                  kube-controller-manager), and with --node-kind real the real nodes' kubelet \
                  and containerd, and dra-e2e-agent (built with cargo when it is not beside \
                  the runner). Needs Go; what is built is cached and not built again."
)]
pub struct SetupArgs {
    /// Also build what real nodes need (kubelet, containerd, runc), or only
    /// the control plane the simulated nodes need.
    #[arg(long, value_enum, value_name = "KIND", default_value = "simulated")]
    pub node_kind: crate::cluster::NodeKind,

    #[command(flatten)]
    pub versions: super::cli::VersionArgs,
}

/// `dra-e2e setup [--node-kind real]`: builds what the local cluster needs
/// (and real nodes, when asked), then exits.
pub fn cli_main(args: SetupArgs) -> anyhow::Result<i32> {
    let real = args.node_kind == crate::cluster::NodeKind::Real;
    args.versions.check()?;
    let dir = ensure(
        Part::ControlPlane,
        None,
        args.versions.for_part(Part::ControlPlane),
    )?;
    println!("dra-e2e: the control plane is in {}", dir.display());
    if real {
        let dir = ensure(Part::Node, None, args.versions.for_part(Part::Node))?;
        println!("dra-e2e: the real nodes' programs are in {}", dir.display());
        // Process 1 of every real node and the program of their proxy
        // pods; `cargo run` builds only the runner.
        let agent = crate::cluster::host::agent::agent_program()?;
        println!("dra-e2e: the node agent is {}", agent.display());
    }
    println!("dra-e2e: everything the local cluster needs is built");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another open of the lock file (another runner) cannot take it while
    /// it is held, and can once the holder's file is closed; `flock(1)`,
    /// which the tests use as a stuck holder, sees the same lock.
    #[test]
    fn the_build_lock_is_held_until_its_file_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.build.lock");
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .unwrap()
        };
        let (first, second) = (open(), open());
        assert!(try_lock(&first).unwrap());
        assert!(!try_lock(&second).unwrap());
        let flock = Command::new("flock")
            .arg("-n")
            .arg(&path)
            .arg("true")
            .status();
        if let Ok(status) = flock {
            assert!(!status.success(), "flock(1) took a held lock");
        }
        drop(first);
        assert!(try_lock(&second).unwrap());
    }

    #[test]
    fn a_holder_record_reads_back() {
        let h = Holder {
            pid: 42,
            command: "dra-e2e --tags @x since=y".into(),
        };
        let line = h.record("2026-12-02T09:00:00Z".parse().unwrap());
        assert_eq!(
            Holder::parse(&line),
            Some((h, "2026-12-02T09:00:00Z".to_owned()))
        );
        assert_eq!(Holder::parse(""), None);
        assert_eq!(Holder::parse("pid=x since=a command=b"), None);
    }

    #[test]
    fn the_holders_are_named_with_what_became_of_them() {
        let runner = Holder {
            pid: 7,
            command: "dra-e2e setup".into(),
        };
        let go = Holder {
            pid: 9,
            command: "go build".into(),
        };
        let since = "09:00".to_owned();
        assert_eq!(
            holders_message(
                Some((runner.clone(), since.clone())),
                std::slice::from_ref(&runner)
            ),
            "pid 7 (`dra-e2e setup`) holds it, since 09:00"
        );
        // The one that took it died; a process it left behind keeps the lock.
        assert_eq!(
            holders_message(Some((runner.clone(), since)), std::slice::from_ref(&go)),
            "pid 7 (`dra-e2e setup`) took it and is gone, since 09:00; open in pid 9 (`go build`)"
        );
        assert_eq!(holders_message(None, &[go]), "open in pid 9 (`go build`)");
        assert_eq!(holders_message(None, &[]), "no process found holding it");
    }

    #[test]
    fn the_wait_for_a_build_scales_with_the_last_one() {
        let min = |m: u64| Duration::from_secs(m * 60);
        assert_eq!(lock_deadline(None, None).unwrap(), min(45));
        assert_eq!(lock_deadline(None, Some(min(1))).unwrap(), min(20));
        assert_eq!(lock_deadline(None, Some(min(30))).unwrap(), min(60));
        assert_eq!(
            lock_deadline(Some("90s".into()), Some(min(30))).unwrap(),
            Duration::from_secs(90)
        );
        let bad = lock_deadline(Some("soon".into()), None).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("DRA_E2E_BUILD_LOCK_TIMEOUT=\"soon\" is not a duration"),
            "{bad}"
        );
    }

    #[test]
    fn the_cache_root_is_above_the_part() {
        assert_eq!(
            cache_root(
                Path::new("/c/dra-e2e/controlplane/kube-v1-etcd-v3"),
                Part::ControlPlane
            ),
            Path::new("/c/dra-e2e")
        );
    }
}
