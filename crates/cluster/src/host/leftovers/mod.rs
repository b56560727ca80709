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

mod procs;
mod record;
mod removal;
mod unrecorded;

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_e2e_sys::is_root;

pub use record::{Item, Record, RunRecord};
pub use unrecorded::UNRECORDED_GRACE;

use procs::processes;
use record::{NEW_SUFFIX, RECORD_SUFFIX};
use unrecorded::{Unrecorded, temp_dirs};

/// The registry of root's runs: machine-wide, as the namespaces, links and
/// cgroups a run makes are.
pub const ROOT_REGISTRY: &str = "/run/dra-e2e";
/// Overrides where the records are kept.
pub const REGISTRY_ENV: &str = "DRA_E2E_RUN_RECORDS";
/// How long a `.new` record is left alone by other runs' reclaims: its run
/// creates it, then locks it, and between the two it looks like a gone
/// run's (parallel runs starting at once removed each other's this way). A
/// run that died in that instant leaves one that goes after this.
const NEW_GRACE: Duration = Duration::from_secs(60);

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    /// The lines about `tmp`: as root a reclaim also reports the real
    /// nodes of other runs on the machine.
    fn about(lines: &[String], tmp: &Path) -> Vec<String> {
        let tmp = tmp.display().to_string();
        lines.iter().filter(|l| l.contains(&tmp)).cloned().collect()
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
