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
mod error;
pub mod front_door;
mod kubeconfig;
mod readiness;
mod restart;
mod running;
mod startup;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use binaries::{Binaries, MissingBinaries};
// The gates live beside both the control plane and the real nodes, which
// probe their own binaries with them; named here for the control plane's
// callers.
pub use crate::gates::{
    FeatureGates, GateProbe, GateRefusal, InvalidFeatureGate, refused_by as gates_refused_by,
};
pub use restart::{ControlPlaneComponent, Restart};

use crate::host::leftovers::{Registry, RunRecord};
use crate::host::pki::Pki;
use crate::host::vital::Vital;
use components::{Ports, Settings};
use dra_e2e_kube::client::Outage;
use error::exited_error;
pub use error::{LocalClusterError, LogTail};
use running::{Running, make_dir};
use startup::{Start, admin_client, free_ports};

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
    /// The admin's client for scenarios ([`startup::AdminClients`]).
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
    /// [`leftovers`](crate::host::leftovers)), and logs it; a live run's things stay.
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
        let ports = free_ports().await?;
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
