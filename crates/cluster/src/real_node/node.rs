//! One real node: its files, namespaces, cgroup root, link to the API server,
//! and process 1 (`node-init`) that runs containerd and the kubelet.
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::cgroups;
use super::forward::ApiRelay;
use super::init::{DaemonOp, DaemonReply, DaemonRequest, InitPlan, Overlay, Step};
use super::kubelet::{self, KubeletSettings};
use super::net::NodeNet;
use crate::host::leftovers::{Item, RunRecord};
use crate::host::pki::Pki;
use crate::host::process::{ManagedProcess, log_tail};
use crate::host::services::{KUBERNETES_SERVICE_IP, KUBERNETES_SERVICE_PORT};
use crate::host::vital::Vital;
use dra_e2e_sys::Signal;

/// Where the runner's built-in driver (its proxy pods) writes CDI spec files
/// on a real node: the CDI standard's directory for specs written at run
/// time, where every driver writes them (upstream's test driver's
/// `--cdi-dir`, vendors' `--cdi-root`) and which containerd reads by default
/// (with `/etc/cdi`, see [`super::containerd::DEFAULT_CDI_SPEC_DIRS`]).
/// Inside the node's mount namespace it is below the node's private `/run`.
pub const CDI_DIR: &str = "/var/run/cdi";

/// Directories the node gets fresh in its mount namespace: every host path
/// the kubelet, containerd, runc and the CNI plugins write outside the roots
/// they are given (`/var/lib/kubelet/device-plugins`, `/var/lib/cni`,
/// `/run/containerd`, `/var/log/pods`, ...) is below one of them.
const PRIVATE_TMPFS: [&str; 3] = ["/run", "/var/lib", "/var/log"];

/// What of [`PRIVATE_TMPFS`] a reboot clears, as on a real machine.
const VOLATILE: &str = "/run";

/// The node's `/etc` is the host's with a private layer on top, so that
/// `/etc/cdi` (and anything a hostPath volume creates below `/etc`) is the
/// node's own without being made on the host.
const ETC: &str = "/etc";

/// How long process 1 may take to answer a daemon request: a stop waits
/// the daemon's grace, a start its ready socket.
const DAEMON_REPLY_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
pub enum RealNodeError {
    #[error("real node {node}: {message}")]
    Setup { node: String, message: String },
    #[error("real node {node} did not become Ready within {after:?} ({last}); {logs}")]
    NotReady {
        node: String,
        after: Duration,
        last: String,
        logs: String,
    },
    #[error("real node {node} stopped during start-up ({status}); {logs}")]
    Exited {
        node: String,
        status: String,
        logs: String,
    },
}

/// What every node of a run shares.
#[derive(Debug, Clone)]
pub struct NodeShared {
    pub kubelet: PathBuf,
    pub containerd: PathBuf,
    pub shim_dir: PathBuf,
    pub ctr: PathBuf,
    /// The `dra-e2e-agent` program, which serves as `node-init`.
    pub agent: PathBuf,
    pub api_port: u16,
    pub feature_gates: Vec<(String, bool)>,
    /// Image archives every node imports before its kubelet starts.
    pub archives: Vec<PathBuf>,
    pub sandbox_image: String,
    pub ready_timeout: Duration,
}

pub struct RealNode {
    pub name: String,
    pub net: NodeNet,
    pub cgroup_root: String,
    pub dir: PathBuf,
    process: Option<ManagedProcess>,
    relay: ApiRelay,
    /// Process 1 of the node (its host PID) and its PID namespace, to stop
    /// it and to prove at the end that nothing in it is left.
    init: Option<(u32, u64)>,
}

impl RealNode {
    /// Prepares and starts node `index`; returns once its process 1 runs.
    /// On error everything made so far is removed again.
    pub async fn start(
        name: String,
        net: NodeNet,
        cgroup_root: String,
        dir: PathBuf,
        pki: &Pki,
        shared: &NodeShared,
        record: &RunRecord,
    ) -> Result<RealNode, RealNodeError> {
        let err = |message: String| RealNodeError::Setup {
            node: name.clone(),
            message,
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        for item in [
            Item::Netns(net.netns.clone()),
            Item::Link(net.host_link.clone()),
            Item::Cgroup(cgroup_root.clone()),
        ] {
            record.add(item).map_err(|e| err(e.to_string()))?;
        }
        net.create().map_err(|e| err(e.to_string()))?;
        // From here on, a failure, or this future dropped half-way (Ctrl-C
        // during start-up), undoes the network and cgroups.
        let mut guard = SetupGuard {
            net: Some(net.clone()),
            cgroup_root: cgroup_root.clone(),
        };
        // Pods find the API server as on a standard node: at the
        // `kubernetes` Service, which these rules send to the relay below.
        net.route_api_service(
            SocketAddrV4::new(KUBERNETES_SERVICE_IP, KUBERNETES_SERVICE_PORT),
            SocketAddrV4::new(net.host_ip, shared.api_port),
        )
        .map_err(|e| err(e.to_string()))?;
        cgroups::create(&cgroup_root).map_err(|e| err(e.to_string()))?;
        let relay = ApiRelay::start(
            SocketAddr::new(net.host_ip.into(), shared.api_port),
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), shared.api_port),
        )
        .await
        .map_err(|e| err(format!("relaying the API server to {}: {e}", net.host_ip)))?;
        let plan = write_files(&name, &net, &cgroup_root, &dir, pki, shared).map_err(&err)?;
        let plan_path = dir.join("init.json");
        let plan_json = serde_json::to_string_pretty(&plan).map_err(|e| err(e.to_string()))?;
        std::fs::write(&plan_path, plan_json)
            .map_err(|e| err(format!("writing {}: {e}", plan_path.display())))?;

        // nsenter joins the node's network namespace and execs unshare, which
        // makes the PID and mount namespaces and forks process 1. If the
        // runner dies, PDEATHSIG kills unshare, and --kill-child kills
        // process 1, which takes the whole namespace with it.
        let args: Vec<std::ffi::OsString> = vec![
            format!("--net=/run/netns/{}", net.netns).into(),
            "--".into(),
            "unshare".into(),
            "--pid".into(),
            "--fork".into(),
            "--kill-child".into(),
            "--mount".into(),
            "--propagation".into(),
            "private".into(),
            "--mount-proc".into(),
            "--".into(),
            shared.agent.clone().into_os_string(),
            "node-init".into(),
            plan_path.into_os_string(),
        ];
        let process = ManagedProcess::spawn(
            &format!("node {name}"),
            Path::new("nsenter"),
            args,
            &dir.join("node-init.log"),
        )
        .map_err(|e| err(format!("starting nsenter/unshare (util-linux): {e}")))?;
        let init = init_of(process.pid()).await;
        guard.net = None;
        Ok(RealNode {
            name,
            net,
            cgroup_root,
            dir,
            process: Some(process),
            relay,
            init,
        })
    }

    /// Waits until the Node object is Ready, or fails early when the node's
    /// process 1 exits, quoting the node's logs.
    pub async fn wait_ready(
        &self,
        client: &kube::Client,
        limit: Duration,
    ) -> Result<(), RealNodeError> {
        let api: Api<Node> = Api::all(client.clone());
        let what = format!("node {} to be Ready", self.name);
        let ready = dra_e2e_kube::wait::object(
            &api,
            &self.name,
            &what,
            limit,
            |n: Option<&Node>| match n {
                Some(n) if dra_e2e_kube::node_ready::node_is_ready_and_schedulable(n) => {
                    dra_e2e_kube::wait::Check::Done(())
                }
                Some(n) => dra_e2e_kube::wait::Check::Pending(ready_condition(n)),
                None => dra_e2e_kube::wait::Check::Pending("not registered".into()),
            },
        );
        let Some(process) = &self.process else {
            return Err(RealNodeError::Exited {
                node: self.name.clone(),
                status: "stopped".into(),
                logs: self.logs(),
            });
        };
        let mut exit = process.exit_watch();
        tokio::select! {
            r = ready => r.map_err(|e| RealNodeError::NotReady {
                node: self.name.clone(),
                after: limit,
                last: e.to_string(),
                logs: self.logs(),
            }),
            status = exit.wait_for(Option::is_some) => Err(RealNodeError::Exited {
                node: self.name.clone(),
                status: status.ok().and_then(|s| *s).map_or_else(|| "unknown status".into(), |s| s.to_string()),
                logs: self.logs(),
            }),
        }
    }

    /// The last lines of the node's logs, for errors.
    pub fn logs(&self) -> String {
        ["node-init", "containerd", "kubelet"]
            .iter()
            .map(|l| {
                let path = self.dir.join(format!("{l}.log"));
                format!("last lines of {}:\n{}", path.display(), log_tail(&path, 15))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Process 1 of the node, watched during a run: it ends when containerd
    /// or the kubelet dies, and says which in its log.
    pub fn vital(&self) -> Option<Vital> {
        let p = self.process.as_ref()?;
        Some(Vital {
            what: format!("real node {}", self.name),
            exit: p.exit_watch(),
            logs: ["node-init", "containerd", "kubelet"]
                .iter()
                .map(|l| self.dir.join(format!("{l}.log")))
                .collect(),
        })
    }

    pub fn kubelet_log(&self) -> PathBuf {
        self.dir.join("kubelet.log")
    }

    /// The process 1 handle, to notice a node that dies during the run.
    pub fn process(&self) -> Option<&ManagedProcess> {
        self.process.as_ref()
    }

    /// Stops the node: process 1 stops the kubelet and containerd, the
    /// kernel kills what is left in the namespace; then the network and the
    /// cgroup root go. Returns what could not be removed.
    ///
    /// Only process 1 is signalled, never its `unshare` parent: that parent
    /// reaps it, so no orphan is left for the host's init to reap.
    pub fn stop(&mut self, grace: Duration) -> Vec<String> {
        if let Some(p) = self.process.take() {
            if let Some((init, _)) = self.init {
                for (signal, wait) in [
                    (Signal::Term, grace),
                    (Signal::Kill, Duration::from_secs(10)),
                ] {
                    if p.exit_status().is_some() {
                        break;
                    }
                    // Process 1 of the node, alive while its parent is.
                    let _ = dra_e2e_sys::kill(init, signal);
                    p.wait_until(std::time::Instant::now() + wait);
                }
            }
            // Dropping kills whatever still runs of the group.
            drop(p);
        }
        let mut left = self.net.remove();
        left.extend(cgroups::remove(&self.cgroup_root));
        left
    }

    /// Cuts the node off the control plane (`cut`) or connects it again:
    /// packets to and from its relay of the API server are dropped
    /// ([`NodeNet::cut_rules`]).
    pub fn set_cut(&self, cut: bool) -> Result<(), RealNodeError> {
        let SocketAddr::V4(api) = self.relay.addr else {
            return Err(RealNodeError::Setup {
                node: self.name.clone(),
                message: format!(
                    "the API server relay listens on {}, not IPv4",
                    self.relay.addr
                ),
            });
        };
        self.net
            .set_cut(api, cut)
            .map_err(|e| RealNodeError::Setup {
                node: self.name.clone(),
                message: e.to_string(),
            })
    }

    /// Asks process 1 to reboot the node (see `init::power_cycle`): every
    /// process of the node ends, `/run` is emptied, `/var/lib` kept, and the
    /// daemons start again with a new boot ID. Returns once asked; the
    /// caller watches the Node's `bootID` to see the reboot done.
    pub fn reboot(&self) -> Result<(), RealNodeError> {
        let err = |message: String| RealNodeError::Setup {
            node: self.name.clone(),
            message,
        };
        let (Some(p), Some((init, ns))) = (&self.process, self.init) else {
            return Err(err("cannot reboot: the node is stopped".into()));
        };
        if p.exit_status().is_some() || !still_runs(init, ns) {
            return Err(err("cannot reboot: its process 1 has exited".into()));
        }
        // Process 1 of the node, checked above to be in its namespace.
        if let Err(e) = dra_e2e_sys::kill(init, Signal::Usr1) {
            return Err(err(format!("signalling process 1 (pid {init}): {e}")));
        }
        Ok(())
    }

    /// Stops, starts or restarts one daemon of the node (`kubelet`,
    /// `containerd`) through process 1 and waits for its answer: the
    /// daemon's new pid, none when stopped. A started daemon with a ready
    /// socket is ready when this returns.
    pub fn daemon(&self, op: DaemonOp, daemon: &str) -> Result<Option<u32>, RealNodeError> {
        let err = |message: String| RealNodeError::Setup {
            node: self.name.clone(),
            message: format!("{op:?} {daemon}: {message}"),
        };
        let (Some(p), Some((init, ns))) = (&self.process, self.init) else {
            return Err(err("the node is stopped".into()));
        };
        if p.exit_status().is_some() || !still_runs(init, ns) {
            return Err(err("its process 1 has exited".into()));
        }
        let control = self.dir.join("control");
        let reply = super::init::reply_path(&control);
        let id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        let request = DaemonRequest {
            id,
            op,
            daemon: daemon.to_owned(),
        };
        let tmp = control.with_extension("tmp");
        serde_json::to_vec(&request)
            .map_err(|e| e.to_string())
            .and_then(|b| std::fs::write(&tmp, b).map_err(|e| e.to_string()))
            .and_then(|()| std::fs::rename(&tmp, &control).map_err(|e| e.to_string()))
            .map_err(|e| err(format!("writing the request {}: {e}", control.display())))?;
        // Process 1 of the node, checked above to be in its namespace.
        dra_e2e_sys::kill(init, Signal::Usr2)
            .map_err(|e| err(format!("signalling process 1 (pid {init}): {e}")))?;
        // Process 1 answers in a file; a stop takes the daemon's grace, a
        // start its ready timeout.
        let deadline = std::time::Instant::now() + DAEMON_REPLY_TIMEOUT;
        loop {
            if let Ok(bytes) = std::fs::read(&reply)
                && let Ok(answer) = serde_json::from_slice::<DaemonReply>(&bytes)
                && answer.id == id
            {
                return answer.result.map_err(err);
            }
            if p.exit_status().is_some() {
                return Err(err("process 1 exited before it answered".into()));
            }
            if std::time::Instant::now() >= deadline {
                return Err(err(format!(
                    "process 1 did not answer within {DAEMON_REPLY_TIMEOUT:?} (its log: {})",
                    self.dir.join("node-init.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends the node at once (SIGKILL to process 1), for a second Ctrl-C.
    pub fn kill(&mut self) -> Vec<String> {
        self.stop(Duration::ZERO)
    }

    /// What of this node is still there: processes in its PID namespace,
    /// its network namespace and link, its cgroups, host mounts of its files.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        // Process 1's end kills every process of its PID namespace, and the
        // kernel lets it go only once they are all gone; so the node left a
        // process exactly when its process 1 still runs. (Scanning /proc for
        // the namespace's inode would race: inode numbers are reused at once
        // by namespaces made elsewhere.)
        if let Some((pid, ns)) = self.init {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while still_runs(pid, ns) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if still_runs(pid, ns) {
                left.push(format!(
                    "process 1 of node {} (pid {pid}) and its namespace",
                    self.name
                ));
            }
        }
        if self.net.netns_exists() {
            left.push(format!("network namespace {}", self.net.netns));
        }
        if self.net.link_exists() {
            left.push(format!("link {}", self.net.host_link));
        }
        left.extend(cgroups::leftovers(&self.cgroup_root));
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
            let dir = self.dir.display().to_string();
            for line in mounts.lines().filter(|l| l.contains(&dir)) {
                left.push(format!("mount {line}"));
            }
        }
        left
    }
}

/// Removes a half-made node's network and cgroups unless disarmed.
struct SetupGuard {
    net: Option<NodeNet>,
    cgroup_root: String,
}

impl Drop for SetupGuard {
    fn drop(&mut self) {
        if let Some(net) = self.net.take() {
            net.remove();
            cgroups::remove(&self.cgroup_root);
        }
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if self.process.is_some() {
            let left = self.stop(Duration::from_secs(5));
            for l in left {
                tracing::error!(node = %self.name, "left behind: {l}");
            }
        }
    }
}

fn ready_condition(n: &Node) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map_or_else(
            || "no Ready condition yet".to_owned(),
            |c| {
                format!(
                    "Ready={} {}: {}",
                    c.status,
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or("")
                )
            },
        )
}

/// `pid`'s first child (process 1 of the node) and its PID namespace, read
/// once it exists.
async fn init_of(pid: u32) -> Option<(u32, u64)> {
    for _ in 0..250 {
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(child) = children
            .split_whitespace()
            .next()
            .and_then(|c| c.parse::<u32>().ok())
        {
            let link = std::fs::read_link(format!("/proc/{child}/ns/pid")).ok()?;
            return Some((child, parse_ns_inode(&link.to_string_lossy())?));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn parse_ns_inode(link: &str) -> Option<u64> {
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Whether `pid` is still a process in PID namespace `ns`.
/// A zombie has no namespace link left to read, so a match is a live process.
fn still_runs(pid: u32, ns: u64) -> bool {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .and_then(|l| parse_ns_inode(&l.to_string_lossy()))
        == Some(ns)
}

/// Writes the node's credentials and configuration files; returns process
/// 1's plan.
fn write_files(
    name: &str,
    net: &NodeNet,
    cgroup_root: &str,
    dir: &Path,
    pki: &Pki,
    shared: &NodeShared,
) -> Result<InitPlan, String> {
    let write = |file: &str, contents: String| -> Result<PathBuf, String> {
        let path = dir.join(file);
        std::fs::write(&path, contents).map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(path)
    };
    let creds = pki
        .kubelet_credentials(dir, name, net.node_ip.into())
        .map_err(|e| e.to_string())?;
    // No cluster DNS: pods get a loopback nameserver and send no DNS traffic out.
    let resolv_conf = write("resolv.conf", "nameserver 127.0.0.1\n".into())?;
    let settings = KubeletSettings {
        node_name: name.to_owned(),
        node_ip: net.node_ip,
        server: format!("https://{}:{}", net.host_ip, shared.api_port),
        ca_file: pki.ca.cert_path.clone(),
        client_cert: creds.client.cert_path.clone(),
        client_key: creds.client.key_path.clone(),
        serving_cert: creds.serving.cert_path.clone(),
        serving_key: creds.serving.key_path.clone(),
        cgroup_root: cgroup_root.to_owned(),
        resolv_conf,
        feature_gates: shared.feature_gates.clone(),
    };
    let kubelet_config = write(
        "kubelet.yaml",
        serde_json::to_string_pretty(&kubelet::config(&settings)).map_err(|e| e.to_string())?,
    )?;
    let kubeconfig = write(
        "kubelet.kubeconfig",
        serde_json::to_string_pretty(&kubelet::kubeconfig(&settings)).map_err(|e| e.to_string())?,
    )?;

    let cni_dir = dir.join("cni");
    std::fs::create_dir_all(&cni_dir)
        .map_err(|e| format!("creating {}: {e}", cni_dir.display()))?;
    std::fs::write(
        cni_dir.join("10-bridge.conflist"),
        cni_config(&net.pod_cidr),
    )
    .map_err(|e| format!("writing the CNI configuration: {e}"))?;

    let containerd_config = super::containerd::ContainerdConfig {
        root: dir.join("containerd"),
        state: PathBuf::from("/run/containerd"),
        address: PathBuf::from(kubelet::CRI_SOCKET),
        sandbox_image: shared.sandbox_image.clone(),
        cni_bin_dir: PathBuf::from("/usr/lib/cni"),
        cni_conf_dir: cni_dir,
        cdi_spec_dirs: super::containerd::DEFAULT_CDI_SPEC_DIRS
            .iter()
            .map(PathBuf::from)
            .collect(),
    };
    let containerd_toml = write("containerd.toml", containerd_config.render())?;

    let log = |l: &str| dir.join(format!("{l}.log"));
    let mut steps = vec![Step::Daemon {
        name: "containerd".into(),
        argv: vec![
            shared.containerd.display().to_string(),
            format!("--config={}", containerd_toml.display()),
        ],
        log: log("containerd"),
        ready_socket: Some(PathBuf::from(kubelet::CRI_SOCKET)),
        ready_timeout_secs: 60,
    }];
    for archive in &shared.archives {
        steps.push(Step::Run {
            name: format!("importing {}", archive.display()),
            argv: vec![
                shared.ctr.display().to_string(),
                format!("--address={}", kubelet::CRI_SOCKET),
                "--namespace=k8s.io".into(),
                "images".into(),
                "import".into(),
                archive.display().to_string(),
            ],
            log: log("import"),
        });
    }
    steps.push(Step::Daemon {
        name: "kubelet".into(),
        argv: kubelet::argv(&shared.kubelet, &kubelet_config, &kubeconfig, &settings),
        log: log("kubelet"),
        ready_socket: None,
        ready_timeout_secs: 0,
    });
    let tmpfs = private_tmpfs();
    Ok(InitPlan {
        overlays: vec![Overlay {
            target: PathBuf::from(ETC),
            layer: dir.join("etc-layer"),
        }],
        volatile: tmpfs
            .iter()
            .filter(|t| t.starts_with(VOLATILE))
            .cloned()
            .collect(),
        boot_id: Some(dir.join("boot_id")),
        tmpfs,
        make_dirs: [
            "/run/containerd",
            kubelet::ROOT_DIR,
            "/var/lib/cni",
            "/var/log/pods",
            "/var/log/containers",
        ]
        .iter()
        .map(PathBuf::from)
        .chain(
            super::containerd::DEFAULT_CDI_SPEC_DIRS
                .iter()
                .map(PathBuf::from),
        )
        .collect(),
        shared_mounts: true,
        steps,
        stop_grace_secs: 5,
        path_prepend: vec![shared.shim_dir.clone()],
        control: Some(dir.join("control")),
    })
}

/// [`PRIVATE_TMPFS`], then a tmpfs of its own for each CDI spec directory
/// that is not below one of them (`/etc/cdi`, inside the node's `/etc`
/// layer, so its mount point is not made on the host), so that no node
/// sees another's or the host's specs.
fn private_tmpfs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = PRIVATE_TMPFS.iter().map(PathBuf::from).collect();
    for cdi in super::containerd::DEFAULT_CDI_SPEC_DIRS {
        if !below_private_tmpfs(&resolve_parent(Path::new(cdi))) {
            dirs.push(PathBuf::from(cdi));
        }
    }
    dirs
}

/// `path` with its parent's symlinks resolved on the host (`/var/run/cdi`
/// is `/run/cdi` where `/var/run` links to `/run`, as on every FHS 3 host).
fn resolve_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or_else(|_| path.to_owned()),
        _ => path.to_owned(),
    }
}

fn below_private_tmpfs(path: &Path) -> bool {
    PRIVATE_TMPFS.iter().any(|t| path.starts_with(t))
}

/// Bridge networking for the node's pods, inside its network namespace.
fn cni_config(pod_cidr: &str) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "dra-e2e",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": pod_cidr }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
            { "type": "loopback" },
        ],
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_links_parse() {
        assert_eq!(parse_ns_inode("pid:[4026531836]"), Some(4026531836));
        assert_eq!(parse_ns_inode("net:[1]"), None);
    }

    #[test]
    fn cdi_dirs_are_private_to_the_node() {
        let tmpfs = private_tmpfs();
        assert_eq!(&tmpfs[..3], PRIVATE_TMPFS.map(PathBuf::from));
        for cdi in super::super::containerd::DEFAULT_CDI_SPEC_DIRS {
            assert!(
                tmpfs.contains(&PathBuf::from(cdi))
                    || below_private_tmpfs(&resolve_parent(Path::new(cdi))),
                "{cdi} would be shared with the host: {tmpfs:?}"
            );
        }
        // /etc/cdi gets its own tmpfs, in the node's own /etc.
        assert!(tmpfs.contains(&PathBuf::from("/etc/cdi")), "{tmpfs:?}");
        assert!(below_private_tmpfs(Path::new("/run/cdi")));
        assert!(!below_private_tmpfs(Path::new("/runner/cdi")));
    }

    #[test]
    fn pods_get_the_nodes_subnet() {
        let c: serde_json::Value = serde_json::from_str(&cni_config("10.244.3.0/24")).unwrap();
        assert_eq!(
            c["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            serde_json::json!("10.244.3.0/24")
        );
    }
}
