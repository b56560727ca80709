//! Asking a plugin socket on a node who serves it, as a process on the node
//! would: the kubelet's first call, `GetInfo`, through the node's host.
//!
//! A driver's process outlives the kubelet, so its registration socket
//! answers while the kubelet is away; a plugin reached only through the
//! kubelet's streaming would not. The connection is opened the way the
//! interposer opens its own to a driver's socket.
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dra_e2e_conn::node_host::NodeHost;
use dra_e2e_proto::pluginregistration::InfoRequest;
use dra_e2e_proto::pluginregistration::registration_client::RegistrationClient;

/// The plugin's name, as `GetInfo` on the registration socket `socket` of
/// `node` answers it within `deadline`; why not otherwise.
pub async fn registration_name(
    host: Arc<dyn NodeHost>,
    node: &str,
    socket: &Path,
    deadline: Duration,
) -> Result<String, String> {
    let channel = crate::interposer::forward::channel_to(host, node, socket);
    let call = async {
        RegistrationClient::new(channel)
            .get_info(InfoRequest {})
            .await
            .map(|r| r.into_inner().name)
            .map_err(|status| format!("GetInfo failed: {}", status.message()))
    };
    match tokio::time::timeout(deadline, call).await {
        Ok(r) => r,
        Err(_) => Err(format!("GetInfo got no answer within {deadline:?}")),
    }
}
