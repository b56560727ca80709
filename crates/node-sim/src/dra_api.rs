//! The kubelet's side of a plugin's DRA service, whatever its API version:
//! version choice at registration, the calls with their deadline, and the
//! kubelet's response checks. The messages and versions are
//! [`dra_e2e_proto::dra`]'s.
use std::collections::HashMap;
use std::time::Duration;

use dra_e2e_proto::dra::{
    ClaimRef, NodeApi, NodeClient, PrepareResponse, PreparedDevice, UnprepareResponse,
};
use dra_e2e_proto::method;

/// Walks the plugin's list in the plugin's order and takes the first API
/// this node supports, as the kubelet does. Entries for other services
/// (health) are skipped; v1alpha4 only when the node enables it.
pub fn choose_service(plugin_versions: &[String], allow_v1alpha4: bool) -> Option<NodeApi> {
    plugin_versions
        .iter()
        .filter_map(|v| NodeApi::from_registration_string(v))
        .find(|api| *api != NodeApi::V1alpha4 || allow_v1alpha4)
}

/// What is wrong with a response, in the kubelet's words where it has some.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("{method} returned result for unknown claim UID {uid}")]
    UnknownClaim { method: &'static str, uid: String },
    #[error("{method} failed for ResourceClaim {claim}: {error}")]
    ClaimFailed {
        method: &'static str,
        claim: String,
        error: String,
    },
    #[error("{method} skipped {count} ResourceClaims")]
    Skipped { method: &'static str, count: usize },
}

fn short_method(full: &'static str) -> &'static str {
    full.rsplit('/').next().unwrap_or(full)
}

/// Checks a prepare response against the request: an entry for every claim,
/// no unknown UIDs, no per-claim errors. Returns the devices by claim UID.
pub fn validate_prepare(
    requested: &[ClaimRef],
    mut response: PrepareResponse,
) -> Result<HashMap<String, Vec<PreparedDevice>>, ResponseError> {
    let m = short_method(method::V1_PREPARE);
    check_keys(m, requested, response.keys())?;
    let mut out = HashMap::new();
    for claim in requested {
        let Some(result) = response.remove(&claim.uid) else {
            continue;
        };
        if !result.error.is_empty() {
            return Err(ResponseError::ClaimFailed {
                method: m,
                claim: format!("{}/{}", claim.namespace, claim.name),
                error: result.error,
            });
        }
        out.insert(claim.uid.clone(), result.devices);
    }
    Ok(out)
}

/// Checks an unprepare response like [`validate_prepare`].
pub fn validate_unprepare(
    requested: &[ClaimRef],
    response: UnprepareResponse,
) -> Result<(), ResponseError> {
    let m = short_method(method::V1_UNPREPARE);
    check_keys(m, requested, response.keys())?;
    for claim in requested {
        if let Some(error) = response.get(&claim.uid).filter(|e| !e.is_empty()) {
            return Err(ResponseError::ClaimFailed {
                method: m,
                claim: format!("{}/{}", claim.namespace, claim.name),
                error: error.clone(),
            });
        }
    }
    Ok(())
}

fn check_keys<'a>(
    method: &'static str,
    requested: &[ClaimRef],
    keys: impl Iterator<Item = &'a String>,
) -> Result<(), ResponseError> {
    let mut seen = 0;
    for uid in keys {
        if !requested.iter().any(|c| &c.uid == uid) {
            return Err(ResponseError::UnknownClaim {
                method,
                uid: uid.clone(),
            });
        }
        seen += 1;
    }
    let wanted = requested
        .iter()
        .map(|c| c.uid.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len();
    if seen < wanted {
        return Err(ResponseError::Skipped {
            method,
            count: wanted - seen,
        });
    }
    Ok(())
}

/// A failed call, before the response could be looked at.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// `method` is the full gRPC path; the message names the method only,
    /// as the kubelet's does.
    #[error("{}: {}", short_method(.method), status_text(.status))]
    Status {
        method: &'static str,
        status: tonic::Status,
    },
    /// Worded as gRPC words a call whose deadline (`timeout`) passed.
    #[error("{}: rpc error: code = DeadlineExceeded desc = context deadline exceeded", short_method(.method))]
    Timeout {
        method: &'static str,
        timeout: Duration,
    },
}

fn status_text(s: &tonic::Status) -> String {
    format!("rpc error: code = {:?} desc = {}", s.code(), s.message())
}

/// One connected DRA service of one plugin, called with a deadline per call
/// (the kubelet uses 45 s).
#[derive(Debug, Clone)]
pub struct DraClient(pub NodeClient);

impl DraClient {
    pub fn api(&self) -> NodeApi {
        self.0.api
    }

    /// `NodePrepareResources` with all `claims`; the results by claim UID,
    /// not checked yet.
    pub async fn prepare(
        &self,
        claims: &[ClaimRef],
        timeout: Duration,
    ) -> Result<PrepareResponse, CallError> {
        let method = self.api().prepare_method();
        with_timeout(method, timeout, self.0.prepare(claims)).await
    }

    /// `NodeUnprepareResources` with all `claims`; per-claim errors by UID.
    pub async fn unprepare(
        &self,
        claims: &[ClaimRef],
        timeout: Duration,
    ) -> Result<UnprepareResponse, CallError> {
        let method = self.api().unprepare_method();
        with_timeout(method, timeout, self.0.unprepare(claims)).await
    }
}

async fn with_timeout<T>(
    method: &'static str,
    timeout: Duration,
    call: impl Future<Output = Result<T, tonic::Status>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(status)) => Err(CallError::Status { method, status }),
        Err(_) => Err(CallError::Timeout { method, timeout }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_e2e_proto::dra::PrepareResult;

    fn claim(uid: &str) -> ClaimRef {
        ClaimRef {
            namespace: "ns".into(),
            name: format!("claim-{uid}"),
            uid: uid.into(),
        }
    }

    fn ok_result(dev: &str) -> PrepareResult {
        PrepareResult {
            devices: vec![PreparedDevice {
                request_names: vec!["req".into()],
                pool_name: "pool".into(),
                device_name: dev.into(),
                cdi_device_ids: vec![format!("d/test={dev}")],
                share_id: None,
            }],
            error: String::new(),
        }
    }

    #[test]
    fn version_choice_follows_plugin_order() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            choose_service(&v(&["v1.DRAPlugin", "v1beta1.DRAPlugin"]), false),
            Some(NodeApi::V1)
        );
        assert_eq!(
            choose_service(&v(&["v1beta1.DRAPlugin", "v1.DRAPlugin"]), false),
            Some(NodeApi::V1beta1)
        );
        assert_eq!(
            choose_service(
                &v(&["v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"]),
                false
            ),
            Some(NodeApi::V1beta1)
        );
        assert_eq!(
            choose_service(&v(&["v1alpha3.NodeService", "v1.DRAPlugin"]), false),
            Some(NodeApi::V1)
        );
        assert_eq!(
            choose_service(&v(&["v1alpha3.NodeService", "v1.DRAPlugin"]), true),
            Some(NodeApi::V1alpha4)
        );
        assert_eq!(choose_service(&v(&["1.0.0"]), true), None);
        assert_eq!(choose_service(&[], false), None);
    }

    #[test]
    fn prepare_response_checks() {
        let req = vec![claim("a"), claim("b")];
        let good: HashMap<_, _> = [("a".into(), ok_result("d0")), ("b".into(), ok_result("d1"))]
            .into_iter()
            .collect();
        let devices = validate_prepare(&req, good.clone()).unwrap();
        assert_eq!(devices["b"][0].device_name, "d1");

        let mut extra = good.clone();
        extra.insert("zzz".into(), ok_result("d2"));
        assert_eq!(
            validate_prepare(&req, extra).unwrap_err(),
            ResponseError::UnknownClaim {
                method: "NodePrepareResources",
                uid: "zzz".into()
            }
        );

        let mut short = good.clone();
        short.remove("a");
        assert_eq!(
            validate_prepare(&req, short).unwrap_err().to_string(),
            "NodePrepareResources skipped 1 ResourceClaims"
        );

        let mut failed = good;
        failed.get_mut("b").unwrap().error = "boom".into();
        assert_eq!(
            validate_prepare(&req, failed).unwrap_err().to_string(),
            "NodePrepareResources failed for ResourceClaim ns/claim-b: boom"
        );
    }

    #[test]
    fn unprepare_response_checks() {
        let req = vec![claim("a")];
        assert!(validate_unprepare(&req, [("a".into(), String::new())].into()).is_ok());
        assert!(matches!(
            validate_unprepare(&req, HashMap::new()),
            Err(ResponseError::Skipped { count: 1, .. })
        ));
        assert!(matches!(
            validate_unprepare(&req, [("a".into(), "no".into())].into()),
            Err(ResponseError::ClaimFailed { .. })
        ));
        assert!(matches!(
            validate_unprepare(
                &req,
                [("a".into(), String::new()), ("x".into(), String::new())].into()
            ),
            Err(ResponseError::UnknownClaim { .. })
        ));
    }
}
