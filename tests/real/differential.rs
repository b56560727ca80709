//! The simulated kubelet against a real one: one local cluster with a
//! simulated node and a real node (kubelet + containerd + runc), the same
//! pods on each, and the status and events each kubelet produced compared
//! field by field after normalising what legitimately differs (times, IPs,
//! container and image IDs, names and UIDs of the pod, its claims and its
//! node). A scenario that passes on simulated nodes should pass on real
//! ones; this is where the simulator learns what "real" means.
//!
//! Needs root and the node components (`make node`), like tests/real/node.rs;
//! the control plane is found as for the other tests (DRA_E2E_BINARIES_DIR,
//! else the cache).
//!
//! Cases: a long-running pod, one with an init container, one whose
//! container completes, one whose container fails, one that crash-loops,
//! and with a claim: one that runs, one with an init container checking the
//! claim's env, one that completes, one whose CDI device the runtime cannot
//! resolve, and one whose prepare fails and later works. Each pair is
//! compared in the state its case is about (status and events), then again
//! after deletion (events).
//!
//! Left out of the comparison, as properties of this machine rather than of
//! the kubelet: the real node's `MissingClusterDNS` events (the local
//! cluster has no DNS) and a pod-level memory limit that is cgroup v1's
//! "unlimited". Restart counts of the crash-looping pod only say "restarted"
//! (the two back-off schedules differ by design).
//!
//! A failure prints, per case, every field that differs with the value
//! each side had:
//!
//! ```text
//! case restarts (pods restarts-sim on dra-e2e-node-0, restarts-real on dra-e2e-real-0):
//!     conditions[Ready].message:
//!         simulated (absent)
//!         real      "containers with unready status: [with-resource]"
//! ```
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dra_e2e::cluster::local::{LocalCluster, LocalClusterOptions};
use dra_e2e::cluster::local_host::LocalHost;
use dra_e2e::cluster::real_node::{RealNodes, RealNodesOptions};
use dra_e2e::cluster::remote::RemoteEnv;
use dra_e2e::conn::node_files::{NodeFiles, NodeFilesError};
use dra_e2e::conn::node_host::{HostProvider, HostedDriver, NodeHost, Served, SocketError};
use dra_e2e::ground::objects::{self, ClaimShape, PodClaims, PodShape};
use dra_e2e::harness::driver::{self, Driver, DriverOptions, Resources};
use dra_e2e::proto::method;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

/// How long a pod may take to reach the state its case compares.
const SETTLE: Duration = Duration::from_secs(240);
/// Once both pods reached it, how long their views may take to agree
/// (events and status updates of a real kubelet trail each other).
const AGREE: Duration = Duration::from_secs(30);

/// Claim parameter that makes the test's CDI directory drop the claim's
/// spec file: the plugin then hands the kubelet a CDI device ID no spec on
/// the node defines, which the container runtime cannot resolve.
const CDI_MISSING_KEY: &str = "cdi_missing";
const CDI_MISSING_ENV: &str = "user_cdi_missing=yes";

// ---------------------------------------------------------------------------
// Where the driver's plugin runs: a local agent for the simulated node, a
// proxy pod for the real one, one driver across both.

/// The CDI directory of a node, except that spec files carrying
/// [`CDI_MISSING_ENV`] are never written.
#[derive(Debug)]
struct DropMarked(Arc<dyn NodeFiles>);

#[async_trait]
impl NodeFiles for DropMarked {
    async fn create(&self, name: &str, content: &[u8]) -> Result<(), NodeFilesError> {
        if String::from_utf8_lossy(content).contains(CDI_MISSING_ENV) {
            return Ok(());
        }
        self.0.create(name, content).await
    }

    async fn remove(&self, name: &str) -> Result<(), NodeFilesError> {
        self.0.remove(name).await
    }

    async fn exists(&self, name: &str) -> Result<bool, NodeFilesError> {
        self.0.exists(name).await
    }

    async fn specs(&self) -> Result<Vec<(String, String)>, NodeFilesError> {
        self.0.specs().await
    }
}

struct BothHosts {
    sim: String,
    local: Arc<dyn NodeHost>,
    remote: Arc<dyn NodeHost>,
}

impl BothHosts {
    fn pick(&self, node: &str) -> &Arc<dyn NodeHost> {
        if node == self.sim {
            &self.local
        } else {
            &self.remote
        }
    }
}

#[async_trait]
impl NodeHost for BothHosts {
    fn kubelet_root(&self, node: &str) -> PathBuf {
        self.pick(node).kubelet_root(node)
    }

    fn cdi_files(&self, node: &str) -> Arc<dyn NodeFiles> {
        Arc::new(DropMarked(self.pick(node).cdi_files(node)))
    }

    fn pod_of(&self, node: &str) -> Option<(String, String)> {
        self.pick(node).pod_of(node)
    }

    async fn serve(&self, node: &str, socket: &std::path::Path) -> Result<Served, SocketError> {
        self.pick(node).serve(node, socket).await
    }
}

struct Hosts {
    sim: (String, PathBuf, PathBuf),
    real: String,
    remote: RemoteEnv,
}

#[async_trait]
impl HostProvider for Hosts {
    async fn node_host(&self, hosted: HostedDriver<'_>) -> anyhow::Result<Arc<dyn NodeHost>> {
        // The simulated node's local agents are the workspace's dra-e2e-agent
        // (this test binary has no `proxy-agent`); the real node finds it too.
        let local: Arc<dyn NodeHost> =
            Arc::new(LocalHost::new(vec![self.sim.clone()]).with_agent(crate::common::agent()));
        let remote = HostedDriver {
            nodes: std::slice::from_ref(&self.real),
            ..hosted
        };
        let remote: Arc<dyn NodeHost> = Arc::new(self.remote.host(remote).await?);
        Ok(Arc::new(BothHosts {
            sim: self.sim.0.clone(),
            local,
            remote,
        }))
    }
}

// ---------------------------------------------------------------------------
// The cases.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    None,
    /// A claim from the template with upstream's default config.
    Default,
    /// A claim whose CDI spec never reaches the node.
    CdiMissing,
}

struct Case {
    name: &'static str,
    claim: Claim,
    init: Option<Vec<String>>,
    command: Option<&'static str>,
    restart_policy: &'static str,
    /// The state to compare in; evaluated on each pod separately.
    settled: fn(&Pod, &[Event]) -> bool,
    /// Restart counts only say whether the container restarted.
    restarts_vary: bool,
}

fn container_status<'a>(
    pod: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn has_event(events: &[Event], reason: &str) -> bool {
    events.iter().any(|e| e.reason.as_deref() == Some(reason))
}

fn cases() -> Vec<Case> {
    // Settled by status alone: events trail the status of a real kubelet
    // and are compared once both pods are here.
    fn running(p: &Pod, _: &[Event]) -> bool {
        phase(p) == "Running" && ready(p)
    }
    fn succeeded(p: &Pod, _: &[Event]) -> bool {
        phase(p) == "Succeeded"
    }
    // Each case says only how it differs from a plain running pod.
    let plain = |name| Case {
        name,
        claim: Claim::None,
        init: None,
        command: None,
        restart_policy: "Never",
        settled: running,
        restarts_vary: false,
    };
    vec![
        plain("plain"),
        Case {
            init: Some(Vec::new()),
            ..plain("init")
        },
        Case {
            command: Some("exit 0"),
            settled: succeeded,
            ..plain("completes")
        },
        Case {
            command: Some("exit 1"),
            settled: |p, _| phase(p) == "Failed",
            ..plain("fails")
        },
        Case {
            command: Some("exit 1"),
            restart_policy: "Always",
            settled: |p, _| {
                container_status(p, objects::CONTAINER).is_some_and(|c| {
                    c.restart_count >= 1
                        && c.state
                            .as_ref()
                            .and_then(|s| s.waiting.as_ref())
                            .and_then(|w| w.reason.as_deref())
                            == Some("CrashLoopBackOff")
                })
            },
            restarts_vary: true,
            ..plain("restarts")
        },
        Case {
            claim: Claim::Default,
            ..plain("claim")
        },
        Case {
            claim: Claim::Default,
            init: Some(vec![objects::DEFAULT_USER_ENV.to_owned()]),
            ..plain("claim-init")
        },
        Case {
            claim: Claim::CdiMissing,
            // Whatever the kubelet says about it, it says it with a warning.
            settled: |_, e| {
                e.iter().any(|e| {
                    e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("Failed")
                })
            },
            ..plain("cdi-fails")
        },
        Case {
            claim: Claim::Default,
            command: Some("exit 0"),
            settled: succeeded,
            ..plain("claim-completes")
        },
    ]
}

const TEMPLATE: &str = "claim";
const CDI_MISSING_TEMPLATE: &str = "cdi-missing";

fn pod_for(case: &Case, name: &str, node: &str) -> Pod {
    let mut shape = PodShape::new(name);
    shape.claims = match case.claim {
        Claim::None => PodClaims::None,
        Claim::Default => PodClaims::Inline {
            template: TEMPLATE.to_owned(),
        },
        Claim::CdiMissing => PodClaims::Inline {
            template: CDI_MISSING_TEMPLATE.to_owned(),
        },
    };
    shape.init_container = case.init.clone();
    shape.command = case.command.map(str::to_owned);
    shape.restart_policy = case.restart_policy.to_owned();
    // Through the scheduler, which allocates the claims.
    shape.node_selector = Some(node.to_owned());
    shape.build().expect("test pod")
}

// ---------------------------------------------------------------------------
// What a pod looks like, normalised.

/// Replaces the names of things that legitimately differ between the two
/// pods, then patterns (container IDs, back-off delays, generated names).
struct Normaliser {
    literals: Vec<(String, String)>,
    patterns: Vec<(regex::Regex, &'static str)>,
}

impl Normaliser {
    fn new(mut literals: Vec<(String, String)>) -> Self {
        literals.retain(|(from, _)| !from.is_empty());
        // Longer first: a claim name contains its pod's name.
        literals.sort_by_key(|l| std::cmp::Reverse(l.0.len()));
        let p = |re: &str| regex::Regex::new(re).expect("pattern");
        Self {
            literals,
            patterns: vec![
                (p(r"[0-9a-f]{64}"), "<hex>"),
                (
                    p(r"back-off \d+(\.\d+)?(ms|s|m)(\d+(\.\d+)?(ms|s))?"),
                    "back-off <delay>",
                ),
                (p(r"kube-api-access-[a-z0-9]{5}"), "kube-api-access-<x>"),
            ],
        }
    }

    fn apply(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for (from, to) in &self.literals {
            out = out.replace(from.as_str(), to);
        }
        for (re, to) in &self.patterns {
            out = re.replace_all(&out, *to).into_owned();
        }
        out
    }
}

fn is_time_field(key: &str) -> bool {
    key.ends_with("At") || key.ends_with("Time") || key.ends_with("Timestamp")
}

/// Flattens JSON into `path -> value`; list items are keyed by their
/// `name` or `type` when they have one (and the order of those keys is a
/// field of its own), else by position. Empty lists and objects count as
/// absent, as the API server's `omitempty` makes them.
fn flatten(path: &str, key: &str, v: &Value, n: &Normaliser, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(&p, k, v, n, out);
            }
        }
        Value::Array(items) => {
            let mut keys = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let k = item
                    .get("name")
                    .or_else(|| item.get("type"))
                    .and_then(Value::as_str)
                    .map(|s| n.apply(s));
                if let Some(k) = &k {
                    keys.push(k.clone());
                }
                let k = k.unwrap_or_else(|| i.to_string());
                flatten(&format!("{path}[{k}]"), key, item, n, out);
            }
            if keys.len() > 1 {
                out.insert(format!("{path} (order)"), keys.join(", "));
            }
        }
        Value::Null => {}
        Value::String(s) => {
            let value = if is_time_field(key) {
                "<time>".to_owned()
            } else if key == "containerID" || key == "imageID" {
                if s.is_empty() { "\"\"" } else { "<set>" }.to_owned()
            } else if key.to_ascii_lowercase().ends_with("ip") || path.contains("IPs[") {
                "<ip>".to_owned()
            } else {
                format!("{:?}", n.apply(s))
            };
            out.insert(path.to_owned(), value);
        }
        other => {
            out.insert(path.to_owned(), other.to_string());
        }
    }
}

/// Events a real kubelet writes because of how this machine's real node is
/// set up, not because of what the pod does: without cluster DNS (the local
/// cluster has none) every pod gets `MissingClusterDNS`.
const ENVIRONMENT_EVENTS: &[&str] = &["MissingClusterDNS"];

/// The memory limit a real kubelet reads from the cgroup of a pod without
/// limits on a cgroup v1 host (the kernel's "unlimited", 2^63 - 4096 bytes);
/// it says which cgroup version the host runs, nothing about the pod.
const CGROUP_V1_UNLIMITED: &str = "\"9007199254740988Ki\"";

/// The fields compared for one pod.
fn view(case: &Case, pod: &Pod, events: &[Event], n: &Normaliser) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let status = serde_json::to_value(pod.status.clone().unwrap_or_default()).expect("status");
    flatten("", "", &status, n, &mut out);
    // PodIPs are keyed by address, which differs; what matters is that
    // there is one.
    let ips = regex::Regex::new(r"IPs\[[^\]]*\]").expect("pattern");
    out = out
        .into_iter()
        .map(|(k, v)| (ips.replace_all(&k, "IPs[]").into_owned(), v))
        .collect();
    if out.get("resources.limits.memory").map(String::as_str) == Some(CGROUP_V1_UNLIMITED) {
        out.remove("resources.limits.memory");
    }
    if case.restarts_vary {
        for (k, v) in out.iter_mut() {
            if k.ends_with(".restartCount") && v.parse::<i64>().is_ok_and(|c| c >= 1) {
                *v = ">= 1".to_owned();
            }
        }
    }
    let mut by_reason: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in events {
        let reason = e.reason.as_deref().unwrap_or("?");
        if ENVIRONMENT_EVENTS.contains(&reason) {
            continue;
        }
        let mut key = format!("event {} {reason}", e.type_.as_deref().unwrap_or("?"));
        if let Some(at) = e.involved_object.field_path.as_deref() {
            key.push_str(&format!(" ({at})"));
        }
        by_reason
            .entry(key)
            .or_default()
            .insert(n.apply(e.message.as_deref().unwrap_or_default()));
    }
    for (k, messages) in by_reason {
        let messages: Vec<String> = messages.into_iter().map(|m| format!("{m:?}")).collect();
        out.insert(k, messages.join(" + "));
    }
    out
}

/// `field: simulated X | real Y` for every field that differs.
fn diff(sim: &BTreeMap<String, String>, real: &BTreeMap<String, String>) -> Vec<String> {
    let keys: BTreeSet<&String> = sim.keys().chain(real.keys()).collect();
    let absent = "(absent)".to_owned();
    keys.into_iter()
        .filter_map(|k| {
            let (s, r) = (
                sim.get(k).unwrap_or(&absent),
                real.get(k).unwrap_or(&absent),
            );
            (s != r).then(|| format!("    {k}:\n        simulated {s}\n        real      {r}"))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Reading pods.

struct Side {
    label: &'static str,
    node: String,
    pod: String,
}

struct Snapshot {
    pod: Option<Pod>,
    events: Vec<Event>,
}

async fn snapshot(client: &kube::Client, ns: &str, name: &str) -> Snapshot {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get_opt(name).await.expect("reading pod");
    let events = match pod.as_ref().and_then(|p| p.metadata.uid.clone()) {
        Some(uid) => pod_events(client, ns, &uid).await,
        None => Vec::new(),
    };
    Snapshot { pod, events }
}

async fn pod_events(client: &kube::Client, ns: &str, uid: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .expect("listing events")
        .items
}

/// Names and UIDs in a pod's status that differ between the sides.
async fn normaliser_for(client: &kube::Client, ns: &str, side: &Side, pod: &Pod) -> Normaliser {
    let mut literals = vec![
        (side.pod.clone(), "<pod>".to_owned()),
        (ns.to_owned(), "<ns>".to_owned()),
        (side.node.clone(), "<node>".to_owned()),
        (
            pod.metadata.uid.clone().unwrap_or_default(),
            "<pod-uid>".to_owned(),
        ),
    ];
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let generated = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    for c in generated {
        let Some(name) = c.resource_claim_name else {
            continue;
        };
        if let Ok(Some(claim)) = claims.get_opt(&name).await {
            literals.push((claim.metadata.uid.unwrap_or_default(), "<claim-uid>".into()));
        }
        literals.push((name, "<claim>".into()));
    }
    Normaliser::new(literals)
}

/// Waits until both pods of a case are in the state it compares and their
/// views agree; returns the differences seen last, empty when they agreed.
async fn compare(
    client: &kube::Client,
    ns: &str,
    case: &Case,
    sides: &[Side; 2],
    deleted: bool,
) -> Vec<String> {
    let start = Instant::now();
    let mut agreeing_since: Option<Instant> = None;
    loop {
        let mut views = Vec::new();
        let mut not_settled = Vec::new();
        for side in sides {
            let snap = snapshot(client, ns, &side.pod).await;
            match (&snap.pod, deleted) {
                (Some(pod), false) => {
                    if !(case.settled)(pod, &snap.events) {
                        not_settled.push(side.label);
                    }
                    let n = normaliser_for(client, ns, side, pod).await;
                    views.push(view(case, pod, &snap.events, &n));
                }
                (None, false) => {
                    not_settled.push(side.label);
                    views.push(BTreeMap::from([("pod".to_owned(), "(gone)".to_owned())]));
                }
                (Some(_), true) => {
                    not_settled.push(side.label);
                    views.push(BTreeMap::from([(
                        "pod".to_owned(),
                        "(still there)".to_owned(),
                    )]));
                }
                (None, true) => views.push(BTreeMap::new()),
            }
        }
        let differences = diff(&views[0], &views[1]);
        let now = Instant::now();
        if not_settled.is_empty() {
            if differences.is_empty() {
                return Vec::new();
            }
            let since = *agreeing_since.get_or_insert(now);
            if now - since > AGREE {
                return differences;
            }
        } else if now - start > SETTLE {
            let mut out = vec![format!(
                "    (not in the compared state after {SETTLE:?}: {})",
                not_settled.join(", ")
            )];
            out.extend(differences);
            return out;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The events of pods already deleted, compared by the UIDs they had.
async fn compare_deletion_events(
    client: &kube::Client,
    ns: &str,
    case: &Case,
    uids: &[Remembered; 2],
) -> Vec<String> {
    let start = Instant::now();
    loop {
        let mut views = Vec::new();
        for (uid, n) in uids {
            let mut events = pod_events(client, ns, uid).await;
            if case.restarts_vary {
                // Whether a crash-looping container runs when its pod is
                // deleted is a matter of timing.
                events.retain(|e| e.reason.as_deref() != Some("Killing"));
            }
            let mut v = view(case, &Pod::default(), &events, n);
            v.retain(|k, _| k.starts_with("event "));
            views.push(v);
        }
        let differences = diff(&views[0], &views[1]);
        if differences.is_empty() || start.elapsed() > AGREE {
            return differences;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn wait_gone(client: &kube::Client, ns: &str, names: &[String]) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    loop {
        let mut left = Vec::new();
        for n in names {
            if pods.get_opt(n).await.map_err(|e| e.to_string())?.is_some() {
                left.push(n.clone());
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if start.elapsed() > SETTLE {
            return Err(format!("pods not deleted after {SETTLE:?}: {left:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------------------

#[test]
fn simulated_and_real_kubelet_report_the_same() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The control plane answers 500 to readiness probes while it starts.
                .unwrap_or_else(|_| "warn,kube_client::client::builder=off".into()),
        )
        .with_test_writer()
        .try_init();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run());
}

async fn run() {
    let cluster = LocalCluster::start(LocalClusterOptions::default())
        .await
        .expect("local control plane");
    let sims = cluster
        .start_nodes(1, |c| c.delete_node_on_stop = true)
        .await
        .expect("one simulated node");
    let real_nodes = RealNodes::start(
        &cluster,
        &RealNodesOptions {
            ..RealNodesOptions::new(1)
        },
    )
    .await;
    let mut real_nodes = match real_nodes {
        Ok(r) => r,
        Err(e) => {
            let _ = sims.stop().await;
            let _ = cluster.stop().await;
            panic!("one real node: {e:#}");
        }
    };
    let client = cluster.client();
    let sim = &sims.nodes()[0];
    let sim_name = sim.name().to_owned();
    let real_name = real_nodes.nodes()[0].name.clone();

    let outcome = differential(&cluster, &client, sim, &sim_name, &real_name).await;

    let left = tokio::task::spawn_blocking(move || real_nodes.stop())
        .await
        .expect("stopping the real node");
    sims.stop().await.expect("stopping the simulated node");
    cluster.stop().await.expect("stopping the control plane");
    assert_eq!(left, Vec::<String>::new(), "left behind by the real node");
    if let Err(report) = outcome {
        panic!("the simulated kubelet differs from the real one:\n{report}");
    }
}

async fn differential(
    cluster: &LocalCluster,
    client: &kube::Client,
    sim: &dra_e2e::node_sim::SimNode,
    sim_name: &str,
    real_name: &str,
) -> Result<(), String> {
    let ns = format!("diff-{:04x}", rand::random::<u16>());
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {
                "name": ns,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "privileged",
                    "pod-security.kubernetes.io/warn": "privileged",
                },
            }}))
            .expect("namespace"),
        )
        .await
        .map_err(|e| format!("creating namespace {ns}: {e}"))?;
    // Pods need the default ServiceAccount and (on a real kubelet) the root
    // CA ConfigMap their token volume projects.
    let start = Instant::now();
    loop {
        let sa = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
            .get_opt("default")
            .await
            .ok()
            .flatten();
        let ca = Api::<ConfigMap>::namespaced(client.clone(), &ns)
            .get_opt("kube-root-ca.crt")
            .await
            .ok()
            .flatten();
        if sa.is_some() && ca.is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "namespace {ns}: no default ServiceAccount or root CA"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let hosts = Arc::new(Hosts {
        sim: (
            sim_name.to_owned(),
            sim.root_dir().to_owned(),
            sim.cdi_dir(),
        ),
        real: real_name.to_owned(),
        remote: RemoteEnv::new(
            client.clone(),
            cluster.kube_config(),
            cluster.server_url().to_owned(),
            dra_e2e::cluster::proxy::NodeLayout {
                kubelet_root: dra_e2e::cluster::real_node::kubelet::ROOT_DIR.to_owned(),
                image: dra_e2e::cluster::remote::proxy_image(
                    &dra_e2e::cluster::real_node::proxy_image(),
                ),
                cdi_host_dir: dra_e2e::cluster::real_node::CDI_DIR.to_owned(),
                route: dra_e2e::cluster::proxy::HostRoute::PodAddress,
                fault: Default::default(),
            },
        ),
    });
    let mut driver = Driver::new(
        driver::Context {
            admin: client.clone(),
            admin_config: cluster.kube_config(),
            namespace: ns.clone(),
        },
        vec![sim_name.to_owned(), real_name.to_owned()],
        DriverOptions {
            resources: Resources::node_local(8),
            ..DriverOptions::default()
        },
        hosts.clone(),
        None,
    );
    let result = match driver.set_up().await {
        Ok(()) => cases_on_both(client, &ns, &driver, sim_name, real_name).await,
        Err(e) => Err(format!("setting up the driver: {e:#}")),
    };
    if let Err(e) = driver.tear_down().await {
        eprintln!("tearing down the driver: {e:#}");
    }
    if let Err(e) = hosts.remote.node_pods.remove().await {
        eprintln!("removing the node host pods: {e:#}");
    }
    let _ = Api::<DeviceClass>::all(client.clone())
        .delete(&format!("{ns}-class"), &DeleteParams::default())
        .await;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
    result
}

fn sides_of(case: &Case, sim_node: &str, real_node: &str) -> [Side; 2] {
    [
        Side {
            label: "simulated",
            node: sim_node.to_owned(),
            pod: format!("{}-sim", case.name),
        },
        Side {
            label: "real",
            node: real_node.to_owned(),
            pod: format!("{}-real", case.name),
        },
    ]
}

fn report_case(report: &mut String, title: &str, sides: &[Side; 2], differences: &[String]) {
    if !differences.is_empty() {
        report.push_str(&format!(
            "case {title} (pods {} on {}, {} on {}):\n{}\n",
            sides[0].pod,
            sides[0].node,
            sides[1].pod,
            sides[1].node,
            differences.join("\n")
        ));
    }
}

/// A pod's UID and how to normalise what was said about it.
type Remembered = (String, Normaliser);

/// A case, its pods, and what identifies them once they are gone.
type Pair<'a> = (&'a Case, [Side; 2], [Remembered; 2]);

/// What identifies each pod of a pair once it is gone: its UID and names.
async fn remember(
    client: &kube::Client,
    ns: &str,
    sides: &[Side; 2],
) -> Result<[Remembered; 2], String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pair = Vec::new();
    for side in sides {
        let pod = pods.get(&side.pod).await.map_err(|e| e.to_string())?;
        let n = normaliser_for(client, ns, side, &pod).await;
        pair.push((pod.metadata.uid.clone().unwrap_or_default(), n));
    }
    pair.try_into().map_err(|_| "two sides".to_owned())
}

/// Deletes the pods of the pairs and compares the events each kubelet
/// wrote until they were gone.
async fn delete_and_compare(
    client: &kube::Client,
    ns: &str,
    pairs: Vec<Pair<'_>>,
    report: &mut String,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let names: Vec<String> = pairs
        .iter()
        .flat_map(|(_, sides, _)| sides.iter().map(|s| s.pod.clone()))
        .collect();
    for n in &names {
        pods.delete(n, &DeleteParams::default())
            .await
            .map_err(|e| format!("deleting pod {n}: {e}"))?;
    }
    wait_gone(client, ns, &names).await?;
    for (case, sides, uids) in &pairs {
        let differences = compare_deletion_events(client, ns, case, uids).await;
        report_case(
            report,
            &format!("{} after deletion", case.name),
            sides,
            &differences,
        );
    }
    Ok(())
}

async fn cases_on_both(
    client: &kube::Client,
    ns: &str,
    driver: &Driver,
    sim_node: &str,
    real_node: &str,
) -> Result<(), String> {
    let class = format!("{ns}-class");
    Api::<DeviceClass>::all(client.clone())
        .create(
            &PostParams::default(),
            &objects::device_class(&class, &driver.name, None, None).map_err(|e| e.to_string())?,
        )
        .await
        .map_err(|e| format!("creating the DeviceClass: {e}"))?;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), ns);
    let default = ClaimShape::default_for(&class, &driver.name);
    let mut missing = ClaimShape::default_for(&class, &driver.name);
    missing.parameters = Some(json!({ "a": "b", CDI_MISSING_KEY: "yes" }));
    for (name, shape) in [(TEMPLATE, default), (CDI_MISSING_TEMPLATE, missing)] {
        let spec = shape.spec().map_err(|e| e.to_string())?;
        templates
            .create(&PostParams::default(), &objects::claim_template(name, spec))
            .await
            .map_err(|e| format!("creating template {name}: {e}"))?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let create = |case: &Case| {
        let sides = sides_of(case, sim_node, real_node);
        let pods = pods.clone();
        let built: Vec<Pod> = sides
            .iter()
            .map(|s| pod_for(case, &s.pod, &s.node))
            .collect();
        async move {
            for pod in built {
                pods.create(&PostParams::default(), &pod)
                    .await
                    .map_err(|e| {
                        format!(
                            "creating pod {}: {e}",
                            pod.metadata.name.clone().unwrap_or_default()
                        )
                    })?;
            }
            Ok::<_, String>(sides)
        }
    };
    let mut report = String::new();

    // Each case in the state it is about, compared side by side.
    let cases = cases();
    let mut all_sides = Vec::new();
    for case in &cases {
        all_sides.push(create(case).await?);
    }
    let compared = futures::future::join_all(
        cases
            .iter()
            .zip(&all_sides)
            .map(|(case, sides)| compare(client, ns, case, sides, false)),
    )
    .await;
    let mut pairs = Vec::new();
    for ((case, sides), differences) in cases.iter().zip(all_sides).zip(compared) {
        report_case(&mut report, case.name, &sides, &differences);
        let uids = remember(client, ns, &sides).await?;
        pairs.push((case, sides, uids));
    }
    // Deleted: what each kubelet said while stopping the pod.
    delete_and_compare(client, ns, pairs, &mut report).await?;

    // A prepare that fails, then works: the kubelet keeps trying.
    let failing = Case {
        name: "prepare-fails",
        claim: Claim::Default,
        init: None,
        command: None,
        restart_policy: "Never",
        settled: |_, e| has_event(e, "FailedPrepareDynamicResources"),
        restarts_vary: false,
    };
    let recovered = Case {
        name: "prepare-recovers",
        init: None,
        settled: |p, _| phase(p) == "Running" && ready(p),
        ..failing
    };
    let methods = [method::V1_PREPARE, method::V1BETA1_PREPARE];
    for node in [sim_node, real_node] {
        for m in methods {
            driver.fail(node, m, true);
        }
    }
    let sides = create(&failing).await?;
    let differences = compare(client, ns, &failing, &sides, false).await;
    report_case(&mut report, failing.name, &sides, &differences);
    for node in [sim_node, real_node] {
        for m in methods {
            driver.fail(node, m, false);
        }
    }
    let differences = compare(client, ns, &recovered, &sides, false).await;
    report_case(&mut report, recovered.name, &sides, &differences);
    let uids = remember(client, ns, &sides).await?;
    delete_and_compare(client, ns, vec![(&recovered, sides, uids)], &mut report).await?;

    if report.is_empty() {
        Ok(())
    } else {
        Err(report)
    }
}
