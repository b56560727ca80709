//! The kubelet's DRA node service (`NodePrepareResources`,
//! `NodeUnprepareResources`) in every version it speaks, behind neutral
//! messages: a plugin implements [`NodeService`] once and serves any version
//! with [`add_node_service`]; a kubelet calls any version with [`NodeClient`].
use std::fmt;

use super::{method, service};

mod client;
mod messages;
mod server;
mod versions;

pub use client::NodeClient;
pub use messages::{ClaimRef, PrepareResponse, PrepareResult, PreparedDevice, UnprepareResponse};
pub use server::{NodeService, add_node_service};

/// `/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/...`, kubelet 1.34+.
pub mod v1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
}
/// `/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/...`, kubelet 1.32+.
pub mod v1beta1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
}
/// `/v1alpha3.Node/...`, kubelet 1.31-1.33.
pub mod v1alpha4 {
    tonic::include_proto!("v1alpha3");
}

/// A version of the kubelet's DRA node gRPC API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeApi {
    /// `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`, kubelet 1.34+.
    V1,
    /// `k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin`, kubelet 1.32+.
    V1beta1,
    /// `v1alpha3.Node`, kubelet 1.31-1.33.
    V1alpha4,
}

impl NodeApi {
    /// All APIs, newest first.
    pub const ALL: [NodeApi; 3] = [NodeApi::V1, NodeApi::V1beta1, NodeApi::V1alpha4];

    /// What `GetInfo` advertises for this API in `supported_versions`.
    pub fn registration_string(self) -> &'static str {
        match self {
            NodeApi::V1 => service::DRA_V1,
            NodeApi::V1beta1 => service::DRA_V1BETA1,
            NodeApi::V1alpha4 => service::DRA_V1ALPHA4,
        }
    }

    /// The API a `supported_versions` entry names; `None` for other
    /// services (health) and for legacy semantic versions.
    pub fn from_registration_string(entry: &str) -> Option<NodeApi> {
        NodeApi::ALL
            .into_iter()
            .find(|api| api.registration_string() == entry)
    }

    /// Full gRPC path of `NodePrepareResources` in this API.
    pub fn prepare_method(self) -> &'static str {
        match self {
            NodeApi::V1 => method::V1_PREPARE,
            NodeApi::V1beta1 => method::V1BETA1_PREPARE,
            NodeApi::V1alpha4 => method::V1ALPHA4_PREPARE,
        }
    }

    /// Full gRPC path of `NodeUnprepareResources` in this API.
    pub fn unprepare_method(self) -> &'static str {
        match self {
            NodeApi::V1 => method::V1_UNPREPARE,
            NodeApi::V1beta1 => method::V1BETA1_UNPREPARE,
            NodeApi::V1alpha4 => method::V1ALPHA4_UNPREPARE,
        }
    }
}

impl fmt::Display for NodeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeApi::V1 => "v1",
            NodeApi::V1beta1 => "v1beta1",
            NodeApi::V1alpha4 => "v1alpha4",
        })
    }
}

impl std::str::FromStr for NodeApi {
    type Err = UnknownNodeApi;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "v1" => Ok(NodeApi::V1),
            "v1beta1" => Ok(NodeApi::V1beta1),
            "v1alpha4" | "v1alpha3" => Ok(NodeApi::V1alpha4),
            other => Err(UnknownNodeApi(other.to_owned())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown DRA node API {0:?}: expected v1, v1beta1 or v1alpha4")]
pub struct UnknownNodeApi(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_api_names_round_trip() {
        for api in NodeApi::ALL {
            assert_eq!(api.to_string().parse::<NodeApi>().unwrap(), api);
            assert_eq!(
                NodeApi::from_registration_string(api.registration_string()),
                Some(api)
            );
        }
        assert!("v2".parse::<NodeApi>().is_err());
        assert_eq!(
            NodeApi::V1alpha4.prepare_method(),
            "/v1alpha3.Node/NodePrepareResources"
        );
        assert_eq!(NodeApi::from_registration_string("1.0.0"), None);
        assert_eq!(
            NodeApi::from_registration_string("v1.DRAResourceHealth"),
            None
        );
    }
}
