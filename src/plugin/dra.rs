//! The DRA node services (v1, v1beta1, v1alpha4) over one version-independent
//! core that behaves like upstream's test driver behind the kubeletplugin helper.
use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::{debug, info, warn};

use super::calls::CallNote;
use super::claims::{ClaimRef, ClaimSource, ClaimSourceError};
use super::driver_logic::{self, DriverLogicError};
use super::prepared::{ClaimId, Prepared, PreparedClaim, PreparedDevice};
use crate::node_files::{NodeFiles, NodeFilesError};
use crate::proto::dra::{v1 as pb_v1, v1alpha4 as pb_v1alpha4, v1beta1 as pb_v1beta1};

/// Failures that abort a whole prepare call, as the helper's claim lookup does.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("retrieve claim {claim}: {source}")]
    Lookup {
        claim: ClaimRef,
        #[source]
        source: ClaimSourceError,
    },
    #[error("retrieve claim {claim}: not found")]
    NotFound { claim: ClaimRef },
    #[error("claim {claim} got replaced: the API server has UID {found}")]
    Replaced { claim: ClaimRef, found: String },
    #[error("claim {claim} is not allocated")]
    NotAllocated { claim: ClaimRef },
}

/// Failures of one claim, reported in its response entry.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(transparent)]
    Config(#[from] DriverLogicError),
    #[error("failed to write CDI file: {0}")]
    WriteCdi(#[source] NodeFilesError),
    #[error("error removing CDI file: {0}")]
    RemoveCdi(#[source] NodeFilesError),
}

/// One node's test-driver logic, shared by all API versions.
pub(crate) struct NodeDriver {
    pub(crate) driver: String,
    pub(crate) node: String,
    pub(crate) claims: Arc<dyn ClaimSource>,
    pub(crate) cdi: Arc<dyn NodeFiles>,
    pub(crate) prepared: Prepared,
}

type PrepareResults = Vec<(String, Result<Vec<PreparedDevice>, String>)>;
type UnprepareResults = Vec<(String, Result<(), String>)>;

impl NodeDriver {
    async fn fetch(
        &self,
        claim: &ClaimRef,
    ) -> Result<k8s_openapi::api::resource::v1::ResourceClaim, PrepareError> {
        let found = self
            .claims
            .get_claim(&claim.namespace, &claim.name)
            .await
            .map_err(|source| PrepareError::Lookup {
                claim: claim.clone(),
                source,
            })?
            .ok_or_else(|| PrepareError::NotFound {
                claim: claim.clone(),
            })?;
        let uid = found.metadata.uid.as_deref().unwrap_or_default();
        if uid != claim.uid {
            return Err(PrepareError::Replaced {
                claim: claim.clone(),
                found: uid.to_owned(),
            });
        }
        let allocated = found
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .is_some();
        if !allocated {
            return Err(PrepareError::NotAllocated {
                claim: claim.clone(),
            });
        }
        Ok(found)
    }

    async fn prepare_one(
        &self,
        claim: &ClaimRef,
        object: &k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> Result<Vec<PreparedDevice>, ClaimError> {
        let id = ClaimId {
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        };
        if let Some(done) = self.prepared.get(&id) {
            debug!(driver = %self.driver, node = %self.node, %claim, "claim already prepared");
            return Ok(done.devices);
        }
        let plan = driver_logic::plan_claim(&self.driver, object)?;
        for file in &plan.cdi_files {
            self.cdi
                .create(&file.name, file.content.as_bytes())
                .await
                .map_err(ClaimError::WriteCdi)?;
        }
        info!(
            driver = %self.driver,
            node = %self.node,
            %claim,
            devices = plan.devices.len(),
            "claim prepared"
        );
        self.prepared.insert(
            id,
            PreparedClaim {
                namespace: claim.namespace.clone(),
                devices: plan.devices.clone(),
                cdi_files: plan.cdi_files.into_iter().map(|f| f.name).collect(),
            },
        );
        Ok(plan.devices)
    }

    /// One entry per distinct claim UID in the request.
    pub(crate) async fn prepare(
        &self,
        claims: Vec<ClaimRef>,
        note: Option<&CallNote>,
    ) -> Result<PrepareResults, PrepareError> {
        if let Some(note) = note {
            note.set_claims(claims.clone());
        }
        // Every claim is looked up before any is prepared: one bad claim fails
        // the whole call, as in the kubeletplugin helper.
        let mut objects = Vec::with_capacity(claims.len());
        for claim in &claims {
            match self.fetch(claim).await {
                Ok(object) => objects.push(object),
                Err(e) => {
                    warn!(driver = %self.driver, node = %self.node, error = %e, "prepare failed");
                    return Err(e);
                }
            }
        }
        let mut results: PrepareResults = Vec::with_capacity(claims.len());
        for (claim, object) in claims.iter().zip(&objects) {
            if results.iter().any(|(uid, _)| *uid == claim.uid) {
                continue;
            }
            let result = self.prepare_one(claim, object).await.map_err(|e| {
                warn!(driver = %self.driver, node = %self.node, %claim, error = %e, "claim not prepared");
                let message = e.to_string();
                if let Some(note) = note {
                    note.claim_error(&claim.uid, &message);
                }
                message
            });
            results.push((claim.uid.clone(), result));
        }
        Ok(results)
    }

    /// CDI files of a claim this instance did not prepare (e.g. before a plugin
    /// restart), read from the claim if it still exists. Best effort.
    async fn files_of_unknown(&self, claim: &ClaimRef) -> Vec<String> {
        match self.claims.get_claim(&claim.namespace, &claim.name).await {
            Ok(Some(object)) if object.metadata.uid.as_deref() == Some(claim.uid.as_str()) => {
                driver_logic::cdi_file_names(&self.driver, &object)
            }
            Ok(_) => Vec::new(),
            Err(e) => {
                debug!(driver = %self.driver, node = %self.node, %claim, error = %e,
                    "cannot look up unknown claim to clean its CDI files");
                Vec::new()
            }
        }
    }

    async fn unprepare_one(&self, claim: &ClaimRef) -> Result<(), ClaimError> {
        let id = ClaimId {
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        };
        let files = match self.prepared.get(&id) {
            Some(prepared) => prepared.cdi_files,
            None => self.files_of_unknown(claim).await,
        };
        for file in &files {
            self.cdi.remove(file).await.map_err(ClaimError::RemoveCdi)?;
        }
        if self.prepared.remove(&id).is_some() {
            info!(driver = %self.driver, node = %self.node, %claim, "claim unprepared");
        } else {
            debug!(driver = %self.driver, node = %self.node, %claim, "unprepare of unknown claim");
        }
        Ok(())
    }

    pub(crate) async fn unprepare(
        &self,
        claims: Vec<ClaimRef>,
        note: Option<&CallNote>,
    ) -> UnprepareResults {
        if let Some(note) = note {
            note.set_claims(claims.clone());
        }
        let mut results: UnprepareResults = Vec::with_capacity(claims.len());
        for claim in &claims {
            if results.iter().any(|(uid, _)| *uid == claim.uid) {
                continue;
            }
            let result = self.unprepare_one(claim).await.map_err(|e| {
                warn!(driver = %self.driver, node = %self.node, %claim, error = %e, "claim not unprepared");
                let message = e.to_string();
                if let Some(note) = note {
                    note.claim_error(&claim.uid, &message);
                }
                message
            });
            results.push((claim.uid.clone(), result));
        }
        results
    }
}

fn to_status(e: PrepareError) -> Status {
    // The helper returns plain Go errors, which gRPC sends as UNKNOWN.
    Status::unknown(e.to_string())
}

/// Serves one API version; the versions differ only in message types and in
/// whether devices carry `share_id`.
macro_rules! node_service {
    ($name:ident, $pb:ident, $server:ident :: $tr:ident, |$d:ident| $device:expr) => {
        #[derive(Clone)]
        pub(crate) struct $name(pub(crate) Arc<NodeDriver>);

        #[tonic::async_trait]
        impl $pb::$server::$tr for $name {
            async fn node_prepare_resources(
                &self,
                request: Request<$pb::NodePrepareResourcesRequest>,
            ) -> Result<Response<$pb::NodePrepareResourcesResponse>, Status> {
                let note = request.extensions().get::<CallNote>().cloned();
                let claims = request
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|c| ClaimRef {
                        namespace: c.namespace,
                        name: c.name,
                        uid: c.uid,
                    })
                    .collect();
                let results = self
                    .0
                    .prepare(claims, note.as_ref())
                    .await
                    .map_err(to_status)?;
                let claims = results
                    .into_iter()
                    .map(|(uid, result)| {
                        let entry = match result {
                            Ok(devices) => $pb::NodePrepareResourceResponse {
                                devices: devices.into_iter().map(|$d| $device).collect(),
                                error: String::new(),
                            },
                            Err(error) => $pb::NodePrepareResourceResponse {
                                devices: Vec::new(),
                                error,
                            },
                        };
                        (uid, entry)
                    })
                    .collect();
                Ok(Response::new($pb::NodePrepareResourcesResponse { claims }))
            }

            async fn node_unprepare_resources(
                &self,
                request: Request<$pb::NodeUnprepareResourcesRequest>,
            ) -> Result<Response<$pb::NodeUnprepareResourcesResponse>, Status> {
                let note = request.extensions().get::<CallNote>().cloned();
                let claims = request
                    .into_inner()
                    .claims
                    .into_iter()
                    .map(|c| ClaimRef {
                        namespace: c.namespace,
                        name: c.name,
                        uid: c.uid,
                    })
                    .collect();
                let claims = self
                    .0
                    .unprepare(claims, note.as_ref())
                    .await
                    .into_iter()
                    .map(|(uid, result)| {
                        let error = result.err().unwrap_or_default();
                        (uid, $pb::NodeUnprepareResourceResponse { error })
                    })
                    .collect();
                Ok(Response::new($pb::NodeUnprepareResourcesResponse {
                    claims,
                }))
            }
        }
    };
}

node_service!(V1Service, pb_v1, dra_plugin_server::DraPlugin, |d| {
    pb_v1::Device {
        request_names: d.request_names,
        pool_name: d.pool_name,
        device_name: d.device_name,
        cdi_device_ids: d.cdi_device_ids,
        share_id: d.share_id,
    }
});

node_service!(
    V1beta1Service,
    pb_v1beta1,
    dra_plugin_server::DraPlugin,
    |d| pb_v1beta1::Device {
        request_names: d.request_names,
        pool_name: d.pool_name,
        device_name: d.device_name,
        cdi_device_ids: d.cdi_device_ids,
    }
);

node_service!(V1alpha4Service, pb_v1alpha4, node_server::Node, |d| {
    pb_v1alpha4::Device {
        request_names: d.request_names,
        pool_name: d.pool_name,
        device_name: d.device_name,
        cdi_device_ids: d.cdi_device_ids,
    }
});
