//! The /proc scans: which processes use a thing, and what is mounted
//! where, read from the kernel at the moment of a reclaim, since nothing
//! but a process's absence says that a thing is free to go.
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::Item;
use super::removal::netns_path;

impl Item {
    /// Processes that use it: joined the namespace, sit in the cgroup tree,
    /// or name the directory on their command line.
    pub(super) fn users(&self, procs: &[Proc]) -> Vec<String> {
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
}

/// Mount points at or below `dir`, as this process's mount namespace has them.
pub(super) fn mounts_below(dir: &Path) -> Vec<String> {
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
pub(super) fn summary(users: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = users[..users.len().min(SHOWN)].join(", ");
    if users.len() > SHOWN {
        s.push_str(&format!(" and {} more", users.len() - SHOWN));
    }
    s
}

/// A process, as far as deciding what it uses goes.
pub(super) struct Proc {
    pid: i32,
    net: Option<u64>,
    /// Its cgroup path in each hierarchy.
    cgroups: Vec<String>,
    cmdline: String,
}

pub(super) fn processes() -> Vec<Proc> {
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
