//! Device health: what a plugin reports on its health stream, and what the
//! kubelet shows of it in pod status (`allocatedResourcesStatus`).
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};

use super::World;
use super::params::{ApiVersion, DriverRef, Dur, Health, NodeSel};
use crate::ground::wait::{self, Check};
use crate::plugin::HealthApi;

/// Upstream waits up to a minute for the kubelet to pass a change on.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(60);

sentences! {
    #[when(expr = "{driver} reports device {string} on {node} as {health}")]
    fn reports(d: DriverRef, device: String, node: NodeSel, health: Health);

    #[when(expr = "{driver} reports device {string} on {node} as {health} with message {string}")]
    fn reports_with_message(
        d: DriverRef,
        device: String,
        node: NodeSel,
        health: Health,
        message: String,
    );

    /// Upstream reports on the device the claim was given, whichever the
    /// scheduler chose from a pool.
    #[when(expr = "{driver} reports the device of claim {string} on {node} as {health} with message {string}")]
    fn reports_claim_device(
        d: DriverRef,
        claim: String,
        node: NodeSel,
        health: Health,
        message: String,
    );

    /// The kubelet subscribes on one health API version only: it never
    /// opened a stream on this one (served or not).
    #[then(expr = "no health stream of {driver} was opened through the {apiversion} API on {node}")]
    fn no_stream_via(d: DriverRef, api: ApiVersion, node: NodeSel);

    /// Upstream's check for a driver serving every health API: the
    /// kubelet's version (from its Node) says which stream it opens, v1
    /// from 1.37 on, v1alpha1 before; it opens that one and no other.
    #[then(expr = "the health stream of {driver} on {node} went through the API of its kubelet's version")]
    fn stream_of_kubelet_version(d: DriverRef, node: NodeSel);

    #[then(expr = "the devices of pod {string} are reported {health}")]
    fn reported(pod: String, health: Health);

    #[then(expr = "the devices of pod {string} are reported {health} with message {string}")]
    fn reported_with_message(pod: String, health: Health, message: String);

    /// Upstream's own deadline where it differs from the default minute.
    #[then(expr = "the devices of pod {string} are reported {health} within {duration}")]
    fn reported_within(pod: String, health: Health, within: Dur);

    /// Upstream's own deadline where it differs from the default minute.
    #[then(expr = "the devices of pod {string} are reported {health} with message {string} within {duration}")]
    fn reported_with_message_within(pod: String, health: Health, message: String, within: Dur);
}

async fn reports(
    w: &World,
    d: DriverRef,
    device: String,
    node: NodeSel,
    health: Health,
) -> anyhow::Result<()> {
    reports_with_message(w, d, device, node, health, String::new()).await
}

async fn reports_with_message(
    w: &World,
    d: DriverRef,
    device: String,
    node: NodeSel,
    health: Health,
    message: String,
) -> anyhow::Result<()> {
    if let Some(name) = w.external_driver(&d) {
        let name = name.to_owned();
        for n in node.resolve(w).await? {
            let pool = pool_of_device(w, &name, &n, &device).await?;
            inject_health(w, &d, &n, pool, device.clone(), health, &message)?;
        }
        return Ok(());
    }
    let driver = w.driver(&d)?;
    for n in node.resolve(w).await? {
        driver.set_device_health(&n, &device, health.0, &message)?;
    }
    Ok(())
}

/// The driver under test's health stream is the driver's own: the
/// interposer lays the reported health over it.
fn inject_health(
    w: &World,
    d: &DriverRef,
    node: &str,
    pool: String,
    device: String,
    health: Health,
    message: &str,
) -> anyhow::Result<()> {
    let ctx = w.context()?;
    let Some(interposed) = &ctx.under_test.interposed else {
        bail!(
            "{d} is the run's driver under test, whose device health only the driver decides: \
             reporting it needs the interposer (--interpose)"
        );
    };
    let injected = interposed
        .health(node)
        .with_context(|| format!("{d} has no interposer on node {node}"))?;
    injected.report(crate::plugin::DeviceHealth {
        pool,
        device,
        health: health.0,
        message: message.to_owned(),
    });
    Ok(())
}

/// The pool of `device` among `driver`'s slices on `node`.
async fn pool_of_device(
    w: &World,
    driver: &str,
    node: &str,
    device: &str,
) -> anyhow::Result<String> {
    use k8s_openapi::api::resource::v1::ResourceSlice;
    let slices: kube::Api<ResourceSlice> = kube::Api::all(w.client()?);
    let list = slices
        .list(
            &kube::api::ListParams::default()
                .fields(&format!("spec.driver={driver},spec.nodeName={node}")),
        )
        .await
        .with_context(|| format!("listing the slices of driver {driver} on node {node}"))?;
    let mut pools: Vec<String> = list
        .items
        .iter()
        .filter(|s| s.spec.devices.iter().flatten().any(|d| d.name == device))
        .map(|s| s.spec.pool.name.clone())
        .collect();
    pools.dedup();
    match pools.as_slice() {
        [pool] => Ok(pool.clone()),
        [] => bail!("driver {driver} publishes no device {device:?} on node {node}"),
        _ => bail!(
            "driver {driver} publishes device {device:?} on node {node} in several pools: {pools:?}"
        ),
    }
}

async fn reports_claim_device(
    w: &World,
    d: DriverRef,
    claim: String,
    node: NodeSel,
    health: Health,
    message: String,
) -> anyhow::Result<()> {
    let driver_name = w.driver_name(&d)?;
    let current = w.claim(&claim).await?;
    let results = current
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    let devices: Vec<(String, String)> = results
        .into_iter()
        .filter(|r| r.driver == driver_name)
        .map(|r| (r.pool, r.device))
        .collect();
    let [(pool, device)] = devices.as_slice() else {
        bail!(
            "claim {claim} must have exactly one device of driver {driver_name} allocated to report on, \
             it has {}",
            if devices.is_empty() {
                "none".to_owned()
            } else {
                devices
                    .iter()
                    .map(|(_, d)| d.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    };
    if w.external_driver(&d).is_some() {
        for n in node.resolve(w).await? {
            inject_health(w, &d, &n, pool.clone(), device.clone(), health, &message)?;
        }
        return Ok(());
    }
    reports_with_message(w, d, device.clone(), node, health, message).await
}

async fn stream_of_kubelet_version(w: &World, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    let driver = w.driver(&d)?;
    let nodes: kube::Api<Node> = kube::Api::all(w.client()?);
    for n in node.resolve(w).await? {
        let node = nodes
            .get(&n)
            .await
            .with_context(|| format!("reading node {n}"))?;
        let version = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.kubelet_version.clone())
            .unwrap_or_default();
        let (major, minor) = crate::ground::node_ready::kubelet_version(&node)
            .with_context(|| format!("node {n} reports kubelet version {version:?}"))?;
        let want = HealthApi::of_kubelet(major, minor);
        let observed = || {
            HealthApi::ALL
                .iter()
                .map(|a| format!("{a}: {}", driver.call_count(&n, a.watch_method())))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for api in HealthApi::ALL {
            let c = driver.call_count(&n, api.watch_method());
            if (api == want) != (c > 0) {
                bail!(
                    "the kubelet {version} on {n} should stream health from {} through {want} only; streams opened: {}",
                    driver.name,
                    observed()
                );
            }
        }
    }
    Ok(())
}

async fn no_stream_via(
    w: &World,
    d: DriverRef,
    api: ApiVersion,
    node: NodeSel,
) -> anyhow::Result<()> {
    let method = api.0.parse::<HealthApi>()?.watch_method();
    let driver = w.driver(&d)?;
    for n in node.resolve(w).await? {
        let c = driver.call_count(&n, method);
        if c != 0 {
            let all: Vec<String> = HealthApi::ALL
                .iter()
                .map(|a| {
                    format!(
                        "{}: {}",
                        a.watch_method(),
                        driver.call_count(&n, a.watch_method())
                    )
                })
                .collect();
            bail!(
                "expected no health stream of {} through the {} API on {n}; calls observed: {}",
                driver.name,
                api.0,
                all.join(", ")
            );
        }
    }
    Ok(())
}

/// `container: claim entry resourceID=health (message)` for every device the
/// kubelet lists for the pod's claims.
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

async fn wait_health(
    w: &World,
    pod: &str,
    health: Health,
    message: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api = w.api::<Pod>()?;
    let want = health.as_status();
    let what = match message {
        Some(m) => format!("the devices of pod {pod} to be reported {want} with message {m:?}"),
        None => format!("the devices of pod {pod} to be reported {want}"),
    };
    wait::pod(&api, pod, &what, timeout, |p| {
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
    })
    .await?;
    Ok(())
}

async fn reported(w: &World, pod: String, health: Health) -> anyhow::Result<()> {
    wait_health(w, &pod, health, None, HEALTH_TIMEOUT).await
}

async fn reported_within(
    w: &World,
    pod: String,
    health: Health,
    Dur(within): Dur,
) -> anyhow::Result<()> {
    wait_health(w, &pod, health, None, within).await
}

async fn reported_with_message(
    w: &World,
    pod: String,
    health: Health,
    message: String,
) -> anyhow::Result<()> {
    wait_health(w, &pod, health, Some(&message), HEALTH_TIMEOUT).await
}

async fn reported_with_message_within(
    w: &World,
    pod: String,
    health: Health,
    message: String,
    Dur(within): Dur,
) -> anyhow::Result<()> {
    wait_health(w, &pod, health, Some(&message), within).await
}
