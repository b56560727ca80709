//! Opening a plugin's health stream in the version the node chose.
use futures::StreamExt as _;
use tonic::Status;
use tonic::transport::Channel;

use super::messages::{HealthReport, HealthReports};
use super::{HealthApi, v1, v1alpha1};

/// Calls `NodeWatchResources` through `api`. The call has no deadline: the
/// stream is meant to last.
pub async fn watch_health(api: HealthApi, channel: Channel) -> Result<HealthReports, Status> {
    Ok(match api {
        HealthApi::V1alpha1 => {
            v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(channel)
                .node_watch_resources(v1alpha1::NodeWatchResourcesRequest {})
                .await?
                .into_inner()
                .map(|r| r.map(HealthReport::from))
                .boxed()
        }
        HealthApi::V1 => v1::dra_resource_health_client::DraResourceHealthClient::new(channel)
            .node_watch_resources(v1::NodeWatchResourcesRequest {})
            .await?
            .into_inner()
            .map(|r| r.map(HealthReport::from))
            .boxed(),
    })
}
