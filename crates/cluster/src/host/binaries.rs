//! Where programs built by `hack/build-*.sh` live, found exactly as the
//! scripts place them so a directory a script printed is the one found here:
//! an explicit directory, else the build's environment variable, else
//! `<cache>/<build>/<versioned name>` with `<cache>` = `DRA_E2E_CACHE_DIR`,
//! else `${XDG_CACHE_HOME:-~/.cache}/dra-e2e` (the scripts' `cache_root`).
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The versions file the build scripts source, compiled in so the runner and
/// the scripts can never disagree on the cache directory.
const VERSIONS_ENV: &str = include_str!("../../../../hack/versions.env");

/// Environment variable overriding the cache root.
pub const CACHE_DIR_ENV: &str = "DRA_E2E_CACHE_DIR";

/// `KEY=value` lines the way the shell reads this simple file: comments and
/// blank lines ignored, optional quotes stripped.
pub fn parse_versions(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = v.trim().trim_matches('"').trim_matches('\'');
            (k.trim().to_owned(), v.to_owned())
        })
        .collect()
}

/// The versions pinned in `hack/versions.env`.
pub fn pinned_versions() -> BTreeMap<String, String> {
    parse_versions(VERSIONS_ENV)
}

/// Why a directory was chosen; shown in errors so a user knows what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirSource {
    /// Given by the caller (a command-line option or an API option).
    Explicit,
    /// From the named environment variable.
    Env(&'static str),
    /// The versioned cache directory the build script builds into.
    Cache,
}

impl fmt::Display for DirSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirSource::Explicit => f.write_str("given explicitly"),
            DirSource::Env(var) => write!(f, "from {var}"),
            DirSource::Cache => f.write_str("the default build cache"),
        }
    }
}

/// One build's place in the cache, and the variable that overrides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// Environment variable naming the directory of the built programs.
    pub dir_env: &'static str,
    /// The build's directory below the cache root, e.g.
    /// `controlplane/kube-v1.37.2-etcd-v3.7.3`.
    pub cache_path: PathBuf,
}

/// A directory expected to hold a build's programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinariesDir {
    pub dir: PathBuf,
    pub origin: DirSource,
}

impl BinariesDir {
    /// Applies the lookup rules with `env` as the environment. Empty
    /// variables count as unset, as `${VAR:-default}` does in the scripts.
    pub fn locate_with(
        explicit: Option<&Path>,
        build: &Build,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Self {
        let env = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(dir) = explicit {
            return Self {
                dir: dir.to_owned(),
                origin: DirSource::Explicit,
            };
        }
        if let Some(dir) = env(build.dir_env) {
            return Self {
                dir: dir.into(),
                origin: DirSource::Env(build.dir_env),
            };
        }
        Self {
            dir: cache_root_with(env).join(&build.cache_path),
            origin: DirSource::Cache,
        }
    }

    /// Applies the lookup rules with the process environment.
    pub fn locate(explicit: Option<&Path>, build: &Build) -> Self {
        Self::locate_with(explicit, build, |k| std::env::var_os(k))
    }

    /// Those of `names` that are not executable files in this directory.
    pub fn missing(&self, names: &[&str]) -> Vec<String> {
        names
            .iter()
            .filter(|n| !is_executable(&self.dir.join(n)))
            .map(|n| (*n).to_owned())
            .collect()
    }
}

/// The cache root: `DRA_E2E_CACHE_DIR`, else
/// `${XDG_CACHE_HOME:-~/.cache}/dra-e2e`.
pub fn cache_root() -> PathBuf {
    cache_root_with(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
}

fn cache_root_with(env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    match env(CACHE_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => env("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env("HOME").unwrap_or_default()).join(".cache"))
            .join("dra-e2e"),
    }
}

/// A regular file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// An environment of the given variables only, for lookups in tests.
#[cfg(test)]
pub(crate) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
    let map: std::collections::HashMap<String, OsString> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    move |k| map.get(k).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> Build {
        Build {
            dir_env: "DIR_ENV",
            cache_path: PathBuf::from("kind/v1"),
        }
    }

    #[test]
    fn parse_ignores_comments_and_quotes() {
        let v = parse_versions("# c\nA=\"v1.9.0\"\n\nB=v3.1.0\n  C = 'x' \nnot a pair\n");
        let want: BTreeMap<String, String> = [("A", "v1.9.0"), ("B", "v3.1.0"), ("C", "x")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(v, want);
    }

    #[test]
    fn explicit_beats_env_beats_cache() {
        let env = env_of(&[("DIR_ENV", "/env"), ("HOME", "/home/u")]);
        let d = BinariesDir::locate_with(Some(Path::new("/x")), &build(), &env);
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (Path::new("/x"), DirSource::Explicit)
        );
        let d = BinariesDir::locate_with(None, &build(), &env);
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (Path::new("/env"), DirSource::Env("DIR_ENV"))
        );
        assert_eq!(d.origin.to_string(), "from DIR_ENV");
    }

    #[test]
    fn the_cache_root_is_the_scripts_cache_root() {
        let d = BinariesDir::locate_with(None, &build(), env_of(&[("HOME", "/home/u")]));
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (
                Path::new("/home/u/.cache/dra-e2e/kind/v1"),
                DirSource::Cache
            )
        );
        let d = BinariesDir::locate_with(
            None,
            &build(),
            env_of(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")]),
        );
        assert_eq!(d.dir, Path::new("/xdg/dra-e2e/kind/v1"));
        let d = BinariesDir::locate_with(
            None,
            &build(),
            env_of(&[
                ("HOME", "/home/u"),
                ("XDG_CACHE_HOME", "/xdg"),
                (CACHE_DIR_ENV, "/c"),
                ("DIR_ENV", ""),
            ]),
        );
        assert_eq!(d.dir, Path::new("/c/kind/v1"));
    }

    #[test]
    fn missing_lists_absent_and_non_executable_files_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(tmp.path().join("a"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(tmp.path().join("b"), "").unwrap();
        let d = BinariesDir {
            dir: tmp.path().to_owned(),
            origin: DirSource::Cache,
        };
        assert_eq!(d.missing(&["a", "b", "c"]), ["b", "c"]);
    }
}
