//! The driver's manifests: read from the profile's files, created in the
//! cluster (behind the interposer, with the driver's DaemonSet rewritten
//! to register in a private directory), and the DaemonSets the runner
//! judges from them before anything is deployed.
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::Scope;

use dra_e2e_profile::{self as profile, Deployment, Profile};

use super::{Made, UnderTest, UnderTestError, interposed};

/// Pods of the driver: a DaemonSet of its manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverPods {
    pub namespace: String,
    pub daemonset: String,
    /// Its pod selector's `matchLabels`.
    pub labels: BTreeMap<String, String>,
}

impl DriverPods {
    pub fn selector(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Whether the DaemonSet's updates start a node's new pod before its old
/// one goes (`RollingUpdate` with a `maxSurge` above zero), so the node
/// never goes without the driver; `Err` says what it does instead.
pub fn surges(ds: &DaemonSet) -> Result<(), String> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let strategy = ds.spec.update_strategy.as_ref();
    // Absent, the API server defaults it to RollingUpdate.
    let kind = strategy
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate");
    if kind != "RollingUpdate" {
        return Err(format!(
            "updates its pods by {kind}, not by a rolling update"
        ));
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let shown = |v: Option<&IntOrString>, default: &str| match v {
        Some(IntOrString::Int(n)) => n.to_string(),
        Some(IntOrString::String(s)) => s.clone(),
        None => format!("{default} (default)"),
    };
    // A percentage is of the nodes, rounded up: any above 0 % surges.
    let above_zero = match rolling.and_then(|r| r.max_surge.as_ref()) {
        Some(IntOrString::Int(n)) => *n > 0,
        Some(IntOrString::String(s)) => s.trim_end_matches('%').parse::<u32>().is_ok_and(|n| n > 0),
        None => false,
    };
    if above_zero {
        Ok(())
    } else {
        Err(format!(
            "updates with maxSurge {} and maxUnavailable {}: a node's old pod goes before its \
             new one starts",
            shown(rolling.and_then(|r| r.max_surge.as_ref()), "0"),
            shown(rolling.and_then(|r| r.max_unavailable.as_ref()), "1"),
        ))
    }
}

/// The DaemonSets of the profile's manifests, read from its files (none
/// for a driver the runner does not deploy from manifests): what the
/// runner decides by before anything is deployed.
pub fn manifest_daemonsets(profile: &Profile) -> Result<Vec<DaemonSet>, UnderTestError> {
    let manifests = match &profile.deployment {
        Deployment::RealNodes { manifests, .. } | Deployment::Manifests { manifests } => manifests,
        _ => return Ok(Vec::new()),
    };
    let mut sets = Vec::new();
    for path in manifests {
        for obj in read_manifest(path)? {
            let is_daemonset = obj
                .types
                .as_ref()
                .is_some_and(|t| t.kind == "DaemonSet" && t.api_version == "apps/v1");
            if is_daemonset {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let ds: DaemonSet = serde_json::to_value(&obj)
                    .and_then(serde_json::from_value)
                    .map_err(|e| UnderTestError::Manifest {
                        path: path.display().to_string(),
                        message: format!("DaemonSet {name}: {e}"),
                    })?;
                sets.push(ds);
            }
        }
    }
    Ok(sets)
}

/// Every object of one manifest file, in order.
pub(super) fn read_manifest(path: &std::path::Path) -> Result<Vec<DynamicObject>, UnderTestError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| UnderTestError::Manifest {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    serde_saphyr::from_multiple(&text).map_err(|e| UnderTestError::Manifest {
        path: shown,
        message: format!("not valid YAML: {e}"),
    })
}

impl UnderTest {
    /// Creates every object of one manifest file, in order, and returns the
    /// driver pods its DaemonSets make; with `remember`, they are removed at
    /// the end of the run (an installation again creates objects already
    /// remembered).
    pub(super) async fn create_objects(
        &self,
        client: &kube::Client,
        path: &std::path::Path,
        remember: bool,
    ) -> Result<Vec<DriverPods>, UnderTestError> {
        let shown = path.display().to_string();
        let objs = read_manifest(path)?;
        let driver = self.profile.driver_name.clone();
        let deploy = |message: String| UnderTestError::Deploy {
            driver: driver.clone(),
            message: format!("{shown}: {message}"),
        };
        let mut pods = Vec::new();
        for mut obj in objs {
            let types = obj
                .types
                .as_ref()
                .ok_or_else(|| deploy("an object has no apiVersion and kind".to_owned()))?;
            let gvk = kube::api::GroupVersionKind::try_from(types)
                .map_err(|e| deploy(format!("{}/{}: {e}", types.api_version, types.kind)))?;
            let (resource, caps) =
                kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|e| {
                        deploy(format!(
                            "the cluster does not serve {}/{}: {e}",
                            types.api_version, types.kind
                        ))
                    })?;
            let name = obj.metadata.name.clone().unwrap_or_default();
            let namespace = (caps.scope == Scope::Namespaced).then(|| {
                obj.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_owned())
            });
            let api: Api<DynamicObject> = match &namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            if resource.kind == "DaemonSet" {
                let ds: DaemonSet = serde_json::to_value(&obj)
                    .and_then(serde_json::from_value)
                    .map_err(|e| deploy(format!("DaemonSet {name}: {e}")))?;
                let labels = ds.spec.selector.match_labels.clone().unwrap_or_default();
                pods.push(DriverPods {
                    namespace: namespace.clone().unwrap_or_default(),
                    daemonset: name.clone(),
                    labels: labels.into_iter().collect(),
                });
                if self.interpose.is_some() {
                    // Where the interposer looks for it: under the
                    // kubelet root of the cluster's nodes.
                    let dir = interposed::private_registry(&self.kubelet_root, &driver);
                    let ds = match &self.profile.registration_dir {
                        Some(setting) => register_privately(ds, setting, &dir),
                        None => register_privately_by_volume(ds, &self.kubelet_root, &dir),
                    }
                    .map_err(|e| deploy(format!("DaemonSet {name}: {e}")))?;
                    obj = serde_json::to_value(&ds)
                        .and_then(serde_json::from_value)
                        .map_err(|e| deploy(format!("DaemonSet {name}: {e}")))?;
                }
            }
            api.create(&PostParams::default(), &obj)
                .await
                .map_err(|e| deploy(format!("creating {} {name}: {e}", resource.kind)))?;
            if remember {
                self.remember(Made {
                    resource,
                    namespace,
                    name,
                    manifest: true,
                });
            }
        }
        Ok(pods)
    }
}

/// The volume the runner adds for the private registration directory.
const PRIVATE_REGISTRY_VOLUME: &str = "dra-e2e-registry";

/// `ds` with its driver container(s) told to register in `dir` (through
/// `setting`), and `dir` mounted at its host path.
/// Points the DaemonSet's host-path volume of the kubelet's
/// `plugins_registry` at `dir`: the driver then registers where it always
/// does inside its container, and the socket lands where only the
/// interposer looks. For a driver with no flag or variable for its
/// registration directory (a profile without `registrationDir`).
fn register_privately_by_volume(
    mut ds: DaemonSet,
    kubelet_root: &std::path::Path,
    dir: &std::path::Path,
) -> Result<DaemonSet, String> {
    let registry = kubelet_root.join("plugins_registry");
    let Some(pod) = ds.spec.template.spec.as_mut() else {
        return Err("it has no pod spec".to_owned());
    };
    let same = |p: &str| std::path::Path::new(p.trim_end_matches('/')) == registry;
    let mut found = false;
    for v in pod.volumes.iter_mut().flatten() {
        if let Some(h) = v.host_path.as_mut()
            && same(&h.path)
        {
            h.path = dir.display().to_string();
            // The private directory is new on every node.
            h.type_ = Some("DirectoryOrCreate".to_owned());
            found = true;
        }
    }
    if found {
        Ok(ds)
    } else {
        Err(format!(
            "the profile gives no registrationDir, and no hostPath volume of the DaemonSet is \
             the kubelet's registration directory {}: the runner cannot tell where the driver \
             registers (give registrationDir in the profile)",
            registry.display()
        ))
    }
}

fn register_privately(
    mut ds: DaemonSet,
    setting: &profile::Setting,
    dir: &std::path::Path,
) -> Result<DaemonSet, String> {
    let value = dir.display().to_string();
    let Some(pod) = ds.spec.template.spec.as_mut() else {
        return Err("it has no pod spec".to_owned());
    };
    let carries = |c: &k8s_openapi::api::core::v1::Container| match setting {
        profile::Setting::Flag(f) => {
            let prefix = format!("{f}=");
            [&c.command, &c.args]
                .into_iter()
                .flatten()
                .flatten()
                .any(|a| a.starts_with(&prefix))
        }
        profile::Setting::Env(v) => c.env.iter().flatten().any(|e| &e.name == v),
    };
    // The containers that already say where to register; without any, the
    // only container (a driver's pod with several must say which).
    let mut chosen: Vec<usize> = (0..pod.containers.len())
        .filter(|i| carries(&pod.containers[*i]))
        .collect();
    if chosen.is_empty() {
        if pod.containers.len() != 1 {
            return Err(format!(
                "none of its {} containers has {}, and the runner cannot tell which one is \
                 the kubelet plugin; give the setting in the manifest",
                pod.containers.len(),
                setting.describe()
            ));
        }
        chosen.push(0);
    }
    for i in chosen {
        let c = &mut pod.containers[i];
        match setting {
            profile::Setting::Flag(_) => {
                // The flag goes where the container's arguments are.
                let list = match (&mut c.args, &mut c.command) {
                    (Some(args), _) => args,
                    (None, Some(command)) => command,
                    (None, None) => c.args.get_or_insert_with(Vec::new),
                };
                setting.apply(list, &mut Vec::new(), &value);
            }
            profile::Setting::Env(var) => {
                let env = c.env.get_or_insert_with(Vec::new);
                env.retain(|e| &e.name != var);
                env.push(k8s_openapi::api::core::v1::EnvVar {
                    name: var.clone(),
                    value: Some(value.clone()),
                    value_from: None,
                });
            }
        }
        // Mounted even where a mount of the plugin directory covers it:
        // `DirectoryOrCreate` makes it before the driver starts, which
        // creates only its socket, not the directory.
        if !c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == PRIVATE_REGISTRY_VOLUME)
        {
            c.volume_mounts.get_or_insert_with(Vec::new).push(
                k8s_openapi::api::core::v1::VolumeMount {
                    name: PRIVATE_REGISTRY_VOLUME.to_owned(),
                    mount_path: value.clone(),
                    ..Default::default()
                },
            );
        }
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        if !volumes.iter().any(|v| v.name == PRIVATE_REGISTRY_VOLUME) {
            volumes.push(k8s_openapi::api::core::v1::Volume {
                name: PRIVATE_REGISTRY_VOLUME.to_owned(),
                host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                    path: value.clone(),
                    type_: Some("DirectoryOrCreate".to_owned()),
                }),
                ..Default::default()
            });
        }
    }
    Ok(ds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemonset(containers: serde_json::Value) -> DaemonSet {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "d", "namespace": "ns" },
            "spec": {
                "selector": { "matchLabels": { "app": "d" } },
                "template": {
                    "metadata": { "labels": { "app": "d" } },
                    "spec": { "containers": containers }
                }
            }
        }))
        .unwrap()
    }

    fn pod(ds: &DaemonSet) -> &k8s_openapi::api::core::v1::PodSpec {
        ds.spec.template.spec.as_ref().unwrap()
    }

    const DIR: &str = "/var/lib/kubelet/plugins/d.example.com/dra-e2e";

    fn with_strategy(strategy: serde_json::Value) -> DaemonSet {
        let mut ds = daemonset(serde_json::json!([{ "name": "c" }]));
        ds.spec.update_strategy = Some(serde_json::from_value(strategy).unwrap());
        ds
    }

    #[test]
    fn only_a_rolling_update_with_max_surge_above_zero_surges() {
        let surge = |v: serde_json::Value| {
            with_strategy(serde_json::json!({
                "type": "RollingUpdate",
                "rollingUpdate": { "maxSurge": v, "maxUnavailable": 0 }
            }))
        };
        assert_eq!(surges(&surge(serde_json::json!(1))), Ok(()));
        assert_eq!(surges(&surge(serde_json::json!("10%"))), Ok(()));
        assert_eq!(
            surges(&surge(serde_json::json!(0))),
            Err(
                "updates with maxSurge 0 and maxUnavailable 0: a node's old pod goes before \
                 its new one starts"
                    .to_owned()
            )
        );
        assert!(surges(&surge(serde_json::json!("0%"))).is_err());
        // Upstream's test driver says nothing: the defaults do not surge.
        assert_eq!(
            surges(&daemonset(serde_json::json!([{ "name": "c" }]))),
            Err(
                "updates with maxSurge 0 (default) and maxUnavailable 1 (default): a node's \
                 old pod goes before its new one starts"
                    .to_owned()
            )
        );
        assert_eq!(
            surges(&with_strategy(serde_json::json!({ "type": "OnDelete" }))),
            Err("updates its pods by OnDelete, not by a rolling update".to_owned())
        );
    }

    #[test]
    fn the_driver_container_registers_privately_and_gets_the_directory() {
        let flag = profile::Setting::Flag("--plugin-registration-path".into());
        let ds = daemonset(serde_json::json!([
            { "name": "sidecar", "image": "s" },
            { "name": "plugin", "image": "p", "command": ["/drv", "--plugin-registration-path=/var/lib/kubelet/plugins_registry", "-v=5"] }
        ]));
        let ds = register_privately(ds, &flag, std::path::Path::new(DIR)).unwrap();
        let p = pod(&ds);
        assert_eq!(
            p.containers[1].command.as_ref().unwrap()[1],
            format!("--plugin-registration-path={DIR}")
        );
        assert!(
            p.containers[0].volume_mounts.is_none(),
            "the sidecar is left alone"
        );
        let mounts = p.containers[1].volume_mounts.as_ref().unwrap();
        assert_eq!(mounts[0].mount_path, DIR);
        let volumes = p.volumes.as_ref().unwrap();
        let host = volumes[0].host_path.as_ref().unwrap();
        assert_eq!(
            (host.path.as_str(), host.type_.as_deref()),
            (DIR, Some("DirectoryOrCreate"))
        );
    }

    #[test]
    fn without_a_setting_the_registry_volume_is_pointed_at_the_private_directory() {
        let mut ds = daemonset(serde_json::json!([
            { "name": "plugin", "image": "p", "volumeMounts": [
                { "name": "reg", "mountPath": "/var/lib/kubelet/plugins_registry" },
                { "name": "data", "mountPath": "/var/lib/kubelet/plugins/d.example.com" }] }
        ]));
        let volume = |name: &str, path: &str| {
            serde_json::from_value::<k8s_openapi::api::core::v1::Volume>(serde_json::json!(
                { "name": name, "hostPath": { "path": path, "type": "Directory" } }
            ))
            .unwrap()
        };
        ds.spec.template.spec.as_mut().unwrap().volumes = Some(vec![
            volume("reg", "/var/lib/kubelet/plugins_registry/"),
            volume("data", "/var/lib/kubelet/plugins/d.example.com"),
        ]);
        let root = std::path::Path::new("/var/lib/kubelet");
        let moved =
            register_privately_by_volume(ds.clone(), root, std::path::Path::new(DIR)).unwrap();
        let p = pod(&moved);
        let volumes = p.volumes.as_ref().unwrap();
        let reg = volumes[0].host_path.as_ref().unwrap();
        assert_eq!(
            (reg.path.as_str(), reg.type_.as_deref()),
            (DIR, Some("DirectoryOrCreate"))
        );
        // The driver still writes where it always does in its container;
        // other volumes stay.
        assert_eq!(
            p.containers[0].volume_mounts.as_ref().unwrap()[0].mount_path,
            "/var/lib/kubelet/plugins_registry"
        );
        assert_eq!(
            volumes[1].host_path.as_ref().unwrap().path,
            "/var/lib/kubelet/plugins/d.example.com"
        );
        // Another kubelet root: no volume is the registry, and the error
        // says what to give instead.
        let e =
            register_privately_by_volume(ds, std::path::Path::new("/k"), std::path::Path::new(DIR))
                .unwrap_err();
        assert!(e.contains("/k/plugins_registry"), "{e}");
        assert!(e.contains("give registrationDir"), "{e}");
    }

    #[test]
    fn a_lone_container_gets_the_flag_or_variable_added() {
        let flag = profile::Setting::Flag("--reg".into());
        let ds = daemonset(serde_json::json!([{ "name": "c", "image": "i", "args": ["run"] }]));
        let ds = register_privately(ds, &flag, std::path::Path::new(DIR)).unwrap();
        assert_eq!(
            pod(&ds).containers[0].args.as_ref().unwrap(),
            &["run".to_owned(), format!("--reg={DIR}")]
        );

        let env = profile::Setting::Env("REG_DIR".into());
        let ds = daemonset(serde_json::json!([{ "name": "c", "image": "i",
            "env": [{ "name": "REG_DIR", "value": "/old" }, { "name": "X", "value": "1" }] }]));
        let ds = register_privately(ds, &env, std::path::Path::new(DIR)).unwrap();
        let vars = pod(&ds).containers[0].env.as_ref().unwrap();
        let reg: Vec<_> = vars.iter().filter(|e| e.name == "REG_DIR").collect();
        assert_eq!(reg.len(), 1);
        assert_eq!(reg[0].value.as_deref(), Some(DIR));
    }

    #[test]
    fn several_containers_none_saying_where_to_register_is_an_error() {
        let flag = profile::Setting::Flag("--reg".into());
        let ds = daemonset(serde_json::json!([
            { "name": "a", "image": "i" }, { "name": "b", "image": "i" }
        ]));
        let e = register_privately(ds, &flag, std::path::Path::new(DIR)).unwrap_err();
        assert!(
            e.contains("none of its 2 containers has an argument --reg=..."),
            "{e}"
        );
    }
}
