//! KEP-5970's setting: a driver already installed in a kubeconfig cluster,
//! the suite installing nothing, invoked with the KEP's two flags. The
//! cluster is `dra-e2e cluster up` with two real nodes; upstream's test
//! driver (`make test-driver`) is installed into it from its manifests as a
//! cluster admin would, and the conformance pack runs against it through
//! the kubeconfig alone.
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::Scope;

use crate::common::{self, Watched};

const DRIVER: &str = "test-driver.cdi.k8s.io";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Creates every object of the manifest files, as `kubectl create -f`.
async fn install(client: &kube::Client, files: &[PathBuf]) {
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let objs: Vec<DynamicObject> = serde_saphyr::from_multiple(&text).unwrap();
        for obj in objs {
            let types = obj.types.clone().unwrap();
            let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
            let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
            let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
                let ns = obj.metadata.namespace.clone().unwrap();
                Api::namespaced_with(client.clone(), &ns, &ar)
            } else {
                Api::all_with(client.clone(), &ar)
            };
            api.create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("creating {} from {}: {e}", types.kind, file.display()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pack_runs_against_an_installed_driver_named_by_keps_two_flags() {
    let built = root().join("target/dra-test-driver");
    let archive = built.join("dra-test-driver.oci.tar");
    assert!(
        archive.exists(),
        "{} is missing: `make test-driver` builds upstream's test driver (make test does)",
        archive.display()
    );
    let home = tempfile::tempdir().unwrap();
    let mut up = common::isolated(home.path());
    common::on_real_nodes(&mut up);
    up.args([
        "cluster",
        "up",
        "--node-kind",
        "real",
        "--nodes",
        "2",
        "--image-archive",
    ])
    .arg(&archive);
    let cluster = Watched::spawn(up);
    let Some(line) = cluster.line_with("kubeconfig:", Duration::from_secs(300)) else {
        cluster.sigint();
        let (_, t) = cluster.finish();
        panic!("cluster up printed no kubeconfig\n{t}");
    };
    let kubeconfig = PathBuf::from(line.trim().trim_start_matches("kubeconfig:").trim());
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let manifests: Vec<PathBuf> = ["rbac.yaml", "deviceclass.yaml", "kubelet-plugin.yaml"]
        .iter()
        .map(|f| root().join("deploy/dra-test-driver").join(f))
        .collect();
    install(&client, &manifests).await;

    let junit = home.path().join("junit.xml");
    let run = tokio::task::spawn_blocking({
        let home = home.path().to_owned();
        let kubeconfig = kubeconfig.clone();
        let junit = junit.clone();
        move || {
            common::isolated(&home)
                .args(["--cluster", "kubeconfig", "--kubeconfig"])
                .arg(&kubeconfig)
                .args(["--driver-name", DRIVER, "--device-class", DRIVER])
                .args([
                    "--features",
                    "features/conformance",
                    "--tags",
                    "@DriverConformance",
                ])
                .arg("--junit")
                .arg(&junit)
                .arg("--artifacts")
                .arg(home.join("artifacts"))
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let out = common::text(&run);
    cluster.sigint();
    let (code, t) = cluster.finish();
    assert_eq!(run.status.code(), Some(0), "{out}");
    // The KEP's flags claim no capability and no device count, and the
    // runner deployed nothing, so it knows no driver pods, and reboots no
    // node of a kubeconfig cluster: those scenarios are skipped with the
    // reason, every other one passes.
    assert!(
        out.contains(&format!(
            "driver conformance of {DRIVER}: 30 behaviours: 22 passed, 8 skipped, 0 failed"
        )),
        "{out}"
    );
    assert!(out.contains("deployment.mode: Installed"), "{out}");
    assert!(out.contains("needs driver capability AdminAccess"), "{out}");
    assert!(out.contains("devicesPerNode"), "{out}");
    assert!(out.contains("needs node operations"), "{out}");
    assert!(out.contains("(deviceCount)"), "{out}");
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    assert_eq!(code, Some(0), "{t}");
    common::assert_nothing_left(home.path(), &t);
}
