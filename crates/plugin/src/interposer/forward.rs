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

use super::health::InjectedHealth;
use crate::calls::CallNote;
use crate::prepared::{ClaimId, Prepared, PreparedClaim};
use dra_e2e_conn::node_host::NodeHost;
use dra_e2e_proto::dra::{ClaimRef, PreparedDevice, v1};
use dra_e2e_proto::method;

/// A gRPC channel to a socket on a node, (re)connected through the node host
/// whenever tonic needs a connection.
pub(super) fn channel_to(host: Arc<dyn NodeHost>, node: &str, socket: &Path) -> Channel {
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
}

impl Forward {
    pub(super) fn new(
        driver: &str,
        node: &str,
        host: Arc<dyn NodeHost>,
        endpoint: &str,
        prepared: Prepared,
        health: InjectedHealth,
    ) -> Self {
        Forward {
            driver: driver.to_owned(),
            node: node.to_owned(),
            target: Arc::new(RwLock::new((
                endpoint.to_owned(),
                channel_to(host.clone(), node, Path::new(endpoint)),
            ))),
            host,
            prepared,
            health,
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
            Kind::Health | Kind::Other => {}
        }
    }
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
