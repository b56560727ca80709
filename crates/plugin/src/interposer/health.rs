//! Device health a scenario reports on a real driver's behalf.
//!
//! A real driver decides on its own when a device is unhealthy, so a
//! scenario cannot make it say so. Behind the interposer it does not have
//! to: the driver's health stream passes through here, and every report on
//! it has the injected devices' health laid over the driver's own. A report
//! is the driver's complete device list, so when a scenario injects a
//! change the driver's last report is sent again with it, rather than
//! waiting for the driver's next one. The kubelet then shows the injected
//! health in the pod's `allocatedResourcesStatus`, as it would the driver's.
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut as _, Bytes, BytesMut};
use futures::StreamExt as _;
use http_body::Frame;
use prost::Message as _;

use crate::health::{DeviceHealth, HealthState};
use dra_e2e_proto::health::v1;

/// The injected health of a node's devices, shared by its interposed
/// instances' health streams.
#[derive(Debug, Clone, Default)]
pub struct InjectedHealth(Arc<HealthState>);

impl InjectedHealth {
    /// From now on the driver's reports say this of the device.
    pub fn report(&self, update: DeviceHealth) {
        self.0.set(update);
    }

    /// The driver's reports pass unchanged again.
    pub fn clear(&self) {
        self.0.clear();
    }

    pub fn devices(&self) -> Vec<DeviceHealth> {
        self.0.devices()
    }

    /// `report` with the injected devices laid over it (added where the
    /// driver does not list them), in pool then device order.
    fn overlay(
        &self,
        mut report: v1::NodeWatchResourcesResponse,
    ) -> v1::NodeWatchResourcesResponse {
        let injected = self.0.devices();
        if injected.is_empty() {
            return report;
        }
        let now = jiff::Timestamp::now().as_second();
        for d in injected {
            let health = v1::HealthStatus::from(d.health) as i32;
            let existing = report.devices.iter_mut().find(|e| {
                e.device
                    .as_ref()
                    .is_some_and(|id| id.pool_name == d.pool && id.device_name == d.device)
            });
            match existing {
                Some(e) => {
                    e.health = health;
                    e.message = d.message;
                    e.last_updated_time = now;
                }
                None => report.devices.push(v1::DeviceHealth {
                    device: Some(v1::DeviceIdentifier {
                        pool_name: d.pool,
                        device_name: d.device,
                    }),
                    health,
                    last_updated_time: now,
                    health_check_timeout_seconds: 0,
                    message: d.message,
                }),
            }
        }
        let key = |e: &v1::DeviceHealth| {
            e.device
                .as_ref()
                .map(|id| (id.pool_name.clone(), id.device_name.clone()))
        };
        report.devices.sort_by_key(key);
        report
    }

    /// The body of a driver's health stream answer, with injected health
    /// merged into its messages. v1 and v1alpha1 messages are the same on
    /// the wire; a message that does not decode passes unchanged.
    pub(super) fn merge_into(&self, driver: tonic::body::Body) -> tonic::body::Body {
        let state = Merge {
            injected: self.clone(),
            changes: self.0.subscribe(),
            driver,
            buffer: BytesMut::new(),
            last: None,
            pending: std::collections::VecDeque::new(),
            driver_done: false,
        };
        let stream = futures::stream::unfold(state, |mut s| async move {
            let frame = s.next().await?;
            Some((frame, s))
        });
        tonic::body::Body::new(StreamBody(Box::pin(stream)))
    }
}

type FrameResult = Result<Frame<Bytes>, tonic::Status>;

/// A body made of a stream of frames.
struct StreamBody(futures::stream::BoxStream<'static, FrameResult>);

impl http_body::Body for StreamBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_next_unpin(cx)
    }
}

struct Merge {
    injected: InjectedHealth,
    changes: tokio::sync::watch::Receiver<u64>,
    driver: tonic::body::Body,
    /// Bytes of a gRPC message not complete yet.
    buffer: BytesMut,
    /// The driver's last report, as it sent it.
    last: Option<v1::NodeWatchResourcesResponse>,
    /// Frames ready to go out.
    pending: std::collections::VecDeque<FrameResult>,
    driver_done: bool,
}

impl Merge {
    async fn next(&mut self) -> Option<FrameResult> {
        use http_body_util::BodyExt as _;
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Some(f);
            }
            if self.driver_done {
                return None;
            }
            tokio::select! {
                frame = self.driver.frame() => match frame {
                    None => self.driver_done = true,
                    Some(Err(e)) => {
                        self.driver_done = true;
                        return Some(Err(e));
                    }
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => self.take(data),
                        // Trailers end the stream: whatever was buffered goes
                        // first, unchanged.
                        Err(frame) => {
                            if !self.buffer.is_empty() {
                                let rest = self.buffer.split().freeze();
                                self.pending.push_back(Ok(Frame::data(rest)));
                            }
                            self.pending.push_back(Ok(frame));
                        }
                    },
                },
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        continue;
                    }
                    // Only once the driver has spoken: before that the
                    // kubelet has no list to change.
                    if let Some(last) = self.last.clone() {
                        let report = self.injected.overlay(last);
                        self.pending.push_back(Ok(Frame::data(encode(&report))));
                    }
                }
            }
        }
    }

    /// Queues every complete message of `data`, each with injected health.
    fn take(&mut self, data: Bytes) {
        self.buffer.extend_from_slice(&data);
        while self.buffer.len() >= 5 {
            let len = u32::from_be_bytes([
                self.buffer[1],
                self.buffer[2],
                self.buffer[3],
                self.buffer[4],
            ]) as usize;
            if self.buffer.len() < 5 + len {
                break;
            }
            let frame = self.buffer.split_to(5 + len).freeze();
            let compressed = frame[0] != 0;
            let decoded = (!compressed)
                .then(|| v1::NodeWatchResourcesResponse::decode(frame.slice(5..)).ok())
                .flatten();
            let out = match decoded {
                Some(report) => {
                    self.last = Some(report.clone());
                    encode(&self.injected.overlay(report))
                }
                None => frame,
            };
            self.pending.push_back(Ok(Frame::data(out)));
        }
    }
}

/// One uncompressed gRPC message frame.
fn encode(message: &v1::NodeWatchResourcesResponse) -> Bytes {
    let body = message.encode_to_vec();
    let mut out = BytesMut::with_capacity(5 + body.len());
    out.put_u8(0);
    out.put_u32(u32::try_from(body.len()).unwrap_or(u32::MAX));
    out.put_slice(&body);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HealthStatus;

    fn device(pool: &str, name: &str, health: v1::HealthStatus) -> v1::DeviceHealth {
        v1::DeviceHealth {
            device: Some(v1::DeviceIdentifier {
                pool_name: pool.into(),
                device_name: name.into(),
            }),
            health: health as i32,
            last_updated_time: 1,
            health_check_timeout_seconds: 0,
            message: String::new(),
        }
    }

    fn decode(frame: &Bytes) -> v1::NodeWatchResourcesResponse {
        v1::NodeWatchResourcesResponse::decode(frame.slice(5..)).unwrap()
    }

    #[tokio::test]
    async fn injected_health_is_laid_over_the_drivers_reports_and_sent_again_on_change() {
        let injected = InjectedHealth::default();
        let report = v1::NodeWatchResourcesResponse {
            devices: vec![
                device("node-0", "dev-0", v1::HealthStatus::Healthy),
                device("node-0", "dev-1", v1::HealthStatus::Healthy),
            ],
        };
        let wire = encode(&report);
        // The driver's message split across two data frames, then nothing
        // more for now (a stream that stays open).
        let (mut tx, rx) = futures::channel::mpsc::channel::<FrameResult>(4);
        let driver = tonic::body::Body::new(StreamBody(Box::pin(rx)));
        let mut body = injected.merge_into(driver);
        use futures::SinkExt as _;
        tx.send(Ok(Frame::data(wire.slice(..3)))).await.unwrap();
        tx.send(Ok(Frame::data(wire.slice(3..)))).await.unwrap();
        use http_body_util::BodyExt as _;
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(decode(&first), report, "nothing injected: passed unchanged");

        injected.report(DeviceHealth {
            pool: "node-0".into(),
            device: "dev-1".into(),
            health: HealthStatus::Unhealthy,
            message: "injected".into(),
        });
        let again = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let again = decode(&again);
        assert_eq!(again.devices.len(), 2);
        assert_eq!(again.devices[0].health, v1::HealthStatus::Healthy as i32);
        assert_eq!(again.devices[1].health, v1::HealthStatus::Unhealthy as i32);
        assert_eq!(again.devices[1].message, "injected");

        // The driver's next report keeps the injected health; a device it
        // does not list is added.
        injected.report(DeviceHealth {
            pool: "node-0".into(),
            device: "dev-9".into(),
            health: HealthStatus::Unhealthy,
            message: String::new(),
        });
        let _resent = body.frame().await.unwrap().unwrap();
        tx.send(Ok(Frame::data(wire.clone()))).await.unwrap();
        let next = decode(&body.frame().await.unwrap().unwrap().into_data().unwrap());
        let names: Vec<_> = next
            .devices
            .iter()
            .map(|d| (d.device.as_ref().unwrap().device_name.clone(), d.health))
            .collect();
        assert_eq!(
            names,
            [
                ("dev-0".to_owned(), v1::HealthStatus::Healthy as i32),
                ("dev-1".to_owned(), v1::HealthStatus::Unhealthy as i32),
                ("dev-9".to_owned(), v1::HealthStatus::Unhealthy as i32)
            ]
        );
        // Cleared: the driver's own word again; the stream ends with it.
        injected.clear();
        let _resent = body.frame().await.unwrap().unwrap();
        tx.send(Ok(Frame::data(wire.clone()))).await.unwrap();
        drop(tx);
        let last = decode(&body.frame().await.unwrap().unwrap().into_data().unwrap());
        assert_eq!(last, report);
        assert!(body.frame().await.is_none());
    }
}
