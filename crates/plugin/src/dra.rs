//! The DRA node service (served in every version through
//! [`dra_e2e_proto::dra`]) behaving like upstream's test driver behind the
//! kubeletplugin helper.
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::{Request, Status};
use tracing::{debug, info, warn};

use super::calls::CallNote;
use super::claims::{ClaimSource, ClaimSourceError};
use super::driver_logic::{self, DriverLogicError};
use super::fault::{Fault, Faults};
use super::metadata::{self, MetadataConfig};
use super::prepared::{ClaimId, Prepared, PreparedClaim};
use dra_e2e_conn::node_files::{NodeFiles, NodeFilesError};
use dra_e2e_proto::dra::{
    ClaimRef, NodeService, PrepareResponse, PreparedDevice, UnprepareResponse,
};

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
    #[error("failed to write device metadata file: {0}")]
    WriteMetadata(#[source] NodeFilesError),
    #[error("error removing device metadata file: {0}")]
    RemoveMetadata(#[source] NodeFilesError),
    /// What a driver with a planted fault says when it refuses a claim.
    #[error("device {pool}/{device} {why} (planted fault {fault})")]
    Planted {
        pool: String,
        device: String,
        why: &'static str,
        fault: &'static str,
    },
}

/// How long a driver with [`Fault::ServesLate`] fails calls after it
/// started: longer than a scenario takes from registration to its first
/// prepare.
const SERVES_LATE_FOR: Duration = Duration::from_secs(15);

/// One node's test-driver logic, shared by all API versions.
pub(crate) struct NodeDriver {
    pub(crate) driver: String,
    pub(crate) node: String,
    pub(crate) claims: Arc<dyn ClaimSource>,
    pub(crate) cdi: Arc<dyn NodeFiles>,
    pub(crate) prepared: Prepared,
    pub(crate) metadata: Option<MetadataConfig>,
    pub(crate) faults: Faults,
    pub(crate) started: Instant,
    /// Devices of claims unprepared so far (for [`Fault::DeviceBrokenAfterUse`]).
    pub(crate) used: Mutex<BTreeSet<(String, String)>>,
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
        shared_env: &[String],
    ) -> Result<Vec<PreparedDevice>, ClaimError> {
        let id = ClaimId {
            name: claim.name.clone(),
            uid: claim.uid.clone(),
        };
        // A claim prepared before is answered as before, but its CDI specs
        // are written again: after a reboot the kubelet asks again while
        // /var/run/cdi is empty, and a driver answering from memory alone
        // leaves the containers without their devices (kubernetes#141433).
        let done = self.prepared.get(&id);
        if done.is_none() {
            self.refuse_planted(object)?;
        }
        let mut plan = driver_logic::plan_claim(&self.driver, object)?;
        if let Some(m) = &self.metadata {
            // The data files exist before the specs that mount them.
            let extra = metadata::plan(
                &self.driver,
                &m.versions,
                &m.host_dir,
                object,
                &mut plan.devices,
            );
            for file in &extra.data_files {
                m.files
                    .create(&file.name, file.content.as_bytes())
                    .await
                    .map_err(ClaimError::WriteMetadata)?;
            }
            plan.cdi_files
                .extend(extra.spec_files.into_iter().map(|f| driver_logic::CdiFile {
                    name: f.name,
                    content: f.content,
                }));
        }
        for file in &mut plan.cdi_files {
            file.content = with_env(&file.content, shared_env);
        }
        for file in &plan.cdi_files {
            if self.faults.has(Fault::NoCdiSpec) {
                continue;
            }
            // A runtime reads only *.json and *.yaml specs.
            let name = if self.faults.has(Fault::CdiSpecElsewhere) {
                format!("{}.disabled", file.name)
            } else {
                file.name.clone()
            };
            self.cdi
                .create(&name, file.content.as_bytes())
                .await
                .map_err(ClaimError::WriteCdi)?;
        }
        if let Some(done) = done {
            debug!(driver = %self.driver, node = %self.node, %claim, "claim already prepared; its CDI specs written again");
            return Ok(done.devices);
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

    /// Claims a driver with a planted fault refuses.
    fn refuse_planted(
        &self,
        object: &k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> Result<(), ClaimError> {
        let results = object
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .unwrap_or_default();
        for r in results.iter().filter(|r| r.driver == self.driver) {
            let refuse = |why, fault: Fault| ClaimError::Planted {
                pool: r.pool.clone(),
                device: r.device.clone(),
                why,
                fault: fault.name(),
            };
            if self.faults.has(Fault::RefusesAdminAccess) && r.admin_access == Some(true) {
                return Err(refuse("is in use", Fault::RefusesAdminAccess));
            }
            if self.faults.has(Fault::DeviceBrokenAfterUse)
                && self
                    .used
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&(r.pool.clone(), r.device.clone()))
            {
                return Err(refuse(
                    "does not answer since its last use",
                    Fault::DeviceBrokenAfterUse,
                ));
            }
        }
        Ok(())
    }

    /// Whether a driver that serves late still refuses calls.
    fn not_serving_yet(&self) -> Option<Status> {
        (self.faults.has(Fault::ServesLate) && self.started.elapsed() < SERVES_LATE_FOR).then(
            || {
                Status::unavailable(format!(
                    "driver {} on {} is not serving yet (planted fault {})",
                    self.driver,
                    self.node,
                    Fault::ServesLate.name()
                ))
            },
        )
    }

    /// One entry per distinct claim UID in the request.
    pub(crate) async fn prepare_claims(
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
        // A driver that keeps one set of variables for all claims gives
        // each container every claim's.
        let shared_env: Vec<String> = if self.faults.has(Fault::SharedSpecEdits) {
            objects
                .iter()
                .flat_map(|o| driver_logic::marker_env(&self.driver, o))
                .collect()
        } else {
            Vec::new()
        };
        let mut results: PrepareResults = Vec::with_capacity(claims.len());
        for (claim, object) in claims.iter().zip(&objects) {
            if results.iter().any(|(uid, _)| *uid == claim.uid) {
                continue;
            }
            let result = self.prepare_one(claim, object, &shared_env).await.map_err(|e| {
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
                let mut files = driver_logic::cdi_file_names(&self.driver, &object);
                if self.metadata.is_some() {
                    files.extend(metadata::spec_file_names(&self.driver, &object));
                }
                files
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
        let known = self.prepared.get(&id);
        if self.faults.has(Fault::DeviceBrokenAfterUse)
            && let Some(k) = &known
        {
            let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            used.extend(
                k.devices
                    .iter()
                    .map(|d| (d.pool_name.clone(), d.device_name.clone())),
            );
        }
        let files = match known {
            Some(prepared) => prepared.cdi_files,
            None => self.files_of_unknown(claim).await,
        };
        let files = if self.faults.has(Fault::CdiSpecKept) {
            Vec::new()
        } else {
            files
        };
        for file in &files {
            self.cdi.remove(file).await.map_err(ClaimError::RemoveCdi)?;
            if let Some(m) = &self.metadata
                && let Some(data) = metadata::data_file_of_spec(&self.driver, file)
            {
                m.files
                    .remove(&data)
                    .await
                    .map_err(ClaimError::RemoveMetadata)?;
            }
        }
        if self.faults.has(Fault::CheckpointKeepsClaim) {
            debug!(driver = %self.driver, node = %self.node, %claim, "claim kept (planted fault)");
        } else if self.prepared.remove(&id).is_some() {
            info!(driver = %self.driver, node = %self.node, %claim, "claim unprepared");
        } else {
            debug!(driver = %self.driver, node = %self.node, %claim, "unprepare of unknown claim");
        }
        Ok(())
    }

    pub(crate) async fn unprepare_claims(
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

/// A CDI spec with `env` added to every device's edits (as it is when
/// `env` is empty or the spec is not this driver's JSON).
fn with_env(spec: &str, env: &[String]) -> String {
    if env.is_empty() {
        return spec.to_owned();
    }
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(spec) else {
        return spec.to_owned();
    };
    for device in value["devices"].as_array_mut().into_iter().flatten() {
        if let Some(list) = device["containerEdits"]["env"].as_array_mut() {
            for e in env {
                let e = serde_json::Value::String(e.clone());
                if !list.contains(&e) {
                    list.push(e);
                }
            }
        }
    }
    value.to_string()
}

fn to_status(e: PrepareError) -> Status {
    // The helper returns plain Go errors, which gRPC sends as UNKNOWN.
    Status::unknown(e.to_string())
}

/// Every version of the service lands here; the note the calls layer attached
/// to the call takes the claims and per-claim errors into the call record.
#[tonic::async_trait]
impl NodeService for NodeDriver {
    async fn prepare(&self, request: Request<Vec<ClaimRef>>) -> Result<PrepareResponse, Status> {
        if let Some(status) = self.not_serving_yet() {
            return Err(status);
        }
        if let Some(message) = self.faults.failed_call(true) {
            return Err(Status::unknown(message));
        }
        let note = request.extensions().get::<CallNote>().cloned();
        let mut results = self
            .prepare_claims(request.into_inner(), note.as_ref())
            .await
            .map_err(to_status)?;
        if !self.faults.is_empty() {
            self.faults.alter_prepare(&mut results);
            for (uid, result) in &results {
                if let Ok(devices) = result {
                    self.prepared.answer(uid, devices.clone());
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|(uid, result)| (uid, result.into()))
            .collect())
    }

    async fn unprepare(
        &self,
        request: Request<Vec<ClaimRef>>,
    ) -> Result<UnprepareResponse, Status> {
        if let Some(status) = self.not_serving_yet() {
            return Err(status);
        }
        if let Some(message) = self.faults.failed_call(false) {
            return Err(Status::unknown(message));
        }
        let note = request.extensions().get::<CallNote>().cloned();
        let results = self
            .unprepare_claims(request.into_inner(), note.as_ref())
            .await;
        Ok(results
            .into_iter()
            .map(|(uid, result)| (uid, result.err().unwrap_or_default()))
            .collect())
    }
}
