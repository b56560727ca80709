//! Builders for the objects DRA scenarios create, named as upstream names them
//! (`<namespace>-class`, `external-claim`, `tester-1`, request `my-request`, ...)
//! so failures read the same as in the Go suite.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
};
use serde_json::{Value, json};

/// The default request name of claims built here.
pub const REQUEST: &str = "my-request";
/// Pod-level claim name of a pod using an inline (template) claim.
pub const INLINE_CLAIM: &str = "my-inline-claim";
/// Pod-level claim name of a pod using one external claim.
pub const EXTERNAL_POD_CLAIM: &str = "resource-claim";
/// Name of the first container of test pods.
pub const CONTAINER: &str = "with-resource";
/// Image of test containers, upstream's default test image (e2epod's
/// `GetDefaultTestImage`): it has `sh` for the containers' scripts and `env`
/// for reading a container's env by exec. Simulated nodes never pull it.
pub const TEST_IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1";
/// The script of test containers without a command, upstream's
/// `e2epod.InfiniteSleepCommand`: it runs until the container is stopped and
/// exits at once on SIGTERM, so deleting a pod does not wait out the grace
/// period. Simulated nodes know it runs until deleted.
pub const SLEEP_UNTIL_TERMINATED: &str = "trap exit TERM; while true; do sleep 1; done";
/// The env entry upstream's init container checks: the default claim config
/// `{"a":"b"}` as the test driver passes it to containers.
pub const DEFAULT_USER_ENV: &str = "user_a=b";
/// Name of the init container of test pods.
pub const INIT_CONTAINER: &str = "init";

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("building {kind} {name}: {source}")]
    Build {
        kind: &'static str,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

fn build<T: serde::de::DeserializeOwned>(
    kind: &'static str,
    name: &str,
    value: Value,
) -> Result<T, ObjectError> {
    serde_json::from_value(value).map_err(|source| ObjectError::Build {
        kind,
        name: name.to_owned(),
        source,
    })
}

/// Deletes `name`, taking "not found" for done: a cleanup must not fail
/// because a step, a controller or an earlier cleanup removed it first.
pub async fn delete_if_present<K>(
    api: &kube::Api<K>,
    name: &str,
    dp: &kube::api::DeleteParams,
) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A DeviceClass selecting every device of `driver`, with optional opaque
/// class parameters (they reach containers as `admin_<k>=<v>`).
pub fn device_class(
    name: &str,
    driver: &str,
    parameters: Option<&Value>,
    selector: Option<&str>,
) -> Result<DeviceClass, ObjectError> {
    let expression = selector
        .map(str::to_owned)
        .unwrap_or_else(|| format!("device.driver == \"{driver}\""));
    let mut spec = json!({ "selectors": [ { "cel": { "expression": expression } } ] });
    if let Some(p) = parameters {
        spec["config"] = json!([ { "opaque": { "driver": driver, "parameters": p } } ]);
    }
    build(
        "DeviceClass",
        name,
        json!({ "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": { "name": name }, "spec": spec }),
    )
}

/// Effects a device taint can have.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "NoExecute", "None"];

/// A toleration of device taints, written `[key[=value]][:Effect]`: `NoSchedule`
/// tolerates every NoSchedule taint, `example.com/t=x:NoExecute` exactly that
/// one, `example.com/t` any taint with that key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToleration {
    pub key: Option<String>,
    /// With a value the operator is `Equal`, without it `Exists`.
    pub value: Option<String>,
    pub effect: Option<String>,
}

impl DeviceToleration {
    fn to_json(&self) -> Value {
        let mut t = json!({
            "operator": if self.value.is_some() { "Equal" } else { "Exists" },
        });
        if let Some(k) = &self.key {
            t["key"] = json!(k);
        }
        if let Some(v) = &self.value {
            t["value"] = json!(v);
        }
        if let Some(e) = &self.effect {
            t["effect"] = json!(e);
        }
        t
    }
}

impl std::str::FromStr for DeviceToleration {
    type Err = ObjectError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (selector, effect) = if TAINT_EFFECTS.contains(&s) {
            ("", Some(s))
        } else {
            match s.rsplit_once(':') {
                Some((sel, e)) if TAINT_EFFECTS.contains(&e) => (sel, Some(e)),
                Some((_, e)) => {
                    return Err(ObjectError::Invalid(format!(
                        "toleration {s:?}: effect {e:?} must be NoSchedule, NoExecute or None"
                    )));
                }
                None => (s, None),
            }
        };
        let (key, value) = match selector.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (selector, None),
        };
        if key.is_empty() && value.is_some() {
            return Err(ObjectError::Invalid(format!(
                "toleration {s:?}: a value needs a key (key=value:Effect)"
            )));
        }
        if key.is_empty() && effect.is_none() {
            return Err(ObjectError::Invalid(
                "an empty toleration; write an effect (NoSchedule), a key, or key=value:Effect"
                    .to_owned(),
            ));
        }
        Ok(Self {
            key: (!key.is_empty()).then(|| key.to_owned()),
            value: value.map(str::to_owned),
            effect: effect.map(str::to_owned),
        })
    }
}

/// What a claim built here asks for.
#[derive(Debug, Clone)]
pub struct ClaimShape {
    pub class: String,
    pub driver: String,
    /// Opaque claim parameters for the driver (`user_<k>=<v>` in containers).
    pub parameters: Option<Value>,
    pub admin_access: bool,
    /// Extra CEL selectors on the request.
    pub selectors: Vec<String>,
    /// Device taints the request tolerates.
    pub tolerations: Vec<DeviceToleration>,
}

impl ClaimShape {
    /// Upstream's default: one request `my-request`, config `{"a":"b"}`.
    pub fn default_for(class: &str, driver: &str) -> Self {
        Self {
            class: class.to_owned(),
            driver: driver.to_owned(),
            parameters: Some(json!({ "a": "b" })),
            admin_access: false,
            selectors: Vec::new(),
            tolerations: Vec::new(),
        }
    }

    pub fn spec(&self) -> Result<ResourceClaimSpec, ObjectError> {
        let mut exactly = json!({ "deviceClassName": self.class });
        if self.admin_access {
            exactly["adminAccess"] = json!(true);
        }
        if !self.selectors.is_empty() {
            exactly["selectors"] = self
                .selectors
                .iter()
                .map(|e| json!({ "cel": { "expression": e } }))
                .collect();
        }
        if !self.tolerations.is_empty() {
            exactly["tolerations"] = self.tolerations.iter().map(|t| t.to_json()).collect();
        }
        let mut devices = json!({ "requests": [ { "name": REQUEST, "exactly": exactly } ] });
        if let Some(p) = &self.parameters {
            devices["config"] = json!([ { "opaque": { "driver": self.driver, "parameters": p } } ]);
        }
        build("ResourceClaimSpec", REQUEST, json!({ "devices": devices }))
    }
}

pub fn claim(name: &str, spec: ResourceClaimSpec) -> ResourceClaim {
    ResourceClaim {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

pub fn claim_template(name: &str, spec: ResourceClaimSpec) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::resource::v1::ResourceClaimTemplateSpec {
            metadata: None,
            spec: Some(spec),
        }),
    }
}

/// How a pod refers to its claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodClaims {
    /// One claim generated from the template named after the pod, as
    /// upstream's `PodInline` (pod claim `my-inline-claim`).
    Inline {
        template: String,
    },
    /// Existing claims; one claim is pod claim `resource-claim` (upstream's
    /// name), several keep the claims' names.
    External(Vec<String>),
    None,
}

/// A test pod, as upstream's `PodInline` / `PodExternal` builders make them,
/// plus the variations scenarios need.
#[derive(Debug, Clone)]
pub struct PodShape {
    pub name: String,
    pub claims: PodClaims,
    /// Pod claim name override (the inline claim's, or the single external one's).
    pub pod_claim_name: Option<String>,
    pub containers: usize,
    /// Containers reference no claims (the claim is still prepared).
    pub containers_use_claims: bool,
    /// `container name -> (pod claim, request)` overrides; `None` request means all.
    pub container_claims: BTreeMap<usize, Vec<(String, Option<String>)>>,
    /// An init container (named [`INIT_CONTAINER`], with the claims of the
    /// first container) whose script prints its env and then fails unless
    /// the env has every one of these `key=value` entries, as upstream's
    /// "supports init containers" does with `env | grep user_a=b`: the pod
    /// only starts when the entries reached the init container. `None`: no
    /// init container.
    pub init_container: Option<Vec<String>>,
    /// A `sh -c` script for every regular container; without one they run
    /// [`SLEEP_UNTIL_TERMINATED`].
    pub command: Option<String>,
    pub restart_policy: String,
    pub node_name: Option<String>,
    /// Extended resources (from a device plugin or DRA-backed) every
    /// container asks for, e.g. `example.com/resource` = `1`.
    pub extended_resources: Vec<(String, String)>,
    /// Per-container extended resources, instead of `extended_resources`.
    pub container_extended_resources: BTreeMap<usize, Vec<(String, String)>>,
    /// Pins the pod to a node through the scheduler (`kubernetes.io/hostname`).
    pub node_selector: Option<String>,
    pub grace_period: Option<i64>,
    /// Seconds the pod stays bound to a node reported unreachable before
    /// the taint eviction controller evicts it (a toleration of the
    /// unreachable `NoExecute` taint); `None` leaves the API server's
    /// default of 300 s.
    pub unreachable_toleration: Option<i64>,
}

impl PodShape {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            claims: PodClaims::None,
            pod_claim_name: None,
            containers: 1,
            containers_use_claims: true,
            container_claims: BTreeMap::new(),
            init_container: None,
            command: None,
            restart_policy: "Never".to_owned(),
            node_name: None,
            extended_resources: Vec::new(),
            container_extended_resources: BTreeMap::new(),
            node_selector: None,
            grace_period: None,
            unreachable_toleration: None,
        }
    }

    /// Pod-level claim names in order.
    pub fn pod_claim_names(&self) -> Vec<String> {
        match &self.claims {
            PodClaims::Inline { .. } => vec![
                self.pod_claim_name
                    .clone()
                    .unwrap_or_else(|| INLINE_CLAIM.to_owned()),
            ],
            PodClaims::External(names) if names.len() == 1 => vec![
                self.pod_claim_name
                    .clone()
                    .unwrap_or_else(|| EXTERNAL_POD_CLAIM.to_owned()),
            ],
            // Several claims: the pod claims are named after the claims, so
            // scenarios can map containers to them by name.
            PodClaims::External(names) => names.clone(),
            PodClaims::None => Vec::new(),
        }
    }

    pub fn container_name(i: usize) -> String {
        if i == 0 {
            CONTAINER.to_owned()
        } else {
            format!("{CONTAINER}-{i}")
        }
    }

    pub fn build(&self) -> Result<Pod, ObjectError> {
        if self.containers == 0 {
            return Err(ObjectError::Invalid(format!(
                "pod {} needs at least one container",
                self.name
            )));
        }
        let pod_claims = self.pod_claim_names();
        let resource_claims: Vec<Value> = match &self.claims {
            PodClaims::Inline { template } => {
                vec![json!({ "name": pod_claims[0], "resourceClaimTemplateName": template })]
            }
            PodClaims::External(names) => names
                .iter()
                .zip(&pod_claims)
                .map(|(claim, pc)| json!({ "name": pc, "resourceClaimName": claim }))
                .collect(),
            PodClaims::None => Vec::new(),
        };
        let container =
            |i: usize, name: String, command: &str| self.container(i, name, command, &pod_claims);
        let command = self.command.as_deref().unwrap_or(SLEEP_UNTIL_TERMINATED);
        let containers: Vec<Value> = (0..self.containers)
            .map(|i| container(i, Self::container_name(i), command))
            .collect();
        let mut spec = json!({
            "restartPolicy": self.restart_policy,
            "containers": containers,
            "resourceClaims": resource_claims,
        });
        if let Some(entries) = &self.init_container {
            let script = env_check_script(entries)?;
            spec["initContainers"] = json!([container(0, INIT_CONTAINER.to_owned(), &script)]);
        }
        if let Some(n) = &self.node_name {
            spec["nodeName"] = json!(n);
        }
        if let Some(n) = &self.node_selector {
            spec["nodeSelector"] = json!({ "kubernetes.io/hostname": n });
        }
        if let Some(g) = self.grace_period {
            spec["terminationGracePeriodSeconds"] = json!(g);
        }
        if let Some(seconds) = self.unreachable_toleration {
            spec["tolerations"] = json!([{
                "key": crate::node_ready::UNREACHABLE_TAINT,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": seconds,
            }]);
        }
        build(
            "Pod",
            &self.name,
            json!({ "apiVersion": "v1", "kind": "Pod",
                    "metadata": { "name": self.name }, "spec": spec }),
        )
    }

    /// Container `i` (an init container too) running `command`, with the
    /// claims and extended resources the shape gives it.
    fn container(&self, i: usize, name: String, command: &str, pod_claims: &[String]) -> Value {
        let claims: Vec<Value> = match self.container_claims.get(&i) {
            Some(list) => list
                .iter()
                .map(|(c, r)| match r {
                    Some(r) => json!({ "name": c, "request": r }),
                    None => json!({ "name": c }),
                })
                .collect(),
            None if self.containers_use_claims => {
                pod_claims.iter().map(|c| json!({ "name": c })).collect()
            }
            None => Vec::new(),
        };
        let mut c = json!({
            "name": name,
            "image": TEST_IMAGE,
            "command": ["/bin/sh", "-c", command],
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": { "drop": ["ALL"] },
                "runAsNonRoot": true, "runAsUser": 65534,
                "seccompProfile": { "type": "RuntimeDefault" }
            },
        });
        if !claims.is_empty() {
            c["resources"] = json!({ "claims": claims });
        }
        let extended = self
            .container_extended_resources
            .get(&i)
            .unwrap_or(&self.extended_resources);
        if !extended.is_empty() {
            let limits: serde_json::Map<String, Value> = extended
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            c["resources"]["limits"] = Value::Object(limits.clone());
            c["resources"]["requests"] = Value::Object(limits);
        }
        c
    }
}

/// The init container's script: print the env (so its log shows what the
/// container saw, which is all that is left to read once it exited), then
/// exit 0 only if every entry is a whole line of it. Entries are quoted for
/// the shell; an entry must look like `key=value` on one line.
pub fn env_check_script(entries: &[String]) -> Result<String, ObjectError> {
    let mut script = String::from("env");
    for (i, entry) in entries.iter().enumerate() {
        if !entry.contains('=') || entry.starts_with('=') || entry.contains('\n') {
            return Err(ObjectError::Invalid(format!(
                "init container env check {entry:?}: expected one `key=value` entry"
            )));
        }
        script.push_str(if i == 0 { "; " } else { " && " });
        script.push_str("env | grep -qxF ");
        script.push_str(&shell_quote(entry));
    }
    Ok(script)
}

/// `word` as one single-quoted shell word.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// Replaces `${name}` placeholders in a manifest written in a feature file.
/// Unknown placeholders are an error, so a typo never reaches the cluster.
pub fn expand(template: &str, vars: &BTreeMap<String, String>) -> Result<String, ObjectError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| {
            ObjectError::Invalid(format!("unterminated placeholder in {:?}", &rest[start..]))
        })?;
        let key = &after[..end];
        let value = vars.get(key).ok_or_else(|| {
            let known: Vec<_> = vars.keys().map(|k| format!("${{{k}}}")).collect();
            ObjectError::Invalid(format!(
                "unknown placeholder ${{{key}}}; known: {}",
                known.join(", ")
            ))
        })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_tolerates_an_unreachable_node_only_when_told_for_how_long() {
        let mut shape = PodShape::new("p");
        let v = serde_json::to_value(shape.build().unwrap()).unwrap();
        assert!(v["spec"].get("tolerations").is_none());
        shape.unreachable_toleration = Some(5);
        let v = serde_json::to_value(shape.build().unwrap()).unwrap();
        let t = &v["spec"]["tolerations"][0];
        assert_eq!(t["key"], "node.kubernetes.io/unreachable");
        assert_eq!(t["operator"], "Exists");
        assert_eq!(t["effect"], "NoExecute");
        assert_eq!(t["tolerationSeconds"], 5);
    }

    #[test]
    fn default_claim_matches_upstream_shape() {
        let spec = ClaimShape::default_for("ns-class", "ns.k8s.io")
            .spec()
            .unwrap();
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["devices"]["requests"][0]["name"], "my-request");
        assert_eq!(
            v["devices"]["requests"][0]["exactly"]["deviceClassName"],
            "ns-class"
        );
        assert_eq!(v["devices"]["config"][0]["opaque"]["driver"], "ns.k8s.io");
        assert_eq!(
            v["devices"]["config"][0]["opaque"]["parameters"],
            json!({"a": "b"})
        );
    }

    #[test]
    fn inline_pod_uses_template_named_after_pod() {
        let mut shape = PodShape::new("tester-1");
        shape.claims = PodClaims::Inline {
            template: "tester-1".into(),
        };
        shape.containers = 2;
        let pod = serde_json::to_value(shape.build().unwrap()).unwrap();
        assert_eq!(pod["spec"]["resourceClaims"][0]["name"], "my-inline-claim");
        assert_eq!(
            pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            "tester-1"
        );
        assert_eq!(pod["spec"]["containers"][1]["name"], "with-resource-1");
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["claims"][0]["name"],
            "my-inline-claim"
        );
    }

    #[test]
    fn containers_run_upstreams_test_image_and_scripts() {
        let mut shape = PodShape::new("p");
        shape.containers = 2;
        let pod = serde_json::to_value(shape.build().unwrap()).unwrap();
        for c in pod["spec"]["containers"].as_array().unwrap() {
            assert_eq!(
                c["image"],
                "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
            );
            assert_eq!(
                c["command"],
                json!([
                    "/bin/sh",
                    "-c",
                    "trap exit TERM; while true; do sleep 1; done"
                ])
            );
        }
        assert!(pod["spec"].get("initContainers").is_none());

        shape.command = Some("exit 3".into());
        shape.init_container = Some(vec![DEFAULT_USER_ENV.into(), "admin_x=y".into()]);
        shape.claims = PodClaims::External(vec!["c".into()]);
        let pod = serde_json::to_value(shape.build().unwrap()).unwrap();
        assert_eq!(pod["spec"]["containers"][1]["command"][2], "exit 3");
        let init = &pod["spec"]["initContainers"][0];
        assert_eq!(init["name"], "init");
        assert_eq!(init["image"], TEST_IMAGE);
        assert_eq!(
            init["command"],
            json!([
                "/bin/sh",
                "-c",
                "env; env | grep -qxF 'user_a=b' && env | grep -qxF 'admin_x=y'"
            ])
        );
        assert_eq!(init["resources"]["claims"][0]["name"], "resource-claim");
    }

    #[test]
    fn env_check_scripts_quote_and_validate() {
        assert_eq!(env_check_script(&[]).unwrap(), "env");
        assert_eq!(
            env_check_script(&["k='v' $x".into()]).unwrap(),
            r#"env; env | grep -qxF 'k='\''v'\'' $x'"#
        );
        for bad in ["novalue", "=v", "k=a\nb"] {
            assert!(env_check_script(&[bad.into()]).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn external_claims_pod_claim_names() {
        let mut shape = PodShape::new("p");
        shape.claims = PodClaims::External(vec!["a".into(), "b".into()]);
        assert_eq!(shape.pod_claim_names(), vec!["a", "b"]);
        shape.claims = PodClaims::External(vec!["a".into()]);
        assert_eq!(shape.pod_claim_names(), vec!["resource-claim"]);
    }

    #[test]
    fn tolerations_parse_and_reach_the_request() {
        let any: DeviceToleration = "NoSchedule".parse().unwrap();
        assert_eq!(
            any.to_json(),
            json!({ "operator": "Exists", "effect": "NoSchedule" })
        );
        let exact: DeviceToleration = "example.com/taint=tainted:NoExecute".parse().unwrap();
        assert_eq!(
            exact.to_json(),
            json!({ "operator": "Equal", "key": "example.com/taint",
                    "value": "tainted", "effect": "NoExecute" })
        );
        let key: DeviceToleration = "example.com/taint".parse().unwrap();
        assert_eq!(
            key.to_json(),
            json!({ "operator": "Exists", "key": "example.com/taint" })
        );
        for bad in ["", "k=v:Sometimes", "=v:NoSchedule"] {
            assert!(bad.parse::<DeviceToleration>().is_err(), "{bad:?} accepted");
        }

        let mut shape = ClaimShape::default_for("c", "d");
        shape.tolerations.push(any);
        let v = serde_json::to_value(shape.spec().unwrap()).unwrap();
        assert_eq!(
            v["devices"]["requests"][0]["exactly"]["tolerations"][0]["effect"],
            "NoSchedule"
        );
    }

    #[test]
    fn expand_replaces_and_rejects_unknown() {
        let vars = BTreeMap::from([("driver".to_owned(), "d.k8s.io".to_owned())]);
        assert_eq!(expand("x ${driver} y", &vars).unwrap(), "x d.k8s.io y");
        let err = expand("${drvier}", &vars).unwrap_err().to_string();
        assert!(err.contains("unknown placeholder ${drvier}"), "{err}");
        assert!(expand("${driver", &vars).is_err());
    }
}

/// Generated input for the two parsers here a feature file feeds: the
/// `${...}` placeholders of doc strings and sentences, and the `tolerating`
/// phrase. `PROPTEST_CASES` raises the bounded count (`make props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn vars() -> impl Strategy<Value = Vars> {
        // Keys as the runner makes them (`driver`, `class:gpu`, `node0`),
        // values without `${` so that an expansion is never re-read.
        proptest::collection::btree_map("[a-z][a-z0-9:]{0,8}", "[a-z0-9.-]{0,12}", 0..5)
    }

    type Vars = BTreeMap<String, String>;
    /// Literal text, then the key of a placeholder or none.
    type Piece = (String, Option<String>);

    /// A template of literal text (no `$`) and placeholders of known keys.
    fn known_template(vars: Vars) -> impl Strategy<Value = (Vars, Vec<Piece>)> {
        let keys: Vec<String> = vars.keys().cloned().collect();
        let piece = if keys.is_empty() {
            "[^$]{0,6}".prop_map(|t| (t, None)).boxed()
        } else {
            prop_oneof![
                "[^$]{0,6}".prop_map(|t| (t, None)),
                proptest::sample::select(keys).prop_map(|k| (String::new(), Some(k))),
            ]
            .boxed()
        };
        (Just(vars), proptest::collection::vec(piece, 0..8))
    }

    /// Text of up to `len` pieces: the `words` a parser looks for, and any
    /// other character (cheaper to draw than a regex's `.`).
    fn text(words: &[&'static str], len: usize) -> impl Strategy<Value = String> {
        let word = proptest::sample::select(words.to_vec()).prop_map(str::to_owned);
        let piece = prop_oneof![word, any::<char>().prop_map(String::from)];
        proptest::collection::vec(piece, 0..=len).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::default())]

        /// Any text: expanded, or refused naming the placeholder that is
        /// wrong (an unknown one, with the known ones; an unterminated one).
        #[test]
        fn any_template_expands_or_names_the_placeholder(
            template in text(&["${", "}", "$", "driver", "class:", "node0"], 40),
            vars in vars(),
        ) {
            match expand(&template, &vars) {
                // Text without placeholders stays as it is (what expansion
                // makes of the others is `known_placeholders_are_replaced`).
                Ok(out) => {
                    if !template.contains("${") {
                        prop_assert_eq!(out, template);
                    }
                }
                Err(e) => {
                    let m = e.to_string();
                    if let Some(key) = m.strip_prefix("unknown placeholder ${").and_then(|r| r.split_once('}')).map(|(k, _)| k) {
                        prop_assert!(template.contains(&format!("${{{key}}}")), "{m}");
                        prop_assert!(!vars.contains_key(key), "{m}");
                        for k in vars.keys() {
                            prop_assert!(m.contains(&format!("${{{k}}}")), "{m} lists no ${{{k}}}");
                        }
                    } else {
                        prop_assert!(m.starts_with("unterminated placeholder in \"${"), "{m}");
                    }
                }
            }
        }

        /// Known placeholders between literal text: each replaced by its
        /// value, the text kept as it is.
        #[test]
        fn known_placeholders_are_replaced(
            (vars, pieces) in vars().prop_flat_map(known_template),
        ) {
            let mut template = String::new();
            let mut want = String::new();
            for (text, key) in &pieces {
                template.push_str(text);
                want.push_str(text);
                if let Some(k) = key {
                    template.push_str(&format!("${{{k}}}"));
                    want.push_str(&vars[k]);
                }
            }
            prop_assert_eq!(expand(&template, &vars).map_err(|e| e.to_string()), Ok(want));
        }

        /// Any `tolerating` text: a toleration, or a refusal that quotes
        /// it (or says it is empty).
        #[test]
        fn any_toleration_parses_or_is_named(
            s in text(&["NoSchedule", "NoExecute", "None", ":", "=", "example.com/t", " "], 8),
        ) {
            match s.parse::<DeviceToleration>() {
                Ok(t) => prop_assert!(t.key.is_some() || t.effect.is_some()),
                Err(e) => {
                    let m = e.to_string();
                    prop_assert!(
                        m.contains(&format!("{:?}", s.trim())) || m.starts_with("an empty toleration"),
                        "{m}"
                    );
                }
            }
        }

        /// A toleration written `key[=value][:Effect]` reads back as written.
        #[test]
        fn tolerations_round_trip(
            key in "[a-z0-9./-]{1,16}",
            value in proptest::option::of("[a-z0-9.-]{0,8}"),
            effect in proptest::option::of(proptest::sample::select(TAINT_EFFECTS.to_vec())),
        ) {
            let mut text = key.clone();
            if let Some(v) = &value {
                text.push_str(&format!("={v}"));
            }
            if let Some(e) = effect {
                text.push_str(&format!(":{e}"));
            }
            let t: DeviceToleration = text.parse().map_err(|e: ObjectError| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(t, DeviceToleration {
                key: Some(key),
                value,
                effect: effect.map(str::to_owned),
            });
        }
    }
}
