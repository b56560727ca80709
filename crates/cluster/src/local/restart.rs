//! Restarting a control-plane component of the local cluster on purpose:
//! the API server, the scheduler or the controller-manager stopped as an
//! operator would stop it (SIGTERM, SIGKILL after the grace period) and
//! started again with the same command line: the same port, certificates,
//! etcd and log (appended to). The run goes on: the process started again
//! continues the component's life, which only an exit on its own ends
//! ([`ManagedProcess::life_watch`]), and the runner's clients ride out the
//! gap ([`dra_e2e_kube::client`]).
//!
//! The stopped process gets [`RESTART_GRACE`] to exit. The API server's
//! front door ([`super::front_door`]) is closed from its stop until the new
//! process answers `/readyz`, as a load balancer sends no client to an API
//! server that is not ready.
//!
//! A restart is begun under the lock a cluster is shared behind
//! ([`LocalCluster::begin_restart`]), carried out without it
//! ([`Restart::stopped`], [`Restart::start`], [`Restart::ready`]), and the
//! new process is put in the old one's place under the lock again
//! ([`LocalCluster::put_back`]); [`LocalCluster::restart`] does all of it
//! for a cluster owned outright. etcd is not among the components: its
//! restart is a storage outage, not the API server's, and no scenario
//! asks for one.
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::exited_error;
use super::startup::{health_client, ready};
use super::{LocalCluster, LocalClusterError, binaries};
use crate::host::process::ManagedProcess;

/// A control-plane component the runner can restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlPlaneComponent {
    ApiServer,
    Scheduler,
    ControllerManager,
}

impl ControlPlaneComponent {
    pub const ALL: [ControlPlaneComponent; 3] = [
        ControlPlaneComponent::ApiServer,
        ControlPlaneComponent::Scheduler,
        ControlPlaneComponent::ControllerManager,
    ];

    /// Its program's name: `kube-apiserver`, `kube-scheduler`,
    /// `kube-controller-manager`.
    pub fn name(self) -> &'static str {
        match self {
            ControlPlaneComponent::ApiServer => binaries::KUBE_APISERVER,
            ControlPlaneComponent::Scheduler => binaries::KUBE_SCHEDULER,
            ControlPlaneComponent::ControllerManager => binaries::KUBE_CONTROLLER_MANAGER,
        }
    }

    /// The component of a program's name.
    pub fn named(name: &str) -> Option<ControlPlaneComponent> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// What says it is ready again, as its start waits for it.
    fn probe_path(self) -> &'static str {
        match self {
            ControlPlaneComponent::ApiServer => "/readyz",
            _ => "/healthz",
        }
    }
}

impl std::fmt::Display for ControlPlaneComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How long a component stopped to be restarted may take to exit before
/// SIGKILL. The API server stops listening at once on SIGTERM, then drains
/// what it still holds (watches, for as long as 15 s and more here), which
/// serves no client: waiting for that only makes the outage longer than
/// the restart is.
const RESTART_GRACE: Duration = Duration::from_secs(5);

/// A restart under way ([module docs](self)).
pub struct Restart {
    component: ControlPlaneComponent,
    old: Arc<ManagedProcess>,
    probe: kube::Client,
    port: u16,
    /// The API server's front door, closed from the stop to `/readyz`.
    door: Option<super::front_door::Door>,
    grace: Duration,
    timeout: Duration,
}

impl LocalCluster {
    /// Stops `component` to start it again (SIGTERM; it is not an exit that
    /// ends the run) and returns the rest of the restart, to carry out
    /// without the cluster's lock.
    pub fn begin_restart(
        &self,
        component: ControlPlaneComponent,
    ) -> Result<Restart, LocalClusterError> {
        let old = self
            .running
            .processes
            .iter()
            .find(|p| p.component() == component.name())
            .cloned()
            .ok_or_else(|| LocalClusterError::NotRunning {
                component: component.name().to_owned(),
            })?;
        if let Some(status) = old.exit_status() {
            return Err(exited_error(&old, status.to_string()));
        }
        let (probe, port) = match component {
            ControlPlaneComponent::ApiServer => {
                (self.probe_client.clone(), self.ports.apiserver_behind)
            }
            ControlPlaneComponent::Scheduler => (
                health_client(self.ports.scheduler, &self.pki, component.name())?,
                self.ports.scheduler,
            ),
            ControlPlaneComponent::ControllerManager => (
                health_client(self.ports.controller_manager, &self.pki, component.name())?,
                self.ports.controller_manager,
            ),
        };
        let door = (component == ControlPlaneComponent::ApiServer).then(|| self.front_door.door());
        tracing::info!(%component, pid = old.pid(), "restarting");
        if let Some(door) = &door {
            door.close();
        }
        old.stop_for_restart();
        Ok(Restart {
            component,
            old,
            probe,
            port,
            door,
            grace: RESTART_GRACE.min(self.running.grace),
            timeout: self.startup_timeout,
        })
    }

    /// Puts the process `restart` started in the place of the one it
    /// stopped; `false` when that one is no longer the cluster's (it was
    /// stopped meanwhile), and then the new one is stopped too.
    pub fn put_back(&mut self, restart: &Restart, new: Arc<ManagedProcess>) -> bool {
        match self
            .running
            .processes
            .iter_mut()
            .find(|p| Arc::ptr_eq(p, &restart.old))
        {
            Some(slot) => {
                *slot = new;
                true
            }
            None => false,
        }
    }

    /// Restarts `component` and waits until it is ready again.
    pub async fn restart(
        &mut self,
        component: ControlPlaneComponent,
    ) -> Result<(), LocalClusterError> {
        let restart = self.begin_restart(component)?;
        restart.stopped().await;
        let new = restart.start()?;
        self.put_back(&restart, new.clone());
        restart.ready(&new).await
    }
}

impl Drop for Restart {
    /// A restart given up half-way (its start failed, the run ended) does
    /// not leave the API server's front door closed.
    fn drop(&mut self) {
        if let Some(door) = &self.door {
            door.open();
        }
    }
}

impl Restart {
    pub fn component(&self) -> ControlPlaneComponent {
        self.component
    }

    /// Waits until the stopped process has exited: SIGKILL after the grace
    /// period, as a cluster stops.
    pub async fn stopped(&self) {
        let mut exit = self.old.exit_watch();
        let ended = tokio::time::timeout(self.grace, exit.wait_for(Option::is_some))
            .await
            .is_ok();
        if !ended {
            tracing::info!(component = %self.component, grace = ?self.grace, "did not stop after SIGTERM; sending SIGKILL");
            self.old.signal(dra_e2e_sys::Signal::Kill);
            let _ = exit.wait_for(Option::is_some).await;
        }
    }

    /// Starts the component again, with the stopped one's command line.
    pub fn start(&self) -> Result<Arc<ManagedProcess>, LocalClusterError> {
        self.old
            .spawn_again()
            .map(Arc::new)
            .map_err(|source| LocalClusterError::Spawn {
                component: self.component.name().to_owned(),
                binary: Default::default(),
                source,
            })
    }

    /// Waits until `new` answers its readiness probe, as at the cluster's
    /// start.
    pub async fn ready(&self, new: &ManagedProcess) -> Result<(), LocalClusterError> {
        let started = Instant::now();
        let path = self.component.probe_path();
        let answered = ready(new, &format!("GET {path}"), self.timeout, || {
            super::readiness::probe_kube(&self.probe, self.port, path)
        })
        .await;
        // Open either way: a new API server that never became ready is
        // better seen by the clients (refused, then the outage's deadline)
        // than hidden behind a door that never opens.
        if let Some(door) = &self.door {
            door.open();
        }
        answered?;
        tracing::info!(component = %self.component, elapsed = ?started.elapsed(), "restarted");
        Ok(())
    }
}
