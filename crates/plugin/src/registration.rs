//! The plugin registration service the kubelet's plugin watcher talks to.
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tonic::{Request, Response, Status};
use tracing::{info, warn};

use super::watch::{Changes, WaitTimeout};
use dra_e2e_proto::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus as PbRegistrationStatus,
    RegistrationStatusResponse, registration_server::Registration,
};
use dra_e2e_proto::service;

/// What the kubelet last reported through `NotifyRegistrationStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RegistrationStatus {
    /// No report yet.
    #[default]
    Pending,
    Registered,
    /// The kubelet rejected the plugin; it retries later.
    Rejected(String),
}

impl fmt::Display for RegistrationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistrationStatus::Pending => f.write_str("not yet notified"),
            RegistrationStatus::Registered => f.write_str("registered"),
            RegistrationStatus::Rejected(e) => write!(f, "rejected: {e}"),
        }
    }
}

/// Registration outcome of one plugin instance, shared with its handle.
#[derive(Debug, Default)]
pub(crate) struct RegistrationState {
    status: Mutex<RegistrationStatus>,
    changes: Changes,
}

impl RegistrationState {
    fn lock(&self) -> MutexGuard<'_, RegistrationStatus> {
        self.status
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn status(&self) -> RegistrationStatus {
        self.lock().clone()
    }

    pub(crate) fn set(&self, status: RegistrationStatus) {
        *self.lock() = status;
        self.changes.bump();
    }

    pub(crate) async fn wait_registered(
        &self,
        what: impl FnOnce() -> String,
        timeout: Duration,
    ) -> Result<(), WaitTimeout> {
        self.changes
            .wait_until(what, timeout, || match self.status() {
                RegistrationStatus::Registered => Ok(()),
                other => Err(other.to_string()),
            })
            .await
    }
}

pub(crate) struct RegistrationService {
    pub(crate) driver: String,
    pub(crate) node: String,
    pub(crate) endpoint: String,
    pub(crate) supported_versions: Vec<String>,
    pub(crate) state: Arc<RegistrationState>,
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        info!(driver = %self.driver, node = %self.node, versions = ?self.supported_versions,
            "kubelet asked for plugin info");
        Ok(Response::new(PluginInfo {
            r#type: service::DRA_PLUGIN_TYPE.to_owned(),
            name: self.driver.clone(),
            endpoint: self.endpoint.clone(),
            supported_versions: self.supported_versions.clone(),
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<PbRegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            info!(driver = %self.driver, node = %self.node, "kubelet registered the plugin");
            self.state.set(RegistrationStatus::Registered);
            Ok(Response::new(RegistrationStatusResponse {}))
        } else {
            warn!(driver = %self.driver, node = %self.node, error = %status.error,
                "kubelet rejected the plugin");
            self.state
                .set(RegistrationStatus::Rejected(status.error.clone()));
            Err(Status::unknown(format!(
                "failed registration process: {}",
                status.error
            )))
        }
    }
}
