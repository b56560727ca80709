//! Planting a [`Fault`] in the answers to NodePrepareResources: the part of
//! a broken driver that shows in what it tells the kubelet, shared by the
//! suite's own driver (which breaks itself) and the interposer (which
//! breaks what a real driver answered). Faults with side effects on the
//! node (CDI files, slices) are the suite's own driver's alone
//! ([`super::dra`]).
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use dra_e2e_profile::{Fault, Planter};
use dra_e2e_proto::dra::PreparedDevice;

/// Each claim's answer, in the order of the call's claims.
pub type PrepareAnswers = Vec<(String, Result<Vec<PreparedDevice>, String>)>;

/// The faults of one driver, as the planter sees them. Clones share one
/// switch: teardown lifts the faults (as it heals injected failures) so
/// that a scenario's pods and claims can go, and the next scenario plants
/// them again.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    planted: Arc<BTreeSet<Fault>>,
    lifted: Arc<AtomicBool>,
}

impl PartialEq for Faults {
    fn eq(&self, other: &Self) -> bool {
        self.planted == other.planted
    }
}

impl Eq for Faults {}

impl Faults {
    pub fn new(faults: impl IntoIterator<Item = Fault>) -> Self {
        Faults {
            planted: Arc::new(faults.into_iter().collect()),
            lifted: Arc::default(),
        }
    }

    pub fn has(&self, fault: Fault) -> bool {
        !self.lifted.load(Ordering::Relaxed) && self.planted.contains(&fault)
    }

    pub fn is_empty(&self) -> bool {
        self.planted.is_empty() || self.lifted.load(Ordering::Relaxed)
    }

    /// The driver behaves again, for every clone.
    pub fn lift(&self) {
        self.lifted.store(true, Ordering::Relaxed);
    }

    /// The faults are back, for every clone.
    pub fn plant_again(&self) {
        self.lifted.store(false, Ordering::Relaxed);
    }

    /// The message of a call that fails as a whole, if one does.
    pub fn failed_call(&self, prepare: bool) -> Option<String> {
        let fault = if prepare {
            Fault::FailPrepare
        } else {
            Fault::FailUnprepare
        };
        self.has(fault)
            .then(|| format!("planted fault {}: {}", fault.name(), fault.description()))
    }

    /// Alters the answers the way the planted faults would have them.
    pub fn alter_prepare(&self, answers: &mut PrepareAnswers) {
        let first_ok = answers
            .iter()
            .find_map(|(_, r)| r.as_ref().ok().cloned())
            .unwrap_or_default();
        for (index, (_, result)) in answers.iter_mut().enumerate() {
            let Ok(devices) = result else { continue };
            if self.has(Fault::NoDevicesAnswered) || (self.has(Fault::FirstClaimOnly) && index > 0)
            {
                devices.clear();
            }
            if self.has(Fault::OtherClaimsDevices) {
                *devices = first_ok.clone();
            }
            if self.has(Fault::FirstRequestOnly)
                && let Some(first) = devices.first().map(request_of)
            {
                devices.retain(|d| request_of(d) == first);
            }
            if self.has(Fault::FirstDeviceOnly) {
                let mut seen = BTreeSet::new();
                devices.retain(|d| seen.insert(request_of(d)));
            }
            for d in devices.iter_mut() {
                if self.has(Fault::WrongDeviceAnswered) {
                    d.device_name.push_str("-wrong");
                }
                if self.has(Fault::CdiNameMismatch) {
                    for id in &mut d.cdi_device_ids {
                        id.push_str("-mismatch");
                    }
                }
            }
        }
    }
}

fn request_of(d: &PreparedDevice) -> String {
    d.request_names.first().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(request: &str, name: &str) -> PreparedDevice {
        PreparedDevice {
            request_names: vec![request.into()],
            pool_name: "pool".into(),
            device_name: name.into(),
            cdi_device_ids: vec![format!("d/test={name}")],
            share_id: None,
        }
    }

    fn answers() -> PrepareAnswers {
        vec![
            (
                "a".into(),
                Ok(vec![dev("r1", "d0"), dev("r1", "d1"), dev("r2", "d2")]),
            ),
            ("b".into(), Ok(vec![dev("r1", "d3")])),
        ]
    }

    fn names(a: &PrepareAnswers) -> Vec<Vec<String>> {
        a.iter()
            .map(|(_, r)| {
                r.as_ref()
                    .map(|d| d.iter().map(|d| d.device_name.clone()).collect())
                    .unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn each_answer_fault_changes_what_it_names_and_nothing_else() {
        let cases: [(Fault, Vec<Vec<&str>>); 6] = [
            (Fault::FirstClaimOnly, vec![vec!["d0", "d1", "d2"], vec![]]),
            (Fault::FirstDeviceOnly, vec![vec!["d0", "d2"], vec!["d3"]]),
            (Fault::FirstRequestOnly, vec![vec!["d0", "d1"], vec!["d3"]]),
            (
                Fault::OtherClaimsDevices,
                vec![vec!["d0", "d1", "d2"], vec!["d0", "d1", "d2"]],
            ),
            (Fault::NoDevicesAnswered, vec![vec![], vec![]]),
            (
                Fault::WrongDeviceAnswered,
                vec![vec!["d0-wrong", "d1-wrong", "d2-wrong"], vec!["d3-wrong"]],
            ),
        ];
        for (fault, want) in cases {
            let mut a = answers();
            Faults::new([fault]).alter_prepare(&mut a);
            assert_eq!(names(&a), want, "{fault:?}");
        }
        let mut a = answers();
        Faults::default().alter_prepare(&mut a);
        assert_eq!(a, answers());
        Faults::new([Fault::CdiNameMismatch]).alter_prepare(&mut a);
        let Ok(first) = &a[0].1 else { panic!() };
        assert_eq!(first[0].cdi_device_ids, ["d/test=d0-mismatch"]);
    }

    #[test]
    fn lifted_faults_are_gone_for_every_clone_until_planted_again() {
        let f = Faults::new([Fault::FailPrepare]);
        let clone = f.clone();
        f.lift();
        assert!(!clone.has(Fault::FailPrepare) && clone.failed_call(true).is_none());
        clone.plant_again();
        assert!(f.has(Fault::FailPrepare));
    }

    #[test]
    fn whole_call_failures_name_the_fault() {
        let f = Faults::new([Fault::FailPrepare]);
        assert!(
            f.failed_call(true)
                .is_some_and(|m| m.contains("FailPrepare"))
        );
        assert_eq!(f.failed_call(false), None);
    }
}
