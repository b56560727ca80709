//! The claims a node's plugin has prepared and not yet unprepared.
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::watch::{Changes, WaitTimeout};
use dra_e2e_proto::dra::PreparedDevice;

/// Identity of a prepared claim, as upstream's driver keys it (the namespace is
/// random per test and the UID already unique).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimId {
    pub name: String,
    pub uid: String,
}

impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.uid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedClaim {
    pub namespace: String,
    pub devices: Vec<PreparedDevice>,
    /// CDI spec files written for the claim.
    pub cdi_files: Vec<String>,
}

#[derive(Debug, Default)]
struct Inner {
    claims: Mutex<BTreeMap<ClaimId, PreparedClaim>>,
    /// The devices last answered for each claim UID, kept after unprepare:
    /// what a check of the node (a CDI spec gone) looks for afterwards.
    answered: Mutex<BTreeMap<String, Vec<PreparedDevice>>>,
    changes: Changes,
}

/// Prepared claims of one node. Cheap to clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    inner: Arc<Inner>,
}

impl Prepared {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<ClaimId, PreparedClaim>> {
        self.inner
            .claims
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Prepared claims, sorted by name and UID.
    pub fn claims(&self) -> Vec<ClaimId> {
        self.lock().keys().cloned().collect()
    }

    pub fn get(&self, id: &ClaimId) -> Option<PreparedClaim> {
        self.lock().get(id).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(crate) fn insert(&self, id: ClaimId, claim: PreparedClaim) {
        self.answer(&id.uid, claim.devices.clone());
        self.lock().insert(id, claim);
        self.inner.changes.bump();
    }

    pub(crate) fn remove(&self, id: &ClaimId) -> Option<PreparedClaim> {
        let removed = self.lock().remove(id);
        self.inner.changes.bump();
        removed
    }

    /// Records what the kubelet was told for a claim: the devices of a
    /// prepared claim unless a planted fault answered others.
    pub(crate) fn answer(&self, uid: &str, devices: Vec<PreparedDevice>) {
        self.inner
            .answered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(uid.to_owned(), devices);
    }

    /// The devices last answered for claim `uid`, prepared or not since.
    pub fn answered(&self, uid: &str) -> Option<Vec<PreparedDevice>> {
        self.inner
            .answered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(uid)
            .cloned()
    }

    fn describe(&self) -> String {
        let claims = self.claims();
        if claims.is_empty() {
            return "no prepared claims".to_owned();
        }
        let names: Vec<String> = claims.iter().map(ToString::to_string).collect();
        format!("prepared: {}", names.join(", "))
    }

    /// Waits until every claim has been unprepared.
    pub async fn wait_until_empty(&self, timeout: Duration) -> Result<(), WaitTimeout> {
        self.inner
            .changes
            .wait_until(
                || "all claims to be unprepared".to_owned(),
                timeout,
                || {
                    if self.is_empty() {
                        Ok(())
                    } else {
                        Err(self.describe())
                    }
                },
            )
            .await
    }

    /// Waits until the prepared claims satisfy `pred`; `what` describes the
    /// condition for the timeout message.
    pub async fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&[ClaimId]) -> bool,
    ) -> Result<Vec<ClaimId>, WaitTimeout> {
        self.inner
            .changes
            .wait_until(
                || what.to_owned(),
                timeout,
                || {
                    let claims = self.claims();
                    if pred(&claims) {
                        Ok(claims)
                    } else {
                        Err(self.describe())
                    }
                },
            )
            .await
    }
}
