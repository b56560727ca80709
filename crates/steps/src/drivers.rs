//! Nodes, drivers and device classes.
use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};

use super::World;
use super::params::{
    ClassOptions, DriverPhrase, DriverRef, InstanceSettings, NodeList, NodeRange, NodeSel, Quoted,
    ResourcesPhrase,
};
use crate::ground::objects;
use crate::harness::device_classes;
use crate::harness::driver::allocatable;
use crate::harness::driver::slices::{self, Attribute, DeviceSpec, SliceContent};
use crate::harness::driver::{DraServiceStart, DraSocketDir, DriverOptions, Resources};
use crate::harness::kubelet_plugins;
use crate::plugin::{HealthApi, NodeApi};

/// What the driver steps remember between steps: how long the plugin was
/// gone while one hosted driver instance replaced another, so that a later
/// step can hold it to the kubelet's wiping delay (a seamless update).
#[derive(Debug, Default)]
pub struct ReplacementMemory {
    /// How long the plugin was gone while one driver instance replaced another.
    pub outage: Option<std::time::Duration>,
}

sentences! {
    #[given(expr = "{noderange} ready node(s)")]
    fn ready_nodes(range: NodeRange);

    /// For a scenario with nodes of its own (`@OwnNodes`): nodes it shares
    /// with the other scenarios besides, numbered after its own.
    #[given(expr = "{int} more ready node(s) shared with other scenarios")]
    fn more_shared_nodes(count: usize);

    #[given(expr = "a driver with {driverphrase}")]
    fn a_driver(phrase: DriverPhrase, step: Step<'_>);

    #[given(expr = "a driver {string} with {driverphrase}")]
    fn a_named_driver(label: String, phrase: DriverPhrase, step: Step<'_>);

    #[given(expr = "a second instance {string} of {driver}")]
    fn second_instance(label: String, base: DriverRef);

    #[given(expr = "a second instance {string} of {driver}, {instancesettings}")]
    fn second_instance_with(label: String, base: DriverRef, settings: InstanceSettings);

    #[when(expr = "{driver} starts")]
    fn driver_starts(d: DriverRef);

    #[when(expr = "{driver} is torn down")]
    fn driver_torn_down(d: DriverRef);

    /// Its socket, server and slices; registration stays (upstream's DRA
    /// service beside its registrar).
    #[when(expr = "the DRA service of {driver} starts on {node}")]
    fn dra_service_starts(d: DriverRef, node: NodeSel);

    #[when(expr = "the DRA service of {driver} stops on {node}")]
    fn dra_service_stops(d: DriverRef, node: NodeSel);

    /// The socket file stays; every connection to it is closed at once and
    /// the open ones are cut (a hung plugin, a socket cut off by policy).
    #[when(expr = "the DRA socket of {driver} on {node} is blocked")]
    fn dra_socket_blocked(d: DriverRef, node: NodeSel);

    #[when(expr = "the DRA socket of {driver} on {node} is unblocked")]
    fn dra_socket_unblocked(d: DriverRef, node: NodeSel);

    #[when(expr = "{driver} is replaced by {driver}")]
    fn replaced(old: DriverRef, new: DriverRef);

    #[then(expr = "{driver} is registered on every node")]
    fn registered(d: DriverRef);

    /// GetInfo on the registration socket, through the node's host.
    #[then(expr = "the registration socket of {driver} on {node} answers")]
    fn registration_answers(d: DriverRef, node: NodeSel);

    #[then(expr = "the kubelet lists the plugin of {driver} as registered on every node")]
    fn kubelet_lists(d: DriverRef);

    #[given(expr = "a device class{classoptions}")]
    fn device_class(options: ClassOptions);

    #[when(expr = "the device class selector is changed to {quoted}")]
    fn class_selector(expression: Quoted);

    #[when("the device class selector is restored")]
    fn class_selector_restored();

    #[given(expr = "device class {string} is created as a copy of the device class")]
    #[when(expr = "device class {string} is created as a copy of the device class")]
    fn class_copy(name: String);

    #[given(expr = "device class {string} is created as a copy of the device class, serving extended resource {string}")]
    #[when(expr = "device class {string} is created as a copy of the device class, serving extended resource {string}")]
    fn class_copy_serving(name: String, extended_resource: String);

    #[then("the outage was shorter than the kubelet's wiping delay")]
    fn outage_short();
}

/// Devices from a `| node | device | attributes |` table; attributes are
/// `name=value` pairs separated by commas.
pub(super) fn devices_from_table(step: &Step) -> anyhow::Result<BTreeMap<usize, Vec<DeviceSpec>>> {
    let table = step
        .table
        .as_ref()
        .context("`these devices` needs a table with columns node | device | attributes")?;
    let mut rows = table.rows.iter();
    let header = rows.next().context("the devices table is empty")?;
    let col = |name: &str| header.iter().position(|h| h.trim() == name);
    let (node_col, dev_col) = (
        col("node").context("the devices table needs a `node` column")?,
        col("device").context("the devices table needs a `device` column")?,
    );
    let attr_col = col("attributes");
    let mut out: BTreeMap<usize, Vec<DeviceSpec>> = BTreeMap::new();
    for row in rows {
        let node: usize = row[node_col].trim().parse().with_context(|| {
            format!("node {:?} must be a node index (0, 1, ...)", row[node_col])
        })?;
        let mut device = DeviceSpec::named(row[dev_col].trim());
        if let Some(c) = attr_col {
            for pair in row[c].split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (k, v) = pair
                    .split_once('=')
                    .with_context(|| format!("attribute {pair:?} must be name=value"))?;
                device
                    .attributes
                    .insert(k.trim().to_owned(), Attribute::parse(v));
            }
        }
        out.entry(node).or_default().push(device);
    }
    Ok(out)
}

fn resources(w: &World, phrase: &DriverPhrase, step: &Step) -> anyhow::Result<Resources> {
    Ok(match &phrase.resources {
        ResourcesPhrase::PerNode(n) => Resources::node_local(*n),
        ResourcesPhrase::Network(n, taints) => Resources::network(*n, taints),
        ResourcesPhrase::AllNodes(pool, n) => Resources::AllNodes {
            pool: pool.clone(),
            devices: slices::node_local_devices(*n),
        },
        ResourcesPhrase::FromTable => Resources::NodeLocal {
            per_node: devices_from_table(step)?,
            default: Vec::new(),
        },
        ResourcesPhrase::SlicesFromDoc => Resources::NodePool {
            slices: slices_from_doc(w, step, "these slices per node")?,
        },
        ResourcesPhrase::SharedPool(pool) => Resources::SharedPool {
            pool: pool.clone(),
            slices: slices_from_doc(
                w,
                step,
                &format!("a shared pool \"{pool}\" of these slices"),
            )?,
        },
        ResourcesPhrase::NodeAllocatable(devices) => Resources::NodePool {
            slices: vec![SliceContent {
                devices: allocatable::parse_devices(devices)
                    .with_context(|| format!("node-allocatable devices \"{devices}\""))?,
                ..SliceContent::default()
            }],
        },
        ResourcesPhrase::None => Resources::None,
    })
}

/// The slices of `these slices per node` or `a shared pool "p" of these
/// slices` (`phrase`): YAML documents of a ResourceSlice spec's content,
/// each one slice of the pool.
fn slices_from_doc(w: &World, step: &Step, phrase: &str) -> anyhow::Result<Vec<SliceContent>> {
    let doc = step.docstring.as_ref().with_context(|| {
        format!(
            "`{phrase}` needs the slices as a YAML doc string (\"\"\" ... \"\"\"), \
             one document (separated by ---) per slice"
        )
    })?;
    let text = objects::expand(doc, &w.vars())?;
    let slices: Vec<SliceContent> = serde_saphyr::from_multiple(&text).map_err(|e| {
        anyhow::anyhow!(
            "the slices of `{phrase}` must each hold only `devices`, `sharedCounters` and \
             `partitionTypeAttribute` of a ResourceSlice spec (driver, nodes and pool are the \
             driver's): {e}"
        )
    })?;
    if slices.is_empty() {
        bail!("`{phrase}` holds no slice");
    }
    Ok(slices)
}

/// Takes the scenario's nodes: the first ready ones other scenarios share
/// (up to `max`), or, for an `@OwnNodes` scenario, `min` nodes of its own
/// (tainted against other pods while it runs). Waits while other
/// scenarios hold them; the wait is the run's queue, not the scenario's time.
async fn select_nodes(w: &mut World, min: usize, max: usize) -> anyhow::Result<()> {
    let ctx = w.context()?.clone();
    let client = ctx.cluster.client();
    // A node another scenario owns is the run's even while that scenario
    // has it away (its kubelet stopped, cut off): the leases wait for it.
    let ready = crate::harness::nodes::wait_usable(
        &client,
        min,
        &ctx.node_leases.owned(),
        crate::harness::nodes::USABLE_TIMEOUT,
    )
    .await
    .with_context(|| format!("the scenario needs at least {min} ready schedulable nodes"))?;
    if w.scenario.lease().is_some() {
        bail!(
            "the scenario has chosen its nodes already ({})",
            w.nodes.join(", ")
        );
    }
    let queued = std::time::Instant::now();
    let lease = if w.owns_nodes {
        let ticket = match w.own_ticket.take() {
            Some(t) => t,
            None => ctx.node_leases.ticket(),
        };
        ctx.node_leases
            .own(&ready, min, &w.namespace, ticket)
            .await?
    } else {
        ctx.node_leases.shared(&ready, min, max, w.faults).await
    };
    w.setup_timings.push((
        crate::report::Phase::queue("wait for nodes other scenarios hold"),
        queued.elapsed(),
    ));

    w.nodes = lease.nodes().to_vec();
    let own = lease.how() == crate::harness::node_lease::Use::Own;
    w.scenario.hold_nodes(lease);
    if own {
        for n in w.nodes.clone() {
            crate::harness::node_lease::set_taint(&client, &n, Some(&w.namespace))
                .await
                .with_context(|| format!("tainting node {n}, the scenario's own"))?;
            w.scenario.own_node_tainted(&n);
        }
    }
    Ok(())
}

/// Adds `count` nodes shared with other scenarios to those the scenario
/// owns, after them in its numbering ("node 1" after its own "node 0").
/// Own leases always leave a node no owner holds while the cluster has
/// two ready nodes or more (the runner skips the scenario on fewer), so
/// this takes the first of them at once, as a shared scenario would.
async fn more_shared_nodes(w: &mut World, count: usize) -> anyhow::Result<()> {
    if !w.scenario.owns_nodes() {
        bail!(
            "`{count} more ready node(s) shared with other scenarios` adds to the nodes of a \
             scenario's own: tag it @OwnNodes and say `Given 1 ready node` first (a scenario that \
             shares all its nodes says how many with `Given {count} ready nodes`)"
        );
    }
    if let Some((label, _)) = w.scenario.drivers().next() {
        bail!(
            "{label} runs on the scenario's nodes as they were: add the nodes before the drivers"
        );
    }
    let ctx = w.context()?.clone();
    let client = ctx.cluster.client();
    let mut ready: Vec<String> = crate::harness::under_test::ready_nodes(&client)
        .await
        .context("listing nodes")?
        .into_iter()
        .filter(|n| !w.nodes.contains(n))
        .collect();
    ready.sort();
    let queued = std::time::Instant::now();
    let lease = ctx.node_leases.shared(&ready, count, count, w.faults).await;
    w.setup_timings.push((
        crate::report::Phase::queue("wait for nodes other scenarios hold"),
        queued.elapsed(),
    ));
    w.nodes.extend(lease.nodes().iter().cloned());
    w.scenario.hold_more_nodes(lease);
    Ok(())
}

/// Chooses one ready node for a scenario that has not said how many
/// (`Given 1 ready node`), before a step that needs its nodes.
pub(crate) async fn default_nodes(w: &mut World) -> anyhow::Result<()> {
    if w.nodes.is_empty() {
        select_nodes(w, 1, 1).await?;
    }
    Ok(())
}

async fn ready_nodes(w: &mut World, range: NodeRange) -> anyhow::Result<()> {
    select_nodes(w, range.min, range.max).await
}

pub(crate) fn options_from(
    w: &World,
    phrase: &DriverPhrase,
    step: &Step,
    name_suffix: String,
) -> anyhow::Result<DriverOptions> {
    Ok(DriverOptions {
        name_suffix,
        resources: resources(w, phrase, step)?,
        node_apis: phrase
            .apis
            .clone()
            .unwrap_or_else(|| vec![NodeApi::V1, NodeApi::V1beta1]),
        health_apis: phrase
            .health_apis
            .clone()
            .unwrap_or_else(|| HealthApi::ALL.to_vec()),
        with_kubelet: phrase.with_kubelet,
        rolling_update: phrase.rolling_update,
        dra_service: if phrase.dra_service_later {
            DraServiceStart::Later
        } else {
            DraServiceStart::WithRegistration
        },
        dra_socket: if phrase.dra_socket_in_registry {
            DraSocketDir::Registry
        } else {
            DraSocketDir::Plugin
        },
        device_metadata: phrase.device_metadata.clone(),
        skip_node_operations: phrase.skip_node_operations.clone(),
        ..DriverOptions::default()
    })
}

async fn a_driver(w: &mut World, phrase: DriverPhrase, step: &Step) -> anyhow::Result<()> {
    add_driver(w, DriverRef::The, phrase, step, String::new()).await
}

async fn a_named_driver(
    w: &mut World,
    label: String,
    phrase: DriverPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    let suffix = format!("-{label}");
    add_driver(w, DriverRef::Named(label), phrase, step, suffix).await
}

pub(crate) async fn add_driver(
    w: &mut World,
    label: DriverRef,
    phrase: DriverPhrase,
    step: &Step,
    name_suffix: String,
) -> anyhow::Result<()> {
    let mut options = options_from(w, &phrase, step, name_suffix)?;
    let on = match &phrase.on_nodes {
        None => None,
        Some(list) => {
            default_nodes(w).await?;
            let names = list.names(w)?;
            options.resources = on_subset(options.resources, list)?;
            Some(names)
        }
    };
    w.add_driver_on(label, options, !phrase.start_later, on)
        .await
}

/// The driver numbers its nodes among those it runs on, the scenario's
/// sentences among all of the scenario's: a `these devices` table names
/// scenario nodes, so its rows move to the driver's numbering.
fn on_subset(resources: Resources, on: &NodeList) -> anyhow::Result<Resources> {
    let Resources::NodeLocal { per_node, default } = resources else {
        return Ok(resources);
    };
    let mut moved = BTreeMap::new();
    for (node, devices) in per_node {
        let index = on.0.iter().position(|&n| n == node).with_context(|| {
            format!("the devices table names node {node}, but the driver runs only on {on}")
        })?;
        moved.insert(index, devices);
    }
    Ok(Resources::NodeLocal {
        per_node: moved,
        default,
    })
}

async fn second_instance(w: &mut World, label: String, base: DriverRef) -> anyhow::Result<()> {
    let settings = InstanceSettings {
        start_later: false,
        rolling_update: false,
    };
    second_instance_with(w, label, base, settings).await
}

async fn second_instance_with(
    w: &mut World,
    label: String,
    base: DriverRef,
    settings: InstanceSettings,
) -> anyhow::Result<()> {
    let base_ref = base;
    let base = w.driver(&base_ref)?;
    let mut options = base.options.clone();
    // The same driver runs where its first instance runs.
    let nodes = base.nodenames().to_vec();
    options.instance_suffix = format!("-{label}");
    options.rolling_update |= settings.rolling_update;
    let label = DriverRef::Named(label);
    w.add_driver_on(label.clone(), options, false, Some(nodes))
        .await?;
    let handles = w.driver(&base_ref)?.prepared_handles();
    w.driver_mut(&label)?.share_prepared(handles);
    if settings.start_later {
        return Ok(());
    }
    driver_starts(w, label).await
}

async fn driver_starts(w: &mut World, d: DriverRef) -> anyhow::Result<()> {
    w.driver_mut(&d)?.set_up().await?;
    Ok(())
}

async fn dra_service_starts(w: &mut World, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    for n in node.resolve(w).await? {
        w.driver_mut(&d)?.start_dra_service(&n).await?;
    }
    Ok(())
}

async fn dra_service_stops(w: &mut World, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    for n in node.resolve(w).await? {
        w.driver_mut(&d)?.stop_dra_service(&n).await?;
    }
    Ok(())
}

async fn dra_socket_blocked(w: &mut World, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    set_dra_socket_blocked(w, d, node, true).await
}

async fn dra_socket_unblocked(w: &mut World, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    set_dra_socket_blocked(w, d, node, false).await
}

async fn set_dra_socket_blocked(
    w: &mut World,
    d: DriverRef,
    node: NodeSel,
    blocked: bool,
) -> anyhow::Result<()> {
    for n in node.resolve(w).await? {
        w.driver(&d)?.set_dra_socket_blocked(&n, blocked)?;
    }
    Ok(())
}

async fn registration_answers(w: &mut World, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    for n in node.resolve(w).await? {
        w.driver(&d)?.registration_answers(&n).await?;
    }
    Ok(())
}

async fn driver_torn_down(w: &mut World, d: DriverRef) -> anyhow::Result<()> {
    let name = w.driver(&d)?.name.clone();
    // Slices stay when another instance of the same driver keeps running
    // (rolling or failed update); otherwise the kubelet must wipe them.
    let others = w
        .scenario
        .drivers()
        .filter(|(l, other)| **l != d && other.name == name && other.is_running())
        .count();
    let driver = w.driver_mut(&d)?;
    driver.options.expect_slice_removal = others == 0;
    driver.tear_down().await?;
    Ok(())
}

async fn replaced(w: &mut World, old: DriverRef, new: DriverRef) -> anyhow::Result<()> {
    let old_driver = w.driver_mut(&old)?;
    // The new instance takes over the slices; they must not be waited away.
    old_driver.options.expect_slice_removal = false;
    let started = std::time::Instant::now();
    old_driver.tear_down().await?;
    w.driver_mut(&new)?.set_up().await?;
    w.replacement.outage = Some(started.elapsed());
    Ok(())
}

async fn registered(w: &World, d: DriverRef) -> anyhow::Result<()> {
    if let Some(name) = w.external_driver(&d) {
        for node in w.nodes.clone() {
            kubelet_registered(w, &node, name).await?;
        }
        return Ok(());
    }
    let driver = w.driver(&d)?;
    // The plugin counts itself registered when the kubelet's notification
    // arrives; the call record completes when the answer has gone out, a
    // moment later.
    for node in driver.nodenames() {
        driver
            .calls()
            .wait_for_call(
                node,
                "a successful NotifyRegistrationStatus",
                REGISTRATION_RECORDED,
                |c| c.method == crate::proto::method::NOTIFY_REGISTRATION_STATUS && c.succeeded(),
            )
            .await
            .with_context(|| {
                format!(
                    "the plugin's calls on node {node}: {:?}",
                    driver
                        .calls()
                        .log(node)
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                )
            })?;
    }
    Ok(())
}

/// The kubelet's own view for any driver, hosted or not: what KEP-5970's
/// first behaviour asks (a plugin told it is registered may still be one
/// the kubelet dropped).
async fn kubelet_lists(w: &World, d: DriverRef) -> anyhow::Result<()> {
    let name = w.driver_name(&d)?;
    for node in w.nodes.clone() {
        kubelet_registered(w, &node, &name).await?;
    }
    Ok(())
}

/// How long the kubelet may take to list a driver's plugin as registered.
const KUBELET_REGISTRATION: std::time::Duration = std::time::Duration::from_secs(60);

/// KEP-5970's first behaviour: the kubelet lists the driver's
/// registration socket among the plugins it registered
/// (its plugin manager's `actual_state_of_world`, in the kubelet's metrics
/// read through the API server). A driver's socket is found by its name
/// (the kubelet plugin helper's default `<driver>-reg.sock`).
async fn kubelet_registered(w: &World, node: &str, driver: &str) -> anyhow::Result<()> {
    let client = w.client()?;
    let cluster = &w.context()?.cluster;
    kubelet_plugins::registered(cluster, &client, node, driver, KUBELET_REGISTRATION).await?;
    Ok(())
}

/// How long a registration the plugin has seen may take to show as a
/// completed call.
const REGISTRATION_RECORDED: std::time::Duration = std::time::Duration::from_secs(10);

/// The name `a device class` gives a driver's class, known before it
/// exists: a quota or manifest may name it first, as upstream's do.
pub(crate) fn class_name(namespace: &str, driver: &crate::harness::driver::Driver) -> String {
    format!("{namespace}{}-class", driver.options.name_suffix)
}

pub(crate) async fn device_class(w: &mut World, options: ClassOptions) -> anyhow::Result<()> {
    let parameters: Option<serde_json::Value> = match &options.parameters {
        None => None,
        Some(json) => Some(serde_json::from_str(json).with_context(|| {
            format!("class parameters {json} must be a JSON object like {{\"x\":\"y\"}}")
        })?),
    };
    let extended_resource = match &options.extended_resource {
        None => None,
        Some(r) => Some(objects::expand(r, &w.vars())?),
    };
    let driver = w.driver(&options.driver)?;
    let name = class_name(&w.namespace, driver);
    let mut class = objects::device_class(&name, &driver.name, parameters.as_ref(), None)?;
    class
        .spec
        .get_or_insert_with(Default::default)
        .extended_resource_name = extended_resource;
    w.create_class(Some(options.driver), &class).await
}

async fn class_selector(w: &World, expression: Quoted) -> anyhow::Result<()> {
    set_selector(w, Some(expression.0)).await
}

async fn class_selector_restored(w: &World) -> anyhow::Result<()> {
    set_selector(w, None).await
}

async fn set_selector(w: &World, expression: Option<String>) -> anyhow::Result<()> {
    let name = w.class_name(&DriverRef::The)?;
    let driver = w.driver(&DriverRef::The)?.name.clone();
    let expression = expression.unwrap_or_else(|| format!("device.driver == \"{driver}\""));
    device_classes::set_selector(w.client()?, &name, &expression).await?;
    Ok(())
}

async fn class_copy(w: &mut World, name: String) -> anyhow::Result<()> {
    copy_class(w, &name, None).await
}

async fn class_copy_serving(
    w: &mut World,
    name: String,
    extended_resource: String,
) -> anyhow::Result<()> {
    copy_class(w, &name, Some(&extended_resource)).await
}

/// Creates class `name` as a copy of the driver's class.
async fn copy_class(
    w: &mut World,
    name: &str,
    extended_resource: Option<&str>,
) -> anyhow::Result<()> {
    let name = objects::expand(name, &w.vars())?;
    let original = w.class_name(&DriverRef::The)?;
    let extended_resource = match extended_resource {
        None => None,
        Some(r) => Some(objects::expand(r, &w.vars())?),
    };
    let class = device_classes::copy(w.client()?, &original, &name, extended_resource).await?;
    w.create_class(None, &class).await
}

async fn outage_short(w: &World) -> anyhow::Result<()> {
    let outage = w
        .replacement
        .outage
        .context("no driver was replaced in this scenario")?;
    let delay = w.context()?.cluster.wiping_delay();
    // An outage this long lets the kubelet wipe the slices, so the update
    // is not the seamless one the scenario is about.
    if outage >= delay {
        bail!(
            "the driver was gone for {outage:?} while it was replaced, not shorter than the kubelet's wiping delay of {delay:?}"
        );
    }
    Ok(())
}
