//! The project's rolling-update DRA driver (hack/rolling-driver/main.go):
//! its checked-in manifests (deploy/rolling-driver/, copied next to its
//! image archive by `make rolling-driver`) are Kubernetes objects, field for
//! field, and say what profiles/rolling-driver.yaml says. What makes this
//! driver worth having is checked here too: the DaemonSet updates by
//! surging, and each pod passes its own UID to the driver, which puts it
//! into its socket names. The driver reads its settings from environment
//! variables, so the profile's registration directory and device count are
//! variables of the DaemonSet with the values the profile expects. The image
//! the DaemonSet runs is the one the Makefile writes, tagged with the
//! Kubernetes version the driver is built at. No cluster, no Go.
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, EnvVar, Namespace, PodSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::resource::v1::DeviceClass;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::common::manifests::{kinds, read, typed, version};
use dra_e2e::profile::{Capability, Deployment, Options, Profile, Setting};

fn documents(file: &str) -> Vec<serde_json::Value> {
    crate::common::manifests::documents(DEPLOY, file)
}

const PROFILE: &str = "profiles/rolling-driver.yaml";
const DEPLOY: &str = "deploy/rolling-driver";
const DRIVER_SOURCE: &str = "hack/rolling-driver/main.go";
/// The kubelet's registration directory, where the DaemonSet mounts it.
const REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn profile() -> Profile {
    // The files it names are build outputs; what they are made from is
    // checked here instead.
    Profile::load(&root().join(PROFILE), Options { check_files: false })
        .unwrap_or_else(|e| panic!("{PROFILE} has mistakes: {e:?}"))
}

/// The image reference the Makefile's `rolling-driver` target writes the
/// archive under (its `--reference` argument), with the version filled in.
fn makefile_image() -> String {
    let text = read("Makefile");
    let recipe: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("rolling-driver:"))
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .collect();
    let words: Vec<&str> = recipe.iter().flat_map(|l| l.split_whitespace()).collect();
    let reference = words
        .windows(2)
        .find(|w| w[0] == "--reference")
        .map(|w| w[1])
        .expect("the Makefile's rolling-driver target passes --reference");
    reference.replace("$(KUBE_VERSION)", &version("KUBE_VERSION"))
}

/// The driver name main.go uses when DRIVER_NAME is not set.
fn source_default_driver_name() -> String {
    let text = read(DRIVER_SOURCE);
    let rest = text
        .split_once("\"DRIVER_NAME\", \"")
        .unwrap_or_else(|| panic!("{DRIVER_SOURCE} has no default for DRIVER_NAME"))
        .1;
    rest[..rest.find('"').unwrap()].to_owned()
}

/// `path` with `.` and `..` resolved as text (the build outputs need not
/// exist, so no canonicalize).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The DaemonSet of kubelet-plugin.yaml, its pod and its one container.
fn daemon_set() -> (DaemonSet, PodSpec, Container) {
    let docs = documents("kubelet-plugin.yaml");
    assert_eq!(kinds(&docs), ["DaemonSet"]);
    let ds: DaemonSet = typed("kubelet-plugin.yaml", &docs[0]);
    let pod = ds
        .spec
        .template
        .spec
        .clone()
        .expect("kubelet-plugin.yaml: the DaemonSet has a pod spec");
    assert_eq!(
        pod.containers.len(),
        1,
        "kubelet-plugin.yaml: one container"
    );
    let container = pod.containers[0].clone();
    (ds, pod, container)
}

fn env<'a>(c: &'a Container, name: &str) -> Option<&'a EnvVar> {
    c.env.iter().flatten().find(|e| e.name == name)
}

/// A variable's downward-API field, if it has one.
fn field_ref<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    env(c, name)
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str())
}

/// A variable's literal value, if it has one.
fn value<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    env(c, name).and_then(|e| e.value.as_deref())
}

#[test]
fn the_profile_names_exactly_the_checked_in_manifests() {
    let Deployment::RealNodes {
        manifests,
        image_archives,
    } = profile().deployment
    else {
        panic!("{PROFILE} is not RealNodes");
    };
    let file_name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let named: BTreeSet<String> = manifests.iter().map(file_name).collect();
    let checked_in: BTreeSet<String> = std::fs::read_dir(root().join(DEPLOY))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(named, checked_in);
    // RBAC first: the DaemonSet's service account must exist before it.
    assert_eq!(
        manifests.first().map(file_name).as_deref(),
        Some("rbac.yaml")
    );
    // All in target/rolling-driver/, where `make rolling-driver` copies
    // them and writes the archive.
    let build_dir = root().join("target/rolling-driver");
    for p in manifests.iter().chain(&image_archives) {
        assert_eq!(
            p.parent().map(lexical),
            Some(lexical(&build_dir)),
            "{}",
            p.display()
        );
    }
    assert_eq!(
        image_archives.iter().map(file_name).collect::<Vec<_>>(),
        ["rolling-driver.oci.tar"]
    );
}

/// The image the DaemonSet runs is the Makefile's, tagged with the version
/// everything is built at, and found on the node rather than pulled.
#[test]
fn the_image_is_the_makefiles_at_the_kubernetes_version() {
    let (_, _, c) = daemon_set();
    let kube = version("KUBE_VERSION");
    let image = c.image.clone().expect("kubelet-plugin.yaml: an image");
    let tag = image
        .rsplit_once(':')
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("kubelet-plugin.yaml: {image} has no tag"));
    assert_eq!(tag, kube, "kubelet-plugin.yaml: the image's tag");
    assert_eq!(image, makefile_image(), "the Makefile writes another image");
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
}

/// An update starts the new pod beside the old one and removes the old one
/// only when the new one is available; the driver tells the two apart by
/// the pod UID it is given.
#[test]
fn the_daemon_set_surges_and_each_pod_gets_its_own_uid() {
    let (ds, _, c) = daemon_set();
    let strategy = ds
        .spec
        .update_strategy
        .expect("kubelet-plugin.yaml: an updateStrategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    let rolling = strategy
        .rolling_update
        .expect("kubelet-plugin.yaml: updateStrategy.rollingUpdate");
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(1)), "maxSurge");
    assert_eq!(
        rolling.max_unavailable,
        Some(IntOrString::Int(0)),
        "maxUnavailable"
    );
    assert_eq!(field_ref(&c, "POD_UID"), Some("metadata.uid"));
    assert_eq!(field_ref(&c, "NODE_NAME"), Some("spec.nodeName"));
}

/// The variables the profile names hold what the profile expects: the
/// registration directory (mounted from the host at the same path), and
/// devicesPerNode devices.
#[test]
fn the_profiles_variables_are_the_daemon_sets() {
    let p = profile();
    let (_, pod, c) = daemon_set();

    let Some(Setting::Env(reg_var)) = &p.registration_dir else {
        panic!("{PROFILE}: registrationDir should name a variable");
    };
    assert_eq!(
        value(&c, reg_var),
        Some(REGISTRY_DIR),
        "kubelet-plugin.yaml: {reg_var}"
    );

    let Some(Setting::Env(count_var)) = &p.device_count else {
        panic!("{PROFILE}: deviceCount should name a variable");
    };
    let per_node = p
        .devices_per_node
        .unwrap_or_else(|| panic!("{PROFILE}: devicesPerNode"));
    assert_eq!(
        value(&c, count_var),
        Some(per_node.to_string().as_str()),
        "kubelet-plugin.yaml: {count_var}"
    );

    // Each host directory the driver uses mounted at the same path: the
    // kubelet is told socket paths as the driver sees them.
    let volumes = pod.volumes.unwrap_or_default();
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    for path in [
        REGISTRY_DIR.to_owned(),
        format!("/var/lib/kubelet/plugins/{}", p.driver_name),
        "/var/run/cdi".to_owned(),
    ] {
        let mount = mounts
            .iter()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("kubelet-plugin.yaml: {path} is not mounted"));
        let host = volumes
            .iter()
            .find(|v| v.name == mount.name)
            .and_then(|v| v.host_path.as_ref())
            .unwrap_or_else(|| panic!("kubelet-plugin.yaml: {path} is not a hostPath volume"));
        assert_eq!(host.path, path, "kubelet-plugin.yaml: host path of {path}");
    }
    assert_eq!(
        c.security_context.as_ref().and_then(|s| s.privileged),
        Some(true)
    );
    // Plain devices, several per claim: what the driver does and no more.
    assert_eq!(
        p.capabilities,
        BTreeSet::from([Capability::MultipleDevicesPerClaim])
    );
}

/// The pool is several slices (DEVICES_PER_SLICE below devicesPerNode), so
/// that a change of the device count takes a new pool generation and the
/// pack's consistency check of pools has something to check; the driver
/// reads that variable.
#[test]
fn the_pool_is_several_slices() {
    let p = profile();
    let (_, _, c) = daemon_set();
    let per_node = p
        .devices_per_node
        .unwrap_or_else(|| panic!("{PROFILE}: devicesPerNode"));
    let per_slice: u32 = value(&c, "DEVICES_PER_SLICE")
        .and_then(|v| v.parse().ok())
        .expect("kubelet-plugin.yaml: DEVICES_PER_SLICE, a whole number");
    assert!(
        per_slice >= 1 && per_slice < per_node,
        "kubelet-plugin.yaml: DEVICES_PER_SLICE {per_slice} makes one slice of {per_node} devices"
    );
    assert!(
        read(DRIVER_SOURCE).contains("\"DEVICES_PER_SLICE\""),
        "{DRIVER_SOURCE} does not read DEVICES_PER_SLICE"
    );
}

/// One driver name in the profile, the DeviceClass (its name and its
/// selector), the DaemonSet (the driver's own host directory, and its
/// DRIVER_NAME or else main.go's default).
#[test]
fn the_driver_name_is_the_same_everywhere() {
    let p = profile();

    let docs = documents("deviceclass.yaml");
    assert_eq!(kinds(&docs), ["DeviceClass"]);
    let class: DeviceClass = typed("deviceclass.yaml", &docs[0]);
    let dra_e2e::profile::DeviceClass::Existing(class_name) = &p.device_class else {
        panic!("{PROFILE} should name an existing class");
    };
    assert_eq!(class.metadata.name.as_ref(), Some(class_name));
    assert_eq!(class_name, &p.driver_name);
    let expressions: Vec<String> = class
        .spec
        .expect("deviceclass.yaml: spec")
        .selectors
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| s.cel.map(|c| c.expression))
        .collect();
    assert_eq!(
        expressions,
        [format!("device.driver == \"{}\"", p.driver_name)]
    );

    let (_, pod, c) = daemon_set();
    let in_daemon_set = match env(&c, "DRIVER_NAME") {
        Some(var) => var
            .value
            .clone()
            .expect("kubelet-plugin.yaml: DRIVER_NAME has a value"),
        None => source_default_driver_name(),
    };
    assert_eq!(in_daemon_set, p.driver_name, "the driver's name");
    let data_dir = format!("/var/lib/kubelet/plugins/{}", p.driver_name);
    let volumes = pod.volumes.unwrap_or_default();
    assert!(
        volumes
            .iter()
            .any(|v| v.host_path.as_ref().is_some_and(|h| h.path == data_dir)),
        "kubelet-plugin.yaml: no hostPath volume {data_dir}"
    );
}

#[test]
fn rbac_gives_the_driver_what_the_helper_calls_in_its_namespace() {
    let docs = documents("rbac.yaml");
    assert_eq!(
        kinds(&docs),
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    let ns: Namespace = typed("rbac.yaml", &docs[0]);
    let ns = ns.metadata.name.unwrap();
    let sa: ServiceAccount = typed("rbac.yaml", &docs[1]);
    assert_eq!(sa.metadata.namespace.as_deref(), Some(ns.as_str()));
    let role: ClusterRole = typed("rbac.yaml", &docs[2]);
    let binding: ClusterRoleBinding = typed("rbac.yaml", &docs[3]);
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let subjects = binding.subjects.unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(
        (
            subjects[0].kind.as_str(),
            Some(&subjects[0].name),
            subjects[0].namespace.as_deref()
        ),
        (
            "ServiceAccount",
            sa.metadata.name.as_ref(),
            Some(ns.as_str())
        )
    );

    // The DaemonSet runs in that namespace as that account.
    let (ds, pod, _) = daemon_set();
    assert_eq!(ds.metadata.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(pod.service_account_name, sa.metadata.name);

    let rules = role.rules.unwrap_or_default();
    let allows = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
                && r.resource_names.is_none()
        })
    };
    for verb in ["get", "list", "watch", "create", "update", "delete"] {
        assert!(allows("resource.k8s.io", "resourceslices", verb), "{verb}");
    }
    assert!(allows("", "nodes", "get"));
    assert!(allows("resource.k8s.io", "resourceclaims", "get"));
    // Nothing beyond that: it writes no claim and reads no secret.
    for (group, resource, verb) in [
        ("", "secrets", "get"),
        ("", "pods", "get"),
        ("resource.k8s.io", "resourceclaims", "update"),
        ("resource.k8s.io", "resourceclaims/status", "update"),
        ("resource.k8s.io", "deviceclasses", "create"),
    ] {
        assert!(!allows(group, resource, verb), "{resource} {verb}");
    }
}
