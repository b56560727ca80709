//! A driver's ResourceSlices as the API server has them, as scenarios check
//! them: node-local slices one per node with exactly their devices, an
//! all-nodes pool's one slice and its recreation, slices unchanged since
//! noted, the slice holding one device; and ([`controller_round`])
//! upstream's ResourceSlice controller check, start to end.
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use dra_e2e_kube::dynamic::Mismatch;
use dra_e2e_kube::wait::{self, Check, WaitError};

use crate::driver::{Driver, DriverError, Resources, slices as driver_slices};

pub mod controller_round;

#[derive(Debug, thiserror::Error)]
pub enum SliceError {
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error(transparent)]
    Wait(#[from] WaitError),
    #[error("{action}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("{driver} has no all-nodes pool {pool:?}")]
    NoAllNodesPool { driver: String, pool: String },
    #[error("the devices of pool {pool} as JSON")]
    Json {
        pool: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "expected the driver's slices to be unchanged.\nnoted:    {noted}\nobserved: {observed}"
    )]
    Changed { noted: String, observed: String },
    #[error(
        "driver {driver} has no slice with device {device:?} on {node} ({slices} slices there)"
    )]
    NoSliceWithDevice {
        driver: String,
        device: String,
        node: String,
        slices: usize,
    },
    #[error("the slice {slice} of {driver} on {node}: {mismatch}")]
    Differs {
        slice: String,
        driver: String,
        node: String,
        mismatch: Box<Mismatch>,
    },
    /// What is wrong, said whole (a slice controller's round).
    #[error("{0}")]
    Problem(String),
}

fn kube_err(action: String) -> impl FnOnce(kube::Error) -> SliceError {
    move |source| SliceError::Kube { action, source }
}

/// How `got` differs from the devices `want` (as JSON), device by device:
/// a device with the right name but attributes, capacity or taints of its
/// own is not the one expected.
pub fn device_problem(got: &[Device], want: &[Value]) -> Option<String> {
    let got: Vec<Value> = got
        .iter()
        .map(|d| serde_json::to_value(d).unwrap_or_default())
        .collect();
    if got.len() != want.len() {
        return Some(format!(
            "{} devices, expected {}: {}",
            got.len(),
            want.len(),
            Value::from(got)
        ));
    }
    got.iter()
        .zip(want)
        .find(|(g, w)| g != w)
        .map(|(g, w)| format!("device {g}, expected {w}"))
}

/// What is wrong with the node-local slices of `driver` (upstream's
/// "must manage ResourceSlices" expectations: one slice per node, owned by
/// its Node, in the node's own pool of one slice, with exactly `devices`
/// by name), or `None` when all is right.
pub async fn node_local_problems(
    client: &kube::Client,
    driver: &Driver,
    devices: &[String],
) -> Result<Option<String>, SliceError> {
    let slices = driver.slices().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    for node in driver.nodenames() {
        let mine: Vec<&ResourceSlice> = slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(node))
            .collect();
        let [s] = mine[..] else {
            return Ok(Some(format!(
                "node {node} has {} slices of the driver, expected 1",
                mine.len()
            )));
        };
        let n = nodes
            .get(node)
            .await
            .map_err(kube_err(format!("reading node {node}")))?;
        if let Some(p) = node_slice_problem(s, node, n.metadata.uid.as_deref(), devices) {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// What is wrong with `s`, the one slice of node `node` (whose UID is
/// `node_uid`), for [`node_local_problems`].
fn node_slice_problem(
    s: &ResourceSlice,
    node: &str,
    node_uid: Option<&str>,
    devices: &[String],
) -> Option<String> {
    let spec = &s.spec;
    let owner_ok = s.metadata.owner_references.as_ref().is_some_and(|o| {
        o.len() == 1
            && o[0].api_version == "v1"
            && o[0].kind == "Node"
            && o[0].name == node
            && Some(o[0].uid.as_str()) == node_uid
            && o[0].controller == Some(true)
            && o[0].block_owner_deletion.is_none()
    });
    if !owner_ok {
        return Some(format!(
            "slice of node {node} has owner references {:?}",
            s.metadata.owner_references
        ));
    }
    if spec.node_selector.is_some() || spec.all_nodes.is_some_and(|a| a) {
        return Some(format!(
            "slice of node {node} has a node selector or allNodes"
        ));
    }
    if spec.pool.name != node || spec.pool.resource_slice_count != 1 {
        return Some(format!(
            "slice of node {node} has pool {:?} with count {}",
            spec.pool.name, spec.pool.resource_slice_count
        ));
    }
    let want: Vec<Value> = devices.iter().map(|d| json!({ "name": d })).collect();
    device_problem(spec.devices.as_deref().unwrap_or_default(), &want)
        .map(|p| format!("slice of node {node}: {p}"))
}

/// Polls until the driver's node-local slices are as
/// [`node_local_problems`] wants them.
pub async fn one_per_node(
    client: &kube::Client,
    driver: &Driver,
    devices: &[String],
    timeout: Duration,
) -> Result<(), WaitError> {
    wait::poll(
        "the driver's node-local slices",
        timeout,
        Duration::from_millis(200),
        || async {
            match node_local_problems(client, driver, devices).await {
                Ok(None) => Check::Done(()),
                Ok(Some(p)) => Check::Pending(p),
                Err(e) => Check::Fail(e.to_string()),
            }
        },
    )
    .await
}

/// Checks for `duration` that the driver keeps its node-local slices as
/// they are now, with the devices of its first slice.
pub async fn keep_publishing(
    client: &kube::Client,
    driver: &Driver,
    duration: Duration,
) -> Result<(), SliceError> {
    let devices: Vec<String> = driver
        .slices()
        .await?
        .first()
        .and_then(|s| s.spec.devices.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.name)
        .collect();
    wait::consistently(
        "the driver's slices to stay as they are",
        duration,
        Duration::from_secs(1),
        || async {
            match node_local_problems(client, driver, &devices).await {
                Ok(None) => Ok(()),
                Ok(Some(p)) => Err(p),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await?;
    Ok(())
}

/// The driver's slices, sorted by name, as [`unchanged`] compares them.
pub async fn sorted(driver: &Driver) -> Result<Vec<ResourceSlice>, DriverError> {
    let mut slices = driver.slices().await?;
    slices.sort_by_key(|s| s.metadata.name.clone());
    Ok(slices)
}

/// The fields that matter, without the server's bookkeeping.
fn essence(s: &ResourceSlice) -> Value {
    json!({
        "name": s.metadata.name,
        "uid": s.metadata.uid,
        "spec": s.spec,
    })
}

/// Whether the slices `now` are those `noted` (both sorted by name), by
/// name, UID and spec.
fn same(noted: &[ResourceSlice], now: &[ResourceSlice]) -> Result<(), SliceError> {
    let a: Vec<_> = noted.iter().map(essence).collect();
    let b: Vec<_> = now.iter().map(essence).collect();
    if a != b {
        return Err(SliceError::Changed {
            noted: serde_json::to_string(&a).unwrap_or_default(),
            observed: serde_json::to_string(&b).unwrap_or_default(),
        });
    }
    Ok(())
}

/// Whether the driver's slices are still those `noted` ([`sorted`] then).
pub async fn unchanged(driver: &Driver, noted: &[ResourceSlice]) -> Result<(), SliceError> {
    same(noted, &sorted(driver).await?)
}

/// [`unchanged`] the whole of `duration` (upstream's `Consistently`).
pub async fn stay_unchanged(
    driver: &Driver,
    noted: &[ResourceSlice],
    duration: Duration,
) -> Result<(), WaitError> {
    wait::consistently(
        "the driver's slices to stay as noted",
        duration,
        Duration::from_secs(1),
        || async { unchanged(driver, noted).await.map_err(|e| e.to_string()) },
    )
    .await
}

/// The one slice of the driver's all-nodes pool `pool`, when it is as the
/// driver publishes it: alone, for all nodes, one slice in the pool, and the
/// driver's devices device by device.
pub async fn all_nodes_slice(
    driver: &Driver,
    pool: &str,
) -> Result<Check<ResourceSlice>, SliceError> {
    let devices = match &driver.options.resources {
        Resources::AllNodes { pool: p, devices } if p == pool => devices,
        _ => {
            return Err(SliceError::NoAllNodesPool {
                driver: driver.name.clone(),
                pool: pool.to_owned(),
            });
        }
    };
    let json_err = |source| SliceError::Json {
        pool: pool.to_owned(),
        source,
    };
    let want = driver_slices::all_nodes_slice(&driver.name, pool, devices).map_err(json_err)?;
    let want: Vec<Value> = want
        .spec
        .devices
        .unwrap_or_default()
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(json_err)?;
    Ok(alone_for_all_nodes(driver.slices().await?, pool, &want))
}

/// The named condition of [`all_nodes_slice`] over the driver's slices.
fn alone_for_all_nodes(
    slices: Vec<ResourceSlice>,
    pool: &str,
    want: &[Value],
) -> Check<ResourceSlice> {
    let mut of_pool: Vec<ResourceSlice> = slices
        .into_iter()
        .filter(|s| s.spec.pool.name == pool)
        .collect();
    if of_pool.len() != 1 {
        let names: Vec<String> = of_pool
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        return Check::Pending(format!(
            "{} slices of pool {pool}, expected exactly 1: {names:?}",
            of_pool.len()
        ));
    }
    let s = of_pool.remove(0);
    let spec = &s.spec;
    if spec.node_name.is_some()
        || spec.node_selector.is_some()
        || spec.all_nodes != Some(true)
        || spec.pool.resource_slice_count != 1
    {
        return Check::Pending(format!(
            "the slice of pool {pool} is not for all nodes alone (nodeName {:?}, nodeSelector {}, allNodes {:?}, resourceSliceCount {})",
            spec.node_name,
            spec.node_selector.is_some(),
            spec.all_nodes,
            spec.pool.resource_slice_count
        ));
    }
    if let Some(p) = device_problem(spec.devices.as_deref().unwrap_or_default(), want) {
        return Check::Pending(format!("the slice of pool {pool}: {p}"));
    }
    Check::Done(s)
}

/// Polls until the driver's all-nodes pool `pool` is one slice as
/// [`all_nodes_slice`] wants it; returns that slice.
pub async fn wait_all_nodes_slice(
    driver: &Driver,
    pool: &str,
    timeout: Duration,
) -> Result<ResourceSlice, WaitError> {
    wait::poll(
        &format!("exactly one slice of pool {pool}, for all nodes"),
        timeout,
        Duration::from_millis(200),
        || async {
            all_nodes_slice(driver, pool)
                .await
                .unwrap_or_else(|e| Check::Fail(e.to_string()))
        },
    )
    .await
}

/// Polls until the driver's all-nodes pool `pool` is one slice again as
/// [`all_nodes_slice`] wants it, another than the one of UID `old`.
pub async fn wait_recreated(
    driver: &Driver,
    pool: &str,
    old: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    wait::poll(
        &format!("the slice of pool {pool} to be recreated, alone and for all nodes"),
        timeout,
        Duration::from_millis(200),
        || async {
            match all_nodes_slice(driver, pool).await {
                Ok(Check::Done(s)) if s.metadata.uid.as_deref() == Some(old) => {
                    Check::Pending("the old slice is still there".into())
                }
                Ok(Check::Done(_)) => Check::Done(()),
                Ok(Check::Pending(p)) => Check::Pending(p),
                Ok(Check::Fail(f)) => Check::Fail(f),
                Err(e) => Check::Fail(e.to_string()),
            }
        },
    )
    .await
}

/// Deletes ResourceSlice `name`.
pub async fn delete(client: &kube::Client, name: &str) -> Result<(), SliceError> {
    Api::<ResourceSlice>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .map_err(kube_err(format!("deleting ResourceSlice {name}")))?;
    Ok(())
}

/// Checks that the slice of `driver` on `node` holding `device` contains
/// `want` (the subset rule of [`dra_e2e_kube::dynamic::contains`]): what
/// the API server kept of a slice the driver published under a generated
/// name.
pub async fn with_device_has(
    client: &kube::Client,
    driver: &str,
    node: &str,
    device: &str,
    want: &Value,
) -> Result<(), SliceError> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let slices = api
        .list(&ListParams::default().fields(&format!("spec.driver={driver},spec.nodeName={node}")))
        .await
        .map_err(kube_err(format!(
            "listing the slices of {driver} on {node}"
        )))?
        .items;
    let slice = slices
        .iter()
        .find(|s| s.spec.devices.iter().flatten().any(|d| d.name == device))
        .ok_or_else(|| SliceError::NoSliceWithDevice {
            driver: driver.to_owned(),
            device: device.to_owned(),
            node: node.to_owned(),
            slices: slices.len(),
        })?;
    let got = serde_json::to_value(slice).map_err(|source| SliceError::Json {
        pool: slice.spec.pool.name.clone(),
        source,
    })?;
    dra_e2e_kube::dynamic::contains(&got, want).map_err(|mismatch| SliceError::Differs {
        slice: slice.metadata.name.clone().unwrap_or_default(),
        driver: driver.to_owned(),
        node: node.to_owned(),
        mismatch: Box::new(mismatch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_compared_whole() {
        let bare = vec![json!({ "name": "device-00" })];
        let device: Device = serde_json::from_value(json!({ "name": "device-00" })).unwrap();
        assert_eq!(device_problem(std::slice::from_ref(&device), &bare), None);
        let with_attr: Device = serde_json::from_value(
            json!({ "name": "device-00", "attributes": { "a.example.com/x": { "int": 1 } } }),
        )
        .unwrap();
        let p = device_problem(&[with_attr], &bare).unwrap();
        assert!(p.contains("attributes") && p.contains("expected"), "{p}");
        assert!(
            device_problem(&[], &bare)
                .unwrap()
                .contains("0 devices, expected 1")
        );
    }

    fn slice(name: &str, spec: Value, owners: Value) -> ResourceSlice {
        serde_json::from_value(json!({
            "metadata": { "name": name, "uid": format!("uid-{name}"), "ownerReferences": owners },
            "spec": spec,
        }))
        .unwrap()
    }

    fn node_spec(node: &str, pool: &str, count: i64) -> Value {
        json!({ "driver": "d", "nodeName": node, "devices": [{ "name": "device-00" }],
            "pool": { "name": pool, "generation": 1, "resourceSliceCount": count } })
    }

    fn owned_by(node: &str) -> Value {
        json!([{ "apiVersion": "v1", "kind": "Node", "name": node, "uid": "node-uid",
            "controller": true }])
    }

    #[test]
    fn a_node_slice_is_owned_by_its_node_in_its_own_pool_with_its_devices() {
        let devices = ["device-00".to_owned()];
        let good = slice("s", node_spec("n", "n", 1), owned_by("n"));
        assert_eq!(
            node_slice_problem(&good, "n", Some("node-uid"), &devices),
            None
        );
        let p = node_slice_problem(&good, "n", Some("other-uid"), &devices).unwrap();
        assert!(p.starts_with("slice of node n has owner references"), "{p}");
        let shared = slice("s", node_spec("n", "shared", 2), owned_by("n"));
        assert_eq!(
            node_slice_problem(&shared, "n", Some("node-uid"), &devices).as_deref(),
            Some("slice of node n has pool \"shared\" with count 2")
        );
        let p = node_slice_problem(&good, "n", Some("node-uid"), &["device-01".to_owned()]);
        assert!(p.unwrap().starts_with("slice of node n: device "));
    }

    fn all_nodes(name: &str, pool: &str) -> ResourceSlice {
        slice(
            name,
            json!({ "driver": "d", "allNodes": true, "devices": [{ "name": "device-00" }],
                "pool": { "name": pool, "generation": 1, "resourceSliceCount": 1 } }),
            json!([]),
        )
    }

    #[test]
    fn an_all_nodes_pool_is_one_slice_for_all_nodes() {
        let want = [json!({ "name": "device-00" })];
        let one = vec![all_nodes("a", "p"), all_nodes("b", "other")];
        match alone_for_all_nodes(one, "p", &want) {
            Check::Done(s) => assert_eq!(s.metadata.name.as_deref(), Some("a")),
            other => panic!("expected done, got {other:?}"),
        }
        match alone_for_all_nodes(vec![all_nodes("a", "p"), all_nodes("b", "p")], "p", &want) {
            Check::Pending(seen) => {
                assert!(
                    seen.starts_with("2 slices of pool p, expected exactly 1"),
                    "{seen}"
                )
            }
            other => panic!("expected pending, got {other:?}"),
        }
        let on_a_node = slice("a", node_spec("n", "p", 1), json!([]));
        match alone_for_all_nodes(vec![on_a_node], "p", &want) {
            Check::Pending(seen) => assert!(seen.contains("not for all nodes alone"), "{seen}"),
            other => panic!("expected pending, got {other:?}"),
        }
    }

    #[test]
    fn slices_are_the_same_by_name_uid_and_spec() {
        let a = vec![all_nodes("a", "p")];
        assert!(same(&a, &a.clone()).is_ok());
        let mut b = a.clone();
        b[0].metadata.resource_version = Some("2".to_owned());
        assert!(same(&a, &b).is_ok(), "bookkeeping is no change");
        b[0].spec.pool.generation = 2;
        let e = same(&a, &b).unwrap_err().to_string();
        assert!(
            e.starts_with("expected the driver's slices to be unchanged."),
            "{e}"
        );
    }
}
