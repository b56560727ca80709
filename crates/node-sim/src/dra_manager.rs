//! Preparing and unpreparing a pod's ResourceClaims through the plugins, with
//! the kubelet DRA manager's checks and batching.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::claims::{ClaimCache, ClaimInfo, ClaimKey, PreparedClaim, Skips, cdi_ids};
use super::dra_api::{CallError, DraClient, ResponseError, validate_prepare, validate_unprepare};
use super::journal::{Journal, NodeEventKind};
use super::plugins::PluginStore;
use super::pod_groups;
use dra_e2e_proto::dra::{ClaimRef, PreparedDevice};

/// Why preparing or unpreparing failed; worded as the kubelet words it, the
/// message becomes the pod event.
#[derive(Debug, thiserror::Error)]
pub enum DraError {
    /// `claim` is the claim's name.
    #[error("fetch ResourceClaim {claim}: {source}")]
    GetClaim {
        claim: String,
        #[source]
        source: kube::Error,
    },
    /// `claim` and `pod` are `<namespace>/<name>`.
    #[error("ResourceClaim {claim} was not created for pod {pod} (pod is not owner)")]
    NotOwner { claim: String, pod: String },
    #[error(
        "ResourceClaim {claim} was not created for Pod {pod} (neither Pod nor PodGroup {group} is the owner)"
    )]
    NotOwnerNorGroup {
        claim: String,
        pod: String,
        group: String,
    },
    #[error("pod {pod} ({pod_uid}) is not allowed to use ResourceClaim {claim} ({claim_uid})")]
    NotReserved {
        pod: String,
        pod_uid: String,
        claim: String,
        claim_uid: String,
    },
    #[error("ResourceClaim {claim} is not allocated")]
    NotAllocated { claim: String },
    #[error(
        "old ResourceClaim with same name {claim} and different UID {old_uid} still exists (previous pod force-deleted?!)"
    )]
    OldClaimExists { claim: String, old_uid: String },
    #[error("DRA driver {driver} is not registered")]
    DriverNotRegistered { driver: String },
    /// The allocation asks to skip a node operation the kubelet's gate
    /// does not allow skipping.
    #[error("ResourceClaim {claim}: DRAOptionalNodeOperations feature gate is disabled on kubelet")]
    SkipNotEnabled { claim: String },
    /// The driver's name is not part of the kubelet's message.
    #[error("{source}")]
    Call {
        driver: String,
        #[source]
        source: CallError,
    },
    #[error("{source}")]
    Response {
        driver: String,
        #[source]
        source: ResponseError,
    },
}

impl DraError {
    fn call(driver: &str) -> impl FnOnce(CallError) -> DraError + '_ {
        move |source| DraError::Call {
            driver: driver.to_owned(),
            source,
        }
    }

    fn response(driver: &str) -> impl FnOnce(ResponseError) -> DraError + '_ {
        move |source| DraError::Response {
            driver: driver.to_owned(),
            source,
        }
    }
}

/// Whether a pod's claims are ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepareOutcome {
    Prepared,
    /// Not an error: something the pod needs is not known yet.
    Waiting(String),
}

/// A pod claim resolved to a ResourceClaim name.
#[derive(Debug, Clone)]
struct PodClaim {
    name: String,
    /// Generated from a template, so it must be owned by the pod.
    from_template: bool,
}

/// A claim that passed the kubelet's checks, with the drivers it uses.
#[derive(Debug)]
struct CheckedClaim {
    claim: ClaimRef,
    drivers: BTreeSet<String>,
    skips: BTreeMap<String, Skips>,
}

/// The operations of each driver that all of its devices in `results` skip,
/// as the kubelet aggregates them; unknown operation names are ignored.
fn skipped_operations(results: &[DeviceRequestAllocationResult]) -> BTreeMap<String, Skips> {
    let mut devices: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for r in results {
        let (total, prepare, unprepare) = devices.entry(r.driver.as_str()).or_default();
        *total += 1;
        let ops = r.skip_node_operations.as_deref().unwrap_or_default();
        let all = ops.iter().any(|o| o == "*");
        if all || ops.iter().any(|o| o == "NodePrepareResources") {
            *prepare += 1;
        }
        if all || ops.iter().any(|o| o == "NodeUnprepareResources") {
            *unprepare += 1;
        }
    }
    devices
        .into_iter()
        .map(|(driver, (total, prepare, unprepare))| {
            let skips = Skips {
                prepare: prepare == total,
                unprepare: unprepare == total,
            };
            (driver.to_owned(), skips)
        })
        .filter(|(_, skips)| skips.any())
        .collect()
}

/// The DRA part of one node.
pub struct DraManager {
    client: kube::Client,
    plugins: Arc<PluginStore>,
    cache: ClaimCache,
    journal: Journal,
    call_timeout: Duration,
    /// See [`super::SimNodeConfig::pod_group_claims`].
    pod_group_claims: bool,
    optional_node_operations: bool,
}

fn pod_name(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

impl DraManager {
    pub fn new(
        client: kube::Client,
        plugins: Arc<PluginStore>,
        journal: Journal,
        call_timeout: Duration,
    ) -> Self {
        Self {
            client,
            plugins,
            cache: ClaimCache::default(),
            journal,
            call_timeout,
            pod_group_claims: false,
            optional_node_operations: false,
        }
    }

    pub fn with_pod_group_claims(mut self, on: bool) -> Self {
        self.pod_group_claims = on;
        self
    }

    /// Whether the `DRAOptionalNodeOperations` gate is on for this kubelet.
    pub fn with_optional_node_operations(mut self, enabled: bool) -> Self {
        self.optional_node_operations = enabled;
        self
    }

    /// The ResourceClaims `pod` uses, by pod claim name; `Err` names a pod
    /// claim whose generated claim is not known yet. Claims that are not
    /// needed (`resourceClaimName` unset in the status) are left out.
    fn resolve(pod: &Pod) -> Result<BTreeMap<String, PodClaim>, String> {
        let mut out = BTreeMap::new();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_deref())
            .unwrap_or_default();
        for pc in pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_deref())
            .unwrap_or_default()
        {
            if let Some(name) = &pc.resource_claim_name {
                out.insert(
                    pc.name.clone(),
                    PodClaim {
                        name: name.clone(),
                        from_template: false,
                    },
                );
            } else if pc.resource_claim_template_name.is_some() {
                match statuses.iter().find(|s| s.name == pc.name) {
                    Some(s) => {
                        if let Some(name) = &s.resource_claim_name {
                            out.insert(
                                pc.name.clone(),
                                PodClaim {
                                    name: name.clone(),
                                    from_template: true,
                                },
                            );
                        }
                    }
                    None => return Err(pc.name.clone()),
                }
            }
        }
        Ok(out)
    }

    /// The implicit claim for extended resources, if the scheduler made one.
    fn extended_claim(pod: &Pod) -> Option<String> {
        pod.status
            .as_ref()?
            .extended_resource_claim_status
            .as_ref()
            .map(|s| s.resource_claim_name.clone())
            .filter(|n| !n.is_empty())
    }

    /// The claims `pod` needs on this node, by pod claim name, with the
    /// implicit claim for extended resources under the empty name; `Err`
    /// says what is not created yet.
    fn claims_to_prepare(pod: &Pod) -> Result<BTreeMap<String, PodClaim>, String> {
        let mut claims = Self::resolve(pod)
            .map_err(|pc| format!("ResourceClaim for pod claim {pc} not created yet"))?;
        if let Some(name) = Self::extended_claim(pod) {
            claims.insert(
                String::new(),
                PodClaim {
                    name,
                    from_template: true,
                },
            );
        }
        Ok(claims)
    }

    /// Prepares all claims of `pod` that are not prepared on this node yet:
    /// one `NodePrepareResources` per driver with all of them.
    pub async fn prepare_pod(&self, pod: &Pod) -> Result<PrepareOutcome, DraError> {
        let claims = match Self::claims_to_prepare(pod) {
            Ok(claims) => claims,
            Err(why) => return Ok(PrepareOutcome::Waiting(why)),
        };
        if claims.is_empty() {
            return Ok(PrepareOutcome::Prepared);
        }
        // Nothing in the cache changes until all claims pass.
        let mut checked = Vec::with_capacity(claims.len());
        for pc in claims.values() {
            checked.push(self.check_claim(pod, pc).await?);
        }
        let _locks = self
            .cache
            .lock(
                checked
                    .iter()
                    .map(|c| (c.claim.namespace.clone(), c.claim.name.clone())),
            )
            .await;
        let batches = self.reference_claims(&pod.uid().unwrap_or_default(), &checked)?;
        let mut devices: HashMap<String, BTreeMap<String, Vec<PreparedDevice>>> = HashMap::new();
        for (driver, batch) in &batches {
            for (uid, devs) in self.prepare_batch(driver, batch).await? {
                devices.entry(uid).or_default().insert(driver.clone(), devs);
            }
        }
        self.store_devices(&checked, devices);
        let pname = pod_name(pod);
        for (driver, batch) in batches {
            let names: Vec<String> = batch.iter().map(|c| c.to_string()).collect();
            info!(pod = %pname, driver, claims = ?names, "claims prepared");
            self.journal.record(NodeEventKind::Prepared {
                pod: pname.clone(),
                driver,
                claims: names,
            });
        }
        Ok(PrepareOutcome::Prepared)
    }

    /// Fetches one of `pod`'s claims and checks it as the kubelet does:
    /// owned by the pod if generated for it, reserved for it, allocated, any
    /// skipped node operation allowed by the gate, and every driver whose
    /// prepare is not skipped registered here.
    async fn check_claim(&self, pod: &Pod, pc: &PodClaim) -> Result<CheckedClaim, DraError> {
        let ns = pod.namespace().unwrap_or_default();
        let pod_uid = pod.uid().unwrap_or_default();
        let cname = format!("{ns}/{}", pc.name);
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        let claim = api
            .get(&pc.name)
            .await
            .map_err(|source| DraError::GetClaim {
                claim: pc.name.clone(),
                source,
            })?;
        if pc.from_template
            && !claim
                .owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == pod_uid)
        {
            match pod_groups::group_name(pod).filter(|_| self.pod_group_claims) {
                None => {
                    return Err(DraError::NotOwner {
                        claim: cname,
                        pod: pod_name(pod),
                    });
                }
                Some(group) if !pod_groups::owned_by_group(pod, &claim) => {
                    return Err(DraError::NotOwnerNorGroup {
                        claim: cname,
                        pod: pod_name(pod),
                        group: group.to_owned(),
                    });
                }
                Some(_) => {}
            }
        }
        let status = claim.status.as_ref();
        let reserved = status
            .and_then(|s| s.reserved_for.as_deref())
            .unwrap_or_default()
            .iter()
            .any(|r| r.uid == pod_uid)
            || (self.pod_group_claims && pod_groups::reserved_for_group(pod, &claim));
        if !reserved {
            return Err(DraError::NotReserved {
                pod: pod.name_any(),
                pod_uid,
                claim: pc.name.clone(),
                claim_uid: claim.uid().unwrap_or_default(),
            });
        }
        let Some(alloc) = status.and_then(|s| s.allocation.as_ref()) else {
            return Err(DraError::NotAllocated { claim: cname });
        };
        let results = alloc
            .devices
            .as_ref()
            .and_then(|d| d.results.as_deref())
            .unwrap_or_default();
        let drivers: BTreeSet<String> = results.iter().map(|r| r.driver.clone()).collect();
        let skips = skipped_operations(results);
        if !skips.is_empty() && !self.optional_node_operations {
            return Err(DraError::SkipNotEnabled {
                claim: pc.name.clone(),
            });
        }
        // A driver whose prepare is skipped needs no plugin on the node.
        if let Some(d) = drivers
            .iter()
            .find(|d| !skips.get(*d).is_some_and(|s| s.prepare) && !self.plugins.is_registered(d))
        {
            return Err(DraError::DriverNotRegistered { driver: d.clone() });
        }
        Ok(CheckedClaim {
            claim: ClaimRef {
                namespace: ns,
                name: pc.name.clone(),
                uid: claim.uid().unwrap_or_default(),
            },
            drivers,
            skips,
        })
    }

    /// References the claims for `pod_uid` in the cache (so unprepare
    /// happens even if prepare never succeeds) and batches the unprepared
    /// ones per driver. Fails, changing nothing more, on a claim the cache
    /// knows with another UID.
    fn reference_claims(
        &self,
        pod_uid: &str,
        checked: &[CheckedClaim],
    ) -> Result<BTreeMap<String, Vec<ClaimRef>>, DraError> {
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        let mut infos = self.cache.infos();
        for CheckedClaim {
            claim,
            drivers,
            skips,
        } in checked
        {
            let key = (claim.namespace.clone(), claim.name.clone());
            let info = infos.entry(key).or_insert_with(|| ClaimInfo {
                claim: claim.clone(),
                drivers: drivers.clone(),
                skips: skips.clone(),
                pods: BTreeSet::new(),
                prepared: false,
                devices: BTreeMap::new(),
            });
            if info.claim.uid != claim.uid {
                return Err(DraError::OldClaimExists {
                    claim: claim.name.clone(),
                    old_uid: info.claim.uid.clone(),
                });
            }
            info.pods.insert(pod_uid.to_owned());
            if !info.prepared {
                for d in &info.drivers {
                    if info.skips.get(d).is_some_and(|s| s.prepare) {
                        debug!(driver = %d, claim = %claim, "NodePrepareResources skipped");
                        continue;
                    }
                    batches.entry(d.clone()).or_default().push(claim.clone());
                }
            }
        }
        Ok(batches)
    }

    /// One `NodePrepareResources` to `driver`, checked; the devices by
    /// claim UID.
    async fn prepare_batch(
        &self,
        driver: &str,
        batch: &[ClaimRef],
    ) -> Result<HashMap<String, Vec<PreparedDevice>>, DraError> {
        let client = self.client(driver)?;
        debug!(
            driver,
            method = client.api().prepare_method(),
            claims = batch.len(),
            "calling NodePrepareResources"
        );
        let response = client
            .prepare(batch, self.call_timeout)
            .await
            .map_err(DraError::call(driver))?;
        validate_prepare(batch, response).map_err(DraError::response(driver))
    }

    /// Marks the checked claims prepared with the devices the drivers
    /// returned (by claim UID, then driver); claims already prepared keep
    /// theirs.
    fn store_devices(
        &self,
        checked: &[CheckedClaim],
        mut devices: HashMap<String, BTreeMap<String, Vec<PreparedDevice>>>,
    ) {
        let mut infos = self.cache.infos();
        for CheckedClaim { claim, .. } in checked {
            let key = (claim.namespace.clone(), claim.name.clone());
            if let Some(info) = infos.get_mut(&key)
                && !info.prepared
            {
                info.devices = devices.remove(&claim.uid).unwrap_or_default();
                info.prepared = true;
            }
        }
    }

    /// Drops `pod_uid`'s references and unprepares the claims no other pod
    /// on this node uses, one `NodeUnprepareResources` per driver. On error
    /// the references stay, so a retry repeats the calls.
    pub async fn unprepare_pod(&self, pod_uid: &str) -> Result<(), DraError> {
        let keys = self.cache.claims_of_pod(pod_uid);
        if keys.is_empty() {
            return Ok(());
        }
        let _locks = self.cache.lock(keys.iter().cloned()).await;
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        let mut last_users: Vec<ClaimKey> = Vec::new();
        {
            let mut infos = self.cache.infos();
            for key in &keys {
                let Some(info) = infos.get_mut(key) else {
                    continue;
                };
                if !info.pods.contains(pod_uid) {
                    continue;
                }
                if info.pods.len() > 1 {
                    info.pods.remove(pod_uid);
                    continue;
                }
                last_users.push(key.clone());
                for d in &info.drivers {
                    if info.skips.get(d).is_some_and(|s| s.unprepare) {
                        debug!(driver = %d, claim = %info.claim, "NodeUnprepareResources skipped");
                        continue;
                    }
                    batches
                        .entry(d.clone())
                        .or_default()
                        .push(info.claim.clone());
                }
            }
        }
        for (driver, batch) in &batches {
            let result = self.unprepare_batch(driver, batch).await;
            if let Err(e) = result {
                self.journal.record(NodeEventKind::UnprepareFailed {
                    error: e.to_string(),
                });
                return Err(e);
            }
            let names: Vec<String> = batch.iter().map(|c| c.to_string()).collect();
            info!(driver, claims = ?names, "claims unprepared");
            self.journal.record(NodeEventKind::Unprepared {
                driver: driver.clone(),
                claims: names,
            });
        }
        let mut infos = self.cache.infos();
        for key in last_users {
            infos.remove(&key);
        }
        Ok(())
    }

    /// The client calls to `driver` go through.
    fn client(&self, driver: &str) -> Result<DraClient, DraError> {
        self.plugins
            .client(driver)
            .ok_or_else(|| DraError::DriverNotRegistered {
                driver: driver.to_owned(),
            })
    }

    /// One `NodeUnprepareResources` to `driver`, checked.
    async fn unprepare_batch(&self, driver: &str, batch: &[ClaimRef]) -> Result<(), DraError> {
        let client = self.client(driver)?;
        debug!(
            driver,
            method = client.api().unprepare_method(),
            claims = batch.len(),
            "calling NodeUnprepareResources"
        );
        let response = client
            .unprepare(batch, self.call_timeout)
            .await
            .map_err(DraError::call(driver))?;
        validate_unprepare(batch, response).map_err(DraError::response(driver))
    }

    /// The CDI device IDs the runtime would inject into `container`: for each
    /// entry of `container.resources.claims`, the devices serving its request
    /// (all devices when it names none); for extended resources, the devices
    /// of the requests the scheduler mapped to this container.
    pub fn container_cdi_ids(&self, pod: &Pod, container: &Container) -> Vec<String> {
        let ns = pod.namespace().unwrap_or_default();
        let resolved = Self::resolve(pod).unwrap_or_default();
        let infos = self.cache.infos();
        let mut ids: Vec<String> = Vec::new();
        let mut push = |new: Vec<String>| {
            for id in new {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        };
        for use_ in container
            .resources
            .as_ref()
            .and_then(|r| r.claims.as_deref())
            .unwrap_or_default()
        {
            let Some(pc) = resolved.get(&use_.name) else {
                continue;
            };
            if let Some(info) = infos.get(&(ns.clone(), pc.name.clone())) {
                push(cdi_ids(
                    info,
                    use_.request.as_deref().filter(|r| !r.is_empty()),
                ));
            }
        }
        if let Some(ext) = pod
            .status
            .as_ref()
            .and_then(|s| s.extended_resource_claim_status.as_ref())
            && let Some(info) = infos.get(&(ns.clone(), ext.resource_claim_name.clone()))
        {
            for m in &ext.request_mappings {
                if m.container_name == container.name {
                    push(cdi_ids(info, Some(&m.request_name)));
                }
            }
        }
        ids
    }

    /// The devices prepared for `pod`'s claims on this node, by pod claim
    /// name, each with its driver (drivers in name order).
    pub fn claim_devices(&self, pod: &Pod) -> BTreeMap<String, Vec<(String, PreparedDevice)>> {
        let ns = pod.namespace().unwrap_or_default();
        let pod_uid = pod.uid().unwrap_or_default();
        // A pod claim whose claim is not created yet is not prepared either.
        let resolved = Self::resolve(pod).unwrap_or_default();
        let infos = self.cache.infos();
        resolved
            .into_iter()
            .filter_map(|(pod_claim, pc)| {
                let info = infos.get(&(ns.clone(), pc.name))?;
                (info.prepared && info.pods.contains(&pod_uid)).then(|| {
                    let devices = info
                        .devices
                        .iter()
                        .flat_map(|(driver, ds)| ds.iter().map(|d| (driver.clone(), d.clone())))
                        .collect();
                    (pod_claim, devices)
                })
            })
            .collect()
    }

    /// Pod UIDs that still hold claim references.
    pub fn pods_with_claims(&self) -> BTreeSet<String> {
        self.cache.referencing_pods()
    }

    pub fn prepared_claims(&self) -> Vec<PreparedClaim> {
        self.cache.prepared_claims()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(driver: &str, ops: &[&str]) -> DeviceRequestAllocationResult {
        DeviceRequestAllocationResult {
            driver: driver.into(),
            skip_node_operations: (!ops.is_empty())
                .then(|| ops.iter().map(|o| o.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn an_operation_is_skipped_only_when_every_device_of_the_driver_skips_it() {
        let skips = skipped_operations(&[
            result("a", &["*"]),
            result("a", &["NodeUnprepareResources"]),
            result("b", &["NodeUnprepareResources", "NodePrepareResources"]),
            result("c", &["*"]),
            result("c", &[]),
            result("d", &["SomethingNew"]),
        ]);
        let only_unprepare = Skips {
            prepare: false,
            unprepare: true,
        };
        let both = Skips {
            prepare: true,
            unprepare: true,
        };
        assert_eq!(skips.get("a"), Some(&only_unprepare));
        assert_eq!(skips.get("b"), Some(&both));
        assert_eq!(skips.get("c"), None);
        assert_eq!(skips.get("d"), None);
    }
}
