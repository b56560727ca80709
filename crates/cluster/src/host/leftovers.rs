//! What a run leaves on the host when it cannot clean up (SIGKILL, a power
//! cut of the runner), and how a later process removes it without touching
//! what a live run still uses.
//!
//! A killed runner takes its child processes with it (`PR_SET_PDEATHSIG`,
//! see [`dra_e2e_sys::die_with_parent`]; a real node's process 1
//! dies with its `unshare` parent and takes its PID namespace along). What
//! the kernel keeps is what has no process: the cluster's temp dir (which
//! holds the real nodes' dirs), the real nodes' network namespaces (a bind
//! mount under `/run/netns` holds each, and with it its veth pair) and their
//! cgroup directories in every hierarchy.
//!
//! Every run that makes such things keeps a *record* in a registry
//! directory (`/run/dra-e2e` for root, `dra-e2e.runs` in the temp dir
//! otherwise, `$DRA_E2E_RUN_RECORDS` if set): one file per run, on which the
//! run holds an `flock` for its whole life, listing each thing the run makes,
//! written *before* the thing is made. The kernel lets go of the lock when
//! the process dies, however it dies, and a lock cannot be fooled by a
//! reused PID, so "the lock can be taken" is exactly "the run is gone".
//! [`Registry::reclaim`] removes what the records of gone runs list and
//! never touches what a live run's record lists.
//!
//! Things with no record at all (left by versions before records) are
//! matched by name; see [`Registry::reclaim`] for the rule that keeps a
//! live run of such a version safe.
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use dra_e2e_sys::is_root;
use serde::{Deserialize, Serialize};

use super::cgroups;

/// The registry of root's runs: machine-wide, as the namespaces, links and
/// cgroups a run makes are.
pub const ROOT_REGISTRY: &str = "/run/dra-e2e";
/// Overrides where the records are kept.
pub const REGISTRY_ENV: &str = "DRA_E2E_RUN_RECORDS";
/// A record's file name ends in this; a record being written has `.new`.
const RECORD_SUFFIX: &str = ".run";
const NEW_SUFFIX: &str = ".new";
/// How long a `.new` record is left alone by other runs' reclaims: its run
/// creates it, then locks it, and between the two it looks like a gone
/// run's (parallel runs starting at once removed each other's this way). A
/// run that died in that instant leaves one that goes after this.
const NEW_GRACE: Duration = Duration::from_secs(60);

/// How old a network namespace with no record must be before it counts as
/// left over when no process uses it. An older version's live run makes its
/// node's namespace a few seconds before the node's first process joins it;
/// past this nothing of a live run is without a process.
pub const UNRECORDED_GRACE: Duration = Duration::from_secs(300);

/// One thing a run makes on the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Item {
    /// A named network namespace (`ip netns`), with the node's end of its
    /// veth pair and everything else inside it (the pods' bridge and links,
    /// the NAT rules for the `kubernetes` Service).
    Netns(String),
    /// The host's end of a node's veth pair.
    Link(String),
    /// A cgroup root such as `/dra-e2e-<run>-<i>`, in every hierarchy.
    Cgroup(String),
    /// A directory the run made and removes at its end (the local
    /// cluster's, which holds the real nodes' too).
    Dir(PathBuf),
    /// A directory the user asked to keep (`--keep-cluster-files`): never
    /// removed, named when its run is gone.
    KeptDir(PathBuf),
}

/// One line of a record: `{"run":{"pid":…,"started":…}}` first, then one
/// [`Item`] per line (`{"netns":"dra-e2e-…"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    /// Who wrote the record, for people; liveness is the lock.
    Head {
        run: RunInfo,
    },
    Made(Item),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RunInfo {
    pid: u32,
    started: String,
}

fn netns_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("dra-e2e-")?;
    let (run, index) = rest.rsplit_once('-')?;
    (is_hex(run) && is_digits(index)).then_some((run, index))
}

fn link_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("dre")?;
    let (run, index) = rest.rsplit_once('h')?;
    (name.len() <= 15 && is_hex(run) && is_digits(index)).then_some((run, index))
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

impl Item {
    /// Whether the name is one dra-e2e makes: a record (a file anyone with
    /// the registry's owner's rights could write) never leads to removing
    /// anything else.
    pub fn is_valid(&self) -> bool {
        match self {
            Item::Netns(n) => netns_name(n).is_some(),
            Item::Link(n) => link_name(n).is_some(),
            Item::Cgroup(r) => r.strip_prefix('/').and_then(netns_name).is_some(),
            Item::Dir(p) | Item::KeptDir(p) => {
                p.is_absolute()
                    && p.components()
                        .all(|c| !matches!(c, std::path::Component::ParentDir))
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("dra-e2e-"))
            }
        }
    }

    /// Whether any of it is still on the host.
    pub fn exists(&self) -> bool {
        match self {
            Item::Netns(n) => netns_path(n).exists(),
            Item::Link(n) => link_exists(n),
            Item::Cgroup(r) => !cgroups::leftovers(r).is_empty(),
            Item::Dir(p) | Item::KeptDir(p) => p.symlink_metadata().is_ok(),
        }
    }

    /// Processes that use it: joined the namespace, sit in the cgroup tree,
    /// or name the directory on their command line.
    fn users(&self, procs: &[Proc]) -> Vec<String> {
        let matching = |p: &Proc| match self {
            Item::Netns(n) => fs::metadata(netns_path(n)).is_ok_and(|m| p.net == Some(m.ino())),
            Item::Link(_) => false,
            Item::Cgroup(r) => p
                .cgroups
                .iter()
                .any(|c| c == r || c.starts_with(&format!("{r}/"))),
            Item::Dir(d) | Item::KeptDir(d) => {
                let d = d.to_string_lossy();
                p.cmdline.contains(&format!("{d}/")) || p.cmdline.split([' ', '=']).any(|w| w == d)
            }
        };
        procs
            .iter()
            .filter(|p| matching(p))
            .map(|p| {
                let cmd: String = p.cmdline.trim().chars().take(80).collect();
                format!("pid {} ({})", p.pid, cmd.trim_end())
            })
            .collect()
    }

    /// Removes it; gone already is fine.
    fn remove(&self) -> Result<(), String> {
        match self {
            Item::Netns(n) => {
                if netns_path(n).exists()
                    && let Err(e) = ip(&["netns", "delete", n])
                    && netns_path(n).exists()
                {
                    return Err(e);
                }
                Ok(())
            }
            Item::Link(n) => {
                // A veth's host end goes with its peer's namespace, a moment
                // after the namespace; delete it only when it stays.
                let deadline = std::time::Instant::now() + Duration::from_secs(2);
                while link_exists(n) && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if link_exists(n)
                    && let Err(e) = ip(&["link", "delete", n])
                    && link_exists(n)
                {
                    return Err(e);
                }
                Ok(())
            }
            Item::Cgroup(r) => match cgroups::remove(r) {
                left if left.is_empty() => Ok(()),
                left => Err(left.join("; ")),
            },
            Item::Dir(d) => {
                // A mount below would make removing the tree remove the
                // mounted file system's contents: refuse instead.
                let mounts = mounts_below(d);
                if !mounts.is_empty() {
                    return Err(format!("mounted below it: {}", mounts.join(", ")));
                }
                match fs::remove_dir_all(d) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.to_string()),
                    _ => Ok(()),
                }
            }
            Item::KeptDir(_) => Ok(()),
        }
    }

    /// Removal order: namespaces (which take their links along) before
    /// links, processes' cgroups once the namespaces' processes are gone,
    /// directories last.
    fn rank(&self) -> u8 {
        match self {
            Item::Netns(_) => 0,
            Item::Link(_) => 1,
            Item::Cgroup(_) => 2,
            Item::Dir(_) | Item::KeptDir(_) => 3,
        }
    }
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::Netns(n) => write!(f, "network namespace {n}"),
            Item::Link(n) => write!(f, "link {n}"),
            Item::Cgroup(r) => write!(f, "cgroup {r}"),
            Item::Dir(p) => write!(f, "directory {}", p.display()),
            Item::KeptDir(p) => write!(f, "kept directory {}", p.display()),
        }
    }
}

fn netns_path(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Mount points at or below `dir`, as this process's mount namespace has them.
fn mounts_below(dir: &Path) -> Vec<String> {
    let Ok(mounts) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|m| Path::new(m).starts_with(dir))
        .map(str::to_owned)
        .collect()
}

/// The first few users, and how many more: a node has dozens of processes.
fn summary(users: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = users[..users.len().min(SHOWN)].join(", ");
    if users.len() > SHOWN {
        s.push_str(&format!(" and {} more", users.len() - SHOWN));
    }
    s
}

/// A process, as far as deciding what it uses goes.
struct Proc {
    pid: i32,
    net: Option<u64>,
    /// Its cgroup path in each hierarchy.
    cgroups: Vec<String>,
    cmdline: String,
}

fn processes() -> Vec<Proc> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let dir = e.path();
            // A zombie uses nothing any more, though its cgroup file still
            // names where it was (a killed node's processes are zombies for
            // a moment while the kernel ends their PID namespace).
            let stat = fs::read_to_string(dir.join("stat")).ok()?;
            let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
            if matches!(state, "Z" | "X") {
                return None;
            }
            let net = fs::read_link(dir.join("ns/net")).ok().and_then(|l| {
                l.to_str()?
                    .strip_prefix("net:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            });
            let cgroups = fs::read_to_string(dir.join("cgroup"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| Some(l.splitn(3, ':').nth(2)?.to_owned()))
                .collect();
            let cmdline = fs::read(dir.join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            Some(Proc {
                pid,
                net,
                cgroups,
                cmdline,
            })
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum LeftoversError {
    #[error("the run records directory {dir}: {message}")]
    Registry { dir: PathBuf, message: String },
    #[error("the run record {path}: {source}")]
    Record {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the run record {path} is closed; cannot add {item}")]
    Closed { path: PathBuf, item: Item },
    #[error("{item} is not a name dra-e2e makes; not recorded")]
    Invalid { item: Item },
}

/// Where runs keep their records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    dir: PathBuf,
}

impl Registry {
    /// `$DRA_E2E_RUN_RECORDS`, else `/run/dra-e2e` for root, else
    /// `dra-e2e.runs` in the temp dir (a user without root makes only
    /// directories, which live in the temp dir too).
    pub fn for_this_user() -> Registry {
        let dir = match std::env::var_os(REGISTRY_ENV) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ if is_root() => PathBuf::from(ROOT_REGISTRY),
            _ => std::env::temp_dir().join("dra-e2e.runs"),
        };
        Registry { dir }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Registry {
        Registry { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn err(&self, message: impl Into<String>) -> LeftoversError {
        LeftoversError::Registry {
            dir: self.dir.clone(),
            message: message.into(),
        }
    }

    /// Makes the directory, and checks that only this user can write in it:
    /// a record says what to remove, so nobody else may plant one.
    fn ensure(&self) -> Result<(), LeftoversError> {
        match fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
        {
            Ok(()) => {}
            Err(e) => return Err(self.err(format!("creating it: {e}"))),
        }
        self.check_owner()
    }

    fn check_owner(&self) -> Result<(), LeftoversError> {
        let m = fs::symlink_metadata(&self.dir).map_err(|e| self.err(e.to_string()))?;
        let me = dra_e2e_sys::effective_uid();
        if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
            return Err(self.err(format!(
                "not a directory only this user (uid {me}) can write in (owner {}, mode {:o}); \
                 remove it or set {REGISTRY_ENV}",
                m.uid(),
                m.mode() & 0o7777
            )));
        }
        Ok(())
    }

    /// Starts this run's record, locked until the record is dropped or the
    /// process ends.
    pub fn start_record(&self) -> Result<RunRecord, LeftoversError> {
        self.ensure()?;
        loop {
            let id = format!("{:08x}", rand::random::<u32>());
            let new = self.dir.join(format!("{id}{NEW_SUFFIX}"));
            let path = self.dir.join(format!("{id}{RECORD_SUFFIX}"));
            if path.exists() {
                continue;
            }
            let rec_err = |source| LeftoversError::Record {
                path: new.clone(),
                source,
            };
            let mut file = match File::options()
                .append(true)
                .create_new(true)
                .mode(0o600)
                .open(&new)
            {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                r => r.map_err(rec_err)?,
            };
            // Locked before the record has its name: a reclaim never sees
            // it unlocked while its run lives.
            file.try_lock().map_err(|e| rec_err(io::Error::other(e)))?;
            let head = Line::Head {
                run: RunInfo {
                    pid: std::process::id(),
                    started: jiff::Timestamp::now().to_string(),
                },
            };
            file.write_all(line(&head).as_bytes()).map_err(rec_err)?;
            fs::rename(&new, &path).map_err(rec_err)?;
            return Ok(RunRecord {
                id,
                path,
                state: Mutex::new(Some((file, Vec::new()))),
            });
        }
    }

    /// The records and records-in-the-making in the registry.
    fn record_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(RECORD_SUFFIX) || n.ends_with(NEW_SUFFIX))
            })
            .collect();
        files.sort();
        files
    }

    /// Removes what every gone run left, leaves what live runs use, and says
    /// which is which. Runs and `dra-e2e clean` call it.
    ///
    /// Recorded things follow their record's lock: a held lock (a live run)
    /// protects them, a free one (a gone run) means they go, and the record
    /// with them once all of it went. Things with no record, named as
    /// dra-e2e names a real node's (`dra-e2e-<hex>-<n>` namespaces and
    /// cgroups, `dre<hex>h<n>` links), go only when no process uses any of
    /// the node's namespace, cgroups, or link, and its namespace (if it
    /// still has one) is older than [`UNRECORDED_GRACE`]; only root can
    /// remove them, so other users just hear about them. Directories with no
    /// record are never removed (a cluster kept with `--keep-cluster-files`
    /// has none): `with_unrecorded_dirs` lists those in the temp dir.
    pub fn reclaim(&self, with_unrecorded_dirs: bool) -> Reclaimed {
        let mut out = Reclaimed::default();
        // The host first, the records after: whatever a run makes after the
        // scan is not in it, and whatever is in it was recorded before it
        // was made, so the records read next name it.
        let seen = Unrecorded::scan();
        let dirs = if with_unrecorded_dirs {
            temp_dirs()
        } else {
            Vec::new()
        };
        let procs = processes();
        let mut recorded: BTreeSet<Item> = BTreeSet::new();
        if self.dir.exists()
            && let Err(e) = self.check_owner()
        {
            out.failed.push(e.to_string());
        } else {
            for path in self.record_files() {
                self.reclaim_record(&path, &procs, &mut recorded, &mut out);
            }
        }
        seen.reclaim(&recorded, &procs, &mut out);
        for d in dirs {
            if !recorded.contains(&Item::Dir(d.clone()))
                && !recorded.contains(&Item::KeptDir(d.clone()))
            {
                out.unrecorded.push(format!(
                    "directory {} (no record: a kept cluster or an older version's run; \
                     remove it by hand once nothing uses it)",
                    d.display()
                ));
            }
        }
        out
    }

    fn reclaim_record(
        &self,
        path: &Path,
        procs: &[Proc],
        recorded: &mut BTreeSet<Item>,
        out: &mut Reclaimed,
    ) {
        let being_written = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(NEW_SUFFIX));
        if being_written
            && fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < NEW_GRACE))
        {
            return;
        }
        let file = match dra_e2e_sys::open_no_follow(File::options().read(true), path) {
            Ok(f) => f,
            // Its run ended (or another reclaim finished it) meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                out.failed
                    .push(format!("run record {}: {e}", path.display()));
                return;
            }
        };
        let alive = match file.try_lock() {
            Ok(()) => false,
            Err(fs::TryLockError::WouldBlock) => true,
            Err(fs::TryLockError::Error(e)) => {
                out.failed
                    .push(format!("run record {}: locking it: {e}", path.display()));
                return;
            }
        };
        let mut text = String::new();
        match io::Read::read_to_string(&mut &file, &mut text) {
            Ok(_) => {}
            Err(e) => {
                out.failed
                    .push(format!("run record {}: {e}", path.display()));
                return;
            }
        };
        let record = match Record::parse(&text) {
            Ok(r) => r,
            Err(e) => {
                out.failed
                    .push(format!("run record {}: {e}", path.display()));
                return;
            }
        };
        recorded.extend(record.items.iter().cloned());
        let owner = record.owner(path);
        if alive {
            for item in record.items.iter().filter(|i| i.exists()) {
                out.alive.push(format!("{item} ({owner}, alive)"));
            }
            return;
        }
        // Locked now by this reclaim; but the run may have removed the
        // record just before (it unlinks, then lets go).
        if file.metadata().is_ok_and(|m| m.nlink() == 0) {
            return;
        }
        let mut items = record.items.clone();
        items.sort_by_key(Item::rank);
        items.dedup();
        let mut complete = true;
        for item in &items {
            if !item.exists() {
                continue;
            }
            if let Item::KeptDir(_) = item {
                out.unrecorded
                    .push(format!("{item} ({owner}, gone; kept as asked)"));
                continue;
            }
            let users = item.users(procs);
            if !users.is_empty() {
                complete = false;
                out.failed.push(format!(
                    "{item} ({owner}, gone): still used by {}",
                    summary(&users)
                ));
                continue;
            }
            match item.remove() {
                Ok(()) => out.removed.push(format!("{item} ({owner}, gone)")),
                Err(e) => {
                    complete = false;
                    out.failed.push(format!("{item} ({owner}, gone): {e}"));
                }
            }
        }
        if complete
            && let Err(e) = fs::remove_file(path)
            && e.kind() != io::ErrorKind::NotFound
        {
            out.failed
                .push(format!("run record {}: removing it: {e}", path.display()));
        }
    }
}

fn line(l: &Line) -> String {
    let mut s = serde_json::to_string(l).unwrap_or_default();
    s.push('\n');
    s
}

/// A record as read back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub pid: Option<u32>,
    pub started: Option<String>,
    pub items: Vec<Item>,
}

impl Record {
    /// Reads a record. Its last line may be cut short (the run was killed
    /// while writing it: the thing it names was not made yet) and is
    /// skipped; any other line that does not parse, or names something
    /// dra-e2e never makes, makes the whole record untrusted.
    pub fn parse(text: &str) -> Result<Record, String> {
        let mut record = Record::default();
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        for (n, l) in complete.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
            match serde_json::from_str::<Line>(l) {
                Ok(Line::Head {
                    run: RunInfo { pid, started },
                }) => {
                    record.pid = Some(pid);
                    record.started = Some(started);
                }
                Ok(Line::Made(item)) if item.is_valid() => record.items.push(item),
                Ok(Line::Made(item)) => {
                    return Err(format!(
                        "line {}: {item} is not a name dra-e2e makes; left alone",
                        n + 1
                    ));
                }
                Err(e) => return Err(format!("line {}: {e}; left alone", n + 1)),
            }
        }
        Ok(record)
    }

    fn owner(&self, path: &Path) -> String {
        let id = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| {
                n.trim_end_matches(RECORD_SUFFIX)
                    .trim_end_matches(NEW_SUFFIX)
            })
            .unwrap_or("?");
        match (self.pid, &self.started) {
            (Some(pid), Some(started)) => format!("run {id} of pid {pid} started {started}"),
            _ => format!("run {id}"),
        }
    }
}

/// This run's record, locked while it lives. Dropping it without
/// [`RunRecord::close`] leaves the file for a later reclaim (once this
/// process is gone), which is what a run that could not clean up wants.
#[derive(Debug)]
pub struct RunRecord {
    id: String,
    path: PathBuf,
    /// The locked file and what was added; `None` once closed.
    state: Mutex<Option<(File, Vec<Item>)>>,
}

impl RunRecord {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `item`: call it *before* making the item, so that no moment
    /// exists in which the item is on the host and not in the record.
    pub fn add(&self, item: Item) -> Result<(), LeftoversError> {
        if !item.is_valid() {
            return Err(LeftoversError::Invalid { item });
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some((file, items)) = state.as_mut() else {
            return Err(LeftoversError::Closed {
                path: self.path.clone(),
                item,
            });
        };
        // One write of a whole line: a kill cuts at most this line short.
        file.write_all(line(&Line::Made(item.clone())).as_bytes())
            .map_err(|source| LeftoversError::Record {
                path: self.path.clone(),
                source,
            })?;
        items.push(item);
        Ok(())
    }

    /// At the run's end: removes the record if nothing it lists is on the
    /// host any more (a kept directory aside) and returns what still is.
    /// When something is, the record stays for a reclaim after this process.
    pub fn close(&self) -> Vec<Item> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, items)) = state.as_ref() else {
            return Vec::new();
        };
        let left: Vec<Item> = items
            .iter()
            .filter(|i| !matches!(i, Item::KeptDir(_)) && i.exists())
            .cloned()
            .collect();
        if left.is_empty() {
            // Unlinked while still locked: a reclaim that opened it before
            // sees the link count drop to 0 once it gets the lock.
            if let Err(e) = fs::remove_file(&self.path) {
                tracing::warn!(record = %self.path.display(), error = %e, "removing the run record");
            }
            *state = None;
        }
        left
    }
}

/// The outcome of a reclaim, each entry a line for people.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reclaimed {
    /// Removed: its run is gone (or it had no record and nothing used it).
    pub removed: Vec<String>,
    /// Left: a live run's, or a thing with no record that something uses
    /// or that is too young to tell.
    pub alive: Vec<String>,
    /// Left on purpose: kept directories, directories with no record,
    /// things only root may remove.
    pub unrecorded: Vec<String>,
    /// Could not be removed, with the reason.
    pub failed: Vec<String>,
}

impl Reclaimed {
    /// Logs what was removed or could not be (a run's start).
    pub fn log(&self) {
        for r in &self.removed {
            tracing::warn!("removed what a gone run left: {r}");
        }
        for f in &self.failed {
            tracing::error!("could not remove what a gone run left: {f}");
        }
    }
}

/// Real-node things on the host that look like dra-e2e's, by node
/// (`<run>-<index>`), found before the records are read.
#[derive(Debug, Default)]
struct Unrecorded {
    nodes: BTreeMap<(String, String), Vec<Item>>,
}

impl Unrecorded {
    fn scan() -> Unrecorded {
        let mut seen = Unrecorded::default();
        let names = |dir: &Path| -> Vec<String> {
            fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        for n in names(Path::new("/run/netns")) {
            if let Some((run, i)) = netns_name(&n) {
                seen.add(run, i, Item::Netns(n.clone()));
            }
        }
        for n in names(Path::new("/sys/class/net")) {
            if let Some((run, i)) = link_name(&n) {
                seen.add(run, i, Item::Link(n.clone()));
            }
        }
        let mut roots = BTreeSet::new();
        for h in cgroups::hierarchies() {
            for n in names(&h) {
                if netns_name(&n).is_some() && h.join(&n).is_dir() {
                    roots.insert(n);
                }
            }
        }
        for n in roots {
            if let Some((run, i)) = netns_name(&n) {
                seen.add(run, i, Item::Cgroup(format!("/{n}")));
            }
        }
        seen
    }

    fn add(&mut self, run: &str, index: &str, item: Item) {
        self.nodes
            .entry((run.to_owned(), index.to_owned()))
            .or_default()
            .push(item);
    }

    fn reclaim(self, recorded: &BTreeSet<Item>, procs: &[Proc], out: &mut Reclaimed) {
        let root = is_root();
        for ((run, index), items) in self.nodes {
            let mut items: Vec<Item> = items
                .into_iter()
                .filter(|i| !recorded.contains(i) && i.exists())
                .collect();
            if items.is_empty() {
                continue;
            }
            items.sort_by_key(Item::rank);
            let what = items
                .iter()
                .map(Item::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let owner = format!("node {run}-{index} with no record");
            let users: Vec<String> = items.iter().flat_map(|i| i.users(procs)).collect();
            if !users.is_empty() {
                out.alive
                    .push(format!("{what} ({owner}, used by {})", summary(&users)));
                continue;
            }
            let young = items.iter().any(|i| match i {
                Item::Netns(n) => fs::metadata(netns_path(n))
                    .and_then(|m| m.modified())
                    .map(|t| {
                        SystemTime::now()
                            .duration_since(t)
                            .is_ok_and(|age| age < UNRECORDED_GRACE)
                    })
                    // Its age unknown: it may be a starting node's.
                    .unwrap_or(true),
                _ => false,
            });
            if young {
                out.alive.push(format!(
                    "{what} ({owner}, made less than {:?} ago: maybe a starting node's)",
                    UNRECORDED_GRACE
                ));
                continue;
            }
            if !root {
                out.unrecorded
                    .push(format!("{what} ({owner}, unused; only root can remove it)"));
                continue;
            }
            for item in items {
                match item.remove() {
                    Ok(()) => out.removed.push(format!("{item} ({owner}, unused)")),
                    Err(e) => out.failed.push(format!("{item} ({owner}, unused): {e}")),
                }
            }
        }
    }
}

/// `dra-e2e-*` directories in the temp dir, where local clusters live.
fn temp_dirs() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with("dra-e2e-")
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines about `tmp`: as root a reclaim also reports the real
    /// nodes of other runs on the machine.
    fn about(lines: &[String], tmp: &Path) -> Vec<String> {
        let tmp = tmp.display().to_string();
        lines.iter().filter(|l| l.contains(&tmp)).cloned().collect()
    }

    #[test]
    fn names_dra_e2e_makes_are_valid_others_not() {
        for ok in [
            Item::Netns("dra-e2e-1a2b3c4d-0".into()),
            Item::Link("dre1a2b3c4dh12".into()),
            Item::Cgroup("/dra-e2e-ab12-3".into()),
            Item::Dir("/tmp/dra-e2e-Xy12ab".into()),
            Item::KeptDir("/var/tmp/x/dra-e2e-q".into()),
        ] {
            assert!(ok.is_valid(), "{ok}");
        }
        for bad in [
            Item::Netns("cni-1234".into()),
            Item::Netns("dra-e2e-zz-0".into()),
            Item::Link("eth0".into()),
            Item::Link("dre1a2b3c4d5e6f7h1".into()),
            Item::Cgroup("/".into()),
            Item::Cgroup("dra-e2e-ab12-3".into()),
            Item::Cgroup("/system.slice".into()),
            Item::Dir("/".into()),
            Item::Dir("/home/user".into()),
            Item::Dir("relative/dra-e2e-x".into()),
            Item::Dir("/tmp/dra-e2e-x/../..".into()),
        ] {
            assert!(!bad.is_valid(), "{bad}");
        }
    }

    #[test]
    fn a_record_reads_back_what_was_added_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::at(tmp.path().join("runs"));
        let record = registry.start_record().unwrap();
        let items = vec![
            Item::Dir(tmp.path().join("dra-e2e-abc")),
            Item::Netns("dra-e2e-0000abcd-0".into()),
            Item::Link("dre0000abcdh0".into()),
            Item::Cgroup("/dra-e2e-0000abcd-0".into()),
        ];
        for i in &items {
            record.add(i.clone()).unwrap();
        }
        let text = fs::read_to_string(record.path()).unwrap();
        let back = Record::parse(&text).unwrap();
        assert_eq!(back.items, items);
        assert_eq!(back.pid, Some(std::process::id()));
        // One JSON object per line, the first naming the run.
        assert!(text.starts_with("{\"run\":{\"pid\":"), "{text}");
        assert!(
            text.contains("{\"netns\":\"dra-e2e-0000abcd-0\"}\n"),
            "{text}"
        );
        assert_eq!(
            record
                .add(Item::Dir("/etc".into()))
                .unwrap_err()
                .to_string(),
            "directory /etc is not a name dra-e2e makes; not recorded"
        );
    }

    #[test]
    fn a_line_cut_short_by_a_kill_is_skipped_a_bad_one_distrusts_the_record() {
        let head = "{\"run\":{\"pid\":7,\"started\":\"x\"}}\n";
        let r = Record::parse(&format!(
            "{head}{{\"dir\":\"/tmp/dra-e2e-a\"}}\n{{\"netns\":\"dra-e"
        ))
        .unwrap();
        assert_eq!(r.items, vec![Item::Dir("/tmp/dra-e2e-a".into())]);
        assert_eq!(r.pid, Some(7));
        assert_eq!(Record::parse("").unwrap(), Record::default());
        let e = Record::parse(&format!("{head}{{\"dir\":\"/home\"}}\n")).unwrap_err();
        assert!(
            e.contains("line 2: directory /home is not a name dra-e2e makes"),
            "{e}"
        );
        let e =
            Record::parse(&format!("{head}garbage\n{{\"dir\":\"/tmp/dra-e2e-a\"}}\n")).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }

    /// Liveness is the lock: held by the record's handle, another open of
    /// the file (even in this process) cannot take it; dropped, it can.
    #[test]
    fn a_live_runs_things_stay_a_gone_runs_go() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::at(tmp.path().join("runs"));
        let live_dir = tmp.path().join("dra-e2e-live");
        let gone_dir = tmp.path().join("dra-e2e-gone");
        let live = registry.start_record().unwrap();
        live.add(Item::Dir(live_dir.clone())).unwrap();
        fs::create_dir(&live_dir).unwrap();
        let gone = registry.start_record().unwrap();
        gone.add(Item::Dir(gone_dir.clone())).unwrap();
        fs::create_dir_all(gone_dir.join("real/x")).unwrap();
        let gone_path = gone.path().to_owned();
        drop(gone);

        let r = registry.reclaim(false);
        let t = tmp.path();
        assert_eq!(about(&r.failed, t), Vec::<String>::new());
        let (removed, alive) = (about(&r.removed, t), about(&r.alive, t));
        assert_eq!(removed.len(), 1, "{r:?}");
        assert!(
            removed[0].starts_with(&format!("directory {} (run ", gone_dir.display())),
            "{r:?}"
        );
        assert!(removed[0].ends_with(", gone)"), "{r:?}");
        assert_eq!(alive.len(), 1, "{r:?}");
        assert!(alive[0].ends_with(", alive)"), "{r:?}");
        assert!(!gone_dir.exists());
        assert!(!gone_path.exists(), "the gone run's record stays");
        assert!(live_dir.exists());
        assert!(live.path().exists());

        // Its end: the directory gone, the record goes too.
        fs::remove_dir(&live_dir).unwrap();
        assert_eq!(live.close(), Vec::<Item>::new());
        assert!(!live.path().exists());
        assert!(live.add(Item::Dir(live_dir)).is_err());
        let r = registry.reclaim(false);
        for lines in [&r.removed, &r.alive, &r.unrecorded, &r.failed] {
            assert_eq!(about(lines, t), Vec::<String>::new(), "{r:?}");
        }
    }

    #[test]
    fn a_record_just_being_made_is_left_to_its_run_an_old_one_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::at(tmp.path().join("runs"));
        registry.ensure().unwrap();
        // As a starting run has it between creating and locking it.
        let new = registry.dir().join(format!("0badcafe{NEW_SUFFIX}"));
        let file = File::create(&new).unwrap();
        let r = registry.reclaim(false);
        assert!(
            new.exists(),
            "a fresh record in the making was removed: {r:?}"
        );
        file.set_modified(std::time::SystemTime::now() - NEW_GRACE * 2)
            .unwrap();
        registry.reclaim(false);
        assert!(!new.exists(), "a dead run's record in the making stays");
    }

    #[test]
    fn a_run_that_could_not_clean_up_keeps_its_record_and_kept_dirs_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::at(tmp.path().join("runs"));
        let dir = tmp.path().join("dra-e2e-left");
        let kept = tmp.path().join("dra-e2e-kept");
        let record = registry.start_record().unwrap();
        record.add(Item::Dir(dir.clone())).unwrap();
        record.add(Item::KeptDir(kept.clone())).unwrap();
        fs::create_dir(&dir).unwrap();
        fs::create_dir(&kept).unwrap();
        assert_eq!(record.close(), vec![Item::Dir(dir.clone())]);
        assert!(record.path().exists());
        drop(record);
        let r = registry.reclaim(false);
        assert_eq!(about(&r.removed, tmp.path()).len(), 1, "{r:?}");
        let unrecorded = about(&r.unrecorded, tmp.path());
        assert_eq!(unrecorded.len(), 1, "{r:?}");
        assert!(unrecorded[0].starts_with("kept directory"), "{r:?}");
        assert!(!dir.exists());
        assert!(kept.exists());
    }

    #[test]
    fn an_untrusted_record_is_reported_and_nothing_of_it_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = Registry::at(tmp.path().join("runs"));
        registry.ensure().unwrap();
        let victim = tmp.path().join("precious");
        fs::create_dir(&victim).unwrap();
        let path = registry.dir().join("0badf00d.run");
        fs::write(&path, format!("{{\"dir\":\"{}\"}}\n", victim.display())).unwrap();
        let r = registry.reclaim(false);
        let failed = about(&r.failed, tmp.path());
        assert_eq!(failed.len(), 1, "{r:?}");
        assert!(failed[0].contains("is not a name dra-e2e makes"), "{r:?}");
        assert!(victim.exists());
        assert!(path.exists());
    }

    #[test]
    fn a_registry_others_can_write_in_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("runs");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let e = Registry::at(&dir).start_record().unwrap_err().to_string();
        assert!(e.contains("not a directory only this user"), "{e}");
        let r = Registry::at(&dir).reclaim(false);
        assert_eq!(about(&r.failed, tmp.path()).len(), 1, "{r:?}");
    }
}
