//! What the tests share: the kubelet's side (dialling the plugin's sockets
//! as the kubelet does, registering, preparing), claims as the API server
//! would return them, and a node's kubelet root in a temp dir.
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use dra_e2e::conn::authority::{CLIENT_URI, KubeletSocket};
use dra_e2e::conn::node_files::LocalDir;
use dra_e2e::plugin::{
    Calls, ClaimId, ClaimRef, ClaimSource, ClaimSourceError, HealthApi, HealthStatus, NodeApi,
    NodePlugin, PluginConfig,
};
use dra_e2e::proto::dra::{NodeClient, PreparedDevice};
use dra_e2e::proto::health::{HealthReport, HealthReports, watch_health};
use dra_e2e::proto::pluginregistration::{
    InfoRequest, RegistrationStatus as PbStatus, registration_client::RegistrationClient,
};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

pub const DRIVER: &str = "dra-1234.k8s.io";
pub const WAIT: Duration = Duration::from_secs(30);

/// Claims as the API server would return them (unit-test stand-in).
#[derive(Default)]
pub struct FakeClaims {
    pub claims: Mutex<HashMap<(String, String), ResourceClaim>>,
}

impl FakeClaims {
    pub fn put(&self, claim: ResourceClaim) {
        let key = (
            claim.metadata.namespace.clone().unwrap(),
            claim.metadata.name.clone().unwrap(),
        );
        self.claims.lock().unwrap().insert(key, claim);
    }
}

#[async_trait]
impl ClaimSource for FakeClaims {
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceClaim>, ClaimSourceError> {
        let key = (namespace.to_owned(), name.to_owned());
        Ok(self.claims.lock().unwrap().get(&key).cloned())
    }
}

// Claims are built from the API server's JSON, as a claim source reading a
// real API server gets them.

pub fn result(request: &str, device: &str, share_id: Option<&str>) -> Value {
    json!({
        "driver": DRIVER,
        "pool": "node-a",
        "device": device,
        "request": request,
        "shareID": share_id,
    })
}

pub fn claim_config(params: Value) -> Value {
    json!({
        "source": "FromClaim",
        "opaque": {"driver": DRIVER, "parameters": params},
    })
}

pub fn allocated_claim(
    name: &str,
    uid: &str,
    results: Vec<Value>,
    configs: Vec<Value>,
) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {},
        "status": {"allocation": {"devices": {"results": results, "config": configs}}},
    }))
    .unwrap()
}

pub fn claim_ref(name: &str, uid: &str) -> ClaimRef {
    ClaimRef {
        namespace: "ns".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
    }
}

/// A kubelet root in a temp dir with one driver's sockets and a CDI dir.
pub struct Node {
    pub name: String,
    pub root: tempfile::TempDir,
}

impl Node {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            root: tempfile::tempdir().unwrap(),
        }
    }
    pub fn dra_socket(&self) -> PathBuf {
        self.root.path().join(format!("plugins/{DRIVER}/dra.sock"))
    }
    pub fn registration_socket(&self) -> PathBuf {
        self.root
            .path()
            .join(format!("plugins_registry/{DRIVER}-reg.sock"))
    }
    pub fn cdi_dir(&self) -> PathBuf {
        self.root.path().join("cdi")
    }
    pub async fn start(&self, config: PluginConfig) -> NodePlugin {
        NodePlugin::start_unix(config, self.dra_socket(), self.registration_socket())
            .await
            .unwrap()
    }
    pub fn cdi_files(&self) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(self.cdi_dir()) {
            Ok(dir) => dir
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }
}

/// Dials like the kubelet: plain HTTP/2 over the unix socket, the kubelet's
/// 1 s deadline on every call, and the `:authority` its grpc-go client sends
/// to that kind of socket: the percent-encoded path to the registration
/// socket (dialled by bare path), `localhost` to the DRA socket (dialled as
/// `unix:<path>`).
pub async fn dial(socket: KubeletSocket, path: &Path) -> Channel {
    let endpoint = Endpoint::from_static(CLIENT_URI)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(1));
    connect(socket, path, endpoint).await
}

/// Same as [`dial`], without a per-call deadline (for stalled calls).
pub async fn dial_patient(socket: KubeletSocket, path: &Path) -> Channel {
    connect(socket, path, Endpoint::from_static(CLIENT_URI)).await
}

pub async fn connect(socket: KubeletSocket, path: &Path, endpoint: Endpoint) -> Channel {
    let path = path.to_owned();
    endpoint
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(&path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(socket.client_io(&path, stream)))
            }
        }))
        .await
        .unwrap()
}

pub async fn dial_registration(node: &Node) -> Channel {
    dial(KubeletSocket::Registration, &node.registration_socket()).await
}

pub async fn dial_dra(node: &Node) -> Channel {
    dial(KubeletSocket::Dra, &node.dra_socket()).await
}

pub async fn dial_dra_patient(node: &Node) -> Channel {
    dial_patient(KubeletSocket::Dra, &node.dra_socket()).await
}

/// claim UID -> (devices, per-claim error)
pub type PrepareView = BTreeMap<String, (Vec<PreparedDevice>, String)>;
/// claim UID -> per-claim error
pub type UnprepareView = BTreeMap<String, String>;

pub async fn prepare(
    api: NodeApi,
    channel: Channel,
    claims: &[ClaimRef],
) -> Result<PrepareView, tonic::Status> {
    let response = NodeClient::new(api, channel).prepare(claims).await?;
    Ok(response
        .into_iter()
        .map(|(uid, r)| (uid, (r.devices, r.error)))
        .collect())
}

pub async fn unprepare(
    api: NodeApi,
    channel: Channel,
    claims: &[ClaimRef],
) -> Result<UnprepareView, tonic::Status> {
    let response = NodeClient::new(api, channel).unprepare(claims).await?;
    Ok(response.into_iter().collect())
}

/// Opens a health stream like the kubelet, expecting it to be served.
pub async fn open_health(api: HealthApi, channel: Channel) -> HealthReports {
    match watch_health(api, channel).await {
        Ok(stream) => stream,
        Err(status) => panic!("{api} health stream not opened: {status:?}"),
    }
}

/// (pool, device, health, message) of each device in a report.
pub fn health_view(report: HealthReport) -> Vec<(String, String, HealthStatus, String)> {
    report
        .devices
        .into_iter()
        .map(|d| (d.pool, d.device, d.health, d.message))
        .collect()
}

/// Like the kubelet's plugin watcher: GetInfo, then NotifyRegistrationStatus.
pub async fn register(node: &Node) -> dra_e2e::proto::pluginregistration::PluginInfo {
    let mut client = RegistrationClient::new(dial_registration(node).await);
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    notify_registered(&mut client).await;
    info
}

pub async fn notify_registered(client: &mut RegistrationClient<Channel>) {
    client
        .notify_registration_status(PbStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .unwrap();
}

/// What the plugins of a test share, as in a run: the claims the API server
/// returns and the one call log, which counts per node.
pub struct Env {
    pub claims: Arc<FakeClaims>,
    pub calls: Calls,
}

impl Env {
    pub fn new() -> Self {
        Self {
            claims: Arc::default(),
            calls: Calls::new(DRIVER),
        }
    }

    pub fn config(&self, node: &Node) -> PluginConfig {
        PluginConfig::new(
            DRIVER,
            node.name.clone(),
            node.dra_socket().display().to_string(),
            self.claims.clone(),
            Arc::new(LocalDir::new(node.cdi_dir())),
            self.calls.clone(),
        )
    }

    /// `node`'s plugin with the default config.
    pub async fn start(&self, node: &Node) -> NodePlugin {
        node.start(self.config(node)).await
    }

    /// Runs `call` on a task with `method` stalled on `node` and returns
    /// once the plugin holds it.
    pub async fn stalled<T: Send + 'static>(
        &self,
        node: &Node,
        method: &str,
        call: impl Future<Output = T> + Send + 'static,
    ) -> JoinHandle<T> {
        self.calls.stall(&node.name, method);
        let task = tokio::spawn(call);
        self.calls
            .wait_stalled(&node.name, method, 1, WAIT)
            .await
            .unwrap();
        task
    }

    /// Puts two allocated claims in the store, one with a config and a
    /// share ID, the other with a subrequest, and returns their refs.
    pub fn two_claims(&self) -> Vec<ClaimRef> {
        self.claims.put(allocated_claim(
            "external-claim",
            "uid-1",
            vec![result("my-request", "device-00", Some("share-7"))],
            vec![claim_config(json!({"a": "b"}))],
        ));
        self.claims.put(allocated_claim(
            "other",
            "uid-2",
            vec![result("req/sub", "device-01", None)],
            vec![],
        ));
        vec![
            claim_ref("external-claim", "uid-1"),
            claim_ref("other", "uid-2"),
        ]
    }
}

/// Of the claims of [`Env::two_claims`], only "other" is prepared on `node`,
/// in the plugin's view and in the CDI directory.
#[track_caller]
pub fn assert_only_other_prepared(node: &Node, plugin: &NodePlugin) {
    assert_eq!(node.cdi_files(), [format!("{DRIVER}-uid-2-req.json")]);
    assert_eq!(
        plugin.prepared_claims(),
        [ClaimId {
            name: "other".into(),
            uid: "uid-2".into()
        }]
    );
}
