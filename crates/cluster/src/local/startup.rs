//! Starting the components one after another (etcd, the API server, then
//! the controllers together), each only once it answers its probe, with the
//! clients those probes and the scenarios use: a component that is not
//! ready fails the start naming itself, never a later step.
use std::path::Path;
use std::time::{Duration, Instant};

use super::components::{self, Ports, Settings};
use super::error::exited_error;
use super::readiness::{self, NotReady};
use super::running::Running;
use super::{Binaries, LocalClusterError, LogTail, binaries, kubeconfig};
use crate::host::pki::{self, Pki};
use crate::host::process::ManagedProcess;
use dra_e2e_kube::client::Outage;

/// What starting the components needs, component after component.
pub(super) struct Start<'a> {
    pub(super) binaries: &'a Binaries,
    pub(super) settings: &'a Settings<'a>,
    pub(super) log_dir: &'a Path,
    pub(super) timeout: Duration,
}

impl Start<'_> {
    /// etcd, then the API server, each once it answers `/readyz`.
    pub(super) async fn storage_and_api(
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
    pub(super) async fn controllers(&self, running: &mut Running) -> Result<(), LocalClusterError> {
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
pub(super) struct AdminClients {
    pub(super) config: kube::Config,
    pub(super) scenarios: kube::Client,
    pub(super) probes: kube::Client,
    pub(super) outage: Outage,
}

/// Writes the admin kubeconfig for `server_url` and makes clients from it.
pub(super) async fn admin_client(
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

/// Waits for one component and turns a failure into an error naming it.
pub(super) async fn ready<F, Fut>(
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
pub(super) fn health_client(
    port: u16,
    pki: &Pki,
    component: &str,
) -> Result<kube::Client, LocalClusterError> {
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

/// How long binding free ports is tried again while the kernel has none.
const PORTS_PATIENCE: Duration = Duration::from_secs(10);
/// The pause between those tries.
const PORTS_PAUSE: Duration = Duration::from_millis(100);

/// Ports the kernel reports free right now. All listeners are held until every
/// port is chosen, so the five are distinct; another process could still take
/// one before the component binds it, which then fails start-up loudly.
///
/// Binding port 0 fails with "address in use" while the kernel has no
/// ephemeral port to give (seen once in `make test`, three jobs' clusters
/// and runners opening and closing connections at once): that is asked
/// again for [`PORTS_PATIENCE`], any other error is final.
pub(super) async fn free_ports() -> Result<Ports, LocalClusterError> {
    let deadline = tokio::time::Instant::now() + PORTS_PATIENCE;
    let listeners = loop {
        match (0..6)
            .map(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(l) => break l,
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(PORTS_PAUSE).await;
            }
            Err(e) => return Err(LocalClusterError::Ports(e)),
        }
    };
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
