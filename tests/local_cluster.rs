//! The local cluster against the real control-plane binaries (found with the
//! same rules as the runner: DRA_E2E_BINARIES_DIR, else the build cache).
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_e2e::cluster::local::{
    Component, FeatureGates, LocalCluster, LocalClusterError, LocalClusterOptions,
};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Generous: the first scheduling pass after start-up competes with the other
/// test's cluster for two cores.
const DEADLINE: Duration = Duration::from_secs(120);
const DRIVER: &str = "gpu.local-cluster.example.com";

/// Whether `pid` is still one of the cluster's processes: alive and running the
/// binary it was started from (a recycled pid runs something else).
fn component_alive(c: &Component, binaries_dir: &Path) -> bool {
    std::fs::read_link(format!("/proc/{}/exe", c.pid))
        .map(|exe| exe == binaries_dir.join(&c.name))
        .unwrap_or(false)
}

/// Processes whose command line mentions `dir`: the cluster's components pass
/// paths below it, so after a stop there must be none.
fn processes_using(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid == std::process::id().to_string() {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) {
                found.push(format!("{pid}: {cmdline}"));
            }
        }
    }
    found
}

fn assert_all_gone(components: &[Component], binaries_dir: &Path, dir: &Path) {
    for c in components {
        assert!(
            !component_alive(c, binaries_dir),
            "{} (pid {}) is still running",
            c.name,
            c.pid
        );
    }
    assert_eq!(processes_using(dir), Vec::<String>::new());
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

/// Watches `name` until `cond` holds; on timeout fails with the last state.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, cond: impl Condition<K>) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    match tokio::time::timeout(DEADLINE, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(obj))) => obj,
        Ok(Ok(None)) => panic!("{what}: {name} was deleted"),
        Ok(Err(e)) => panic!("{what}: watching {name}: {e}"),
        Err(_) => panic!(
            "{what}: not within {DEADLINE:?}; last seen: {:#?}",
            api.get_opt(name).await
        ),
    }
}

async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + Debug,
{
    let obj: K = serde_json::from_value(value).expect("valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {obj:?}: {e}"))
}

/// A namespace pods can be created in: the ServiceAccount admission plugin
/// rejects them until the controller made the default account.
async fn namespace_for_pods(client: &kube::Client, ns: &str) {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await;
    wait_for(
        &Api::<ServiceAccount>::namespaced(client.clone(), ns),
        "default",
        "default service account created by kube-controller-manager",
        conditions::is_created(),
    )
    .await;
}

/// A Node as a kubelet would register it, Ready and with room for pods.
async fn create_ready_node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    create(
        &nodes,
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
    )
    .await;
    let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
    let status = json!({"status": {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "simulated by the test",
        }],
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patching node status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_allocates_a_device_from_a_slice_and_binds_the_pod() {
    let cluster = LocalCluster::start(LocalClusterOptions::default())
        .await
        .unwrap_or_else(|e| panic!("starting the local cluster: {e}"));
    let components = cluster.components();
    let names: Vec<&str> = components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "etcd",
            "kube-apiserver",
            "kube-scheduler",
            "kube-controller-manager"
        ]
    );
    let binaries_dir = cluster.binaries_dir().to_owned();
    for c in &components {
        assert!(component_alive(c, &binaries_dir), "{c:?} is not running");
    }
    let dir = cluster.dir().to_owned();
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&dir).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    assert!(cluster.server_url().starts_with("https://127.0.0.1:"));
    assert!(cluster.kubeconfig_path().starts_with(&dir));

    // The kubeconfig on disk works on its own, for kube-rs and for kubectl.
    let kc = kube::config::Kubeconfig::read_from(cluster.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let from_file = kube::Client::try_from(config).unwrap();
    Api::<Namespace>::all(from_file)
        .get("kube-system")
        .await
        .expect("reading kube-system with the kubeconfig from disk");
    match std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["get", "--raw", "/readyz"])
        .output()
    {
        Ok(out) => {
            assert!(out.status.success(), "kubectl: {out:?}");
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("kubectl is not installed; checked the kubeconfig with kube-rs only")
        }
        Err(e) => panic!("running kubectl: {e}"),
    }

    let client = cluster.client();
    create_ready_node(&client, "node-a").await;
    create_ready_node(&client, "node-b").await;

    let ns = "dra-local";
    namespace_for_pods(&client, ns).await;

    create(
        &Api::<DeviceClass>::all(client.clone()),
        json!({
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]},
        }),
    )
    .await;
    // Only node-b has a device, so binding proves the scheduler used the slice.
    create(
        &Api::<ResourceSlice>::all(client.clone()),
        json!({
            "metadata": {"name": "node-b-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "node-b",
                "pool": {"name": "node-b", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "local"}}}],
            },
        }),
    )
    .await;
    create(
        &Api::<ResourceClaimTemplate>::namespaced(client.clone(), ns),
        json!({
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": DRIVER}},
            ]}}},
        }),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = create(
        &pods,
        json!({
            "metadata": {"name": "tester"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                }],
            },
        }),
    )
    .await;
    let pod_uid = pod.metadata.uid.clone().unwrap();

    let bound = wait_for(
        &pods,
        "tester",
        "pod bound by kube-scheduler",
        |p: Option<&Pod>| {
            p.and_then(|p| p.spec.as_ref()?.node_name.as_ref())
                .is_some()
        },
    )
    .await;
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-b"));
    let claim_name = bound
        .status
        .and_then(|s| s.resource_claim_statuses)
        .and_then(|s| s.into_iter().find(|s| s.name == "gpu"))
        .and_then(|s| s.resource_claim_name)
        .expect("the resourceclaim controller records the generated claim in the pod status");

    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let claim = claims.get(&claim_name).await.unwrap();
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Pod", pod_uid.as_str())
    );
    let status = claim.status.expect("allocated claim has a status");
    let results = status
        .allocation
        .expect("claim is allocated")
        .devices
        .unwrap()
        .results
        .unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(
        (
            results[0].driver.as_str(),
            results[0].pool.as_str(),
            results[0].device.as_str()
        ),
        (DRIVER, "node-b", "gpu-0")
    );
    assert_eq!(results[0].request, "gpu");
    let reserved: Vec<&str> = status
        .reserved_for
        .as_ref()
        .unwrap()
        .iter()
        .map(|r| r.uid.as_str())
        .collect();
    assert_eq!(reserved, [pod_uid.as_str()]);
    let listed = claims.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1, "exactly one claim was generated");

    // What `@API:` tags ask: a served resource, one its group version does
    // not have, and a group version not served at all (404, not an error).
    use dra_e2e::ground::discovery::{NeededApi, serves};
    let ask = |text: &str| {
        let api = NeededApi::parse(text).unwrap();
        let client = client.clone();
        async move { serves(&client, &api).await.unwrap() }
    };
    assert!(ask("resource.k8s.io/v1/resourceclaims").await);
    assert!(ask("v1/pods").await);
    assert!(!ask("resource.k8s.io/v1/nosuchthings").await);
    assert!(!ask("resource.k8s.io/v9/resourceclaims").await);

    // A chaos kubelet restart waits while a Never pod starts on its node
    // (node-a has no kubelet: a pod bound to it stays Pending), not for a
    // pod that restarts its containers, and goes once the pod is gone.
    use dra_e2e::harness::node_daemon::no_pod_starting;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let bound = |name: &str, policy: &str| {
        json!({"metadata": {"name": name}, "spec": {"nodeName": "node-a",
            "restartPolicy": policy, "containers": [{"name": "c", "image": "busybox"}]}})
    };
    create(&pods, bound("starting", "Never")).await;
    create(&pods, bound("restarts", "Always")).await;
    let everywhere: Api<Pod> = Api::all(client.clone());
    let e = no_pod_starting(&everywhere, "node-a", Duration::from_secs(3))
        .await
        .expect_err("a Never pod is starting on node-a");
    let shown = e.to_string();
    assert!(shown.contains("pod dra-local/starting starting"), "{shown}");
    assert!(!shown.contains("restarts"), "{shown}");
    no_pod_starting(&everywhere, "node-b", Duration::from_secs(3))
        .await
        .expect("nothing starts on node-b");
    pods.delete(
        "starting",
        &kube::api::DeleteParams::default().grace_period(0),
    )
    .await
    .expect("deleting the starting pod");
    no_pod_starting(&everywhere, "node-a", DEADLINE)
        .await
        .expect("no Never pod starts on node-a once it is gone");

    cluster.stop().await.expect("stopping the cluster");
    assert_all_gone(&components, &binaries_dir, &dir);
}

#[test]
fn a_panic_while_owning_the_cluster_still_stops_it() {
    let (tx, rx) = std::sync::mpsc::channel();
    let owner = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let cluster = LocalCluster::start(LocalClusterOptions::default())
                .await
                .unwrap_or_else(|e| panic!("starting the local cluster: {e}"));
            tx.send((
                cluster.components(),
                cluster.binaries_dir().to_owned(),
                cluster.dir().to_owned(),
            ))
            .unwrap();
            panic!("the test body fails while it owns the cluster");
        })
    });
    let (components, binaries_dir, dir) = rx.recv().expect("the cluster started");
    assert!(owner.join().is_err(), "the owner thread panicked");
    assert_eq!(components.len(), 4);
    assert_all_gone(&components, &binaries_dir, &dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_files_leaves_logs_after_stop_and_crashes_are_reported() {
    let cluster = LocalCluster::start(LocalClusterOptions {
        keep_files: true,
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("starting the local cluster: {e}"));
    let components = cluster.components();
    let binaries_dir = cluster.binaries_dir().to_owned();
    let dir = cluster.dir().to_owned();

    // A component dying on its own is reported (what `cluster up` watches).
    let scheduler = components
        .iter()
        .find(|c| c.name == "kube-scheduler")
        .unwrap();
    let _ = dra_e2e::sys::kill(scheduler.pid, dra_e2e::sys::Signal::Kill);
    let exited = tokio::time::timeout(DEADLINE, cluster.component_exited())
        .await
        .expect("the scheduler's exit is noticed");
    match exited {
        LocalClusterError::Exited {
            component, status, ..
        } => {
            assert_eq!(component, "kube-scheduler");
            assert!(status.contains("SIGKILL"), "{status}");
        }
        other => panic!("unexpected {other}"),
    }

    cluster.stop().await.expect("stopping the cluster");
    for c in &components {
        assert!(!component_alive(c, &binaries_dir), "{c:?} still runs");
        let log = std::fs::read_to_string(&c.log_path).unwrap();
        assert!(!log.is_empty(), "{} wrote no log", c.name);
    }
    assert!(dir.join("kubeconfig").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_failing_at_start_is_named_with_its_log() {
    let err = LocalCluster::start(LocalClusterOptions {
        feature_gates: FeatureGates::new().with("NoSuchGateForTheTest", true),
        ..Default::default()
    })
    .await
    .expect_err("kube-apiserver rejects an unknown gate");
    let LocalClusterError::Exited { component, log, .. } = &err else {
        panic!("unexpected error: {err}");
    };
    assert_eq!(component, "kube-apiserver");
    assert!(
        log.tail.contains("NoSuchGateForTheTest"),
        "log tail: {}",
        log.tail
    );
    let message = err.to_string();
    assert!(message.contains("kube-apiserver exited"), "{message}");
    // <dir>/logs/kube-apiserver.log: the half-started cluster was cleaned up.
    let dir: PathBuf = log.path.parent().unwrap().parent().unwrap().to_owned();
    assert_eq!(processes_using(&dir), Vec::<String>::new());
    assert!(!dir.exists());
}

#[tokio::test]
async fn missing_binaries_give_one_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let err = LocalCluster::start(LocalClusterOptions {
        binaries_dir: Some(empty.path().to_owned()),
        ..Default::default()
    })
    .await
    .expect_err("no binaries in an empty directory");
    assert!(matches!(err, LocalClusterError::Binaries(_)), "{err:?}");
    let message = err.to_string();
    for expected in [
        "make controlplane",
        "DRA_E2E_BINARIES_DIR",
        "kube-apiserver",
        &empty.path().display().to_string(),
    ] {
        assert!(
            message.contains(expected),
            "{expected:?} missing in: {message}"
        );
    }
}

#[test]
fn cluster_up_without_binaries_exits_non_zero_with_the_message() {
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dra-e2e"))
        .args(["cluster", "up", "--binaries-dir"])
        .arg(empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("make controlplane"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_up_serves_until_sigint_then_cleans_up() {
    let (mut child, dir, log) =
        cluster_up(&["--feature-gates", "DRAPartitionableDevices=true"]).await;
    let kubeconfig = dir.join("kubeconfig");
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    Api::<Namespace>::all(client)
        .get("default")
        .await
        .expect("the cluster answers");
    assert_eq!(
        processes_using(&dir).len(),
        4,
        "{:#?}",
        processes_using(&dir)
    );

    let _ = dra_e2e::sys::kill(child.id().unwrap(), dra_e2e::sys::Signal::Int);
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("cluster up stopped after SIGINT")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(processes_using(&dir), Vec::<String>::new());
    assert!(!dir.exists());
    // A normal start and stop logs no errors (the apiserver's 5xx answers
    // while it starts are expected, not errors of the run).
    let log = log.await.unwrap();
    assert!(log.contains("node registered and ready"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
}

/// Starts `dra-e2e cluster up` and returns it with the cluster's directory
/// once it printed its kubeconfig, and its log (stderr) once it has exited.
async fn cluster_up(
    args: &[&str],
) -> (
    tokio::process::Child,
    PathBuf,
    tokio::task::JoinHandle<String>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dra-e2e"))
        .args(["cluster", "up"])
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let kubeconfig = tokio::time::timeout(DEADLINE * 2, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(path) = line.trim().strip_prefix("kubeconfig:") {
                return PathBuf::from(path.trim());
            }
        }
        panic!("cluster up ended without printing the kubeconfig");
    })
    .await
    .expect("cluster up printed its kubeconfig in time");
    // Keep reading stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, kubeconfig.parent().unwrap().to_owned(), log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_die_with_a_sigkilled_runner() {
    let (mut child, dir, _log) = cluster_up(&[]).await;
    assert_eq!(
        processes_using(&dir).len(),
        4,
        "{:#?}",
        processes_using(&dir)
    );

    child.start_kill().unwrap();
    child.wait().await.unwrap();
    // The kernel delivers the parent-death signal asynchronously and there is
    // no event for another process's children exiting, so poll /proc briefly.
    let deadline = std::time::Instant::now() + DEADLINE;
    while !processes_using(&dir).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "orphans of a SIGKILLed runner: {:#?}",
            processes_using(&dir)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nobody was left to remove the directory.
    std::fs::remove_dir_all(&dir).unwrap();
}

/// TCP ports process `pid` listens on (its listening sockets in
/// /proc/<pid>/net/tcp{,6} whose inodes it holds).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // State 0A is LISTEN.
            if cols.len() > 9 && cols[3] == "0A" && inodes.iter().any(|i| i == cols[9]) {
                let port = cols[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports.sort_unstable();
    ports
}

/// A range request for `key` in etcd's JSON gateway, as HTTP/1.0 over plain
/// TCP; returns whatever came back.
async fn plain_http_range(port: u16, body: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let request = format!(
        "POST /v3/kv/range HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // The server may close before reading it all.
    let _ = s.write_all(request.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// A client of `https://127.0.0.1:<port>` trusting etcd's CA, presenting
/// `identity` (certificate and key files) if given.
fn etcd_client(
    port: u16,
    ca_der: &[u8],
    identity: Option<&dra_e2e::cluster::host::pki::CertPair>,
) -> kube::Client {
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.root_cert = Some(vec![ca_der.to_vec()]);
    if let Some(pair) = identity {
        config.auth_info.client_certificate = Some(pair.cert_path.display().to_string());
        config.auth_info.client_key = Some(pair.key_path.display().to_string());
    }
    kube::Client::try_from(config).unwrap()
}

async fn range(client: &kube::Client, body: &str) -> Result<String, String> {
    let request = http::Request::post("/v3/kv/range")
        .header("content-type", "application/json")
        .body(body.as_bytes().to_vec())
        .unwrap();
    client
        .request_text(request)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_admits_only_clients_with_a_certificate_from_its_own_ca() {
    use base64::Engine as _;
    let cluster = LocalCluster::start(LocalClusterOptions::default())
        .await
        .unwrap_or_else(|e| panic!("starting the local cluster: {e}"));
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    create(&namespaces, json!({"metadata": {"name": "etcd-tls-check"}})).await;
    let key =
        base64::engine::general_purpose::STANDARD.encode("/registry/namespaces/etcd-tls-check");
    let body = format!(r#"{{"key":"{key}"}}"#);

    let url = cluster.etcd_url().to_owned();
    let client_port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let etcd = &cluster.components()[0];
    assert_eq!(etcd.name, "etcd");
    let ports = listening_ports(etcd.pid);
    assert!(ports.contains(&client_port), "{ports:?} lack {url}");
    assert_eq!(ports.len(), 2, "client and peer listeners only: {ports:?}");
    let pki = cluster.pki();

    // With the runner's own etcd certificate the namespace is there: the
    // refusals below are about credentials, not a missing key.
    let allowed = etcd_client(
        client_port,
        &pki.etcd.ca_der,
        Some(&pki.etcd.healthcheck_client),
    );
    let found = range(&allowed, &body)
        .await
        .expect("reading with etcd's certificate");
    assert!(found.contains("\"kvs\""), "{found}");

    for port in ports {
        let plain = plain_http_range(port, &body).await;
        assert!(
            !plain.contains("kvs")
                && !plain.starts_with("HTTP/1.1 200")
                && !plain.starts_with("HTTP/1.0 200"),
            "plain HTTP to etcd port {port} got: {plain}"
        );
        let anonymous = etcd_client(port, &pki.etcd.ca_der, None);
        let refused = range(&anonymous, &body).await;
        assert!(
            refused.is_err(),
            "TLS without a certificate on port {port}: {refused:?}"
        );
        // The cluster CA's admin is no one to etcd.
        let admin = etcd_client(port, &pki.etcd.ca_der, Some(&pki.admin));
        let refused = range(&admin, &body).await;
        assert!(
            refused.is_err(),
            "the cluster CA's admin on port {port}: {refused:?}"
        );
    }

    let components = cluster.components();
    let binaries_dir = cluster.binaries_dir().to_owned();
    let dir = cluster.dir().to_owned();
    cluster.stop().await.expect("stopping the cluster");
    assert_all_gone(&components, &binaries_dir, &dir);
}

/// A node a scenario owns (`@OwnNodes`) against the real scheduler: its
/// taint keeps pods without the toleration off it (those that must go there
/// stay unschedulable saying why) while the node still counts as ready for
/// the run, the owner's pods land on it, and the taint comes off again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_node_keeps_other_pods_off_and_takes_its_owners() {
    use dra_e2e::harness::node_lease::{Faults, NodeLeases, OWN_NODE_TAINT, set_taint, toleration};
    let cluster = LocalCluster::start(LocalClusterOptions::default())
        .await
        .unwrap_or_else(|e| panic!("starting the local cluster: {e}"));
    let client = cluster.client();
    create_ready_node(&client, "node-a").await;
    create_ready_node(&client, "node-b").await;
    let ready = ["node-a".to_owned(), "node-b".to_owned()];
    let leases = std::sync::Arc::new(NodeLeases::default());
    let owned = leases
        .own(&ready, 1, "dra-own", leases.ticket())
        .await
        .expect("a node");
    assert_eq!(owned.nodes(), ["node-b"]);
    // The node is written meanwhile, as a kubelet writes its node: the taint
    // is written all the same (a conflict is read again and retried).
    let writer = tokio::spawn({
        let nodes: Api<Node> = Api::all(client.clone());
        async move {
            for i in 0.. {
                let label = json!({"metadata": {"labels": {"heartbeat": i.to_string()}}});
                let _ = nodes
                    .patch("node-b", &PatchParams::default(), &Patch::Merge(&label))
                    .await;
                // Busier than a kubelet (seconds between its writes), and
                // leaving the taint's read and write a chance.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    for _ in 0..10 {
        set_taint(&client, "node-b", Some("dra-own"))
            .await
            .expect("tainting");
        set_taint(&client, "node-b", None)
            .await
            .expect("untainting");
    }
    writer.abort();
    set_taint(&client, "node-b", Some("dra-own"))
        .await
        .expect("tainting");
    let nodes: Api<Node> = Api::all(client.clone());
    let b = nodes.get("node-b").await.unwrap();
    let taints = b.spec.as_ref().and_then(|s| s.taints.clone()).unwrap();
    assert_eq!(taints.len(), 1, "{taints:?}");
    assert_eq!(taints[0].key, OWN_NODE_TAINT);
    assert_eq!(taints[0].value.as_deref(), Some("dra-own"));
    assert!(dra_e2e::ground::node_ready::node_is_ready_and_schedulable(
        &b
    ));

    let ns = "dra-own";
    namespace_for_pods(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = |name: &str, node: Option<&str>, tolerate: bool| {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
        if let Some(n) = node {
            spec["nodeSelector"] = json!({"kubernetes.io/hostname": n});
        }
        if tolerate {
            spec["tolerations"] = json!([toleration()]);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    for i in 0..4 {
        create(&pods, pod(&format!("anywhere-{i}"), None, false)).await;
    }
    create(&pods, pod("on-b", Some("node-b"), false)).await;
    create(&pods, pod("owners", Some("node-b"), true)).await;
    let bound_to = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let scheduled = |p: Option<&Pod>| p.is_some_and(|p| bound_to(p).is_some());
    for i in 0..4 {
        let p = wait_for(&pods, &format!("anywhere-{i}"), "pod bound", scheduled).await;
        assert_eq!(bound_to(&p).as_deref(), Some("node-a"));
    }
    let p = wait_for(&pods, "owners", "the owner's pod bound", scheduled).await;
    assert_eq!(bound_to(&p).as_deref(), Some("node-b"));
    let refused = |p: Option<&Pod>| {
        p.and_then(dra_e2e::ground::wait::pod_unschedulable_message)
            .is_some_and(|m| m.contains("untolerated taint"))
    };
    let p = wait_for(&pods, "on-b", "refused for the taint", refused).await;
    assert!(bound_to(&p).is_none());

    set_taint(&client, "node-b", None)
        .await
        .expect("untainting");
    let b = nodes.get("node-b").await.unwrap();
    assert_eq!(b.spec.and_then(|s| s.taints).unwrap_or_default().len(), 0);
    wait_for(&pods, "on-b", "bound once the taint is off", scheduled).await;
    drop(owned);
    assert_eq!(
        leases.shared(&ready, 2, 2, Faults::RideOut).await.nodes(),
        ready
    );
    cluster.stop().await.expect("stopping the cluster");
}
