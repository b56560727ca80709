//! A minimal DRA kubelet plugin for this module's tests: real gRPC servers on
//! real unix sockets, recording what the node sends.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::net::UnixListener;
use tokio::task::JoinHandle;
use tonic::service::RoutesBuilder;
use tonic::{Request, Response, Status};

use dra_e2e_conn::{KubeletSocket, unix_incoming};
use dra_e2e_proto::dra::{
    ClaimRef, NodeApi, NodeService, PrepareResponse, PreparedDevice, UnprepareResponse,
    add_node_service,
};
use dra_e2e_proto::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
    registration_server::{Registration, RegistrationServer},
};

#[derive(Debug, Default)]
pub struct Record {
    pub statuses: Vec<(bool, String)>,
    /// `(method path, claim uids)`.
    pub calls: Vec<(String, Vec<String>)>,
    pub get_info_calls: usize,
}

#[derive(Clone)]
pub struct Shared {
    pub info: PluginInfo,
    pub record: Arc<Mutex<Record>>,
    pub fail_get_info: Arc<Mutex<bool>>,
}

#[tonic::async_trait]
impl Registration for Shared {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        self.record.lock().unwrap().get_info_calls += 1;
        if *self.fail_get_info.lock().unwrap() {
            return Err(Status::unknown("injected error"));
        }
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        req: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let r = req.into_inner();
        self.record
            .lock()
            .unwrap()
            .statuses
            .push((r.plugin_registered, r.error));
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// The DRA service in one API version, recording calls by that version's
/// method path.
struct Served {
    shared: Shared,
    api: NodeApi,
}

#[tonic::async_trait]
impl NodeService for Served {
    async fn prepare(&self, req: Request<Vec<ClaimRef>>) -> Result<PrepareResponse, Status> {
        let claims = req.into_inner();
        self.shared.record.lock().unwrap().calls.push((
            self.api.prepare_method().into(),
            claims.iter().map(|c| c.uid.clone()).collect(),
        ));
        let driver = &self.shared.info.name;
        Ok(claims
            .into_iter()
            .map(|c| {
                let device = PreparedDevice {
                    request_names: vec!["req".into()],
                    pool_name: "pool".into(),
                    device_name: "dev".into(),
                    cdi_device_ids: vec![format!("{driver}/test=claim-{}", c.uid)],
                    share_id: None,
                };
                (c.uid, Ok(vec![device]).into())
            })
            .collect())
    }

    async fn unprepare(&self, req: Request<Vec<ClaimRef>>) -> Result<UnprepareResponse, Status> {
        let claims = req.into_inner();
        self.shared.record.lock().unwrap().calls.push((
            self.api.unprepare_method().into(),
            claims.iter().map(|c| c.uid.clone()).collect(),
        ));
        Ok(claims.into_iter().map(|c| (c.uid, String::new())).collect())
    }
}

/// A running test plugin; dropping it does not remove sockets, `stop` does.
pub struct TestPlugin {
    pub shared: Shared,
    pub reg_socket: PathBuf,
    pub dra_socket: PathBuf,
    tasks: Vec<JoinHandle<()>>,
    shutdown: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl TestPlugin {
    /// Serves the DRA socket first, then the registration socket, as the
    /// kubelet requires.
    pub fn start(registry: &Path, plugins: &Path, driver: &str, versions: &[&str]) -> Self {
        let dra_dir = plugins.join(driver);
        std::fs::create_dir_all(&dra_dir).unwrap();
        std::fs::create_dir_all(registry).unwrap();
        let dra_socket = dra_dir.join("dra.sock");
        let reg_socket = registry.join(format!("{driver}-reg.sock"));
        let shared = Shared {
            info: PluginInfo {
                r#type: "DRAPlugin".into(),
                name: driver.into(),
                endpoint: dra_socket.display().to_string(),
                supported_versions: versions.iter().map(|s| s.to_string()).collect(),
            },
            record: Arc::default(),
            fail_get_info: Arc::default(),
        };
        let (t1, stop1) = serve_dra(&shared, &dra_socket);
        let _ = std::fs::remove_file(&reg_socket);
        let reg = UnixListener::bind(&reg_socket).unwrap();
        let s = shared.clone();
        let (stop2, rx2) = tokio::sync::oneshot::channel::<()>();
        let t2 = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(RegistrationServer::new(s))
                .serve_with_incoming_shutdown(
                    KubeletSocket::Registration.server_incoming(unix_incoming(reg)),
                    async {
                        let _ = rx2.await;
                    },
                )
                .await;
        });
        Self {
            shared,
            reg_socket,
            dra_socket,
            tasks: vec![t1, t2],
            shutdown: vec![stop1, stop2],
        }
    }

    /// Stops only the DRA service (its connections close) and removes its
    /// socket; the registration socket stays.
    pub async fn stop_dra(&mut self) {
        let _ = std::fs::remove_file(&self.dra_socket);
        let _ = self.shutdown.remove(0).send(());
        let _ = self.tasks.remove(0).await;
    }

    /// Serves the DRA service again at the same path.
    pub fn restart_dra(&mut self) {
        let (task, stop) = serve_dra(&self.shared, &self.dra_socket);
        self.tasks.insert(0, task);
        self.shutdown.insert(0, stop);
    }

    pub fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.shared.record.lock().unwrap()
    }

    /// Stops serving and removes both sockets, as a stopping plugin does.
    pub async fn stop(self) {
        // Sockets go first, so the node sees the plugin leave before its
        // connections close.
        let _ = std::fs::remove_file(&self.reg_socket);
        let _ = std::fs::remove_file(&self.dra_socket);
        for s in self.shutdown {
            let _ = s.send(());
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

fn serve_dra(shared: &Shared, path: &Path) -> (JoinHandle<()>, tokio::sync::oneshot::Sender<()>) {
    let _ = std::fs::remove_file(path);
    let dra = UnixListener::bind(path).unwrap();
    let mut routes = RoutesBuilder::default();
    for api in [NodeApi::V1, NodeApi::V1beta1] {
        let shared = shared.clone();
        add_node_service(&mut routes, api, Arc::new(Served { shared, api }));
    }
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(routes.routes())
            .serve_with_incoming_shutdown(unix_incoming(dra), async {
                let _ = rx.await;
            })
            .await;
    });
    (task, stop)
}
