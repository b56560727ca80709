//! Device health: what a plugin reports on its health stream, and what the
//! kubelet shows of it in pod status (`allocatedResourcesStatus`).
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::Pod;

use super::World;
use super::params::{ApiVersion, DriverRef, Dur, Health, NodeSel};
use crate::harness::health;
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
    Ok(health::pool_of_device(&w.client()?, driver, node, device).await?)
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
    let client = w.client()?;
    for n in node.resolve(w).await? {
        health::stream_of_kubelet_version(&client, driver, &n).await?;
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

async fn wait_health(
    w: &World,
    pod: &str,
    health: Health,
    message: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let pods = w.api::<Pod>()?;
    health::devices_reported(&pods, pod, health.as_status(), message, timeout).await?;
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
