//! What a DaemonSet driver sees of a real node, compared with a standard
//! (kubeadm or kind) node: the kubelet's directories at their standard
//! paths, the CDI standard's directories private to the node, `/dev`,
//! `/sys`, the node's network, mounts that may propagate, and the API server
//! at the `kubernetes` Service. Checked from pods on two nodes, as a
//! driver's pods would have them.
use std::path::Path;
use std::time::Duration;

use dra_e2e::cluster::local::{LocalCluster, LocalClusterOptions};
use dra_e2e::cluster::real_node::{RealNodes, RealNodesOptions};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, LogParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

use super::pod_api;
use crate::common;

const DEADLINE: Duration = Duration::from_secs(120);

/// Host paths a DRA or device-plugin driver's pods mount, at the same path
/// inside.
const HOST_PATHS: [&str; 5] = [
    "/var/lib/kubelet",
    "/var/run/cdi",
    "/etc/cdi",
    "/dev",
    "/sys",
];

fn driver_pod(name: &str, node: &str) -> Pod {
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for (i, path) in HOST_PATHS.iter().enumerate() {
        volumes.push(json!({ "name": format!("v{i}"), "hostPath": { "path": path } }));
        mounts.push(json!({ "name": format!("v{i}"), "mountPath": path }));
    }
    // As CSI and some DRA drivers mount their plugin directory: the kubelet
    // refuses Bidirectional unless the node's mounts are shared.
    volumes.push(json!({
        "name": "plugins",
        "hostPath": { "path": "/var/lib/kubelet/plugins/standard.test", "type": "DirectoryOrCreate" },
    }));
    mounts.push(json!({
        "name": "plugins",
        "mountPath": "/plugin",
        "mountPropagation": "Bidirectional",
    }));
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "hostNetwork": true,
            "containers": [{
                "name": "c",
                "image": dra_e2e::cluster::images::BUSYBOX_IMAGE,
                "command": ["sh", "-c", "trap exit TERM; while true; do sleep 1; done"],
                "securityContext": { "privileged": true },
                "volumeMounts": mounts,
            }],
            "volumes": volumes,
            "terminationGracePeriodSeconds": 1,
        },
    }))
    .unwrap()
}

/// Runs `script` with `sh -c` in the pod; returns its stdout and stderr.
async fn sh(pods: &Api<Pod>, pod: &str, script: &str) -> String {
    let (out, err) = pod_api::exec(pods, pod, &["sh", "-c", script], true).await;
    format!("{out}{err}")
}

/// The image of the in-cluster check's pods: the runner under test (not
/// the agent of the proxy image, which has no API client).
const RUNNER_IMAGE: &str = "localhost/dra-e2e/runner:test";
const RUNNER_PATH: &str = "/usr/local/bin/dra-e2e";

/// A local control plane with two real nodes, which also import an image
/// of the runner under test ([`RUNNER_IMAGE`]).
async fn two_real_nodes() -> (LocalCluster, RealNodes) {
    let cluster = LocalCluster::start(LocalClusterOptions::default())
        .await
        .expect("local control plane");
    let busybox = dra_e2e::cluster::real_node::binaries::NodeBinaries::find(None)
        .expect("node binaries (hack/build-node.sh)")
        .busybox;
    let archive = cluster.dir().join("runner-image.tar");
    let spec = dra_e2e::cluster::images::builtin::with_program(
        RUNNER_IMAGE,
        Path::new(common::bin()),
        RUNNER_PATH,
        &busybox,
    )
    .expect("the runner's image");
    dra_e2e::cluster::images::write_archive(&spec, &archive).expect("writing the runner's image");
    let options = RealNodesOptions {
        extra_archives: vec![archive],
        ..RealNodesOptions::new(2)
    };
    let nodes = RealNodes::start(&cluster, &options)
        .await
        .expect("two real nodes");
    (cluster, nodes)
}

/// Stops the nodes and the control plane; fails when anything is left.
async fn stop(cluster: LocalCluster, mut nodes: RealNodes) {
    let left = tokio::task::spawn_blocking(move || nodes.stop())
        .await
        .unwrap();
    assert_eq!(left, Vec::<String>::new());
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_driver_pod_sees_a_real_node_as_a_standard_node() {
    let marker = format!("standard-{:08x}", rand::random::<u32>());
    let (cluster, nodes) = two_real_nodes().await;
    let info: Vec<(String, String)> = nodes
        .nodes()
        .iter()
        .map(|n| (n.name.clone(), n.net.node_ip.to_string()))
        .collect();
    let client = cluster.client();
    let pods = pod_api::namespace(&client, "standard-node-test").await;
    for (i, (node, _)) in info.iter().enumerate() {
        pods.create(&PostParams::default(), &driver_pod(&format!("d{i}"), node))
            .await
            .unwrap();
    }
    for i in 0..info.len() {
        let name = format!("d{i}");
        tokio::time::timeout(
            DEADLINE,
            await_condition(pods.clone(), &name, conditions::is_pod_running()),
        )
        .await
        .unwrap_or_else(|_| {
            panic!("pod {name} (privileged, hostPath, Bidirectional) not running in time")
        })
        .unwrap();
    }

    for (i, (node, ip)) in info.iter().enumerate() {
        let pod = format!("d{i}");
        // The kubelet's directories and sockets at their standard paths.
        let out = sh(
            &pods,
            &pod,
            "for d in plugins plugins_registry pod-resources device-plugins pods; do \
               test -d /var/lib/kubelet/$d && echo dir-$d; done; \
             test -S /var/lib/kubelet/pod-resources/kubelet.sock && echo sock-pod-resources; \
             test -S /var/lib/kubelet/device-plugins/kubelet.sock && echo sock-device-plugins; \
             test -c /dev/null && echo dev; test -d /sys/class/net && echo sys; \
             ip -4 -o addr",
        )
        .await;
        for want in [
            "dir-plugins",
            "dir-plugins_registry",
            "dir-pod-resources",
            "dir-device-plugins",
            "dir-pods",
            "sock-pod-resources",
            "sock-device-plugins",
            "dev",
            "sys",
        ] {
            assert!(
                out.lines().any(|l| l == want),
                "{node}: no {want} in\n{out}"
            );
        }
        // hostNetwork is the node's network: its InternalIP is on a link.
        assert!(
            out.contains(&format!("inet {ip}/")),
            "{node} ({ip}):\n{out}"
        );

        // Both CDI directories are writable and the node's own.
        let out = sh(
            &pods,
            &pod,
            &format!(
                "echo {{}} > /var/run/cdi/{marker}-{i}.json && echo {{}} > /etc/cdi/{marker}-{i}.json && ls /var/run/cdi /etc/cdi"
            ),
        )
        .await;
        assert_eq!(
            out.matches(&format!("{marker}-{i}.json")).count(),
            2,
            "{node}:\n{out}"
        );
        assert!(
            !out.contains(&format!("{marker}-{}.json", 1 - i)),
            "{node} sees the other node's CDI specs:\n{out}"
        );
    }
    for dir in ["/etc/cdi", "/run/cdi", "/var/run/cdi"] {
        for i in 0..2 {
            let f = Path::new(dir).join(format!("{marker}-{i}.json"));
            assert!(!f.exists(), "{} reached the host", f.display());
        }
    }

    stop(cluster, nodes).await;
}

/// A pod that runs `dra-e2e in-cluster-check` once: client-go's in-cluster
/// config (the Service's address from the env the kubelet sets, the
/// ServiceAccount's token, `ca.crt` as the only trust root), `GET /version`
/// and a SelfSubjectReview.
fn in_cluster_pod(name: &str, node: &str, host_network: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "hostNetwork": host_network,
            "restartPolicy": "Never",
            "containers": [{
                "name": "c",
                "image": RUNNER_IMAGE,
                "command": [RUNNER_PATH, "in-cluster-check"],
            }],
            "terminationGracePeriodSeconds": 1,
        },
    }))
    .unwrap()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

/// On every node, a pod on the pod network and a hostNetwork pod reach the
/// API server as a DaemonSet driver does with client-go's in-cluster
/// config: `https://10.0.0.1:443` from `KUBERNETES_SERVICE_HOST` and
/// `_PORT`, the certificate verified against the mounted `ca.crt` for that
/// address, the token accepted (the SelfSubjectReview names the pod's
/// ServiceAccount).
///
/// What each missing piece shows here (the pod fails, its log says why):
/// - no DNAT in PREROUTING: the pod-network pods' connections leave for the
///   host, which has no 10.0.0.1: `GET https://10.0.0.1/version` fails with a
///   connect timeout;
/// - no DNAT in OUTPUT: the same for the hostNetwork pods;
/// - no MASQUERADE in POSTROUTING: the pod-network pods' SYN reaches the
///   relay from a 10.244.x.y the host has no route back to, so the reply is
///   lost: a connect timeout again, pod-network pods only;
/// - no IP SAN 10.0.0.1 on the API server's certificate: both pods fail TLS
///   verification (rustls: the certificate is not valid for 10.0.0.1).
#[tokio::test(flavor = "multi_thread")]
async fn pods_reach_the_api_server_at_the_kubernetes_service() {
    let (cluster, nodes) = two_real_nodes().await;
    let node_names: Vec<String> = nodes.nodes().iter().map(|n| n.name.clone()).collect();
    let client = cluster.client();
    let ns = "in-cluster-test";
    let pods = pod_api::namespace(&client, ns).await;
    // Admission gives pods the `default` account, which the controller
    // manager creates a moment after the namespace.
    tokio::time::timeout(
        DEADLINE,
        await_condition(
            Api::<ServiceAccount>::namespaced(client.clone(), ns),
            "default",
            |sa: Option<&ServiceAccount>| sa.is_some(),
        ),
    )
    .await
    .expect("the namespace's default ServiceAccount in time")
    .unwrap();

    let mut names = Vec::new();
    for (i, node) in node_names.iter().enumerate() {
        for (kind, host_network) in [("pod", false), ("host", true)] {
            let name = format!("{kind}-network-{i}");
            pods.create(
                &PostParams::default(),
                &in_cluster_pod(&name, node, host_network),
            )
            .await
            .unwrap();
            names.push((name, node.clone()));
        }
    }
    // Port 443 is implied, as client-go leaves it out too.
    let service = format!(
        "server: https://{}",
        dra_e2e::cluster::host::services::KUBERNETES_SERVICE_IP
    );
    let user = format!("user: system:serviceaccount:{ns}:default");
    for (name, node) in &names {
        let done = tokio::time::timeout(
            DEADLINE,
            await_condition(pods.clone(), name, |p: Option<&Pod>| {
                p.and_then(phase)
                    .is_some_and(|ph| ph == "Succeeded" || ph == "Failed")
            }),
        )
        .await
        .unwrap_or_else(|_| panic!("pod {name} on {node} did not finish in time"))
        .unwrap();
        let ended = done.as_ref().and_then(phase).unwrap_or_default().to_owned();
        let logs = pods
            .logs(name, &LogParams::default())
            .await
            .unwrap_or_else(|e| format!("(no logs: {e})"));
        assert_eq!(ended, "Succeeded", "pod {name} on {node}:\n{logs}");
        assert!(
            logs.lines().any(|l| l.trim_end_matches('/') == service),
            "pod {name} on {node} dialled another address than {service:?}:\n{logs}"
        );
        for want in ["version: v", user.as_str()] {
            assert!(
                logs.lines().any(|l| l.starts_with(want)),
                "pod {name} on {node}: no {want:?} in\n{logs}"
            );
        }
    }

    stop(cluster, nodes).await;
}
