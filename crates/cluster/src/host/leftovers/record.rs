//! The record format: one file per run, a line per thing made, so that a
//! run killed at any moment leaves a record that names everything it made
//! and nothing it did not, and that a later process can trust only as far
//! as the names in it are ones dra-e2e makes.
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{LeftoversError, Registry};

/// A record's file name ends in this; a record being written has `.new`.
pub(super) const RECORD_SUFFIX: &str = ".run";
pub(super) const NEW_SUFFIX: &str = ".new";

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

pub(super) fn netns_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("dra-e2e-")?;
    let (run, index) = rest.rsplit_once('-')?;
    (is_hex(run) && is_digits(index)).then_some((run, index))
}

pub(super) fn link_name(name: &str) -> Option<(&str, &str)> {
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

impl Registry {
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

    pub(super) fn owner(&self, path: &Path) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
