//! The node plugin as a kubelet sees it: real gRPC over real unix sockets in a
//! temp dir, this test acting as the kubelet.
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use dra_e2e::conn::authority::{CLIENT_URI, KubeletSocket};
use dra_e2e::conn::node_files::LocalDir;
use dra_e2e::plugin::{
    CallOutcome, Calls, ClaimId, ClaimRef, ClaimSource, ClaimSourceError, DeviceHealth, HealthApi,
    HealthStatus, NodeApi, NodePlugin, PluginConfig, RegistrationStatus,
};
use dra_e2e::proto::dra::{NodeClient, PreparedDevice};
use dra_e2e::proto::health::{HealthReport, HealthReports, watch_health};
use dra_e2e::proto::method;
use dra_e2e::proto::pluginregistration::{
    InfoRequest, RegistrationStatus as PbStatus, registration_client::RegistrationClient,
};
use futures::StreamExt as _;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

const DRIVER: &str = "dra-1234.k8s.io";
const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- fixtures

/// Claims as the API server would return them (unit-test stand-in).
#[derive(Default)]
struct FakeClaims {
    claims: Mutex<HashMap<(String, String), ResourceClaim>>,
}

impl FakeClaims {
    fn put(&self, claim: ResourceClaim) {
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

fn result(request: &str, device: &str, share_id: Option<&str>) -> Value {
    json!({
        "driver": DRIVER,
        "pool": "node-a",
        "device": device,
        "request": request,
        "shareID": share_id,
    })
}

fn claim_config(params: Value) -> Value {
    json!({
        "source": "FromClaim",
        "opaque": {"driver": DRIVER, "parameters": params},
    })
}

fn allocated_claim(
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

fn claim_ref(name: &str, uid: &str) -> ClaimRef {
    ClaimRef {
        namespace: "ns".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
    }
}

/// A kubelet root in a temp dir with one driver's sockets and a CDI dir.
struct Node {
    name: String,
    root: tempfile::TempDir,
}

impl Node {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            root: tempfile::tempdir().unwrap(),
        }
    }
    fn dra_socket(&self) -> PathBuf {
        self.root.path().join(format!("plugins/{DRIVER}/dra.sock"))
    }
    fn registration_socket(&self) -> PathBuf {
        self.root
            .path()
            .join(format!("plugins_registry/{DRIVER}-reg.sock"))
    }
    fn cdi_dir(&self) -> PathBuf {
        self.root.path().join("cdi")
    }
    async fn start(&self, config: PluginConfig) -> NodePlugin {
        NodePlugin::start_unix(config, self.dra_socket(), self.registration_socket())
            .await
            .unwrap()
    }
    fn cdi_files(&self) -> Vec<String> {
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
async fn dial(socket: KubeletSocket, path: &Path) -> Channel {
    let endpoint = Endpoint::from_static(CLIENT_URI)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(1));
    connect(socket, path, endpoint).await
}

/// Same as [`dial`], without a per-call deadline (for stalled calls).
async fn dial_patient(socket: KubeletSocket, path: &Path) -> Channel {
    connect(socket, path, Endpoint::from_static(CLIENT_URI)).await
}

async fn connect(socket: KubeletSocket, path: &Path, endpoint: Endpoint) -> Channel {
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

async fn dial_registration(node: &Node) -> Channel {
    dial(KubeletSocket::Registration, &node.registration_socket()).await
}

async fn dial_dra(node: &Node) -> Channel {
    dial(KubeletSocket::Dra, &node.dra_socket()).await
}

async fn dial_dra_patient(node: &Node) -> Channel {
    dial_patient(KubeletSocket::Dra, &node.dra_socket()).await
}

/// claim UID -> (devices, per-claim error)
type PrepareView = BTreeMap<String, (Vec<PreparedDevice>, String)>;
/// claim UID -> per-claim error
type UnprepareView = BTreeMap<String, String>;

async fn prepare(
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

async fn unprepare(
    api: NodeApi,
    channel: Channel,
    claims: &[ClaimRef],
) -> Result<UnprepareView, tonic::Status> {
    let response = NodeClient::new(api, channel).unprepare(claims).await?;
    Ok(response.into_iter().collect())
}

/// Opens a health stream like the kubelet, expecting it to be served.
async fn open_health(api: HealthApi, channel: Channel) -> HealthReports {
    match watch_health(api, channel).await {
        Ok(stream) => stream,
        Err(status) => panic!("{api} health stream not opened: {status:?}"),
    }
}

/// (pool, device, health, message) of each device in a report.
fn health_view(report: HealthReport) -> Vec<(String, String, HealthStatus, String)> {
    report
        .devices
        .into_iter()
        .map(|d| (d.pool, d.device, d.health, d.message))
        .collect()
}

/// Like the kubelet's plugin watcher: GetInfo, then NotifyRegistrationStatus.
async fn register(node: &Node) -> dra_e2e::proto::pluginregistration::PluginInfo {
    let mut client = RegistrationClient::new(dial_registration(node).await);
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    notify_registered(&mut client).await;
    info
}

async fn notify_registered(client: &mut RegistrationClient<Channel>) {
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
struct Env {
    claims: Arc<FakeClaims>,
    calls: Calls,
}

impl Env {
    fn new() -> Self {
        Self {
            claims: Arc::default(),
            calls: Calls::new(DRIVER),
        }
    }

    fn config(&self, node: &Node) -> PluginConfig {
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
    async fn start(&self, node: &Node) -> NodePlugin {
        node.start(self.config(node)).await
    }

    /// Runs `call` on a task with `method` stalled on `node` and returns
    /// once the plugin holds it.
    async fn stalled<T: Send + 'static>(
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
    fn two_claims(&self) -> Vec<ClaimRef> {
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
fn assert_only_other_prepared(node: &Node, plugin: &NodePlugin) {
    assert_eq!(node.cdi_files(), [format!("{DRIVER}-uid-2-req.json")]);
    assert_eq!(
        plugin.prepared_claims(),
        [ClaimId {
            name: "other".into(),
            uid: "uid-2".into()
        }]
    );
}

// ---------------------------------------------------------------- registration

#[tokio::test]
async fn registration_handshake_completes_within_the_kubelet_deadline() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    assert!(node.dra_socket().exists() && node.registration_socket().exists());
    assert_eq!(plugin.registration_status(), RegistrationStatus::Pending);

    let info = register(&node).await;
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, node.dra_socket().display().to_string());
    assert_eq!(
        info.supported_versions,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1.DRAResourceHealth",
            "v1alpha1.DRAResourceHealth"
        ]
    );
    plugin.wait_registered(WAIT).await.unwrap();
    assert!(plugin.is_registered());
    assert_eq!(env.calls.count("node-a", method::GET_INFO), 1);
    assert_eq!(
        env.calls
            .count("node-a", method::NOTIFY_REGISTRATION_STATUS),
        1
    );

    // A rejection is recorded and answered with an error, as the helper does.
    let mut client = RegistrationClient::new(dial_registration(&node).await);
    let err = client
        .notify_registration_status(PbStatus {
            plugin_registered: false,
            error: "no matching version".to_owned(),
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("no matching version"), "{err:?}");
    assert_eq!(
        plugin.registration_status(),
        RegistrationStatus::Rejected("no matching version".to_owned())
    );

    plugin.stop().await.unwrap();
    assert!(!node.dra_socket().exists(), "DRA socket left behind");
    assert!(
        !node.registration_socket().exists(),
        "registration socket left behind"
    );
}

#[tokio::test]
async fn wait_registered_times_out_with_the_last_status() {
    let node = Node::new("node-a");
    let plugin = Env::new().start(&node).await;
    let err = plugin
        .wait_registered(Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not yet notified"), "{err}");
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn plugin_offering_only_v1beta1_advertises_only_it_and_rejects_v1_calls() {
    let node = Node::new("node-a");
    let env = Env::new();
    let config = env
        .config(&node)
        .with_node_apis([NodeApi::V1beta1])
        .with_health_apis([]);
    let plugin = node.start(config).await;
    let info = register(&node).await;
    assert_eq!(info.supported_versions, ["v1beta1.DRAPlugin"]);

    let refs = env.two_claims();
    let channel = dial_dra(&node).await;
    let err = prepare(NodeApi::V1, channel.clone(), &refs)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    let err = prepare(NodeApi::V1alpha4, channel.clone(), &refs)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    let Err(err) = watch_health(HealthApi::V1alpha1, channel.clone()).await else {
        panic!("health served although not configured");
    };
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    assert!(plugin.prepared_claims().is_empty());

    let prepared = prepare(NodeApi::V1beta1, channel, &refs).await.unwrap();
    assert_eq!(prepared.len(), 2);
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn v1alpha4_alone_is_advertised_with_the_legacy_version() {
    let node = Node::new("node-a");
    let config = Env::new()
        .config(&node)
        .with_node_apis([NodeApi::V1alpha4])
        .with_health_apis([]);
    let plugin = node.start(config).await;
    assert_eq!(register(&node).await.supported_versions, ["1.0.0"]);
    plugin.stop().await.unwrap();
}

// ---------------------------------------------------------------- prepare / unprepare

#[tokio::test]
async fn prepare_and_unprepare_on_every_api_version() {
    for api in NodeApi::ALL {
        let node = Node::new("node-a");
        let env = Env::new();
        let plugin = node.start(env.config(&node).with_node_apis([api])).await;
        let refs = env.two_claims();
        let channel = dial_dra(&node).await;

        let prepared = prepare(api, channel.clone(), &refs).await.unwrap();
        let share_id = (api == NodeApi::V1).then(|| "share-7".to_owned());
        let expected: PrepareView = [
            (
                "uid-1".to_owned(),
                (
                    vec![PreparedDevice {
                        request_names: vec!["my-request".into()],
                        pool_name: "node-a".into(),
                        device_name: "device-00".into(),
                        cdi_device_ids: vec![format!("{DRIVER}/test=claim-uid-1-my-request")],
                        share_id,
                    }],
                    String::new(),
                ),
            ),
            (
                "uid-2".to_owned(),
                (
                    vec![PreparedDevice {
                        request_names: vec!["req".into()],
                        pool_name: "node-a".into(),
                        device_name: "device-01".into(),
                        cdi_device_ids: vec![format!("{DRIVER}/test=claim-uid-2-req")],
                        share_id: None,
                    }],
                    String::new(),
                ),
            ),
        ]
        .into();
        assert_eq!(prepared, expected, "{api}");
        assert_eq!(
            node.cdi_files(),
            [
                format!("{DRIVER}-uid-1-my-request.json"),
                format!("{DRIVER}-uid-2-req.json")
            ],
            "{api}"
        );
        let spec = std::fs::read_to_string(
            node.cdi_dir()
                .join(format!("{DRIVER}-uid-1-my-request.json")),
        )
        .unwrap();
        assert_eq!(
            spec,
            format!(
                r#"{{"cdiVersion":"0.3.0","kind":"{DRIVER}/test","devices":[{{"name":"claim-uid-1-my-request","containerEdits":{{"env":["claim_external_claim_my_request=true","user_a=b"]}}}}]}}"#
            )
        );
        assert_eq!(
            plugin.prepared_claims(),
            [
                ClaimId {
                    name: "external-claim".into(),
                    uid: "uid-1".into()
                },
                ClaimId {
                    name: "other".into(),
                    uid: "uid-2".into()
                },
            ]
        );

        // Idempotent: the same answer again, even if the claim changed since.
        env.claims.put(allocated_claim(
            "external-claim",
            "uid-1",
            vec![result("my-request", "device-99", None)],
            vec![],
        ));
        assert_eq!(
            prepare(api, channel.clone(), &refs).await.unwrap(),
            expected
        );

        // The log names the claims of each call.
        let log = env.calls.log("node-a");
        assert_eq!(log.len(), 2);
        assert!(
            log.iter()
                .all(|r| r.method == api.prepare_method() && r.succeeded())
        );
        assert_eq!(log[0].claims, refs);

        let unprepared = unprepare(api, channel.clone(), &refs[..1]).await.unwrap();
        assert_eq!(unprepared, [("uid-1".to_owned(), String::new())].into());
        assert_only_other_prepared(&node, &plugin);
        // Again, and together with the other claim: still one entry per claim.
        let unprepared = unprepare(api, channel.clone(), &refs).await.unwrap();
        assert_eq!(
            unprepared,
            [
                ("uid-1".to_owned(), String::new()),
                ("uid-2".to_owned(), String::new())
            ]
            .into()
        );
        assert!(node.cdi_files().is_empty(), "{api}: {:?}", node.cdi_files());
        plugin.prepared().wait_until_empty(WAIT).await.unwrap();
        plugin.stop().await.unwrap();
    }
}

#[tokio::test]
async fn prepare_fails_the_call_for_missing_replaced_or_unallocated_claims() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    let channel = dial_dra(&node).await;

    let missing = [refs[0].clone(), claim_ref("gone", "uid-9")];
    let err = prepare(NodeApi::V1, channel.clone(), &missing)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert!(
        err.message().contains("ns/gone") && err.message().contains("not found"),
        "{err:?}"
    );

    let replaced = [claim_ref("other", "uid-old")];
    let err = prepare(NodeApi::V1, channel.clone(), &replaced)
        .await
        .unwrap_err();
    assert!(err.message().contains("got replaced"), "{err:?}");

    let mut unallocated = allocated_claim("pending", "uid-3", vec![], vec![]);
    unallocated.status = None;
    env.claims.put(unallocated);
    let err = prepare(
        NodeApi::V1,
        channel.clone(),
        &[claim_ref("pending", "uid-3")],
    )
    .await
    .unwrap_err();
    assert!(err.message().contains("not allocated"), "{err:?}");

    // Nothing was prepared by the failed calls.
    assert!(plugin.prepared_claims().is_empty());
    assert!(node.cdi_files().is_empty());
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn bad_opaque_parameters_fail_only_that_claim() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    env.claims.put(allocated_claim(
        "bad",
        "uid-bad",
        vec![result("r", "device-02", None)],
        vec![claim_config(json!({"a": 1}))],
    ));
    let channel = dial_dra(&node).await;
    let request = [refs[1].clone(), claim_ref("bad", "uid-bad")];
    let prepared = prepare(NodeApi::V1, channel, &request).await.unwrap();
    assert_eq!(prepared.len(), 2);
    assert!(prepared["uid-2"].1.is_empty());
    let (devices, error) = &prepared["uid-bad"];
    assert!(devices.is_empty());
    assert!(error.contains("parameters in config"), "{error}");
    assert_only_other_prepared(&node, &plugin);
    let record = &env.calls.log("node-a")[0];
    assert_eq!(record.outcome, CallOutcome::Ok);
    assert!(record.failed() && record.claim_errors.contains_key("uid-bad"));
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn restarted_plugin_unprepares_what_its_predecessor_prepared() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    prepare(NodeApi::V1, dial_dra(&node).await, &refs)
        .await
        .unwrap();
    let prepared = plugin.prepared().clone();
    plugin.stop().await.unwrap();

    // Handing over the view keeps the claims known.
    let plugin = node.start(env.config(&node).with_prepared(prepared)).await;
    assert_eq!(plugin.prepared_claims().len(), 2);
    unprepare(NodeApi::V1, dial_dra(&node).await, &refs[..1])
        .await
        .unwrap();
    assert_eq!(node.cdi_files(), [format!("{DRIVER}-uid-2-req.json")]);
    plugin.stop().await.unwrap();

    // Without it the claim is unknown; its CDI files are still cleaned up
    // from the claim's allocation.
    let plugin = env.start(&node).await;
    assert!(plugin.prepared_claims().is_empty());
    let unprepared = unprepare(NodeApi::V1, dial_dra(&node).await, &refs[1..])
        .await
        .unwrap();
    assert_eq!(unprepared, [("uid-2".to_owned(), String::new())].into());
    assert!(node.cdi_files().is_empty());
    // A claim nobody knows of succeeds too.
    let unprepared = unprepare(
        NodeApi::V1,
        dial_dra(&node).await,
        &[claim_ref("never", "uid-never")],
    )
    .await
    .unwrap();
    assert_eq!(unprepared, [("uid-never".to_owned(), String::new())].into());
    plugin.stop().await.unwrap();
}

// ---------------------------------------------------------------- counting, failures, stalls

#[tokio::test]
async fn counts_and_injected_failures_are_per_node_and_per_method() {
    let (a, b) = (Node::new("node-a"), Node::new("node-b"));
    let env = Env::new();
    let plugin_a = env.start(&a).await;
    let plugin_b = env.start(&b).await;
    let refs = env.two_claims();
    let (ch_a, ch_b) = (dial_dra(&a).await, dial_dra(&b).await);

    env.calls.set_fail("node-a", method::V1_PREPARE, true);
    let err = prepare(NodeApi::V1, ch_a.clone(), &refs).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(err.message(), "injected error");
    assert!(
        plugin_a.prepared_claims().is_empty(),
        "handler must not run"
    );
    assert!(a.cdi_files().is_empty());
    // Other node, other method, other version: unaffected.
    prepare(NodeApi::V1, ch_b.clone(), &refs).await.unwrap();
    prepare(NodeApi::V1beta1, ch_a.clone(), &refs)
        .await
        .unwrap();
    unprepare(NodeApi::V1, ch_a.clone(), &refs).await.unwrap();
    assert_eq!(env.calls.count("node-a", method::V1_PREPARE), 1);
    assert_eq!(env.calls.count("node-b", method::V1_PREPARE), 1);
    assert_eq!(env.calls.count("node-a", method::V1BETA1_PREPARE), 1);
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 1);
    assert_eq!(env.calls.count("node-b", method::V1_UNPREPARE), 0);

    let log = env.calls.log("node-a");
    assert_eq!(log[0].method, method::V1_PREPARE);
    assert_eq!(log[0].outcome, CallOutcome::Injected);
    assert!(log[0].failed());

    env.calls.set_fail("node-a", method::V1_PREPARE, false);
    prepare(NodeApi::V1, ch_a.clone(), &refs).await.unwrap();
    assert_eq!(env.calls.count("node-a", method::V1_PREPARE), 2);
    assert!(env.calls.log("node-a").last().unwrap().succeeded());

    // Registration goes through the same layer.
    env.calls.set_fail("node-b", method::GET_INFO, true);
    let mut reg = RegistrationClient::new(dial_registration(&b).await);
    let err = reg.get_info(InfoRequest {}).await.unwrap_err();
    assert_eq!(err.message(), "injected error");
    assert_eq!(env.calls.count("node-b", method::GET_INFO), 1);
    register(&a).await;
    assert_eq!(env.calls.count("node-a", method::GET_INFO), 1);

    plugin_a.stop().await.unwrap();
    plugin_b.stop().await.unwrap();
}

#[tokio::test]
async fn a_stalled_method_resumes_on_release_while_other_calls_proceed() {
    let (a, b) = (Node::new("node-a"), Node::new("node-b"));
    let env = Env::new();
    let plugin_a = env.start(&a).await;
    let plugin_b = env.start(&b).await;
    let refs = env.two_claims();

    let (channel, held) = (dial_dra_patient(&a).await, refs.clone());
    let stalled = env
        .stalled(&a, method::V1_PREPARE, async move {
            prepare(NodeApi::V1, channel, &held).await
        })
        .await;
    assert_eq!(
        env.calls.count("node-a", method::V1_PREPARE),
        1,
        "counted while stalled"
    );
    assert!(env.calls.log("node-a")[0].in_progress());

    // While it waits: the other method on the same node, the same method on
    // another node, and registration all complete. Upstream's single mutex
    // would deadlock here.
    unprepare(NodeApi::V1, dial_dra(&a).await, &[claim_ref("x", "uid-x")])
        .await
        .unwrap();
    prepare(NodeApi::V1, dial_dra(&b).await, &refs)
        .await
        .unwrap();
    register(&a).await;
    assert!(!stalled.is_finished());
    assert!(plugin_a.prepared_claims().is_empty());

    env.calls.release("node-a", method::V1_PREPARE);
    let prepared = stalled.await.unwrap().unwrap();
    assert_eq!(prepared.len(), 2);
    assert_eq!(plugin_a.prepared_claims().len(), 2);
    assert_eq!(env.calls.stalled("node-a", method::V1_PREPARE), 0);
    let record = env
        .calls
        .wait_for_call("node-a", "a successful prepare", WAIT, |r| {
            r.method == method::V1_PREPARE && r.succeeded()
        })
        .await
        .unwrap();
    assert_eq!(record.claims, refs);

    // Released means released: later calls go straight through.
    prepare(NodeApi::V1, dial_dra(&a).await, &refs)
        .await
        .unwrap();
    plugin_a.stop().await.unwrap();
    plugin_b.stop().await.unwrap();
}

#[tokio::test]
async fn a_stalled_call_the_client_gives_up_on_is_logged_as_abandoned() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    let channel = dial_dra_patient(&node).await;
    // The connection stays open, so that giving up resets only the call's stream.
    let held = channel.clone();
    let waiting = env
        .stalled(&node, method::V1_UNPREPARE, async move {
            unprepare(NodeApi::V1, held, &refs).await
        })
        .await;
    // Like the kubelet's deadline passing: the client resets the stream.
    waiting.abort();
    let record = env
        .calls
        .wait_for_call("node-a", "an abandoned unprepare", WAIT, |r| {
            r.outcome == CallOutcome::Abandoned
        })
        .await
        .unwrap();
    assert_eq!(record.method, method::V1_UNPREPARE);
    assert_eq!(env.calls.stalled("node-a", method::V1_UNPREPARE), 0);
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 1);
    env.calls.release("node-a", method::V1_UNPREPARE);
    plugin.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_from_two_nodes_do_not_deadlock() {
    let (a, b) = (Node::new("node-a"), Node::new("node-b"));
    let env = Env::new();
    let plugin_a = env.start(&a).await;
    let plugin_b = env.start(&b).await;
    let refs = env.two_claims();
    let (ch_a, ch_b) = (dial_dra_patient(&a).await, dial_dra_patient(&b).await);

    // Both nodes hold a call inside the plugin at the same time; each is only
    // released once the other one has arrived.
    env.calls.stall("node-a", method::V1_PREPARE);
    env.calls.stall("node-b", method::V1_PREPARE);
    let mut tasks = Vec::new();
    for ch in [&ch_a, &ch_b] {
        for _ in 0..4 {
            let (ch, refs) = (ch.clone(), refs.clone());
            tasks.push(tokio::spawn(async move {
                prepare(NodeApi::V1, ch, &refs).await
            }));
        }
    }
    env.calls
        .wait_stalled("node-a", method::V1_PREPARE, 4, WAIT)
        .await
        .unwrap();
    env.calls
        .wait_stalled("node-b", method::V1_PREPARE, 4, WAIT)
        .await
        .unwrap();
    env.calls.release("node-a", method::V1_PREPARE);
    env.calls.release("node-b", method::V1_PREPARE);
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().len(), 2);
    }
    assert_eq!(env.calls.count("node-a", method::V1_PREPARE), 4);
    assert_eq!(env.calls.count("node-b", method::V1_PREPARE), 4);
    plugin_a.stop().await.unwrap();
    plugin_b.stop().await.unwrap();
}

// ---------------------------------------------------------------- health

#[tokio::test]
async fn health_stream_sends_the_sorted_list_at_once_and_after_changes() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = node
        .start(
            env.config(&node)
                // Long enough that only changes produce the messages below.
                .with_health_interval(Duration::from_secs(3600)),
        )
        .await;
    let set = |pool: &str, device: &str, health: HealthStatus, message: &str| {
        plugin.set_device_health(DeviceHealth {
            pool: pool.into(),
            device: device.into(),
            health,
            message: message.into(),
        })
    };
    set("pool-b", "device-00", HealthStatus::Healthy, "");
    set("pool-a", "device-01", HealthStatus::Unhealthy, "fan");
    set("pool-a", "device-00", HealthStatus::Healthy, "");

    let mut stream = open_health(HealthApi::V1alpha1, dial_dra_patient(&node).await).await;
    let first = health_view(stream.next().await.unwrap().unwrap());
    let healthy = HealthStatus::Healthy;
    let unhealthy = HealthStatus::Unhealthy;
    assert_eq!(
        first,
        [
            ("pool-a".into(), "device-00".into(), healthy, String::new()),
            ("pool-a".into(), "device-01".into(), unhealthy, "fan".into()),
            ("pool-b".into(), "device-00".into(), healthy, String::new()),
        ]
    );
    assert_eq!(env.calls.count("node-a", method::HEALTH_V1ALPHA1_WATCH), 1);

    set("pool-a", "device-01", HealthStatus::Healthy, "fixed");
    let second = health_view(stream.next().await.unwrap().unwrap());
    assert_eq!(
        second[1],
        ("pool-a".into(), "device-01".into(), healthy, "fixed".into())
    );

    // The v1 service, on the same socket, sends the same list.
    let mut v1_stream = open_health(HealthApi::V1, dial_dra_patient(&node).await).await;
    let v1_report = v1_stream.next().await.unwrap().unwrap();
    assert_eq!(health_view(v1_report), second);
    assert_eq!(env.calls.count("node-a", method::HEALTH_V1_WATCH), 1);
    assert_eq!(env.calls.count("node-a", method::HEALTH_V1ALPHA1_WATCH), 1);

    // Stopping ends the open streams instead of waiting for the kubelet.
    plugin.stop().await.unwrap();
    assert!(matches!(stream.next().await, None | Some(Err(_))));
    assert!(matches!(v1_stream.next().await, None | Some(Err(_))));
}

#[tokio::test]
async fn health_is_served_only_in_the_configured_versions() {
    let node = Node::new("node-a");
    let plugin = node
        .start(
            Env::new()
                .config(&node)
                .with_health_apis([HealthApi::V1alpha1]),
        )
        .await;
    let info = register(&node).await;
    assert_eq!(
        info.supported_versions,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1alpha1.DRAResourceHealth"
        ]
    );
    let Err(status) = watch_health(HealthApi::V1, dial_dra_patient(&node).await).await else {
        panic!("v1 health served although not configured");
    };
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn health_stream_repeats_the_list_every_interval() {
    let node = Node::new("node-a");
    let plugin = node
        .start(
            Env::new()
                .config(&node)
                .with_health_interval(Duration::from_millis(20)),
        )
        .await;
    plugin.set_device_health(DeviceHealth {
        pool: "p".into(),
        device: "d".into(),
        health: HealthStatus::Healthy,
        message: String::new(),
    });
    let mut stream = open_health(HealthApi::V1alpha1, dial_dra_patient(&node).await).await;
    for _ in 0..3 {
        let report = stream.next().await.unwrap().unwrap();
        assert_eq!(report.devices.len(), 1);
    }
    plugin.stop().await.unwrap();
}

// ---------------------------------------------------------------- lifecycle

#[tokio::test]
async fn stop_cancels_stalled_calls_and_removes_sockets() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    let channel = dial_dra_patient(&node).await;
    let stalled = env
        .stalled(&node, method::V1_PREPARE, async move {
            prepare(NodeApi::V1, channel, &refs).await
        })
        .await;
    plugin.stop().await.unwrap();
    let err = stalled.await.unwrap().unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert_eq!(env.calls.log("node-a")[0].outcome, CallOutcome::Cancelled);
    assert!(!node.dra_socket().exists() && !node.registration_socket().exists());
    assert!(
        tokio::net::UnixStream::connect(node.dra_socket())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn dropping_the_handle_stops_serving() {
    let node = Node::new("node-a");
    let plugin = Env::new().start(&node).await;
    let mut client = RegistrationClient::new(dial_registration(&node).await);
    client.get_info(InfoRequest {}).await.unwrap();
    drop(plugin);
    assert!(!node.registration_socket().exists());
    assert!(!node.dra_socket().exists());
    // The established connection is shut down and cannot be re-dialled.
    assert!(client.get_info(InfoRequest {}).await.is_err());
}

#[tokio::test]
async fn start_replaces_stale_socket_files_and_keeps_a_successors_socket() {
    let node = Node::new("node-a");
    let env = Env::new();
    std::fs::create_dir_all(node.registration_socket().parent().unwrap()).unwrap();
    std::fs::write(node.registration_socket(), b"stale").unwrap();
    let old = env.start(&node).await;
    register(&node).await;

    // A new instance at the same paths, before the old handle goes away.
    let new = env.start(&node).await;
    drop(old);
    assert!(
        node.registration_socket().exists(),
        "old instance removed new socket"
    );
    register(&node).await;
    new.wait_registered(WAIT).await.unwrap();
    new.stop().await.unwrap();
    assert!(!node.registration_socket().exists());
}

/// A real kubelet's grpc-go client dials the registration socket by bare
/// path and so sends the percent-encoded path as `:authority`
/// (`%2F…%2Fplugins_registry%2F<driver>-reg.sock`); h2 on its own answers
/// that with RST_STREAM(PROTOCOL_ERROR), and the kubelet logs "failed to get
/// plugin info using RPC GetInfo". Every call of the handshake, repeated on
/// one connection, must work with it.
#[tokio::test]
async fn registration_accepts_the_authority_a_kubelet_sends() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let socket = node.registration_socket();
    let authority = KubeletSocket::Registration.authority(&socket);
    assert_eq!(authority, socket.display().to_string().replace('/', "%2F"));
    assert!(
        http::uri::Authority::try_from(authority.as_str()).is_err(),
        "h2 accepts {authority} anyway: this test no longer proves anything"
    );

    let mut client = RegistrationClient::new(dial(KubeletSocket::Registration, &socket).await);
    for _ in 0..2 {
        let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
        assert_eq!(info.name, DRIVER);
    }
    notify_registered(&mut client).await;
    plugin.wait_registered(WAIT).await.unwrap();
    assert_eq!(env.calls.count("node-a", method::GET_INFO), 2);
    plugin.stop().await.unwrap();
}

/// The rewrite that lets the registration socket take a kubelet's
/// percent-encoded path is that socket's alone: calls to the DRA socket (a
/// kubelet sends `localhost` there) reach tonic as they were sent. Sent the
/// kind of authority only a registration socket accepts, a DRA call is
/// refused by h2 itself, before the plugin sees it; sent `localhost`, as a
/// kubelet does, it is served.
#[tokio::test]
async fn the_dra_socket_reads_calls_as_sent() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let socket = node.dra_socket();
    let authority = KubeletSocket::Registration.authority(&socket);
    assert!(
        http::uri::Authority::try_from(authority.as_str()).is_err(),
        "h2 accepts {authority} anyway: this test no longer proves anything"
    );
    let refs = [claim_ref("gone", "uid-9")];

    let as_registration = dial(KubeletSocket::Registration, &socket).await;
    let refused = unprepare(NodeApi::V1, as_registration, &refs).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 0);

    let unprepared = unprepare(NodeApi::V1, dial_dra(&node).await, &refs)
        .await
        .unwrap();
    assert_eq!(unprepared.len(), 1, "{unprepared:?}");
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 1);
    plugin.stop().await.unwrap();
}

/// Pre-dialled proxy connections may sit idle for a long time before the
/// kubelet's HTTP/2 preface arrives; the server must not give up on them.
/// Paused time lets an hour pass without waiting for it.
#[tokio::test(start_paused = true)]
async fn accepted_connections_have_no_handshake_deadline() {
    let node = Node::new("node-a");
    let plugin = Env::new().start(&node).await;
    let socket = node.registration_socket();
    let idle = tokio::net::UnixStream::connect(&socket).await.unwrap();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    let conn = Mutex::new(Some(idle));
    let channel = Endpoint::from_static(CLIENT_URI)
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let stream = conn.lock().unwrap().take();
            let stream = stream.map(|s| KubeletSocket::Registration.client_io(&socket, s));
            async move {
                stream
                    .map(TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("connection already used"))
            }
        }))
        .await
        .unwrap();
    let info = RegistrationClient::new(channel)
        .get_info(InfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, DRIVER);
    plugin.stop().await.unwrap();
}
