//! What the conformance pack's steps ask of the cluster about the driver
//! under test, whichever driver it is: the devices its ResourceSlices
//! publish per node (as they are, until a condition holds, in complete
//! pools), one of its pods restarted by its DaemonSet, a pod's event that
//! names its failure, the claims of the scenario's namespace, and a wait
//! on what only the runner's own records show. Each wait says what it last
//! saw; its condition is a named function of what it sees, beside it.
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher;

use dra_e2e_kube::wait::{self, Check, WaitError};

use super::{UnderTest, devices_per_node};

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// A DaemonSet of the driver has no pod on the node.
    #[error("DaemonSet {namespace}/{daemonset} has no pod on node {node}\n{pods}")]
    NoPod {
        namespace: String,
        daemonset: String,
        node: String,
        /// The driver's pods, described.
        pods: String,
    },
    #[error(transparent)]
    Wait(#[from] WaitError),
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> PackError {
    let what = what.into();
    move |source| PackError::Api { what, source }
}

/// The devices per node of driver `driver`'s slices, as they are now.
pub async fn devices(
    client: &kube::Client,
    driver: &str,
) -> Result<BTreeMap<String, Vec<String>>, PackError> {
    let slices = Api::<ResourceSlice>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.driver={driver}")))
        .await
        .map_err(api_error(format!("listing the slices of driver {driver}")))?;
    Ok(devices_per_node(&slices.items))
}

/// Watches driver `driver`'s slices until `done` accepts its devices per
/// node (`Err` says why not yet); `nodes` name the nodes in messages.
pub async fn devices_until(
    client: &kube::Client,
    driver: &str,
    nodes: &[String],
    timeout: Duration,
    done: impl Fn(&BTreeMap<String, Vec<String>>) -> Result<(), String>,
) -> Result<(), WaitError> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!("driver {driver}'s devices on {}", nodes.join(", "));
    wait::list(&api, config, &what, timeout, |items| {
        devices_accepted(items, &done)
    })
    .await
}

/// The named condition of [`devices_until`].
fn devices_accepted(
    slices: &[ResourceSlice],
    done: impl Fn(&BTreeMap<String, Vec<String>>) -> Result<(), String>,
) -> Check<()> {
    let seen = devices_per_node(slices);
    match done(&seen) {
        Ok(()) => Check::Done(()),
        Err(why) => Check::Pending(format!("{why}; devices per node: {seen:?}")),
    }
}

/// Watches driver `driver`'s slices until each of `nodes` has devices in
/// complete pools ([`complete_pools`]).
pub async fn publishes_on(
    client: &kube::Client,
    driver: &str,
    nodes: &[String],
    timeout: Duration,
) -> Result<(), WaitError> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!(
        "driver {driver} to publish complete pools with devices on {}",
        nodes.join(", ")
    );
    wait::list(&api, config, &what, timeout, |items| {
        complete_pools(items, nodes)
    })
    .await
}

/// KEP-5970's second behaviour: the slices hold at least one device for
/// each of `nodes`, and each pool is complete (as many slices of its
/// latest generation as it says it has), so the scheduler considers it;
/// pending with what keeps a node's slices from being usable.
pub fn complete_pools(slices: &[ResourceSlice], nodes: &[String]) -> Check<()> {
    for node in nodes {
        let mine: Vec<&ResourceSlice> = slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(node.as_str()))
            .collect();
        let devices: usize = mine
            .iter()
            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
            .sum();
        if devices == 0 {
            return Check::Pending(format!("node {node}: {} slice(s), no device", mine.len()));
        }
        let mut pools: BTreeMap<&str, Vec<&ResourceSlice>> = BTreeMap::new();
        for s in &mine {
            pools.entry(s.spec.pool.name.as_str()).or_default().push(s);
        }
        for (pool, slices) in pools {
            let latest = slices
                .iter()
                .map(|s| s.spec.pool.generation)
                .max()
                .unwrap_or(0);
            let current: Vec<&&ResourceSlice> = slices
                .iter()
                .filter(|s| s.spec.pool.generation == latest)
                .collect();
            let want = current
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            if current.len() as i64 != want {
                return Check::Pending(format!(
                    "node {node}: pool {pool} generation {latest} says {want} slice(s), {} published",
                    current.len()
                ));
            }
        }
    }
    Check::Done(())
}

impl UnderTest {
    /// Deletes the driver's pods on `node`, as a crash or an update would
    /// end them, and waits up to `timeout` until each of its DaemonSets
    /// runs a new one there, ready, and none of the old ones is left.
    pub async fn restart_pods_on(
        &self,
        client: &kube::Client,
        node: &str,
        timeout: Duration,
    ) -> Result<(), PackError> {
        for set in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), &set.namespace);
            let lp = ListParams::default()
                .labels(&set.selector())
                .fields(&format!("spec.nodeName={node}"));
            let old: BTreeSet<String> = api
                .list(&lp)
                .await
                .map_err(api_error(format!("listing driver pods on {node}")))?
                .items
                .into_iter()
                .filter_map(|p| p.metadata.uid)
                .collect();
            if old.is_empty() {
                return Err(PackError::NoPod {
                    namespace: set.namespace.clone(),
                    daemonset: set.daemonset.clone(),
                    node: node.to_owned(),
                    pods: self.describe_pods(client).await,
                });
            }
            api.delete_collection(&DeleteParams::default(), &lp)
                .await
                .map_err(api_error(format!("deleting the driver's pod on {node}")))?;
            let config = watcher::Config::default()
                .labels(&set.selector())
                .fields(&format!("spec.nodeName={node}"));
            let what = format!(
                "a new pod of DaemonSet {}/{} running on {node}",
                set.namespace, set.daemonset
            );
            wait::list(&api, config, &what, timeout, |pods| replaced(pods, &old)).await?;
        }
        Ok(())
    }
}

/// The named condition of [`UnderTest::restart_pods_on`]: of `pods` (those
/// of a DaemonSet on a node), one not among the `old` UIDs is ready and
/// none of the old is left.
fn replaced(pods: &[Pod], old: &BTreeSet<String>) -> Check<()> {
    let fresh: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| !old.contains(u)))
        .collect();
    let old_left = pods.len() - fresh.len();
    match fresh.iter().find(|p| pod_ready(p)) {
        Some(_) if old_left == 0 => Check::Done(()),
        _ => Check::Pending(format!(
            "{old_left} old pod(s) left; new: {}",
            fresh
                .iter()
                .map(|p| wait::describe_pod(Some(p)))
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Watches the events of pod `pod` until one has `reason`; returns its
/// message. Raced against the pod running, it names a driver whose
/// preparation fails by the kubelet's event rather than a timeout.
pub async fn event_of_pod(
    events: &Api<Event>,
    pod: &str,
    reason: &str,
    timeout: Duration,
) -> Result<String, WaitError> {
    let config = watcher::Config::default().fields(&format!(
        "involvedObject.name={pod},involvedObject.kind=Pod"
    ));
    let what = format!("no {reason} event of pod {pod}");
    wait::list(events, config, &what, timeout, |items| {
        event_message(items, reason)
    })
    .await
}

/// The named condition of [`event_of_pod`]: the message of the first of
/// `events` with `reason`.
fn event_message(events: &[Event], reason: &str) -> Check<String> {
    match events.iter().find(|e| e.reason.as_deref() == Some(reason)) {
        Some(e) => Check::Done(e.message.clone().unwrap_or_default()),
        None => Check::Pending("none yet".to_owned()),
    }
}

/// Every ResourceClaim of `namespace`.
pub async fn claims_of_namespace(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<ResourceClaim>, PackError> {
    Ok(Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!(
            "listing the ResourceClaims of namespace {namespace}"
        )))?
        .items)
}

/// Looks every `interval` until `probe` finds a problem, and returns it;
/// never returns while none shows (race it against what must happen
/// meanwhile). For what only the runner's own records show (a plugin's
/// answers, CDI spec files), which no watch sees.
pub async fn first_problem<T, E, F, Fut>(interval: Duration, mut probe: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
{
    loop {
        if let Some(problem) = probe().await? {
            return Ok(problem);
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSliceSpec};
    use serde_json::json;

    fn slice(node: &str, generation: i64, count: i64, devices: &[&str]) -> ResourceSlice {
        ResourceSlice {
            spec: ResourceSliceSpec {
                driver: "d".into(),
                node_name: Some(node.into()),
                pool: ResourcePool {
                    name: node.into(),
                    generation,
                    resource_slice_count: count,
                },
                devices: Some(
                    devices
                        .iter()
                        .map(|d| Device {
                            name: (*d).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pending(c: Check<()>) -> Option<String> {
        match c {
            Check::Done(()) => None,
            Check::Pending(s) | Check::Fail(s) => Some(s),
        }
    }

    #[test]
    fn a_node_needs_devices_in_a_complete_pool() {
        let nodes = vec!["n0".to_owned()];
        assert_eq!(
            pending(complete_pools(&[slice("n0", 1, 1, &["a"])], &nodes)),
            None
        );
        assert_eq!(
            pending(complete_pools(&[slice("n0", 1, 1, &[])], &nodes)),
            Some("node n0: 1 slice(s), no device".into())
        );
        assert_eq!(
            pending(complete_pools(
                &[slice("n0", 2, 2, &["a"]), slice("n0", 1, 1, &["b"])],
                &nodes
            )),
            Some("node n0: pool n0 generation 2 says 2 slice(s), 1 published".into())
        );
        assert!(pending(complete_pools(&[], &nodes)).is_some());
    }

    #[test]
    fn devices_are_accepted_as_done_says() {
        let slices = [slice("n0", 1, 1, &["a", "b"])];
        assert!(matches!(
            devices_accepted(&slices, |seen| if seen["n0"].len() == 2 {
                Ok(())
            } else {
                Err("two".into())
            }),
            Check::Done(())
        ));
        assert_eq!(
            pending(devices_accepted(&slices, |_| Err("never".into()))),
            Some(r#"never; devices per node: {"n0": ["a", "b"]}"#.into())
        );
    }

    fn pod(uid: &str, ready: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{uid}"), "uid": uid},
            "spec": {"containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_driver_pod_is_replaced_once_a_new_one_is_ready_and_the_old_gone() {
        let old: BTreeSet<String> = ["u0".to_owned()].into();
        assert!(matches!(
            replaced(&[pod("u1", "True")], &old),
            Check::Done(())
        ));
        let both = pending(replaced(&[pod("u0", "True"), pod("u1", "True")], &old)).unwrap();
        assert!(both.starts_with("1 old pod(s) left; new: "), "{both}");
        assert!(pending(replaced(&[pod("u1", "False")], &old)).is_some());
        assert!(pending(replaced(&[], &old)).is_some());
    }

    #[test]
    fn the_first_event_with_the_reason_gives_its_message() {
        let event = |reason: &str, message: &str| -> Event {
            serde_json::from_value(json!({
                "metadata": {"name": "e"},
                "involvedObject": {"kind": "Pod", "name": "p"},
                "reason": reason, "message": message,
            }))
            .unwrap()
        };
        let events = [event("Scheduled", "ok"), event("Failed", "prepare failed")];
        assert!(
            matches!(event_message(&events, "Failed"), Check::Done(m) if m == "prepare failed")
        );
        assert!(matches!(event_message(&events, "Other"), Check::Pending(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_problem_is_returned_after_looking_again() {
        let mut n = 0;
        let found: Result<String, ()> = first_problem(Duration::from_secs(1), || {
            n += 1;
            let now = n;
            async move { Ok((now == 3).then(|| format!("at look {now}"))) }
        })
        .await;
        assert_eq!(found.unwrap(), "at look 3");
    }
}
