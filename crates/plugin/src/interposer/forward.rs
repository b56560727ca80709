//! The interposer's DRA socket: every call passes on to the instance's own
//! DRA socket byte for byte. Prepare and unprepare are read on the way to
//! keep the node's [`Prepared`] record ("the plugin on node 0 has prepared
//! ..." then holds for a real driver as for the suite's own); the health
//! stream gets the device health a scenario injected merged in
//! ([`super::health`]).
use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use prost::Message as _;
use tonic::Status;
use tonic::transport::{Channel, Endpoint};
use tracing::info;

use super::InterposerConfig;
use super::health::InjectedHealth;
use super::planted::{self, Answer, Call, Disagreements};
use crate::calls::CallNote;
use crate::fault::{Fault, Faults};
use crate::prepared::{ClaimId, Prepared, PreparedClaim};
use dra_e2e_conn::node_host::NodeHost;
use dra_e2e_proto::dra::{ClaimRef, PreparedDevice, v1};
use dra_e2e_proto::method;

/// A gRPC channel to a socket on a node, (re)connected through the node host
/// whenever tonic needs a connection.
pub(crate) fn channel_to(host: Arc<dyn NodeHost>, node: &str, socket: &Path) -> Channel {
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

/// Passes every call of the DRA socket on to the driver's, byte for byte;
/// prepare and unprepare are read on the way to keep [`Prepared`].
#[derive(Clone)]
pub(super) struct Forward {
    driver: String,
    node: String,
    host: Arc<dyn NodeHost>,
    /// The driver's DRA endpoint and a channel to it.
    target: Arc<RwLock<(String, Channel)>>,
    prepared: Prepared,
    health: InjectedHealth,
    faults: Faults,
    disagreements: Disagreements,
}

impl Forward {
    pub(super) fn new(config: &InterposerConfig, host: Arc<dyn NodeHost>, endpoint: &str) -> Self {
        Forward {
            driver: config.driver.clone(),
            node: config.node.clone(),
            target: Arc::new(RwLock::new((
                endpoint.to_owned(),
                channel_to(host.clone(), &config.node, Path::new(endpoint)),
            ))),
            host,
            prepared: config.prepared.clone(),
            health: config.health.clone(),
            faults: config.faults.clone(),
            disagreements: config.disagreements.clone(),
        }
    }

    pub(super) fn retarget(&self, endpoint: &str) {
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
    /// The device health stream (either version: the same on the wire).
    Health,
    Other,
}

fn kind(path: &str) -> Kind {
    // v1 and v1beta1 messages are the same on the wire.
    match path {
        method::V1_PREPARE | method::V1BETA1_PREPARE => Kind::Prepare,
        method::V1_UNPREPARE | method::V1BETA1_UNPREPARE => Kind::Unprepare,
        method::HEALTH_V1_WATCH | method::HEALTH_V1ALPHA1_WATCH => Kind::Health,
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
        if kind == Kind::Health {
            let req = req.map(tonic::body::Body::new);
            return match tower::ServiceExt::oneshot(channel, req).await {
                Ok(resp) => resp.map(|body| self.health.merge_into(body)),
                Err(e) => unreachable(&e),
            };
        }
        if kind == Kind::Other {
            let req = req.map(tonic::body::Body::new);
            return match tower::ServiceExt::oneshot(channel, req).await {
                Ok(resp) => resp,
                Err(e) => unreachable(&e),
            };
        }
        let call = if kind == Kind::Prepare {
            Call::Prepare
        } else {
            Call::Unprepare
        };
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
        let head = Head {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
        };
        let first = match self
            .exchange(call, &claims, &channel, &head, body.clone())
            .await
        {
            Ok(reply) => reply,
            Err(e) => return unreachable(&e),
        };
        if first.ok() {
            self.record(kind, &claims, &first.data, note.as_ref());
            // The kubelet asks again after its own restart or a lost
            // answer; a driver must answer the same.
            if let Ok(again) = self.exchange(call, &claims, &channel, &head, body).await
                && let (Some(a), Some(b)) = (first.answer(call), again.answer(call))
            {
                self.disagreements
                    .compare(&self.node, call, &claims, &a, &b);
            }
        }
        first.into_response()
    }

    /// One asking of the driver, with the planted faults in its answer
    /// (some answer without asking the driver at all).
    async fn exchange(
        &self,
        call: Call,
        claims: &[ClaimRef],
        channel: &Channel,
        head: &Head,
        body: Bytes,
    ) -> Result<Reply, String> {
        let known: Vec<bool> = claims
            .iter()
            .map(|c| {
                self.prepared
                    .get(&ClaimId {
                        name: c.name.clone(),
                        uid: c.uid.clone(),
                    })
                    .is_some()
            })
            .collect();
        if let Some(reply) = self.answer_alone(call, claims, &known) {
            return Ok(reply);
        }
        let mut req = http::Request::new(tonic::body::Body::new(http_body_util::Full::new(body)));
        *req.method_mut() = head.method.clone();
        *req.uri_mut() = head.uri.clone();
        *req.version_mut() = head.version;
        *req.headers_mut() = head.headers.clone();
        let resp = tower::ServiceExt::oneshot(channel.clone(), req)
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let collected = body.collect().await.map_err(|e| e.to_string())?;
        let mut reply = Reply {
            trailers: collected.trailers().cloned(),
            data: collected.to_bytes(),
            parts,
        };
        if reply.ok()
            && !self.faults.is_empty()
            && let Some(mut answer) = reply.answer(call)
        {
            planted::plant(&self.faults, claims, &known, &mut answer);
            reply.data = frame(&answer.encode());
        }
        Ok(reply)
    }

    /// The answer of a planted fault that never asks the driver.
    fn answer_alone(&self, call: Call, claims: &[ClaimRef], known: &[bool]) -> Option<Reply> {
        if let Some(message) = self.faults.failed_call(call == Call::Prepare) {
            return Some(Reply::failed(Status::unknown(message)));
        }
        if call == Call::Unprepare && self.faults.has(Fault::SwallowUnprepare) {
            return Some(Reply::answered(&Answer::empty_success(call, claims)));
        }
        if call == Call::Prepare
            && self.faults.has(Fault::ReplayPrepared)
            && !claims.is_empty()
            && known.iter().all(|k| *k)
        {
            let replayed = claims
                .iter()
                .map(|c| {
                    let devices = self.prepared.answered(&c.uid).unwrap_or_default();
                    (c.uid.clone(), Ok::<_, String>(devices).into())
                })
                .collect();
            return Some(Reply::answered(&Answer::Prepare(replayed)));
        }
        None
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
            Kind::Health | Kind::Other => {}
        }
    }
}

/// What a request was, to ask it again.
struct Head {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: http::HeaderMap,
}

/// A unary gRPC answer, read whole.
struct Reply {
    parts: http::response::Parts,
    data: Bytes,
    trailers: Option<http::HeaderMap>,
}

impl Reply {
    fn failed(status: Status) -> Reply {
        let (parts, _) = status.into_http::<tonic::body::Body>().into_parts();
        Reply {
            parts,
            data: Bytes::new(),
            trailers: None,
        }
    }

    fn answered(answer: &Answer) -> Reply {
        let (parts, _) = http::Response::builder()
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .body(())
            .unwrap_or_default()
            .into_parts();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Reply {
            parts,
            data: frame(&answer.encode()),
            trailers: Some(trailers),
        }
    }

    fn ok(&self) -> bool {
        self.trailers
            .as_ref()
            .and_then(Status::from_header_map)
            .or_else(|| Status::from_header_map(&self.parts.headers))
            .is_none_or(|s| s.code() == tonic::Code::Ok)
    }

    fn answer(&self, call: Call) -> Option<Answer> {
        grpc_message(&self.data).and_then(|m| Answer::decode(call, m))
    }

    fn into_response(self) -> http::Response<tonic::body::Body> {
        let mut frames = Vec::new();
        if !self.data.is_empty() {
            frames.push(Ok::<_, Infallible>(http_body::Frame::data(self.data)));
        }
        if let Some(t) = self.trailers {
            frames.push(Ok(http_body::Frame::trailers(t)));
        }
        let body = http_body_util::StreamBody::new(futures::stream::iter(frames));
        http::Response::from_parts(self.parts, tonic::body::Body::new(body))
    }
}

/// `message` as one uncompressed gRPC frame.
fn frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0u8);
    out.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(message);
    Bytes::from(out)
}

/// The message of a single uncompressed gRPC frame.
pub(super) fn grpc_message(data: &Bytes) -> Option<Bytes> {
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
        Kind::Health | Kind::Other => return Vec::new(),
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
        assert_eq!(kind(method::HEALTH_V1_WATCH), Kind::Health);
        assert_eq!(kind(method::HEALTH_V1ALPHA1_WATCH), Kind::Health);
    }
}
