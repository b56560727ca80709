//! The ResourceSlices a test driver offers, and the publisher that keeps a
//! pool's slice in place (re-created when someone deletes it), as the kubelet
//! plugin helper's ResourceSlice controller does.
use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{CounterSet, Device, ResourceSlice};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A device attribute value as written in a feature file (`true`, `3`, `"x"`).
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    Bool(bool),
    Int(i64),
    String(String),
    Version(String),
}

impl Attribute {
    /// Reads `true`/`false`, an integer, `v1.2.3`-like versions, or a string.
    pub fn parse(s: &str) -> Self {
        let s = s.trim();
        if let Ok(b) = s.parse::<bool>() {
            return Attribute::Bool(b);
        }
        if let Ok(i) = s.parse::<i64>() {
            return Attribute::Int(i);
        }
        let unquoted = s.trim_matches('"');
        if unquoted.split('.').count() == 3 && unquoted.split('.').all(|p| p.parse::<u64>().is_ok())
        {
            return Attribute::Version(unquoted.to_owned());
        }
        Attribute::String(unquoted.to_owned())
    }

    fn to_json(&self) -> Value {
        match self {
            Attribute::Bool(b) => json!({ "bool": b }),
            Attribute::Int(i) => json!({ "int": i }),
            Attribute::String(s) => json!({ "string": s }),
            Attribute::Version(v) => json!({ "version": v }),
        }
    }
}

/// A device taint (`key=value:Effect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl std::str::FromStr for Taint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("taint {s:?} must look like key=value:Effect"))?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if !["NoSchedule", "NoExecute", "None"].contains(&effect) {
            return Err(format!(
                "taint effect {effect:?} must be NoSchedule, NoExecute or None"
            ));
        }
        Ok(Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: effect.to_owned(),
        })
    }
}

/// Upstream's taint of "tainted" network devices.
pub fn default_taint() -> Taint {
    Taint {
        key: "example.com/taint".to_owned(),
        value: "tainted".to_owned(),
        effect: "NoSchedule".to_owned(),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    pub name: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub taints: Vec<Taint>,
}

impl DeviceSpec {
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            attributes: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// The device as the API has it: name, attributes and taints.
    pub fn to_json(&self) -> Value {
        let mut d = json!({ "name": self.name });
        if !self.attributes.is_empty() {
            d["attributes"] = self
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        if !self.taints.is_empty() {
            d["taints"] = self
                .taints
                .iter()
                .map(|t| json!({ "key": t.key, "value": t.value, "effect": t.effect }))
                .collect();
        }
        d
    }
}

/// Upstream's node-local device names: `device-00`, `device-01`, ...
pub fn node_local_devices(count: usize) -> Vec<DeviceSpec> {
    (0..count)
        .map(|i| DeviceSpec::named(format!("device-{i:02}")))
        .collect()
}

/// Upstream's network device names: `device-0`, `device-1`, ...
pub fn network_devices(count: usize, taints: &[Taint]) -> Vec<DeviceSpec> {
    (0..count)
        .map(|i| {
            let mut d = DeviceSpec::named(format!("device-{i}"));
            d.taints = taints.to_vec();
            d
        })
        .collect()
}

fn build(value: Value) -> Result<ResourceSlice, serde_json::Error> {
    serde_json::from_value(value)
}

/// What one slice of a driver's node-local pool holds besides who publishes
/// it: upstream's `Slice` of `DriverResources`, written in a feature file
/// when devices need more than names and attributes (counters they consume,
/// capacity shared between claims). The harness sets driver, node and pool,
/// so a slice that names them is refused rather than silently overwritten.
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SliceContent {
    #[serde(default)]
    pub devices: Vec<Device>,
    #[serde(default)]
    pub shared_counters: Vec<CounterSet>,
    /// The attribute naming each device's partition type (gate
    /// DRAPartitionableDevicesType); only on a slice of devices.
    #[serde(default)]
    pub partition_type_attribute: Option<String>,
}

impl SliceContent {
    /// The names of the devices of `slices`, in order.
    pub fn device_names(slices: &[SliceContent]) -> Vec<String> {
        slices
            .iter()
            .flat_map(|s| s.devices.iter().map(|d| d.name.clone()))
            .collect()
    }

    /// A slice of simple devices (names, attributes, taints).
    pub fn of_devices(devices: &[DeviceSpec]) -> Result<Self, serde_json::Error> {
        Ok(Self {
            devices: devices
                .iter()
                .map(|d| serde_json::from_value(d.to_json()))
                .collect::<Result<_, _>>()?,
            ..Self::default()
        })
    }

    fn of_slice(s: &ResourceSlice) -> Self {
        Self {
            devices: s.spec.devices.clone().unwrap_or_default(),
            shared_counters: s.spec.shared_counters.clone().unwrap_or_default(),
            partition_type_attribute: s.spec.partition_type_attribute.clone(),
        }
    }

    fn write_into(&self, slice: &mut ResourceSlice) {
        // The API takes a slice of counters or of devices, not both, and
        // refuses an empty device list beside counters.
        slice.spec.devices = (!self.devices.is_empty() || self.shared_counters.is_empty())
            .then(|| self.devices.clone());
        slice.spec.shared_counters =
            (!self.shared_counters.is_empty()).then(|| self.shared_counters.clone());
        slice
            .spec
            .partition_type_attribute
            .clone_from(&self.partition_type_attribute);
    }
}

/// Marks which slice of a pool of several a slice is, so its publisher finds
/// its own among the pool's slices (their names are generated).
const SLOT_LABEL: &str = "dra-e2e.k8s.io/pool-slice";

fn slot_of(s: &ResourceSlice) -> Option<&String> {
    s.metadata.labels.as_ref().and_then(|l| l.get(SLOT_LABEL))
}

/// The slice of a node-local pool: pool = node name, owned by the Node.
pub fn node_slice(
    driver: &str,
    node: &Node,
    devices: &[DeviceSpec],
) -> Result<ResourceSlice, serde_json::Error> {
    let content = SliceContent::of_devices(devices)?;
    let mut slices = node_pool_slices(driver, node, std::slice::from_ref(&content))?;
    Ok(slices.remove(0))
}

/// The slices of a node-local pool made of `contents` (pool = node name,
/// owned by the Node, resourceSliceCount = their number), named like the
/// kubelet plugin helper names them.
pub fn node_pool_slices(
    driver: &str,
    node: &Node,
    contents: &[SliceContent],
) -> Result<Vec<ResourceSlice>, serde_json::Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let uid = node.metadata.uid.clone().unwrap_or_default();
    let count = contents.len();
    contents
        .iter()
        .enumerate()
        .map(|(i, content)| {
            let labels = if count > 1 {
                json!({ SLOT_LABEL: i.to_string() })
            } else {
                json!({})
            };
            let mut slice = build(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {
                    "generateName": format!("{name}-{driver}-"),
                    "labels": labels,
                    "ownerReferences": [ { "apiVersion": "v1", "kind": "Node", "name": name, "uid": uid, "controller": true } ],
                },
                "spec": {
                    "driver": driver,
                    "nodeName": name,
                    "pool": { "name": name, "generation": 1, "resourceSliceCount": count },
                },
            }))?;
            content.write_into(&mut slice);
            Ok(slice)
        })
        .collect()
}

/// The API's limit of devices in one slice; 64 when a device has taints.
pub fn max_devices_per_slice(devices: &[DeviceSpec]) -> usize {
    if devices.iter().any(|d| !d.taints.is_empty()) {
        64
    } else {
        128
    }
}

/// The `network` pool shared by `nodes`, selected by hostname: slices
/// `<driver>-0`, `<driver>-1`, … of as many devices as the API allows, like
/// the ResourceSlice controller splits a large pool.
pub fn network_slices(
    driver: &str,
    nodes: &[String],
    devices: &[DeviceSpec],
) -> Result<Vec<ResourceSlice>, serde_json::Error> {
    let chunks: Vec<&[DeviceSpec]> = if devices.is_empty() {
        vec![&[]]
    } else {
        devices.chunks(max_devices_per_slice(devices)).collect()
    };
    let contents = chunks
        .into_iter()
        .map(SliceContent::of_devices)
        .collect::<Result<Vec<_>, _>>()?;
    selected_pool_slices(driver, nodes, "network", driver, &contents)
}

/// A pool of `contents` that `nodes` share, selected by hostname: what
/// upstream's driver publishes through its ResourceSlice controller for
/// several hosts. The slices are `<prefix>-0`, `<prefix>-1`, ...
pub fn selected_pool_slices(
    driver: &str,
    nodes: &[String],
    pool: &str,
    prefix: &str,
    contents: &[SliceContent],
) -> Result<Vec<ResourceSlice>, serde_json::Error> {
    let count = contents.len();
    contents
        .iter()
        .enumerate()
        .map(|(i, content)| {
            let mut slice = build(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": { "name": format!("{prefix}-{i}") },
                "spec": {
                    "driver": driver,
                    "nodeSelector": { "nodeSelectorTerms": [ { "matchExpressions": [
                        { "key": "kubernetes.io/hostname", "operator": "In", "values": nodes } ] } ] },
                    "pool": { "name": pool, "generation": 1, "resourceSliceCount": count },
                },
            }))?;
            content.write_into(&mut slice);
            Ok(slice)
        })
        .collect()
}

/// A pool available on all nodes.
pub fn all_nodes_slice(
    driver: &str,
    pool: &str,
    devices: &[DeviceSpec],
) -> Result<ResourceSlice, serde_json::Error> {
    build(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": { "generateName": format!("{pool}-{driver}-") },
        "spec": {
            "driver": driver,
            "allNodes": true,
            "pool": { "name": pool, "generation": 1, "resourceSliceCount": 1 },
            "devices": devices.iter().map(DeviceSpec::to_json).collect::<Vec<_>>(),
        },
    }))
}

fn devices_of(s: &ResourceSlice) -> Value {
    serde_json::to_value(s.spec.devices.clone()).unwrap_or_default()
}

/// Waits until the admission policy that keeps a plugin to its own node's
/// slices is in force for `plugin` (a client acting as the driver's plugin on
/// some node): a dry-run create of a slice for a node that does not exist is
/// denied. The API server takes a moment to load a new policy, and scenarios
/// check that such writes are denied from the first request on.
pub async fn wait_policy_enforced(
    plugin: &kube::Client,
    driver: &str,
    timeout: Duration,
) -> Result<(), dra_e2e_kube::wait::WaitError> {
    use dra_e2e_kube::wait::{self, Check};
    let probe = ResourceSlice {
        metadata: kube::api::ObjectMeta {
            generate_name: Some("dra-e2e-policy-probe-".to_owned()),
            ..Default::default()
        },
        spec: k8s_openapi::api::resource::v1::ResourceSliceSpec {
            driver: driver.to_owned(),
            node_name: Some(POLICY_PROBE_NODE.to_owned()),
            pool: k8s_openapi::api::resource::v1::ResourcePool {
                name: POLICY_PROBE_NODE.to_owned(),
                generation: 1,
                resource_slice_count: 1,
            },
            ..Default::default()
        },
    };
    let api: Api<ResourceSlice> = Api::all(plugin.clone());
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait::poll(
        &format!("the ResourceSlice admission policy of {driver} to be in force"),
        timeout,
        Duration::from_millis(200),
        || async {
            match api.create(&pp, &probe).await {
                Ok(_) => Check::Pending("a plugin may still write another node's slice".into()),
                Err(e)
                    if e.to_string()
                        .contains("may not modify resourceslices on node") =>
                {
                    Check::Done(())
                }
                Err(e) => Check::Pending(format!("the probe failed otherwise: {e}")),
            }
        },
    )
    .await
}

/// A node name no cluster has, for [`wait_policy_enforced`]'s probe.
const POLICY_PROBE_NODE: &str = "dra-e2e-policy-probe-node";

/// Keeps one slice of a pool in place with the given client until stopped or
/// dropped (a driver dropped without its teardown must not keep
/// publishing).
pub struct Publisher {
    cancel: tokio_util::sync::DropGuard,
    task: JoinHandle<()>,
    refused: tokio::sync::watch::Receiver<Option<String>>,
}

impl Publisher {
    pub fn start(client: kube::Client, desired: ResourceSlice) -> Self {
        let cancel = CancellationToken::new();
        let (refuse, refused) = tokio::sync::watch::channel(None);
        let task = tokio::spawn(publish(client, desired, cancel.clone(), refuse));
        Self {
            cancel: cancel.drop_guard(),
            task,
            refused,
        }
    }

    /// Resolves with what went wrong once the API server refused the slice
    /// as invalid or dropped fields of it: a slice written in a feature file
    /// that can never be published as written, which a wait for it should
    /// report at once. Never resolves otherwise.
    pub async fn refusal(&self) -> String {
        let mut refused = self.refused.clone();
        let message = match refused.wait_for(Option::is_some).await {
            Ok(message) => message.clone(),
            Err(_) => None,
        };
        match message {
            Some(message) => message,
            None => std::future::pending().await,
        }
    }

    pub async fn stop(self) {
        let Self { cancel, task, .. } = self;
        drop(cancel);
        let _ = task.await;
    }
}

async fn publish(
    client: kube::Client,
    desired: ResourceSlice,
    cancel: CancellationToken,
    refuse: tokio::sync::watch::Sender<Option<String>>,
) {
    let spec = desired.spec.clone();
    let pool = spec.pool.name.clone();
    let mut selector = format!("spec.driver={}", spec.driver);
    if let Some(node) = &spec.node_name {
        selector.push_str(&format!(",spec.nodeName={node}"));
    }
    let api: Api<ResourceSlice> = Api::all(client);
    // The watch only says "something changed"; each reconcile lists afresh, so
    // a failed write is simply retried on the next trigger.
    let mut changes = std::pin::pin!(
        watcher::watcher(api.clone(), watcher::Config::default().fields(&selector))
            .default_backoff()
    );
    let want = SliceContent::of_slice(&desired);
    let slot = slot_of(&desired).cloned();
    // What the API server made of the last write: it may default fields or
    // drop those of a disabled feature gate, and a slice that differs from
    // `want` only so must not be rewritten again and again.
    let mut accepted: Option<SliceContent> = None;
    let mut retry = false;
    loop {
        if retry {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        } else {
            tokio::select! {
                _ = cancel.cancelled() => return,
                e = changes.next() => match e {
                    None => return,
                    Some(Err(e)) => {
                        tracing::debug!(%pool, error = %e, "slice watch error");
                        continue;
                    }
                    Some(Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))) => {}
                    Some(Ok(_)) => continue,
                },
            }
        }
        let list = match api.list(&ListParams::default().fields(&selector)).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::debug!(%pool, error = %e, "listing slices failed");
                retry = true;
                continue;
            }
        };
        let existing = list
            .into_iter()
            .find(|s| s.spec.pool.name == pool && slot_of(s) == slot.as_ref());
        let result = match existing {
            None => api.create(&PostParams::default(), &desired).await,
            Some(existing)
                if SliceContent::of_slice(&existing) != want
                    && Some(SliceContent::of_slice(&existing)) != accepted =>
            {
                let mut updated = existing.clone();
                want.write_into(&mut updated);
                updated.spec.pool.generation += 1;
                let name = existing.metadata.name.clone().unwrap_or_default();
                api.replace(&name, &PostParams::default(), &updated).await
            }
            Some(_) => {
                retry = false;
                continue;
            }
        };
        retry = match result {
            Ok(written) => {
                let kept = SliceContent::of_slice(&written);
                if let Some(report) = dropped_report(&want, &kept) {
                    refuse.send_replace(Some(report));
                }
                accepted = Some(kept);
                false
            }
            // Invalid stays invalid: said once, tried again only when the
            // pool's slices change.
            Err(kube::Error::Api(status)) if status.code == 422 => {
                refuse.send_replace(Some(status.message));
                false
            }
            Err(e) => {
                tracing::warn!(%pool, error = %e, "publishing ResourceSlice failed, retrying");
                true
            }
        };
    }
}

/// What the API server's copy `written` of `sent` lacks, said as an
/// error, or `None` when it kept every field (see [`dropped`]).
pub fn dropped_fields(sent: &ResourceSlice, written: &ResourceSlice) -> Option<String> {
    dropped_report(
        &SliceContent::of_slice(sent),
        &SliceContent::of_slice(written),
    )
}

fn dropped_report(want: &SliceContent, kept: &SliceContent) -> Option<String> {
    let lost = dropped(want, kept);
    (!lost.is_empty()).then(|| {
        format!(
            "the API server dropped {} (is the feature gate of these fields on?)",
            lost.join(", ")
        )
    })
}

/// The fields of `want` that the API server's copy `kept` no longer has:
/// fields of a disabled feature gate are dropped without a word, and a
/// slice without them would test nothing. Only presence is compared, as
/// the server may default and normalise what it keeps.
fn dropped(want: &SliceContent, kept: &SliceContent) -> Vec<String> {
    fn fields<T: serde::Serialize>(item: &T) -> Vec<String> {
        match serde_json::to_value(item) {
            Ok(Value::Object(map)) => map
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k)
                .collect(),
            _ => Vec::new(),
        }
    }
    fn compare<T: serde::Serialize>(
        kind: &str,
        want: &[T],
        kept: &[T],
        name: impl Fn(&T) -> &str,
        lost: &mut Vec<String>,
    ) {
        for w in want {
            match kept.iter().find(|k| name(k) == name(w)) {
                None => lost.push(format!("{kind} {}", name(w))),
                Some(k) => {
                    let have = fields(k);
                    lost.extend(
                        fields(w)
                            .into_iter()
                            .filter(|f| !have.contains(f))
                            .map(|f| format!("{f} of {kind} {}", name(w))),
                    );
                }
            }
        }
    }
    let mut lost = Vec::new();
    compare(
        "device",
        &want.devices,
        &kept.devices,
        |d| &d.name,
        &mut lost,
    );
    compare(
        "counter set",
        &want.shared_counters,
        &kept.shared_counters,
        |c| &c.name,
        &mut lost,
    );
    if want.partition_type_attribute.is_some() && kept.partition_type_attribute.is_none() {
        lost.push("partitionTypeAttribute".to_owned());
    }
    lost
}

/// API limits of resource.k8s.io/v1 that make the largest slices.
pub mod limits {
    pub const DEVICES_PER_SLICE: usize = 128;
    pub const ATTRIBUTES_PER_DEVICE: usize = 32;
    pub const DOMAIN_LENGTH: usize = 63;
    pub const ID_LENGTH: usize = 32;
    pub const VALUE_LENGTH: usize = 64;
    pub const NAME_LENGTH: usize = 63;
}

/// `slices` slices of the largest devices the API accepts: the most devices
/// per slice, the most attributes per device, names and values of maximum
/// length (upstream's integration helper that measures slice sizes).
pub fn max_size_slices(slices: usize) -> Vec<Vec<Value>> {
    use limits::*;
    let suffix = ".example.com";
    let domain = format!("{}{suffix}", "x".repeat(DOMAIN_LENGTH - suffix.len()));
    let value = "v".repeat(VALUE_LENGTH);
    let attributes: serde_json::Map<String, Value> = (0..ATTRIBUTES_PER_DEVICE)
        .map(|j| {
            (
                format!("{domain}/{}{j:04}", "x".repeat(ID_LENGTH - 4)),
                json!({ "string": value }),
            )
        })
        .collect();
    let prefix = "dev-";
    let filler = "x".repeat(NAME_LENGTH - prefix.len() - 6);
    (0..slices)
        .map(|i| {
            (0..DEVICES_PER_SLICE)
                .map(|e| {
                    let n = i * DEVICES_PER_SLICE + e;
                    json!({ "name": format!("{prefix}{filler}{n:06}"), "attributes": attributes })
                })
                .collect()
        })
        .collect()
}

/// The writes a [`SliceController`] made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControllerStats {
    pub creates: u64,
    pub updates: u64,
    pub deletes: u64,
}

impl std::fmt::Display for ControllerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} creates, {} updates, {} deletes",
            self.creates, self.updates, self.deletes
        )
    }
}

struct Desired {
    /// The devices of each slice of the pool.
    slices: Vec<Vec<Value>>,
    generation: i64,
}

/// Publishes one cluster-wide pool of a driver as a list of slices, like the
/// kubelet plugin helper's ResourceSlice controller: watches the driver's
/// slices and, on every change, creates what is missing and deletes what is
/// no longer wanted, counting its writes. Nothing is written while the
/// slices are as wanted.
/// A fault the slice controller can be given on purpose, so a test can show
/// that the checks of upstream's "creates slices" catch it. Set for a whole
/// run with `--slice-controller-fault`; never in a real run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ControllerFault {
    #[default]
    None,
    /// Rewrites one of its slices every second although nothing changed.
    Churn,
    /// Ignores being told to publish other slices.
    NoShrink,
}

impl ControllerFault {
    /// The faults by the names the option takes.
    pub const ALL: [(&str, ControllerFault); 3] = [
        ("none", ControllerFault::None),
        ("churn", ControllerFault::Churn),
        ("no-shrink", ControllerFault::NoShrink),
    ];

    /// The fault called `name`; an unknown one is an error that lists them.
    pub fn named(name: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "{name:?} is no fault of the slice controller; one of: {}",
                    names.join(", ")
                )
            })
    }
}

pub struct SliceController {
    fault: ControllerFault,
    desired: std::sync::Arc<std::sync::Mutex<Desired>>,
    stats: std::sync::Arc<std::sync::Mutex<ControllerStats>>,
    kick: tokio::sync::watch::Sender<u64>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl SliceController {
    pub fn start(
        client: kube::Client,
        driver: &str,
        pool: &str,
        slices: Vec<Vec<Value>>,
        fault: ControllerFault,
    ) -> Self {
        let desired = std::sync::Arc::new(std::sync::Mutex::new(Desired {
            slices,
            generation: 1,
        }));
        let stats = std::sync::Arc::new(std::sync::Mutex::new(ControllerStats::default()));
        let (kick, kicked) = tokio::sync::watch::channel(0);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(control(
            client,
            Controlled {
                driver: driver.to_owned(),
                pool: pool.to_owned(),
                desired: desired.clone(),
                stats: stats.clone(),
                fault,
            },
            kicked,
            cancel.clone(),
        ));
        Self {
            fault,
            desired,
            stats,
            kick,
            cancel,
            task,
        }
    }

    pub fn stats(&self) -> ControllerStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wants the pool as these slices from now on (a new generation).
    pub fn update(&self, slices: Vec<Vec<Value>>) {
        if self.fault == ControllerFault::NoShrink {
            return;
        }
        {
            let mut d = self.desired.lock().unwrap_or_else(|p| p.into_inner());
            d.slices = slices;
            d.generation += 1;
        }
        self.kick.send_modify(|k| *k += 1);
    }

    pub async fn stop(mut self) {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for SliceController {
    /// A step cut short drops its controller: the loop must end with it.
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What a controller's loop controls: a driver's pool, as it wants it, and
/// how it is told to misbehave, if at all.
struct Controlled {
    driver: String,
    pool: String,
    desired: std::sync::Arc<std::sync::Mutex<Desired>>,
    stats: std::sync::Arc<std::sync::Mutex<ControllerStats>>,
    fault: ControllerFault,
}

async fn control(
    client: kube::Client,
    controlled: Controlled,
    mut kicked: tokio::sync::watch::Receiver<u64>,
    cancel: CancellationToken,
) {
    let Controlled {
        driver,
        pool,
        desired,
        stats,
        fault,
    } = controlled;
    let api: Api<ResourceSlice> = Api::all(client);
    let selector = format!("spec.driver={driver}");
    let mut changes = std::pin::pin!(
        watcher::watcher(api.clone(), watcher::Config::default().fields(&selector))
            .default_backoff()
    );
    let mut retry = false;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            // The controller was dropped without being stopped.
            changed = kicked.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(1)), if retry => {}
            _ = tokio::time::sleep(Duration::from_secs(1)), if fault == ControllerFault::Churn => {
                churn(&api, &selector, &pool, &stats).await;
                continue;
            }
            e = changes.next() => match e {
                None => return,
                Some(Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))) => {}
                Some(_) => continue,
            },
        }
        // One reconcile for a burst of events (its own writes among them).
        while let Some(Some(_)) = futures::FutureExt::now_or_never(changes.next()) {}
        let (want, generation) = {
            let d = desired.lock().unwrap_or_else(|p| p.into_inner());
            (d.slices.clone(), d.generation)
        };
        retry = reconcile(&api, &selector, &driver, &pool, &want, generation, &stats)
            .await
            .inspect_err(
                |e| tracing::warn!(%pool, error = %e, "reconciling the pool failed, retrying"),
            )
            .is_err();
    }
}

/// The churn fault: deletes one of the pool's slices (which the next
/// reconcile recreates), as a controller that rewrites what did not change.
async fn churn(
    api: &Api<ResourceSlice>,
    selector: &str,
    pool: &str,
    stats: &std::sync::Mutex<ControllerStats>,
) {
    let Ok(list) = api.list(&ListParams::default().fields(selector)).await else {
        return;
    };
    if let Some(name) = list
        .items
        .iter()
        .find(|s| s.spec.pool.name == pool)
        .and_then(|s| s.metadata.name.clone())
        && api.delete(&name, &Default::default()).await.is_ok()
    {
        stats.lock().unwrap_or_else(|p| p.into_inner()).deletes += 1;
    }
}

async fn reconcile(
    api: &Api<ResourceSlice>,
    selector: &str,
    driver: &str,
    pool: &str,
    want: &[Vec<Value>],
    generation: i64,
    stats: &std::sync::Mutex<ControllerStats>,
) -> Result<(), kube::Error> {
    let count =
        |f: fn(&mut ControllerStats)| f(&mut stats.lock().unwrap_or_else(|p| p.into_inner()));
    let existing: Vec<ResourceSlice> = api
        .list(&ListParams::default().fields(selector))
        .await?
        .items
        .into_iter()
        .filter(|s| s.spec.pool.name == pool)
        .collect();
    let mut kept: Vec<bool> = vec![false; want.len()];
    let mut unwanted = Vec::new();
    for slice in existing {
        // The API server drops an empty device list.
        let devices = match devices_of(&slice) {
            Value::Null => json!([]),
            d => d,
        };
        let matches = slice.spec.pool.generation == generation
            && slice.spec.pool.resource_slice_count == want.len() as i64
            && want
                .iter()
                .enumerate()
                .find(|(i, w)| !kept[*i] && devices == json!(w))
                .map(|(i, _)| kept[i] = true)
                .is_some();
        if !matches {
            unwanted.push(slice);
        }
    }
    let missing: Vec<&Vec<Value>> = want
        .iter()
        .zip(&kept)
        .filter(|(_, k)| !**k)
        .map(|(w, _)| w)
        .collect();
    // Like the resourceslice controller of k8s.io/dynamic-resource-allocation:
    // a slice no longer wanted is rewritten with what is missing (an
    // update) while there is something missing, and deleted otherwise;
    // the surplus goes first, so the driver never has more slices than it
    // publishes.
    let surplus = unwanted.split_off(unwanted.len().min(missing.len()));
    for slice in surplus {
        let name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &Default::default()).await {
            Ok(_) => count(|s| s.deletes += 1),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let mut reused = unwanted.into_iter();
    for devices in missing {
        let slice = build(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": { "generateName": format!("{driver}-{pool}-") },
            "spec": {
                "driver": driver,
                "allNodes": true,
                "pool": { "name": pool, "generation": generation, "resourceSliceCount": want.len() },
                "devices": devices,
            },
        }))
        .map_err(kube::Error::SerdeError)?;
        match reused.next() {
            Some(mut old) => {
                old.spec = slice.spec;
                let name = old.metadata.name.clone().unwrap_or_default();
                api.replace(&name, &PostParams::default(), &old).await?;
                count(|s| s.updates += 1);
            }
            None => {
                api.create(&PostParams::default(), &slice).await?;
                count(|s| s.creates += 1);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_the_server_dropped_are_named_and_normalised_ones_are_not() {
        let want: SliceContent = serde_json::from_value(json!({
            "devices": [
                { "name": "a", "nodeAllocatableResources": { "cpu": { "mapping": { "deviceMultiplier": "1" } } } },
                { "name": "b", "attributes": { "x": { "int": 1 } } },
                { "name": "gone" },
            ],
            "sharedCounters": [ { "name": "set", "counters": { "c": { "value": "1" } } } ],
        }))
        .expect("valid");
        let kept: SliceContent = serde_json::from_value(json!({
            "devices": [
                { "name": "a" },
                { "name": "b", "attributes": { "x": { "int": 1 } }, "allowMultipleAllocations": false },
            ],
            "sharedCounters": [ { "name": "set", "counters": { "c": { "value": "1000m" } } } ],
        }))
        .expect("valid");
        assert_eq!(
            dropped(&want, &kept),
            ["nodeAllocatableResources of device a", "device gone"]
        );
        assert!(dropped(&want, &want).is_empty());
    }

    #[test]
    fn maximum_size_slices_reach_every_limit() {
        let slices = max_size_slices(2);
        assert_eq!(slices.len(), 2);
        assert!(slices.iter().all(|s| s.len() == limits::DEVICES_PER_SLICE));
        let d = &slices[1][127];
        let name = d["name"].as_str().unwrap();
        assert_eq!(name.len(), limits::NAME_LENGTH);
        assert!(name.ends_with("000255"), "{name}");
        let attrs = d["attributes"].as_object().unwrap();
        assert_eq!(attrs.len(), limits::ATTRIBUTES_PER_DEVICE);
        for (k, v) in attrs {
            let (domain, id) = k.split_once('/').unwrap();
            assert_eq!(domain.len(), limits::DOMAIN_LENGTH);
            assert_eq!(id.len(), limits::ID_LENGTH);
            assert_eq!(v["string"].as_str().unwrap().len(), limits::VALUE_LENGTH);
        }
    }

    #[test]
    fn a_large_network_pool_is_split_at_the_api_limit() {
        let nodes = ["n".to_owned()];
        let slices = network_slices("d", &nodes, &network_devices(300, &[])).unwrap();
        let sizes: Vec<usize> = slices
            .iter()
            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
            .collect();
        assert_eq!(sizes, [128, 128, 44]);
        for (i, s) in slices.iter().enumerate() {
            assert_eq!(s.metadata.name.as_deref(), Some(format!("d-{i}").as_str()));
            assert_eq!(s.spec.pool.resource_slice_count, 3);
        }
        let taint: Taint = "k=v:NoSchedule".parse().unwrap();
        let tainted = network_slices("d", &nodes, &network_devices(65, &[taint])).unwrap();
        assert_eq!(tainted.len(), 2);
        let empty = network_slices("d", &nodes, &[]).unwrap();
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].spec.pool.resource_slice_count, 1);
    }

    #[test]
    fn attribute_parsing() {
        assert_eq!(Attribute::parse("true"), Attribute::Bool(true));
        assert_eq!(Attribute::parse("3"), Attribute::Int(3));
        assert_eq!(
            Attribute::parse("1.2.3"),
            Attribute::Version("1.2.3".into())
        );
        assert_eq!(Attribute::parse("\"x\""), Attribute::String("x".into()));
    }

    #[test]
    fn taint_parsing() {
        let t: Taint = "example.com/taint=tainted:NoExecute".parse().unwrap();
        assert_eq!(t.key, "example.com/taint");
        assert_eq!(t.value, "tainted");
        assert_eq!(t.effect, "NoExecute");
        assert!("k=v:Sometimes".parse::<Taint>().is_err());
        assert!("novalue".parse::<Taint>().is_err());
    }

    #[test]
    fn node_slice_is_owned_by_node_and_named_like_upstream() {
        let node: Node =
            serde_json::from_value(json!({ "metadata": { "name": "n1", "uid": "u1" } })).unwrap();
        let s = node_slice("d.k8s.io", &node, &node_local_devices(2)).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["spec"]["pool"]["name"], "n1");
        assert_eq!(v["spec"]["nodeName"], "n1");
        assert_eq!(v["spec"]["devices"][1]["name"], "device-01");
        let owner = &v["metadata"]["ownerReferences"][0];
        assert_eq!(owner["controller"], true);
        assert!(owner.get("blockOwnerDeletion").is_none());
        let net = network_slices(
            "d.k8s.io",
            &["n1".into()],
            &network_devices(3, &[default_taint()]),
        )
        .unwrap();
        let v = serde_json::to_value(&net[0]).unwrap();
        assert_eq!(v["spec"]["devices"][2]["name"], "device-2");
        assert_eq!(v["spec"]["devices"][0]["taints"][0]["effect"], "NoSchedule");
        assert_eq!(v["spec"]["pool"]["name"], "network");
    }

    /// Upstream's ToDriverResources: a slice of counters and one of devices,
    /// one pool named after the node that counts both, each slice marked so
    /// its publisher finds it; a single slice carries no mark, and a slice
    /// of counters no device list (the API refuses one beside counters).
    #[test]
    fn a_node_pool_of_several_slices_counts_them_and_marks_each() {
        let node: Node =
            serde_json::from_value(json!({ "metadata": { "name": "n1", "uid": "u1" } })).unwrap();
        let contents: Vec<SliceContent> = serde_saphyr::from_multiple(
            "sharedCounters:\n- name: c\n  counters:\n    memory: { value: 6Gi }\n---\n\
             devices:\n- name: d1\n  consumesCounters:\n  - counterSet: c\n    counters:\n      memory: { value: 4Gi }\n",
        )
        .unwrap();
        let slices = node_pool_slices("d.k8s.io", &node, &contents).unwrap();
        let v: Vec<Value> = slices
            .iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        for (i, s) in v.iter().enumerate() {
            assert_eq!(s["spec"]["pool"]["name"], "n1");
            assert_eq!(s["spec"]["pool"]["resourceSliceCount"], 2);
            assert_eq!(s["metadata"]["labels"][SLOT_LABEL], i.to_string());
        }
        assert!(v[0]["spec"].get("devices").is_none(), "{}", v[0]);
        assert_eq!(v[0]["spec"]["sharedCounters"][0]["name"], "c");
        assert_eq!(
            v[1]["spec"]["devices"][0]["consumesCounters"][0]["counterSet"],
            "c"
        );
        assert!(v[1]["spec"].get("sharedCounters").is_none(), "{}", v[1]);
        let single = node_slice("d.k8s.io", &node, &node_local_devices(1)).unwrap();
        assert!(slot_of(&single).is_none());
    }

    /// The harness owns driver, node and pool: a slice that sets them is
    /// refused with the field named, not silently overwritten.
    #[test]
    fn a_slice_naming_its_pool_is_refused() {
        let err = serde_saphyr::from_str::<SliceContent>("pool: { name: p }\ndevices: []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("pool"), "{err}");
    }
}

/// Generated `tainted` phrases: a taint, or a refusal naming the phrase or
/// the effect. `PROPTEST_CASES` raises the bounded count (`make
/// props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use crate::props::text;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::default())]

        #[test]
        fn any_taint_parses_or_is_named(
            s in text(&["example.com/t", "=", ":", "NoSchedule", "NoExecute", "None", "x"], 8),
        ) {
            match s.parse::<Taint>() {
                Ok(t) => {
                    prop_assert!(["NoSchedule", "NoExecute", "None"].contains(&t.effect.as_str()));
                    let back = if t.value.is_empty() && !s.contains('=') {
                        format!("{}:{}", t.key, t.effect)
                    } else {
                        format!("{}={}:{}", t.key, t.value, t.effect)
                    };
                    prop_assert_eq!(back, s);
                }
                Err(m) => prop_assert!(
                    m.contains(&format!("{s:?}")) || m.starts_with("taint effect "),
                    "{m}"
                ),
            }
        }
    }
}
