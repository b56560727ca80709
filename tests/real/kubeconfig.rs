//! A kubeconfig cluster made of real nodes, as the tests of a driver someone
//! else installs or the runner deploys see it: `dra-e2e cluster up` with
//! two real nodes that imported upstream's test driver's image, reached
//! only through the kubeconfig it prints, as kind would be.
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::discovery::Scope;

use crate::common::{self, Watched};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where `make test-driver` writes upstream's test driver: its image
/// archive and its manifests.
pub fn test_driver_dir() -> PathBuf {
    root().join("target/dra-test-driver")
}

pub struct KubeconfigCluster {
    /// The isolated home of the `cluster up` process and of the runs.
    pub home: tempfile::TempDir,
    pub process: Watched,
    pub kubeconfig: PathBuf,
}

impl KubeconfigCluster {
    /// Starts the cluster and waits for its kubeconfig.
    pub fn up() -> Self {
        Self::up_with(&[])
    }

    /// [`KubeconfigCluster::up`] with more image archives for the nodes to
    /// import (the runner's own image, say).
    pub fn up_with(extra_archives: &[PathBuf]) -> Self {
        let archive = test_driver_dir().join("dra-test-driver.oci.tar");
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
        for extra in extra_archives {
            up.arg("--image-archive").arg(extra);
        }
        let process = Watched::spawn(up);
        let Some(line) = process.line_with("kubeconfig:", Duration::from_secs(300)) else {
            process.sigint();
            let (_, t) = process.finish();
            panic!("cluster up printed no kubeconfig\n{t}");
        };
        let kubeconfig = PathBuf::from(line.trim().trim_start_matches("kubeconfig:").trim());
        KubeconfigCluster {
            home,
            process,
            kubeconfig,
        }
    }

    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Runs the runner against the cluster through its kubeconfig alone,
    /// with `args` and its artifacts in the home.
    pub async fn run(&self, args: Vec<std::ffi::OsString>) -> std::process::Output {
        let home = self.home.path().to_owned();
        let kubeconfig = self.kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            common::isolated(&home)
                .args(["--cluster", "kubeconfig", "--kubeconfig"])
                .arg(&kubeconfig)
                .args(args)
                .arg("--artifacts")
                .arg(home.join("artifacts"))
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    }

    /// Stops the cluster: its exit code and transcript.
    pub fn stop(self) -> (Option<i32>, String, tempfile::TempDir) {
        self.process.sigint();
        let (code, t) = self.process.finish();
        (code, t, self.home)
    }
}

/// One object of a manifest file, with the API it lives in and how
/// messages name it (`Kind namespace/name`).
pub struct ManifestObject {
    pub object: DynamicObject,
    pub api: Api<DynamicObject>,
    pub shown: String,
}

/// The objects of the manifest files in order; one whose kind discovery
/// cannot find is the message saying so.
pub async fn manifest_objects(
    client: &kube::Client,
    files: &[PathBuf],
) -> Vec<Result<ManifestObject, String>> {
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let objs: Vec<DynamicObject> = serde_saphyr::from_multiple(&text).unwrap();
        for object in objs {
            let types = object.types.clone().unwrap();
            let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
            let name = object.metadata.name.clone().unwrap();
            let (ar, caps) = match kube::discovery::pinned_kind(client, &gvk).await {
                Ok(found) => found,
                Err(e) => {
                    out.push(Err(format!(
                        "{} {name} (in {}): discovery failed: {e}",
                        types.kind,
                        file.display()
                    )));
                    continue;
                }
            };
            let (api, shown) = if caps.scope == Scope::Namespaced {
                let ns = object.metadata.namespace.clone().unwrap();
                (
                    Api::namespaced_with(client.clone(), &ns, &ar),
                    format!("{} {ns}/{name}", types.kind),
                )
            } else {
                (
                    Api::all_with(client.clone(), &ar),
                    format!("{} {name}", types.kind),
                )
            };
            out.push(Ok(ManifestObject { object, api, shown }));
        }
    }
    out
}
