//! Device metadata files (KEP-5304) as a container reads them: where the
//! file of a claim's request is inside a pod, what it must say, and the
//! check of what a container read, as upstream's
//! `testContainerMetadataFile` does.
//!
//! Why it exists: the check is the suite's definition of a correct file
//! (the metadata API's validation, then claim, request and devices as the
//! scenario made them), and it holds for any driver, the suite's own or one
//! under test. It decodes the file into the typed [`DeviceMetadata`] and
//! compares typed fields with [`Expected`], so a missing field, a wrong
//! type or an unexpected value each say what they are, and the steps only
//! locate the file and read it.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::Api;
use serde::Deserialize;
use serde_json::Value;

use dra_e2e_plugin::metadata::{self, GROUP, KIND, MetadataVersion};

/// The metadata object, as far as the check reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceMetadata {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub pod_claim_name: Option<String>,
    #[serde(default)]
    pub requests: Vec<Request>,
}

/// The claim the file describes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub generation: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Request {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Device {
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub pool: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, Attribute>>,
}

/// A device attribute: exactly one of its values is set in a valid file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Attribute {
    #[serde(default)]
    pub int: Option<i64>,
    #[serde(default)]
    pub bool: Option<bool>,
    #[serde(default)]
    pub string: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

impl Attribute {
    /// How many of its values are set.
    pub fn values(&self) -> usize {
        usize::from(self.int.is_some())
            + usize::from(self.bool.is_some())
            + usize::from(self.string.is_some())
            + usize::from(self.version.is_some())
    }
}

impl std::fmt::Display for Attribute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut set = Vec::new();
        if let Some(v) = self.int {
            set.push(format!("int {v}"));
        }
        if let Some(v) = self.bool {
            set.push(format!("bool {v}"));
        }
        if let Some(v) = &self.string {
            set.push(format!("string {v:?}"));
        }
        if let Some(v) = &self.version {
            set.push(format!("version {v:?}"));
        }
        if set.is_empty() {
            return f.write_str("no value");
        }
        f.write_str(&set.join(", "))
    }
}

/// What one metadata file must say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// `apiVersion` of the object a reader picks from the stream.
    pub api_version: String,
    pub claim_name: String,
    pub namespace: String,
    pub uid: String,
    pub pod_claim_name: Option<String>,
    pub request: String,
    pub driver: String,
}

impl Expected {
    /// The file of `request` of `claim` as `driver` writes it in `version`;
    /// `pod_claim_name` is the pod's name for a claim made from a template.
    pub fn of(
        claim: &ResourceClaim,
        version: MetadataVersion,
        pod_claim_name: Option<String>,
        request: &str,
        driver: &str,
    ) -> Expected {
        Expected {
            api_version: version.api_version(),
            claim_name: claim.metadata.name.clone().unwrap_or_default(),
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            uid: claim.metadata.uid.clone().unwrap_or_default(),
            pod_claim_name,
            request: request.to_owned(),
            driver: driver.to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("decode metadata file {path}: {source}")]
    Decode {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "decode metadata file {path}: no compatible {GROUP} {KIND} object in the stream: {stream:?}"
    )]
    NoCompatible { path: String, stream: String },
    #[error("validation of metadata file {path}: {what}")]
    Invalid { path: String, what: String },
    /// The file is valid but not what the scenario made; the message names
    /// the field, what it is and what was expected.
    #[error("{0}")]
    Differs(String),
    #[error("pod {pod} neither names claim {claim} nor has it in its resourceClaimStatuses")]
    NotInPod { pod: String, claim: String },
    #[error("reading {what}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// The metadata file of `request` of claim `claim` in pod `pod`, as both
/// are now: where it is in the pod's containers ([`file_in`]) and what it
/// must say when `driver` writes it in `version` ([`Expected::of`]).
pub async fn locate(
    claims: &Api<ResourceClaim>,
    pods: &Api<Pod>,
    claim: &str,
    pod: &str,
    driver: &str,
    request: &str,
    version: MetadataVersion,
) -> Result<(String, Expected), MetadataError> {
    let read = |what: String| move |source| MetadataError::Read { what, source };
    let object = claims
        .get(claim)
        .await
        .map_err(read(format!("claim {claim}")))?;
    let p = pods.get(pod).await.map_err(read(format!("pod {pod}")))?;
    let (path, pod_claim_name) = file_in(&p, claim, driver, request)?;
    let expected = Expected::of(&object, version, pod_claim_name, request, driver);
    Ok((path, expected))
}

/// Where the file of `request` of the claim named `claim` is inside `pod`'s
/// containers, and the pod's own name for the claim when it has one: a
/// claim the pod names directly sits under its own name, one made from a
/// template under the pod's name for it.
pub fn file_in(
    pod: &Pod,
    claim: &str,
    driver: &str,
    request: &str,
) -> Result<(String, Option<String>), MetadataError> {
    let direct = pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .any(|c| c.resource_claim_name.as_deref() == Some(claim));
    if direct {
        return Ok((metadata::claim_file_path(driver, claim, request), None));
    }
    pod.status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .find(|s| s.resource_claim_name.as_deref() == Some(claim))
        .map(|s| {
            (
                metadata::template_file_path(driver, &s.name, request),
                Some(s.name.clone()),
            )
        })
        .ok_or_else(|| MetadataError::NotInPod {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            claim: claim.to_owned(),
        })
}

/// The first object of the stream in a version a reader knows, as the
/// decoder of the kubeletplugin library picks it; a stream that is not JSON
/// fails, and so does the picked object if it does not decode.
pub fn decode(path: &str, stream: &str) -> Result<DeviceMetadata, MetadataError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Header {
        api_version: String,
        kind: String,
    }
    let known = [
        MetadataVersion::V1beta1.api_version(),
        MetadataVersion::V1alpha1.api_version(),
    ];
    let decode_error = |source| MetadataError::Decode {
        path: path.to_owned(),
        source,
    };
    for item in serde_json::Deserializer::from_str(stream).into_iter::<Value>() {
        let v = item.map_err(decode_error)?;
        let Ok(header) = Header::deserialize(&v) else {
            continue;
        };
        if header.kind == KIND && known.contains(&header.api_version) {
            return DeviceMetadata::deserialize(v).map_err(decode_error);
        }
    }
    Err(MetadataError::NoCompatible {
        path: path.to_owned(),
        stream: stream.to_owned(),
    })
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str, max: usize) -> bool {
    s.len() <= max && s.split('.').all(is_dns_label)
}

/// The validation of the metadata API: what makes a file invalid whatever
/// the test expects of it.
pub fn validate(path: &str, o: &DeviceMetadata) -> Result<(), MetadataError> {
    let invalid = |what: String| MetadataError::Invalid {
        path: path.to_owned(),
        what,
    };
    if let Some(p) = &o.pod_claim_name
        && !is_dns_label(p)
    {
        return Err(invalid(format!("podClaimName {p:?} is not a DNS label")));
    }
    for (i, r) in o.requests.iter().enumerate() {
        if r.name.is_empty() {
            return Err(invalid(format!("requests[{i}].name is required")));
        }
        for (j, d) in r.devices.iter().enumerate() {
            let at = format!("requests[{i}].devices[{j}]");
            if !is_dns_subdomain(&d.driver, 63) {
                return Err(invalid(format!(
                    "{at}.driver {:?} is not a DNS subdomain of at most 63 characters",
                    d.driver
                )));
            }
            let pool = &d.pool;
            if pool.is_empty()
                || pool.len() > 253
                || !pool.split('/').all(|p| is_dns_subdomain(p, 253))
            {
                return Err(invalid(format!("{at}.pool {pool:?} is not a pool name")));
            }
            if !is_dns_label(&d.name) {
                return Err(invalid(format!(
                    "{at}.name {:?} is not a DNS label",
                    d.name
                )));
            }
            let attributes = d.attributes.as_ref();
            if let Some(n) = attributes.map(BTreeMap::len).filter(|n| *n > 32) {
                return Err(invalid(format!(
                    "{at}.attributes has {n} entries, at most 32"
                )));
            }
            for (k, v) in attributes.into_iter().flatten() {
                if v.values() != 1 {
                    return Err(invalid(format!(
                        "{at}.attributes[{k}] must have exactly one value, has {}",
                        v.values()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Upstream's checks of one file's content: valid, and the object `e`
/// describes.
pub fn check(path: &str, stream: &str, e: &Expected) -> Result<(), MetadataError> {
    let o = decode(path, stream)?;
    validate(path, &o)?;
    compare(path, &o, e).map_err(MetadataError::Differs)
}

/// The first field of `o` that is not as `e` says, described.
fn compare(path: &str, o: &DeviceMetadata, e: &Expected) -> Result<(), String> {
    if o.api_version != e.api_version {
        return Err(format!(
            "metadata file {path}: apiVersion {}, expected {}",
            o.api_version, e.api_version
        ));
    }
    let fields = [
        ("claim name", &o.metadata.name, &e.claim_name),
        ("claim namespace", &o.metadata.namespace, &e.namespace),
        ("claim UID", &o.metadata.uid, &e.uid),
    ];
    for (what, got, want) in fields {
        if got != want {
            return Err(format!("{what} in {path} is {got:?}, expected {want:?}"));
        }
    }
    // The helper writes generation 1 at prepare.
    if o.metadata.generation != Some(1) {
        return Err(format!(
            "metadata generation in {path} is {:?}, expected 1",
            o.metadata.generation
        ));
    }
    if o.pod_claim_name != e.pod_claim_name {
        return Err(format!(
            "pod claim name in {path} is {:?}, expected {:?}",
            o.pod_claim_name, e.pod_claim_name
        ));
    }
    let [req] = o.requests.as_slice() else {
        return Err(format!(
            "requests in {path}: expected exactly 1, got {}",
            o.requests.len()
        ));
    };
    if req.name != e.request {
        return Err(format!(
            "request name in {path} is {:?}, expected {:?}",
            req.name, e.request
        ));
    }
    if req.devices.is_empty() {
        return Err(format!("devices in request {} of {path}: none", req.name));
    }
    for d in &req.devices {
        if d.driver != e.driver {
            return Err(format!(
                "device driver in {path} is {:?}, expected {:?}",
                d.driver, e.driver
            ));
        }
        if d.pool.is_empty() || d.name.is_empty() {
            return Err(format!(
                "device pool {:?} or name {:?} in {path} is empty",
                d.pool, d.name
            ));
        }
        // The attributes the helper adds to every device.
        for (attr, want) in [
            ("driverName", &e.driver),
            ("pool", &d.pool),
            ("device", &d.name),
        ] {
            let Some(a) = d.attributes.as_ref().and_then(|a| a.get(attr)) else {
                return Err(format!("metadata attribute {attr:?} in {path} is missing"));
            };
            match &a.string {
                Some(got) if got == want => {}
                Some(got) => {
                    return Err(format!(
                        "metadata attribute {attr:?} in {path} is {got:?}, expected {want:?}"
                    ));
                }
                None => {
                    return Err(format!(
                        "metadata attribute {attr:?} in {path} has no string value: {a}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PATH: &str = "/f";

    fn expected() -> Expected {
        Expected {
            api_version: "metadata.resource.k8s.io/v1beta1".into(),
            claim_name: "external-claim".into(),
            namespace: "ns".into(),
            uid: "u1".into(),
            pod_claim_name: None,
            request: "my-request".into(),
            driver: "ns.k8s.io".into(),
        }
    }

    fn good() -> Value {
        json!({
            "kind": "DeviceMetadata",
            "apiVersion": "metadata.resource.k8s.io/v1beta1",
            "metadata": { "name": "external-claim", "namespace": "ns", "uid": "u1", "generation": 1 },
            "requests": [ { "name": "my-request", "devices": [ {
                "driver": "ns.k8s.io", "pool": "node-a", "name": "device-00",
                "attributes": {
                    "driverName": { "string": "ns.k8s.io" },
                    "pool": { "string": "node-a" },
                    "device": { "string": "device-00" },
                },
            } ] } ],
        })
    }

    fn fails_with(o: Value, want: &str) {
        let e = check(PATH, &o.to_string(), &expected()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{msg}");
    }

    fn claim() -> ResourceClaim {
        serde_json::from_value(json!({
            "metadata": { "name": "external-claim", "namespace": "ns", "uid": "u1" },
            "spec": {},
            "status": { "allocation": { "devices": { "results": [
                { "request": "my-request", "driver": "ns.k8s.io", "pool": "node-a", "device": "device-00" },
            ] } } },
        }))
        .unwrap()
    }

    #[test]
    fn a_good_file_decodes_into_its_fields() {
        let o = decode(PATH, &good().to_string()).unwrap();
        assert_eq!(o.metadata.generation, Some(1));
        assert_eq!(o.requests[0].devices[0].pool, "node-a");
        let attrs = o.requests[0].devices[0].attributes.as_ref().unwrap();
        assert_eq!(attrs["device"].string.as_deref(), Some("device-00"));
        assert_eq!(attrs["device"].values(), 1);
        assert_eq!(
            Attribute {
                int: Some(1),
                string: Some("a".into()),
                ..Attribute::default()
            }
            .to_string(),
            "int 1, string \"a\""
        );
    }

    #[test]
    fn the_drivers_own_files_pass() {
        // What the plugin writes, in both versions (v1beta1 first).
        let mut devices = Vec::new();
        let mut claim = claim();
        let plan = metadata::plan(
            "ns.k8s.io",
            &[MetadataVersion::V1beta1, MetadataVersion::V1alpha1],
            "/d",
            &claim,
            &mut devices,
        );
        let e = Expected::of(
            &claim,
            MetadataVersion::V1beta1,
            None,
            "my-request",
            "ns.k8s.io",
        );
        assert_eq!(e, expected());
        check(PATH, &plan.data_files[0].content, &e).unwrap();
        claim.metadata.annotations = Some(
            [(
                metadata::POD_CLAIM_NAME_ANNOTATION.to_owned(),
                "my-inline-claim".to_owned(),
            )]
            .into(),
        );
        let plan = metadata::plan(
            "ns.k8s.io",
            &[MetadataVersion::V1alpha1],
            "/d",
            &claim,
            &mut devices,
        );
        let e = Expected {
            api_version: "metadata.resource.k8s.io/v1alpha1".into(),
            pod_claim_name: Some("my-inline-claim".into()),
            ..expected()
        };
        check(PATH, &plan.data_files[0].content, &e).unwrap();
    }

    #[test]
    fn every_field_check_fails_on_its_broken_variant() {
        let mut o = good();
        o["apiVersion"] = json!("metadata.resource.k8s.io/v1alpha1");
        fails_with(o, "apiVersion metadata.resource.k8s.io/v1alpha1, expected");
        let mut o = good();
        o["apiVersion"] = json!("metadata.resource.k8s.io/v9");
        fails_with(
            o,
            "no compatible metadata.resource.k8s.io DeviceMetadata object",
        );
        fails_with(json!("not an object"), "no compatible");
        let e = check(PATH, "{not json", &expected()).unwrap_err();
        assert!(e.to_string().contains("decode metadata file /f"), "{e}");
        let cases: [(&str, Value, &str); 15] = [
            (
                "/metadata/name",
                json!("other"),
                "claim name in /f is \"other\"",
            ),
            (
                "/metadata/namespace",
                json!("x"),
                "claim namespace in /f is \"x\"",
            ),
            ("/metadata/uid", json!("u2"), "claim UID in /f is \"u2\""),
            (
                "/metadata/generation",
                json!(2),
                "metadata generation in /f is Some(2)",
            ),
            (
                "/requests/0/name",
                json!("req0"),
                "request name in /f is \"req0\"",
            ),
            (
                "/requests/0/name",
                json!(""),
                "requests[0].name is required",
            ),
            (
                "/requests/0/devices",
                json!([]),
                "devices in request my-request of /f: none",
            ),
            (
                "/requests/0/devices/0/driver",
                json!("b.k8s.io"),
                "device driver in /f is \"b.k8s.io\"",
            ),
            (
                "/requests/0/devices/0/attributes/pool",
                json!({ "string": "other" }),
                "metadata attribute \"pool\" in /f is \"other\", expected \"node-a\"",
            ),
            (
                "/requests/0/devices/0/attributes/device",
                json!({ "int": 1 }),
                "metadata attribute \"device\" in /f has no string value: int 1",
            ),
            (
                "/requests/0/devices/0/attributes/driverName",
                json!({ "string": "a", "int": 1 }),
                "attributes[driverName] must have exactly one value, has 2",
            ),
            (
                "/requests/0/devices/0/name",
                json!("Not_A_Label"),
                "validation of metadata file /f",
            ),
            (
                "/requests/0/devices/0/pool",
                json!(""),
                "is not a pool name",
            ),
            // A value of the wrong type: the file does not decode.
            (
                "/metadata/generation",
                json!("1"),
                "decode metadata file /f: invalid type: string \"1\", expected i64",
            ),
            (
                "/requests/0/devices/0/attributes",
                json!(["driverName"]),
                "decode metadata file /f: invalid type: sequence, expected a map",
            ),
        ];
        for (pointer, value, want) in cases {
            let mut o = good();
            *o.pointer_mut(pointer).unwrap() = value;
            fails_with(o, want);
        }
        let mut o = good();
        o["podClaimName"] = json!("my-inline-claim");
        fails_with(
            o,
            "pod claim name in /f is Some(\"my-inline-claim\"), expected None",
        );
        let mut o = good();
        o["podClaimName"] = json!("Not A Label");
        fails_with(o, "podClaimName \"Not A Label\" is not a DNS label");
        let mut o = good();
        o["requests"] = json!([good()["requests"][0], good()["requests"][0]]);
        fails_with(o, "requests in /f: expected exactly 1, got 2");
        let mut o = good();
        o["requests"][0]["devices"][0]["attributes"]
            .as_object_mut()
            .unwrap()
            .remove("driverName");
        fails_with(o, "metadata attribute \"driverName\" in /f is missing");
    }

    #[test]
    fn a_reader_takes_the_first_version_it_knows() {
        let mut old = good();
        old["apiVersion"] = json!("metadata.resource.k8s.io/v1alpha1");
        let mut future = good();
        future["apiVersion"] = json!("metadata.resource.k8s.io/v2");
        let stream = format!("{future}\n{old}\n{}\n", good());
        let e = check(PATH, &stream, &expected()).unwrap_err();
        assert!(
            e.to_string()
                .contains("apiVersion metadata.resource.k8s.io/v1alpha1"),
            "{e}"
        );
    }

    #[test]
    fn the_file_of_a_claim_is_under_the_pods_name_for_it() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "p" },
            "spec": {
                "containers": [],
                "resourceClaims": [
                    { "name": "direct", "resourceClaimName": "external-claim" },
                    { "name": "my-inline-claim", "resourceClaimTemplateName": "t" },
                ],
            },
            "status": { "resourceClaimStatuses": [
                { "name": "my-inline-claim", "resourceClaimName": "p-my-inline-claim-x1" },
            ] },
        }))
        .unwrap();
        let (path, pod_claim) = file_in(&pod, "external-claim", "d.k8s.io", "r").unwrap();
        assert_eq!(
            path,
            metadata::claim_file_path("d.k8s.io", "external-claim", "r")
        );
        assert_eq!(pod_claim, None);
        let (path, pod_claim) = file_in(&pod, "p-my-inline-claim-x1", "d.k8s.io", "r").unwrap();
        assert_eq!(
            path,
            metadata::template_file_path("d.k8s.io", "my-inline-claim", "r")
        );
        assert_eq!(pod_claim.as_deref(), Some("my-inline-claim"));
        let e = file_in(&pod, "other", "d.k8s.io", "r").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pod p neither names claim other nor has it in its resourceClaimStatuses"
        );
    }
}
