//! Serving one neutral health stream in either version.
use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use tonic::service::RoutesBuilder;
use tonic::{Request, Response, Status};

use super::messages::{HealthReport, HealthReports};
use super::{HealthApi, v1, v1alpha1};

/// The health service as a plugin implements it, whatever version the
/// kubelet opens.
pub trait HealthService: Send + Sync + 'static {
    /// The reports of one newly opened `NodeWatchResources` stream.
    fn watch(&self) -> HealthReports;
}

/// Adds `service` to `routes` as version `api` of the health service.
pub fn add_health_service<S: HealthService>(
    routes: &mut RoutesBuilder,
    api: HealthApi,
    service: Arc<S>,
) {
    let served = Versioned(service);
    match api {
        HealthApi::V1 => {
            routes.add_service(v1::dra_resource_health_server::DraResourceHealthServer::new(served))
        }
        HealthApi::V1alpha1 => routes.add_service(
            v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(served),
        ),
    };
}

/// A neutral service behind one version's generated server trait.
struct Versioned<S>(Arc<S>);

impl<S: HealthService> Versioned<S> {
    fn stream<M: From<HealthReport>>(&self) -> BoxStream<'static, Result<M, Status>> {
        self.0.watch().map(|r| r.map(M::from)).boxed()
    }
}

#[tonic::async_trait]
impl<S: HealthService> v1::dra_resource_health_server::DraResourceHealth for Versioned<S> {
    type NodeWatchResourcesStream =
        BoxStream<'static, Result<v1::NodeWatchResourcesResponse, Status>>;

    async fn node_watch_resources(
        &self,
        _: Request<v1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        Ok(Response::new(self.stream()))
    }
}

#[tonic::async_trait]
impl<S: HealthService> v1alpha1::dra_resource_health_server::DraResourceHealth for Versioned<S> {
    type NodeWatchResourcesStream =
        BoxStream<'static, Result<v1alpha1::NodeWatchResourcesResponse, Status>>;

    async fn node_watch_resources(
        &self,
        _: Request<v1alpha1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        Ok(Response::new(self.stream()))
    }
}
