//! The kubelet plugin gRPC APIs: the code `build.rs` generates from `proto/`,
//! and one version-neutral layer over the DRA and health services.
//!
//! The kubelet speaks several versions of the same two services. Everything
//! above this module (the plugin servers, the simulated kubelet's client, the
//! tests) works with the neutral messages of [`dra`] and [`health`] and names
//! a version with [`dra::NodeApi`] or [`health::HealthApi`]; only this module
//! knows which generated type belongs to which version.
//!
//! Generated module names follow the API versions users know
//! (`dra::v1alpha4`), not the historical proto package names (`v1alpha3`).

pub mod dra;
pub mod health;

/// Plugin registration (`/pluginregistration.Registration/...`).
pub mod pluginregistration {
    tonic::include_proto!("pluginregistration");
}

/// Registration strings advertised in `PluginInfo.supported_versions`. They
/// differ from the gRPC service names (except for health).
pub mod service {
    pub const DRA_V1: &str = "v1.DRAPlugin";
    pub const DRA_V1BETA1: &str = "v1beta1.DRAPlugin";
    pub const DRA_V1ALPHA4: &str = "v1alpha3.NodeService";
    pub const HEALTH_V1ALPHA1: &str = "v1alpha1.DRAResourceHealth";
    pub const HEALTH_V1: &str = "v1.DRAResourceHealth";
    /// `PluginInfo.type` of a DRA plugin.
    pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";
}

/// Full gRPC method paths, the keys of call counting and failure injection.
pub mod method {
    pub const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";
    pub const NOTIFY_REGISTRATION_STATUS: &str =
        "/pluginregistration.Registration/NotifyRegistrationStatus";
    pub const V1_PREPARE: &str = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources";
    pub const V1_UNPREPARE: &str =
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources";
    pub const V1BETA1_PREPARE: &str =
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources";
    pub const V1BETA1_UNPREPARE: &str =
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources";
    pub const V1ALPHA4_PREPARE: &str = "/v1alpha3.Node/NodePrepareResources";
    pub const V1ALPHA4_UNPREPARE: &str = "/v1alpha3.Node/NodeUnprepareResources";
    pub const HEALTH_V1ALPHA1_WATCH: &str = "/v1alpha1.DRAResourceHealth/NodeWatchResources";
    pub const HEALTH_V1_WATCH: &str = "/v1.DRAResourceHealth/NodeWatchResources";
}
