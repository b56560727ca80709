//! The checked-in manifests of upstream's DRA test driver
//! (deploy/dra-test-driver/, copied next to its image archive by `make
//! test-driver`) are Kubernetes objects, field for field, and say what
//! profiles/dra-test-driver.yaml says: the files it names, the DeviceClass,
//! the driver name, the registration directory flag, the devices per node,
//! device metadata. The image the DaemonSet runs is the one the Makefile
//! writes, at the version the control plane is built at. So neither the
//! profile nor the manifests can change without the other. The same driver
//! on a kubeconfig cluster (profiles/dra-test-driver-kubeconfig.yaml) is
//! that profile but for where it runs.
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::resource::v1::DeviceClass;

use crate::common::manifests::{kinds, typed, version};
use dra_e2e::profile::{Capability, Deployment, Options, Profile, Setting};

fn documents(file: &str) -> Vec<serde_json::Value> {
    crate::common::manifests::documents("deploy/dra-test-driver", file)
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deploy_dir() -> PathBuf {
    root().join("deploy/dra-test-driver")
}

fn profile() -> Profile {
    // The files it names are build outputs; what they are made from is
    // checked here instead.
    Profile::load(
        &root().join("profiles/dra-test-driver.yaml"),
        Options { check_files: false },
    )
    .expect("profiles/dra-test-driver.yaml has no mistakes")
}

/// The image reference the Makefile's `test-driver` target writes the
/// archive under.
fn makefile_image() -> String {
    let text = std::fs::read_to_string(root().join("Makefile")).unwrap();
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix("TEST_DRIVER_IMAGE = "))
        .expect("the Makefile sets TEST_DRIVER_IMAGE");
    value.replace("$(KUBE_VERSION)", &version("KUBE_VERSION"))
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

#[test]
fn the_profile_names_exactly_the_checked_in_manifests() {
    let Deployment::RealNodes {
        manifests,
        image_archives,
    } = profile().deployment
    else {
        panic!("profiles/dra-test-driver.yaml is not RealNodes");
    };
    let file_name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let named: BTreeSet<String> = manifests.iter().map(file_name).collect();
    let checked_in: BTreeSet<String> = std::fs::read_dir(deploy_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(named, checked_in);
    // All in target/dra-test-driver/, where `make test-driver` copies them
    // and writes the archive.
    let build_dir = root().join("target/dra-test-driver");
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
        ["dra-test-driver.oci.tar"]
    );
}

/// profiles/dra-test-driver-kubeconfig.yaml is the same driver on a
/// kubeconfig cluster: the profile above in every field but the
/// deployment, which applies the same manifests and loads no image (the
/// cluster's nodes must have it already).
#[test]
fn the_kubeconfig_profile_is_the_same_driver_from_the_same_manifests() {
    let real = profile();
    let path = root().join("profiles/dra-test-driver-kubeconfig.yaml");
    let kubeconfig = Profile::load(&path, Options { check_files: false })
        .expect("profiles/dra-test-driver-kubeconfig.yaml has no mistakes");
    let Deployment::RealNodes { manifests, .. } = &real.deployment else {
        panic!("profiles/dra-test-driver.yaml is not RealNodes");
    };
    assert_eq!(
        kubeconfig.deployment,
        Deployment::Manifests {
            manifests: manifests.clone()
        }
    );
    assert_eq!(
        kubeconfig,
        Profile {
            deployment: kubeconfig.deployment.clone(),
            file: Some(path.clone()),
            ..real
        }
    );
    // Behind the interposer as on real local nodes.
    assert_eq!(kubeconfig.interposable(), Ok(()));
}

#[test]
fn rbac_gives_the_driver_its_rights_in_its_namespace() {
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

    let rules = role.rules.unwrap_or_default();
    let allows = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
                && r.resource_names.is_none()
        })
    };
    for verb in [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ] {
        assert!(allows("resource.k8s.io", "resourceslices", verb), "{verb}");
    }
    assert!(allows("", "nodes", "get"));
    assert!(allows("resource.k8s.io", "resourceclaims", "get"));
    assert!(allows("resource.k8s.io", "resourceclaims/status", "update"));
    // Nothing beyond reading: no secrets, no pods, no writes to claims.
    for (group, resource, verb) in [
        ("", "secrets", "get"),
        ("", "pods", "get"),
        ("resource.k8s.io", "resourceclaims", "update"),
        ("resource.k8s.io", "deviceclasses", "create"),
    ] {
        assert!(!allows(group, resource, verb), "{resource} {verb}");
    }
}

#[test]
fn the_device_class_is_the_profiles_and_selects_its_driver() {
    let p = profile();
    let docs = documents("deviceclass.yaml");
    assert_eq!(kinds(&docs), ["DeviceClass"]);
    let class: DeviceClass = typed("deviceclass.yaml", &docs[0]);
    let dra_e2e::profile::DeviceClass::Existing(name) = &p.device_class else {
        panic!("the profile should name an existing class");
    };
    assert_eq!(class.metadata.name.as_ref(), Some(name));
    let selectors = class.spec.expect("spec").selectors.unwrap_or_default();
    let expressions: Vec<&str> = selectors
        .iter()
        .filter_map(|s| s.cel.as_ref())
        .map(|c| c.expression.as_str())
        .collect();
    assert_eq!(
        expressions,
        [format!("device.driver == \"{}\"", p.driver_name)]
    );
}

#[test]
fn the_daemon_set_runs_the_driver_as_the_profile_describes_it() {
    let p = profile();
    let docs = documents("kubelet-plugin.yaml");
    assert_eq!(kinds(&docs), ["DaemonSet"]);
    let ds: DaemonSet = typed("kubelet-plugin.yaml", &docs[0]);
    let rbac = documents("rbac.yaml");
    assert_eq!(
        ds.metadata.namespace,
        rbac[0]["metadata"]["name"].as_str().map(str::to_owned)
    );
    let spec = ds.spec;
    let pod = spec.template.spec.unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        rbac[1]["metadata"]["name"].as_str()
    );
    // On every node whatever its taints.
    let tolerations = pod.tolerations.unwrap_or_default();
    assert!(
        tolerations
            .iter()
            .any(|t| t.operator.as_deref() == Some("Exists")
                && t.key.is_none()
                && t.effect.is_none()),
        "{tolerations:?}"
    );
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];

    // The image the Makefile writes, found on the node, never pulled.
    assert_eq!(c.image.as_deref(), Some(makefile_image().as_str()));
    assert!(
        makefile_image().ends_with(&format!(":{}", version("KUBE_VERSION"))),
        "{}",
        makefile_image()
    );
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));

    let command = c.command.clone().unwrap_or_default();
    assert_eq!(
        command.first().map(String::as_str),
        Some("/dra-test-driver")
    );
    assert!(command.iter().any(|a| a == "kubelet-plugin"), "{command:?}");
    let flag = |name: &str| -> Option<&str> {
        command
            .iter()
            .find_map(|a| a.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
    };
    // The driver's default name is the profile's.
    assert_eq!(flag("--drivername"), None);
    assert_eq!(p.driver_name, "test-driver.cdi.k8s.io");
    assert_eq!(flag("--node-name"), Some("$(NODE_NAME)"));
    let node_name = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "NODE_NAME")
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(node_name, Some("spec.nodeName"));
    assert_eq!(
        flag("--num-devices"),
        Some(
            p.devices_per_node
                .expect("devicesPerNode")
                .to_string()
                .as_str()
        )
    );
    assert_eq!(
        command.iter().any(|a| a == "--enable-device-metadata"),
        p.capabilities.contains(&Capability::DeviceMetadata)
    );

    // The registration directory flag the profile names, and each host
    // directory the driver is told about mounted at the same path.
    let Some(Setting::Flag(reg_flag)) = &p.registration_dir else {
        panic!("the profile should name a registration directory flag");
    };
    let volumes = pod.volumes.unwrap_or_default();
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    let mounted_host_dir = |path: &str| {
        let mount = mounts
            .iter()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("{path} is not mounted"));
        let host = volumes
            .iter()
            .find(|v| v.name == mount.name)
            .and_then(|v| v.host_path.as_ref())
            .unwrap_or_else(|| panic!("{path} is not a hostPath volume"));
        assert_eq!(host.path, path);
    };
    for (name, want) in [
        (reg_flag.as_str(), "/var/lib/kubelet/plugins_registry"),
        ("--datadir", "/var/lib/kubelet/plugins"),
        ("--cdi-dir", "/var/run/cdi"),
    ] {
        assert_eq!(flag(name), Some(want), "{name} in {command:?}");
    }
    mounted_host_dir("/var/lib/kubelet/plugins_registry");
    mounted_host_dir("/var/run/cdi");
    // The driver's socket directory, `--datadir` + its name: the driver
    // creates only `--datadir`, so this one must come from the mount.
    mounted_host_dir(&format!("/var/lib/kubelet/plugins/{}", p.driver_name));
    assert_eq!(
        c.security_context.as_ref().and_then(|s| s.privileged),
        Some(true)
    );
}
