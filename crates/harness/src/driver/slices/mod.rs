//! The ResourceSlices a test driver offers, and the publisher that keeps a
//! pool's slice in place (re-created when someone deletes it), as the kubelet
//! plugin helper's ResourceSlice controller does.
mod controller;
mod devices;
mod policy;
mod publisher;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{CounterSet, Device, ResourceSlice};
use serde_json::{Value, json};

pub use controller::{ControllerFault, ControllerStats, SliceController, limits, max_size_slices};
pub use devices::{
    Attribute, DeviceSpec, Taint, default_taint, network_devices, node_local_devices,
};
pub use policy::wait_policy_enforced;
pub use publisher::{Publisher, dropped_fields};

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

#[cfg(test)]
mod tests {
    use super::*;

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
