//! The interposer: the harness's counting and fault injection between the
//! kubelet and a real driver's kubelet plugin.
//!
//! Upstream's suite can count, fail and stall kubelet calls only on its own
//! fake driver, which is why a real driver gets none of those tests. Here
//! the driver registers in a private directory instead of the kubelet's
//! (its profile's `registrationDir` says how to tell it); the interposer
//! asks the driver's registration socket who it is, then registers with the
//! kubelet under the driver's name, advertising a DRA socket of its own. The
//! kubelet sees one plugin, the driver sees one kubelet.
//!
//! Every call (GetInfo, NotifyRegistrationStatus, the DRA service in
//! whichever versions the driver serves, the health stream) passes
//! [`Calls`], so the same steps count, fail, stall, delay or cut it as on the
//! suite's own driver, and then goes on to the driver's socket unchanged.
//! Only GetInfo's answer is changed (the endpoint is the interposer's).
//! Prepare and unprepare are read, never changed, to keep the node's
//! [`Prepared`] record: "the plugin on node 0 has prepared ..." then holds
//! for a real driver as it does for the suite's.
//!
//! The driver's sockets are reached through the [`NodeHost`] (directly on
//! simulated nodes, through the proxy pod elsewhere), and the interposer's
//! own are served through it like any hosted plugin's.
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use prost::Message as _;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::RoutesBuilder;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};
use tracing::{Instrument as _, info, info_span, warn};

use super::calls::{CallNote, Calls};
use super::prepared::{ClaimId, Prepared, PreparedClaim};
use super::registration::{RegistrationState, RegistrationStatus};
use super::watch::WaitTimeout;
use dra_e2e_conn::KubeletSocket;
use dra_e2e_conn::node_host::{NodeHost, Stopper};
use dra_e2e_proto::dra::{ClaimRef, PreparedDevice, v1};
use dra_e2e_proto::method;
use dra_e2e_proto::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus as PbRegistrationStatus,
    RegistrationStatusResponse,
    registration_client::RegistrationClient,
    registration_server::{Registration, RegistrationServer},
};
use dra_e2e_proto::service;

/// How long one GetInfo may take (the kubelet allows 1 s; the interposer
/// adds a hop).
const GET_INFO_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between looks for a driver socket that is not there yet.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// One node's interposer for one driver.
#[derive(Debug, Clone)]
pub struct InterposerConfig {
    pub driver: String,
    pub node: String,
    /// The driver's registration socket, in its private directory (a host
    /// path).
    pub driver_registration: PathBuf,
    /// The interposer's registration socket, in the kubelet's
    /// `plugins_registry` (a host path).
    pub registration: PathBuf,
    /// The interposer's DRA socket, advertised to the kubelet (a host path).
    pub endpoint: PathBuf,
    pub calls: Calls,
    pub prepared: Prepared,
    /// How long the driver may take to create its registration socket.
    pub driver_timeout: Duration,
    /// A broken interposer, to show that scenarios notice one: GetInfo
    /// passes the driver's own endpoint on, so the kubelet calls the driver
    /// directly and nothing is counted or injected.
    pub bypass: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("interposing between the kubelet and driver {driver} on node {node}: {message}")]
pub struct InterposerError {
    pub driver: String,
    pub node: String,
    pub message: String,
}

/// A running interposer; stop it with [`NodeInterposer::stop`].
pub struct NodeInterposer {
    driver: String,
    node: String,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    stoppers: Vec<Stopper>,
    registration: Arc<RegistrationState>,
    /// What the driver said about itself when the interposer started.
    info: PluginInfo,
}

impl std::fmt::Debug for NodeInterposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeInterposer")
            .field("driver", &self.driver)
            .field("node", &self.node)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// A gRPC channel to a socket on a node, (re)connected through the node host
/// whenever tonic needs a connection.
fn channel_to(host: Arc<dyn NodeHost>, node: &str, socket: &Path) -> Channel {
    let node = node.to_owned();
    let socket = socket.to_owned();
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let (host, node, socket) = (host.clone(), node.clone(), socket.clone());
        async move { host.dial(&node, &socket).await.map(TokioIo::new) }
    });
    // The URI is never resolved: the connector decides where bytes go.
    Endpoint::from_static("http://driver.invalid")
        .connect_timeout(Duration::from_secs(10))
        .connect_with_connector_lazy(connector)
}

impl NodeInterposer {
    /// Waits for the driver's registration socket, learns the driver's DRA
    /// endpoint from it, then serves the interposer's DRA socket and, last
    /// (the kubelet connects to the endpoint as soon as it sees it),
    /// registers with the kubelet.
    pub async fn start(
        host: Arc<dyn NodeHost>,
        config: InterposerConfig,
    ) -> Result<Self, InterposerError> {
        let err = |message: String| InterposerError {
            driver: config.driver.clone(),
            node: config.node.clone(),
            message,
        };
        let upstream = RegistrationClient::new(channel_to(
            host.clone(),
            &config.node,
            &config.driver_registration,
        ));
        let info = driver_info(&upstream, &config).await.map_err(err)?;
        info!(driver = %config.driver, node = %config.node, endpoint = %info.endpoint,
            versions = ?info.supported_versions, "the driver's plugin answered; interposing");
        let forward = Forward {
            driver: config.driver.clone(),
            node: config.node.clone(),
            target: Arc::new(RwLock::new((
                info.endpoint.clone(),
                channel_to(host.clone(), &config.node, Path::new(&info.endpoint)),
            ))),
            host: host.clone(),
            prepared: config.prepared.clone(),
        };
        let shutdown = CancellationToken::new();
        let mut interposer = NodeInterposer {
            driver: config.driver.clone(),
            node: config.node.clone(),
            shutdown: shutdown.clone(),
            tasks: Vec::new(),
            stoppers: Vec::new(),
            registration: Arc::new(RegistrationState::default()),
            info,
        };
        let served = host
            .serve(&config.node, &config.endpoint)
            .await
            .map_err(|e| err(e.to_string()))?;
        let (incoming, stopper) = served.into_parts();
        interposer.stoppers.push(stopper);
        let routes = tonic::service::Routes::from(
            tonic::service::Routes::default()
                .into_axum_router()
                .fallback_service(forward.clone()),
        );
        interposer.spawn(KubeletSocket::Dra, &config, routes, incoming);

        let served = match host.serve(&config.node, &config.registration).await {
            Ok(s) => s,
            Err(e) => {
                interposer.stop().await;
                return Err(err(e.to_string()));
            }
        };
        let (incoming, stopper) = served.into_parts();
        interposer.stoppers.push(stopper);
        let mut routes = RoutesBuilder::default();
        routes.add_service(RegistrationServer::new(InterposedRegistration {
            driver: config.driver.clone(),
            node: config.node.clone(),
            endpoint: (!config.bypass).then(|| config.endpoint.display().to_string()),
            upstream,
            forward,
            state: interposer.registration.clone(),
        }));
        interposer.spawn(
            KubeletSocket::Registration,
            &config,
            routes.routes(),
            incoming,
        );
        Ok(interposer)
    }

    /// Serves `routes` on the kubelet's connections to one of the
    /// interposer's sockets; only the registration socket's get the
    /// `:authority` a kubelet sends there accepted.
    fn spawn(
        &mut self,
        socket: KubeletSocket,
        config: &InterposerConfig,
        routes: tonic::service::Routes,
        incoming: dra_e2e_conn::Incoming,
    ) {
        let server = match socket {
            KubeletSocket::Registration => "registration",
            KubeletSocket::Dra => "dra",
        };
        let incoming = socket.server_incoming(incoming);
        let span = info_span!("interposer", driver = %config.driver, node = %config.node, server);
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

    /// What the driver's registration socket said when the interposer
    /// started (its name, DRA endpoint and versions).
    pub fn driver_info(&self) -> &PluginInfo {
        &self.info
    }

    pub fn registration_status(&self) -> RegistrationStatus {
        self.registration.status()
    }

    /// Waits until the kubelet reported the interposer registered.
    pub async fn wait_registered(&self, timeout: Duration) -> Result<(), WaitTimeout> {
        let (driver, node) = (self.driver.clone(), self.node.clone());
        self.registration
            .wait_registered(
                || format!("the kubelet to register driver {driver} on {node} (interposed)"),
                timeout,
            )
            .await
    }

    /// Stops serving: the sockets go first (the kubelet deregisters the
    /// plugin), then calls still running end with UNAVAILABLE.
    pub async fn stop(self) {
        for s in self.stoppers {
            s.stop().await;
        }
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        info!(driver = %self.driver, node = %self.node, "interposer stopped");
    }
}

/// Asks the driver's registration socket for its info, retrying while the
/// socket is not there yet, and checks that it is the driver expected.
async fn driver_info(
    upstream: &RegistrationClient<Channel>,
    config: &InterposerConfig,
) -> Result<PluginInfo, String> {
    let socket = config.driver_registration.display();
    let deadline = tokio::time::Instant::now() + config.driver_timeout;
    let info = loop {
        let mut client = upstream.clone();
        let attempt = tokio::time::timeout(GET_INFO_TIMEOUT, client.get_info(InfoRequest {})).await;
        let last = match attempt {
            Ok(Ok(info)) => break info.into_inner(),
            Ok(Err(status)) => format!("GetInfo: {status}"),
            Err(_) => format!("GetInfo took longer than {GET_INFO_TIMEOUT:?}"),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the driver's registration socket {socket} did not answer within {:?} (the \
                 profile's registrationDir must make the driver register there); last: {last}",
                config.driver_timeout
            ));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    };
    if info.name != config.driver {
        return Err(format!(
            "the plugin at {socket} says it is driver {:?}, not {:?}",
            info.name, config.driver
        ));
    }
    if info.r#type != service::DRA_PLUGIN_TYPE {
        return Err(format!(
            "the plugin at {socket} is of type {:?}, not {:?}",
            info.r#type,
            service::DRA_PLUGIN_TYPE
        ));
    }
    if info.endpoint.is_empty() {
        return Err(format!("the plugin at {socket} names no DRA endpoint"));
    }
    Ok(info)
}

/// The registration service the kubelet sees: the driver's own answers, with
/// the interposer's endpoint.
struct InterposedRegistration {
    driver: String,
    node: String,
    /// `None`: the driver's own (a bypassing interposer).
    endpoint: Option<String>,
    upstream: RegistrationClient<Channel>,
    forward: Forward,
    state: Arc<RegistrationState>,
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
        // A driver restarted with another endpoint (a rolling update) is
        // followed there.
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
        self.state.set(if status.plugin_registered {
            RegistrationStatus::Registered
        } else {
            RegistrationStatus::Rejected(status.error.clone())
        });
        info!(driver = %self.driver, node = %self.node, registered = status.plugin_registered,
            error = %status.error, "kubelet's registration status passed on to the driver");
        self.upstream
            .clone()
            .notify_registration_status(status)
            .await
    }
}

/// Passes every call of the DRA socket on to the driver's, byte for byte;
/// prepare and unprepare are read on the way to keep [`Prepared`].
#[derive(Clone)]
struct Forward {
    driver: String,
    node: String,
    host: Arc<dyn NodeHost>,
    /// The driver's DRA endpoint and a channel to it.
    target: Arc<RwLock<(String, Channel)>>,
    prepared: Prepared,
}

impl Forward {
    fn retarget(&self, endpoint: &str) {
        let mut target = self.target.write().unwrap_or_else(|e| e.into_inner());
        if target.0 != endpoint {
            info!(driver = %self.driver, node = %self.node, from = %target.0, to = %endpoint,
                "the driver's DRA endpoint changed");
            *target = (
                endpoint.to_owned(),
                channel_to(self.host.clone(), &self.node, Path::new(endpoint)),
            );
        }
    }

    fn channel(&self) -> (String, Channel) {
        self.target
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Which DRA call a path is, for the prepared record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Prepare,
    Unprepare,
    Other,
}

fn kind(path: &str) -> Kind {
    // v1 and v1beta1 messages are the same on the wire.
    match path {
        method::V1_PREPARE | method::V1BETA1_PREPARE => Kind::Prepare,
        method::V1_UNPREPARE | method::V1BETA1_UNPREPARE => Kind::Unprepare,
        _ => Kind::Other,
    }
}

impl<B> tower::Service<http::Request<B>> for Forward
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.forward(req).await) })
    }
}

impl Forward {
    async fn forward<B>(self, req: http::Request<B>) -> http::Response<tonic::body::Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (endpoint, channel) = self.channel();
        let unreachable = |e: &dyn std::fmt::Display| {
            Status::unavailable(format!(
                "interposer: driver {}'s DRA socket {endpoint} on {}: {e}",
                self.driver, self.node
            ))
            .into_http()
        };
        let kind = kind(req.uri().path());
        if kind == Kind::Other {
            // Streams (health) pass as they come.
            let req = req.map(tonic::body::Body::new);
            return match tower::ServiceExt::oneshot(channel, req).await {
                Ok(resp) => resp,
                Err(e) => unreachable(&e),
            };
        }
        let note = req.extensions().get::<CallNote>().cloned();
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                return Status::internal(format!("reading the request: {}", e.into())).into_http();
            }
        };
        let claims = claims_of(kind, &body);
        if let Some(note) = &note {
            note.set_claims(claims.clone());
        }
        let req = http::Request::from_parts(
            parts,
            tonic::body::Body::new(http_body_util::Full::new(body)),
        );
        let resp = match tower::ServiceExt::oneshot(channel, req).await {
            Ok(resp) => resp,
            Err(e) => return unreachable(&e),
        };
        let (parts, body) = resp.into_parts();
        let collected = match body.collect().await {
            Ok(c) => c,
            Err(e) => return unreachable(&e),
        };
        let trailers = collected.trailers().cloned();
        let data = collected.to_bytes();
        let status = trailers
            .as_ref()
            .and_then(Status::from_header_map)
            .or_else(|| Status::from_header_map(&parts.headers));
        if status.as_ref().is_none_or(|s| s.code() == tonic::Code::Ok) {
            self.record(kind, &claims, &data, note.as_ref());
        }
        let mut frames = vec![Ok::<_, Infallible>(http_body::Frame::data(data))];
        if let Some(t) = trailers {
            frames.push(Ok(http_body::Frame::trailers(t)));
        }
        let body = http_body_util::StreamBody::new(futures::stream::iter(frames));
        http::Response::from_parts(parts, tonic::body::Body::new(body))
    }

    /// Updates the prepared record from a successful answer: claims without
    /// an error are prepared, or unprepared.
    fn record(&self, kind: Kind, claims: &[ClaimRef], data: &Bytes, note: Option<&CallNote>) {
        let Some(message) = grpc_message(data) else {
            return;
        };
        match kind {
            Kind::Prepare => {
                let Ok(resp) = v1::NodePrepareResourcesResponse::decode(message) else {
                    return;
                };
                for c in claims {
                    match resp.claims.get(&c.uid) {
                        Some(r) if r.error.is_empty() => self.prepared.insert(
                            ClaimId {
                                name: c.name.clone(),
                                uid: c.uid.clone(),
                            },
                            PreparedClaim {
                                namespace: c.namespace.clone(),
                                devices: r
                                    .devices
                                    .iter()
                                    .map(|d| PreparedDevice {
                                        request_names: d.request_names.clone(),
                                        pool_name: d.pool_name.clone(),
                                        device_name: d.device_name.clone(),
                                        cdi_device_ids: d.cdi_device_ids.clone(),
                                        share_id: d.share_id.clone(),
                                    })
                                    .collect(),
                                cdi_files: Vec::new(),
                            },
                        ),
                        Some(r) => {
                            if let Some(n) = note {
                                n.claim_error(&c.uid, &r.error);
                            }
                        }
                        None => {
                            if let Some(n) = note {
                                n.claim_error(&c.uid, "no answer for this claim");
                            }
                        }
                    }
                }
            }
            Kind::Unprepare => {
                let Ok(resp) = v1::NodeUnprepareResourcesResponse::decode(message) else {
                    return;
                };
                for c in claims {
                    match resp.claims.get(&c.uid) {
                        Some(r) if !r.error.is_empty() => {
                            if let Some(n) = note {
                                n.claim_error(&c.uid, &r.error);
                            }
                        }
                        _ => {
                            self.prepared.remove(&ClaimId {
                                name: c.name.clone(),
                                uid: c.uid.clone(),
                            });
                        }
                    }
                }
            }
            Kind::Other => {}
        }
    }
}

/// The message of a single uncompressed gRPC frame.
fn grpc_message(data: &Bytes) -> Option<Bytes> {
    let mut buf = data.clone();
    if buf.len() < 5 {
        return None;
    }
    let compressed = buf.get_u8();
    let len = usize::try_from(buf.get_u32()).ok()?;
    (compressed == 0 && buf.len() == len).then_some(buf)
}

/// The claims a prepare or unprepare request names.
fn claims_of(kind: Kind, body: &Bytes) -> Vec<ClaimRef> {
    let Some(message) = grpc_message(body) else {
        return Vec::new();
    };
    let claims = match kind {
        Kind::Prepare => v1::NodePrepareResourcesRequest::decode(message).map(|r| r.claims),
        Kind::Unprepare => v1::NodeUnprepareResourcesRequest::decode(message).map(|r| r.claims),
        Kind::Other => return Vec::new(),
    };
    claims
        .unwrap_or_default()
        .into_iter()
        .map(|c| ClaimRef {
            namespace: c.namespace,
            name: c.name,
            uid: c.uid,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(message: &impl prost::Message) -> Bytes {
        let body = message.encode_to_vec();
        let mut out = vec![0u8];
        out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        out.extend_from_slice(&body);
        Bytes::from(out)
    }

    #[test]
    fn the_claims_of_a_prepare_request_are_read_from_its_frame() {
        let req = v1::NodePrepareResourcesRequest {
            claims: vec![v1::Claim {
                namespace: "ns".into(),
                uid: "u1".into(),
                name: "c1".into(),
            }],
        };
        let claims = claims_of(Kind::Prepare, &frame(&req));
        assert_eq!(
            claims,
            vec![ClaimRef {
                namespace: "ns".into(),
                name: "c1".into(),
                uid: "u1".into()
            }]
        );
        // A compressed or cut frame is not guessed at.
        let mut compressed = frame(&req).to_vec();
        compressed[0] = 1;
        assert!(claims_of(Kind::Prepare, &Bytes::from(compressed)).is_empty());
        let cut = frame(&req).slice(..6);
        assert!(claims_of(Kind::Prepare, &cut).is_empty());
        assert_eq!(kind(method::V1BETA1_UNPREPARE), Kind::Unprepare);
        assert_eq!(kind(method::HEALTH_V1_WATCH), Kind::Other);
    }
}
