//! Where the control-plane binaries live.
//!
//! The lookup mirrors `hack/build-controlplane.sh` exactly, so a directory the
//! script printed is the one found here: an explicit option, else
//! `DRA_E2E_BINARIES_DIR`, else the versioned cache directory.
use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The versions file the build script sources; compiled in so the runner and
/// the script can never disagree on the cache directory.
const VERSIONS_ENV: &str = include_str!("../../../hack/versions.env");

/// Environment variable naming a directory that holds all four binaries.
pub const BINARIES_DIR_ENV: &str = "DRA_E2E_BINARIES_DIR";
/// Environment variable overriding the cache root.
pub const CACHE_DIR_ENV: &str = "DRA_E2E_CACHE_DIR";

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
        Self::parse(VERSIONS_ENV).unwrap_or_else(|| Self {
            kube: String::new(),
            etcd: String::new(),
        })
    }

    /// Reads `KEY=value` lines the way the shell would for this simple file:
    /// comments and blank lines ignored, optional quotes stripped.
    fn parse(text: &str) -> Option<Self> {
        let mut kube = None;
        let mut etcd = None;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"').trim_matches('\'').to_owned();
            match key.trim() {
                "KUBE_VERSION" => kube = Some(value),
                "ETCD_VERSION" => etcd = Some(value),
                _ => {}
            }
        }
        Some(Self {
            kube: kube?,
            etcd: etcd?,
        })
    }

    /// The directory name inside `<cache>/controlplane/`.
    pub fn cache_subdir(&self) -> String {
        format!("kube-{}-etcd-{}", self.kube, self.etcd)
    }
}

/// Why a directory was chosen; shown in errors so a user knows what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirSource {
    /// Given by the caller (`--binaries-dir`, `LocalClusterOptions::binaries_dir`).
    Explicit,
    /// From `DRA_E2E_BINARIES_DIR`.
    Env,
    /// The versioned cache directory `make controlplane` builds into.
    Cache,
}

impl fmt::Display for DirSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirSource::Explicit => f.write_str("given explicitly"),
            DirSource::Env => write!(f, "from {BINARIES_DIR_ENV}"),
            DirSource::Cache => f.write_str("the default build cache"),
        }
    }
}

/// A directory expected to hold the control-plane binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinariesDir {
    pub dir: PathBuf,
    pub origin: DirSource,
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

impl BinariesDir {
    /// Applies the lookup rules with the process environment.
    pub fn locate(explicit: Option<&Path>) -> Self {
        Self::locate_with(explicit, &Versions::pinned(), |k| std::env::var_os(k))
    }

    /// Applies the lookup rules with `env` as the environment. Empty variables
    /// count as unset, as `${VAR:-default}` does in the script.
    pub fn locate_with(
        explicit: Option<&Path>,
        versions: &Versions,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Self {
        let env = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(dir) = explicit {
            return Self {
                dir: dir.to_owned(),
                origin: DirSource::Explicit,
            };
        }
        if let Some(dir) = env(BINARIES_DIR_ENV) {
            return Self {
                dir: dir.into(),
                origin: DirSource::Env,
            };
        }
        let cache_root = match env(CACHE_DIR_ENV) {
            Some(dir) => PathBuf::from(dir),
            None => {
                let xdg = env("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or_else(|| {
                    PathBuf::from(env("HOME").unwrap_or_default()).join(".cache")
                });
                xdg.join("dra-e2e")
            }
        };
        Self {
            dir: cache_root
                .join("controlplane")
                .join(versions.cache_subdir()),
            origin: DirSource::Cache,
        }
    }

    /// Checks that every binary is present and executable.
    pub fn verify(self) -> Result<Binaries, MissingBinaries> {
        let missing: Vec<String> = ALL
            .iter()
            .filter(|name| !is_executable(&self.dir.join(name)))
            .map(|name| (*name).to_owned())
            .collect();
        if !missing.is_empty() {
            return Err(MissingBinaries {
                dir: self.dir,
                origin: self.origin,
                missing,
            });
        }
        Ok(Binaries { dir: self.dir })
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A verified directory holding all four binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// Locates and verifies in one step.
    pub fn find(explicit: Option<&Path>) -> Result<Self, MissingBinaries> {
        BinariesDir::locate(explicit).verify()
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
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

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
    fn explicit_beats_env_beats_cache() {
        let env = env_of(&[(BINARIES_DIR_ENV, "/env"), ("HOME", "/home/u")]);
        let d = BinariesDir::locate_with(Some(Path::new("/x")), &versions(), &env);
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (Path::new("/x"), DirSource::Explicit)
        );
        let d = BinariesDir::locate_with(None, &versions(), &env);
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (Path::new("/env"), DirSource::Env)
        );
    }

    #[test]
    fn cache_path_matches_the_build_script() {
        let v = versions();
        let d = BinariesDir::locate_with(None, &v, env_of(&[("HOME", "/home/u")]));
        assert_eq!(
            d.dir,
            Path::new("/home/u/.cache/dra-e2e/controlplane/kube-v1.2.3-etcd-v4.5.6")
        );
        assert_eq!(d.origin, DirSource::Cache);
        let d = BinariesDir::locate_with(
            None,
            &v,
            env_of(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")]),
        );
        assert_eq!(
            d.dir,
            Path::new("/xdg/dra-e2e/controlplane/kube-v1.2.3-etcd-v4.5.6")
        );
        let d = BinariesDir::locate_with(
            None,
            &v,
            env_of(&[
                ("HOME", "/home/u"),
                ("XDG_CACHE_HOME", "/xdg"),
                (CACHE_DIR_ENV, "/c"),
                (BINARIES_DIR_ENV, ""),
            ]),
        );
        assert_eq!(d.dir, Path::new("/c/controlplane/kube-v1.2.3-etcd-v4.5.6"));
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
        let err = BinariesDir {
            dir: tmp.path().to_owned(),
            origin: DirSource::Env,
        }
        .verify()
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
