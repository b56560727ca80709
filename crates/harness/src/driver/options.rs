//! What a driver is asked to be: the devices it offers and how its
//! plugin is started on the nodes, kept apart from the driver so that steps
//! can build them before any driver exists.
use std::collections::BTreeMap;

use super::slices::{self, DeviceSpec, Taint};
use dra_e2e_plugin::{HealthApi, NodeApi};

/// The devices a driver offers.
#[derive(Debug, Clone)]
pub enum Resources {
    /// A pool per node (pool = node name), published by the plugin itself with
    /// its node identity, re-created when deleted. Upstream's `DriverResources`.
    NodeLocal {
        /// Devices per node index; nodes without an entry get `default`.
        per_node: BTreeMap<usize, Vec<DeviceSpec>>,
        default: Vec<DeviceSpec>,
    },
    /// A pool per node like `NodeLocal`, made of these slices on every node
    /// (devices that consume counters or share capacity, counter sets):
    /// upstream's `DriverResources` with slices of its own making.
    NodePool {
        slices: Vec<slices::SliceContent>,
    },
    /// One `network` pool for the driver's nodes, created by the harness.
    /// Upstream's `NetworkResources`.
    Network {
        devices: Vec<DeviceSpec>,
    },
    /// A pool the driver's nodes share (selected by hostname), made of these
    /// slices, created by the harness: upstream's multi-host
    /// `DriverResources` (`PartitionableResources`, `ShareableResources`).
    SharedPool {
        pool: String,
        slices: Vec<slices::SliceContent>,
    },
    /// A pool on all nodes, kept in place by the harness with admin rights.
    AllNodes {
        pool: String,
        devices: Vec<DeviceSpec>,
    },
    None,
}

impl Resources {
    pub fn node_local(count: usize) -> Self {
        Resources::NodeLocal {
            per_node: BTreeMap::new(),
            default: slices::node_local_devices(count),
        }
    }

    pub fn network(count: usize, taints: &[Taint]) -> Self {
        Resources::Network {
            devices: slices::network_devices(count, taints),
        }
    }
}

/// Everything that distinguishes one driver instance.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// Appended to `<namespace>` in the driver name (`-other`).
    pub name_suffix: String,
    /// Distinguishes a second instance of the same driver (`-new`).
    pub instance_suffix: String,
    pub resources: Resources,
    pub node_apis: Vec<NodeApi>,
    /// Served device health service versions (none: no health reporting).
    pub health_apis: Vec<HealthApi>,
    /// Register with the kubelet. Without it, slices are published but no
    /// kubelet ever calls the plugin (upstream's control-plane tests).
    pub with_kubelet: bool,
    /// Per-instance socket names, so two instances can run side by side.
    pub rolling_update: bool,
    /// When each node's DRA service (its socket, server and slices) starts.
    pub dra_service: DraServiceStart,
    /// Where the DRA socket is.
    pub dra_socket: DraSocketDir,
    /// Teardown waits until the driver's slices are gone (`IsGone`).
    pub expect_slice_removal: bool,
    /// Device metadata API versions written at prepare, in this order (none:
    /// no device metadata, upstream's default).
    pub device_metadata: Vec<dra_e2e_plugin::metadata::MetadataVersion>,
    /// `spec.skipNodeOperations` of every slice the driver publishes
    /// (`*`, `NodeUnprepareResources`, ...; upstream's
    /// `DriverResourcesWithSkipNodeOperations`); empty for none.
    pub skip_node_operations: Vec<String>,
    /// Bugs its plugins plant in themselves (the conformance pack's
    /// mutants; none normally).
    pub faults: dra_e2e_plugin::fault::Faults,
}

/// When a node's DRA service starts: its socket, its server and the slices
/// it publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraServiceStart {
    /// With the registration, its socket served first: a kubelet connects
    /// as soon as it learns of the plugin.
    WithRegistration,
    /// Only when a step starts it, after the kubelet registered the plugin
    /// (upstream's registrar and DRA service started apart).
    Later,
}

/// The directory of a plugin's DRA socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraSocketDir {
    /// `<kubelet>/plugins/<driver>/dra.sock`, the kubelet plugin helper's
    /// default.
    Plugin,
    /// `<kubelet>/plugins_registry/<driver>-common.sock`, beside the
    /// registration socket, where the kubelet's plugin watcher also finds it
    /// (and fails to register it): upstream's "1 common socket".
    Registry,
}

impl Default for DriverOptions {
    fn default() -> Self {
        Self {
            name_suffix: String::new(),
            instance_suffix: String::new(),
            resources: Resources::None,
            node_apis: vec![NodeApi::V1, NodeApi::V1beta1],
            health_apis: HealthApi::ALL.to_vec(),
            with_kubelet: true,
            rolling_update: false,
            dra_service: DraServiceStart::WithRegistration,
            dra_socket: DraSocketDir::Plugin,
            expect_slice_removal: true,
            device_metadata: Vec::new(),
            skip_node_operations: Vec::new(),
            faults: Default::default(),
        }
    }
}
