//! Where the driver's plugin runs: a local agent for the simulated node, a
//! proxy pod for the real one, one driver across both, so that the two
//! kubelets meet the same plugin.
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use dra_e2e::cluster::local_host::LocalHost;
use dra_e2e::cluster::remote::RemoteEnv;
use dra_e2e::conn::node_files::{NodeFiles, NodeFilesError};
use dra_e2e::conn::node_host::{HostProvider, HostedDriver, NodeHost, Served, SocketError};

use super::CDI_MISSING_ENV;

/// The CDI directory of a node, except that spec files carrying
/// [`CDI_MISSING_ENV`] are never written.
#[derive(Debug)]
struct DropMarked(Arc<dyn NodeFiles>);

#[async_trait]
impl NodeFiles for DropMarked {
    async fn create(&self, name: &str, content: &[u8]) -> Result<(), NodeFilesError> {
        if String::from_utf8_lossy(content).contains(CDI_MISSING_ENV) {
            return Ok(());
        }
        self.0.create(name, content).await
    }

    async fn remove(&self, name: &str) -> Result<(), NodeFilesError> {
        self.0.remove(name).await
    }

    async fn exists(&self, name: &str) -> Result<bool, NodeFilesError> {
        self.0.exists(name).await
    }

    async fn specs(&self) -> Result<Vec<(String, String)>, NodeFilesError> {
        self.0.specs().await
    }
}

struct BothHosts {
    sim: String,
    local: Arc<dyn NodeHost>,
    remote: Arc<dyn NodeHost>,
}

impl BothHosts {
    fn pick(&self, node: &str) -> &Arc<dyn NodeHost> {
        if node == self.sim {
            &self.local
        } else {
            &self.remote
        }
    }
}

#[async_trait]
impl NodeHost for BothHosts {
    fn kubelet_root(&self, node: &str) -> PathBuf {
        self.pick(node).kubelet_root(node)
    }

    fn cdi_files(&self, node: &str) -> Arc<dyn NodeFiles> {
        Arc::new(DropMarked(self.pick(node).cdi_files(node)))
    }

    fn pod_of(&self, node: &str) -> Option<(String, String)> {
        self.pick(node).pod_of(node)
    }

    async fn serve(&self, node: &str, socket: &std::path::Path) -> Result<Served, SocketError> {
        self.pick(node).serve(node, socket).await
    }
}

pub(super) struct Hosts {
    pub(super) sim: (String, PathBuf, PathBuf),
    pub(super) real: String,
    pub(super) remote: RemoteEnv,
}

#[async_trait]
impl HostProvider for Hosts {
    async fn node_host(&self, hosted: HostedDriver<'_>) -> anyhow::Result<Arc<dyn NodeHost>> {
        // The simulated node's local agents are the workspace's dra-e2e-agent
        // (this test binary has no `proxy-agent`); the real node finds it too.
        let local: Arc<dyn NodeHost> =
            Arc::new(LocalHost::new(vec![self.sim.clone()]).with_agent(crate::common::agent()));
        let remote = HostedDriver {
            nodes: std::slice::from_ref(&self.real),
            ..hosted
        };
        let remote: Arc<dyn NodeHost> = Arc::new(self.remote.host(remote).await?);
        Ok(Arc::new(BothHosts {
            sim: self.sim.0.clone(),
            local,
            remote,
        }))
    }
}
