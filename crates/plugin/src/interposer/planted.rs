//! What the interposer does to a real driver's prepare and unprepare calls
//! beyond passing them on: it plants the faults a profile asks for in the
//! answers (a driver broken on purpose, for mutation testing of the pack),
//! and it asks the driver every call a second time, because the kubelet
//! does (after its own restart, after a lost answer) and a driver must
//! answer the same. Disagreements are kept for the scenarios to check.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prost::Message as _;

use crate::fault::{Fault, Faults, PrepareAnswers};
use dra_e2e_proto::dra::{ClaimRef, PrepareResponse, PrepareResult, UnprepareResponse, v1};

/// Which of the two calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    Prepare,
    Unprepare,
}

impl Call {
    pub(super) fn method(self) -> &'static str {
        match self {
            Call::Prepare => "NodePrepareResources",
            Call::Unprepare => "NodeUnprepareResources",
        }
    }
}

/// A decoded answer, per claim UID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    Prepare(PrepareResponse),
    Unprepare(UnprepareResponse),
}

impl Answer {
    pub(super) fn decode(call: Call, message: Bytes) -> Option<Answer> {
        Some(match call {
            Call::Prepare => Answer::Prepare(
                v1::NodePrepareResourcesResponse::decode(message)
                    .ok()?
                    .into(),
            ),
            Call::Unprepare => Answer::Unprepare(
                v1::NodeUnprepareResourcesResponse::decode(message)
                    .ok()?
                    .into(),
            ),
        })
    }

    /// The answer as a gRPC message (v1 and v1beta1 are the same on the wire).
    pub(super) fn encode(&self) -> Vec<u8> {
        match self {
            Answer::Prepare(r) => v1::NodePrepareResourcesResponse::from(r.clone()).encode_to_vec(),
            Answer::Unprepare(r) => {
                v1::NodeUnprepareResourcesResponse::from(r.clone()).encode_to_vec()
            }
        }
    }

    /// Every claim answered with success and nothing else, as a driver that
    /// did nothing would answer.
    pub(super) fn empty_success(call: Call, claims: &[ClaimRef]) -> Answer {
        match call {
            Call::Prepare => Answer::Prepare(
                claims
                    .iter()
                    .map(|c| (c.uid.clone(), PrepareResult::default()))
                    .collect(),
            ),
            Call::Unprepare => Answer::Unprepare(
                claims
                    .iter()
                    .map(|c| (c.uid.clone(), String::new()))
                    .collect(),
            ),
        }
    }

    /// One line per claim, for a message: its devices or its error.
    fn describe(&self, claim: &ClaimRef) -> String {
        match self {
            Answer::Prepare(r) => match r.get(&claim.uid) {
                None => "no answer".to_owned(),
                Some(p) if !p.error.is_empty() => format!("error {:?}", p.error),
                Some(p) => {
                    let devices: Vec<String> = p
                        .devices
                        .iter()
                        .map(|d| {
                            format!("{}/{} {:?}", d.pool_name, d.device_name, d.cdi_device_ids)
                        })
                        .collect();
                    format!("devices [{}]", devices.join(", "))
                }
            },
            Answer::Unprepare(r) => match r.get(&claim.uid) {
                None => "no answer".to_owned(),
                Some(e) if !e.is_empty() => format!("error {e:?}"),
                Some(_) => "success".to_owned(),
            },
        }
    }

    fn of_claim(&self, uid: &str) -> Option<(Vec<String>, String)> {
        match self {
            Answer::Prepare(r) => r.get(uid).map(|p| {
                let mut devices: Vec<String> = p
                    .devices
                    .iter()
                    .map(|d| format!("{}/{} {:?}", d.pool_name, d.device_name, d.cdi_device_ids))
                    .collect();
                devices.sort();
                (devices, p.error.clone())
            }),
            Answer::Unprepare(r) => r.get(uid).map(|e| (Vec::new(), e.clone())),
        }
    }
}

/// Plants the faults that show in a driver's answer. `known` says for each
/// claim of the call whether the driver had prepared it before the call.
pub(super) fn plant(faults: &Faults, claims: &[ClaimRef], known: &[bool], answer: &mut Answer) {
    match answer {
        Answer::Prepare(response) => {
            let mut answers: PrepareAnswers = claims
                .iter()
                .map(|c| {
                    let r = response.remove(&c.uid).unwrap_or_default();
                    let result = if r.error.is_empty() {
                        Ok(r.devices)
                    } else {
                        Err(r.error)
                    };
                    (c.uid.clone(), result)
                })
                .collect();
            faults.alter_prepare(&mut answers);
            for ((_, result), known) in answers.iter_mut().zip(known) {
                if !known {
                    continue;
                }
                if faults.has(Fault::PrepareRepeatFails) {
                    *result = Err(format!(
                        "claim is already prepared (planted fault {})",
                        Fault::PrepareRepeatFails.name()
                    ));
                } else if faults.has(Fault::PrepareRepeatOtherDevices)
                    && let Ok(devices) = result
                {
                    for id in devices.iter_mut().flat_map(|d| d.cdi_device_ids.iter_mut()) {
                        id.push_str("-again");
                    }
                }
            }
            *response = answers
                .into_iter()
                .map(|(uid, r)| (uid, r.into()))
                .collect::<HashMap<_, _>>();
        }
        Answer::Unprepare(response) => {
            if faults.has(Fault::UnprepareUnknownFails) {
                for (c, known) in claims.iter().zip(known) {
                    if !known {
                        response.insert(
                            c.uid.clone(),
                            format!(
                                "unknown claim {}/{} (planted fault {})",
                                c.namespace,
                                c.name,
                                Fault::UnprepareUnknownFails.name()
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// Where the second asking disagreed with the first, per node; shared by
/// the node's interposer and whoever checks.
#[derive(Debug, Clone, Default)]
pub struct Disagreements(Arc<Mutex<Vec<String>>>);

impl Disagreements {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every disagreement so far, oldest first.
    pub fn list(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// Those about a claim with this UID.
    pub fn of_claim(&self, uid: &str) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|d| d.contains(uid))
            .cloned()
            .collect()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Compares the second answer with the first, claim by claim; a claim
    /// the first call failed is not held to anything.
    pub(super) fn compare(
        &self,
        node: &str,
        call: Call,
        claims: &[ClaimRef],
        first: &Answer,
        second: &Answer,
    ) {
        for c in claims {
            let (Some(a), b) = (first.of_claim(&c.uid), second.of_claim(&c.uid)) else {
                continue;
            };
            if !a.1.is_empty() || b.as_ref() == Some(&a) {
                continue;
            }
            self.lock().push(format!(
                "on node {node}, {} of claim {}/{} (uid {}) asked again answered {} where the \
                 first answered {}",
                call.method(),
                c.namespace,
                c.name,
                c.uid,
                second.describe(c),
                first.describe(c)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_e2e_proto::dra::PreparedDevice;

    fn claim(uid: &str) -> ClaimRef {
        ClaimRef {
            namespace: "ns".into(),
            name: format!("c-{uid}"),
            uid: uid.into(),
        }
    }

    fn prepared(uid: &str, id: &str) -> Answer {
        Answer::Prepare(
            [(
                uid.to_owned(),
                PrepareResult {
                    devices: vec![PreparedDevice {
                        request_names: vec!["r".into()],
                        pool_name: "p".into(),
                        device_name: "d".into(),
                        cdi_device_ids: vec![id.into()],
                        share_id: None,
                    }],
                    error: String::new(),
                },
            )]
            .into(),
        )
    }

    #[test]
    fn an_answer_survives_encoding() {
        let a = prepared("u1", "v/c=d");
        let back = Answer::decode(Call::Prepare, Bytes::from(a.encode()));
        assert_eq!(back, Some(a));
    }

    #[test]
    fn a_repeat_that_differs_is_kept_and_one_that_agrees_is_not() {
        let d = Disagreements::default();
        let c = [claim("u1")];
        d.compare(
            "n0",
            Call::Prepare,
            &c,
            &prepared("u1", "v/c=d"),
            &prepared("u1", "v/c=d"),
        );
        assert!(d.list().is_empty());
        d.compare(
            "n0",
            Call::Prepare,
            &c,
            &prepared("u1", "v/c=d"),
            &prepared("u1", "v/c=e"),
        );
        let [one] = &d.list()[..] else {
            panic!("{:?}", d.list())
        };
        assert!(
            one.contains("c-u1") && one.contains("v/c=e") && one.contains("n0"),
            "{one}"
        );
        assert_eq!(d.of_claim("u1").len(), 1);
        assert!(d.of_claim("u2").is_empty());
    }

    #[test]
    fn repeat_faults_touch_only_claims_known_before() {
        let c = [claim("u1"), claim("u2")];
        let mut a = Answer::Prepare(
            [
                ("u1".to_owned(), PrepareResult::default()),
                ("u2".to_owned(), PrepareResult::default()),
            ]
            .into(),
        );
        plant(
            &Faults::new([Fault::PrepareRepeatFails]),
            &c,
            &[true, false],
            &mut a,
        );
        let Answer::Prepare(r) = &a else { panic!() };
        assert!(r["u1"].error.contains("PrepareRepeatFails"));
        assert!(r["u2"].error.is_empty());
        let mut u = Answer::empty_success(Call::Unprepare, &c);
        plant(
            &Faults::new([Fault::UnprepareUnknownFails]),
            &c,
            &[true, false],
            &mut u,
        );
        let Answer::Unprepare(r) = &u else { panic!() };
        assert!(r["u1"].is_empty() && r["u2"].contains("unknown claim"));
    }
}
