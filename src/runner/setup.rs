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
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::host::binaries::{BinariesDir, DirSource};

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

    /// Where the built programs are looked for, and what is missing there.
    fn lookup(self, explicit: Option<&Path>) -> (BinariesDir, Option<String>) {
        match self {
            Part::ControlPlane => {
                let dir = crate::cluster::local::binaries::locate(explicit);
                let missing = crate::cluster::local::binaries::verify(dir.clone())
                    .err()
                    .map(|m| m.to_string());
                (dir, missing)
            }
            Part::Node => {
                let dir = crate::real_node::binaries::locate(explicit);
                let missing = crate::real_node::binaries::verify_with(
                    dir.clone(),
                    std::env::var_os("PATH"),
                    Path::new("/"),
                )
                .err()
                .map(|m| m.to_string());
                (dir, missing)
            }
        }
    }
}

/// Makes sure `part` is built; builds it into the cache when it is not and
/// the cache is where it is looked for. `explicit` is `--binaries-dir` (for
/// the control plane) as the user gave it.
pub fn ensure(part: Part, explicit: Option<&Path>) -> anyhow::Result<()> {
    let (dir, missing) = part.lookup(explicit);
    let Some(missing) = missing else {
        return Ok(());
    };
    // A directory the user chose is theirs to fill.
    if dir.origin != DirSource::Cache {
        anyhow::bail!("{missing}");
    }
    let build = BuildCommand::find(part)?;
    let cache_root = cache_root(&dir.dir, part);
    std::fs::create_dir_all(&cache_root)
        .with_context(|| format!("creating the build cache {}", cache_root.display()))?;
    let _lock = BuildLock::take(&cache_root, part)?;
    // Another run may have built it while this one waited.
    if part.lookup(explicit).1.is_none() {
        return Ok(());
    }
    build.run(part, &cache_root)?;
    match part.lookup(explicit).1 {
        None => Ok(()),
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

/// The program that builds a part.
struct BuildCommand {
    program: PathBuf,
}

impl BuildCommand {
    fn find(part: Part) -> anyhow::Result<BuildCommand> {
        if let Some(p) = std::env::var_os(part.override_env()).filter(|p| !p.is_empty()) {
            return Ok(BuildCommand { program: p.into() });
        }
        let hack = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack");
        let program = hack.join(part.script());
        if !program.exists() {
            anyhow::bail!(
                "{} is not built, and the dra-e2e source it is built from ({}) is not on this \
                 machine: build it with `make {}` in a dra-e2e checkout",
                part.describe(),
                hack.display(),
                part.name()
            );
        }
        check_go(&hack.join(part.go_module()).join("go.mod"), part)?;
        Ok(BuildCommand { program })
    }

    /// Runs the build, its output shown as progress; the build's time is
    /// kept for the next estimate.
    fn run(&self, part: Part, cache_root: &Path) -> anyhow::Result<()> {
        let timing = cache_root.join(format!("{}.build-seconds", part.name()));
        let last = std::fs::read_to_string(&timing)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut cmd = Command::new(&self.program);
        cmd.env_remove(crate::cluster::local::binaries::BINARIES_DIR_ENV)
            .env_remove(crate::real_node::binaries::NODE_BINARIES_DIR_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: see `die_with_runner`.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(
                &mut cmd,
                crate::host::process::die_with_runner(),
            );
        }
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.program.display()))?;
        let shown = Shown::new(part, last);
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

/// The Go the build needs, from its module's `go` line, against `go
/// version`: a missing or old toolchain is one message naming what to
/// install.
fn check_go(go_mod: &Path, part: Part) -> anyhow::Result<()> {
    let needed = std::fs::read_to_string(go_mod)
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("go ").map(|v| v.trim().to_owned()))
        })
        .unwrap_or_default();
    let install = format!(
        "building {} needs Go {needed} or newer (https://go.dev/dl/, or your distribution's \
         golang package), or prebuilt binaries given with {}",
        part.describe(),
        match part {
            Part::ControlPlane => "--binaries-dir",
            Part::Node => crate::real_node::binaries::NODE_BINARIES_DIR_ENV,
        }
    );
    let out = match Command::new("go").arg("version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => anyhow::bail!("`go` is not on PATH: {install}"),
    };
    // "go version go1.26.6 linux/amd64"
    let found = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("go"))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or_default()
        .to_owned();
    if version(&found) < version(&needed) {
        anyhow::bail!("found Go {found}: {install}");
    }
    Ok(())
}

/// `1.26.6` as numbers, for comparing.
fn version(v: &str) -> Vec<u64> {
    v.split(['.', '-', 'r', 'c'])
        .map_while(|p| p.parse().ok())
        .collect()
}

/// A lock on the cache's build of one part, held while building (the
/// kernel lets go when the file closes, also when the runner dies).
struct BuildLock {
    _file: std::fs::File,
}

impl BuildLock {
    fn take(cache_root: &Path, part: Part) -> anyhow::Result<BuildLock> {
        let path = cache_root.join(format!("{}.build.lock", part.name()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            eprintln!(
                "dra-e2e: another dra-e2e is building {} ({}); waiting for it",
                part.describe(),
                path.display()
            );
            // SAFETY: as above; blocks until the other build lets go.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("locking {}", path.display()));
            }
        }
        Ok(BuildLock { _file: file })
    }
}

/// How a build shows itself: a spinner with the current step on a
/// terminal, timestamped lines elsewhere.
struct Shown {
    bar: Option<indicatif::ProgressBar>,
    part: Part,
}

impl Shown {
    fn new(part: Part, last: Option<Duration>) -> Shown {
        let estimate = match last {
            Some(d) => format!("the last build here took {}", humantime::format_duration(d)),
            None => "no earlier build here to estimate from".to_owned(),
        };
        eprintln!(
            "dra-e2e: building {} (once per machine; {estimate})",
            part.describe()
        );
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Shown { bar, part }
    }

    fn line(&self, line: &str, elapsed: Duration) {
        match &self.bar {
            Some(bar) => bar.set_message(line.to_owned()),
            None => eprintln!(
                "dra-e2e: [{} +{}s] {line}",
                self.part.name(),
                elapsed.as_secs()
            ),
        }
    }

    fn finish(&self, ok: bool, took: Duration) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        let took = humantime::format_duration(Duration::from_secs(took.as_secs()));
        if ok {
            eprintln!("dra-e2e: built {} in {took}", self.part.describe());
        }
    }
}

/// `dra-e2e setup [--node-kind real]`: builds what the local cluster needs
/// (and real nodes, when asked), then exits.
pub fn cli_main(args: Vec<std::ffi::OsString>) -> anyhow::Result<i32> {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let real = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["--node-kind", "simulated"] | ["--node-kind=simulated"] => false,
        ["--node-kind", "real"] | ["--node-kind=real"] => true,
        _ => anyhow::bail!(
            "dra-e2e setup: unexpected arguments {args:?}; usage: dra-e2e setup [--node-kind simulated|real]"
        ),
    };
    ensure(Part::ControlPlane, None)?;
    if real {
        ensure(Part::Node, None)?;
    }
    println!("dra-e2e: everything the local cluster needs is built");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_numbers() {
        assert!(version("1.26.10") > version("1.26.6"));
        assert!(version("1.25") < version("1.26.0"));
        assert!(version("1.26.0") <= version("1.26.0"));
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
