//! The node's claim cache: which ResourceClaims pods on this node use, which
//! of them are prepared, and what the plugins returned for them.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OwnedMutexGuard;

use dra_e2e_proto::dra::{ClaimRef, PreparedDevice};

/// `(namespace, name)`: the kubelet keys its cache by name, which is what
/// makes a re-created claim with a new UID collide with the old one.
pub type ClaimKey = (String, String);

/// The node operations a claim's allocation lets the kubelet skip for one
/// driver: those every device of that driver in the claim skips
/// (`DeviceRequestAllocationResult.skipNodeOperations`, `*` counting as all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skips {
    pub prepare: bool,
    pub unprepare: bool,
}

impl Skips {
    pub fn any(self) -> bool {
        self.prepare || self.unprepare
    }
}

/// What the node knows about one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimInfo {
    pub claim: ClaimRef,
    /// Drivers of the claim's allocation results.
    pub drivers: BTreeSet<String>,
    /// Operations skipped per driver; drivers skipping none are absent.
    pub skips: BTreeMap<String, Skips>,
    /// UIDs of the pods on this node that use it.
    pub pods: BTreeSet<String>,
    pub prepared: bool,
    /// Devices by driver, once prepared; health in pod status is reported
    /// for these.
    pub devices: BTreeMap<String, Vec<PreparedDevice>>,
}

/// A claim prepared on a node, per driver, for the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedClaim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub driver: String,
    pub devices: Vec<PreparedDevice>,
    /// UIDs of the pods using it.
    pub pods: Vec<String>,
}

#[derive(Debug, Default)]
pub struct ClaimCache {
    infos: Mutex<HashMap<ClaimKey, ClaimInfo>>,
    /// Serialises prepare and unprepare per claim, so a claim shared by pods
    /// that start together is prepared once, while pods with distinct claims
    /// proceed in parallel.
    locks: Mutex<HashMap<ClaimKey, Arc<tokio::sync::Mutex<()>>>>,
}

/// Held while a pod prepares or unprepares its claims.
pub struct ClaimLocks {
    _guards: Vec<OwnedMutexGuard<()>>,
}

impl ClaimCache {
    pub fn infos(&self) -> MutexGuard<'_, HashMap<ClaimKey, ClaimInfo>> {
        self.infos.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the given claims, always in the same order so two pods sharing
    /// several claims cannot deadlock.
    pub async fn lock(&self, keys: impl IntoIterator<Item = ClaimKey>) -> ClaimLocks {
        let keys: BTreeSet<ClaimKey> = keys.into_iter().collect();
        let mutexes: Vec<_> = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            // Drop locks nobody holds or waits for, so the map stays small.
            locks.retain(|_, m| Arc::strong_count(m) > 1);
            keys.into_iter()
                .map(|k| locks.entry(k).or_default().clone())
                .collect()
        };
        let mut guards = Vec::with_capacity(mutexes.len());
        for m in mutexes {
            guards.push(m.lock_owned().await);
        }
        ClaimLocks { _guards: guards }
    }

    /// Claims that `pod_uid` references.
    pub fn claims_of_pod(&self, pod_uid: &str) -> Vec<ClaimKey> {
        let mut keys: Vec<_> = self
            .infos()
            .iter()
            .filter(|(_, i)| i.pods.contains(pod_uid))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Every pod UID some cached claim references.
    pub fn referencing_pods(&self) -> BTreeSet<String> {
        self.infos()
            .values()
            .flat_map(|i| i.pods.iter().cloned())
            .collect()
    }

    pub fn prepared_claims(&self) -> Vec<PreparedClaim> {
        let mut out: Vec<PreparedClaim> = self
            .infos()
            .values()
            .filter(|i| i.prepared)
            .flat_map(|i| {
                i.devices.iter().map(|(driver, devices)| PreparedClaim {
                    namespace: i.claim.namespace.clone(),
                    name: i.claim.name.clone(),
                    uid: i.claim.uid.clone(),
                    driver: driver.clone(),
                    devices: devices.clone(),
                    pods: i.pods.iter().cloned().collect(),
                })
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.namespace, &a.name, &a.driver).cmp(&(&b.namespace, &b.name, &b.driver))
        });
        out
    }
}

/// The CDI device IDs for a container's use of a claim: devices serving
/// `request`, or all devices when the container names no request. A device
/// without request names serves every request.
pub fn cdi_ids(info: &ClaimInfo, request: Option<&str>) -> Vec<String> {
    let mut ids = Vec::new();
    for devices in info.devices.values() {
        for d in devices {
            let serves = match request {
                None => true,
                Some(r) => d.request_names.is_empty() || d.request_names.iter().any(|n| n == r),
            };
            if serves {
                for id in &d.cdi_device_ids {
                    if !ids.contains(id) {
                        ids.push(id.clone());
                    }
                }
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(req: &[&str], id: &str) -> PreparedDevice {
        PreparedDevice {
            request_names: req.iter().map(|s| s.to_string()).collect(),
            pool_name: "p".into(),
            device_name: id.into(),
            cdi_device_ids: vec![id.into()],
            share_id: None,
        }
    }

    fn info() -> ClaimInfo {
        ClaimInfo {
            claim: ClaimRef {
                namespace: "ns".into(),
                name: "c".into(),
                uid: "u".into(),
            },
            drivers: ["a".to_string(), "b".to_string()].into(),
            skips: BTreeMap::new(),
            pods: BTreeSet::new(),
            prepared: true,
            devices: [
                (
                    "a".to_string(),
                    vec![dev(&["r1"], "a/x=1"), dev(&["r2"], "a/x=2")],
                ),
                ("b".to_string(), vec![dev(&[], "b/y=1")]),
            ]
            .into(),
        }
    }

    #[test]
    fn container_devices_by_request() {
        let i = info();
        assert_eq!(cdi_ids(&i, None), vec!["a/x=1", "a/x=2", "b/y=1"]);
        assert_eq!(cdi_ids(&i, Some("r2")), vec!["a/x=2", "b/y=1"]);
        assert_eq!(cdi_ids(&i, Some("other")), vec!["b/y=1"]);
    }

    #[tokio::test]
    async fn claim_locks_exclude_each_other_and_are_pruned() {
        let cache = Arc::new(ClaimCache::default());
        let k = |n: &str| ("ns".to_string(), n.to_string());
        let held = cache.lock([k("b"), k("a")]).await;
        let c2 = cache.clone();
        let waiter = tokio::spawn(async move {
            let _l = c2.lock([k("a")]).await;
        });
        // Disjoint claims do not wait.
        drop(cache.lock([k("c")]).await);
        assert!(!waiter.is_finished());
        drop(held);
        waiter.await.unwrap();
        drop(cache.lock([]).await);
        assert!(cache.locks.lock().unwrap().is_empty());
    }
}
