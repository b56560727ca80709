//! KEP-5970's setting: a driver already installed in a kubeconfig cluster,
//! the suite installing nothing, invoked with the KEP's two flags. The
//! cluster is `dra-e2e cluster up` with two real nodes; upstream's test
//! driver (`make test-driver`) is installed into it from its manifests as a
//! cluster admin would, and the conformance pack runs against it through
//! the kubeconfig alone.
use std::path::PathBuf;

use kube::api::PostParams;

use super::kubeconfig::{KubeconfigCluster, manifest_objects, root};
use crate::common;

const DRIVER: &str = "test-driver.cdi.k8s.io";

/// Installs upstream's test driver from its manifests, as a cluster admin
/// would.
pub async fn install_test_driver(client: &kube::Client) {
    let manifests: Vec<PathBuf> = ["rbac.yaml", "deviceclass.yaml", "kubelet-plugin.yaml"]
        .iter()
        .map(|f| root().join("deploy/dra-test-driver").join(f))
        .collect();
    install(client, &manifests).await;
}

/// Creates every object of the manifest files, as `kubectl create -f`.
pub async fn install(client: &kube::Client, files: &[PathBuf]) {
    for found in manifest_objects(client, files).await {
        let found = found.unwrap_or_else(|e| panic!("{e}"));
        found
            .api
            .create(&PostParams::default(), &found.object)
            .await
            .unwrap_or_else(|e| panic!("creating {}: {e}", found.shown));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pack_runs_against_an_installed_driver_named_by_keps_two_flags() {
    let cluster = KubeconfigCluster::up();
    let client = cluster.client().await;
    install_test_driver(&client).await;

    let junit = cluster.home.path().join("junit.xml");
    let run = cluster
        .run(vec![
            "--driver-name".into(),
            DRIVER.into(),
            "--device-class".into(),
            DRIVER.into(),
            "--features".into(),
            "features/conformance".into(),
            "--tags".into(),
            "@DriverConformance".into(),
            "--junit".into(),
            junit.into(),
        ])
        .await;
    let out = common::text(&run);
    let (code, t, home) = cluster.stop();
    assert_eq!(run.status.code(), Some(0), "{out}");
    // The KEP's flags claim no capability and no device count, and the
    // runner deployed nothing, so it knows no driver pods, and reboots no
    // node of a kubeconfig cluster: those scenarios are skipped with the
    // reason, every other one passes.
    assert!(
        out.contains(&format!(
            "driver conformance of {DRIVER}: 37 behaviours: 23 passed, 14 skipped, 0 failed"
        )),
        "{out}"
    );
    assert!(out.contains("deployment.mode: Installed"), "{out}");
    assert!(out.contains("\nkubelet: real kubelet\n"), "{out}");
    assert!(out.contains("needs driver capability AdminAccess"), "{out}");
    assert!(out.contains("devicesPerNode"), "{out}");
    assert!(out.contains("needs node operations"), "{out}");
    assert!(out.contains("(deviceCount)"), "{out}");
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    assert_eq!(code, Some(0), "{t}");
    common::assert_nothing_left(home.path(), &t);
}
