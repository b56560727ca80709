//! Calling a plugin's DRA node service in the version it was registered with.
use tonic::Status;
use tonic::transport::Channel;

use super::messages::{ClaimRef, PrepareResponse, UnprepareResponse};
use super::{NodeApi, v1, v1alpha4, v1beta1};

/// One plugin's DRA node service in one version. Calls carry no deadline of
/// their own; the caller sets one.
#[derive(Debug, Clone)]
pub struct NodeClient {
    pub api: NodeApi,
    pub channel: Channel,
}

impl NodeClient {
    pub fn new(api: NodeApi, channel: Channel) -> Self {
        Self { api, channel }
    }

    /// `NodePrepareResources` with all `claims`.
    pub async fn prepare(&self, claims: &[ClaimRef]) -> Result<PrepareResponse, Status> {
        let channel = self.channel.clone();
        Ok(match self.api {
            NodeApi::V1 => v1::dra_plugin_client::DraPluginClient::new(channel)
                .node_prepare_resources(v1::NodePrepareResourcesRequest::from(claims))
                .await?
                .into_inner()
                .into(),
            NodeApi::V1beta1 => v1beta1::dra_plugin_client::DraPluginClient::new(channel)
                .node_prepare_resources(v1beta1::NodePrepareResourcesRequest::from(claims))
                .await?
                .into_inner()
                .into(),
            NodeApi::V1alpha4 => v1alpha4::node_client::NodeClient::new(channel)
                .node_prepare_resources(v1alpha4::NodePrepareResourcesRequest::from(claims))
                .await?
                .into_inner()
                .into(),
        })
    }

    /// `NodeUnprepareResources` with all `claims`.
    pub async fn unprepare(&self, claims: &[ClaimRef]) -> Result<UnprepareResponse, Status> {
        let channel = self.channel.clone();
        Ok(match self.api {
            NodeApi::V1 => v1::dra_plugin_client::DraPluginClient::new(channel)
                .node_unprepare_resources(v1::NodeUnprepareResourcesRequest::from(claims))
                .await?
                .into_inner()
                .into(),
            NodeApi::V1beta1 => v1beta1::dra_plugin_client::DraPluginClient::new(channel)
                .node_unprepare_resources(v1beta1::NodeUnprepareResourcesRequest::from(claims))
                .await?
                .into_inner()
                .into(),
            NodeApi::V1alpha4 => v1alpha4::node_client::NodeClient::new(channel)
                .node_unprepare_resources(v1alpha4::NodeUnprepareResourcesRequest::from(claims))
                .await?
                .into_inner()
                .into(),
        })
    }
}
