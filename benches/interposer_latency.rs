//! The latency the interposer adds to one kubelet call: the suite's own
//! plugin plays the driver, the interposer sits in front of it, and the same
//! calls go once straight to the driver's sockets and once through the
//! interposer's, each over its own gRPC connection on real unix sockets in a
//! temp dir, all in this process. No cluster is needed.
//!
//! The calls: `NodeUnprepareResources` (v1) of one claim the driver never
//! prepared, which it answers without any claim to read (it asks its claim
//! source whether the claim left CDI files behind; this one says there are
//! no claims, and the plugin goes on), and `GetInfo` on the registration
//! socket, which the interposer passes on to the driver's.
//!
//! Then a second instance of the driver registers beside the first (as a
//! surge rollout's new pod does), and the same unprepare goes through the
//! interposer to each of the two instances in turn: the interposer then
//! follows two instances on the node.
//!
//! `make bench`, or `cargo bench --bench interposer_latency`. Calls per kind:
//! `DRA_E2E_BENCH_CALLS` (default 2000), after 200 warm-up calls. Direct and
//! interposed calls alternate, so that whatever else the machine does weighs
//! on both alike.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio::net::{UnixListener, UnixStream};
use tonic::transport::{Channel, Endpoint, Uri};

use dra_e2e::conn::authority::{CLIENT_URI, KubeletSocket};
use dra_e2e::conn::node_files::{LocalDir, NodeFiles};
use dra_e2e::conn::node_host::{Dialled, NodeHost, Served, SocketError, SocketFile};
use dra_e2e::conn::unix_incoming;
use dra_e2e::plugin::interposer::{
    InjectedHealth, InterposerConfig, InterposerFault, NodeInterposer,
};
use dra_e2e::plugin::{
    Calls, ClaimRef, ClaimSource, ClaimSourceError, NodeApi, NodePlugin, PluginConfig, Prepared,
};
use dra_e2e::proto::dra::NodeClient;
use dra_e2e::proto::method;
use dra_e2e::proto::pluginregistration::InfoRequest;
use dra_e2e::proto::pluginregistration::registration_client::RegistrationClient;

const BENCH: &str = "interposer_latency";
const DRIVER: &str = "bench.k8s.io";
const NODE: &str = "node-0";
const WARM_UP: usize = 200;

fn main() {
    let calls = std::env::var("DRA_E2E_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n >= 1)
        .unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (rows, checked) = runtime.block_on(run(calls));
    print_table(calls, &rows);
    println!("{BENCH}: {checked}");
}

/// Latencies of one kind of call, direct and interposed.
struct Row {
    call: &'static str,
    direct: Vec<Duration>,
    interposed: Vec<Duration>,
}

/// The figures, and what the counters showed.
async fn run(calls: usize) -> (Vec<Row>, String) {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| fail(format!("temp dir: {e}")));
    let root = tmp.path().to_owned();

    // The driver: the suite's own plugin, registered in a private directory.
    let driver_dra = root.join("driver/dra.sock");
    let driver_registration = root.join(format!("private/{DRIVER}-reg.sock"));
    let lookups = Arc::new(NoClaims::default());
    let driver_calls = Calls::new(DRIVER);
    let config = PluginConfig::new(
        DRIVER,
        NODE,
        driver_dra.display().to_string(),
        lookups.clone(),
        Arc::new(LocalDir::new(root.join("driver-cdi"))),
        driver_calls.clone(),
    );
    let plugin = NodePlugin::start_unix(config, &driver_dra, &driver_registration)
        .await
        .unwrap_or_else(|e| fail(format!("starting the driver's plugin: {e}")));

    // The interposer in front of it.
    let interposer_registration = root.join(format!("plugins_registry/{DRIVER}-reg.sock"));
    let interposer_calls = Calls::new(DRIVER);
    let host: Arc<dyn NodeHost> = Arc::new(LocalNode { root: root.clone() });
    let interposer = NodeInterposer::start(
        host,
        InterposerConfig {
            driver: DRIVER.to_owned(),
            node: NODE.to_owned(),
            private_dir: root.join("private"),
            registry_dir: root.join("plugins_registry"),
            endpoint_dir: root.join("interposer"),
            calls: interposer_calls.clone(),
            prepared: Prepared::default(),
            health: InjectedHealth::default(),
            driver_timeout: Duration::from_secs(10),
            fault: InterposerFault::None,
            faults: Default::default(),
            disagreements: Default::default(),
        },
    )
    .await
    .unwrap_or_else(|e| fail(e.to_string()));
    let interposer_dra = endpoint_of(&interposer_registration).await;

    // The kubelet's side: one connection per socket, as the kubelet keeps.
    let direct_dra = NodeClient::new(NodeApi::V1, connect(KubeletSocket::Dra, &driver_dra).await);
    let interposed_dra = NodeClient::new(
        NodeApi::V1,
        connect(KubeletSocket::Dra, &interposer_dra).await,
    );
    let direct_reg =
        RegistrationClient::new(connect(KubeletSocket::Registration, &driver_registration).await);
    let interposed_reg = RegistrationClient::new(
        connect(KubeletSocket::Registration, &interposer_registration).await,
    );

    let claim = [ClaimRef {
        namespace: "bench".to_owned(),
        name: "never-prepared".to_owned(),
        uid: "00000000-0000-0000-0000-000000000001".to_owned(),
    }];
    let unprepare = |client: &NodeClient| {
        let client = client.clone();
        let claim = claim.clone();
        async move {
            let resp = client
                .unprepare(&claim)
                .await
                .unwrap_or_else(|s| fail(format!("NodeUnprepareResources: {s}")));
            match resp.get(&claim[0].uid) {
                Some(error) if error.is_empty() => {}
                Some(error) => fail(format!("NodeUnprepareResources: claim error: {error}")),
                None => fail(format!(
                    "NodeUnprepareResources: no answer for the claim: {resp:?}"
                )),
            }
        }
    };
    let get_info = |client: &RegistrationClient<Channel>, endpoint: &Path| {
        let mut client = client.clone();
        let endpoint = endpoint.display().to_string();
        async move {
            let info = client
                .get_info(InfoRequest {})
                .await
                .unwrap_or_else(|s| fail(format!("GetInfo: {s}")))
                .into_inner();
            if info.name != DRIVER || info.endpoint != endpoint {
                fail(format!(
                    "GetInfo answered driver {:?} at {:?}, not {DRIVER:?} at {endpoint:?}",
                    info.name, info.endpoint
                ));
            }
        }
    };

    let unprepares = measure(
        calls,
        || unprepare(&direct_dra),
        || unprepare(&interposed_dra),
    )
    .await;
    let get_infos = measure(
        calls,
        || get_info(&direct_reg, &driver_dra),
        || get_info(&interposed_reg, &interposer_dra),
    )
    .await;

    // Every interposed call passed the interposer's counting, and reached
    // the driver; the direct ones reached only the driver (which also had
    // the interposer's own GetInfo at start).
    let total = u64::try_from(WARM_UP + calls).expect("call count");
    let expected = [
        ("interposer", &interposer_calls, method::V1_UNPREPARE, total),
        // The bench's own GetInfo for the interposer's endpoint, too.
        ("interposer", &interposer_calls, method::GET_INFO, total + 1),
        ("driver", &driver_calls, method::V1_UNPREPARE, 2 * total),
        ("driver", &driver_calls, method::GET_INFO, 2 * total + 2),
    ];
    for (which, counter, method, want) in expected {
        let got = counter.count(NODE, method);
        if got != want {
            fail(format!(
                "the {which} counted {got} calls of {method}, not {want}"
            ));
        }
    }
    // A second instance beside the first, with rolling-update names.
    let second_dra = root.join("driver/dra-second.sock");
    let second_registration = root.join(format!("private/{DRIVER}-second-reg.sock"));
    let second_calls = Calls::new(DRIVER);
    let second = NodePlugin::start_unix(
        PluginConfig::new(
            DRIVER,
            NODE,
            second_dra.display().to_string(),
            lookups.clone(),
            Arc::new(LocalDir::new(root.join("driver-cdi"))),
            second_calls.clone(),
        ),
        &second_dra,
        &second_registration,
    )
    .await
    .unwrap_or_else(|e| fail(format!("starting the driver's second instance: {e}")));
    let second_interposed = root.join(format!("plugins_registry/{DRIVER}-second-reg.sock"));
    let second_endpoint = endpoint_of(&second_interposed).await;
    if second_endpoint == interposer_dra {
        fail("the second instance got the first one's endpoint".to_owned());
    }
    let second_client = NodeClient::new(
        NodeApi::V1,
        connect(KubeletSocket::Dra, &second_endpoint).await,
    );
    // Through the interposer to each instance in turn, against the first
    // instance directly.
    let turn = AtomicU64::new(0);
    let two = measure(
        calls,
        || unprepare(&direct_dra),
        || {
            let client = if turn.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
                &interposed_dra
            } else {
                &second_client
            };
            unprepare(client)
        },
    )
    .await;
    let half = total / 2;
    let got = second_calls.count(NODE, method::V1_UNPREPARE);
    if got < half {
        fail(format!(
            "the second instance answered {got} NodeUnprepareResources, not the {half} sent \
             through the interposer"
        ));
    }

    let checked = format!(
        "the interposer counted {total} NodeUnprepareResources and {total} GetInfo (warm-up \
         included), as sent through it; the driver asked its claim source {} times (it has no \
         claims; unprepare of an unknown claim succeeds regardless)",
        lookups.0.load(Ordering::Relaxed)
    );

    interposer.stop().await;
    for p in [plugin, second] {
        p.stop()
            .await
            .unwrap_or_else(|e| fail(format!("stopping the driver's plugin: {e}")));
    }
    let rows = vec![
        Row {
            call: "NodeUnprepareResources v1",
            direct: unprepares.0,
            interposed: unprepares.1,
        },
        Row {
            call: "GetInfo",
            direct: get_infos.0,
            interposed: get_infos.1,
        },
        Row {
            call: "NodeUnprepareResources v1, two instances",
            direct: two.0,
            interposed: two.1,
        },
    ];
    (rows, checked)
}

/// The DRA endpoint the interposer's registration socket `path` names,
/// once the interposer has made it (it follows the private directory).
async fn endpoint_of(path: &Path) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if Instant::now() > deadline {
            fail(format!(
                "the interposer made no {} within 10s",
                path.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut client = RegistrationClient::new(connect(KubeletSocket::Registration, path).await);
    let info = client
        .get_info(InfoRequest {})
        .await
        .unwrap_or_else(|s| fail(format!("GetInfo on {}: {s}", path.display())))
        .into_inner();
    PathBuf::from(info.endpoint)
}

/// `calls` latencies of each of two calls after the warm-up, alternating
/// which goes first.
async fn measure<D, I, DF, IF>(
    calls: usize,
    direct: D,
    interposed: I,
) -> (Vec<Duration>, Vec<Duration>)
where
    D: Fn() -> DF,
    I: Fn() -> IF,
    DF: Future<Output = ()>,
    IF: Future<Output = ()>,
{
    for _ in 0..WARM_UP {
        direct().await;
        interposed().await;
    }
    let mut d = Vec::with_capacity(calls);
    let mut i = Vec::with_capacity(calls);
    for n in 0..calls {
        if n % 2 == 0 {
            d.push(time(direct()).await);
            i.push(time(interposed()).await);
        } else {
            i.push(time(interposed()).await);
            d.push(time(direct()).await);
        }
    }
    (d, i)
}

async fn time(call: impl Future<Output = ()>) -> Duration {
    let t = Instant::now();
    call.await;
    t.elapsed()
}

/// A gRPC channel over one unix connection to `path`, sending the
/// `:authority` the kubelet sends to that kind of socket.
async fn connect(socket: KubeletSocket, path: &Path) -> Channel {
    let target = path.to_owned();
    let connector = tower::service_fn(move |_: Uri| {
        let path = target.clone();
        async move {
            let stream = UnixStream::connect(&path).await?;
            Ok::<_, std::io::Error>(TokioIo::new(socket.client_io(&path, stream)))
        }
    });
    Endpoint::from_static(CLIENT_URI)
        .connect_with_connector(connector)
        .await
        .unwrap_or_else(|e| fail(format!("connecting to {}: {e}", path.display())))
}

/// The one node, on this machine: sockets are served and dialled directly.
struct LocalNode {
    root: PathBuf,
}

#[async_trait]
impl NodeHost for LocalNode {
    fn kubelet_root(&self, _node: &str) -> PathBuf {
        self.root.clone()
    }

    fn cdi_files(&self, _node: &str) -> Arc<dyn NodeFiles> {
        Arc::new(LocalDir::new(self.root.join("cdi")))
    }

    async fn serve(&self, node: &str, socket: &Path) -> Result<Served, SocketError> {
        let err = |message: String| SocketError {
            node: node.to_owned(),
            socket: socket.to_owned(),
            message,
        };
        if let Some(dir) = socket.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("creating its directory: {e}")))?;
        }
        let listener = UnixListener::bind(socket).map_err(|e| err(format!("bind: {e}")))?;
        let path = socket.to_owned();
        Ok(Served::new(
            unix_incoming(listener),
            Box::pin(async move {
                let _ = std::fs::remove_file(path);
            }),
        ))
    }

    async fn sockets(&self, node: &str, dir: &Path) -> Result<Vec<SocketFile>, SocketError> {
        let listed = dra_e2e::agent::sockets::list(dir).map_err(|e| SocketError {
            node: node.to_owned(),
            socket: dir.to_owned(),
            message: format!("listing: {e}"),
        })?;
        Ok(listed
            .into_iter()
            .map(|e| SocketFile {
                name: e.name,
                identity: e.identity,
            })
            .collect())
    }

    async fn dial(&self, node: &str, socket: &Path) -> Result<Dialled, SocketError> {
        match UnixStream::connect(socket).await {
            Ok(stream) => Ok(Box::new(stream)),
            Err(e) => Err(SocketError {
                node: node.to_owned(),
                socket: socket.to_owned(),
                message: format!("connect: {e}"),
            }),
        }
    }
}

/// A claim source without claims: the benchmark prepares none. Counts how
/// often the plugin asks.
#[derive(Default)]
struct NoClaims(AtomicU64);

#[async_trait]
impl ClaimSource for NoClaims {
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceClaim>, ClaimSourceError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Err(ClaimSourceError::Other {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            message: "the interposer latency benchmark has no claims to read".to_owned(),
        })
    }
}

/// The `p`-th percentile (nearest rank) of sorted `samples`, in µs.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e6
}

fn print_table(calls: usize, rows: &[Row]) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let profile = if cfg!(debug_assertions) {
        "dev (unoptimised runner code)"
    } else {
        "release"
    };
    println!(
        "{BENCH}: {cores} cores ({model}), {}, {profile} build",
        jiff::Zoned::now().strftime("%Y-%m-%d %H:%M %Z")
    );
    println!(
        "{BENCH}: {calls} sequential calls per kind and path after {WARM_UP} warm-up, one \
         connection per socket; microseconds"
    );
    println!(
        "{:<26} {:-^26}   {:-^26}   {:-^17}",
        "", " direct ", " interposed ", " added "
    );
    println!(
        "{:<26} {:>8} {:>8} {:>8}   {:>8} {:>8} {:>8}   {:>8} {:>8}",
        "call", "p50", "p90", "p99", "p50", "p90", "p99", "p50", "p99"
    );
    for row in rows {
        let mut direct = row.direct.clone();
        let mut interposed = row.interposed.clone();
        direct.sort();
        interposed.sort();
        let d = [50.0, 90.0, 99.0].map(|p| percentile(&direct, p));
        let i = [50.0, 90.0, 99.0].map(|p| percentile(&interposed, p));
        println!(
            "{:<26} {:>8.1} {:>8.1} {:>8.1}   {:>8.1} {:>8.1} {:>8.1}   {:>8.1} {:>8.1}",
            row.call,
            d[0],
            d[1],
            d[2],
            i[0],
            i[1],
            i[2],
            i[0] - d[0],
            i[2] - d[2]
        );
    }
}

fn fail(message: String) -> ! {
    panic!("{BENCH}: {message}");
}
