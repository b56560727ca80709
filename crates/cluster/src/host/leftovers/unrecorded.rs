//! Old versions' leftovers: things made before runs kept records, found by
//! their names alone, which is why they go only when no process uses them
//! and they are too old to be a starting node's.
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use dra_e2e_sys::is_root;

use super::procs::{Proc, summary};
use super::record::{link_name, netns_name};
use super::removal::netns_path;
use super::{Item, Reclaimed};
use crate::host::cgroups;

/// How old a network namespace with no record must be before it counts as
/// left over when no process uses it. An older version's live run makes its
/// node's namespace a few seconds before the node's first process joins it;
/// past this nothing of a live run is without a process.
pub const UNRECORDED_GRACE: Duration = Duration::from_secs(300);

/// Real-node things on the host that look like dra-e2e's, by node
/// (`<run>-<index>`), found before the records are read.
#[derive(Debug, Default)]
pub(super) struct Unrecorded {
    nodes: BTreeMap<(String, String), Vec<Item>>,
}

impl Unrecorded {
    pub(super) fn scan() -> Unrecorded {
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

    pub(super) fn reclaim(self, recorded: &BTreeSet<Item>, procs: &[Proc], out: &mut Reclaimed) {
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
pub(super) fn temp_dirs() -> Vec<PathBuf> {
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
