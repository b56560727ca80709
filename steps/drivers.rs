//! Nodes, drivers and device classes.
use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::params::DriverRef;
use super::{World, context, run};
use crate::driver::slices::{self, Attribute, DeviceSpec, Taint};
use crate::driver::{self, Driver, DriverOptions, Resources};
use crate::objects;
use crate::plugin::{HealthApi, NodeApi};

/// What a driver sentence asks for, parsed from
/// `<resources>[, <modifier>]*`.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverPhrase {
    pub resources: ResourcesPhrase,
    pub with_kubelet: bool,
    pub apis: Option<Vec<NodeApi>>,
    /// Health service versions; `None` for the default (all).
    pub health_apis: Option<Vec<HealthApi>>,
    pub rolling_update: bool,
    pub start_later: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResourcesPhrase {
    PerNode(usize),
    Network(usize, Vec<Taint>),
    AllNodes(String, usize),
    FromTable,
    None,
}

fn count_of(s: &str, unit: &str) -> Option<usize> {
    let s = s.strip_suffix(unit)?.trim_end();
    s.parse().ok()
}

impl std::str::FromStr for DriverPhrase {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // A colon may introduce the table of `these devices`.
        let s = s.strip_suffix(':').unwrap_or(s);
        let mut parts = s.split(", ");
        let res = parts.next().unwrap_or_default().trim();
        let resources = if res == "no devices" {
            ResourcesPhrase::None
        } else if res == "these devices" {
            ResourcesPhrase::FromTable
        } else if let Some(n) =
            count_of(res, "devices per node").or(count_of(res, "device per node"))
        {
            ResourcesPhrase::PerNode(n)
        } else if let Some(rest) = res.strip_prefix("a network pool of ") {
            // "N devices", "N tainted devices", "N devices tainted k=v:Effect".
            let (main, explicit) = match rest.split_once(" tainted ") {
                Some((m, t)) if t.contains(':') => (m, Some(t)),
                _ => (rest, None),
            };
            let (count, default_tainted) = match main.split_once(" tainted ") {
                Some((c, _)) => (c, true),
                None => (main.split(' ').next().unwrap_or_default(), false),
            };
            let n: usize = count
                .trim()
                .parse()
                .map_err(|_| format!("cannot read the device count in {res:?}"))?;
            let mut taints = Vec::new();
            if default_tainted {
                taints.push(slices::default_taint());
            }
            if let Some(t) = explicit {
                taints.push(t.parse()?);
            }
            ResourcesPhrase::Network(n, taints)
        } else if let Some(rest) = res.strip_prefix("an all-nodes pool \"") {
            let (pool, rest) = rest.split_once("\" of ").ok_or_else(|| {
                format!("expected `an all-nodes pool \"name\" of N devices`, got {res:?}")
            })?;
            let n = count_of(rest, "devices")
                .or(count_of(rest, "device"))
                .ok_or_else(|| format!("cannot read the device count in {res:?}"))?;
            ResourcesPhrase::AllNodes(pool.to_owned(), n)
        } else {
            return Err(format!(
                "unknown resources {res:?}; use `N devices per node`, `a network pool of N devices`, \
                 `an all-nodes pool \"name\" of N devices`, `these devices` (with a table) or `no devices`"
            ));
        };
        let mut phrase = DriverPhrase {
            resources,
            with_kubelet: true,
            apis: None,
            health_apis: None,
            rolling_update: false,
            start_later: false,
        };
        for m in parts {
            let m = m.trim();
            match m {
                "not registered with the kubelet" => phrase.with_kubelet = false,
                "in rolling-update mode" => phrase.rolling_update = true,
                "not started yet" => phrase.start_later = true,
                "without device health" => phrase.health_apis = Some(Vec::new()),
                _ => {
                    // `serving the <versions> [health ]API[s]`
                    let versions = m
                        .strip_prefix("serving the ")
                        .and_then(|r| r.strip_suffix(" APIs").or(r.strip_suffix(" API")))
                        .ok_or_else(|| {
                            format!(
                                "unknown driver setting {m:?}; known: `not registered with the kubelet`, \
                                 `serving the v1beta1 API`, `serving the v1 and v1beta1 APIs`, \
                                 `serving the v1alpha1 health API`, `without device health`, \
                                 `in rolling-update mode`, `not started yet`"
                            )
                        })?;
                    match versions.strip_suffix(" health") {
                        Some(health) => phrase.health_apis = Some(version_list(health)?),
                        None => phrase.apis = Some(version_list(versions)?),
                    }
                }
            }
        }
        Ok(phrase)
    }
}

/// `v1 and v1beta1`, `v1, v1beta1`, `v1alpha1 only`: API versions.
fn version_list<T: std::str::FromStr<Err: std::fmt::Display>>(
    words: &str,
) -> Result<Vec<T>, String> {
    words
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "and" && *w != "only")
        .map(|w| w.parse::<T>().map_err(|e| e.to_string()))
        .collect()
}

/// Devices from a `| node | device | attributes |` table; attributes are
/// `name=value` pairs separated by commas.
fn devices_from_table(step: &Step) -> anyhow::Result<BTreeMap<usize, Vec<DeviceSpec>>> {
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

fn resources(phrase: &DriverPhrase, step: &Step) -> anyhow::Result<Resources> {
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
        ResourcesPhrase::None => Resources::None,
    })
}

async fn select_nodes(w: &mut World, min: usize, max: usize) -> anyhow::Result<()> {
    let ctx = context()?;
    let nodes: Api<Node> = Api::all(ctx.cluster.client());
    let mut ready: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .context("listing nodes")?
        .items
        .into_iter()
        .filter(crate::cluster::node_is_ready_and_schedulable)
        .filter_map(|n| n.metadata.name)
        .collect();
    ready.sort();
    if ready.len() < min {
        bail!(
            "the scenario needs at least {min} ready schedulable nodes, the cluster has {} ({})",
            ready.len(),
            ready.join(", ")
        );
    }
    ready.truncate(max);
    w.nodes = ready;
    Ok(())
}

#[given(regex = r"^(\d+)(?: to (\d+))? ready nodes?$")]
async fn ready_nodes(w: &mut World, min: usize, max: String) -> Result<(), String> {
    let max = if max.is_empty() {
        min
    } else {
        max.parse().unwrap_or(min)
    };
    run(select_nodes(w, min, max)).await
}

pub(crate) async fn add_driver(
    w: &mut World,
    label: String,
    options: DriverOptions,
    start: bool,
) -> anyhow::Result<()> {
    if w.nodes.is_empty() {
        select_nodes(w, 1, 1).await?;
    }
    if w.drivers.iter().any(|(l, _)| *l == label) {
        bail!("the scenario already has a driver \"{label}\"");
    }
    let ctx = context()?;
    let dctx = driver::Context {
        admin: ctx.cluster.client(),
        admin_config: ctx.cluster.kube_config(),
        namespace: w.namespace.clone(),
    };
    let d = Driver::new(dctx, w.nodes.clone(), options, ctx.cluster.clone(), None);
    // Remember it before setting up so teardown also cleans a half set-up driver.
    w.drivers.push((label.clone(), d));
    if start {
        let (_, d) = w.drivers.last_mut().context("driver just added")?;
        d.set_up().await?;
    }
    Ok(())
}

fn options_from(
    phrase: &DriverPhrase,
    step: &Step,
    name_suffix: String,
) -> anyhow::Result<DriverOptions> {
    Ok(DriverOptions {
        name_suffix,
        resources: resources(phrase, step)?,
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
        ..DriverOptions::default()
    })
}

#[given(regex = r#"^a driver(?: "([^"]+)")? with (.+)$"#)]
async fn a_driver(w: &mut World, label: String, phrase: String, step: &Step) -> Result<(), String> {
    run(async {
        let phrase: DriverPhrase = phrase.parse().map_err(anyhow::Error::msg)?;
        let suffix = if label.is_empty() {
            String::new()
        } else {
            format!("-{label}")
        };
        let options = options_from(&phrase, step, suffix)?;
        add_driver(w, label, options, !phrase.start_later).await
    })
    .await
}

#[given(regex = r#"^a second instance "([^"]+)" of (the driver|driver "[^"]+")(?:, (.+))?$"#)]
async fn second_instance(
    w: &mut World,
    label: String,
    base: DriverRef,
    modifiers: String,
) -> Result<(), String> {
    run(async {
        let base_driver = w.driver(&base.0)?;
        let mut options = base_driver.options.clone();
        options.instance_suffix = format!("-{label}");
        let mut start = true;
        for m in modifiers.split(", ").map(str::trim).filter(|m| !m.is_empty()) {
            match m {
                "not started yet" => start = false,
                "in rolling-update mode" => options.rolling_update = true,
                other => bail!("unknown instance setting {other:?}; known: `not started yet`, `in rolling-update mode`"),
            }
        }
        add_driver(w, label, options, start).await
    })
    .await
}

#[when(regex = r#"^(the driver|driver "[^"]+") starts$"#)]
async fn driver_starts(w: &mut World, d: DriverRef) -> Result<(), String> {
    run(async {
        w.driver_mut(&d.0)?.set_up().await?;
        Ok(())
    })
    .await
}

#[when(regex = r#"^(the driver|driver "[^"]+") is torn down$"#)]
async fn driver_torn_down(w: &mut World, d: DriverRef) -> Result<(), String> {
    run(async {
        let name = w.driver(&d.0)?.name.clone();
        // Slices stay when another instance of the same driver keeps running
        // (rolling or failed update); otherwise the kubelet must wipe them.
        let others = w
            .drivers
            .iter()
            .filter(|(l, other)| *l != d.0 && other.name == name && other.is_running())
            .count();
        let driver = w.driver_mut(&d.0)?;
        driver.options.expect_slice_removal = others == 0;
        driver.tear_down().await?;
        Ok(())
    })
    .await
}

#[then(regex = r#"^(the driver|driver "[^"]+") is registered on every node$"#)]
async fn registered(w: &mut World, d: DriverRef) -> Result<(), String> {
    run(async {
        let driver = w.driver(&d.0)?;
        for node in driver.nodenames() {
            let ok = driver
                .calls()
                .log(node)
                .iter()
                .any(|c| c.method == crate::proto::method::NOTIFY_REGISTRATION_STATUS && c.succeeded());
            if !ok {
                bail!("expected a successful NotifyRegistrationStatus on node {node}; the plugin's calls there: {:?}",
                    driver.calls().log(node).iter().map(|c| c.to_string()).collect::<Vec<_>>());
            }
        }
        Ok(())
    })
    .await
}

async fn create_class(
    w: &mut World,
    d: &DriverRef,
    parameters: Option<serde_json::Value>,
    extended_resource: Option<String>,
) -> anyhow::Result<()> {
    let driver = w.driver(&d.0)?;
    let name = format!("{}{}-class", w.namespace, driver.options.name_suffix);
    let mut class = objects::device_class(&name, &driver.name, parameters.as_ref(), None)?;
    class
        .spec
        .get_or_insert_with(Default::default)
        .extended_resource_name = extended_resource;
    let api: Api<DeviceClass> = Api::all(w.client()?);
    api.create(&PostParams::default(), &class)
        .await
        .with_context(|| format!("creating DeviceClass {name}"))?;
    w.classes.insert(d.0.clone(), name);
    Ok(())
}

#[given(
    regex = r#"^a device class(?: for (the driver|driver "[^"]+"))?(?: with parameters (\{.*\}))?(?:,? serving extended resource "([^"]+)")?$"#
)]
async fn device_class(
    w: &mut World,
    d: String,
    params: String,
    extended_resource: String,
) -> Result<(), String> {
    run(async {
        let d = if d.is_empty() {
            DriverRef(String::new())
        } else {
            d.parse().map_err(anyhow::Error::msg)?
        };
        let parameters = if params.is_empty() {
            None
        } else {
            Some(serde_json::from_str(&params).with_context(|| {
                format!("class parameters {params} must be a JSON object like {{\"x\":\"y\"}}")
            })?)
        };
        let extended_resource = if extended_resource.is_empty() {
            None
        } else {
            Some(objects::expand(&extended_resource, &w.vars())?)
        };
        create_class(w, &d, parameters, extended_resource).await
    })
    .await
}

pub(crate) fn class_name(w: &World, label: &str) -> anyhow::Result<String> {
    let found = w.classes.get(label).cloned().or_else(|| {
        // "the device class" is the first driver's when no unnamed one exists.
        let first = w.drivers.first().map(|(l, _)| l.clone())?;
        label
            .is_empty()
            .then(|| w.classes.get(&first).cloned())
            .flatten()
    });
    found.ok_or_else(|| {
        anyhow::anyhow!(
            "no device class for {}; add `Given a device class{}`",
            if label.is_empty() {
                "the driver".to_owned()
            } else {
                format!("driver \"{label}\"")
            },
            if label.is_empty() {
                String::new()
            } else {
                format!(" for driver \"{label}\"")
            }
        )
    })
}

#[when(regex = r#"^the device class selector is changed to "(.+)"$"#)]
async fn class_selector(w: &mut World, expression: String) -> Result<(), String> {
    run(set_selector(w, Some(expression))).await
}

#[when(regex = r#"^the device class selector is restored$"#)]
async fn class_selector_restored(w: &mut World) -> Result<(), String> {
    run(set_selector(w, None)).await
}

async fn set_selector(w: &mut World, expression: Option<String>) -> anyhow::Result<()> {
    let name = class_name(w, "")?;
    let driver = w.driver("")?.name.clone();
    let expression = expression.unwrap_or_else(|| format!("device.driver == \"{driver}\""));
    let api: Api<DeviceClass> = Api::all(w.client()?);
    let patch = json!({ "spec": { "selectors": [ { "cel": { "expression": expression } } ] } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("changing the selector of DeviceClass {name}"))?;
    Ok(())
}

#[given(
    regex = r#"^device class "([^"]+)" is created as a copy of the device class(?:, serving extended resource "([^"]+)")?$"#
)]
#[when(
    regex = r#"^device class "([^"]+)" is created as a copy of the device class(?:, serving extended resource "([^"]+)")?$"#
)]
async fn class_copy(w: &mut World, name: String, extended_resource: String) -> Result<(), String> {
    run(async {
        let name = objects::expand(&name, &w.vars())?;
        let original = class_name(w, "")?;
        let api: Api<DeviceClass> = Api::all(w.client()?);
        let mut class = api
            .get(&original)
            .await
            .with_context(|| format!("reading DeviceClass {original}"))?;
        class.metadata = kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        };
        // Two classes serving one extended resource would leave the
        // scheduler to pick one, so a copy serves none unless told.
        class
            .spec
            .get_or_insert_with(Default::default)
            .extended_resource_name = if extended_resource.is_empty() {
            None
        } else {
            Some(objects::expand(&extended_resource, &w.vars())?)
        };
        api.create(&PostParams::default(), &class)
            .await
            .with_context(|| format!("creating DeviceClass {name}"))?;
        w.extra_classes.push(name);
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_phrases() {
        let p: DriverPhrase = "1 device per node".parse().unwrap();
        assert_eq!(p.resources, ResourcesPhrase::PerNode(1));
        assert!(p.with_kubelet);
        let p: DriverPhrase = "a network pool of 10 devices, not registered with the kubelet"
            .parse()
            .unwrap();
        assert_eq!(p.resources, ResourcesPhrase::Network(10, vec![]));
        assert!(!p.with_kubelet);
        let p: DriverPhrase = "these devices:".parse().unwrap();
        assert!(matches!(p.resources, ResourcesPhrase::FromTable));
        let p: DriverPhrase = "a network pool of 10 tainted devices".parse().unwrap();
        assert_eq!(
            p.resources,
            ResourcesPhrase::Network(10, vec![slices::default_taint()])
        );
        let p: DriverPhrase = "a network pool of 4 devices tainted a=b:NoExecute"
            .parse()
            .unwrap();
        let ResourcesPhrase::Network(4, t) = p.resources else {
            panic!()
        };
        assert_eq!(t[0].effect, "NoExecute");
        let p: DriverPhrase = "2 devices per node, serving the v1beta1 API"
            .parse()
            .unwrap();
        assert_eq!(p.apis, Some(vec![NodeApi::V1beta1]));
        let p: DriverPhrase =
            "2 devices per node, serving the v1 and v1beta1 APIs, in rolling-update mode"
                .parse()
                .unwrap();
        assert_eq!(p.apis, Some(vec![NodeApi::V1, NodeApi::V1beta1]));
        assert!(p.rolling_update);
        assert_eq!(p.health_apis, None);
        let p: DriverPhrase = "1 device per node, serving the v1alpha1 health API"
            .parse()
            .unwrap();
        assert_eq!(p.health_apis, Some(vec![HealthApi::V1alpha1]));
        assert_eq!(p.apis, None);
        let p: DriverPhrase = "1 device per node, without device health".parse().unwrap();
        assert_eq!(p.health_apis, Some(vec![]));
        assert!(
            "1 device per node, serving the v2 health API"
                .parse::<DriverPhrase>()
                .is_err()
        );
        let p: DriverPhrase = "an all-nodes pool \"all-nodes-pool\" of 1 device"
            .parse()
            .unwrap();
        assert_eq!(
            p.resources,
            ResourcesPhrase::AllNodes("all-nodes-pool".into(), 1)
        );
        assert!("3 gadgets".parse::<DriverPhrase>().is_err());
        let err = "1 device per node, blue"
            .parse::<DriverPhrase>()
            .unwrap_err();
        assert!(err.contains("unknown driver setting"), "{err}");
    }
}

#[when(regex = r#"^(the driver|driver "[^"]+") is replaced by (the driver|driver "[^"]+")$"#)]
async fn replaced(w: &mut World, old: DriverRef, new: DriverRef) -> Result<(), String> {
    run(async {
        let old_driver = w.driver_mut(&old.0)?;
        // The new instance takes over the slices; they must not be waited away.
        old_driver.options.expect_slice_removal = false;
        let started = std::time::Instant::now();
        old_driver.tear_down().await?;
        w.driver_mut(&new.0)?.set_up().await?;
        w.outage = Some(started.elapsed());
        Ok(())
    })
    .await
}

#[then(
    regex = r#"^the slices of (the driver|driver "[^"]+") are unchanged if the outage was shorter than the kubelet's wiping delay$"#
)]
async fn unchanged_if_short(w: &mut World, d: DriverRef) -> Result<(), String> {
    run(async {
        let outage = w
            .outage
            .context("no driver was replaced in this scenario")?;
        let delay = context()?.cluster.wiping_delay();
        if outage >= delay {
            tracing::warn!(
                ?outage,
                ?delay,
                "the outage was longer than the wiping delay; slices may have been re-created"
            );
            return Ok(());
        }
        super::slices::assert_unchanged(w, &d.0).await
    })
    .await
}
