//! The follower of a node's private registration directory against real
//! plugins of the suite's own on real unix sockets in a temp dir: what the
//! kubelet's directory holds as instances come, go and restart, and what
//! each broken interposer leaves out.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::*;
use crate::claims::{ClaimSource, ClaimSourceError};
use crate::{NodePlugin, PluginConfig};
use dra_e2e_conn::node_files::{LocalDir, NodeFiles};
use dra_e2e_conn::node_host::{Dialled, Served, SocketError};

const DRIVER: &str = "follow.k8s.io";
const NODE: &str = "node-0";

/// This machine as the node: sockets served, dialled and listed directly.
struct ThisMachine;

#[async_trait]
impl NodeHost for ThisMachine {
    fn kubelet_root(&self, _node: &str) -> PathBuf {
        PathBuf::new()
    }

    fn cdi_files(&self, _node: &str) -> Arc<dyn NodeFiles> {
        Arc::new(LocalDir::new("/nonexistent"))
    }

    async fn serve(&self, node: &str, socket: &Path) -> Result<Served, SocketError> {
        let l = tokio::net::UnixListener::bind(socket)
            .map_err(|e| SocketError::new(node, socket, e.to_string()))?;
        let path = socket.to_owned();
        Ok(Served::new(
            dra_e2e_conn::unix_incoming(l),
            Box::pin(async move {
                let _ = std::fs::remove_file(path);
            }),
        ))
    }

    async fn dial(&self, node: &str, socket: &Path) -> Result<Dialled, SocketError> {
        let s = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| SocketError::new(node, socket, e.to_string()))?;
        Ok(Box::new(s))
    }

    async fn sockets(&self, node: &str, dir: &Path) -> Result<Vec<SocketFile>, SocketError> {
        use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| SocketError::new(node, dir, e.to_string()))? {
            let Ok(e) = e else { continue };
            let Ok(m) = e.metadata() else { continue };
            if m.file_type().is_socket() {
                out.push(SocketFile {
                    name: e.file_name().to_string_lossy().into_owned(),
                    identity: format!("{}-{}.{}", m.ino(), m.ctime(), m.ctime_nsec()),
                });
            }
        }
        out.sort();
        Ok(out)
    }
}

struct NoClaims;

#[async_trait]
impl ClaimSource for NoClaims {
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceClaim>, ClaimSourceError> {
        Err(ClaimSourceError::Other {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            message: "no claims here".to_owned(),
        })
    }
}

struct Dirs {
    _tmp: tempfile::TempDir,
    private: PathBuf,
    registry: PathBuf,
    plugin: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let d = Dirs {
        private: tmp.path().join("p"),
        registry: tmp.path().join("r"),
        plugin: tmp.path().join("d"),
        _tmp: tmp,
    };
    for dir in [&d.private, &d.registry, &d.plugin] {
        std::fs::create_dir_all(dir).unwrap();
    }
    d
}

/// An instance of the driver registering as `name` in the private dir.
async fn instance(d: &Dirs, name: &str) -> NodePlugin {
    let dra = d.plugin.join(format!("{name}.dra.sock"));
    let config = PluginConfig::new(
        DRIVER,
        NODE,
        dra.display().to_string(),
        Arc::new(NoClaims),
        Arc::new(LocalDir::new(d.plugin.join("cdi"))),
        Calls::new(DRIVER),
    );
    NodePlugin::start_unix(config, &dra, d.private.join(name))
        .await
        .unwrap()
}

async fn interposer(d: &Dirs, fault: InterposerFault) -> NodeInterposer {
    NodeInterposer::start(
        Arc::new(ThisMachine),
        InterposerConfig {
            driver: DRIVER.to_owned(),
            node: NODE.to_owned(),
            private_dir: d.private.clone(),
            registry_dir: d.registry.clone(),
            endpoint_dir: d.plugin.clone(),
            calls: Calls::new(DRIVER),
            prepared: Prepared::default(),
            health: InjectedHealth::default(),
            driver_timeout: Duration::from_secs(10),
            fault,
            faults: Default::default(),
            disagreements: Default::default(),
        },
    )
    .await
    .unwrap()
}

/// The names in the kubelet's directory once they are `want` (the
/// follower looks twice a second); what they are after 10 s otherwise.
async fn registry_becomes(d: &Dirs, want: &[&str]) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut names: Vec<String> = std::fs::read_dir(&d.registry)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        if names == want || tokio::time::Instant::now() > deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Tells the kubelet-side socket `name` from one made again.
fn registry_identity(d: &Dirs, name: &str) -> Option<(u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(d.registry.join(name)).ok()?;
    Some((m.ino(), m.ctime(), m.ctime_nsec()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_come_and_go_in_the_kubelets_directory_as_in_the_drivers() {
    let d = dirs();
    let old = instance(&d, "follow.k8s.io-reg.sock").await;
    // A socket nobody answers (a killed driver's) is left alone.
    drop(std::os::unix::net::UnixListener::bind(d.private.join("dead-reg.sock")).unwrap());
    let i = interposer(&d, InterposerFault::None).await;
    assert_eq!(
        registry_becomes(&d, &["follow.k8s.io-reg.sock"]).await,
        ["follow.k8s.io-reg.sock"]
    );

    // A surge rollout's new pod: both, then the new one alone.
    let new = instance(&d, "follow.k8s.io-uid2-reg.sock").await;
    let both = ["follow.k8s.io-reg.sock", "follow.k8s.io-uid2-reg.sock"];
    assert_eq!(registry_becomes(&d, &both).await, both);
    assert_eq!(i.instances().len(), 2);
    old.stop().await.unwrap();
    assert_eq!(
        registry_becomes(&d, &["follow.k8s.io-uid2-reg.sock"]).await,
        ["follow.k8s.io-uid2-reg.sock"]
    );

    // Restarted in place: the same name, a new socket, and the kubelet's
    // socket made again (the kubelet registers it anew).
    let name = "follow.k8s.io-uid2-reg.sock";
    let before = registry_identity(&d, name);
    assert!(before.is_some());
    new.stop().await.unwrap();
    let again = instance(&d, name).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while registry_identity(&d, name).is_none_or(|now| Some(now) == before) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            i.instances()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(i.stop().await.is_empty());
    assert_eq!(registry_becomes(&d, &[]).await, Vec::<String>::new());
    again.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_interposer_misses_the_second_instance_or_the_restart() {
    let d = dirs();
    let first = instance(&d, "follow.k8s.io-a-reg.sock").await;
    let i = interposer(&d, InterposerFault::FirstInstanceOnly).await;
    let _second = instance(&d, "follow.k8s.io-b-reg.sock").await;
    // Both serve at once for a while, as in a surge rollout.
    i.looked(2).await;
    first.stop().await.unwrap();
    // The first went, and the second was never registered.
    assert_eq!(registry_becomes(&d, &[]).await, Vec::<String>::new());
    i.looked(2).await;
    assert_eq!(registry_becomes(&d, &[]).await, Vec::<String>::new());
    i.stop().await;

    let d = dirs();
    let first = instance(&d, "follow.k8s.io-reg.sock").await;
    let i = interposer(&d, InterposerFault::NoReregister).await;
    registry_becomes(&d, &["follow.k8s.io-reg.sock"]).await;
    let before = registry_identity(&d, "follow.k8s.io-reg.sock");
    assert!(before.is_some());
    first.stop().await.unwrap();
    i.looked(2).await;
    // Gone from the driver's directory, still registered with the kubelet.
    assert_eq!(
        registry_becomes(&d, &["follow.k8s.io-reg.sock"]).await,
        ["follow.k8s.io-reg.sock"]
    );
    let _again = instance(&d, "follow.k8s.io-reg.sock").await;
    i.looked(2).await;
    // The old registration: the kubelet's socket was never made again, so
    // the kubelet would never validate the new process.
    assert_eq!(registry_identity(&d, "follow.k8s.io-reg.sock"), before);
    assert_eq!(i.instances().len(), 1);
    i.stop().await;
}
