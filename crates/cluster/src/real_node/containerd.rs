//! containerd for one real node: its configuration file and image import.
//!
//! The configuration uses the schema `containerd config default` of v2.4
//! writes (`version = 4`, CRI split into `io.containerd.cri.v1.images` and
//! `io.containerd.cri.v1.runtime`) and sets only what differs from the
//! defaults, plus every path containerd would otherwise take from the host,
//! so several nodes never share a file:
//!
//! * `restrict_oom_score_adj = true`: root lacks CAP_SYS_RESOURCE on the
//!   machines this runs on, and runc fails every sandbox writing
//!   `oom_score_adj` below its own otherwise.
//! * runc with `SystemdCgroup = false` (cgroupfs; no systemd) and its state
//!   below containerd's state dir instead of `/run/containerd/runc`.
//! * `tolerate_missing_hugetlb_controller` and `disable_hugetlb_controller`:
//!   there is no hugetlb cgroup hierarchy.
//! * the sandbox image pinned, so image garbage collection never removes the
//!   one image every pod needs and no registry could give back.
//! * no registry configuration (`config_path = ""`): nothing is pulled.
//! * `imports = []` (the default reads `/etc/containerd/conf.d/*.toml`), NRI
//!   off (its socket is a fixed host path), network-namespace mounts and
//!   shim sockets under the state dir, the `opt` plugin and temporary mounts
//!   below the root.
//! * `cdi_spec_dirs` stays containerd's default, the CDI standard's
//!   `/etc/cdi` and `/var/run/cdi`: drivers write their specs there and never
//!   ask the runtime where it looks. The node makes both private to itself.
//!
//! What stays host-wide whatever the configuration says: `ctr` puts its
//! FIFOs in `/run/containerd/fifo` unless given `--fifo-dir`. A node in a
//! private mount namespace with its own `/run` avoids that too.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The containerd namespace the CRI plugin, and so the kubelet, uses.
pub const K8S_NAMESPACE: &str = "k8s.io";

/// containerd's default `cdi_spec_dirs`, the CDI specification's standard
/// directories: static specs in `/etc/cdi`, specs written at run time (what
/// drivers do) in `/var/run/cdi`. Later directories take precedence.
pub const DEFAULT_CDI_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// The per-node settings of containerd's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdConfig {
    /// Persistent data: content store, snapshots, metadata.
    pub root: PathBuf,
    /// Runtime state: task bundles, runc state, netns mounts.
    pub state: PathBuf,
    /// The gRPC (and CRI) socket; the ttrpc socket is this plus `.ttrpc`.
    pub address: PathBuf,
    /// Full reference of the sandbox (pause) image, pinned.
    pub sandbox_image: String,
    /// Where the CNI plugin binaries are (Debian: `/usr/lib/cni`).
    pub cni_bin_dir: PathBuf,
    /// Where the node's CNI network configuration is.
    pub cni_conf_dir: PathBuf,
    /// Where CDI spec files are read from.
    pub cdi_spec_dirs: Vec<PathBuf>,
}

// The file's shape, only the keys set here. Field names are containerd's.

#[derive(Serialize)]
struct File {
    version: u32,
    root: String,
    state: String,
    temp: String,
    imports: Vec<String>,
    plugins: Plugins,
}

#[derive(Serialize)]
struct Socket {
    address: String,
}

#[derive(Serialize)]
struct Plugins {
    #[serde(rename = "io.containerd.cri.v1.images")]
    cri_images: CriImages,
    #[serde(rename = "io.containerd.cri.v1.runtime")]
    cri_runtime: CriRuntime,
    #[serde(rename = "io.containerd.nri.v1.nri")]
    nri: Nri,
    #[serde(rename = "io.containerd.internal.v1.opt")]
    opt: Opt,
    #[serde(rename = "io.containerd.server.v1.grpc")]
    grpc: Socket,
    #[serde(rename = "io.containerd.server.v1.ttrpc")]
    ttrpc: Socket,
    #[serde(rename = "io.containerd.shim.v1.manager")]
    shim_manager: ShimManager,
}

#[derive(Serialize)]
struct ShimManager {
    socket_dir: String,
}

#[derive(Serialize)]
struct CriImages {
    snapshotter: &'static str,
    pinned_images: PinnedImages,
    registry: Registry,
}

#[derive(Serialize)]
struct PinnedImages {
    sandbox: String,
}

#[derive(Serialize)]
struct Registry {
    config_path: &'static str,
}

#[derive(Serialize)]
struct CriRuntime {
    restrict_oom_score_adj: bool,
    tolerate_missing_hugetlb_controller: bool,
    disable_hugetlb_controller: bool,
    netns_mounts_under_state_dir: bool,
    cdi_spec_dirs: Vec<String>,
    containerd: CriContainerd,
    cni: Cni,
}

#[derive(Serialize)]
struct CriContainerd {
    default_runtime_name: &'static str,
    runtimes: Runtimes,
}

#[derive(Serialize)]
struct Runtimes {
    runc: Runtime,
}

#[derive(Serialize)]
struct Runtime {
    runtime_type: &'static str,
    options: RuncOptions,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct RuncOptions {
    systemd_cgroup: bool,
    root: String,
}

#[derive(Serialize)]
struct Cni {
    bin_dirs: Vec<String>,
    conf_dir: String,
}

#[derive(Serialize)]
struct Nri {
    disable: bool,
}

#[derive(Serialize)]
struct Opt {
    path: String,
}

/// TOML has no non-UTF-8 strings; such a path is shown lossily, and
/// containerd then reports the directory it cannot use.
fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl ContainerdConfig {
    /// The ttrpc socket next to the gRPC one.
    pub fn ttrpc_address(&self) -> PathBuf {
        let mut a = self.address.clone().into_os_string();
        a.push(".ttrpc");
        a.into()
    }

    /// Where shims put their sockets: below the state dir rather than the
    /// host-wide `/run/containerd/s`. A socket is this plus `/` and 64 hex
    /// digits, so the state dir's path should stay under 40 bytes.
    pub fn shim_socket_dir(&self) -> PathBuf {
        self.state.join("s")
    }

    /// The configuration file's text.
    pub fn render(&self) -> String {
        let file = File {
            version: 4,
            root: s(&self.root),
            state: s(&self.state),
            temp: s(&self.root.join("tmp")),
            imports: Vec::new(),
            plugins: Plugins {
                cri_images: CriImages {
                    snapshotter: "overlayfs",
                    pinned_images: PinnedImages {
                        sandbox: self.sandbox_image.clone(),
                    },
                    registry: Registry { config_path: "" },
                },
                cri_runtime: CriRuntime {
                    restrict_oom_score_adj: true,
                    tolerate_missing_hugetlb_controller: true,
                    disable_hugetlb_controller: true,
                    netns_mounts_under_state_dir: true,
                    cdi_spec_dirs: self.cdi_spec_dirs.iter().map(|p| s(p)).collect(),
                    containerd: CriContainerd {
                        default_runtime_name: "runc",
                        runtimes: Runtimes {
                            runc: Runtime {
                                runtime_type: "io.containerd.runc.v2",
                                options: RuncOptions {
                                    systemd_cgroup: false,
                                    root: s(&self.state.join("runc")),
                                },
                            },
                        },
                    },
                    cni: Cni {
                        bin_dirs: vec![s(&self.cni_bin_dir)],
                        conf_dir: s(&self.cni_conf_dir),
                    },
                },
                nri: Nri { disable: true },
                opt: Opt {
                    path: s(&self.root.join("opt")),
                },
                grpc: Socket {
                    address: s(&self.address),
                },
                ttrpc: Socket {
                    address: s(&self.ttrpc_address()),
                },
                shim_manager: ShimManager {
                    socket_dir: s(&self.shim_socket_dir()),
                },
            },
        };
        // Only strings, booleans, integers, arrays and tables: serializing
        // cannot fail.
        toml::to_string(&file).expect("containerd's configuration serializes to TOML")
    }
}

/// Importing an image archive failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("importing {archive}: cannot run {ctr}: {source}", archive = .archive.display(), ctr = .ctr.display())]
    Spawn {
        ctr: PathBuf,
        archive: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("importing {archive}: `{command}` failed ({status}): {stderr}", archive = .archive.display())]
    Failed {
        archive: PathBuf,
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// The arguments (after the program) of `ctr` importing `archive` into the
/// `k8s.io` namespace of the containerd at `address`. `address` is made
/// absolute: ctr refuses a relative one (`invalid (non-empty) authority`).
pub fn import_args(address: &Path, archive: &Path) -> Vec<OsString> {
    let address = std::path::absolute(address).unwrap_or_else(|_| address.to_owned());
    vec![
        "--address".into(),
        address.into_os_string(),
        "--namespace".into(),
        K8S_NAMESPACE.into(),
        "images".into(),
        "import".into(),
        archive.as_os_str().to_owned(),
    ]
}

/// Imports an OCI or Docker image archive (the runner's own or one a user
/// gives) with `ctr images import`, unpacked for the default snapshotter so
/// the CRI plugin can run it. Returns ctr's output.
pub async fn import_archive(
    ctr: &Path,
    address: &Path,
    archive: &Path,
) -> Result<String, ImportError> {
    let args = import_args(address, archive);
    let out = tokio::process::Command::new(ctr)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| ImportError::Spawn {
            ctr: ctr.to_owned(),
            archive: archive.to_owned(),
            source,
        })?;
    if !out.status.success() {
        let command = std::iter::once(ctr.as_os_str())
            .chain(args.iter().map(OsString::as_os_str))
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        return Err(ImportError::Failed {
            archive: archive.to_owned(),
            command,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ContainerdConfig {
        ContainerdConfig {
            root: "/n/0/containerd".into(),
            state: "/run/containerd".into(),
            address: "/run/containerd/containerd.sock".into(),
            sandbox_image: "registry.k8s.io/pause:3.10".into(),
            cni_bin_dir: "/usr/lib/cni".into(),
            cni_conf_dir: "/n/0/cni".into(),
            cdi_spec_dirs: DEFAULT_CDI_SPEC_DIRS.iter().map(PathBuf::from).collect(),
        }
    }

    fn get<'a>(t: &'a toml::Table, path: &[&str]) -> &'a toml::Value {
        let (last, parents) = path.split_last().unwrap();
        let mut t = t;
        for p in parents {
            t = t
                .get(*p)
                .and_then(toml::Value::as_table)
                .unwrap_or_else(|| panic!("no table {p} in {path:?}"));
        }
        t.get(*last).unwrap_or_else(|| panic!("no key {path:?}"))
    }

    #[test]
    fn renders_the_nodes_paths_and_the_machines_workarounds() {
        let text = sample().render();
        let t: toml::Table = text.parse().unwrap();
        let str_at = |p: &[&str]| get(&t, p).as_str().unwrap().to_owned();
        let bool_at = |p: &[&str]| get(&t, p).as_bool().unwrap();
        assert_eq!(get(&t, &["version"]).as_integer(), Some(4));
        assert_eq!(str_at(&["root"]), "/n/0/containerd");
        assert_eq!(str_at(&["state"]), "/run/containerd");
        assert_eq!(str_at(&["temp"]), "/n/0/containerd/tmp");
        assert_eq!(get(&t, &["imports"]).as_array().unwrap().len(), 0);
        assert_eq!(
            str_at(&["plugins", "io.containerd.server.v1.grpc", "address"]),
            "/run/containerd/containerd.sock"
        );
        assert_eq!(
            str_at(&["plugins", "io.containerd.server.v1.ttrpc", "address"]),
            "/run/containerd/containerd.sock.ttrpc"
        );
        assert_eq!(
            str_at(&["plugins", "io.containerd.shim.v1.manager", "socket_dir"]),
            "/run/containerd/s"
        );
        let images = ["plugins", "io.containerd.cri.v1.images"];
        fn at<'a>(base: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
            [base, rest].concat()
        }
        assert_eq!(
            str_at(&at(&images, &["pinned_images", "sandbox"])),
            "registry.k8s.io/pause:3.10"
        );
        assert_eq!(str_at(&at(&images, &["registry", "config_path"])), "");
        let rt = ["plugins", "io.containerd.cri.v1.runtime"];
        assert!(bool_at(&at(&rt, &["restrict_oom_score_adj"])));
        assert!(bool_at(&at(&rt, &["tolerate_missing_hugetlb_controller"])));
        assert!(bool_at(&at(&rt, &["disable_hugetlb_controller"])));
        assert!(bool_at(&at(&rt, &["netns_mounts_under_state_dir"])));
        assert_eq!(
            get(&t, &at(&rt, &["cdi_spec_dirs"])).as_array().unwrap(),
            &vec![
                toml::Value::from("/etc/cdi"),
                toml::Value::from("/var/run/cdi")
            ]
        );
        assert_eq!(
            get(&t, &at(&rt, &["cni", "bin_dirs"])).as_array().unwrap(),
            &vec![toml::Value::from("/usr/lib/cni")]
        );
        assert_eq!(str_at(&at(&rt, &["cni", "conf_dir"])), "/n/0/cni");
        let runc = at(&rt, &["containerd", "runtimes", "runc"]);
        assert_eq!(
            str_at(&at(&runc, &["runtime_type"])),
            "io.containerd.runc.v2"
        );
        assert!(!bool_at(&at(&runc, &["options", "SystemdCgroup"])));
        assert_eq!(
            str_at(&at(&runc, &["options", "Root"])),
            "/run/containerd/runc"
        );
        assert_eq!(
            str_at(&at(&rt, &["containerd", "default_runtime_name"])),
            "runc"
        );
        assert!(bool_at(&["plugins", "io.containerd.nri.v1.nri", "disable"]));
        assert_eq!(
            str_at(&["plugins", "io.containerd.internal.v1.opt", "path"]),
            "/n/0/containerd/opt"
        );
        // No registry mirrors or credentials anywhere.
        assert!(!text.contains("mirrors"), "{text}");
    }

    #[test]
    fn import_uses_an_absolute_address_and_the_k8s_namespace() {
        let args = import_args(Path::new("rel/containerd.sock"), Path::new("/a/pause.tar"));
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            args,
            [
                "--address",
                &cwd.join("rel/containerd.sock").display().to_string(),
                "--namespace",
                "k8s.io",
                "images",
                "import",
                "/a/pause.tar"
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_import_quotes_ctr() {
        let tmp = tempfile::tempdir().unwrap();
        let ctr = tmp.path().join("ctr");
        std::fs::write(&ctr, "#!/bin/sh\necho 'ctr: no such archive' >&2\nexit 3\n").unwrap();
        std::fs::set_permissions(&ctr, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        // A script just written may briefly be "text file busy" if another
        // test thread forked while it was open for writing.
        let mut err = None;
        for _ in 0..20 {
            match import_archive(&ctr, Path::new("/s.sock"), Path::new("/a/x.tar")).await {
                Err(ImportError::Spawn { source, .. })
                    if source.kind() == std::io::ErrorKind::ExecutableFileBusy =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => {
                    err = Some(other.unwrap_err());
                    break;
                }
            }
        }
        let err = err.unwrap();
        let msg = err.to_string();
        assert!(msg.contains("/a/x.tar"), "{msg}");
        assert!(msg.contains("ctr: no such archive"), "{msg}");
        assert!(msg.contains("--address /s.sock"), "{msg}");

        let err = import_archive(&tmp.path().join("nope"), Path::new("/s"), Path::new("/a"))
            .await
            .unwrap_err();
        assert!(matches!(err, ImportError::Spawn { .. }), "{err}");
    }
}
