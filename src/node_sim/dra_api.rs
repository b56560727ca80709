//! The DRA gRPC service of a plugin, independent of its API version: version
//! choice at registration, the two calls, and the kubelet's response checks.
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use tonic::transport::Channel;

use crate::proto::{dra, method, service};

/// A DRA service version a node can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DraService {
    V1,
    V1Beta1,
    /// The pre-1.34 API (proto package `v1alpha3`); only when enabled.
    V1Alpha4,
}

impl DraService {
    /// The string a plugin advertises in `supported_versions`.
    pub fn registration_name(self) -> &'static str {
        match self {
            DraService::V1 => service::DRA_V1,
            DraService::V1Beta1 => service::DRA_V1BETA1,
            DraService::V1Alpha4 => service::DRA_V1ALPHA4,
        }
    }

    pub fn prepare_method(self) -> &'static str {
        match self {
            DraService::V1 => method::V1_PREPARE,
            DraService::V1Beta1 => method::V1BETA1_PREPARE,
            DraService::V1Alpha4 => method::V1ALPHA4_PREPARE,
        }
    }

    pub fn unprepare_method(self) -> &'static str {
        match self {
            DraService::V1 => method::V1_UNPREPARE,
            DraService::V1Beta1 => method::V1BETA1_UNPREPARE,
            DraService::V1Alpha4 => method::V1ALPHA4_UNPREPARE,
        }
    }
}

impl fmt::Display for DraService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.registration_name())
    }
}

/// Walks the plugin's list in the plugin's order and takes the first service
/// this node supports, as the kubelet does. Entries for other services (health)
/// are skipped.
pub fn choose_service(plugin_versions: &[String], allow_v1alpha4: bool) -> Option<DraService> {
    plugin_versions.iter().find_map(|v| match v.as_str() {
        service::DRA_V1 => Some(DraService::V1),
        service::DRA_V1BETA1 => Some(DraService::V1Beta1),
        service::DRA_V1ALPHA4 if allow_v1alpha4 => Some(DraService::V1Alpha4),
        _ => None,
    })
}

/// The claim triple the kubelet sends; the plugin reads the claim itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} ({})", self.namespace, self.name, self.uid)
    }
}

/// One device a plugin prepared for a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedDevice {
    /// Requests this device serves; empty means all of the claim's requests.
    pub request_names: Vec<String>,
    pub pool_name: String,
    pub device_name: String,
    pub cdi_device_ids: Vec<String>,
    /// Only the v1 API carries it.
    pub share_id: Option<String>,
}

/// The per-claim part of a prepare response, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPrepareResult {
    pub devices: Vec<PreparedDevice>,
    pub error: String,
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
    mut response: HashMap<String, RawPrepareResult>,
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
    response: HashMap<String, String>,
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

/// One connected DRA service of one plugin.
#[derive(Debug, Clone)]
pub struct DraClient {
    pub service: DraService,
    pub channel: Channel,
}

macro_rules! claims_for {
    ($module:path, $claims:expr) => {{
        use $module as m;
        $claims
            .iter()
            .map(|c| m::Claim {
                namespace: c.namespace.clone(),
                uid: c.uid.clone(),
                name: c.name.clone(),
            })
            .collect::<Vec<_>>()
    }};
}

impl DraClient {
    /// `NodePrepareResources` with all `claims`, limited to `timeout` (the
    /// kubelet uses 45 s).
    pub async fn prepare(
        &self,
        claims: &[ClaimRef],
        timeout: Duration,
    ) -> Result<HashMap<String, RawPrepareResult>, CallError> {
        let method = self.service.prepare_method();
        let call = async {
            let ch = self.channel.clone();
            match self.service {
                DraService::V1 => {
                    let mut c = dra::v1::dra_plugin_client::DraPluginClient::new(ch);
                    let req = dra::v1::NodePrepareResourcesRequest {
                        claims: claims_for!(dra::v1, claims),
                    };
                    let resp = c.node_prepare_resources(req).await?.into_inner();
                    Ok(resp
                        .claims
                        .into_iter()
                        .map(|(uid, r)| {
                            let devices = r
                                .devices
                                .into_iter()
                                .map(|d| PreparedDevice {
                                    request_names: d.request_names,
                                    pool_name: d.pool_name,
                                    device_name: d.device_name,
                                    cdi_device_ids: d.cdi_device_ids,
                                    share_id: d.share_id,
                                })
                                .collect();
                            (
                                uid,
                                RawPrepareResult {
                                    devices,
                                    error: r.error,
                                },
                            )
                        })
                        .collect())
                }
                DraService::V1Beta1 => {
                    let mut c = dra::v1beta1::dra_plugin_client::DraPluginClient::new(ch);
                    let req = dra::v1beta1::NodePrepareResourcesRequest {
                        claims: claims_for!(dra::v1beta1, claims),
                    };
                    let resp = c.node_prepare_resources(req).await?.into_inner();
                    Ok(resp
                        .claims
                        .into_iter()
                        .map(|(uid, r)| {
                            let devices = r
                                .devices
                                .into_iter()
                                .map(|d| PreparedDevice {
                                    request_names: d.request_names,
                                    pool_name: d.pool_name,
                                    device_name: d.device_name,
                                    cdi_device_ids: d.cdi_device_ids,
                                    share_id: None,
                                })
                                .collect();
                            (
                                uid,
                                RawPrepareResult {
                                    devices,
                                    error: r.error,
                                },
                            )
                        })
                        .collect())
                }
                DraService::V1Alpha4 => {
                    let mut c = dra::v1alpha4::node_client::NodeClient::new(ch);
                    let req = dra::v1alpha4::NodePrepareResourcesRequest {
                        claims: claims_for!(dra::v1alpha4, claims),
                    };
                    let resp = c.node_prepare_resources(req).await?.into_inner();
                    Ok(resp
                        .claims
                        .into_iter()
                        .map(|(uid, r)| {
                            let devices = r
                                .devices
                                .into_iter()
                                .map(|d| PreparedDevice {
                                    request_names: d.request_names,
                                    pool_name: d.pool_name,
                                    device_name: d.device_name,
                                    cdi_device_ids: d.cdi_device_ids,
                                    share_id: None,
                                })
                                .collect();
                            (
                                uid,
                                RawPrepareResult {
                                    devices,
                                    error: r.error,
                                },
                            )
                        })
                        .collect())
                }
            }
        };
        with_timeout(method, timeout, call).await
    }

    /// `NodeUnprepareResources` with all `claims`; per-claim errors by UID.
    pub async fn unprepare(
        &self,
        claims: &[ClaimRef],
        timeout: Duration,
    ) -> Result<HashMap<String, String>, CallError> {
        let method = self.service.unprepare_method();
        let call = async {
            let ch = self.channel.clone();
            match self.service {
                DraService::V1 => {
                    let mut c = dra::v1::dra_plugin_client::DraPluginClient::new(ch);
                    let req = dra::v1::NodeUnprepareResourcesRequest {
                        claims: claims_for!(dra::v1, claims),
                    };
                    let resp = c.node_unprepare_resources(req).await?.into_inner();
                    Ok(resp
                        .claims
                        .into_iter()
                        .map(|(uid, r)| (uid, r.error))
                        .collect())
                }
                DraService::V1Beta1 => {
                    let mut c = dra::v1beta1::dra_plugin_client::DraPluginClient::new(ch);
                    let req = dra::v1beta1::NodeUnprepareResourcesRequest {
                        claims: claims_for!(dra::v1beta1, claims),
                    };
                    let resp = c.node_unprepare_resources(req).await?.into_inner();
                    Ok(resp
                        .claims
                        .into_iter()
                        .map(|(uid, r)| (uid, r.error))
                        .collect())
                }
                DraService::V1Alpha4 => {
                    let mut c = dra::v1alpha4::node_client::NodeClient::new(ch);
                    let req = dra::v1alpha4::NodeUnprepareResourcesRequest {
                        claims: claims_for!(dra::v1alpha4, claims),
                    };
                    let resp = c.node_unprepare_resources(req).await?.into_inner();
                    Ok(resp
                        .claims
                        .into_iter()
                        .map(|(uid, r)| (uid, r.error))
                        .collect())
                }
            }
        };
        with_timeout(method, timeout, call).await
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

    fn claim(uid: &str) -> ClaimRef {
        ClaimRef {
            namespace: "ns".into(),
            name: format!("claim-{uid}"),
            uid: uid.into(),
        }
    }

    fn ok_result(dev: &str) -> RawPrepareResult {
        RawPrepareResult {
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
            Some(DraService::V1)
        );
        assert_eq!(
            choose_service(&v(&["v1beta1.DRAPlugin", "v1.DRAPlugin"]), false),
            Some(DraService::V1Beta1)
        );
        assert_eq!(
            choose_service(
                &v(&["v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"]),
                false
            ),
            Some(DraService::V1Beta1)
        );
        assert_eq!(
            choose_service(&v(&["v1alpha3.NodeService", "v1.DRAPlugin"]), false),
            Some(DraService::V1)
        );
        assert_eq!(
            choose_service(&v(&["v1alpha3.NodeService", "v1.DRAPlugin"]), true),
            Some(DraService::V1Alpha4)
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
