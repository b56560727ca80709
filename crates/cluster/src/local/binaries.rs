//! Where the control-plane binaries live: `hack/build-controlplane.sh`'s
//! build, found by the shared lookup ([`crate::host::binaries`]) with
//! `DRA_E2E_BINARIES_DIR` and the `controlplane/kube-…-etcd-…` cache directory.
use std::path::{Path, PathBuf};

pub use crate::host::binaries::{BinariesDir, DirSource};
use crate::host::binaries::{Build, pinned_versions};

/// Environment variable naming a directory that holds all four binaries.
pub const BINARIES_DIR_ENV: &str = "DRA_E2E_BINARIES_DIR";

pub const ETCD: &str = "etcd";
pub const KUBE_APISERVER: &str = "kube-apiserver";
pub const KUBE_SCHEDULER: &str = "kube-scheduler";
pub const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// Every binary a local cluster runs.
pub const ALL: [&str; 4] = [
    ETCD,
    KUBE_APISERVER,
    KUBE_SCHEDULER,
    KUBE_CONTROLLER_MANAGER,
];

/// The Kubernetes and etcd versions the binaries are built at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    pub kube: String,
    pub etcd: String,
}

impl Versions {
    /// The versions pinned in `hack/versions.env`.
    pub fn pinned() -> Self {
        // The file is part of the source tree; a missing key is a build defect
        // caught by the unit tests, so an empty string is enough of a fallback.
        Self::from_map(&pinned_versions()).unwrap_or_else(|| Self {
            kube: String::new(),
            etcd: String::new(),
        })
    }

    /// The pinned etcd with the control plane at `kube` (`--kube-version`).
    pub fn at(kube: crate::host::kube_version::KubeVersion) -> Self {
        Self {
            kube: kube.to_string(),
            ..Self::pinned()
        }
    }

    fn from_map(map: &std::collections::BTreeMap<String, String>) -> Option<Self> {
        Some(Self {
            kube: map.get("KUBE_VERSION")?.clone(),
            etcd: map.get("ETCD_VERSION")?.clone(),
        })
    }

    #[cfg(test)]
    fn parse(text: &str) -> Option<Self> {
        Self::from_map(&crate::host::binaries::parse_versions(text))
    }

    /// The directory name inside `<cache>/controlplane/`.
    pub fn cache_subdir(&self) -> String {
        format!("kube-{}-etcd-{}", self.kube, self.etcd)
    }

    /// The build's place in the cache.
    pub fn build(&self) -> Build {
        Build {
            dir_env: BINARIES_DIR_ENV,
            cache_path: Path::new("controlplane").join(self.cache_subdir()),
        }
    }
}

/// Binaries are missing; the message tells the user how to get them.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "control-plane binaries not found: {dir} ({origin}) has no executable {missing}; \
     run `make controlplane` to build them (the first build takes about half an hour on 2 cores) \
     or set {BINARIES_DIR_ENV} to a directory holding etcd, kube-apiserver, kube-scheduler and \
     kube-controller-manager",
    dir = .dir.display(),
    missing = .missing.join(", ")
)]
pub struct MissingBinaries {
    pub dir: PathBuf,
    pub origin: DirSource,
    pub missing: Vec<String>,
}

/// The directory that should hold the binaries, as the process environment
/// says.
pub fn locate(explicit: Option<&Path>) -> BinariesDir {
    locate_at(explicit, &Versions::pinned())
}

/// The same for a build at `versions` (`--kube-version`).
pub fn locate_at(explicit: Option<&Path>, versions: &Versions) -> BinariesDir {
    BinariesDir::locate(explicit, &versions.build())
}

/// Checks that every binary is present and executable.
pub fn verify(dir: BinariesDir) -> Result<Binaries, MissingBinaries> {
    let missing = dir.missing(&ALL);
    if !missing.is_empty() {
        return Err(MissingBinaries {
            dir: dir.dir,
            origin: dir.origin,
            missing,
        });
    }
    Ok(Binaries { dir: dir.dir })
}

/// A verified directory holding all four binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// Locates and verifies in one step.
    pub fn find(explicit: Option<&Path>) -> Result<Self, MissingBinaries> {
        verify(locate(explicit))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of one of the binaries in [`ALL`].
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use crate::host::binaries::env_of;

    fn versions() -> Versions {
        Versions {
            kube: "v1.2.3".into(),
            etcd: "v4.5.6".into(),
        }
    }

    #[test]
    fn pinned_versions_come_from_versions_env() {
        let v = Versions::pinned();
        assert!(v.kube.starts_with("v1."), "{v:?}");
        assert!(v.etcd.starts_with("v3."), "{v:?}");
    }

    #[test]
    fn parse_ignores_comments_and_quotes() {
        let v = Versions::parse("# c\nKUBE_VERSION=\"v1.9.0\"\n\nETCD_VERSION=v3.1.0\nOTHER=x\n");
        assert_eq!(
            v,
            Some(Versions {
                kube: "v1.9.0".into(),
                etcd: "v3.1.0".into()
            })
        );
        assert_eq!(Versions::parse("KUBE_VERSION=v1\n"), None);
    }

    #[test]
    fn the_build_is_found_by_its_variable_and_cache_directory() {
        // The rules themselves are host::binaries's, tested there.
        let build = versions().build();
        let env = env_of(&[(BINARIES_DIR_ENV, "/env"), ("HOME", "/home/u")]);
        let d = BinariesDir::locate_with(None, &build, &env);
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (Path::new("/env"), DirSource::Env(BINARIES_DIR_ENV))
        );
        let d = BinariesDir::locate_with(None, &build, env_of(&[("HOME", "/home/u")]));
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (
                Path::new("/home/u/.cache/dra-e2e/controlplane/kube-v1.2.3-etcd-v4.5.6"),
                DirSource::Cache
            )
        );
    }

    #[test]
    fn verify_lists_missing_and_non_executable_binaries() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(ETCD), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            tmp.path().join(ETCD),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(tmp.path().join(KUBE_APISERVER), "").unwrap();
        let err = verify(BinariesDir {
            dir: tmp.path().to_owned(),
            origin: DirSource::Env(BINARIES_DIR_ENV),
        })
        .unwrap_err();
        assert_eq!(
            err.missing,
            vec![KUBE_APISERVER, KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER]
        );
        let msg = err.to_string();
        assert!(msg.contains("make controlplane"), "{msg}");
        assert!(msg.contains(BINARIES_DIR_ENV), "{msg}");
        assert!(msg.contains(&tmp.path().display().to_string()), "{msg}");
    }
}
