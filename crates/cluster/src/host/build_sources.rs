//! The scripts and Go wrapper modules that build the local cluster's programs
//! (`hack/`), carried by the runner. A runner installed with `cargo install`
//! has no checkout beside it, yet its first run builds the control plane and
//! the real nodes' kubelet and containerd as a clone's does: it writes these
//! files into its cache once, under a name made of their content, and runs
//! the build from there. A clone's runner takes the same path, so the first
//! run CI makes is the one an installed runner makes.
//!
//! The scripts find everything relative to themselves, so the copy is
//! complete with this list; `make controlplane` and `make node` keep running
//! them in the checkout.
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// Each file by its path under `hack/`, whether it is a program, and its
/// text.
const FILES: &[(&str, bool, &str)] = &[
    (
        "build-controlplane.sh",
        true,
        include_str!("../../../../hack/build-controlplane.sh"),
    ),
    (
        "build-node.sh",
        true,
        include_str!("../../../../hack/build-node.sh"),
    ),
    ("lib.sh", false, include_str!("../../../../hack/lib.sh")),
    (
        "versions.env",
        false,
        include_str!("../../../../hack/versions.env"),
    ),
    (
        "k8s/go.mod",
        false,
        include_str!("../../../../hack/k8s/go.mod"),
    ),
    (
        "k8s/go.sum",
        false,
        include_str!("../../../../hack/k8s/go.sum"),
    ),
    (
        "etcd/go.mod",
        false,
        include_str!("../../../../hack/etcd/go.mod"),
    ),
    (
        "etcd/go.sum",
        false,
        include_str!("../../../../hack/etcd/go.sum"),
    ),
    (
        "containerd/go.mod",
        false,
        include_str!("../../../../hack/containerd/go.mod"),
    ),
    (
        "containerd/go.sum",
        false,
        include_str!("../../../../hack/containerd/go.sum"),
    ),
    (
        "containerd/tools.go",
        false,
        include_str!("../../../../hack/containerd/tools.go"),
    ),
];

/// Why the build sources could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing the build scripts into the cache ({}): {source}", path.display())]
pub struct WriteError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The directory the build sources are in under `cache_root`
/// (`<cache_root>/build-sources/<content digest>`), written first unless a
/// complete copy is there.
pub fn write(cache_root: &Path) -> Result<PathBuf, WriteError> {
    let mut digest = Sha256::new();
    for (path, program, text) in FILES {
        digest.update(path.as_bytes());
        digest.update([u8::from(*program)]);
        digest.update(text.len().to_le_bytes());
        digest.update(text.as_bytes());
    }
    let name: String = digest
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let parent = cache_root.join("build-sources");
    let dir = parent.join(&name);
    // The directory appears only by the rename below: whole, or not at all.
    if dir.is_dir() {
        return Ok(dir);
    }
    let fail = |path: &Path| {
        let path = path.to_owned();
        move |source| WriteError { path, source }
    };
    let tmp = parent.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (path, program, text) in FILES {
        let file = tmp.join(path);
        if let Some(d) = file.parent() {
            std::fs::create_dir_all(d).map_err(fail(d))?;
        }
        std::fs::write(&file, text).map_err(fail(&file))?;
        if *program {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                .map_err(fail(&file))?;
        }
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another run wrote the same content first.
        Err(_) if dir.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(fail(&dir)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_the_checkouts_hack_files_and_written_once() {
        let cache = tempfile::tempdir().unwrap();
        let dir = write(cache.path()).unwrap();
        assert!(dir.starts_with(cache.path().join("build-sources")));
        let hack = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack");
        for (path, program, _) in FILES {
            let copy = dir.join(path);
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                std::fs::read(hack.join(path)).unwrap(),
                "{path}"
            );
            let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
            assert_eq!(mode & 0o111 != 0, *program, "{path}: mode {mode:o}");
        }
        // A second run finds it; a changed file there is the user's, kept.
        std::fs::write(dir.join("lib.sh"), "# mine\n").unwrap();
        assert_eq!(write(cache.path()).unwrap(), dir);
        assert_eq!(
            std::fs::read_to_string(dir.join("lib.sh")).unwrap(),
            "# mine\n"
        );
        let entries = std::fs::read_dir(cache.path().join("build-sources"))
            .unwrap()
            .count();
        assert_eq!(entries, 1, "no temporary directory left behind");
    }

    #[test]
    fn every_file_the_build_scripts_source_or_build_in_is_carried() {
        // The scripts read `$here/<file>` and build in `$here/<module>`;
        // each such name must be in the list, or an installed runner's
        // build fails where a clone's works.
        let carried: Vec<&str> = FILES.iter().map(|(p, _, _)| *p).collect();
        for script in ["build-controlplane.sh", "build-node.sh", "lib.sh"] {
            let text = FILES.iter().find(|(p, _, _)| *p == script).unwrap().2;
            let used = ["$here/", "$1/"].into_iter().flat_map(|prefix| {
                text.match_indices(prefix).map(move |(at, _)| {
                    let rest = &text[at + prefix.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || "_.-".contains(c)))
                        .unwrap_or(rest.len());
                    &rest[..end]
                })
            });
            for name in used {
                assert!(
                    carried
                        .iter()
                        .any(|p| *p == name || p.starts_with(&format!("{name}/"))),
                    "{script} uses {name}, which the runner does not carry"
                );
            }
        }
    }
}
