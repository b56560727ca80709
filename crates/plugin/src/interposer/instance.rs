//! One instance of the driver behind the interposer: its registration
//! socket in the private directory, and the two sockets the kubelet sees
//! in its place (a registration socket under the same name in
//! `plugins_registry`, a DRA socket of the interposer's).
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::RoutesBuilder;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use tracing::{Instrument as _, info, info_span, warn};

use super::forward::{Forward, channel_to};
use super::{InterposerConfig, InterposerFault, endpoint_path};
use crate::registration::{RegistrationState, RegistrationStatus};
use dra_e2e_conn::KubeletSocket;
use dra_e2e_conn::node_host::{MAX_SOCKET_PATH, NodeHost, SocketFile, Stopper};
use dra_e2e_proto::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus as PbRegistrationStatus,
    RegistrationStatusResponse,
    registration_client::RegistrationClient,
    registration_server::{Registration, RegistrationServer},
};
use dra_e2e_proto::service;

/// How long one GetInfo of a socket in the private directory may take (the
/// kubelet allows 1 s; the interposer's way onto the node adds a hop).
const GET_INFO_TIMEOUT: Duration = Duration::from_secs(10);

/// What a socket of the private directory is.
pub(super) enum Probe {
    /// An instance of the driver, as it describes itself.
    Driver(PluginInfo),
    /// Something else (another driver, another kind of plugin).
    Other(String),
    /// It did not answer (yet).
    NotYet(String),
}

/// Asks the socket `socket` who it is.
pub(super) async fn probe(
    host: &Arc<dyn NodeHost>,
    config: &InterposerConfig,
    socket: &Path,
) -> Probe {
    let mut client = RegistrationClient::new(channel_to(host.clone(), &config.node, socket));
    let info = match tokio::time::timeout(GET_INFO_TIMEOUT, client.get_info(InfoRequest {})).await {
        Ok(Ok(info)) => info.into_inner(),
        Ok(Err(status)) => return Probe::NotYet(format!("GetInfo: {status}")),
        Err(_) => {
            return Probe::NotYet(format!("GetInfo took longer than {GET_INFO_TIMEOUT:?}"));
        }
    };
    if info.name != config.driver {
        return Probe::Other(format!("it says it is driver {:?}", info.name));
    }
    if info.r#type != service::DRA_PLUGIN_TYPE {
        return Probe::Other(format!(
            "it is a plugin of type {:?}, not {:?}",
            info.r#type,
            service::DRA_PLUGIN_TYPE
        ));
    }
    if info.endpoint.is_empty() {
        return Probe::Other("it names no DRA endpoint".to_owned());
    }
    Probe::Driver(info)
}

/// An interposed instance; stop it with [`Instance::stop`].
pub(super) struct Instance {
    identity: String,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    stoppers: Vec<Stopper>,
}

impl Instance {
    /// Serves the interposer's DRA socket for the instance at `file`, then
    /// (the kubelet connects to the endpoint as soon as it sees it)
    /// registers it with the kubelet under `file`'s name.
    pub(super) async fn start(
        host: Arc<dyn NodeHost>,
        config: &InterposerConfig,
        file: &SocketFile,
        info: PluginInfo,
        n: u64,
        registration: [Arc<RegistrationState>; 2],
    ) -> Result<Self, String> {
        let driver_socket = config.private_dir.join(&file.name);
        let kubelet_socket = config.registry_dir.join(&file.name);
        let endpoint = endpoint_path(&config.endpoint_dir, n);
        if let Some(p) = [&kubelet_socket, &endpoint]
            .into_iter()
            .find(|p| p.as_os_str().len() > MAX_SOCKET_PATH)
        {
            return Err(format!(
                "socket path {} is {} bytes, over the {MAX_SOCKET_PATH} a unix socket path may \
                 have (on simulated nodes: use a shorter TMPDIR)",
                p.display(),
                p.as_os_str().len(),
            ));
        }
        let upstream =
            RegistrationClient::new(channel_to(host.clone(), &config.node, &driver_socket));
        let forward = Forward::new(config, host.clone(), &info.endpoint);
        let mut me = Instance {
            identity: file.identity.clone(),
            shutdown: CancellationToken::new(),
            tasks: Vec::new(),
            stoppers: Vec::new(),
        };
        let served = match host.serve(&config.node, &endpoint).await {
            Ok(s) => s,
            Err(e) => return Err(e.to_string()),
        };
        let (incoming, stopper) = served.into_parts();
        me.stoppers.push(stopper);
        let routes = tonic::service::Routes::from(
            tonic::service::Routes::default()
                .into_axum_router()
                .fallback_service(forward.clone()),
        );
        me.spawn(KubeletSocket::Dra, config, &file.name, routes, incoming);

        let served = match host.serve(&config.node, &kubelet_socket).await {
            Ok(s) => s,
            Err(e) => {
                me.stop().await;
                return Err(e.to_string());
            }
        };
        let (incoming, stopper) = served.into_parts();
        me.stoppers.push(stopper);
        let mut routes = RoutesBuilder::default();
        routes.add_service(RegistrationServer::new(InterposedRegistration {
            driver: config.driver.clone(),
            node: config.node.clone(),
            socket: file.name.clone(),
            endpoint: (config.fault != InterposerFault::Direct)
                .then(|| endpoint.display().to_string()),
            upstream,
            forward,
            state: registration,
        }));
        me.spawn(
            KubeletSocket::Registration,
            config,
            &file.name,
            routes.routes(),
            incoming,
        );
        Ok(me)
    }

    pub(super) fn identity(&self) -> &str {
        &self.identity
    }

    /// Takes a socket bound again in place for this one (a broken
    /// interposer's way of missing a restart).
    pub(super) fn set_identity(&mut self, identity: &str) {
        identity.clone_into(&mut self.identity);
    }

    /// Serves `routes` on the kubelet's connections to one of the
    /// instance's sockets; only the registration socket's get the
    /// `:authority` a kubelet sends there accepted.
    fn spawn(
        &mut self,
        socket: KubeletSocket,
        config: &InterposerConfig,
        instance: &str,
        routes: tonic::service::Routes,
        incoming: dra_e2e_conn::Incoming,
    ) {
        let server = match socket {
            KubeletSocket::Registration => "registration",
            KubeletSocket::Dra => "dra",
        };
        let incoming = socket.server_incoming(incoming);
        let span = info_span!("interposer", driver = %config.driver, node = %config.node,
            instance, server);
        let layer = span.in_scope(|| {
            config
                .calls
                .layer(config.node.clone(), self.shutdown.clone())
        });
        let router = Server::builder().layer(layer).add_routes(routes);
        let signal = self.shutdown.clone().cancelled_owned();
        self.tasks.push(tokio::spawn(
            async move {
                if let Err(e) = router.serve_with_incoming_shutdown(incoming, signal).await {
                    warn!(error = %e, "interposer server failed");
                }
            }
            .instrument(span),
        ));
    }

    /// The sockets go first (the kubelet deregisters the instance), then
    /// calls still running end with UNAVAILABLE.
    pub(super) async fn stop(self) {
        for s in self.stoppers {
            s.stop().await;
        }
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The registration service the kubelet sees: the instance's own answers,
/// with the interposer's endpoint.
struct InterposedRegistration {
    driver: String,
    node: String,
    /// The instance's socket name.
    socket: String,
    /// `None`: the driver's own (the `Direct` fault).
    endpoint: Option<String>,
    upstream: RegistrationClient<Channel>,
    forward: Forward,
    /// The node's (any instance) and this instance's own.
    state: [Arc<RegistrationState>; 2],
}

#[tonic::async_trait]
impl Registration for InterposedRegistration {
    async fn get_info(&self, req: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        let mut info = self
            .upstream
            .clone()
            .get_info(req.into_inner())
            .await?
            .into_inner();
        // An instance that names another endpoint now is followed there.
        self.forward.retarget(&info.endpoint);
        if let Some(endpoint) = &self.endpoint {
            info.endpoint = endpoint.clone();
        }
        Ok(Response::new(info))
    }

    async fn notify_registration_status(
        &self,
        req: Request<PbRegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = req.into_inner();
        for state in &self.state {
            state.set(if status.plugin_registered {
                RegistrationStatus::Registered
            } else {
                RegistrationStatus::Rejected(status.error.clone())
            });
        }
        info!(driver = %self.driver, node = %self.node, instance = %self.socket,
            registered = status.plugin_registered, error = %status.error,
            "kubelet's registration status passed on to the driver");
        self.upstream
            .clone()
            .notify_registration_status(status)
            .await
    }
}
