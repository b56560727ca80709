//! The plugin's sockets on a node: the DRA service served, blocked,
//! stopped and started again on its own, and the registration socket's
//! answer probed, for scenarios about a kubelet that loses and finds a
//! plugin's service.
use std::time::Duration;

use super::sockets;
use super::{DraSocketDir, Driver, DriverError};
use dra_e2e_conn::node_host::Stopper;

/// How long a registration socket may take to answer `GetInfo` (the
/// kubelet gives it 1 s; the way onto a node adds a connection).
const REGISTRATION_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl Driver {
    /// Serves the DRA socket on `node`, its connections watched and counted.
    pub(super) async fn serve_dra(
        &self,
        node: &str,
        dra_path: &std::path::Path,
    ) -> Result<(dra_e2e_conn::Incoming, Stopper), DriverError> {
        let host = self.host.clone().ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: "serving a socket before the driver's nodes are known".to_owned(),
        })?;
        let (dra_in, stopper) = host
            .serve(node, dra_path)
            .await
            .map_err(|e| DriverError::Socket(e, self.name.clone()))?
            .into_parts();
        let gate = self.dra_gate(node);
        Ok((
            self.count_connections(node, gate.guard(self.watch_socket(node, dra_in))),
            stopper,
        ))
    }

    pub(super) fn dra_gate(&self, node: &str) -> dra_e2e_conn::SocketGate {
        // A poisoned map still holds the gates.
        let mut gates = self.dra_gates.lock().unwrap_or_else(|p| p.into_inner());
        gates.entry(node.to_owned()).or_default().clone()
    }

    /// Blocks (or unblocks) the DRA socket on `node`: the kubelet still finds
    /// the socket, but every connection it opens is closed at once and the
    /// open ones are cut, as when a plugin hangs. Neither counted as a
    /// connection nor as a call.
    pub fn set_dra_socket_blocked(&self, node: &str, blocked: bool) -> Result<(), DriverError> {
        self.node_index(node)?;
        let gate = self.dra_gate(node);
        if blocked {
            gate.block();
        } else {
            gate.unblock();
        }
        Ok(())
    }

    /// Unblocks every DRA socket a scenario blocked, so its pods can go.
    pub fn unblock_sockets(&self) {
        let gates = self.dra_gates.lock().unwrap_or_else(|p| p.into_inner());
        for gate in gates.values() {
            gate.unblock();
        }
    }

    /// (DRA socket, registration socket) under the kubelet directory `root`.
    pub(super) fn socket_paths(
        &self,
        root: &std::path::Path,
        rolling_uid: Option<&str>,
    ) -> (std::path::PathBuf, std::path::PathBuf) {
        let (dra, reg) = sockets::socket_paths(root, &self.name, rolling_uid);
        match self.options.dra_socket {
            DraSocketDir::Plugin => (dra, reg),
            DraSocketDir::Registry => (
                root.join("plugins_registry")
                    .join(format!("{}-common.sock", self.name)),
                reg,
            ),
        }
    }

    /// The DRA socket of this driver on `node`, as the kubelet sees it.
    pub(super) fn dra_path(&self, node: &str) -> Result<std::path::PathBuf, DriverError> {
        let host = self.host.clone().ok_or_else(|| DriverError::Other {
            driver: self.name.clone(),
            message: "a plugin's socket before the driver's nodes are known".to_owned(),
        })?;
        let rolling_uid = self
            .options
            .rolling_update
            .then(|| self.instance_uid.clone());
        let root = host.kubelet_root(node);
        Ok(self.socket_paths(&root, rolling_uid.as_deref()).0)
    }

    /// Calls `GetInfo` on the driver's registration socket on `node` the way
    /// a process on the node would, through the node's host, and checks
    /// that the answer names the driver.
    pub async fn registration_answers(&self, node: &str) -> Result<(), DriverError> {
        let err = |message: String| DriverError::Other {
            driver: self.name.clone(),
            message: format!("its registration socket on node {node}: {message}"),
        };
        let host = self
            .host
            .clone()
            .ok_or_else(|| err("the driver's nodes are not known yet".to_owned()))?;
        let rolling_uid = self
            .options
            .rolling_update
            .then(|| self.instance_uid.clone());
        let root = host.kubelet_root(node);
        let (_, registration) = self.socket_paths(&root, rolling_uid.as_deref());
        let name = dra_e2e_plugin::probe::registration_name(
            host,
            node,
            &registration,
            REGISTRATION_PROBE_TIMEOUT,
        )
        .await
        .map_err(|e| err(format!("{} ({e})", registration.display())))?;
        if name != self.name {
            return Err(err(format!(
                "{} answered for plugin {name:?}",
                registration.display()
            )));
        }
        Ok(())
    }

    /// Starts the DRA service of the plugin on `node` (its socket, server
    /// and slices), which was not started with the registration or was
    /// stopped; waits until the slices are published when every node's runs.
    pub async fn start_dra_service(&mut self, node: &str) -> Result<(), DriverError> {
        let index = self.node_index(node)?;
        let dra_path = self.dra_path(node)?;
        if self
            .instances
            .get(node)
            .is_some_and(|i| i.dra_socket.is_some())
        {
            return Err(DriverError::Other {
                driver: self.name.clone(),
                message: format!("its DRA service on node {node} runs already"),
            });
        }
        let (dra_in, stopper) = self.serve_dra(node, &dra_path).await?;
        let client = self.plugin_client(node)?;
        let publishers = match self.node_publishers(index, node, client).await {
            Ok(p) => p,
            Err(e) => {
                stopper.stop().await;
                return Err(e);
            }
        };
        let inst = self.instance_mut(node)?;
        if let Err(e) = inst.plugin.start_dra_service(dra_in) {
            stopper.stop().await;
            for p in publishers {
                p.stop().await;
            }
            return Err(DriverError::Other {
                driver: self.name.clone(),
                message: e.to_string(),
            });
        }
        inst.dra_socket = Some(stopper);
        inst.publishers = publishers;
        if self.instances.values().all(|i| i.dra_socket.is_some()) {
            self.unless_broken(self.wait_published(Duration::from_secs(60)))
                .await?;
        }
        Ok(())
    }

    /// Stops the DRA service of the plugin on `node`: its slices are no
    /// longer published (left for the kubelet to wipe), its server ends, its
    /// socket goes; registration stays.
    pub async fn stop_dra_service(&mut self, node: &str) -> Result<(), DriverError> {
        let name = self.name.clone();
        let inst = self.instance_mut(node)?;
        for p in std::mem::take(&mut inst.publishers) {
            p.stop().await;
        }
        let stopped = inst.plugin.stop_dra_service().await;
        if let Some(s) = inst.dra_socket.take() {
            s.stop().await;
        }
        stopped.map_err(|e| DriverError::Other {
            driver: name,
            message: e.to_string(),
        })
    }
}
