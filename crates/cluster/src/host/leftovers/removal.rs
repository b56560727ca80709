//! Removal: how each kind of thing a run makes goes, in which order, and
//! the reclaim of a gone run's record, which removes only what nothing uses
//! and keeps the record until all of it went.
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::procs::{Proc, mounts_below, summary};
use super::record::NEW_SUFFIX;
use super::{Item, NEW_GRACE, Reclaimed, Record, Registry};
use crate::host::cgroups;

impl Item {
    /// Whether any of it is still on the host.
    pub fn exists(&self) -> bool {
        match self {
            Item::Netns(n) => netns_path(n).exists(),
            Item::Link(n) => link_exists(n),
            Item::Cgroup(r) => !cgroups::leftovers(r).is_empty(),
            Item::Dir(p) | Item::KeptDir(p) => p.symlink_metadata().is_ok(),
        }
    }

    /// Removes it; gone already is fine.
    pub(super) fn remove(&self) -> Result<(), String> {
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
    pub(super) fn rank(&self) -> u8 {
        match self {
            Item::Netns(_) => 0,
            Item::Link(_) => 1,
            Item::Cgroup(_) => 2,
            Item::Dir(_) | Item::KeptDir(_) => 3,
        }
    }
}

pub(super) fn netns_path(name: &str) -> PathBuf {
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

impl Registry {
    pub(super) fn reclaim_record(
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
