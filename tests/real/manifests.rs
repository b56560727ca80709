//! A driver the runner deploys on a kubeconfig cluster (deployment.mode
//! Manifests): upstream's test driver, whose image the cluster's nodes
//! already have, applied from its manifests by the runner, put behind the
//! interposer and removed again at the end. The cluster is `dra-e2e cluster
//! up` with two real nodes that imported the driver's image, reached only
//! through its kubeconfig, as kind would be; the interposer's proxy pods run
//! the runner's own image, which those nodes import too. The profile gives
//! no `registrationDir`: the runner points the DaemonSet's
//! `plugins_registry` volume at the interposer's private directory, as for
//! a driver that has no flag or variable for it.
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::watcher;

use dra_e2e::ground::wait::{self, Check};

use super::kubeconfig::{KubeconfigCluster, manifest_objects, test_driver_dir};
use crate::common;

const PROFILE: &str = "profiles/dra-test-driver-kubeconfig.yaml";
/// The namespaces the interposer's proxy pods run in are named so.
const INTERPOSER_NAMESPACES: &str = "dra-e2e-interposer-";

/// The objects of the manifest files that are still in the cluster, as
/// `Kind namespace/name`; what could not be read is reported as left.
async fn still_there(client: &kube::Client, files: &[PathBuf]) -> Vec<String> {
    let mut left = Vec::new();
    for found in manifest_objects(client, files).await {
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                left.push(e);
                continue;
            }
        };
        let name = found.object.metadata.name.clone().unwrap_or_default();
        match found.api.get_opt(&name).await {
            Ok(None) => {}
            Ok(Some(_)) => left.push(found.shown),
            Err(e) => left.push(format!("{}: reading it: {e}", found.shown)),
        }
    }
    left
}

/// Watches until no namespace of the interposer is left (one deleted at
/// the end of the run may still be terminating).
async fn interposer_namespaces_gone(client: &kube::Client) -> Result<(), String> {
    let api: Api<Namespace> = Api::all(client.clone());
    wait::list(
        &api,
        watcher::Config::default(),
        &format!("the {INTERPOSER_NAMESPACES}* namespaces to be gone"),
        Duration::from_secs(120),
        |all| {
            let left: Vec<String> = all
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .filter(|n| n.starts_with(INTERPOSER_NAMESPACES))
                .collect();
            if left.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(format!("still there: {left:?}"))
            }
        },
    )
    .await
    .map_err(|e| e.to_string())
}

/// The kubeconfig profile of the test driver with its `registrationDir`
/// taken out, written into `dir` (its manifests named by absolute paths).
fn profile_without_registration_dir(dir: &std::path::Path) -> PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(PROFILE)).unwrap();
    let mut kept = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with("registrationDir:") {
            skipping = true;
            continue;
        }
        if skipping && line.starts_with(' ') {
            continue;
        }
        skipping = false;
        kept.push(line.replace("../target/", &format!("{}/target/", root.display())));
    }
    let without = kept.join("\n");
    assert!(!without.contains("registrationDir:"), "{without}");
    let path = dir.join("test-driver-without-registration-dir.yaml");
    std::fs::write(&path, without).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_deploys_a_driver_on_a_kubeconfig_cluster_and_interposes_it() {
    let cluster = KubeconfigCluster::up();
    let profile = profile_without_registration_dir(cluster.home.path());

    // The runner's own image, which has the interposer's `proxy-agent
    // --connect`; the real nodes imported it.
    let run = cluster
        .run(
            [
                "--proxy-image",
                &dra_e2e::cluster::real_node::proxy_image(),
                "--profile",
                &profile.display().to_string(),
                "--interpose",
                "--tags",
                "@Interposed",
            ]
            .map(Into::into)
            .to_vec(),
        )
        .await;
    let out = common::text(&run);

    // What the cluster holds after the run, read before it stops; the
    // assertions come once it is stopped, so a failing one leaves nothing
    // running.
    let client = cluster.client().await;
    let manifests: Vec<PathBuf> = ["rbac.yaml", "deviceclass.yaml", "kubelet-plugin.yaml"]
        .iter()
        .map(|f| test_driver_dir().join(f))
        .collect();
    let left = still_there(&client, &manifests).await;
    let interposer = interposer_namespaces_gone(&client).await;

    let (code, t, home) = cluster.stop();
    assert_eq!(run.status.code(), Some(0), "{out}");
    // kubelet_calls.feature's 10, driver_instances.feature's 4 (a rollout,
    // a restart, device health and a failed health stream) and the pack's
    // deletion while a prepare is stalled, all behind the interposer.
    assert!(out.contains("15 passed, 0 failed"), "{out}");
    assert!(
        out.contains("test-driver.cdi.k8s.io (Manifests)"),
        "the run names the deployment mode\n{out}"
    );
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    // Nor did the interposer leave a socket in a kubelet's registration
    // directory (the runner says what it found there).
    assert!(!out.contains("removing the driver under test"), "{out}");
    // The runner removed every object it applied: the driver's namespace
    // and DaemonSet, its cluster-wide RBAC, its DeviceClass.
    assert!(left.is_empty(), "left in the cluster: {left:?}\n{out}");
    assert_eq!(interposer, Ok(()), "{out}");
    assert_eq!(code, Some(0), "{t}");
    common::assert_nothing_left(home.path(), &t);
}
