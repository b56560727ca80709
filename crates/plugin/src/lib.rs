//! The kubelet plugin the runner hosts per (driver, node): registration and DRA
//! gRPC servers, test-driver semantics, call counting and failure injection.
//!
//! One [`NodePlugin`] serves one node of one driver. All nodes of a driver share
//! one [`Calls`], so the harness can count, fail and stall any method on any node
//! from a single place.
//!
//! ```no_run
//! # async fn doc(claims: std::sync::Arc<dyn dra_e2e_plugin::ClaimSource>) -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use dra_e2e_conn::node_files::LocalDir;
//! use dra_e2e_plugin::{Calls, NodePlugin, PluginConfig};
//!
//! let calls = Calls::new("dra-1234.k8s.io");
//! let config = PluginConfig::new(
//!     "dra-1234.k8s.io",
//!     "node-1",
//!     "/var/lib/kubelet/plugins/dra-1234.k8s.io/dra.sock",
//!     claims,
//!     Arc::new(LocalDir::new("/var/run/cdi")),
//!     calls.clone(),
//! );
//! let plugin = NodePlugin::start_unix(
//!     config,
//!     "/var/lib/kubelet/plugins/dra-1234.k8s.io/dra.sock",
//!     "/var/lib/kubelet/plugins_registry/dra-1234.k8s.io-reg.sock",
//! )
//! .await?;
//! plugin.wait_registered(Duration::from_secs(60)).await?;
//! plugin.stop().await?;
//! # Ok(()) }
//! ```
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dra_e2e_conn::node_files::NodeFiles;
// The kubelet API's vocabulary, so that code configuring or inspecting a
// plugin names it from one place.
pub use dra_e2e_proto::dra::{ClaimRef, NodeApi, PreparedDevice, UnknownNodeApi};
pub use dra_e2e_proto::health::{HealthApi, HealthStatus};

pub mod calls;
pub mod claims;
pub mod dra;
pub mod driver_logic;
pub mod fault;
pub mod health;
pub mod interposer;
pub mod metadata;
mod node_plugin;
pub mod prepared;
pub mod probe;
pub mod registration;
mod watch;

pub use calls::{CallOutcome, CallRecord, Calls, CallsLayer};
pub use claims::{ClaimSource, ClaimSourceError};
pub use health::DeviceHealth;
pub use node_plugin::NodePlugin;
pub use prepared::{ClaimId, Prepared, PreparedClaim};
pub use registration::RegistrationStatus;
pub use watch::WaitTimeout;

/// Legacy `supported_versions` entry: a plugin serving only v1alpha4 must send
/// this, because 1.31 kubelets parse the entries as semantic versions and 1.32/1.33
/// still accept it.
pub const LEGACY_V1ALPHA4_VERSION: &str = "1.0.0";

/// Everything one plugin instance for one (driver, node) needs.
#[derive(Clone)]
pub struct PluginConfig {
    pub driver_name: String,
    pub node_name: String,
    /// The DRA socket as the *kubelet* sees it (a host path), advertised by `GetInfo`.
    pub endpoint: String,
    /// Served node APIs; `supported_versions` lists them in this order.
    pub node_apis: Vec<NodeApi>,
    /// Served and advertised health service versions, in this order; none
    /// for a driver without health reporting.
    pub health_apis: Vec<HealthApi>,
    /// How often an open health stream repeats the full list.
    pub health_interval: Duration,
    /// Reads claims from the API server with the driver's own identity.
    pub claims: Arc<dyn ClaimSource>,
    /// The node's CDI spec directory.
    pub cdi: Arc<dyn NodeFiles>,
    /// Shared by all nodes of the driver.
    pub calls: Calls,
    /// Claims prepared on this node. Pass the previous instance's view when
    /// restarting a plugin so that unprepare still finds the claims it prepared.
    pub prepared: Prepared,
    /// How long [`NodePlugin::stop`] waits for each server to drain.
    pub stop_timeout: Duration,
    /// Device metadata files to write at prepare, if the driver enables them.
    pub metadata: Option<metadata::MetadataConfig>,
    /// Bugs the driver plants in itself (none normally).
    pub faults: fault::Faults,
}

impl PluginConfig {
    /// Defaults as upstream's test driver: v1 then v1beta1, health served
    /// (v1, then v1alpha1 for older kubelets) and repeated every 2 s.
    pub fn new(
        driver_name: impl Into<String>,
        node_name: impl Into<String>,
        endpoint: impl Into<String>,
        claims: Arc<dyn ClaimSource>,
        cdi: Arc<dyn NodeFiles>,
        calls: Calls,
    ) -> Self {
        Self {
            driver_name: driver_name.into(),
            node_name: node_name.into(),
            endpoint: endpoint.into(),
            node_apis: vec![NodeApi::V1, NodeApi::V1beta1],
            health_apis: HealthApi::ALL.to_vec(),
            health_interval: Duration::from_secs(2),
            claims,
            cdi,
            calls,
            prepared: Prepared::default(),
            stop_timeout: Duration::from_secs(10),
            metadata: None,
            faults: fault::Faults::default(),
        }
    }

    pub fn with_faults(mut self, faults: fault::Faults) -> Self {
        self.faults = faults;
        self
    }

    pub fn with_node_apis(mut self, apis: impl IntoIterator<Item = NodeApi>) -> Self {
        self.node_apis = apis.into_iter().collect();
        self
    }

    pub fn with_health_apis(mut self, apis: impl IntoIterator<Item = HealthApi>) -> Self {
        self.health_apis = apis.into_iter().collect();
        self
    }

    pub fn with_health_interval(mut self, interval: Duration) -> Self {
        self.health_interval = interval;
        self
    }

    pub fn with_device_metadata(mut self, metadata: metadata::MetadataConfig) -> Self {
        self.metadata = Some(metadata);
        self
    }

    pub fn with_prepared(mut self, prepared: Prepared) -> Self {
        self.prepared = prepared;
        self
    }

    /// The node APIs served, each once, in the configured order.
    pub(crate) fn served_node_apis(&self) -> Vec<NodeApi> {
        first_occurrences(&self.node_apis)
    }

    /// The health APIs served, each once, in the configured order.
    pub(crate) fn served_health_apis(&self) -> Vec<HealthApi> {
        first_occurrences(&self.health_apis)
    }

    /// `PluginInfo.supported_versions` for this configuration.
    pub fn supported_versions(&self) -> Vec<String> {
        let apis = self.served_node_apis();
        let node_versions: Vec<&str> = if apis == [NodeApi::V1alpha4] {
            vec![LEGACY_V1ALPHA4_VERSION]
        } else {
            apis.iter().map(|a| a.registration_string()).collect()
        };
        let health_versions = self
            .served_health_apis()
            .into_iter()
            .map(HealthApi::registration_string);
        node_versions
            .into_iter()
            .chain(health_versions)
            .map(str::to_owned)
            .collect()
    }
}

fn first_occurrences<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(item) {
            out.push(*item);
        }
    }
    out
}

impl fmt::Debug for PluginConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginConfig")
            .field("driver_name", &self.driver_name)
            .field("node_name", &self.node_name)
            .field("endpoint", &self.endpoint)
            .field("node_apis", &self.node_apis)
            .field("health_apis", &self.health_apis)
            .field("health_interval", &self.health_interval)
            .field("cdi", &self.cdi)
            .finish_non_exhaustive()
    }
}

/// Which of a node plugin's two servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Registration,
    Dra,
}

impl ServerKind {
    /// Which socket of the kubelet's this server's is.
    pub fn kubelet_socket(self) -> dra_e2e_conn::KubeletSocket {
        match self {
            ServerKind::Registration => dra_e2e_conn::KubeletSocket::Registration,
            ServerKind::Dra => dra_e2e_conn::KubeletSocket::Dra,
        }
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerKind::Registration => "registration",
            ServerKind::Dra => "DRA",
        })
    }
}

/// Starting and stopping a node plugin.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{op} {kind} socket {path} of driver {driver} on node {node}: {source}")]
    Socket {
        op: &'static str,
        kind: ServerKind,
        path: PathBuf,
        driver: String,
        node: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{kind} server of driver {driver} on node {node} failed: {source}")]
    Serve {
        kind: ServerKind,
        driver: String,
        node: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{kind} server of driver {driver} on node {node} panicked: {message}")]
    Panicked {
        kind: ServerKind,
        driver: String,
        node: String,
        message: String,
    },
    #[error(
        "{kind} server of driver {driver} on node {node} did not drain its connections within {timeout:?}; aborted"
    )]
    StopTimeout {
        kind: ServerKind,
        driver: String,
        node: String,
        timeout: Duration,
    },
    #[error("the DRA service of driver {driver} on node {node} runs already")]
    AlreadyServing { driver: String, node: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct NoClaims;

    #[async_trait::async_trait]
    impl ClaimSource for NoClaims {
        async fn get_claim(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<k8s_openapi::api::resource::v1::ResourceClaim>, ClaimSourceError>
        {
            Ok(None)
        }
    }

    fn config() -> PluginConfig {
        PluginConfig::new(
            "d",
            "n",
            "/dra.sock",
            Arc::new(NoClaims),
            Arc::new(dra_e2e_conn::node_files::LocalDir::new("/nonexistent")),
            Calls::new("d"),
        )
    }

    #[test]
    fn supported_versions_follow_configured_order() {
        assert_eq!(
            config().supported_versions(),
            [
                "v1.DRAPlugin",
                "v1beta1.DRAPlugin",
                "v1.DRAResourceHealth",
                "v1alpha1.DRAResourceHealth"
            ]
        );
        let c = config()
            .with_node_apis([NodeApi::V1beta1, NodeApi::V1alpha4, NodeApi::V1beta1])
            .with_health_apis([]);
        assert_eq!(
            c.supported_versions(),
            ["v1beta1.DRAPlugin", "v1alpha3.NodeService"]
        );
        let c = config()
            .with_node_apis([NodeApi::V1alpha4])
            .with_health_apis([HealthApi::V1alpha1]);
        assert_eq!(
            c.supported_versions(),
            ["1.0.0", "v1alpha1.DRAResourceHealth"]
        );
    }
}
