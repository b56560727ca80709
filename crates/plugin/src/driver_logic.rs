//! What upstream's DRA test driver derives from an allocated claim: container
//! env from opaque configs, the marker variable, CDI device IDs and CDI spec
//! files, and the devices reported back to the kubelet. Pure functions; the
//! gRPC side lives in [`super::dra`].
use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    DeviceAllocationConfiguration, DeviceRequestAllocationResult, ResourceClaim,
};
use serde::Serialize;

use dra_e2e_proto::dra::PreparedDevice;

/// `DeviceAllocationConfiguration.source` of configs that come from the class.
pub const SOURCE_FROM_CLASS: &str = "FromClass";
/// CDI class of the devices this driver creates.
pub const CDI_CLASS: &str = "test";
/// A version accepted by the container runtimes the upstream tests run with.
pub const CDI_VERSION: &str = "0.3.0";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverLogicError {
    #[error("parameters in config #{index} of driver {driver}: {reason}")]
    Parameters {
        index: usize,
        driver: String,
        reason: String,
    },
    #[error("ResourceClaim {namespace}/{name} has no allocation")]
    NotAllocated { namespace: String, name: String },
}

/// The request name without a subrequest (`req/sub` -> `req`).
pub fn base_request(request: &str) -> &str {
    request.split_once('/').map_or(request, |(base, _)| base)
}

/// `claim_<claim>_<request>`, with every character that is not an ASCII letter
/// or digit replaced by `_`.
pub fn marker_env_key(claim_name: &str, base_request: &str) -> String {
    format!("claim_{claim_name}_{base_request}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Name of the CDI device, unique per claim and request so that runtime caches
/// never serve a stale entry.
pub fn cdi_device_name(claim_uid: &str, base_request: &str) -> String {
    format!("claim-{claim_uid}-{base_request}")
}

/// `<vendor>/<class>` of this driver's CDI devices.
pub fn cdi_kind(driver: &str) -> String {
    format!("{driver}/{CDI_CLASS}")
}

/// Fully qualified CDI device ID as returned to the kubelet.
pub fn cdi_device_id(driver: &str, claim_uid: &str, base_request: &str) -> String {
    format!(
        "{}={}",
        cdi_kind(driver),
        cdi_device_name(claim_uid, base_request)
    )
}

/// File name of the CDI spec inside the node's CDI directory.
pub fn cdi_file_name(driver: &str, claim_uid: &str, base_request: &str) -> String {
    format!("{driver}-{claim_uid}-{base_request}.json")
}

#[derive(Serialize)]
struct Spec<'a> {
    #[serde(rename = "cdiVersion")]
    cdi_version: &'a str,
    kind: String,
    devices: [SpecDevice<'a>; 1],
}

#[derive(Serialize)]
struct SpecDevice<'a> {
    name: String,
    #[serde(rename = "containerEdits")]
    container_edits: ContainerEdits<'a>,
}

#[derive(Serialize)]
struct ContainerEdits<'a> {
    env: &'a [String],
}

/// The CDI spec for one claim request: compact JSON, keys in upstream's order,
/// `env` as given (callers pass it sorted).
pub fn cdi_spec_json(driver: &str, claim_uid: &str, base_request: &str, env: &[String]) -> String {
    let spec = Spec {
        cdi_version: CDI_VERSION,
        kind: cdi_kind(driver),
        devices: [SpecDevice {
            name: cdi_device_name(claim_uid, base_request),
            container_edits: ContainerEdits { env },
        }],
    };
    // Serializing strings and fixed structs cannot fail.
    let json = serde_json::to_string(&spec).unwrap_or_default();
    escape_like_go(&json)
}

/// Go's encoding/json escapes these inside strings; doing the same keeps our
/// files byte-identical to the upstream driver's. In serialized JSON they can
/// only occur inside strings, so a plain replacement is safe.
fn escape_like_go(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Configs applying to an allocation result: those with opaque parameters whose
/// `requests` is empty or names the result's request or its base request.
pub fn configs_for_result<'a>(
    configs: &'a [DeviceAllocationConfiguration],
    result_request: &'a str,
) -> impl Iterator<Item = &'a DeviceAllocationConfiguration> + 'a {
    let base = base_request(result_request);
    configs.iter().filter(move |c| {
        c.opaque.is_some()
            && c.requests.as_ref().is_none_or(|rs| {
                rs.is_empty() || rs.iter().any(|r| r == result_request || r == base)
            })
    })
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Env from this driver's opaque configs for one result: `admin_<k>` for class
/// configs, `user_<k>` otherwise; later configs override earlier ones. The
/// allocation lists class configs before claim configs.
pub fn env_for_result(
    driver: &str,
    configs: &[DeviceAllocationConfiguration],
    result_request: &str,
) -> Result<BTreeMap<String, String>, DriverLogicError> {
    let mut env = BTreeMap::new();
    for (index, config) in configs_for_result(configs, result_request).enumerate() {
        let Some(opaque) = &config.opaque else {
            continue;
        };
        if opaque.driver != driver {
            continue;
        }
        let prefix = if config.source == SOURCE_FROM_CLASS {
            "admin"
        } else {
            "user"
        };
        let err = |reason: String| DriverLogicError::Parameters {
            index,
            driver: driver.to_owned(),
            reason,
        };
        match &opaque.parameters.0 {
            serde_json::Value::Null => {}
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let serde_json::Value::String(value) = value else {
                        return Err(err(format!(
                            "decoding {prefix} parameters: value of {key:?} is {}, not a string",
                            json_kind(value)
                        )));
                    };
                    env.insert(format!("{prefix}_{key}"), value.clone());
                }
            }
            other => {
                return Err(err(format!(
                    "decoding {prefix} parameters: expected an object of strings, got {}",
                    json_kind(other)
                )));
            }
        }
    }
    Ok(env)
}

/// A CDI spec file to write on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdiFile {
    pub name: String,
    pub content: String,
}

/// Everything preparing one claim produces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimPlan {
    pub devices: Vec<PreparedDevice>,
    /// One per base request, in first-seen order.
    pub cdi_files: Vec<CdiFile>,
}

fn plan_result(
    driver: &str,
    claim_name: &str,
    claim_uid: &str,
    configs: &[DeviceAllocationConfiguration],
    result: &DeviceRequestAllocationResult,
) -> Result<(PreparedDevice, CdiFile), DriverLogicError> {
    let base = base_request(&result.request);
    let mut env = env_for_result(driver, configs, &result.request)?;
    env.insert(marker_env_key(claim_name, base), "true".to_owned());
    let mut env: Vec<String> = env.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    // Sorted as whole "K=V" strings, as upstream does, not by key.
    env.sort();
    let file = CdiFile {
        name: cdi_file_name(driver, claim_uid, base),
        content: cdi_spec_json(driver, claim_uid, base, &env),
    };
    let device = PreparedDevice {
        request_names: vec![base.to_owned()],
        pool_name: result.pool.clone(),
        device_name: result.device.clone(),
        cdi_device_ids: vec![cdi_device_id(driver, claim_uid, base)],
        share_id: result.share_id.clone(),
    };
    Ok((device, file))
}

/// Devices and CDI files for `claim`'s results that belong to `driver`.
/// The marker variables (`K=true`) of the claim's requests with devices of
/// `driver`.
pub fn marker_env(driver: &str, claim: &ResourceClaim) -> Vec<String> {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let mut env: Vec<String> = claim
        .status
        .iter()
        .flat_map(|s| s.allocation.iter())
        .flat_map(|a| a.devices.iter())
        .flat_map(|d| d.results.iter().flatten())
        .filter(|r| r.driver == driver)
        .map(|r| format!("{}=true", marker_env_key(name, base_request(&r.request))))
        .collect();
    env.dedup();
    env
}

pub fn plan_claim(driver: &str, claim: &ResourceClaim) -> Result<ClaimPlan, DriverLogicError> {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let allocation = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .ok_or_else(|| DriverLogicError::NotAllocated {
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            name: name.to_owned(),
        })?;
    let Some(devices) = &allocation.devices else {
        return Ok(ClaimPlan::default());
    };
    let configs = devices.config.as_deref().unwrap_or_default();
    let mut plan = ClaimPlan::default();
    for result in devices.results.iter().flatten() {
        if result.driver != driver {
            continue;
        }
        let (device, file) = plan_result(driver, name, uid, configs, result)?;
        plan.devices.push(device);
        match plan.cdi_files.iter_mut().find(|f| f.name == file.name) {
            Some(existing) => *existing = file,
            None => plan.cdi_files.push(file),
        }
    }
    Ok(plan)
}

/// CDI files [`plan_claim`] writes for `claim`, derived without validating configs;
/// used to clean up after claims this plugin instance does not remember.
pub fn cdi_file_names(driver: &str, claim: &ResourceClaim) -> Vec<String> {
    names_per_request(driver, claim, |uid, base| cdi_file_name(driver, uid, base))
}

/// `claim`'s allocated devices that belong to `driver`.
pub(crate) fn driver_results<'a>(
    driver: &'a str,
    claim: &'a ResourceClaim,
) -> impl Iterator<Item = &'a DeviceRequestAllocationResult> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .filter(move |r| r.driver == driver)
}

/// `name(claim UID, base request)` once per base request of `driver`'s
/// devices in `claim`, in first-seen order: the names of files written per
/// request.
pub(crate) fn names_per_request(
    driver: &str,
    claim: &ResourceClaim,
    name: impl Fn(&str, &str) -> String,
) -> Vec<String> {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for result in driver_results(driver, claim) {
        let n = name(uid, base_request(&result.request));
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{
        AllocationResult, DeviceAllocationResult, OpaqueDeviceConfiguration, ResourceClaimStatus,
    };
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    const DRIVER: &str = "dra-1234.k8s.io";

    fn config(
        source: &str,
        driver: &str,
        requests: &[&str],
        params: serde_json::Value,
    ) -> DeviceAllocationConfiguration {
        DeviceAllocationConfiguration {
            source: source.to_owned(),
            requests: (!requests.is_empty())
                .then(|| requests.iter().map(|r| (*r).to_owned()).collect()),
            opaque: Some(OpaqueDeviceConfiguration {
                driver: driver.to_owned(),
                parameters: RawExtension(params),
            }),
        }
    }

    fn result(request: &str, device: &str) -> DeviceRequestAllocationResult {
        DeviceRequestAllocationResult {
            driver: DRIVER.to_owned(),
            pool: "node-1".to_owned(),
            device: device.to_owned(),
            request: request.to_owned(),
            ..Default::default()
        }
    }

    fn claim(
        name: &str,
        uid: &str,
        results: Vec<DeviceRequestAllocationResult>,
        configs: Vec<DeviceAllocationConfiguration>,
    ) -> ResourceClaim {
        ResourceClaim {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                uid: Some(uid.to_owned()),
                ..Default::default()
            },
            status: Some(ResourceClaimStatus {
                allocation: Some(AllocationResult {
                    devices: Some(DeviceAllocationResult {
                        results: Some(results),
                        config: Some(configs),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn names_follow_upstream() {
        assert_eq!(base_request("req/sub-1"), "req");
        assert_eq!(base_request("req"), "req");
        assert_eq!(
            marker_env_key("external-claim", "my-request"),
            "claim_external_claim_my_request"
        );
        assert_eq!(marker_env_key("a.b", "c"), "claim_a_b_c");
        assert_eq!(
            cdi_device_id(DRIVER, "u1", "req"),
            "dra-1234.k8s.io/test=claim-u1-req"
        );
        assert_eq!(
            cdi_file_name(DRIVER, "u1", "req"),
            "dra-1234.k8s.io-u1-req.json"
        );
    }

    #[test]
    fn spec_json_is_compact_and_ordered() {
        let env = vec!["claim_c_r=true".to_owned(), "user_a=<b&c>".to_owned()];
        assert_eq!(
            cdi_spec_json(DRIVER, "u1", "r", &env),
            r#"{"cdiVersion":"0.3.0","kind":"dra-1234.k8s.io/test","devices":[{"name":"claim-u1-r","containerEdits":{"env":["claim_c_r=true","user_a=\u003cb\u0026c\u003e"]}}]}"#
        );
    }

    #[test]
    fn class_configs_become_admin_and_claim_configs_user() {
        let configs = vec![
            config("FromClass", DRIVER, &[], json!({"a": "class"})),
            config("FromClaim", DRIVER, &[], json!({"a": "claim", "b": "x"})),
        ];
        let env = env_for_result(DRIVER, &configs, "req").unwrap();
        assert_eq!(
            env.into_iter().collect::<Vec<_>>(),
            vec![
                ("admin_a".to_owned(), "class".to_owned()),
                ("user_a".to_owned(), "claim".to_owned()),
                ("user_b".to_owned(), "x".to_owned()),
            ]
        );
    }

    #[test]
    fn later_configs_override_earlier_ones() {
        let configs = vec![
            config("FromClass", DRIVER, &[], json!({"k": "class-1"})),
            config("FromClass", DRIVER, &[], json!({"k": "class-2"})),
            config("FromClaim", DRIVER, &[], json!({"k": "claim-1"})),
            config("FromClaim", DRIVER, &["req"], json!({"k": "claim-2"})),
        ];
        let env = env_for_result(DRIVER, &configs, "req").unwrap();
        assert_eq!(env["admin_k"], "class-2");
        assert_eq!(env["user_k"], "claim-2");
    }

    #[test]
    fn other_drivers_configs_are_ignored() {
        let configs = vec![
            config("FromClaim", "other.k8s.io", &[], json!({"a": 1})),
            config("FromClaim", DRIVER, &[], json!({"b": "c"})),
        ];
        let env = env_for_result(DRIVER, &configs, "req").unwrap();
        assert_eq!(env.len(), 1);
        assert_eq!(env["user_b"], "c");
    }

    #[test]
    fn configs_are_filtered_by_request_or_base_request() {
        let configs = vec![
            config("FromClaim", DRIVER, &["req"], json!({"base": "y"})),
            config("FromClaim", DRIVER, &["req/sub"], json!({"sub": "y"})),
            config("FromClaim", DRIVER, &["other"], json!({"other": "y"})),
            config(
                "FromClaim",
                DRIVER,
                &["req/other-sub"],
                json!({"othersub": "y"}),
            ),
        ];
        let env = env_for_result(DRIVER, &configs, "req/sub").unwrap();
        assert_eq!(env.keys().collect::<Vec<_>>(), ["user_base", "user_sub"]);
        let env = env_for_result(DRIVER, &configs, "other").unwrap();
        assert_eq!(env.keys().collect::<Vec<_>>(), ["user_other"]);
    }

    #[test]
    fn non_string_parameters_are_errors() {
        let configs = vec![config("FromClaim", DRIVER, &[], json!({"a": 1}))];
        let err = env_for_result(DRIVER, &configs, "req").unwrap_err();
        assert!(
            matches!(&err, DriverLogicError::Parameters { index: 0, reason, .. }
                if reason.contains("\"a\"") && reason.contains("number")),
            "{err}"
        );
        let configs = vec![config("FromClass", DRIVER, &[], json!(["a"]))];
        let err = env_for_result(DRIVER, &configs, "req").unwrap_err();
        assert!(err.to_string().contains("admin"), "{err}");
        // No parameters at all is fine.
        let configs = vec![config("FromClaim", DRIVER, &[], serde_json::Value::Null)];
        assert!(env_for_result(DRIVER, &configs, "req").unwrap().is_empty());
    }

    #[test]
    fn plan_covers_only_this_drivers_results() {
        let mut foreign = result("req", "device-07");
        foreign.driver = "other.k8s.io".to_owned();
        let mut shared = result("req", "device-00");
        shared.share_id = Some("share-1".to_owned());
        let c = claim(
            "external-claim",
            "uid-1",
            vec![shared, foreign, result("second/sub", "device-01")],
            vec![config("FromClaim", DRIVER, &["req"], json!({"a": "b"}))],
        );
        let plan = plan_claim(DRIVER, &c).unwrap();
        assert_eq!(
            plan.devices,
            vec![
                PreparedDevice {
                    request_names: vec!["req".into()],
                    pool_name: "node-1".into(),
                    device_name: "device-00".into(),
                    cdi_device_ids: vec!["dra-1234.k8s.io/test=claim-uid-1-req".into()],
                    share_id: Some("share-1".into()),
                },
                PreparedDevice {
                    request_names: vec!["second".into()],
                    pool_name: "node-1".into(),
                    device_name: "device-01".into(),
                    cdi_device_ids: vec!["dra-1234.k8s.io/test=claim-uid-1-second".into()],
                    share_id: None,
                },
            ]
        );
        assert_eq!(
            plan.cdi_files,
            vec![
                CdiFile {
                    name: "dra-1234.k8s.io-uid-1-req.json".into(),
                    content: r#"{"cdiVersion":"0.3.0","kind":"dra-1234.k8s.io/test","devices":[{"name":"claim-uid-1-req","containerEdits":{"env":["claim_external_claim_req=true","user_a=b"]}}]}"#.into(),
                },
                CdiFile {
                    name: "dra-1234.k8s.io-uid-1-second.json".into(),
                    content: r#"{"cdiVersion":"0.3.0","kind":"dra-1234.k8s.io/test","devices":[{"name":"claim-uid-1-second","containerEdits":{"env":["claim_external_claim_second=true"]}}]}"#.into(),
                },
            ]
        );
        assert_eq!(
            cdi_file_names(DRIVER, &c),
            [
                "dra-1234.k8s.io-uid-1-req.json",
                "dra-1234.k8s.io-uid-1-second.json"
            ]
        );
    }

    #[test]
    fn plan_requires_an_allocation() {
        let mut c = claim("c", "u", vec![], vec![]);
        c.status = None;
        assert_eq!(
            plan_claim(DRIVER, &c),
            Err(DriverLogicError::NotAllocated {
                namespace: "ns".into(),
                name: "c".into()
            })
        );
    }
}
