//! The conformance pack's surging-rollout scenario
//! (`features/conformance/updates.feature`) fails a driver whose slices
//! vanish during the rollout: the project's rolling-update driver deployed
//! with `DELETE_SLICES_ON_STOP=true` (hack/rolling-driver/main.go), whose
//! old pod deletes the node's ResourceSlices as it stops although the new
//! pod serves the node. Nothing publishes them again (the new pod's helper
//! does not notice), yet the steps between pass: the pods were served
//! before the old pod stopped. Only the background watch of the slices
//! sees the devices go, and the last step names the node, the time and the
//! deletion.
//!
//! The driver as shipped passes the scenario (`make conformance-rolling`,
//! in CI).
use std::path::Path;

use crate::common;

const SCENARIO: &str = "a surging rollout of the driver keeps its slices and serves new pods";

/// The rolling driver's profile and manifests copied into `dir`, its
/// DaemonSet's driver told to delete its slices when it stops.
fn broken_profile(dir: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = root.join("target/rolling-driver");
    assert!(
        built.join("rolling-driver.oci.tar").exists(),
        "{} is missing: `make rolling-driver` builds it (make test does)",
        built.display()
    );
    for file in ["rbac.yaml", "deviceclass.yaml"] {
        std::fs::copy(built.join(file), dir.join(file)).unwrap();
    }
    let plugin = std::fs::read_to_string(built.join("kubelet-plugin.yaml")).unwrap();
    let anchor = "            - name: NUM_DEVICES\n";
    assert!(plugin.contains(anchor), "no NUM_DEVICES in\n{plugin}");
    let plugin = plugin.replacen(
        anchor,
        &format!(
            "            - name: DELETE_SLICES_ON_STOP\n              value: \"true\"\n{anchor}"
        ),
        1,
    );
    std::fs::write(dir.join("kubelet-plugin.yaml"), plugin).unwrap();
    let profile = std::fs::read_to_string(root.join("profiles/rolling-driver.yaml")).unwrap();
    let archive = built.join("rolling-driver.oci.tar");
    let profile = profile
        .replace(
            "../target/rolling-driver/rolling-driver.oci.tar",
            &archive.display().to_string(),
        )
        .replace("../target/rolling-driver/", "");
    let path = dir.join("rolling-driver-deletes-slices.yaml");
    std::fs::write(&path, profile).unwrap();
    path
}

#[test]
fn a_driver_whose_old_pod_deletes_its_slices_fails_the_surging_rollout() {
    let home = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let profile = broken_profile(files.path());
    let mut c = common::isolated(home.path());
    common::on_real_nodes(&mut c);
    let out = c
        .args(["--cluster", "local", "--node-kind", "real", "--nodes", "1"])
        .arg("--profile")
        .arg(&profile)
        .args(["--features", "features/conformance/updates.feature"])
        .args(["--tags", "@DriverSurges"])
        .arg("--junit")
        .arg(home.path().join("junit.xml"))
        .arg("--artifacts")
        .arg(home.path().join("artifacts"))
        .output()
        .unwrap();
    let out = common::text(&out);
    assert!(out.contains("0 passed, 1 failed"), "{out}");
    common::assert_failures(
        &home.path().join("junit.xml"),
        &[(
            SCENARIO,
            "And the driver's slices never vanished",
            &[
                "driver rolling.dra-e2e.k8s.io's ResourceSlices vanished",
                "node dra-e2e-real-0 had no device from",
                "deleted",
            ],
        )],
    );
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    common::assert_nothing_left(home.path(), &out);
}
