//! Serving one neutral implementation of the DRA node service in any version.
use std::sync::Arc;

use tonic::service::RoutesBuilder;
use tonic::{Request, Response, Status};

use super::messages::{ClaimRef, PrepareResponse, UnprepareResponse};
use super::{NodeApi, v1, v1alpha4, v1beta1};

/// The DRA node service as a plugin implements it, whatever version the
/// kubelet calls. Requests keep the call's metadata and extensions.
#[tonic::async_trait]
pub trait NodeService: Send + Sync + 'static {
    async fn prepare(&self, request: Request<Vec<ClaimRef>>) -> Result<PrepareResponse, Status>;
    async fn unprepare(&self, request: Request<Vec<ClaimRef>>)
    -> Result<UnprepareResponse, Status>;
}

/// Adds `service` to `routes` as version `api` of the DRA node service.
pub fn add_node_service<S: NodeService>(routes: &mut RoutesBuilder, api: NodeApi, service: Arc<S>) {
    let served = Versioned(service);
    match api {
        NodeApi::V1 => routes.add_service(v1::dra_plugin_server::DraPluginServer::new(served)),
        NodeApi::V1beta1 => {
            routes.add_service(v1beta1::dra_plugin_server::DraPluginServer::new(served))
        }
        NodeApi::V1alpha4 => routes.add_service(v1alpha4::node_server::NodeServer::new(served)),
    };
}

/// A neutral service behind one version's generated server trait.
struct Versioned<S>(Arc<S>);

async fn prepare<S, Req, Resp>(service: &S, request: Request<Req>) -> Result<Response<Resp>, Status>
where
    S: NodeService,
    Req: Into<Vec<ClaimRef>>,
    Resp: From<PrepareResponse>,
{
    let response = service.prepare(request.map(Into::into)).await?;
    Ok(Response::new(response.into()))
}

async fn unprepare<S, Req, Resp>(
    service: &S,
    request: Request<Req>,
) -> Result<Response<Resp>, Status>
where
    S: NodeService,
    Req: Into<Vec<ClaimRef>>,
    Resp: From<UnprepareResponse>,
{
    let response = service.unprepare(request.map(Into::into)).await?;
    Ok(Response::new(response.into()))
}

#[tonic::async_trait]
impl<S: NodeService> v1::dra_plugin_server::DraPlugin for Versioned<S> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        prepare(&*self.0, request).await
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        unprepare(&*self.0, request).await
    }
}

#[tonic::async_trait]
impl<S: NodeService> v1beta1::dra_plugin_server::DraPlugin for Versioned<S> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        prepare(&*self.0, request).await
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        unprepare(&*self.0, request).await
    }
}

#[tonic::async_trait]
impl<S: NodeService> v1alpha4::node_server::Node for Versioned<S> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1alpha4::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1alpha4::NodePrepareResourcesResponse>, Status> {
        prepare(&*self.0, request).await
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1alpha4::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1alpha4::NodeUnprepareResourcesResponse>, Status> {
        unprepare(&*self.0, request).await
    }
}
