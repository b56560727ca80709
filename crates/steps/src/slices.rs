//! The driver's ResourceSlices as the API server has them.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use super::World;
use super::params::{DriverRef, Dur, NodeSel, Strings};
use crate::ground::wait::{self, Check};
use crate::harness::driver::slices::{ControllerStats, SliceController};
use crate::harness::driver::{Resources, slices as driver_slices};

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

/// Compares the fields that matter, ignoring server bookkeeping.
fn essence(s: &ResourceSlice) -> serde_json::Value {
    serde_json::json!({
        "name": s.metadata.name,
        "uid": s.metadata.uid,
        "spec": s.spec,
    })
}

/// How `got` differs from the devices `want` (as JSON), device by device.
fn device_problem(got: &[Device], want: &[Value]) -> Option<String> {
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

/// What is wrong with the node-local slices of `driver` (upstream's
/// "must manage ResourceSlices" expectations), or `None` when all is right.
async fn node_local_problems(
    w: &World,
    d: &DriverRef,
    devices: &[String],
) -> anyhow::Result<Option<String>> {
    let driver = w.driver(d)?;
    let slices = driver.slices().await?;
    let nodes: Api<Node> = Api::all(w.client()?);
    for node in driver.nodenames() {
        let mine: Vec<&ResourceSlice> = slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(node))
            .collect();
        if mine.len() != 1 {
            return Ok(Some(format!(
                "node {node} has {} slices of the driver, expected 1",
                mine.len()
            )));
        }
        let s = mine[0];
        let spec = &s.spec;
        let n = nodes
            .get(node)
            .await
            .with_context(|| format!("reading node {node}"))?;
        let owner_ok = s.metadata.owner_references.as_ref().is_some_and(|o| {
            o.len() == 1
                && o[0].api_version == "v1"
                && o[0].kind == "Node"
                && o[0].name == *node
                && Some(&o[0].uid) == n.metadata.uid.as_ref()
                && o[0].controller == Some(true)
                && o[0].block_owner_deletion.is_none()
        });
        if !owner_ok {
            return Ok(Some(format!(
                "slice of node {node} has owner references {:?}",
                s.metadata.owner_references
            )));
        }
        if spec.node_selector.is_some() || spec.all_nodes.is_some_and(|a| a) {
            return Ok(Some(format!(
                "slice of node {node} has a node selector or allNodes"
            )));
        }
        if spec.pool.name != *node || spec.pool.resource_slice_count != 1 {
            return Ok(Some(format!(
                "slice of node {node} has pool {:?} with count {}",
                spec.pool.name, spec.pool.resource_slice_count
            )));
        }
        // Device by device, as upstream: a device with the right name but
        // attributes, capacity or taints of its own is not the one expected.
        let want: Vec<Value> = devices.iter().map(|d| json!({ "name": d })).collect();
        if let Some(p) = device_problem(spec.devices.as_deref().unwrap_or_default(), &want) {
            return Ok(Some(format!("slice of node {node}: {p}")));
        }
    }
    Ok(None)
}

async fn one_slice_per_node(w: &World, d: DriverRef, devices: Strings) -> anyhow::Result<()> {
    let devices = devices.0;
    wait::poll(
        "the driver's node-local slices",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || {
            let devices = devices.clone();
            let d = d.clone();
            async move {
                match node_local_problems(w, &d, &devices).await {
                    Ok(None) => Check::Done(()),
                    Ok(Some(p)) => Check::Pending(p),
                    Err(e) => Check::Fail(e.to_string()),
                }
            }
        },
    )
    .await?;
    Ok(())
}

async fn keeps_publishing(w: &World, d: DriverRef, dur: Dur) -> anyhow::Result<()> {
    let devices: Vec<String> = {
        let driver = w.driver(&d)?;
        let slices = driver.slices().await?;
        slices
            .first()
            .and_then(|s| s.spec.devices.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.name)
            .collect()
    };
    wait::consistently(
        "the driver's slices to stay as they are",
        dur.0,
        Duration::from_secs(1),
        || {
            let devices = devices.clone();
            let d = d.clone();
            async move {
                match node_local_problems(w, &d, &devices).await {
                    Ok(None) => Ok(()),
                    Ok(Some(p)) => Err(p),
                    Err(e) => Err(e.to_string()),
                }
            }
        },
    )
    .await?;
    Ok(())
}

async fn note_slices(w: &mut World, d: DriverRef) -> anyhow::Result<()> {
    // set_up already waited until the node-local slices were published.
    let mut slices = w.driver(&d)?.slices().await?;
    slices.sort_by_key(|s| s.metadata.name.clone());
    w.slices.noted = Some(slices);
    Ok(())
}

async fn slices_unchanged(w: &World, d: DriverRef) -> anyhow::Result<()> {
    assert_unchanged(w, &d).await
}

pub(crate) async fn assert_unchanged(w: &World, d: &DriverRef) -> anyhow::Result<()> {
    let noted = w
        .slices
        .noted
        .clone()
        .context("no slices were noted; use `When the slices of the driver are noted` first")?;
    let mut now = w.driver(d)?.slices().await?;
    now.sort_by_key(|s| s.metadata.name.clone());
    let a: Vec<_> = noted.iter().map(essence).collect();
    let b: Vec<_> = now.iter().map(essence).collect();
    if a != b {
        bail!(
            "expected the driver's slices to be unchanged.\nnoted:    {}\nobserved: {}",
            serde_json::to_string(&a).unwrap_or_default(),
            serde_json::to_string(&b).unwrap_or_default()
        );
    }
    Ok(())
}

async fn slices_stay_unchanged(w: &World, d: DriverRef, dur: Dur) -> anyhow::Result<()> {
    wait::consistently(
        "the driver's slices to stay as noted",
        dur.0,
        Duration::from_secs(1),
        || async { assert_unchanged(w, &d).await.map_err(|e| e.to_string()) },
    )
    .await?;
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

/// The one slice of the driver's all-nodes pool `pool`, when it is as the
/// driver publishes it: alone, for all nodes, one slice in the pool, and the
/// driver's devices device by device.
async fn all_nodes_slice(w: &World, pool: &str) -> anyhow::Result<Check<ResourceSlice>> {
    let driver = w.driver(&DriverRef::The)?;
    let devices = match &driver.options.resources {
        Resources::AllNodes { pool: p, devices } if p == pool => devices,
        _ => bail!("{} has no all-nodes pool {pool:?}", driver.name),
    };
    let want = driver_slices::all_nodes_slice(&driver.name, pool, devices)?;
    let want: Vec<Value> = want
        .spec
        .devices
        .unwrap_or_default()
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let mut of_pool: Vec<ResourceSlice> = driver
        .slices()
        .await?
        .into_iter()
        .filter(|s| s.spec.pool.name == pool)
        .collect();
    if of_pool.len() != 1 {
        let names: Vec<String> = of_pool
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        return Ok(Check::Pending(format!(
            "{} slices of pool {pool}, expected exactly 1: {names:?}",
            of_pool.len()
        )));
    }
    let s = of_pool.remove(0);
    let spec = &s.spec;
    if spec.node_name.is_some()
        || spec.node_selector.is_some()
        || spec.all_nodes != Some(true)
        || spec.pool.resource_slice_count != 1
    {
        return Ok(Check::Pending(format!(
            "the slice of pool {pool} is not for all nodes alone (nodeName {:?}, nodeSelector {}, allNodes {:?}, resourceSliceCount {})",
            spec.node_name,
            spec.node_selector.is_some(),
            spec.all_nodes,
            spec.pool.resource_slice_count
        )));
    }
    if let Some(p) = device_problem(spec.devices.as_deref().unwrap_or_default(), &want) {
        return Ok(Check::Pending(format!("the slice of pool {pool}: {p}")));
    }
    Ok(Check::Done(s))
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
    let s = wait::poll(
        &format!("exactly one slice of pool {pool}, for all nodes"),
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            let w = &*w;
            let pool = pool.clone();
            async move {
                all_nodes_slice(w, &pool)
                    .await
                    .unwrap_or_else(|e| Check::Fail(format!("{e:#}")))
            }
        },
    )
    .await?;
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
    Api::<ResourceSlice>::all(w.client()?)
        .delete(&name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting ResourceSlice {name}"))?;
    Ok(())
}

async fn recreated(w: &World, pool: String) -> anyhow::Result<()> {
    let old = w
        .slices
        .uids
        .get(&pool)
        .cloned()
        .with_context(|| format!("the slice of pool {pool} was not seen before"))?;
    wait::poll(
        &format!("the slice of pool {pool} to be recreated, alone and for all nodes"),
        Duration::from_secs(50),
        Duration::from_millis(200),
        || {
            let w = &*w;
            let pool = pool.clone();
            let old = old.clone();
            async move {
                match all_nodes_slice(w, &pool).await {
                    Ok(Check::Done(s)) if s.metadata.uid.as_deref() == Some(old.as_str()) => {
                        Check::Pending("the old slice is still there".into())
                    }
                    Ok(Check::Done(_)) => Check::Done(()),
                    Ok(Check::Pending(p)) => Check::Pending(p),
                    Ok(Check::Fail(f)) => Check::Fail(f),
                    Err(e) => Check::Fail(format!("{e:#}")),
                }
            }
        },
    )
    .await?;
    Ok(())
}

/// Protobuf size bounds of a maximum-size slice, as upstream checks them.
const SLICE_BYTES: std::ops::Range<usize> = 600 * 1024..1024 * 1024;

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

/// Which slice sizes (name, bytes) are out of bounds.
fn size_problems(sizes: &[(String, usize)], bounds: &std::ops::Range<usize>) -> Option<String> {
    let bad: Vec<String> = sizes
        .iter()
        .filter(|(_, b)| !bounds.contains(b))
        .map(|(n, b)| format!("{n}: {b} bytes"))
        .collect();
    if sizes.is_empty() {
        Some("no slices to measure".to_owned())
    } else if bad.is_empty() {
        None
    } else {
        Some(format!(
            "slices not between {} and {} bytes in protobuf: {}",
            bounds.start,
            bounds.end,
            bad.join(", ")
        ))
    }
}

/// A slice as the API server stores it (protobuf), in bytes.
async fn protobuf_size(client: &kube::Client, name: &str) -> anyhow::Result<usize> {
    use futures::AsyncReadExt as _;
    let req = http::Request::get(format!("/apis/resource.k8s.io/v1/resourceslices/{name}"))
        .header(http::header::ACCEPT, "application/vnd.kubernetes.protobuf")
        .body(Vec::new())
        .context("building the request")?;
    let mut body = Vec::new();
    client
        .request_stream(req)
        .await
        .with_context(|| format!("reading ResourceSlice {name} as protobuf"))?
        .read_to_end(&mut body)
        .await
        .with_context(|| format!("reading ResourceSlice {name} as protobuf"))?;
    Ok(body.len())
}

async fn driver_slices_of(api: &Api<ResourceSlice>, driver: &str) -> Check<Vec<ResourceSlice>> {
    match api
        .list(&kube::api::ListParams::default().fields(&format!("spec.driver={driver}")))
        .await
    {
        Ok(l) => Check::Done(l.items),
        Err(e) => Check::Pending(format!("listing slices failed: {e}")),
    }
}

/// The writes beyond `want`: counters only grow, so once one is past its
/// expectation the controller wrote what nobody asked for.
fn wrote_more(got: ControllerStats, want: ControllerStats) -> Option<String> {
    (got.creates > want.creates || got.updates > want.updates || got.deletes > want.deletes)
        .then(|| format!("the controller wrote {got}, more than the {want} expected"))
}

/// Waits until the controller's stats are `want`, then that they stay so.
async fn stats_settle(
    c: &SliceController,
    want: ControllerStats,
    rest: Duration,
) -> anyhow::Result<()> {
    wait::poll(
        &format!("the controller's writes to be {want}"),
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async {
            let got = c.stats();
            if got == want {
                Check::Done(())
            } else if let Some(p) = wrote_more(got, want) {
                Check::Fail(p)
            } else {
                Check::Pending(got.to_string())
            }
        },
    )
    .await?;
    wait::consistently(
        &format!("the controller to write nothing more than {want}"),
        rest,
        Duration::from_millis(500),
        || async {
            let got = c.stats();
            if got == want {
                Ok(())
            } else {
                Err(got.to_string())
            }
        },
    )
    .await?;
    Ok(())
}

async fn controller_checks(
    client: &kube::Client,
    c: &SliceController,
    driver: &str,
    slices: usize,
    rest: Duration,
    bounds: std::ops::Range<usize>,
) -> anyhow::Result<()> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let published = wait::poll(
        &format!("{slices} slices of {driver}"),
        Duration::from_secs(180),
        Duration::from_secs(1),
        || async {
            match driver_slices_of(&api, driver).await {
                Check::Done(l) if l.len() == slices => Check::Done(l),
                // The controller deletes what it does not want before it
                // creates, so it never has more than it publishes.
                Check::Done(l) if l.len() > slices => Check::Fail(format!(
                    "{} slices of {driver}, more than the {slices} the controller publishes: {}",
                    l.len(),
                    l.iter()
                        .map(|s| format!(
                            "{} (pool {})",
                            s.metadata.name.as_deref().unwrap_or("?"),
                            s.spec.pool.name
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Check::Done(l) => Check::Pending(format!("{} slices", l.len())),
                other => other,
            }
        },
    )
    .await?;
    let mut sizes = Vec::new();
    for s in &published {
        let name = s.metadata.name.clone().unwrap_or_default();
        sizes.push((name.clone(), protobuf_size(client, &name).await?));
    }
    if let Some(p) = size_problems(&sizes, &bounds) {
        bail!(p);
    }
    let created = ControllerStats {
        creates: slices as u64,
        ..Default::default()
    };
    stats_settle(c, created, rest).await?;
    c.update(vec![Vec::new()]);
    wait::poll(
        &format!("{driver} to have one slice without devices"),
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async {
            match driver_slices_of(&api, driver).await {
                Check::Done(l)
                    if l.len() == 1 && l[0].spec.devices.as_ref().is_none_or(Vec::is_empty) =>
                {
                    Check::Done(())
                }
                Check::Done(l) => Check::Pending(format!(
                    "{} slices with {} devices",
                    l.len(),
                    l.iter()
                        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                        .sum::<usize>()
                )),
                Check::Pending(p) => Check::Pending(p),
                Check::Fail(f) => Check::Fail(f),
            }
        },
    )
    .await?;
    // Upstream's numbers: one slice rewritten, the others deleted.
    let shrunk = ControllerStats {
        creates: slices as u64,
        updates: u64::from(slices > 0),
        deletes: slices.saturating_sub(1) as u64,
    };
    stats_settle(c, shrunk, rest).await
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
    let checked = controller_checks(&client, &c, &driver, slices, rest.0, bounds).await;
    c.stop().await;
    // Whatever happened, nothing of the driver stays behind.
    let api: Api<ResourceSlice> = Api::all(client);
    let lp = kube::api::ListParams::default().fields(&format!("spec.driver={driver}"));
    let cleaned = async {
        api.delete_collection(&DeleteParams::default(), &lp).await?;
        wait::poll(
            &format!("the slices of {driver} to be gone"),
            Duration::from_secs(60),
            Duration::from_millis(500),
            || async {
                match api.list(&lp).await {
                    Ok(l) if l.items.is_empty() => Check::Done(()),
                    Ok(l) => Check::Pending(format!("{} left", l.items.len())),
                    Err(e) => Check::Pending(e.to_string()),
                }
            },
        )
        .await?;
        anyhow::Ok(())
    }
    .await;
    checked?;
    cleaned
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
    let api: Api<ResourceSlice> = Api::all(w.context()?.cluster.client());
    for n in node.resolve(w).await? {
        let slices = api
            .list(
                &kube::api::ListParams::default()
                    .fields(&format!("spec.driver={driver},spec.nodeName={n}")),
            )
            .await
            .with_context(|| format!("listing the slices of {driver} on {n}"))?
            .items;
        let slice = slices
            .iter()
            .find(|s| {
                s.spec
                    .devices
                    .iter()
                    .flatten()
                    .any(|dev| dev.name == device)
            })
            .with_context(|| {
                format!(
                    "driver {driver} has no slice with device {device:?} on {n} ({} slices there)",
                    slices.len()
                )
            })?;
        let got = serde_json::to_value(slice)?;
        crate::ground::dynamic::contains(&got, &want).map_err(|e| {
            anyhow::anyhow!(
                "the slice {} of {driver} on {n}: {e}",
                slice.metadata.name.as_deref().unwrap_or_default()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_sizes_out_of_bounds_are_named() {
        let ok = vec![("a".to_owned(), 700 * 1024)];
        assert_eq!(size_problems(&ok, &SLICE_BYTES), None);
        let small = vec![("a".to_owned(), 700 * 1024), ("b".to_owned(), 599 * 1024)];
        let p = size_problems(&small, &SLICE_BYTES).unwrap();
        assert!(p.contains("b: 613376 bytes") && !p.contains("a:"), "{p}");
        let big = vec![("c".to_owned(), 1024 * 1024)];
        assert!(
            size_problems(&big, &SLICE_BYTES)
                .unwrap()
                .contains("c: 1048576 bytes")
        );
        assert_eq!(
            size_problems(&[], &SLICE_BYTES).as_deref(),
            Some("no slices to measure")
        );
    }

    #[test]
    fn writes_past_any_expectation_are_named() {
        let want = ControllerStats {
            creates: 10,
            ..Default::default()
        };
        assert_eq!(wrote_more(want, want), None);
        let fewer = ControllerStats {
            creates: 9,
            ..Default::default()
        };
        assert_eq!(wrote_more(fewer, want), None);
        let deleted = ControllerStats { deletes: 1, ..want };
        let p = wrote_more(deleted, want).unwrap();
        assert!(p.contains("10 creates, 0 updates, 1 deletes"), "{p}");
    }

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
}
