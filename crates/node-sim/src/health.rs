//! Device health, as a kubelet with the `ResourceHealthStatus` gate streams it
//! from DRA plugins (`NodeWatchResources` of the newest health service version
//! a plugin offers, `v1` or `v1alpha1`) and reports it in `containerStatuses[].allocatedResourcesStatus`.
//!
//! Every plugin whose `GetInfo` advertises the health service gets one stream
//! for as long as it is registered. Each message is the driver's complete
//! device list, so it replaces what the node knew about that driver; devices
//! nobody reported are `Unknown`. A failed or ended stream is opened again
//! after [`HealthStore::retry`] (the kubelet waits 5 s).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ResourceClaim as ContainerClaim, ResourceHealth, ResourceStatus};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tracing::{debug, info};

use super::journal::{Journal, NodeEventKind};
use dra_e2e_proto::dra::PreparedDevice;
use dra_e2e_proto::health::{HealthApi, HealthReport, HealthStatus, watch_health};
use futures::StreamExt as _;

/// The kubelet cuts plugin messages to this length before they go into pod
/// status, so a chatty driver cannot bloat the pod object.
pub const MAX_MESSAGE_LEN: usize = 1024;

/// What the node last heard about one device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthEntry {
    pub health: HealthStatus,
    pub message: String,
}

/// One device's health as the node knows it, for the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedHealth {
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub health: HealthStatus,
    pub message: String,
}

/// `(pool, device)` → health, for one driver.
type DriverHealth = BTreeMap<(String, String), HealthEntry>;

/// Device health by driver; what pod status reports is read from here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthSnapshot(BTreeMap<String, DriverHealth>);

impl HealthSnapshot {
    /// A device no plugin reported on is `Unknown` without a message.
    pub fn get(&self, driver: &str, pool: &str, device: &str) -> HealthEntry {
        self.0
            .get(driver)
            .and_then(|d| d.get(&(pool.to_owned(), device.to_owned())))
            .cloned()
            .unwrap_or_default()
    }

    #[cfg(test)]
    pub(crate) fn set(&mut self, driver: &str, pool: &str, device: &str, entry: HealthEntry) {
        self.0
            .entry(driver.to_owned())
            .or_default()
            .insert((pool.to_owned(), device.to_owned()), entry);
    }
}

/// Cuts `message` to at most [`MAX_MESSAGE_LEN`] bytes, at a character
/// boundary so the result stays valid UTF-8 (and so within the limit whether
/// it is counted in bytes or characters).
pub fn truncate_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_LEN {
        return message.to_owned();
    }
    let mut end = MAX_MESSAGE_LEN;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}

/// The device list of one stream message; a device listed twice takes its
/// last entry.
pub fn parse_report(report: HealthReport) -> DriverHealth {
    report
        .devices
        .into_iter()
        .map(|d| {
            let entry = HealthEntry {
                health: d.health,
                message: truncate_message(&d.message),
            };
            ((d.pool, d.device), entry)
        })
        .collect()
}

/// Device health of one node, fed by the plugins' streams.
#[derive(Debug)]
pub struct HealthStore {
    devices: Mutex<HealthSnapshot>,
    /// Bumped whenever some device's health or message changed, so pod
    /// workers rewrite status without polling.
    version: watch::Sender<u64>,
    journal: Journal,
    /// Pause before a failed or ended stream is opened again.
    retry: Duration,
}

impl HealthStore {
    pub fn new(journal: Journal, retry: Duration) -> Self {
        Self {
            devices: Mutex::default(),
            version: watch::Sender::new(0),
            journal,
            retry,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HealthSnapshot> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        self.lock().clone()
    }

    /// Every device some plugin reported, sorted by driver, pool, device.
    pub fn reported(&self) -> Vec<ReportedHealth> {
        self.lock()
            .0
            .iter()
            .flat_map(|(driver, devices)| {
                devices.iter().map(|((pool, device), e)| ReportedHealth {
                    driver: driver.clone(),
                    pool: pool.clone(),
                    device: device.clone(),
                    health: e.health,
                    message: e.message.clone(),
                })
            })
            .collect()
    }

    /// Changes whenever a device's health or message changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Replaces `driver`'s devices with `report` unless `live` was cancelled:
    /// checked under the lock, so a stream of a deregistered plugin cannot
    /// bring back what [`HealthStore::forget_driver`] just cleared.
    pub fn replace(&self, driver: &str, report: DriverHealth, live: &CancellationToken) {
        let mut all = self.lock();
        if live.is_cancelled() {
            return;
        }
        let old = if report.is_empty() {
            all.0.remove(driver).unwrap_or_default()
        } else {
            all.0
                .insert(driver.to_owned(), report.clone())
                .unwrap_or_default()
        };
        self.record_changes(driver, &old, &report);
    }

    /// Drops what `driver`'s plugins reported: once none is registered,
    /// nothing vouches for its devices any more.
    pub fn forget_driver(&self, driver: &str) {
        let mut all = self.lock();
        let old = all.0.remove(driver).unwrap_or_default();
        self.record_changes(driver, &old, &DriverHealth::new());
    }

    /// Journals and announces each device whose entry differs; a missing
    /// entry counts as `Unknown` without a message.
    fn record_changes(&self, driver: &str, old: &DriverHealth, new: &DriverHealth) {
        let keys: BTreeSet<&(String, String)> = old.keys().chain(new.keys()).collect();
        let mut changed = false;
        for key in keys {
            let before = old.get(key).cloned().unwrap_or_default();
            let after = new.get(key).cloned().unwrap_or_default();
            if before == after {
                continue;
            }
            changed = true;
            let (pool, device) = key;
            info!(driver, pool, device, health = %after.health, message = %after.message,
                "device health changed");
            self.journal.record(NodeEventKind::DeviceHealth {
                driver: driver.to_owned(),
                pool: pool.clone(),
                device: device.clone(),
                health: after.health,
                message: after.message,
            });
        }
        if changed {
            self.version.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    pub fn retry(&self) -> Duration {
        self.retry
    }
}

/// Keeps a `NodeWatchResources` stream open to one plugin until `cancel`
/// (the plugin is deregistered or the node stops). `channel` gives the
/// plugin's current connection, which its connection monitor replaces after
/// a reconnect. The call has no deadline: it is meant to last.
pub async fn watch_plugin(
    store: Arc<HealthStore>,
    driver: String,
    api: HealthApi,
    channel: impl Fn() -> Channel,
    cancel: CancellationToken,
) {
    loop {
        let opened = tokio::select! {
            _ = cancel.cancelled() => return,
            r = watch_health(api, channel()) => r,
        };
        match opened {
            Ok(mut stream) => {
                info!(%api, "health stream opened");
                loop {
                    let next = tokio::select! {
                        _ = cancel.cancelled() => return,
                        m = stream.next() => m,
                    };
                    match next {
                        Some(Ok(report)) => {
                            debug!(devices = report.devices.len(), "health report");
                            store.replace(&driver, parse_report(report), &cancel);
                        }
                        None => {
                            // A stopping plugin ends its streams; not an error.
                            info!("health stream ended by the plugin");
                            break;
                        }
                        Some(Err(status)) => {
                            info!(code = ?status.code(), message = status.message(),
                                "health stream failed");
                            break;
                        }
                    }
                }
            }
            Err(status) => {
                info!(code = ?status.code(), message = status.message(),
                    "opening health stream failed");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(store.retry()) => {}
        }
    }
}

/// `allocatedResourcesStatus` of one regular container, as the kubelet
/// builds it: an entry per claim reference in its `resources.claims` whose
/// claim is prepared on this node (`devices` maps pod claim names to the
/// devices the plugins prepared for the claim, with their drivers), named
/// `claim:<pod claim>` or `claim:<pod claim>/<request>`. Every entry lists
/// all prepared devices of the claim, whatever request the reference names;
/// a device is identified by its first CDI device ID, or as
/// `<driver>/<pool>/<device>` when it has none. Entries without devices are
/// left out; a device is listed once per entry.
pub fn container_resources_status(
    references: &[ContainerClaim],
    devices: &BTreeMap<String, Vec<(String, PreparedDevice)>>,
    health: &HealthSnapshot,
) -> Vec<ResourceStatus> {
    let mut out = Vec::new();
    for reference in references {
        let Some(prepared) = devices.get(&reference.name) else {
            continue;
        };
        let name = match reference.request.as_deref().filter(|r| !r.is_empty()) {
            Some(r) => format!("claim:{}/{r}", reference.name),
            None => format!("claim:{}", reference.name),
        };
        if out.iter().any(|s: &ResourceStatus| s.name == name) {
            // The API server rejects duplicate names; a repeated reference
            // adds nothing.
            continue;
        }
        let mut resources: Vec<ResourceHealth> = Vec::new();
        for (driver, d) in prepared {
            let id = d
                .cdi_device_ids
                .first()
                .cloned()
                .unwrap_or_else(|| format!("{driver}/{}/{}", d.pool_name, d.device_name));
            if resources.iter().any(|r| r.resource_id == id) {
                continue;
            }
            let entry = health.get(driver, &d.pool_name, &d.device_name);
            resources.push(ResourceHealth {
                resource_id: id,
                health: Some(entry.health.as_str().to_owned()),
                message: Some(entry.message).filter(|m| !m.is_empty()),
            });
        }
        if resources.is_empty() {
            continue;
        }
        out.push(ResourceStatus {
            name,
            resources: Some(resources),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_e2e_proto::health::v1alpha1::{
        self as pb, DeviceHealth, DeviceIdentifier, NodeWatchResourcesRequest,
        NodeWatchResourcesResponse,
    };

    fn dev(driver: &str, pool: &str, device: &str, cdi: Option<&str>) -> (String, PreparedDevice) {
        (
            driver.into(),
            PreparedDevice {
                request_names: vec!["some-request".into()],
                pool_name: pool.into(),
                device_name: device.into(),
                cdi_device_ids: cdi.into_iter().map(Into::into).collect(),
                share_id: None,
            },
        )
    }

    fn reference(name: &str, request: Option<&str>) -> ContainerClaim {
        ContainerClaim {
            name: name.into(),
            request: request.map(Into::into),
        }
    }

    fn entry(health: HealthStatus, message: &str) -> HealthEntry {
        HealthEntry {
            health,
            message: message.into(),
        }
    }

    fn resource(id: &str, health: &str, message: Option<&str>) -> ResourceHealth {
        ResourceHealth {
            resource_id: id.into(),
            health: Some(health.into()),
            message: message.map(Into::into),
        }
    }

    fn wire(pool: &str, device: &str, health: i32, message: &str) -> DeviceHealth {
        DeviceHealth {
            device: Some(DeviceIdentifier {
                pool_name: pool.into(),
                device_name: device.into(),
            }),
            health,
            last_updated_time: 0,
            health_check_timeout_seconds: 0,
            message: message.into(),
        }
    }

    #[test]
    fn container_status_per_claim_reference() {
        let devices: BTreeMap<String, Vec<(String, PreparedDevice)>> = [
            (
                "gpu".to_string(),
                vec![
                    dev(
                        "d.example.com",
                        "pool-1",
                        "dev-0",
                        Some("d.example.com/gpu=a"),
                    ),
                    dev("d.example.com", "pool-1", "dev-1", None),
                    // The same CDI device for two devices: listed once.
                    dev(
                        "d.example.com",
                        "pool-1",
                        "dev-2",
                        Some("d.example.com/gpu=a"),
                    ),
                ],
            ),
            (
                "nic".to_string(),
                vec![dev("n.example.com", "pool-2", "eth0", None)],
            ),
            // Prepared without devices: no entry.
            ("empty".to_string(), vec![]),
        ]
        .into();
        let mut health = HealthSnapshot::default();
        health.set(
            "d.example.com",
            "pool-1",
            "dev-0",
            entry(HealthStatus::Unhealthy, "ECC errors"),
        );
        health.set(
            "d.example.com",
            "pool-1",
            "dev-1",
            entry(HealthStatus::Healthy, ""),
        );

        let refs = [
            reference("gpu", None),
            reference("gpu", Some("b")),
            reference("nic", Some("")),
            reference("empty", None),
            // Not prepared on this node (or not needed): no entry.
            reference("other", None),
        ];
        let got = container_resources_status(&refs, &devices, &health);
        let all_gpus = Some(vec![
            resource("d.example.com/gpu=a", "Unhealthy", Some("ECC errors")),
            resource("d.example.com/pool-1/dev-1", "Healthy", None),
        ]);
        assert_eq!(
            got,
            vec![
                ResourceStatus {
                    name: "claim:gpu".into(),
                    resources: all_gpus.clone(),
                },
                // A request does not narrow the list.
                ResourceStatus {
                    name: "claim:gpu/b".into(),
                    resources: all_gpus,
                },
                ResourceStatus {
                    name: "claim:nic".into(),
                    resources: Some(vec![resource("n.example.com/pool-2/eth0", "Unknown", None)]),
                },
            ]
        );
        assert!(container_resources_status(&[], &devices, &health).is_empty());
    }

    #[test]
    fn the_api_spelling_of_resource_status() {
        let devices = [(
            "c".to_string(),
            vec![dev("d.example.com", "p", "x", Some("d.example.com/t=x"))],
        )]
        .into();
        let mut health = HealthSnapshot::default();
        health.set(
            "d.example.com",
            "p",
            "x",
            entry(HealthStatus::Unhealthy, "hot"),
        );
        let got = container_resources_status(&[reference("c", Some("req"))], &devices, &health);
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            serde_json::json!([{
                "name": "claim:c/req",
                "resources": [{"resourceID": "d.example.com/t=x", "health": "Unhealthy", "message": "hot"}],
            }])
        );
    }

    #[test]
    fn reports_are_parsed_and_messages_truncated() {
        let long = "é".repeat(MAX_MESSAGE_LEN);
        let report = NodeWatchResourcesResponse {
            devices: vec![
                wire("p", "a", pb::HealthStatus::Healthy as i32, "fine"),
                wire("p", "b", pb::HealthStatus::Unhealthy as i32, &long),
                wire("p", "c", 42, ""),
                DeviceHealth {
                    device: None,
                    ..wire("p", "z", 1, "")
                },
                wire("p", "a", pb::HealthStatus::Unhealthy as i32, "later"),
            ],
        };
        let got = parse_report(report.into());
        assert_eq!(got.len(), 3);
        let key = |d: &str| ("p".to_string(), d.to_string());
        assert_eq!(got[&key("a")], entry(HealthStatus::Unhealthy, "later"));
        let b = &got[&key("b")];
        assert_eq!(b.health, HealthStatus::Unhealthy);
        assert!(b.message.len() <= MAX_MESSAGE_LEN);
        assert_eq!(b.message.chars().count(), MAX_MESSAGE_LEN / 2);
        assert_eq!(got[&key("c")].health, HealthStatus::Unknown);

        assert_eq!(truncate_message("short"), "short");
        let ascii = "x".repeat(MAX_MESSAGE_LEN + 10);
        assert_eq!(truncate_message(&ascii).len(), MAX_MESSAGE_LEN);
    }

    type Reports = tokio::sync::mpsc::Sender<Result<NodeWatchResourcesResponse, tonic::Status>>;

    /// A health server whose streams the test feeds by hand.
    #[derive(Clone, Default)]
    struct Feed {
        streams: Arc<Mutex<Vec<Reports>>>,
        opened: Arc<watch::Sender<usize>>,
    }

    #[tonic::async_trait]
    impl pb::dra_resource_health_server::DraResourceHealth for Feed {
        type NodeWatchResourcesStream =
            futures::stream::BoxStream<'static, Result<NodeWatchResourcesResponse, tonic::Status>>;

        async fn node_watch_resources(
            &self,
            _: tonic::Request<NodeWatchResourcesRequest>,
        ) -> Result<tonic::Response<Self::NodeWatchResourcesStream>, tonic::Status> {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            self.streams.lock().unwrap().push(tx);
            self.opened.send_modify(|n| *n += 1);
            Ok(tonic::Response::new(Box::pin(
                tokio_stream::wrappers::ReceiverStream::new(rx),
            )))
        }
    }

    #[tokio::test]
    async fn stream_feeds_the_store_and_is_reopened_after_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("dra.sock");
        let feed = Feed::default();
        let server = tonic::transport::Server::builder()
            .add_service(pb::dra_resource_health_server::DraResourceHealthServer::new(feed.clone()))
            .serve_with_incoming(dra_e2e_conn::unix_incoming(
                tokio::net::UnixListener::bind(&socket).unwrap(),
            ));
        let server = tokio::spawn(server);
        let channel = super::super::uds::dial(
            &socket,
            Duration::from_secs(5),
            super::super::uds::ConnCount::default(),
        )
        .await
        .unwrap();

        let journal = Journal::default();
        let store = Arc::new(HealthStore::new(journal.clone(), Duration::from_millis(20)));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(watch_plugin(
            store.clone(),
            "d".into(),
            HealthApi::V1alpha1,
            move || channel.clone(),
            cancel.clone(),
        ));
        let limit = Duration::from_secs(20);
        let mut opened = feed.opened.subscribe();
        let send = |health: pb::HealthStatus, message: &str| {
            let tx = feed.streams.lock().unwrap().last().cloned().unwrap();
            let report = NodeWatchResourcesResponse {
                devices: vec![wire("p", "x", health as i32, message)],
            };
            async move { tx.send(Ok(report)).await.unwrap() }
        };
        let seen = |health: HealthStatus, message: &'static str| {
            journal.wait_for(limit, move |k| {
                matches!(k, NodeEventKind::DeviceHealth { driver, device, health: h, message: m, .. }
                    if driver == "d" && device == "x" && *h == health && m == message)
            })
        };

        tokio::time::timeout(limit, opened.wait_for(|n| *n == 1))
            .await
            .unwrap()
            .unwrap();
        send(pb::HealthStatus::Unhealthy, "hot").await;
        assert!(seen(HealthStatus::Unhealthy, "hot").await.is_some());

        // The plugin ends the stream: the node opens a new one.
        feed.streams.lock().unwrap().clear();
        tokio::time::timeout(limit, opened.wait_for(|n| *n == 2))
            .await
            .unwrap()
            .unwrap();
        send(pb::HealthStatus::Healthy, "").await;
        assert!(seen(HealthStatus::Healthy, "").await.is_some());
        assert_eq!(
            store.snapshot().get("d", "p", "x"),
            entry(HealthStatus::Healthy, "")
        );

        cancel.cancel();
        tokio::time::timeout(limit, task).await.unwrap().unwrap();
        server.abort();
    }

    #[tokio::test]
    async fn reports_replace_and_changes_are_journaled_once() {
        let journal = Journal::default();
        let store = HealthStore::new(journal.clone(), Duration::from_secs(5));
        let mut rx = store.subscribe();
        let live = CancellationToken::new();
        let key = |d: &str| ("p".to_string(), d.to_string());
        let report = |items: &[(&str, HealthStatus, &str)]| -> DriverHealth {
            items
                .iter()
                .map(|(d, h, m)| (key(d), entry(*h, m)))
                .collect()
        };
        let health_events = || {
            journal
                .entries()
                .into_iter()
                .filter_map(|e| match e.kind {
                    NodeEventKind::DeviceHealth {
                        device,
                        health,
                        message,
                        ..
                    } => Some((device, health, message)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };

        let first = [
            ("a", HealthStatus::Healthy, "ok"),
            ("b", HealthStatus::Unknown, ""),
        ];
        store.replace("d", report(&first), &live);
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        // "b" reported Unknown without a message is what the node assumed.
        assert_eq!(
            health_events(),
            vec![("a".into(), HealthStatus::Healthy, "ok".into())]
        );

        // The same report again changes nothing.
        store.replace("d", report(&first), &live);
        assert!(!rx.has_changed().unwrap());
        assert_eq!(health_events().len(), 1);

        // A report without "a" makes it Unknown: reports are complete lists.
        store.replace("d", report(&[("b", HealthStatus::Unhealthy, "bad")]), &live);
        assert!(rx.has_changed().unwrap());
        let snap = store.snapshot();
        assert_eq!(snap.get("d", "p", "a"), HealthEntry::default());
        assert_eq!(
            snap.get("d", "p", "b"),
            entry(HealthStatus::Unhealthy, "bad")
        );
        assert_eq!(
            health_events()[1..],
            [
                ("a".into(), HealthStatus::Unknown, String::new()),
                ("b".into(), HealthStatus::Unhealthy, "bad".into()),
            ]
        );

        // A stream of a removed plugin cannot write any more.
        let gone = CancellationToken::new();
        gone.cancel();
        store.replace("d", report(&[("b", HealthStatus::Healthy, "")]), &gone);
        assert_eq!(
            store.snapshot().get("d", "p", "b").health,
            HealthStatus::Unhealthy
        );

        store.forget_driver("d");
        assert!(store.reported().is_empty());
        assert_eq!(
            health_events().last().cloned(),
            Some(("b".into(), HealthStatus::Unknown, String::new()))
        );
    }
}
