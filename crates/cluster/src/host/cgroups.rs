//! A real node's cgroup root: one directory per hierarchy, created before
//! the kubelet starts (it refuses a `cgroupRoot` that does not exist in every
//! hierarchy) and removed, children first, after the node's processes died.
use std::path::{Path, PathBuf};

const CGROUP_FS: &str = "/sys/fs/cgroup";

#[derive(Debug, thiserror::Error)]
#[error("cgroup {path}: {source}")]
pub struct CgroupError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The hierarchies mounted under /sys/fs/cgroup (cgroup v1 controllers, the
/// named systemd hierarchy, the unified v2 one), or /sys/fs/cgroup itself
/// on a pure cgroup v2 host.
pub fn hierarchies() -> Vec<PathBuf> {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mounts
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount_point = left.split_whitespace().nth(4)?;
            (matches!(fstype, "cgroup" | "cgroup2") && mount_point.starts_with(CGROUP_FS))
                .then(|| PathBuf::from(mount_point))
        })
        .collect()
}

/// `root` (such as `/dra-e2e-ab12-0`) in every hierarchy.
pub fn create(root: &str) -> Result<(), CgroupError> {
    for h in hierarchies() {
        let dir = h.join(root.trim_start_matches('/'));
        let err = |source| CgroupError {
            path: dir.clone(),
            source,
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(err(e)),
        }
        // A new cpuset has no CPUs or memory nodes, and no task can join it.
        if h.ends_with("cpuset") {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = std::fs::read_to_string(h.join(f)).map_err(err)?;
                std::fs::write(dir.join(f), v.trim()).map_err(err)?;
            }
        }
    }
    Ok(())
}

/// Removes `root` and everything below it in every hierarchy. Returns the
/// directories that could not be removed (they still hold processes).
pub fn remove(root: &str) -> Vec<String> {
    let mut left = Vec::new();
    for h in hierarchies() {
        let dir = h.join(root.trim_start_matches('/'));
        if dir.exists() {
            remove_tree(&dir, &mut left);
        }
    }
    left
}

fn remove_tree(dir: &Path, left: &mut Vec<String>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path(), left);
            }
        }
    }
    // Processes may take a moment to leave after they died.
    for attempt in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if attempt == 49 => left.push(format!("cgroup {}: {e}", dir.display())),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// The directories of `root` that still exist.
pub fn leftovers(root: &str) -> Vec<String> {
    hierarchies()
        .into_iter()
        .map(|h| h.join(root.trim_start_matches('/')))
        .filter(|d| d.exists())
        .map(|d| format!("cgroup {}", d.display()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup_hierarchies_of_this_host() {
        // Every Linux host running the tests has at least one hierarchy.
        let h = hierarchies();
        assert!(!h.is_empty());
        assert!(h.iter().all(|p| p.starts_with(CGROUP_FS)), "{h:?}");
    }
}
