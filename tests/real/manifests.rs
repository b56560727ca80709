//! A driver the runner deploys on a kubeconfig cluster (deployment.mode
//! Manifests): upstream's test driver, whose image the cluster's nodes
//! already have, applied from its manifests by the runner, put behind the
//! interposer and removed again at the end. The cluster is `dra-e2e cluster
//! up` with two real nodes that imported the driver's image, reached only
//! through its kubeconfig, as kind would be; the interposer's proxy pods run
//! the runner's own image, which those nodes import too.
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject};
use kube::discovery::Scope;
use kube::runtime::watcher;

use dra_e2e::wait::{self, Check};

use crate::common::{self, Watched};

const PROFILE: &str = "profiles/dra-test-driver-kubeconfig.yaml";
/// The namespaces the interposer's proxy pods run in are named so.
const INTERPOSER_NAMESPACES: &str = "dra-e2e-interposer-";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The objects of the manifest files that are still in the cluster, as
/// `Kind namespace/name`; what could not be read is reported as left.
async fn still_there(client: &kube::Client, files: &[PathBuf]) -> Vec<String> {
    let mut left = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let objs: Vec<DynamicObject> = serde_saphyr::from_multiple(&text).unwrap();
        for obj in objs {
            let types = obj.types.clone().unwrap();
            let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
            let name = obj.metadata.name.clone().unwrap();
            let (ar, caps) = match kube::discovery::pinned_kind(client, &gvk).await {
                Ok(found) => found,
                Err(e) => {
                    left.push(format!("{} {name}: discovery failed: {e}", types.kind));
                    continue;
                }
            };
            let (api, shown): (Api<DynamicObject>, String) = if caps.scope == Scope::Namespaced {
                let ns = obj.metadata.namespace.clone().unwrap();
                (
                    Api::namespaced_with(client.clone(), &ns, &ar),
                    format!("{ns}/{name}"),
                )
            } else {
                (Api::all_with(client.clone(), &ar), name.clone())
            };
            match api.get_opt(&name).await {
                Ok(None) => {}
                Ok(Some(_)) => left.push(format!("{} {shown}", types.kind)),
                Err(e) => left.push(format!("{} {shown}: reading it: {e}", types.kind)),
            }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_deploys_a_driver_on_a_kubeconfig_cluster_and_interposes_it() {
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

    let run = tokio::task::spawn_blocking({
        let home = home.path().to_owned();
        let kubeconfig = kubeconfig.clone();
        move || {
            common::isolated(&home)
                .args(["--cluster", "kubeconfig", "--kubeconfig"])
                .arg(&kubeconfig)
                // The runner's own image, which has the interposer's
                // `proxy-agent --connect`; the real nodes imported it.
                .args(["--proxy-image", &dra_e2e::real_node::proxy_image()])
                .args(["--profile", PROFILE, "--interpose", "--tags", "@Interposed"])
                .arg("--artifacts")
                .arg(home.join("artifacts"))
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let out = common::text(&run);

    // What the cluster holds after the run, read before it stops; the
    // assertions come once it is stopped, so a failing one leaves nothing
    // running.
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let manifests: Vec<PathBuf> = ["rbac.yaml", "deviceclass.yaml", "kubelet-plugin.yaml"]
        .iter()
        .map(|f| built.join(f))
        .collect();
    let left = still_there(&client, &manifests).await;
    let interposer = interposer_namespaces_gone(&client).await;

    cluster.sigint();
    let (code, t) = cluster.finish();
    assert_eq!(run.status.code(), Some(0), "{out}");
    assert!(out.contains("10 passed, 0 failed"), "{out}");
    assert!(
        out.contains("test-driver.cdi.k8s.io (Manifests)"),
        "the run names the deployment mode\n{out}"
    );
    assert!(out.contains("leak check: nothing left behind"), "{out}");
    // The runner removed every object it applied: the driver's namespace
    // and DaemonSet, its cluster-wide RBAC, its DeviceClass.
    assert!(left.is_empty(), "left in the cluster: {left:?}\n{out}");
    assert_eq!(interposer, Ok(()), "{out}");
    assert_eq!(code, Some(0), "{t}");
    common::assert_nothing_left(home.path(), &t);
}
