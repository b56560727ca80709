//! Device health as scenarios check it: the pool a reported device is in,
//! the health stream a kubelet's version opens, and what the kubelet shows
//! of a pod's devices in its status (`allocatedResourcesStatus`).
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};

use dra_e2e_kube::node_ready;
use dra_e2e_kube::wait::{self, Check, WaitError};
use dra_e2e_plugin::HealthApi;

use crate::driver::Driver;

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("listing the slices of driver {driver} on node {node}")]
    ListSlices {
        driver: String,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("driver {driver} publishes no device {device:?} on node {node}")]
    NoDevice {
        driver: String,
        device: String,
        node: String,
    },
    #[error(
        "driver {driver} publishes device {device:?} on node {node} in several pools: {pools:?}"
    )]
    SeveralPools {
        driver: String,
        device: String,
        node: String,
        pools: Vec<String>,
    },
    #[error("reading node {node}")]
    ReadNode {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("node {node} reports kubelet version {version:?}")]
    KubeletVersion { node: String, version: String },
    #[error(
        "the kubelet {version} on {node} should stream health from {driver} through {want} only; \
         streams opened: {opened}"
    )]
    Streams {
        version: String,
        node: String,
        driver: String,
        want: HealthApi,
        opened: String,
    },
}

/// The pool of `device` among `driver`'s slices on `node`.
pub async fn pool_of_device(
    client: &kube::Client,
    driver: &str,
    node: &str,
    device: &str,
) -> Result<String, HealthError> {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let list = slices
        .list(&ListParams::default().fields(&format!("spec.driver={driver},spec.nodeName={node}")))
        .await
        .map_err(|source| HealthError::ListSlices {
            driver: driver.to_owned(),
            node: node.to_owned(),
            source,
        })?;
    pool_among(&list.items, driver, node, device)
}

/// The one pool of `device` among `slices` (those of `driver` on `node`).
fn pool_among(
    slices: &[ResourceSlice],
    driver: &str,
    node: &str,
    device: &str,
) -> Result<String, HealthError> {
    let mut pools: Vec<String> = slices
        .iter()
        .filter(|s| s.spec.devices.iter().flatten().any(|d| d.name == device))
        .map(|s| s.spec.pool.name.clone())
        .collect();
    pools.dedup();
    match pools.as_slice() {
        [pool] => Ok(pool.clone()),
        [] => Err(HealthError::NoDevice {
            driver: driver.to_owned(),
            device: device.to_owned(),
            node: node.to_owned(),
        }),
        _ => Err(HealthError::SeveralPools {
            driver: driver.to_owned(),
            device: device.to_owned(),
            node: node.to_owned(),
            pools,
        }),
    }
}

/// Checks that the kubelet on `node` opened `driver`'s health stream
/// through the API of its version (from its Node: v1 from 1.37 on,
/// v1alpha1 before) and through no other.
pub async fn stream_of_kubelet_version(
    client: &kube::Client,
    driver: &Driver,
    node: &str,
) -> Result<(), HealthError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let n = nodes
        .get(node)
        .await
        .map_err(|source| HealthError::ReadNode {
            node: node.to_owned(),
            source,
        })?;
    streams_of_version(&n, node, &driver.name, |api| {
        driver.call_count(node, api.watch_method())
    })
}

/// The check of [`stream_of_kubelet_version`] over Node `n` and the count
/// of streams opened through each health API.
fn streams_of_version(
    n: &Node,
    node: &str,
    driver: &str,
    opened: impl Fn(HealthApi) -> u64,
) -> Result<(), HealthError> {
    let version = n
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default();
    let Some((major, minor)) = node_ready::kubelet_version(n) else {
        return Err(HealthError::KubeletVersion {
            node: node.to_owned(),
            version,
        });
    };
    let want = HealthApi::of_kubelet(major, minor);
    if HealthApi::ALL
        .iter()
        .all(|&api| (api == want) == (opened(api) > 0))
    {
        return Ok(());
    }
    Err(HealthError::Streams {
        version,
        node: node.to_owned(),
        driver: driver.to_owned(),
        want,
        opened: HealthApi::ALL
            .iter()
            .map(|&a| format!("{a}: {}", opened(a)))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// `container: claim entry resourceID`, health and message for every
/// device the kubelet lists for the pod's claims.
fn device_statuses(p: &Pod) -> Vec<(String, String, String)> {
    let status = p.status.as_ref();
    let containers: Vec<&ContainerStatus> = status
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .collect();
    let mut out = Vec::new();
    for c in containers {
        for entry in c.allocated_resources_status.iter().flatten() {
            if !entry.name.starts_with("claim:") {
                continue;
            }
            for r in entry.resources.iter().flatten() {
                out.push((
                    format!("{}: {} {}", c.name, entry.name, r.resource_id),
                    r.health.clone().unwrap_or_default(),
                    r.message.clone().unwrap_or_default(),
                ));
            }
        }
    }
    out
}

/// Watches pod `pod` until the kubelet reports every device of its claims
/// with health `want` (`Healthy`, `Unhealthy`, `Unknown`) and, when given,
/// `message`.
pub async fn devices_reported(
    pods: &Api<Pod>,
    pod: &str,
    want: &str,
    message: Option<&str>,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = match message {
        Some(m) => format!("the devices of pod {pod} to be reported {want} with message {m:?}"),
        None => format!("the devices of pod {pod} to be reported {want}"),
    };
    wait::pod(pods, pod, &what, timeout, |p| reported(p, want, message)).await
}

/// The named condition of [`devices_reported`].
fn reported(p: Option<&Pod>, want: &str, message: Option<&str>) -> Check<()> {
    let Some(p) = p else {
        return Check::Pending("pod does not exist".to_owned());
    };
    let seen = device_statuses(p);
    let ok = !seen.is_empty()
        && seen
            .iter()
            .all(|(_, h, m)| h == want && message.is_none_or(|want_m| m == want_m));
    if ok {
        Check::Done(())
    } else if seen.is_empty() {
        Check::Pending("no allocatedResourcesStatus for the pod's claims".to_owned())
    } else {
        Check::Pending(
            seen.iter()
                .map(|(at, h, m)| {
                    if m.is_empty() {
                        format!("{at}={h}")
                    } else {
                        format!("{at}={h} ({m})")
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(pool: &str, devices: &[&str]) -> ResourceSlice {
        let devices: Vec<_> = devices
            .iter()
            .map(|d| serde_json::json!({ "name": d }))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": format!("s-{pool}") },
            "spec": { "driver": "d", "nodeName": "n", "devices": devices,
                "pool": { "name": pool, "generation": 1, "resourceSliceCount": 1 } },
        }))
        .unwrap()
    }

    #[test]
    fn a_device_is_in_one_pool_or_the_error_says_why_not() {
        let slices = [slice("a", &["dev-0", "dev-1"]), slice("b", &["dev-2"])];
        assert_eq!(pool_among(&slices, "d", "n", "dev-2").unwrap(), "b");
        let e = pool_among(&slices, "d", "n", "dev-9").unwrap_err();
        assert_eq!(
            e.to_string(),
            "driver d publishes no device \"dev-9\" on node n"
        );
        let twice = [slice("a", &["dev-0"]), slice("b", &["dev-0"])];
        assert!(matches!(
            pool_among(&twice, "d", "n", "dev-0"),
            Err(HealthError::SeveralPools { .. })
        ));
    }

    fn node(version: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "n" },
            "status": { "nodeInfo": { "kubeletVersion": version, "architecture": "", "bootID": "",
                "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                "machineID": "", "operatingSystem": "", "osImage": "", "systemUUID": "" } },
        }))
        .unwrap()
    }

    #[test]
    fn the_kubelet_streams_through_its_versions_api_only() {
        let only = |want: HealthApi| move |a: HealthApi| u64::from(a == want);
        assert!(streams_of_version(&node("v1.37.2"), "n", "d", only(HealthApi::V1)).is_ok());
        assert!(streams_of_version(&node("v1.36.0"), "n", "d", only(HealthApi::V1alpha1)).is_ok());
        let e =
            streams_of_version(&node("v1.37.2"), "n", "d", only(HealthApi::V1alpha1)).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("through v1 only; streams opened: v1: 0, v1alpha1: 1"),
            "{e}"
        );
        assert!(matches!(
            streams_of_version(&node("nonsense"), "n", "d", only(HealthApi::V1)),
            Err(HealthError::KubeletVersion { .. })
        ));
    }

    fn pod(resources: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p" },
            "status": { "containerStatuses": [{ "name": "c", "image": "i", "imageID": "",
                "ready": true, "restartCount": 0,
                "allocatedResourcesStatus": [{ "name": "claim:x", "resources": resources }] }] },
        }))
        .unwrap()
    }

    #[test]
    fn every_device_must_have_the_health_and_message() {
        let p = pod(serde_json::json!([
            { "resourceID": "d/p/dev-0", "health": "Unhealthy", "message": "hot" },
        ]));
        assert!(matches!(
            reported(Some(&p), "Unhealthy", None),
            Check::Done(())
        ));
        assert!(matches!(
            reported(Some(&p), "Unhealthy", Some("hot")),
            Check::Done(())
        ));
        match reported(Some(&p), "Healthy", None) {
            Check::Pending(seen) => assert_eq!(seen, "c: claim:x d/p/dev-0=Unhealthy (hot)"),
            other => panic!("expected pending, got {other:?}"),
        }
        assert!(matches!(
            reported(Some(&pod(serde_json::json!([]))), "Healthy", None),
            Check::Pending(_)
        ));
        assert!(matches!(reported(None, "Healthy", None), Check::Pending(_)));
    }
}
