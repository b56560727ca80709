//! The local cluster: etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager as child processes of the runner, with a fresh PKI
//! in a private temporary directory.
//!
//! ```no_run
//! # async fn demo() -> Result<(), dra_e2e_cluster::local::LocalClusterError> {
//! use dra_e2e_cluster::local::{LocalCluster, LocalClusterOptions};
//! let cluster = LocalCluster::start(LocalClusterOptions::default()).await?;
//! let client = cluster.client();
//! // … use the cluster; simulated nodes keep their files below cluster.dir() …
//! cluster.stop().await?;
//! # Ok(()) }
//! ```
pub mod binaries;
pub mod components;
pub mod front_door;
pub mod gates;
mod kubeconfig;
mod readiness;
mod restart;

use std::fs;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use binaries::{Binaries, MissingBinaries};
pub use gates::{
    FeatureGates, GateProbe, GateRefusal, InvalidFeatureGate, refused_by as gates_refused_by,
};
pub use restart::{ControlPlaneComponent, Restart};

use crate::host::leftovers::{self, Item, Registry, RunRecord};
use crate::host::pki::{self, Pki};
use crate::host::process::{self, LOG_TAIL_LINES, ManagedProcess};
use crate::host::vital::Vital;
use components::{Ports, Settings};
use dra_e2e_kube::client::Outage;
use readiness::NotReady;

use dra_e2e_node_sim::{NodeSimError, SimNodeConfig, SimNodes};

/// Simulated nodes are named `<NODE_PREFIX>-<i>`.
pub const NODE_PREFIX: &str = "dra-e2e-node";

/// What a local cluster is started with.
#[derive(Debug, Clone)]
pub struct LocalClusterOptions {
    /// Directory holding the four binaries; `None` applies the usual lookup
    /// (`DRA_E2E_BINARIES_DIR`, then the build cache).
    pub binaries_dir: Option<PathBuf>,
    /// Gates passed identically to every component.
    pub feature_gates: FeatureGates,
    /// kube-apiserver `--runtime-config` entries. An API an enabled gate
    /// needs is added automatically (see [`components::effective_runtime_config`]).
    pub runtime_config: Vec<String>,
    /// Keep the cluster's directory (PKI, logs, kubeconfig, etcd data) after
    /// stopping, and print where it is.
    pub keep_files: bool,
    /// Where the cluster's temporary directory is created; default the
    /// system temp dir. Keep it short: kubelet plugin sockets live below it
    /// and unix socket paths are limited to 107 bytes.
    pub base_dir: Option<PathBuf>,
    /// How long each component may take to become ready.
    pub startup_timeout: Duration,
    /// How long a component may take to exit after SIGTERM before SIGKILL.
    pub stop_grace_period: Duration,
}

impl Default for LocalClusterOptions {
    fn default() -> Self {
        Self {
            binaries_dir: None,
            feature_gates: FeatureGates::new(),
            runtime_config: vec![
                "resource.k8s.io/v1beta1=true".to_owned(),
                "resource.k8s.io/v1beta2=true".to_owned(),
            ],
            keep_files: false,
            base_dir: None,
            startup_timeout: Duration::from_secs(180),
            stop_grace_period: Duration::from_secs(15),
        }
    }
}

/// Everything that can go wrong starting or stopping a local cluster.
#[derive(Debug, thiserror::Error)]
pub enum LocalClusterError {
    #[error(transparent)]
    Binaries(#[from] MissingBinaries),
    #[error("creating the cluster directory in {base}: {source}")]
    TempDir {
        base: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("preparing {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating the cluster's certificates: {0}")]
    Pki(#[from] pki::PkiError),
    #[error("finding free loopback ports: {0}")]
    Ports(#[source] std::io::Error),
    #[error("loading the admin kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("creating a client for {what}: {source}")]
    Client {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("starting {component} ({binary}): {source}")]
    Spawn {
        component: String,
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{component} exited ({status}); {log}")]
    Exited {
        component: String,
        status: String,
        log: Box<LogTail>,
    },
    #[error("{component} was not ready within {timeout:?} ({probe}: {last}); {log}")]
    NotReady {
        component: String,
        timeout: Duration,
        probe: String,
        last: String,
        log: Box<LogTail>,
    },
    #[error("{component} is not running in this cluster")]
    NotRunning { component: String },
    #[error("recording what the cluster makes on the host: {0}")]
    Record(#[from] leftovers::LeftoversError),
    #[error("removing the cluster directory {path}: {source}")]
    Cleanup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The end of a component's log, quoted in errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    pub path: PathBuf,
    pub tail: String,
}

impl LogTail {
    fn of(p: &ManagedProcess) -> Box<Self> {
        Box::new(Self {
            path: p.log_path().to_owned(),
            tail: p.log_tail(LOG_TAIL_LINES),
        })
    }
}

impl std::fmt::Display for LogTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "last lines of {}:\n{}", self.path.display(), self.tail)
    }
}

impl LocalClusterError {
    /// A component could not bind its port: another process took one of the
    /// ports chosen as free in the short window before the component bound it.
    fn is_port_conflict(&self) -> bool {
        match self {
            LocalClusterError::Exited { log, .. } => log.tail.contains("address already in use"),
            _ => false,
        }
    }
}

/// Start attempts when a chosen port turns out to be taken (see
/// [`LocalClusterError::is_port_conflict`]).
const START_ATTEMPTS: u32 = 3;

/// One running component, for diagnostics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    pub name: String,
    pub pid: u32,
    pub log_path: PathBuf,
}

/// A running local control plane. Stop it with [`LocalCluster::stop`]; if it
/// is dropped instead (including while a panic unwinds), the same shutdown
/// runs synchronously.
pub struct LocalCluster {
    running: Running,
    dir: PathBuf,
    kubeconfig_path: PathBuf,
    kube_config: kube::Config,
    /// The admin's client for scenarios ([`AdminClients`]).
    client: kube::Client,
    /// The admin's client for the API server's readiness probe.
    probe_client: kube::Client,
    /// Where `client` reports an API server that stayed away.
    outage: Outage,
    /// The components' ports, to probe one started again.
    ports: Ports,
    /// Where clients reach the API server ([`front_door`]); closed while
    /// it restarts.
    front_door: front_door::FrontDoor,
    startup_timeout: Duration,
    server_url: String,
    feature_gates: FeatureGates,
    binaries: Binaries,
    pki: Pki,
    etcd_url: String,
    /// Shared with the real nodes, which record theirs in it.
    record: Arc<RunRecord>,
}

impl std::fmt::Debug for LocalCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCluster")
            .field("server_url", &self.server_url)
            .field("dir", &self.dir)
            .field("feature_gates", &self.feature_gates)
            .finish_non_exhaustive()
    }
}

impl LocalCluster {
    /// Starts etcd, kube-apiserver, kube-scheduler and kube-controller-manager
    /// and waits until each is ready. On error nothing is left running and the
    /// directory is removed (unless `keep_files`).
    ///
    /// First it removes what runs that are gone left on the host (see
    /// [`leftovers`]), and logs it; a live run's things stay.
    pub async fn start(options: LocalClusterOptions) -> Result<Self, LocalClusterError> {
        let binaries = Binaries::find(options.binaries_dir.as_deref())?;
        if let Ok(reclaimed) =
            tokio::task::spawn_blocking(|| Registry::for_this_user().reclaim(false)).await
        {
            reclaimed.log();
            tracing::info!(
                removed = reclaimed.removed.len(),
                in_use = reclaimed.alive.len(),
                failed = reclaimed.failed.len(),
                "reclaimed what gone runs left"
            );
        }
        let mut attempt = 1;
        loop {
            match Self::start_once(&options, binaries.clone()).await {
                Err(e) if attempt < START_ATTEMPTS && e.is_port_conflict() => {
                    tracing::warn!(error = %e, attempt, "a port was taken before the component bound it; retrying with new ports");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(
        options: &LocalClusterOptions,
        binaries: Binaries,
    ) -> Result<Self, LocalClusterError> {
        let started = Instant::now();
        let mut running = Running::create(options)?;
        let dir = running.path().to_owned();
        let record = running
            .record
            .clone()
            .expect("a created cluster has a record");

        let pki_dir = make_dir(&dir.join("pki"), 0o700)?;
        let log_dir = make_dir(&dir.join("logs"), 0o755)?;
        let pki = Pki::generate(&pki_dir)?;
        let ports = free_ports()?;
        let front_door = front_door::FrontDoor::start(
            (std::net::Ipv4Addr::LOCALHOST, ports.apiserver).into(),
            (std::net::Ipv4Addr::LOCALHOST, ports.apiserver_behind).into(),
        )
        .await
        .map_err(LocalClusterError::Ports)?;
        let server_url = format!("https://127.0.0.1:{}", ports.apiserver);
        let kubeconfig_path = dir.join("kubeconfig");
        let admin =
            admin_client(&kubeconfig_path, &server_url, ports.apiserver_behind, &pki).await?;

        let settings = Settings {
            ports,
            pki: &pki,
            etcd_data_dir: dir.join("etcd"),
            kubeconfig: kubeconfig_path.clone(),
            feature_gates: &options.feature_gates,
            runtime_config: &options.runtime_config,
            minor: crate::host::kube_version::program_version(
                &binaries.path(binaries::KUBE_APISERVER),
            )
            .map(|v| v.minor),
        };
        let start = Start {
            binaries: &binaries,
            settings: &settings,
            log_dir: &log_dir,
            timeout: options.startup_timeout,
        };
        start.storage_and_api(&mut running, &admin.probes).await?;
        front_door.door().open();
        start.controllers(&mut running).await?;

        tracing::info!(
            server = %server_url,
            dir = %dir.display(),
            elapsed = ?started.elapsed(),
            "local cluster ready"
        );
        Ok(Self {
            running,
            dir,
            kubeconfig_path,
            kube_config: admin.config,
            client: admin.scenarios,
            probe_client: admin.probes,
            outage: admin.outage,
            ports,
            front_door,
            startup_timeout: options.startup_timeout,
            server_url,
            feature_gates: options.feature_gates.clone(),
            binaries,
            pki,
            etcd_url: components::etcd_url(&ports),
            record,
        })
    }

    /// A client with cluster-admin rights (CN=admin, O=system:masters),
    /// whose requests ride out the API server restarting
    /// ([`dra_e2e_kube::client`]).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Where [`LocalCluster::client`] reports an API server that stayed
    /// away past its deadline.
    pub fn outage(&self) -> Outage {
        self.outage.clone()
    }

    /// The admin client configuration, e.g. to impersonate other users.
    pub fn kube_config(&self) -> kube::Config {
        self.kube_config.clone()
    }

    /// Admin kubeconfig with embedded credentials; works with kubectl.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Whether the cluster's directory stays after it stops.
    pub fn keeps_files(&self) -> bool {
        self.running.keep_files
    }

    /// The cluster's private directory (mode 0700). Simulated nodes put their
    /// kubelet directories here so that they go away with the cluster.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the components' logs are (`<component>.log`).
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The gates every component runs with.
    pub fn feature_gates(&self) -> &FeatureGates {
        &self.feature_gates
    }

    /// The cluster's certificates, to issue more (real nodes' kubelets).
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// `https://127.0.0.1:<port>`: etcd's client URL. It admits only
    /// certificates from [`Pki::etcd`]'s CA.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The directory the binaries were taken from.
    pub fn binaries_dir(&self) -> &Path {
        self.binaries.dir()
    }

    /// Starts `count` simulated kubelet nodes `dra-e2e-node-<i>` on this
    /// cluster, rooted under its directory, with the kubelet's side of the
    /// cluster's feature gates; `configure` adjusts each node further.
    pub async fn start_nodes(
        &self,
        count: usize,
        mut configure: impl FnMut(&mut SimNodeConfig),
    ) -> Result<SimNodes, NodeSimError> {
        let resource_health = self.feature_gates().get("ResourceHealthStatus") != Some(false);
        let pod_group_claims = self.feature_gates().get("DRAWorkloadResourceClaims") == Some(true);
        let optional_node_operations = self
            .feature_gates()
            .enabled("DRAOptionalNodeOperations", false);
        SimNodes::start(
            self.client(),
            NODE_PREFIX,
            count,
            &self.dir().join("n"),
            |c| {
                c.resource_health = resource_health;
                c.pod_group_claims = pod_group_claims;
                c.optional_node_operations = optional_node_operations;
                configure(c);
            },
        )
        .await
    }

    /// The component processes, in start order.
    pub fn components(&self) -> Vec<Component> {
        self.running
            .processes
            .iter()
            .map(|p| Component {
                name: p.component().to_owned(),
                pid: p.pid(),
                log_path: p.log_path().to_owned(),
            })
            .collect()
    }

    /// SIGKILL to every component, without waiting (a second Ctrl-C); a
    /// component already reaped is left alone.
    pub fn kill_components(&self) {
        for p in &self.running.processes {
            p.signal(dra_e2e_sys::Signal::Kill);
        }
    }

    /// One [`Vital`] per component process.
    pub fn vitals(&self) -> Vec<Vital> {
        self.running
            .processes
            .iter()
            .map(|p| Vital::of(p))
            .collect()
    }

    /// Resolves when any component exits on its own (a crash, or a signal
    /// from outside); pending forever while all of them run. Returns the
    /// [`LocalClusterError::Exited`] describing it.
    pub async fn component_exited(&self) -> LocalClusterError {
        if self.running.processes.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.running.processes.iter().map(|p| {
            let mut exit = p.life_watch();
            Box::pin(async move {
                let status = match exit.wait_for(Option::is_some).await {
                    Ok(status) => *status,
                    // The sender lives as long as the process handle.
                    Err(_) => None,
                };
                (p, status)
            })
        });
        let ((p, status), _, _) = futures::future::select_all(waits).await;
        exited_error(
            p,
            status.map_or_else(|| "unknown status".into(), |s| s.to_string()),
        )
    }

    /// Stops every component (SIGTERM; SIGKILL after the grace period) and
    /// removes the directory, unless the cluster was started with
    /// `keep_files`.
    pub async fn stop(mut self) -> Result<(), LocalClusterError> {
        let mut running = std::mem::take(&mut self.running);
        tokio::task::spawn_blocking(move || running.shutdown())
            .await
            .unwrap_or_else(|join_error| std::panic::resume_unwind(join_error.into_panic()))
    }
}

/// What starting the components needs, component after component.
struct Start<'a> {
    binaries: &'a Binaries,
    settings: &'a Settings<'a>,
    log_dir: &'a Path,
    timeout: Duration,
}

impl Start<'_> {
    /// etcd, then the API server, each once it answers `/readyz`.
    async fn storage_and_api(
        &self,
        running: &mut Running,
        client: &kube::Client,
    ) -> Result<(), LocalClusterError> {
        let ports = self.settings.ports;
        let etcd_client = etcd_health_client(&ports, self.settings.pki)?;
        let etcd = self.spawn(running, binaries::ETCD, components::etcd_args)?;
        ready(
            &running.processes[etcd],
            "GET /readyz",
            self.timeout,
            || readiness::probe_kube(&etcd_client, ports.etcd_client, "/readyz"),
        )
        .await?;
        let apiserver = self.spawn(
            running,
            binaries::KUBE_APISERVER,
            components::apiserver_args,
        )?;
        ready(
            &running.processes[apiserver],
            "GET /readyz",
            self.timeout,
            || readiness::probe_kube(client, ports.apiserver_behind, "/readyz"),
        )
        .await
    }

    /// The scheduler and the controller manager together, each once it
    /// answers `/healthz`.
    async fn controllers(&self, running: &mut Running) -> Result<(), LocalClusterError> {
        let ports = self.settings.ports;
        let pki = self.settings.pki;
        let scheduler = self.spawn(
            running,
            binaries::KUBE_SCHEDULER,
            components::scheduler_args,
        )?;
        let controller_manager = self.spawn(
            running,
            binaries::KUBE_CONTROLLER_MANAGER,
            components::controller_manager_args,
        )?;
        let scheduler_client = health_client(ports.scheduler, pki, "kube-scheduler")?;
        let kcm_client = health_client(ports.controller_manager, pki, "kube-controller-manager")?;
        let (s, c) = tokio::join!(
            ready(
                &running.processes[scheduler],
                "GET /healthz",
                self.timeout,
                || { readiness::probe_kube(&scheduler_client, ports.scheduler, "/healthz") }
            ),
            ready(
                &running.processes[controller_manager],
                "GET /healthz",
                self.timeout,
                || { readiness::probe_kube(&kcm_client, ports.controller_manager, "/healthz") }
            ),
        );
        s?;
        c
    }

    fn spawn(
        &self,
        running: &mut Running,
        component: &str,
        args: fn(&Settings<'_>) -> Vec<std::ffi::OsString>,
    ) -> Result<usize, LocalClusterError> {
        running.spawn(self.binaries, component, args(self.settings), self.log_dir)
    }
}

/// The admin's clients of the API server: one for scenarios, whose requests
/// ride out the API server restarting and report when it stays away
/// ([`dra_e2e_kube::client`]), and one for readiness probes, which answer
/// at once.
struct AdminClients {
    config: kube::Config,
    scenarios: kube::Client,
    probes: kube::Client,
    outage: Outage,
}

/// Writes the admin kubeconfig for `server_url` and makes clients from it.
async fn admin_client(
    kubeconfig_path: &Path,
    server_url: &str,
    behind_port: u16,
    pki: &Pki,
) -> Result<AdminClients, LocalClusterError> {
    pki::write_file(kubeconfig_path, &kubeconfig::render(server_url, pki), 0o600)?;
    let config = load_kubeconfig(kubeconfig_path).await?;
    let err = |source| LocalClusterError::Client {
        what: "kube-apiserver".into(),
        source,
    };
    let outage = Outage::new();
    let scenarios = dra_e2e_kube::client::build(config.clone(), Some(&outage)).map_err(err)?;
    let mut probe_config = config.clone();
    probe_config.default_retry = false;
    // The probe asks the API server itself, behind its front door, which
    // opens on the probe's answer.
    probe_config.cluster_url =
        http::Uri::from_maybe_shared(format!("https://127.0.0.1:{behind_port}"))
            .expect("https://127.0.0.1:<port> is a URL");
    let probes = kube::Client::try_from(probe_config).map_err(err)?;
    Ok(AdminClients {
        config,
        scenarios,
        probes,
        outage,
    })
}

impl crate::real_node::ControlPlane for LocalCluster {
    fn dir(&self) -> &Path {
        LocalCluster::dir(self)
    }

    fn server_url(&self) -> &str {
        LocalCluster::server_url(self)
    }

    fn pki(&self) -> &Pki {
        LocalCluster::pki(self)
    }

    fn gates(&self) -> Vec<(String, bool)> {
        self.feature_gates
            .iter()
            .map(|(g, on)| (g.to_owned(), on))
            .collect()
    }

    fn client(&self) -> kube::Client {
        LocalCluster::client(self)
    }

    fn record(&self) -> &RunRecord {
        &self.record
    }
}

/// The processes and directory of a cluster; stopping happens here so that a
/// half-started cluster is cleaned up by the same code as a running one.
#[derive(Default)]
struct Running {
    /// In start order: etcd, kube-apiserver, then the controllers.
    /// Shared with a restart under way ([`Restart`]), which puts the
    /// process it started in its place.
    processes: Vec<Arc<ManagedProcess>>,
    dir: Option<PathBuf>,
    /// The run's record of what it made on the host; closed at the end once
    /// all of it is gone.
    record: Option<Arc<RunRecord>>,
    keep_files: bool,
    grace: Duration,
}

impl Running {
    /// Starts the run's record, then makes the cluster's directory
    /// (`dra-e2e-XXXXXX` in the temp dir, mode 0700), recorded first.
    fn create(options: &LocalClusterOptions) -> Result<Self, LocalClusterError> {
        use rand::Rng as _;
        let base = options.base_dir.clone().unwrap_or_else(std::env::temp_dir);
        let record = Arc::new(Registry::for_this_user().start_record()?);
        let mut running = Self {
            processes: Vec::new(),
            dir: None,
            record: Some(record.clone()),
            keep_files: options.keep_files,
            grace: options.stop_grace_period,
        };
        let dir = loop {
            // As tempfile names them: six letters or digits, so the path
            // stays short (kubelet plugin sockets live below it).
            let name: String = rand::rng()
                .sample_iter(rand::distr::Alphanumeric)
                .take(6)
                .map(char::from)
                .collect();
            let path = base.join(format!("dra-e2e-{name}"));
            // Taken names are skipped before recording, so the record does
            // not name another run's directory (short of two runs drawing the
            // same name within this moment).
            if path.symlink_metadata().is_ok() {
                continue;
            }
            record.add(match options.keep_files {
                true => Item::KeptDir(path.clone()),
                false => Item::Dir(path.clone()),
            })?;
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => break path,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(LocalClusterError::TempDir { base, source }),
            }
        };
        running.dir = Some(dir.clone());
        // The umask may have taken bits away; 0700 is what is meant.
        set_mode(&dir, 0o700)?;
        Ok(running)
    }

    fn path(&self) -> &Path {
        self.dir.as_deref().unwrap_or_else(|| Path::new(""))
    }

    fn spawn(
        &mut self,
        binaries: &Binaries,
        component: &str,
        args: Vec<std::ffi::OsString>,
        log_dir: &Path,
    ) -> Result<usize, LocalClusterError> {
        let binary = binaries.path(component);
        let log = log_dir.join(format!("{component}.log"));
        let process = ManagedProcess::spawn(component, &binary, args, &log).map_err(|source| {
            LocalClusterError::Spawn {
                component: component.to_owned(),
                binary: binary.clone(),
                source,
            }
        })?;
        self.processes.push(Arc::new(process));
        Ok(self.processes.len() - 1)
    }

    /// Idempotent: stops what runs, removes (or keeps) the directory.
    fn shutdown(&mut self) -> Result<(), LocalClusterError> {
        let mut processes = std::mem::take(&mut self.processes);
        // Controllers first so they do not spin on a vanished API server, then
        // the API server, then its storage.
        let core = processes.len().min(2);
        let controllers: Vec<&ManagedProcess> = processes[core..].iter().map(|p| &**p).collect();
        process::stop_all(&controllers, self.grace);
        for p in processes[..core].iter().rev() {
            process::stop_all(&[p], self.grace);
        }
        // Joins the reaper threads.
        processes.clear();

        let removed = match self.dir.take() {
            None => Ok(()),
            Some(path) if self.keep_files => {
                // The caller tells the user (it knows whether one is watching).
                tracing::info!(dir = %path.display(), "kept the local cluster's files");
                Ok(())
            }
            Some(path) => fs::remove_dir_all(&path)
                .map_err(|source| LocalClusterError::Cleanup { path, source }),
        };
        // Whatever is still there keeps the record, for a reclaim once this
        // process is gone.
        if let Some(record) = self.record.take() {
            for item in record.close() {
                tracing::warn!(record = %record.path().display(), "left for a later reclaim: {item}");
            }
        }
        removed
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.processes.is_empty() && self.dir.is_none() && self.record.is_none() {
            return;
        }
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "cleaning up the local cluster");
        }
    }
}

fn exited_error(p: &ManagedProcess, status: String) -> LocalClusterError {
    LocalClusterError::Exited {
        component: p.component().to_owned(),
        status,
        log: LogTail::of(p),
    }
}

/// Waits for one component and turns a failure into an error naming it.
async fn ready<F, Fut>(
    p: &ManagedProcess,
    probe: &str,
    timeout: Duration,
    f: F,
) -> Result<(), LocalClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    match readiness::wait_ready(p, probe, timeout, f).await {
        Ok(()) => {
            tracing::info!(component = p.component(), elapsed = ?started.elapsed(), "ready");
            Ok(())
        }
        Err(NotReady::Exited { status }) => Err(exited_error(p, status.to_string())),
        Err(NotReady::Timeout { probe, last }) => Err(LocalClusterError::NotReady {
            component: p.component().to_owned(),
            timeout,
            probe,
            last,
            log: LogTail::of(p),
        }),
    }
}

/// An anonymous HTTPS client for a component's secure port, trusting only the
/// cluster CA that signed its serving certificate.
fn health_client(port: u16, pki: &Pki, component: &str) -> Result<kube::Client, LocalClusterError> {
    let url: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .expect("a loopback URL with a numeric port is valid");
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![pki.ca_der.clone()]);
    kube::Client::try_from(config).map_err(|source| LocalClusterError::Client {
        what: component.to_owned(),
        source,
    })
}

/// A client of etcd's HTTPS port with the runner's health-check certificate:
/// etcd refuses every connection without one from its CA, probes included.
fn etcd_health_client(ports: &Ports, pki: &Pki) -> Result<kube::Client, LocalClusterError> {
    let url: http::Uri = components::etcd_url(ports)
        .parse()
        .expect("a loopback URL with a numeric port is valid");
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![pki.etcd.ca_der.clone()]);
    let client = &pki.etcd.healthcheck_client;
    config.auth_info.client_certificate = Some(client.cert_path.to_string_lossy().into_owned());
    config.auth_info.client_key = Some(client.key_path.to_string_lossy().into_owned());
    kube::Client::try_from(config).map_err(|source| LocalClusterError::Client {
        what: "etcd".to_owned(),
        source,
    })
}

async fn load_kubeconfig(path: &Path) -> Result<kube::Config, LocalClusterError> {
    let err = |source| LocalClusterError::Kubeconfig {
        path: path.to_owned(),
        source,
    };
    let kc = kube::config::Kubeconfig::read_from(path).map_err(err)?;
    kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(err)
}

/// Ports the kernel reports free right now. All listeners are held until every
/// port is chosen, so the five are distinct; another process could still take
/// one before the component binds it, which then fails start-up loudly.
fn free_ports() -> Result<Ports, LocalClusterError> {
    let listeners = (0..6)
        .map(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(LocalClusterError::Ports)?;
    let ports = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(LocalClusterError::Ports)?;
    Ok(Ports {
        etcd_client: ports[0],
        etcd_peer: ports[1],
        apiserver: ports[2],
        apiserver_behind: ports[5],
        scheduler: ports[3],
        controller_manager: ports[4],
    })
}

fn make_dir(path: &Path, mode: u32) -> Result<PathBuf, LocalClusterError> {
    fs::create_dir(path).map_err(|source| LocalClusterError::Io {
        path: path.to_owned(),
        source,
    })?;
    set_mode(path, mode)?;
    Ok(path.to_owned())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), LocalClusterError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|source| {
        LocalClusterError::Io {
            path: path.to_owned(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited_with(tail: &str) -> LocalClusterError {
        LocalClusterError::Exited {
            component: "etcd".into(),
            status: "exit status: 1".into(),
            log: Box::new(LogTail {
                path: "/x/etcd.log".into(),
                tail: tail.into(),
            }),
        }
    }

    #[test]
    fn only_bind_failures_are_retried() {
        assert!(
            exited_with("listen tcp 127.0.0.1:4001: bind: address already in use")
                .is_port_conflict()
        );
        assert!(!exited_with("unrecognized feature gate: X").is_port_conflict());
    }

    #[test]
    fn errors_quote_the_log() {
        let msg = exited_with("line one\nline two").to_string();
        assert_eq!(
            msg,
            "etcd exited (exit status: 1); last lines of /x/etcd.log:\nline one\nline two"
        );
    }
}
