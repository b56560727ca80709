//! Device metadata (KEP-5304) as the kubeletplugin helper writes it when a
//! driver enables it: per prepared claim request, a JSON stream with one
//! `metadata.resource.k8s.io` `DeviceMetadata` object per enabled API version
//! (in the configured order), kept in the driver's plugin directory on the
//! node, and a CDI spec of kind `<driver>/metadata` that bind-mounts it
//! read-only at the well-known path inside every container that gets the
//! request's devices. Pure functions; [`super::dra`] writes the files.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};

use super::driver_logic::{base_request, driver_results, names_per_request};
use dra_e2e_conn::node_files::NodeFiles;
use dra_e2e_proto::dra::PreparedDevice;

/// API group of the metadata objects.
pub const GROUP: &str = "metadata.resource.k8s.io";
/// Kind of the metadata objects.
pub const KIND: &str = "DeviceMetadata";
/// Where the files appear inside containers.
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
/// Subdirectory of [`CONTAINER_DIR`] for claims a pod names directly.
pub const CLAIMS_SUBDIR: &str = "resourceclaims";
/// Subdirectory of [`CONTAINER_DIR`] for claims made from a template, keyed
/// by the pod's own name for the claim (the claim's name is generated).
pub const TEMPLATES_SUBDIR: &str = "resourceclaimtemplates";
/// The annotation the resource claim controller puts on generated claims.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// CDI version of the mount-only specs (bind mounts of files need 0.5.0 in
/// upstream's helper as well).
const CDI_VERSION: &str = "0.5.0";

/// A metadata API version a driver can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetadataVersion {
    V1beta1,
    V1alpha1,
}

impl MetadataVersion {
    pub fn version(self) -> &'static str {
        match self {
            MetadataVersion::V1beta1 => "v1beta1",
            MetadataVersion::V1alpha1 => "v1alpha1",
        }
    }

    /// `apiVersion` of the objects in this version.
    pub fn api_version(self) -> String {
        format!("{GROUP}/{}", self.version())
    }
}

impl std::str::FromStr for MetadataVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "v1beta1" => Ok(MetadataVersion::V1beta1),
            "v1alpha1" => Ok(MetadataVersion::V1alpha1),
            other => Err(format!(
                "unknown device metadata version {other:?}; known: v1beta1, v1alpha1"
            )),
        }
    }
}

/// What a plugin needs to write device metadata on its node.
#[derive(Clone)]
pub struct MetadataConfig {
    /// Encoded in this order into every file.
    pub versions: Vec<MetadataVersion>,
    /// The driver's plugin directory on the node, where the data files go.
    pub files: Arc<dyn NodeFiles>,
    /// That directory as a path on the node, for the CDI bind mounts.
    pub host_dir: String,
}

impl std::fmt::Debug for MetadataConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataConfig")
            .field("versions", &self.versions)
            .field("host_dir", &self.host_dir)
            .finish()
    }
}

/// The in-container path of a request's file for a claim the pod names.
pub fn claim_file_path(driver: &str, claim: &str, request: &str) -> String {
    format!("{CONTAINER_DIR}/{CLAIMS_SUBDIR}/{claim}/{request}/{driver}-metadata.json")
}

/// The in-container path of a request's file for a claim from a template.
pub fn template_file_path(driver: &str, pod_claim: &str, request: &str) -> String {
    format!("{CONTAINER_DIR}/{TEMPLATES_SUBDIR}/{pod_claim}/{request}/{driver}-metadata.json")
}

/// Data file of a request in the plugin directory (flat: one directory the
/// proxy pod already mounts).
pub fn data_file_name(claim_uid: &str, base_request: &str) -> String {
    format!("metadata_{claim_uid}_{base_request}.json")
}

/// CDI spec file of a request's metadata mount.
pub fn spec_file_name(driver: &str, claim_uid: &str, base_request: &str) -> String {
    format!("{driver}_metadata_{claim_uid}_{base_request}.json")
}

/// The data file belonging to a spec file named by [`spec_file_name`].
pub fn data_file_of_spec(driver: &str, spec_file: &str) -> Option<String> {
    let rest = spec_file.strip_prefix(driver)?.strip_prefix("_metadata_")?;
    Some(format!("metadata_{rest}"))
}

pub fn cdi_kind(driver: &str) -> String {
    format!("{driver}/metadata")
}

fn cdi_device_name(claim_uid: &str, base_request: &str) -> String {
    format!("{claim_uid}_{base_request}")
}

/// A file to write: its name and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub name: String,
    pub content: String,
}

/// What metadata adds to preparing one claim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataPlan {
    /// Into the plugin directory.
    pub data_files: Vec<File>,
    /// Into the CDI directory.
    pub spec_files: Vec<File>,
}

fn string_attr(v: &str) -> Value {
    json!({ "string": v })
}

/// One `DeviceMetadata` object in `version`.
fn object(
    version: MetadataVersion,
    claim: &ResourceClaim,
    pod_claim_name: Option<&str>,
    request: &str,
    devices: &[Value],
) -> Value {
    let mut o = json!({
        "kind": KIND,
        "apiVersion": version.api_version(),
        "metadata": {
            "name": claim.metadata.name.as_deref().unwrap_or_default(),
            "namespace": claim.metadata.namespace.as_deref().unwrap_or_default(),
            "uid": claim.metadata.uid.as_deref().unwrap_or_default(),
            // The helper writes generation 1 at prepare and counts up on
            // later updates of the same file.
            "generation": 1,
        },
        "requests": [ { "name": request, "devices": devices } ],
    });
    if let Some(p) = pod_claim_name {
        o["podClaimName"] = json!(p);
    }
    o
}

/// The metadata files of `claim`'s requests served by `driver`, and the CDI
/// device ID of each request's mount added to `devices` of that request.
pub fn plan(
    driver: &str,
    versions: &[MetadataVersion],
    host_dir: &str,
    claim: &ResourceClaim,
    devices: &mut [PreparedDevice],
) -> MetadataPlan {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let pod_claim_name = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
        .map(String::as_str)
        .filter(|p| !p.is_empty());
    // Base request -> (request as allocated, its devices).
    let mut by_request: BTreeMap<&str, (&str, Vec<Value>)> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for r in driver_results(driver, claim) {
        let base = base_request(&r.request);
        let entry = by_request.entry(base).or_insert_with(|| {
            order.push(base);
            (r.request.as_str(), Vec::new())
        });
        entry.1.push(json!({
            "driver": driver,
            "pool": r.pool,
            "name": r.device,
            "attributes": {
                "driverName": string_attr(driver),
                "pool": string_attr(&r.pool),
                "device": string_attr(&r.device),
            },
        }));
    }
    let mut plan = MetadataPlan::default();
    for base in order {
        let (request, devs) = &by_request[base];
        let mut content = String::new();
        for v in versions {
            let o = object(*v, claim, pod_claim_name, request, devs);
            content.push_str(&serde_json::to_string_pretty(&o).unwrap_or_default());
            content.push('\n');
        }
        let data = data_file_name(uid, base);
        let container_path = match pod_claim_name {
            Some(p) => template_file_path(driver, p, base),
            None => claim_file_path(driver, name, base),
        };
        let spec = json!({
            "cdiVersion": CDI_VERSION,
            "kind": cdi_kind(driver),
            "devices": [{
                "name": cdi_device_name(uid, base),
                "containerEdits": {
                    "mounts": [{
                        "hostPath": format!("{}/{data}", host_dir.trim_end_matches('/')),
                        "containerPath": container_path,
                        "options": ["ro", "bind"],
                    }],
                },
            }],
        });
        plan.data_files.push(File {
            name: data,
            content,
        });
        plan.spec_files.push(File {
            name: spec_file_name(driver, uid, base),
            content: spec.to_string(),
        });
        let id = format!("{}={}", cdi_kind(driver), cdi_device_name(uid, base));
        for d in devices
            .iter_mut()
            .filter(|d| d.request_names.iter().any(|n| n == base))
        {
            d.cdi_device_ids.push(id.clone());
        }
    }
    plan
}

/// Spec files [`plan`] writes for `claim`, for cleaning up after a claim the
/// plugin instance does not remember.
pub fn spec_file_names(driver: &str, claim: &ResourceClaim) -> Vec<String> {
    names_per_request(driver, claim, |uid, base| spec_file_name(driver, uid, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIVER: &str = "dra-1.k8s.io";

    fn claim(annotation: Option<&str>) -> ResourceClaim {
        let mut c: ResourceClaim = serde_json::from_value(json!({
            "metadata": { "name": "external-claim", "namespace": "ns", "uid": "u1" },
            "spec": {},
            "status": { "allocation": { "devices": { "results": [
                { "request": "req0", "driver": DRIVER, "pool": "node-a", "device": "device-00" },
                { "request": "req1", "driver": DRIVER, "pool": "node-a", "device": "device-01" },
                { "request": "req1", "driver": "other.k8s.io", "pool": "p", "device": "d" },
            ] } } },
        }))
        .unwrap();
        if let Some(a) = annotation {
            c.metadata.annotations =
                Some([(POD_CLAIM_NAME_ANNOTATION.to_owned(), a.to_owned())].into());
        }
        c
    }

    fn device(req: &str) -> PreparedDevice {
        PreparedDevice {
            request_names: vec![req.into()],
            pool_name: "node-a".into(),
            device_name: "d".into(),
            cdi_device_ids: vec!["x/test=y".into()],
            share_id: None,
        }
    }

    #[test]
    fn one_file_and_mount_per_request_each_device_gets_its_own() {
        let mut devices = vec![device("req0"), device("req1")];
        let p = plan(
            DRIVER,
            &[MetadataVersion::V1beta1, MetadataVersion::V1alpha1],
            "/var/lib/kubelet/plugins/dra-1.k8s.io",
            &claim(None),
            &mut devices,
        );
        assert_eq!(p.data_files.len(), 2);
        assert_eq!(p.data_files[0].name, "metadata_u1_req0.json");
        assert_eq!(p.spec_files[1].name, "dra-1.k8s.io_metadata_u1_req1.json");
        assert_eq!(
            devices[0].cdi_device_ids,
            ["x/test=y", "dra-1.k8s.io/metadata=u1_req0"]
        );
        assert_eq!(
            devices[1].cdi_device_ids,
            ["x/test=y", "dra-1.k8s.io/metadata=u1_req1"]
        );
        let objects: Vec<Value> = serde_json::Deserializer::from_str(&p.data_files[1].content)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["apiVersion"], "metadata.resource.k8s.io/v1beta1");
        assert_eq!(
            objects[1]["apiVersion"],
            "metadata.resource.k8s.io/v1alpha1"
        );
        assert_eq!(objects[0]["metadata"]["uid"], "u1");
        assert_eq!(objects[0]["metadata"]["generation"], 1);
        assert!(objects[0].get("podClaimName").is_none());
        let devs = objects[0]["requests"][0]["devices"].as_array().unwrap();
        assert_eq!(devs.len(), 1, "only this driver's devices: {devs:?}");
        assert_eq!(devs[0]["attributes"]["device"]["string"], "device-01");
        let spec: Value = serde_json::from_str(&p.spec_files[1].content).unwrap();
        let mount = &spec["devices"][0]["containerEdits"]["mounts"][0];
        assert_eq!(
            mount["hostPath"],
            "/var/lib/kubelet/plugins/dra-1.k8s.io/metadata_u1_req1.json"
        );
        assert_eq!(
            mount["containerPath"],
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/external-claim/req1/dra-1.k8s.io-metadata.json"
        );
        assert_eq!(
            data_file_of_spec(DRIVER, &p.spec_files[1].name).as_deref(),
            Some("metadata_u1_req1.json")
        );
    }

    #[test]
    fn generated_claims_are_mounted_under_the_pod_claim_name() {
        let mut devices = vec![device("req0")];
        let p = plan(
            DRIVER,
            &[MetadataVersion::V1beta1],
            "/d",
            &claim(Some("my-inline-claim")),
            &mut devices,
        );
        let spec: Value = serde_json::from_str(&p.spec_files[0].content).unwrap();
        assert_eq!(
            spec["devices"][0]["containerEdits"]["mounts"][0]["containerPath"],
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/my-inline-claim/req0/dra-1.k8s.io-metadata.json"
        );
        let o: Value = serde_json::from_str(&p.data_files[0].content).unwrap();
        assert_eq!(o["podClaimName"], "my-inline-claim");
    }
}
