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
mod cases;
mod hosts;
mod normalise;
mod reading;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dra_e2e::cluster::local::{LocalCluster, LocalClusterOptions};
use dra_e2e::cluster::real_node::{RealNodes, RealNodesOptions};
use dra_e2e::cluster::remote::RemoteEnv;
use dra_e2e::ground::objects::{self, ClaimShape};
use dra_e2e::harness::driver::{self, Driver, DriverOptions, Resources};
use dra_e2e::proto::method;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use cases::{CDI_MISSING_TEMPLATE, Case, Claim, TEMPLATE, cases, has_event, phase, pod_for, ready};
use hosts::Hosts;
use normalise::Normaliser;
use reading::{Side, compare, compare_deletion_events, normaliser_for, wait_gone};

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
