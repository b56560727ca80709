//! Shared pieces of the proxy tests: a stand-in plugin server and a client
//! that behaves like the kubelet's registration code.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_e2e::cluster::proxy::{
    LocalAgent, LocalAgentConfig, PoolConfig, PreDialled, ProxiedSocket, ProxySide,
};
use dra_e2e::conn::Incoming;
use dra_e2e::proto::pluginregistration::registration_client::RegistrationClient;
use dra_e2e::proto::pluginregistration::registration_server::{Registration, RegistrationServer};
use dra_e2e::proto::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Request, Response, Status};

pub const AGENT_EXE: &str = env!("CARGO_BIN_EXE_dra-e2e");
pub const DRIVER: &str = "proxy-test.k8s.io";

/// A local agent whose kubelet-side socket is `socket` in `dir`.
pub fn agent_config(dir: &tempfile::TempDir, socket: &str) -> LocalAgentConfig {
    LocalAgentConfig::with_program(AGENT_EXE, dir.path().join(socket))
}

/// A registration socket in `dir` behind its local agent, served by a fresh
/// [`Plugin`]: the socket, the plugin, and the plugin's server.
pub async fn served_locally(
    dir: &tempfile::TempDir,
) -> (
    ProxiedSocket,
    Plugin,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
) {
    let (socket, incoming) =
        ProxiedSocket::local(agent_config(dir, "reg.sock"), PoolConfig::default())
            .await
            .unwrap();
    let plugin = Plugin::default();
    let server = plugin.serve(incoming);
    (socket, plugin, server)
}

/// A pre-dialled pool to `agent` with the default size, served by a fresh
/// [`Plugin`]: the pool, the plugin, and the plugin's server.
pub fn serve_pooled(
    agent: &LocalAgent,
) -> (
    PreDialled,
    Plugin,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
) {
    let (pool, incoming) = PreDialled::start(agent.transport(), PoolConfig::default());
    let plugin = Plugin::default();
    let server = plugin.serve(incoming);
    (pool, plugin, server)
}

/// Where a local agent waits for the runner's connections.
pub fn runner_side(agent: &LocalAgent) -> PathBuf {
    match agent.proxy() {
        ProxySide::Unix(path) => path.clone(),
        other => panic!("a local agent waits on a unix socket: {other:?}"),
    }
}

pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "dra_e2e=debug".into()),
        )
        .try_init();
}

/// A registration server standing in for the plugin.
#[derive(Clone, Default)]
pub struct Plugin {
    pub get_info_calls: Arc<AtomicUsize>,
    pub statuses: Arc<Mutex<Vec<RegistrationStatus>>>,
}

#[tonic::async_trait]
impl Registration for Plugin {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        self.get_info_calls.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(PluginInfo {
            r#type: "DRAPlugin".into(),
            name: DRIVER.into(),
            endpoint: format!("/var/lib/kubelet/plugins/{DRIVER}/dra.sock"),
            supported_versions: vec!["v1.DRAPlugin".into()],
        }))
    }

    async fn notify_registration_status(
        &self,
        req: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        self.statuses.lock().unwrap().push(req.into_inner());
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

impl Plugin {
    pub fn calls(&self) -> usize {
        self.get_info_calls.load(Ordering::SeqCst)
    }

    /// Serves from `incoming` until it ends.
    pub fn serve(
        &self,
        incoming: Incoming,
    ) -> tokio::task::JoinHandle<Result<(), tonic::transport::Error>> {
        let svc = RegistrationServer::new(self.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(incoming),
        )
    }
}

/// A channel over a fresh unix connection, as the kubelet dials: blocking,
/// 10 s at most.
pub async fn kubelet_channel(socket: &Path) -> Result<Channel, tonic::transport::Error> {
    let path: PathBuf = socket.to_owned();
    Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(10))
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(p).await?)) }
        }))
        .await
}

/// GetInfo with the kubelet's 1 s deadline.
pub async fn get_info(channel: Channel) -> Result<PluginInfo, Status> {
    let mut req = Request::new(InfoRequest {});
    req.set_timeout(Duration::from_secs(1));
    RegistrationClient::new(channel)
        .get_info(req)
        .await
        .map(Response::into_inner)
}

/// One registration attempt over a fresh connection: GetInfo (1 s) then
/// NotifyRegistrationStatus (5 s), as the kubelet's plugin manager does.
pub async fn kubelet_register(socket: &Path) -> Result<PluginInfo, String> {
    let channel = kubelet_channel(socket)
        .await
        .map_err(|e| format!("dial: {e}"))?;
    let info = get_info(channel.clone())
        .await
        .map_err(|e| format!("GetInfo: {e}"))?;
    let mut req = Request::new(RegistrationStatus {
        plugin_registered: true,
        error: String::new(),
    });
    req.set_timeout(Duration::from_secs(5));
    RegistrationClient::new(channel)
        .notify_registration_status(req)
        .await
        .map_err(|e| format!("NotifyRegistrationStatus: {e}"))?;
    Ok(info)
}

/// A kubelet-style GetInfo over a fresh connection.
pub async fn kubelet_get_info(socket: &Path) -> Result<PluginInfo, String> {
    let channel = kubelet_channel(socket)
        .await
        .map_err(|e| format!("dial: {e}"))?;
    get_info(channel).await.map_err(|e| format!("GetInfo: {e}"))
}

/// Unix sockets bound to `path` (the listener and the connections it
/// accepted) that a process still has open.
pub fn unix_sockets_at(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let path = path.to_string_lossy();
    text.lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(7) == Some(path.as_ref()))
        .map(str::to_owned)
        .collect()
}

/// Polls `cond` (no event exists for /proc state) until it holds or `deadline` passes.
pub async fn eventually<T>(deadline: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if tokio::time::Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
