//! The driver's ResourceSlices as the API server has them.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::Value;

use super::World;
use super::params::{DriverRef, Dur, NodeSel, Strings};
use crate::ground::wait::Check;
use crate::harness::driver::slices::{self as driver_slices, SliceController};
use crate::harness::slices::controller_round::SLICE_BYTES;
use crate::harness::slices::{self, device_problem};

/// What the slice steps remember between steps: the driver's slices as
/// they were noted, so that a later step can tell they did not change, and
/// the UID of each pool's slice, so that a later step can tell the slice
/// was recreated rather than kept.
#[derive(Debug, Default)]
pub struct SliceMemory {
    /// Slices remembered by "the driver's slices are noted".
    pub noted: Option<Vec<ResourceSlice>>,
    /// UIDs of pools' slices as noted, for "recreated with a new UID".
    pub uids: std::collections::BTreeMap<String, String>,
}

sentences! {
    #[then(expr = "{driver} publishes one slice per node with devices {strings}")]
    fn one_slice_per_node(d: DriverRef, devices: Strings);

    /// Upstream waits so before a pod whose scheduling depends on the exact
    /// devices: the driver's slices are one per node of the table, each
    /// holding exactly its devices with exactly their attributes.
    #[given(expr = "{driver} publishes exactly these devices:")]
    #[then(expr = "{driver} publishes exactly these devices:")]
    fn publishes_exactly(d: DriverRef, step: Step<'_>);

    /// A slice the driver published under a generated name, found by one of
    /// its devices: what the API server kept of it (a disabled feature gate
    /// drops fields without a word).
    #[then(expr = "the slice of {driver} with device {string} on {node} has:")]
    fn slice_with_device_has(d: DriverRef, device: String, node: NodeSel, step: Step<'_>);

    #[then(expr = "{driver} keeps publishing them for {duration}")]
    fn keeps_publishing(d: DriverRef, dur: Dur);

    #[given(expr = "the slices of {driver} are noted")]
    #[when(expr = "the slices of {driver} are noted")]
    fn note_slices(d: DriverRef);

    #[then(expr = "the slices of {driver} are unchanged")]
    fn slices_unchanged(d: DriverRef);

    /// As noted, the whole time (upstream's `Consistently` on the list).
    #[then(expr = "the slices of {driver} stay unchanged for {duration}")]
    fn slices_stay_unchanged(d: DriverRef, dur: Dur);

    #[then(expr = "the slices of {driver} are removed")]
    fn slices_removed(d: DriverRef);

    #[then(expr = "{driver} publishes pool {string} in {int} slice(s) with {int} device(s)")]
    fn pool_in_slices(d: DriverRef, pool: String, count: usize, devices: usize);

    #[then(expr = "the driver publishes pool {string} for all nodes")]
    fn pool_for_all_nodes(pool: String);

    #[when(expr = "the slice of pool {string} is deleted")]
    fn delete_pool_slice(pool: String);

    #[then(expr = "the slice of pool {string} is recreated with a new UID")]
    fn recreated(pool: String);

    /// Upstream's ResourceSlice controller check, start to end in one step
    /// (the controller lives only as long as it): the slices are published,
    /// their size is near the API's limit, the controller made exactly those
    /// creates and then nothing for the duration; asked for one empty slice,
    /// it rewrites one of them as that one and deletes the others, and again
    /// rests. A table
    /// row `| slice size in protobuf | <min> to <max> KiB |` states other
    /// size bounds than upstream's 600 to 1024 KiB.
    #[then(expr = "a ResourceSlice controller publishes {int} maximum-size slice(s), rests for {duration} and shrinks them to one empty slice")]
    fn controller_round(slices: usize, rest: Dur, step: Step<'_>);
}

async fn publishes_exactly(w: &World, d: DriverRef, step: &Step) -> anyhow::Result<()> {
    let table = super::drivers::devices_from_table(step)?;
    let mut want: Vec<(String, Vec<Value>)> = Vec::new();
    for (index, devices) in &table {
        let node = w.node(*index)?.to_owned();
        want.push((node, devices.iter().map(|d| d.to_json()).collect()));
    }
    let driver = w.driver(&d)?;
    let what = format!(
        "the slices of driver {} to hold exactly these devices",
        driver.name
    );
    driver
        .wait_slices(&what, Duration::from_secs(30), |slices| {
            // A slice with devices on a node the table does not name.
            let stray = slices.iter().find(|s| {
                s.spec.devices.as_ref().is_some_and(|d| !d.is_empty())
                    && !want
                        .iter()
                        .any(|(node, _)| s.spec.node_name.as_ref() == Some(node))
            });
            if let Some(stray) = stray {
                return Check::Pending(format!(
                    "slice {} on {:?} has devices, the table none there",
                    stray.metadata.name.clone().unwrap_or_default(),
                    stray.spec.node_name
                ));
            }
            for (node, devices) in &want {
                let mine: Vec<&ResourceSlice> = slices
                    .iter()
                    .filter(|s| s.spec.node_name.as_ref() == Some(node))
                    .collect();
                let [slice] = mine[..] else {
                    return Check::Pending(format!(
                        "node {node} has {} slices of the driver, expected 1",
                        mine.len()
                    ));
                };
                let got = slice.spec.devices.as_deref().unwrap_or_default();
                if let Some(p) = device_problem(got, devices) {
                    return Check::Pending(format!("slice of node {node}: {p}"));
                }
            }
            Check::Done(())
        })
        .await?;
    Ok(())
}

async fn one_slice_per_node(w: &World, d: DriverRef, devices: Strings) -> anyhow::Result<()> {
    let driver = w.driver(&d)?;
    slices::one_per_node(&w.client()?, driver, &devices.0, Duration::from_secs(20)).await?;
    Ok(())
}

async fn keeps_publishing(w: &World, d: DriverRef, dur: Dur) -> anyhow::Result<()> {
    slices::keep_publishing(&w.client()?, w.driver(&d)?, dur.0).await?;
    Ok(())
}

async fn note_slices(w: &mut World, d: DriverRef) -> anyhow::Result<()> {
    // set_up already waited until the node-local slices were published.
    w.slices.noted = Some(slices::sorted(w.driver(&d)?).await?);
    Ok(())
}

async fn slices_unchanged(w: &World, d: DriverRef) -> anyhow::Result<()> {
    Ok(slices::unchanged(w.driver(&d)?, noted(w)?).await?)
}

/// The slices "the slices of the driver are noted" remembered.
fn noted(w: &World) -> anyhow::Result<&[ResourceSlice]> {
    w.slices
        .noted
        .as_deref()
        .context("no slices were noted; use `When the slices of the driver are noted` first")
}

async fn slices_stay_unchanged(w: &World, d: DriverRef, dur: Dur) -> anyhow::Result<()> {
    slices::stay_unchanged(w.driver(&d)?, noted(w)?, dur.0).await?;
    Ok(())
}

async fn slices_removed(w: &World, d: DriverRef) -> anyhow::Result<()> {
    w.driver(&d)?.is_gone(Duration::from_secs(120)).await?;
    Ok(())
}

async fn pool_slice(w: &World, pool: &str) -> anyhow::Result<Option<ResourceSlice>> {
    let slices = w.driver(&DriverRef::The)?.slices().await?;
    Ok(slices.into_iter().find(|s| s.spec.pool.name == pool))
}

/// The slices of one pool agree with each other: the count each declares,
/// one generation, and devices named once across them.
fn check_pool(slices: &[ResourceSlice], pool: &str, count: usize, devices: usize) -> Check<()> {
    let of_pool: Vec<&ResourceSlice> = slices.iter().filter(|s| s.spec.pool.name == pool).collect();
    let mut names: Vec<&str> = of_pool
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| d.name.as_str())
        .collect();
    let total = names.len();
    names.sort_unstable();
    names.dedup();
    let declared: Vec<i64> = of_pool
        .iter()
        .map(|s| s.spec.pool.resource_slice_count)
        .collect();
    let generations: Vec<i64> = of_pool.iter().map(|s| s.spec.pool.generation).collect();
    let seen = format!(
        "{} slices, {total} devices ({} distinct), resourceSliceCount {declared:?}, generations {generations:?}",
        of_pool.len(),
        names.len()
    );
    let complete = of_pool.len() == count && total == devices;
    let consistent = declared.iter().all(|c| *c == count as i64)
        && generations.windows(2).all(|g| g[0] == g[1])
        && names.len() == total;
    match (complete, consistent) {
        (true, true) => Check::Done(()),
        (true, false) => Check::Fail(seen),
        _ => Check::Pending(seen),
    }
}

async fn pool_in_slices(
    w: &World,
    d: DriverRef,
    pool: String,
    count: usize,
    devices: usize,
) -> anyhow::Result<()> {
    let driver = w.driver(&d)?;
    driver
        .wait_slices(
            &format!(
                "pool {pool} of {} in {count} consistent slices with {devices} devices",
                driver.name
            ),
            Duration::from_secs(60),
            |slices| check_pool(slices, &pool, count, devices),
        )
        .await?;
    Ok(())
}

async fn pool_for_all_nodes(w: &mut World, pool: String) -> anyhow::Result<()> {
    let driver = w.driver(&DriverRef::The)?;
    let s = slices::wait_all_nodes_slice(driver, &pool, Duration::from_secs(30)).await?;
    w.slices
        .uids
        .insert(pool, s.metadata.uid.unwrap_or_default());
    Ok(())
}

async fn delete_pool_slice(w: &mut World, pool: String) -> anyhow::Result<()> {
    let s = pool_slice(w, &pool)
        .await?
        .with_context(|| format!("no slice of pool {pool}"))?;
    let name = s.metadata.name.clone().unwrap_or_default();
    w.slices
        .uids
        .insert(pool, s.metadata.uid.unwrap_or_default());
    slices::delete(&w.client()?, &name).await?;
    Ok(())
}

async fn recreated(w: &World, pool: String) -> anyhow::Result<()> {
    let old = w
        .slices
        .uids
        .get(&pool)
        .cloned()
        .with_context(|| format!("the slice of pool {pool} was not seen before"))?;
    let driver = w.driver(&DriverRef::The)?;
    slices::wait_recreated(driver, &pool, &old, Duration::from_secs(50)).await?;
    Ok(())
}

/// The size bounds a step's table states (`| slice size in protobuf | 600
/// to 1024 KiB |`), upstream's without one.
fn size_bounds(step: &Step) -> anyhow::Result<std::ops::Range<usize>> {
    let Some(table) = &step.table else {
        return Ok(SLICE_BYTES);
    };
    let mut bounds = SLICE_BYTES;
    for row in &table.rows {
        match row.as_slice() {
            [key, value] if key.trim() == "slice size in protobuf" => {
                let parsed = value
                    .trim()
                    .strip_suffix("KiB")
                    .and_then(|v| v.split_once(" to "))
                    .and_then(|(lo, hi)| {
                        Some((
                            lo.trim().parse::<usize>().ok()?,
                            hi.trim().parse::<usize>().ok()?,
                        ))
                    });
                let Some((lo, hi)) = parsed.filter(|(lo, hi)| lo < hi) else {
                    bail!(
                        "slice size in protobuf {value:?}: expected `<min> to <max> KiB`, min below max"
                    );
                };
                bounds = lo * 1024..hi * 1024;
            }
            other => bail!(
                "unknown row {other:?}; the table takes `| slice size in protobuf | <min> to <max> KiB |`"
            ),
        }
    }
    Ok(bounds)
}

async fn controller_round(
    w: &mut World,
    slices: usize,
    rest: Dur,
    step: &Step,
) -> anyhow::Result<()> {
    let bounds = size_bounds(step)?;
    let client = w.client()?;
    // As upstream: a driver of its own, named after the namespace.
    let driver = format!("{}.example.com", w.namespace);
    w.scenario.slices_published(&driver);
    let c = SliceController::start(
        client.clone(),
        &driver,
        "network-attached",
        driver_slices::max_size_slices(slices),
        w.context()?.slice_controller_fault,
    );
    slices::controller_round::run(&client, c, &driver, slices, rest.0, bounds).await?;
    Ok(())
}

async fn slice_with_device_has(
    w: &World,
    d: DriverRef,
    device: String,
    node: NodeSel,
    step: &Step,
) -> anyhow::Result<()> {
    let want = super::crud::yaml_doc(w, step)?;
    let driver = w.driver_name(&d)?;
    let client = w.context()?.cluster.client();
    for n in node.resolve(w).await? {
        slices::with_device_has(&client, &driver, &n, &device, &want).await?;
    }
    Ok(())
}
