//! Device metadata files (KEP-5304) as containers see them: read by exec at
//! the well-known path, decoded and checked field by field as upstream's
//! `testContainerMetadataFile` does.
use anyhow::{Context as _, bail};
use cucumber::then;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::Value;

use super::claims::claim_name;
use super::params::{ClaimPhrase, DriverRef};
use super::pods::wait_pod;
use super::{World, context};
use crate::plugin::metadata::{self, GROUP, KIND};
use crate::proxy::exec::{ExecError, ExecTarget, exec_capture};

sentences! {
    #[then(expr = "container {string} of pod {string} reads the {word} device metadata of request {string} of {claim}")]
    fn reads(container: String, pod: String, version: String, request: String, claim: ClaimPhrase);

    #[then(expr = "container {string} of pod {string} reads the {word} device metadata of request {string} of {claim} written by {driver}")]
    fn reads_from(container: String, pod: String, version: String, request: String, claim: ClaimPhrase, d: DriverRef);

    #[then(expr = "container {string} of pod {string} cannot read the device metadata of request {string} of {claim}")]
    fn cannot_read(container: String, pod: String, request: String, claim: ClaimPhrase);
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

/// Where the file of `request` of the claim named `claim` is inside `pod`'s
/// containers, and whether the pod knows the claim by a pod-local name: a
/// claim the pod names directly sits under its own name, one made from a
/// template under the pod's name for it.
fn file_of(
    pod: &Pod,
    claim: &str,
    driver: &str,
    request: &str,
) -> anyhow::Result<(String, Option<String>)> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let direct = pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .any(|c| c.resource_claim_name.as_deref() == Some(claim));
    if direct {
        return Ok((metadata::claim_file_path(driver, claim, request), None));
    }
    let generated = pod
        .status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .find(|s| s.resource_claim_name.as_deref() == Some(claim));
    match generated {
        Some(s) => Ok((
            metadata::template_file_path(driver, &s.name, request),
            Some(s.name.clone()),
        )),
        None => {
            bail!("pod {name} neither names claim {claim} nor has it in its resourceClaimStatuses")
        }
    }
}

async fn locate(
    w: &World,
    container: &str,
    pod: &str,
    request: &str,
    claim: &ClaimPhrase,
    d: &DriverRef,
) -> anyhow::Result<(ExecTarget, String, Expected)> {
    wait_pod(w, pod, crate::wait::PodState::Running).await?;
    let driver = w.driver(d)?.name.clone();
    let claim = claim_name(w, claim).await?;
    let object = w
        .api::<ResourceClaim>()?
        .get(&claim)
        .await
        .with_context(|| format!("reading claim {claim}"))?;
    let p = w
        .api::<Pod>()?
        .get(pod)
        .await
        .with_context(|| format!("reading pod {pod}"))?;
    let (path, pod_claim_name) = file_of(&p, &claim, &driver, request)?;
    let target = ExecTarget {
        namespace: w.namespace.clone(),
        pod: pod.to_owned(),
        container: container.to_owned(),
    };
    let expected = Expected {
        api_version: String::new(),
        claim_name: claim,
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        pod_claim_name,
        request: request.to_owned(),
        driver,
    };
    Ok((target, path, expected))
}

async fn read(target: &ExecTarget, path: &str) -> Result<(String, String), ExecError> {
    let client = context().map_err(|e| ExecError::Failed {
        target: target.to_string(),
        command: format!("cat {path}"),
        message: e.to_string(),
        stderr: String::new(),
    })?;
    let client = client.cluster.client();
    exec_capture(&client, target, vec!["cat".into(), path.into()])
        .await
        .map(|o| (o.stdout, o.stderr))
}

async fn reads(
    w: &World,
    container: String,
    pod: String,
    version: String,
    request: String,
    claim: ClaimPhrase,
) -> anyhow::Result<()> {
    reads_from(w, container, pod, version, request, claim, DriverRef::The).await
}

async fn reads_from(
    w: &World,
    container: String,
    pod: String,
    version: String,
    request: String,
    claim: ClaimPhrase,
    d: DriverRef,
) -> anyhow::Result<()> {
    let version: metadata::MetadataVersion =
        version.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let (target, path, mut expected) = locate(w, &container, &pod, &request, &claim, &d).await?;
    expected.api_version = version.api_version();
    let (stdout, stderr) = read(&target, &path)
        .await
        .with_context(|| format!("container {container} of pod {pod} cannot read {path}"))?;
    if !stderr.is_empty() {
        bail!("reading {path} in container {container} of pod {pod} printed to stderr: {stderr}");
    }
    check(&path, &stdout, &expected)
}

async fn cannot_read(
    w: &World,
    container: String,
    pod: String,
    request: String,
    claim: ClaimPhrase,
) -> anyhow::Result<()> {
    let (target, path, _) = locate(w, &container, &pod, &request, &claim, &DriverRef::The).await?;
    match read(&target, &path).await {
        // The command ran and failed: the file is not there.
        Err(ExecError::Failed { .. }) => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "could not try to read {path} in container {container} of pod {pod}"
        ))),
        Ok((stdout, _)) => bail!(
            "container {container} of pod {pod} can read {path} ({} bytes): the file must not be \
             mounted there, only in containers that get the request's devices",
            stdout.len()
        ),
    }
}

/// The first object of the stream in a version a reader knows, as the
/// decoder of the kubeletplugin library picks it; a stream that is not JSON
/// fails.
fn first_known(path: &str, stream: &str) -> anyhow::Result<Value> {
    let known = [
        metadata::MetadataVersion::V1beta1.api_version(),
        metadata::MetadataVersion::V1alpha1.api_version(),
    ];
    for item in serde_json::Deserializer::from_str(stream).into_iter::<Value>() {
        let v = item.with_context(|| format!("decode metadata file {path}"))?;
        let api = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if v.get("kind").and_then(Value::as_str) == Some(KIND) && known.iter().any(|k| k == api) {
            return Ok(v);
        }
    }
    bail!(
        "decode metadata file {path}: no compatible {GROUP} {KIND} object in the stream: {stream:?}"
    )
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
fn validate(path: &str, o: &Value) -> anyhow::Result<()> {
    let invalid = |what: String| anyhow::anyhow!("validation of metadata file {path}: {what}");
    if let Some(p) = o.get("podClaimName") {
        match p.as_str() {
            Some(p) if is_dns_label(p) => {}
            _ => return Err(invalid(format!("podClaimName {p} is not a DNS label"))),
        }
    }
    let requests = o.get("requests").and_then(Value::as_array);
    for (i, r) in requests.into_iter().flatten().enumerate() {
        if r.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            return Err(invalid(format!("requests[{i}].name is required")));
        }
        let devices = r.get("devices").and_then(Value::as_array);
        for (j, d) in devices.into_iter().flatten().enumerate() {
            let field = |f: &str| d.get(f).and_then(Value::as_str).unwrap_or_default();
            let at = format!("requests[{i}].devices[{j}]");
            if !is_dns_subdomain(field("driver"), 63) {
                return Err(invalid(format!(
                    "{at}.driver {:?} is not a DNS subdomain of at most 63 characters",
                    field("driver")
                )));
            }
            let pool = field("pool");
            if pool.is_empty()
                || pool.len() > 253
                || !pool.split('/').all(|p| is_dns_subdomain(p, 253))
            {
                return Err(invalid(format!("{at}.pool {pool:?} is not a pool name")));
            }
            if !is_dns_label(field("name")) {
                return Err(invalid(format!(
                    "{at}.name {:?} is not a DNS label",
                    field("name")
                )));
            }
            if let Some(attrs) = d.get("attributes") {
                let Some(attrs) = attrs.as_object() else {
                    return Err(invalid(format!("{at}.attributes is not a map")));
                };
                if attrs.len() > 32 {
                    return Err(invalid(format!(
                        "{at}.attributes has {} entries, at most 32",
                        attrs.len()
                    )));
                }
                for (k, v) in attrs {
                    let values = ["int", "bool", "string", "version"]
                        .iter()
                        .filter(|t| v.get(**t).is_some())
                        .count();
                    if values != 1 {
                        return Err(invalid(format!(
                            "{at}.attributes[{k}] must have exactly one value, has {values}"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Upstream's checks of one file's content.
pub fn check(path: &str, stream: &str, e: &Expected) -> anyhow::Result<()> {
    let o = first_known(path, stream)?;
    validate(path, &o)?;
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let api = str_at(&o, "/apiVersion").unwrap_or_default();
    if api != e.api_version {
        bail!(
            "metadata file {path}: apiVersion {api}, expected {}",
            e.api_version
        );
    }
    let fields = [
        ("claim name", "/metadata/name", &e.claim_name),
        ("claim namespace", "/metadata/namespace", &e.namespace),
        ("claim UID", "/metadata/uid", &e.uid),
    ];
    for (what, p, want) in fields {
        let got = str_at(&o, p).unwrap_or_default();
        if got != *want {
            bail!("{what} in {path} is {got:?}, expected {want:?}");
        }
    }
    let generation = o.pointer("/metadata/generation").and_then(Value::as_i64);
    if generation != Some(1) {
        bail!("metadata generation in {path} is {generation:?}, expected 1");
    }
    let pod_claim = str_at(&o, "/podClaimName");
    if pod_claim != e.pod_claim_name {
        bail!(
            "pod claim name in {path} is {pod_claim:?}, expected {:?}",
            e.pod_claim_name
        );
    }
    let requests = o
        .get("requests")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let [req] = requests.as_slice() else {
        bail!(
            "requests in {path}: expected exactly 1, got {}",
            requests.len()
        );
    };
    let name = str_at(req, "/name").unwrap_or_default();
    if name != e.request {
        bail!(
            "request name in {path} is {name:?}, expected {:?}",
            e.request
        );
    }
    let devices = req
        .get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if devices.is_empty() {
        bail!("devices in request {name} of {path}: none");
    }
    for d in &devices {
        let driver = str_at(d, "/driver").unwrap_or_default();
        if driver != e.driver {
            bail!(
                "device driver in {path} is {driver:?}, expected {:?}",
                e.driver
            );
        }
        let pool = str_at(d, "/pool").unwrap_or_default();
        let device = str_at(d, "/name").unwrap_or_default();
        if pool.is_empty() || device.is_empty() {
            bail!("device pool {pool:?} or name {device:?} in {path} is empty");
        }
        for (attr, want) in [
            ("driverName", &e.driver),
            ("pool", &pool),
            ("device", &device),
        ] {
            let Some(a) = d.pointer(&format!("/attributes/{attr}")) else {
                bail!("metadata attribute {attr:?} in {path} is missing");
            };
            match a.get("string").and_then(Value::as_str) {
                Some(got) if got == want => {}
                Some(got) => {
                    bail!("metadata attribute {attr:?} in {path} is {got:?}, expected {want:?}")
                }
                None => bail!("metadata attribute {attr:?} in {path} has no string value: {a}"),
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
        let msg = format!("{e:#}");
        assert!(msg.contains(want), "{msg}");
    }

    #[test]
    fn the_drivers_own_files_pass() {
        // What the plugin writes, in both versions (v1beta1 first).
        let mut devices = Vec::new();
        let mut claim: ResourceClaim = serde_json::from_value(json!({
            "metadata": { "name": "external-claim", "namespace": "ns", "uid": "u1" },
            "spec": {},
            "status": { "allocation": { "devices": { "results": [
                { "request": "my-request", "driver": "ns.k8s.io", "pool": "node-a", "device": "device-00" },
            ] } } },
        }))
        .unwrap();
        let plan = metadata::plan(
            "ns.k8s.io",
            &[
                metadata::MetadataVersion::V1beta1,
                metadata::MetadataVersion::V1alpha1,
            ],
            "/d",
            &claim,
            &mut devices,
        );
        check(PATH, &plan.data_files[0].content, &expected()).unwrap();
        claim.metadata.annotations = Some(
            [(
                metadata::POD_CLAIM_NAME_ANNOTATION.to_owned(),
                "my-inline-claim".to_owned(),
            )]
            .into(),
        );
        let plan = metadata::plan(
            "ns.k8s.io",
            &[metadata::MetadataVersion::V1alpha1],
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
        assert!(
            format!("{e:#}").contains("decode metadata file /f"),
            "{e:#}"
        );
        let cases: [(&str, Value, &str); 12] = [
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
                "metadata attribute \"device\" in /f has no string value",
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
        assert!(format!("{e:#}").contains("apiVersion metadata.resource.k8s.io/v1alpha1"));
    }
}
