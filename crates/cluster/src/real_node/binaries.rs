//! Where a real node's programs live.
//!
//! The built ones (kubelet, containerd, its runc shim, ctr) are looked up as
//! `hack/build-node.sh` places them, by the shared lookup
//! ([`crate::host::binaries`]) with `DRA_E2E_NODE_BINARIES_DIR` and the
//! `node/kube-<KUBE_VERSION>-containerd-<CONTAINERD_VERSION>` cache directory. The host ones (runc, the CNI plugins,
//! busybox, iptables) come from Debian packages at fixed paths.
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::host::binaries::{BinariesDir, DirSource};
use crate::host::binaries::{Build, is_executable, pinned_versions};

/// Environment variable naming a directory with the built binaries.
pub const NODE_BINARIES_DIR_ENV: &str = "DRA_E2E_NODE_BINARIES_DIR";

pub const KUBELET: &str = "kubelet";
pub const CONTAINERD: &str = "containerd";
pub const CONTAINERD_SHIM: &str = "containerd-shim-runc-v2";
pub const CTR: &str = "ctr";
/// Upstream's sample device plugin (`test/images/sample-device-plugin`), the
/// program of the image upstream's device-plugin scenarios run.
pub const SAMPLE_DEVICE_PLUGIN: &str = "sampledeviceplugin";
/// The programs `hack/build-node.sh` builds.
pub const BUILT: [&str; 5] = [
    KUBELET,
    CONTAINERD,
    CONTAINERD_SHIM,
    CTR,
    SAMPLE_DEVICE_PLUGIN,
];

/// Where Debian's containernetworking-plugins puts the CNI plugins.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// The CNI plugins a node's network configuration uses.
pub const CNI_PLUGINS: [&str; 4] = ["bridge", "host-local", "loopback", "portmap"];
/// Debian's busybox-static.
pub const BUSYBOX: &str = "/bin/busybox";
/// Debian's iptables (nft or legacy, whichever `update-alternatives` chose):
/// each node's NAT rules for the `kubernetes` Service are made with it.
pub const IPTABLES: &str = "/usr/sbin/iptables";
/// Where runc is looked for when it is not on `PATH`.
const RUNC_FALLBACKS: [&str; 3] = ["/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"];

/// The versions the built binaries have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVersions {
    pub kube: String,
    pub containerd: String,
}

impl NodeVersions {
    /// The versions pinned in `hack/versions.env`.
    pub fn pinned() -> Self {
        // The file is part of the source tree; a missing key is caught by the
        // unit tests.
        let map = pinned_versions();
        let get = |k: &str| map.get(k).cloned().unwrap_or_default();
        Self {
            kube: get("KUBE_VERSION"),
            containerd: get("CONTAINERD_VERSION"),
        }
    }

    /// The pinned containerd with the kubelet at `kubelet` (`--kubelet-version`).
    pub fn with_kubelet(kubelet: crate::host::kube_version::KubeVersion) -> Self {
        Self {
            kube: kubelet.to_string(),
            ..Self::pinned()
        }
    }

    /// The directory name inside `<cache>/node/`.
    pub fn cache_subdir(&self) -> String {
        format!("kube-{}-containerd-{}", self.kube, self.containerd)
    }

    /// The build's place in the cache.
    pub fn build(&self) -> Build {
        Build {
            dir_env: NODE_BINARIES_DIR_ENV,
            cache_path: Path::new("node").join(self.cache_subdir()),
        }
    }
}

/// A host program that is missing, and the Debian package that has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingHostProgram {
    pub path: PathBuf,
    pub package: &'static str,
}

/// Some of a real node's programs are missing; the message says which and
/// how to get them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingNodeBinaries {
    pub dir: PathBuf,
    pub origin: DirSource,
    /// Names from [`BUILT`] that `dir` lacks.
    pub built: Vec<String>,
    pub host: Vec<MissingHostProgram>,
}

impl fmt::Display for MissingNodeBinaries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("real-node programs not found:")?;
        if !self.built.is_empty() {
            write!(
                f,
                " {} ({}) has no executable {}; run `make node` (hack/build-node.sh) to build \
                 them (about 6 minutes on 2 cores) or set {NODE_BINARIES_DIR_ENV} to a directory \
                 holding {}",
                self.dir.display(),
                self.origin,
                self.built.join(", "),
                BUILT.join(", "),
            )?;
            if !self.host.is_empty() {
                f.write_str(";")?;
            }
        }
        if !self.host.is_empty() {
            let paths: Vec<String> = self
                .host
                .iter()
                .map(|m| m.path.display().to_string())
                .collect();
            let mut packages: Vec<&str> = self.host.iter().map(|m| m.package).collect();
            packages.dedup();
            write!(
                f,
                " missing {}; install them with `apt-get install {}` (hack/build-node.sh does \
                 that when run as root)",
                paths.join(", "),
                packages.join(" "),
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for MissingNodeBinaries {}

/// Every program a real node runs, all verified executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBinaries {
    /// The directory of the built binaries; containerd finds its shim on
    /// `PATH`, so this goes in front of the node's `PATH`.
    pub dir: PathBuf,
    pub kubelet: PathBuf,
    pub containerd: PathBuf,
    pub shim: PathBuf,
    pub ctr: PathBuf,
    pub sample_device_plugin: PathBuf,
    pub runc: PathBuf,
    pub cni_bin_dir: PathBuf,
    pub busybox: PathBuf,
}

/// The directory that should hold the built binaries, as the process
/// environment says.
pub fn locate(explicit: Option<&Path>) -> BinariesDir {
    locate_at(explicit, &NodeVersions::pinned())
}

/// The same for a build at `versions` (`--kubelet-version`).
pub fn locate_at(explicit: Option<&Path>, versions: &NodeVersions) -> BinariesDir {
    BinariesDir::locate(explicit, &versions.build())
}

/// Checks the built binaries in `dir` and the host programs (runc looked up
/// on `path_var`, the rest at fixed paths below `host_root`).
pub fn verify_with(
    dir: BinariesDir,
    path_var: Option<OsString>,
    host_root: &Path,
) -> Result<NodeBinaries, MissingNodeBinaries> {
    let built = dir.missing(&BUILT);
    let at_root = |p: &str| host_root.join(p.trim_start_matches('/'));
    let mut host = Vec::new();
    let runc = find_runc(path_var, host_root);
    if runc.is_none() {
        host.push(MissingHostProgram {
            path: PathBuf::from(RUNC_FALLBACKS[0]),
            package: "runc",
        });
    }
    for plugin in CNI_PLUGINS {
        let p = Path::new(CNI_BIN_DIR).join(plugin);
        if !is_executable(&at_root(&p.to_string_lossy())) {
            host.push(MissingHostProgram {
                path: p,
                package: "containernetworking-plugins",
            });
        }
    }
    if !is_executable(&at_root(BUSYBOX)) {
        host.push(MissingHostProgram {
            path: PathBuf::from(BUSYBOX),
            package: "busybox-static",
        });
    }
    if !is_executable(&at_root(IPTABLES)) {
        host.push(MissingHostProgram {
            path: PathBuf::from(IPTABLES),
            package: "iptables",
        });
    }
    if !built.is_empty() || !host.is_empty() {
        return Err(MissingNodeBinaries {
            dir: dir.dir,
            origin: dir.origin,
            built,
            host,
        });
    }
    let dir = dir.dir;
    Ok(NodeBinaries {
        kubelet: dir.join(KUBELET),
        containerd: dir.join(CONTAINERD),
        shim: dir.join(CONTAINERD_SHIM),
        ctr: dir.join(CTR),
        sample_device_plugin: dir.join(SAMPLE_DEVICE_PLUGIN),
        dir,
        runc: runc.unwrap_or_default(),
        cni_bin_dir: at_root(CNI_BIN_DIR),
        busybox: at_root(BUSYBOX),
    })
}

impl NodeBinaries {
    /// Locates and verifies (on this machine) in one step.
    pub fn find(explicit: Option<&Path>) -> Result<Self, MissingNodeBinaries> {
        verify_with(locate(explicit), std::env::var_os("PATH"), Path::new("/"))
    }
}

/// runc on `PATH` (as containerd finds it), else at Debian's path. Relative
/// `PATH` entries are ignored. `host_root` prefixes the fallbacks (tests).
fn find_runc(path_var: Option<OsString>, host_root: &Path) -> Option<PathBuf> {
    let on_path = path_var.iter().flat_map(std::env::split_paths);
    on_path
        .filter(|d| d.is_absolute())
        .map(|d| d.join("runc"))
        .chain(
            RUNC_FALLBACKS
                .iter()
                .map(|p| host_root.join(p.trim_start_matches('/'))),
        )
        .find(|p| is_executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use crate::host::binaries::env_of;

    fn versions() -> NodeVersions {
        NodeVersions {
            kube: "v1.2.3".into(),
            containerd: "v4.5.6".into(),
        }
    }

    fn touch_exe(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn pinned_versions_come_from_versions_env() {
        let v = NodeVersions::pinned();
        assert!(v.kube.starts_with("v1."), "{v:?}");
        assert!(v.containerd.starts_with("v2."), "{v:?}");
    }

    #[test]
    fn the_build_is_found_by_its_variable_and_cache_directory() {
        // The rules themselves are host::binaries's, tested there.
        let build = versions().build();
        let env = env_of(&[(NODE_BINARIES_DIR_ENV, "/env"), ("HOME", "/home/u")]);
        let d = BinariesDir::locate_with(None, &build, &env);
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (Path::new("/env"), DirSource::Env(NODE_BINARIES_DIR_ENV))
        );
        let d = BinariesDir::locate_with(None, &build, env_of(&[("HOME", "/home/u")]));
        assert_eq!(
            (d.dir.as_path(), d.origin),
            (
                Path::new("/home/u/.cache/dra-e2e/node/kube-v1.2.3-containerd-v4.5.6"),
                DirSource::Cache
            )
        );
    }

    #[test]
    fn missing_programs_are_named_with_how_to_get_them() {
        let built = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        touch_exe(&built.path().join(KUBELET));
        touch_exe(&built.path().join(CTR));
        std::fs::write(built.path().join(CONTAINERD), "").unwrap(); // not executable
        touch_exe(&root.path().join("usr/lib/cni/bridge"));
        touch_exe(&root.path().join("usr/lib/cni/loopback"));
        touch_exe(&root.path().join("usr/lib/cni/portmap"));
        let err = verify_with(
            BinariesDir {
                dir: built.path().to_owned(),
                origin: DirSource::Env(NODE_BINARIES_DIR_ENV),
            },
            None,
            root.path(),
        )
        .unwrap_err();
        assert_eq!(
            err.built,
            [CONTAINERD, CONTAINERD_SHIM, SAMPLE_DEVICE_PLUGIN]
        );
        let host: Vec<_> = err
            .host
            .iter()
            .map(|m| (m.path.clone(), m.package))
            .collect();
        assert_eq!(
            host,
            [
                (PathBuf::from("/usr/sbin/runc"), "runc"),
                (
                    PathBuf::from("/usr/lib/cni/host-local"),
                    "containernetworking-plugins"
                ),
                (PathBuf::from("/bin/busybox"), "busybox-static"),
                (PathBuf::from("/usr/sbin/iptables"), "iptables"),
            ]
        );
        let msg = err.to_string();
        for want in [
            "make node",
            "hack/build-node.sh",
            NODE_BINARIES_DIR_ENV,
            "containerd, containerd-shim-runc-v2",
            "apt-get install runc containernetworking-plugins busybox-static iptables",
            &built.path().display().to_string(),
        ] {
            assert!(msg.contains(want), "{want:?} not in {msg}");
        }
    }

    #[test]
    fn only_host_programs_missing_says_only_apt_get() {
        let built = tempfile::tempdir().unwrap();
        for b in BUILT {
            touch_exe(&built.path().join(b));
        }
        let root = tempfile::tempdir().unwrap();
        let err = verify_with(
            BinariesDir {
                dir: built.path().to_owned(),
                origin: DirSource::Cache,
            },
            None,
            root.path(),
        )
        .unwrap_err();
        assert!(err.built.is_empty());
        let msg = err.to_string();
        assert!(!msg.contains("make node"), "{msg}");
        assert!(msg.contains("apt-get install"), "{msg}");
    }

    #[test]
    fn all_present_gives_every_path_and_runc_from_path_first() {
        let built = tempfile::tempdir().unwrap();
        for b in BUILT {
            touch_exe(&built.path().join(b));
        }
        let root = tempfile::tempdir().unwrap();
        for p in CNI_PLUGINS {
            touch_exe(&root.path().join("usr/lib/cni").join(p));
        }
        touch_exe(&root.path().join("bin/busybox"));
        touch_exe(&root.path().join("usr/sbin/iptables"));
        touch_exe(&root.path().join("usr/sbin/runc"));
        let on_path = tempfile::tempdir().unwrap();
        touch_exe(&on_path.path().join("runc"));
        let dir = BinariesDir {
            dir: built.path().to_owned(),
            origin: DirSource::Explicit,
        };
        let b = verify_with(
            dir.clone(),
            Some(on_path.path().as_os_str().to_owned()),
            root.path(),
        )
        .unwrap();
        assert_eq!(b.runc, on_path.path().join("runc"));
        assert_eq!(b.shim, built.path().join(CONTAINERD_SHIM));
        assert_eq!(b.busybox, root.path().join("bin/busybox"));
        assert_eq!(b.cni_bin_dir, root.path().join("usr/lib/cni"));
        let b = verify_with(dir, Some("relative:".into()), root.path()).unwrap();
        assert_eq!(b.runc, root.path().join("usr/sbin/runc"));
    }
}
