//! The devices the driver under test publishes: complete pools with
//! devices on every node, the same devices after a restart, one device
//! fewer after a restart with fewer, and a driver pod restarted by its
//! DaemonSet. Judged from the ResourceSlices alone, as the scheduler sees
//! them, so any driver is held to it.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{given, then, when};

use crate::World;
use crate::harness::under_test::pack;
use crate::params::{DriverRef, NodeSel};

sentences! {
    #[then(expr = "the driver publishes devices on {node}")]
    fn publishes_devices(node: NodeSel);

    #[given("the driver's devices are noted")]
    #[when("the driver's devices are noted")]
    fn devices_noted();

    #[then("the driver publishes the devices noted")]
    fn devices_as_noted();

    #[when("the driver is restarted with one device fewer on every node")]
    fn restart_one_fewer();

    #[when("the driver is restarted with all its devices")]
    fn restart_all_devices();

    /// An update of the driver: its DaemonSet rolled out again, the way its
    /// update strategy says (with maxSurge, new pod first).
    #[when("the driver's DaemonSet is rolled out")]
    fn rolled_out();

    #[then("the driver publishes one device fewer than noted")]
    fn one_fewer_than_noted();

    #[when(expr = "the driver's pod on {node} is restarted")]
    fn restart_driver_pod(node: NodeSel);
}

/// How long the driver may take to publish (again) what is expected.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a restarted driver pod may take to run again.
const DRIVER_POD_TIMEOUT: Duration = Duration::from_secs(180);

/// Watches the driver's slices until `done` accepts the devices per node.
pub(super) async fn wait_devices(
    w: &World,
    nodes: &[String],
    done: impl Fn(&BTreeMap<String, Vec<String>>) -> Result<(), String>,
) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    pack::devices_until(&w.client()?, &driver, nodes, PUBLISH_TIMEOUT, done).await?;
    Ok(())
}

/// KEP-5970's second behaviour: the driver's slices hold at least one
/// device for the node, and each pool is complete (as many slices of its
/// latest generation as it says it has), so the scheduler considers it.
async fn publishes_devices(w: &World, node: NodeSel) -> anyhow::Result<()> {
    let nodes = node.resolve(w).await?;
    let driver = w.driver_name(&DriverRef::The)?;
    pack::publishes_on(&w.client()?, &driver, &nodes, PUBLISH_TIMEOUT).await?;
    Ok(())
}

async fn devices_noted(w: &mut World) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    let mut seen = pack::devices(&w.client()?, &driver).await?;
    seen.retain(|n, _| w.nodes.contains(n));
    // Noting nothing would let every later "as noted" hold on nothing.
    let empty: Vec<&String> = w
        .nodes
        .iter()
        .filter(|n| seen.get(*n).is_none_or(|d| d.is_empty()))
        .collect();
    if !empty.is_empty() {
        bail!("driver {driver} publishes no devices on {empty:?}: there is nothing to note");
    }
    w.conformance.noted_devices = Some(seen);
    Ok(())
}

/// The devices per node `the driver's devices are noted` kept.
fn noted(w: &World) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    w.conformance
        .noted_devices
        .clone()
        .context("no devices were noted; add `Given the driver's devices are noted` before")
}

/// The same device names on each of the scenario's nodes as noted (a
/// restarted driver must come back with the devices it had).
async fn devices_as_noted(w: &World) -> anyhow::Result<()> {
    let noted = noted(w)?;
    let nodes = w.nodes.clone();
    wait_devices(w, &nodes, |seen| {
        let mut seen = seen.clone();
        seen.retain(|n, _| nodes.contains(n));
        if seen == noted {
            Ok(())
        } else {
            Err(format!("noted {noted:?}"))
        }
    })
    .await
}

/// A device goes away: the driver restarted through the profile's
/// deviceCount with one fewer than devicesPerNode. Teardown restores the
/// count if the scenario does not.
async fn restart_one_fewer(w: &mut World) -> anyhow::Result<()> {
    let ctx = w.context()?.clone();
    let under = &ctx.under_test;
    let n = under.profile.devices_per_node.with_context(|| {
        format!(
            "driver {}'s profile gives no devicesPerNode; tag the scenario @DeviceCount so that \
             it is skipped",
            under.driver_name()
        )
    })?;
    if n < 2 {
        bail!(
            "driver {} offers {n} device per node; one fewer would be none (devicesPerNode must \
             be at least 2 for this step)",
            under.driver_name()
        );
    }
    w.scenario.restores_device_count();
    under.restart_with_devices(&ctx.cluster, n - 1).await?;
    Ok(())
}

async fn rolled_out(w: &World) -> anyhow::Result<()> {
    let ctx = w.context()?;
    ctx.under_test.roll_out(&ctx.cluster).await?;
    Ok(())
}

async fn restart_all_devices(w: &World) -> anyhow::Result<()> {
    let ctx = w.context()?;
    ctx.under_test.restore_devices(&ctx.cluster).await?;
    Ok(())
}

/// On each of the scenario's nodes, the devices noted but one, and nothing
/// else.
async fn one_fewer_than_noted(w: &World) -> anyhow::Result<()> {
    let noted = noted(w)?;
    let nodes = w.nodes.clone();
    wait_devices(w, &nodes, |seen| {
        let wrong: Vec<String> = nodes
            .iter()
            .filter_map(|n| {
                let before: BTreeSet<&String> = noted.get(n).into_iter().flatten().collect();
                let now: BTreeSet<&String> = seen.get(n).into_iter().flatten().collect();
                let fine = now.is_subset(&before) && now.len() + 1 == before.len();
                (!fine).then(|| format!("{n}: {} of the {} noted", now.len(), before.len()))
            })
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "expected one device fewer than noted; {}",
                wrong.join(", ")
            ))
        }
    })
    .await
}

/// Deletes the driver's pod on the node, as a crash or an update would end
/// it, and waits until its DaemonSet runs a new one there.
async fn restart_driver_pod(w: &World, node: NodeSel) -> anyhow::Result<()> {
    let ctx = w.context()?;
    let under = &ctx.under_test;
    if under.pods.is_empty() {
        bail!(
            "the runner does not know the pods of driver {}: it knows them only from a \
             DaemonSet in the manifests it deploys (deployment.mode: RealNodes or Manifests); tag the \
             scenario @DriverPods so that it is skipped elsewhere",
            under.driver_name()
        );
    }
    let client = w.client()?;
    for node in node.resolve(w).await? {
        under
            .restart_pods_on(&client, &node, DRIVER_POD_TIMEOUT)
            .await?;
    }
    Ok(())
}
