//! The Node object of a simulated node and its Lease heartbeat.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::error::NodeSimError;

/// What the Node object says about the node.
#[derive(Debug, Clone)]
pub struct NodeShape {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub address: IpAddr,
    pub pod_cidr: Option<String>,
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    pub kubelet_version: String,
    /// `status.declaredFeatures`: what this kubelet supports beyond its
    /// version, for the scheduler to place pods that need it.
    pub declared_features: Vec<String>,
}

/// The node feature the kubelet declares when its `DRAOptionalNodeOperations`
/// gate is on.
pub const OPTIONAL_NODE_OPERATIONS: &str = "DRAOptionalNodeOperations";

fn kube_err(node: &str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> NodeSimError {
    let node = node.to_owned();
    let action = action.into();
    move |source| NodeSimError::Kube {
        node,
        action,
        source,
    }
}

/// Kubernetes' name for the machine architecture.
pub fn kube_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn random_hex() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Creates the Node (or adopts an existing one of that name) and reports it
/// Ready. Returns the Node as stored.
pub async fn register(client: &kube::Client, shape: &NodeShape) -> Result<Node, NodeSimError> {
    let api: Api<Node> = Api::all(client.clone());
    let name = &shape.name;
    let mut node = Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(shape.labels.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    if let Some(cidr) = &shape.pod_cidr {
        node.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            pod_cidr: Some(cidr.clone()),
            pod_cidrs: Some(vec![cidr.clone()]),
            ..Default::default()
        });
    }
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            // Left over from an earlier run with the same name: take it over.
            let patch = json!({"metadata": {"labels": shape.labels}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(kube_err(name, "update existing Node"))?;
        }
        Err(e) => return Err(kube_err(name, "create Node")(e)),
    }
    let now = jiff::Timestamp::now().to_string();
    let resources = json!({
        "cpu": Quantity(shape.cpu.clone()),
        "memory": Quantity(shape.memory.clone()),
        "pods": Quantity(shape.pods.clone()),
        "ephemeral-storage": "100Gi",
    });
    let condition = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": ty, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    let mut status = json!({
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "phase": "Running",
            "conditions": [
                condition("Ready", "True", "KubeletReady", "simulated kubelet is posting ready status"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "simulated"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "simulated"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "simulated"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": shape.address.to_string()},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": random_hex(),
                "systemUUID": random_hex(),
                "bootID": random_hex(),
                "kernelVersion": "simulated",
                "osImage": "dra-e2e simulated node",
                "containerRuntimeVersion": format!("dra-e2e-sim://{}", env!("CARGO_PKG_VERSION")),
                "kubeletVersion": shape.kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": kube_arch(),
            },
        }
    });
    if !shape.declared_features.is_empty() {
        status["status"]["declaredFeatures"] = json!(shape.declared_features);
    }
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(kube_err(name, "report Node status"))
}

/// Keeps `kube-node-lease/<node>` renewed every `interval` until `cancel`,
/// and the Node's Ready condition `True`: the node lifecycle controller sets
/// it `Unknown` when the Lease went unrenewed (the node's link was cut), and
/// a kubelet that finds its status not what it posted posts it again, as
/// the real one does every `nodeStatusUpdateFrequency`. Failures are logged
/// and retried on the next tick: a missed renewal only matters after the
/// lease duration.
pub async fn keep_lease(
    client: kube::Client,
    node: Node,
    interval: Duration,
    duration: Duration,
    cancel: CancellationToken,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let api: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let name = node.name_any();
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: name.clone(),
        uid: node.uid().unwrap_or_default(),
        ..Default::default()
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some("kube-node-lease".into()),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.clone()),
                lease_duration_seconds: Some(duration.as_secs().max(1) as i32),
                renew_time: Some(MicroTime(jiff::Timestamp::now())),
                ..Default::default()
            }),
        };
        let pp = PatchParams::apply("dra-e2e-node-sim").force();
        match api.patch(&name, &pp, &Patch::Apply(&lease)).await {
            Ok(_) => debug!("lease renewed"),
            Err(e) => warn!(error = %e, "renewing node lease failed"),
        }
        if let Err(e) = post_ready_again(&nodes, &name).await {
            warn!(error = %e, "posting the Node's Ready condition again failed");
        }
    }
}

/// Posts the Node's Ready condition as `True` again when it is not.
async fn post_ready_again(nodes: &Api<Node>, name: &str) -> Result<(), kube::Error> {
    let node = nodes.get_status(name).await?;
    let ready = dra_e2e_kube::node_ready::ready_status(&node);
    if ready == Some("True") {
        return Ok(());
    }
    let now = jiff::Timestamp::now().to_string();
    let status = json!({
        "status": {
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "simulated kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        }
    });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
        .await?;
    info!(was = ?ready, "posted the Node's Ready condition again");
    Ok(())
}

/// Deletes the Node and its Lease; objects already gone are fine.
pub async fn delete(client: &kube::Client, name: &str) -> Result<(), NodeSimError> {
    let gone_ok = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    gone_ok(
        leases
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )
    .map_err(kube_err(name, "delete node Lease"))?;
    let nodes: Api<Node> = Api::all(client.clone());
    gone_ok(
        nodes
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )
    .map_err(kube_err(name, "delete Node"))
}
