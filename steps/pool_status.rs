//! ResourcePoolStatusRequests (`resource.k8s.io/v1alpha3`, gate
//! DRAResourcePoolStatus): a one-shot snapshot of a driver's pools that the
//! control plane writes into the request's status. A scenario makes one
//! request at a time ("the pool status request") and checks its status with
//! tables of fields.
//!
//! A snapshot reflects what the controller's caches held when it processed
//! the request, so, as upstream does, a request whose status differs from
//! what a step expects is replaced by a fresh one with the same spec for up
//! to a minute. Every check made on the request so far is made again on its
//! replacement: the status that finally passes satisfies all of them.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{then, when};
use futures::TryStreamExt as _;
use k8s_openapi::api::resource::v1alpha3::ResourcePoolStatusRequest;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, WatchEvent, WatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::World;
use super::params::{DriverRef, Dur, Kind};
use crate::objects;

sentences! {
    /// `the driver`, `driver "label"` or `driver name "any.name"` (a driver
    /// that need not exist), then optionally `with pool name "p"` and
    /// `with limit N` (joined by `and`).
    #[when(expr = "a pool status request for {poolfilter} is created")]
    fn request_created(filter: PoolFilter);

    /// Status-level fields: `pool count`, `pools` (the pool names, in any
    /// order), `pools listed` (how many), `condition <Type>`.
    #[then(expr = "the pool status request reports:")]
    fn reports(step: Step<'_>);

    #[then(expr = "pool {string} in the pool status request has:")]
    fn pool_has(pool: String, step: Step<'_>);

    /// At least one pool is listed, and each has the fields.
    #[then(expr = "every pool in the pool status request has:")]
    fn every_pool_has(step: Step<'_>);

    /// The pool's partitionSummary holds exactly these entries.
    #[then(expr = "pool {string} in the pool status request has partition types:")]
    fn partition_types(pool: String, step: Step<'_>);

    /// Once its status is set, a watch sees no change of the request for
    /// the duration, and its resourceVersion is the same after it.
    #[then(expr = "the pool status request stays unchanged for {duration}")]
    fn request_unchanged(dur: Dur);

    #[then(expr = "{kind} {string} stays unchanged for {duration}")]
    fn object_unchanged(kind: Kind, name: String, dur: Dur);
}

/// How long the controller gets to set the status of one request.
const STATUS_TIMEOUT: Duration = Duration::from_secs(15);
/// How long fresh requests are made while the status differs.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// The least time between one request and its replacement.
const RETRY_EVERY: Duration = Duration::from_secs(2);
/// How long "stays unchanged" waits for the status to be set first.
const UNCHANGED_STATUS_TIMEOUT: Duration = Duration::from_secs(30);

/// Which pools a request asks about.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "poolfilter", regex = ".+")]
pub struct PoolFilter {
    driver: DriverName,
    pool: Option<String>,
    limit: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DriverName {
    Of(DriverRef),
    Literal(String),
}

fn quoted(s: &str) -> Option<&str> {
    s.strip_prefix('"')?.strip_suffix('"')
}

impl std::str::FromStr for PoolFilter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (driver, options) = match s.split_once(" with ") {
            Some((d, o)) => (d, Some(o)),
            None => (s, None),
        };
        let driver = match driver.strip_prefix("driver name ").map(quoted) {
            Some(Some(name)) => DriverName::Literal(name.to_owned()),
            Some(None) => return Err(format!("expected `driver name \"name\"`, got {driver:?}")),
            None => DriverName::Of(driver.parse()?),
        };
        let mut filter = PoolFilter {
            driver,
            pool: None,
            limit: None,
        };
        for option in options.into_iter().flat_map(|o| o.split(" and ")) {
            if let Some(pool) = option.strip_prefix("pool name ").and_then(quoted) {
                filter.pool = Some(pool.to_owned());
            } else if let Some(n) = option.strip_prefix("limit ") {
                filter.limit = Some(
                    n.parse()
                        .map_err(|_| format!("the limit {n:?} is not a number"))?,
                );
            } else {
                return Err(format!(
                    "unknown pool status request option {option:?}; known: `pool name \"p\"`, `limit N` \
                     (e.g. `the driver with pool name \"network\" and limit 1`)"
                ));
            }
        }
        Ok(filter)
    }
}

/// The scenario's current request and what its steps expect of it.
#[derive(Debug)]
pub struct PoolRequest {
    name: String,
    spec: Value,
    checks: Vec<Expectation>,
    created: Instant,
    /// Requests made with this spec so far (replacements included).
    made: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Expectation {
    Status {
        field: String,
        want: String,
    },
    /// `pool: None` is every pool.
    Pool {
        pool: Option<String>,
        field: String,
        want: String,
    },
    Partitions {
        pool: String,
        want: Vec<Partition>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Partition {
    attribute: String,
    kind: String,
    total: i64,
    allocatable: i64,
}

const STATUS_FIELDS: &str = "`pool count`, `pools`, `pools listed`, `condition <Type>`";

/// A status-level field as a value: `pools` is the list of pool names.
fn status_field(status: &Value, field: &str) -> Option<Value> {
    let pools = status.get("pools").and_then(Value::as_array);
    Some(match field {
        "pool count" => status.get("poolCount").cloned().unwrap_or(Value::Null),
        "pools" => Value::Array(
            pools
                .into_iter()
                .flatten()
                .map(|p| p.get("poolName").cloned().unwrap_or(Value::Null))
                .collect(),
        ),
        "pools listed" => json!(pools.map_or(0, Vec::len)),
        _ => {
            let kind = field.strip_prefix("condition ")?;
            status
                .get("conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
                .and_then(|c| c.get("status").cloned())
                .unwrap_or(Value::Null)
        }
    })
}

/// Pool fields as the table names them, and where they are in a pool's
/// status. `shareable capacity` is the list of capacity names.
const POOL_FIELDS: &[(&str, &str)] = &[
    ("driver", "driver"),
    ("generation", "generation"),
    ("resource slice count", "resourceSliceCount"),
    ("total devices", "totalDevices"),
    ("allocated devices", "allocatedDevices"),
    ("available devices", "availableDevices"),
    ("unavailable devices", "unavailableDevices"),
    ("node name", "nodeName"),
    ("validation error", "validationError"),
    ("partition summary", "partitionSummary"),
    ("shareable summary", "shareableSummary"),
    (
        "fully available devices",
        "shareableSummary.fullyAvailableDevices",
    ),
    (
        "partially available devices",
        "shareableSummary.partiallyAvailableDevices",
    ),
    ("shareable capacity", "shareableSummary.capacity"),
];

fn pool_field(pool: &Value, field: &str) -> Option<Value> {
    let (_, path) = POOL_FIELDS.iter().find(|(f, _)| *f == field)?;
    let v = path
        .split('.')
        .try_fold(pool, |v, k| v.get(k))
        .cloned()
        .unwrap_or(Value::Null);
    Some(if field == "shareable capacity" {
        Value::Array(
            v.as_array()
                .into_iter()
                .flatten()
                .map(|c| c.get("name").cloned().unwrap_or(Value::Null))
                .collect(),
        )
    } else {
        v
    })
}

fn is_none(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Whether `got` is what a table cell asks for: `none` (absent, null or
/// empty), `set` (present; a list: not empty), `more than N`, a comma-separated list of names
/// in any order (for list fields), or the value itself.
fn matches(got: &Value, want: &str) -> Result<(), String> {
    let shown = || match got {
        Value::Null => "absent".to_owned(),
        v => v.to_string(),
    };
    let ok = match want {
        "none" => is_none(got),
        // A list is set when it holds something; a count of 0 is set.
        "set" => match got {
            Value::Array(a) => !a.is_empty(),
            v => !v.is_null(),
        },
        _ => {
            if let Some(n) = want.strip_prefix("more than ") {
                let n: f64 = n
                    .parse()
                    .map_err(|_| format!("`more than {n}`: {n:?} is not a number"))?;
                got.as_f64().is_some_and(|g| g > n)
            } else if let Value::Array(items) = got {
                let mut have: Vec<String> = items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect();
                let mut expected: Vec<String> =
                    want.split(',').map(|w| w.trim().to_owned()).collect();
                have.sort();
                expected.sort();
                if have != expected {
                    return Err(format!("are {have:?}, expected {expected:?}"));
                }
                true
            } else {
                match got {
                    Value::String(s) => s == want,
                    Value::Number(n) => want.parse::<f64>().ok() == n.as_f64(),
                    Value::Bool(b) => want == b.to_string(),
                    _ => false,
                }
            }
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("is {}, expected {want}", shown()))
    }
}

fn pools(status: &Value) -> &[Value] {
    status
        .get("pools")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn pool_name(p: &Value) -> &str {
    p.get("poolName").and_then(Value::as_str).unwrap_or("")
}

fn find_pool<'a>(status: &'a Value, name: &str) -> Result<&'a Value, String> {
    pools(status)
        .iter()
        .find(|p| pool_name(p) == name)
        .ok_or_else(|| {
            let names: Vec<&str> = pools(status).iter().map(pool_name).collect();
            format!("no pool {name:?} is listed (pools: {names:?})")
        })
}

/// The first expectation `status` does not meet, described.
fn evaluate(checks: &[Expectation], status: &Value) -> Result<(), String> {
    for check in checks {
        match check {
            Expectation::Status { field, want } => {
                let got = status_field(status, field).unwrap_or(Value::Null);
                matches(&got, want).map_err(|e| format!("{field} {e}"))?;
            }
            Expectation::Pool {
                pool: Some(name),
                field,
                want,
            } => {
                let pool = find_pool(status, name)?;
                let got = pool_field(pool, field).unwrap_or(Value::Null);
                matches(&got, want).map_err(|e| format!("pool {name:?}: {field} {e}"))?;
            }
            Expectation::Pool {
                pool: None,
                field,
                want,
            } => {
                if pools(status).is_empty() {
                    return Err("no pool is listed".to_owned());
                }
                for pool in pools(status) {
                    let got = pool_field(pool, field).unwrap_or(Value::Null);
                    matches(&got, want)
                        .map_err(|e| format!("pool {:?}: {field} {e}", pool_name(pool)))?;
                }
            }
            Expectation::Partitions { pool: name, want } => {
                let pool = find_pool(status, name)?;
                let mut got: Vec<Partition> = pool
                    .get("partitionSummary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| Partition {
                        attribute: p["attribute"].as_str().unwrap_or_default().to_owned(),
                        kind: p["type"].as_str().unwrap_or_default().to_owned(),
                        total: p["total"].as_i64().unwrap_or(-1),
                        allocatable: p["allocatable"].as_i64().unwrap_or(-1),
                    })
                    .collect();
                got.sort();
                let mut want = want.clone();
                want.sort();
                if got != want {
                    return Err(format!(
                        "pool {name:?}: the partition summary is {}, expected {}",
                        show_partitions(&got),
                        show_partitions(&want)
                    ));
                }
            }
        }
    }
    Ok(())
}

fn show_partitions(p: &[Partition]) -> String {
    if p.is_empty() {
        return "empty".to_owned();
    }
    p.iter()
        .map(|p| {
            format!(
                "{}={} (total {}, allocatable {})",
                p.attribute, p.kind, p.total, p.allocatable
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn resource() -> ApiResource {
    ApiResource::erase::<ResourcePoolStatusRequest>(&())
}

fn api(w: &World) -> anyhow::Result<Api<DynamicObject>> {
    Ok(Api::all_with(w.client()?, &resource()))
}

/// Creates a request with `spec`; teardown deletes it.
async fn create(w: &mut World, spec: &Value) -> anyhow::Result<String> {
    let api = api(w)?;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourcePoolStatusRequest",
        "metadata": { "generateName": format!("{}-", w.namespace) },
        "spec": spec,
    }))?;
    w.create_object(&api, resource(), false, &obj)
        .await
        .context(
            "the cluster must serve resource.k8s.io/v1alpha3 (gate DRAResourcePoolStatus) \
             for pool status requests",
        )
}

async fn request_created(w: &mut World, filter: PoolFilter) -> anyhow::Result<()> {
    let driver = match &filter.driver {
        DriverName::Of(d) => w.driver(d)?.name.clone(),
        DriverName::Literal(name) => objects::expand(name, &w.vars())?,
    };
    let mut spec = json!({ "driver": driver });
    if let Some(pool) = &filter.pool {
        spec["poolName"] = objects::expand(pool, &w.vars())?.into();
    }
    if let Some(limit) = filter.limit {
        spec["limit"] = limit.into();
    }
    let name = create(w, &spec).await?;
    w.pool_request = Some(PoolRequest {
        name,
        spec,
        checks: Vec::new(),
        created: Instant::now(),
        made: 1,
    });
    Ok(())
}

fn current(w: &World) -> anyhow::Result<&PoolRequest> {
    w.pool_request.as_ref().context(
        "this scenario made no pool status request yet; add `When a pool status request for the driver is created`",
    )
}

fn has_status(o: &DynamicObject) -> bool {
    o.data.get("status").is_some_and(|s| !is_none(s))
}

/// Watches request `name` until the controller has set its status.
async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<DynamicObject> {
    let deadline = Instant::now() + timeout;
    let what = format!("ResourcePoolStatusRequest {name}");
    loop {
        let seen = api
            .get(name)
            .await
            .with_context(|| format!("reading {what}"))?;
        if has_status(&seen) {
            return Ok(seen);
        }
        let rv = seen.metadata.resource_version.clone().unwrap_or_default();
        let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
        let mut events = std::pin::pin!(
            api.watch(&wp, &rv)
                .await
                .with_context(|| format!("watching {what}"))?
        );
        loop {
            let next = tokio::time::timeout_at(deadline, events.try_next()).await;
            match next {
                Err(_) => bail!(
                    "the control plane set no status on {what} within {timeout:?} \
                     (is the resourcepoolstatusrequest controller running?)"
                ),
                Ok(Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o)))) if has_status(&o) => {
                    return Ok(o);
                }
                Ok(Ok(Some(WatchEvent::Deleted(_)))) => {
                    bail!("{what} was deleted while waiting for its status")
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) => {
                    tracing::debug!(%what, error = %e, "watch error, watching again");
                    break;
                }
                Ok(Ok(Some(_))) => {}
                // The server ends watches now and then: read and watch again.
                Ok(Ok(None)) => break,
                Ok(Err(e)) => return Err(e).with_context(|| format!("watching {what}")),
            }
        }
    }
}

/// Adds `new` to what the current request must show, then waits until a
/// request shows all of it, replacing the request while it does not.
async fn settle(w: &mut World, new: Vec<Expectation>) -> anyhow::Result<()> {
    let api = api(w)?;
    let request = w.pool_request.as_mut().context(
        "this scenario made no pool status request yet; add `When a pool status request for the driver is created`",
    )?;
    request.checks.extend(new);
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let r = current(w)?;
        let (name, created, made) = (r.name.clone(), r.created, r.made);
        let verdict = match wait_status(&api, &name, STATUS_TIMEOUT).await {
            Ok(obj) => {
                let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
                evaluate(&current(w)?.checks, &status).map_err(|e| {
                    let yaml =
                        serde_saphyr::to_string(&status).unwrap_or_else(|_| status.to_string());
                    format!("{e}\nits status:\n{yaml}")
                })
            }
            Err(e) => Err(format!("{e:#}")),
        };
        let Err(why) = verdict else {
            return Ok(());
        };
        let next = (created + RETRY_EVERY).max(Instant::now());
        if next >= deadline {
            bail!(
                "the pool status request {name} (the last of {made} made with its spec over {RETRY_FOR:?}) \
                 does not report what is expected: {why}"
            );
        }
        tokio::time::sleep_until(next).await;
        replace(w, &api).await?;
    }
}

/// Deletes the current request and makes a fresh one with the same spec.
async fn replace(w: &mut World, api: &Api<DynamicObject>) -> anyhow::Result<()> {
    let (old, spec) = {
        let r = current(w)?;
        (r.name.clone(), r.spec.clone())
    };
    objects::delete_if_present(api, &old, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting ResourcePoolStatusRequest {old}"))?;
    w.scenario.forget_object("ResourcePoolStatusRequest", &old);
    let name = create(w, &spec).await?;
    let r = w
        .pool_request
        .as_mut()
        .context("the pool status request went away")?;
    r.name = name;
    r.created = Instant::now();
    r.made += 1;
    Ok(())
}

/// The rows of a `| field | value |` table, placeholders expanded.
fn rows(w: &World, step: &Step) -> anyhow::Result<Vec<(String, String)>> {
    let table = step
        .table
        .as_ref()
        .context("this step needs a table of | field | value |")?;
    table
        .rows
        .iter()
        .map(|row| match row.as_slice() {
            [field, value] => Ok((
                field.trim().to_owned(),
                objects::expand(value.trim(), &w.vars())?,
            )),
            _ => bail!("each row of the table is | field | value |, got {row:?}"),
        })
        .collect()
}

async fn reports(w: &mut World, step: &Step) -> anyhow::Result<()> {
    let mut checks = Vec::new();
    for (field, want) in rows(w, step)? {
        if status_field(&Value::Null, &field).is_none() {
            bail!("unknown pool status field {field:?}; known: {STATUS_FIELDS}");
        }
        checks.push(Expectation::Status { field, want });
    }
    settle(w, checks).await
}

fn pool_checks(w: &World, step: &Step, pool: Option<String>) -> anyhow::Result<Vec<Expectation>> {
    rows(w, step)?
        .into_iter()
        .map(|(field, want)| {
            if !POOL_FIELDS.iter().any(|(f, _)| *f == field) {
                let known: Vec<&str> = POOL_FIELDS.iter().map(|(f, _)| *f).collect();
                bail!("unknown pool field {field:?}; known: {}", known.join(", "));
            }
            Ok(Expectation::Pool {
                pool: pool.clone(),
                field,
                want,
            })
        })
        .collect()
}

async fn pool_has(w: &mut World, pool: String, step: &Step) -> anyhow::Result<()> {
    let pool = objects::expand(&pool, &w.vars())?;
    let checks = pool_checks(w, step, Some(pool))?;
    settle(w, checks).await
}

async fn every_pool_has(w: &mut World, step: &Step) -> anyhow::Result<()> {
    let checks = pool_checks(w, step, None)?;
    settle(w, checks).await
}

async fn partition_types(w: &mut World, pool: String, step: &Step) -> anyhow::Result<()> {
    let pool = objects::expand(&pool, &w.vars())?;
    let table = step
        .table
        .as_ref()
        .context("this step needs a table | attribute | type | total | allocatable |")?;
    let mut rows = table.rows.iter();
    let header: Vec<&str> = rows
        .next()
        .map(|h| h.iter().map(|c| c.trim()).collect())
        .unwrap_or_default();
    if header != ["attribute", "type", "total", "allocatable"] {
        bail!(
            "the table's header must be | attribute | type | total | allocatable |, got {header:?}"
        );
    }
    let number = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| anyhow::anyhow!("{s:?} is not a number"))
    };
    let want = rows
        .map(|r| match r.as_slice() {
            [attribute, kind, total, allocatable] => Ok(Partition {
                attribute: objects::expand(attribute.trim(), &w.vars())?,
                kind: kind.trim().to_owned(),
                total: number(total)?,
                allocatable: number(allocatable)?,
            }),
            _ => bail!("each row is | attribute | type | total | allocatable |, got {r:?}"),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    settle(w, vec![Expectation::Partitions { pool, want }]).await
}

/// Watches object `seen` for `dur`: any change of it fails, and so does a
/// different resourceVersion when it is read again at the end.
async fn unchanged_for(
    api: &Api<DynamicObject>,
    what: &str,
    seen: &DynamicObject,
    dur: Duration,
) -> anyhow::Result<()> {
    let name = seen.metadata.name.clone().unwrap_or_default();
    let rv = seen.metadata.resource_version.clone().unwrap_or_default();
    let end = Instant::now() + dur;
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    'watch: while Instant::now() < end {
        let mut events = std::pin::pin!(
            api.watch(&wp, &rv)
                .await
                .with_context(|| format!("watching {what}"))?
        );
        loop {
            match tokio::time::timeout_at(end, events.try_next()).await {
                Err(_) => break 'watch,
                Ok(Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => bail!(
                    "{what} changed within {dur:?}: resourceVersion {rv} became {}",
                    o.metadata.resource_version.unwrap_or_default()
                ),
                Ok(Ok(Some(WatchEvent::Deleted(_)))) => {
                    bail!("{what} was deleted within {dur:?}")
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) => {
                    bail!("{what}: watching it from resourceVersion {rv} failed: {e}")
                }
                Ok(Ok(Some(WatchEvent::Bookmark(_)))) => {}
                Ok(Ok(None)) => continue 'watch,
                Ok(Err(e)) => return Err(e).with_context(|| format!("watching {what}")),
            }
        }
    }
    let after = api
        .get(&name)
        .await
        .with_context(|| format!("reading {what}"))?;
    let now = after.metadata.resource_version.unwrap_or_default();
    if now != rv {
        bail!("{what} changed within {dur:?}: resourceVersion {rv} became {now}");
    }
    Ok(())
}

async fn request_unchanged(w: &mut World, dur: Dur) -> anyhow::Result<()> {
    let api = api(w)?;
    let name = current(w)?.name.clone();
    let seen = wait_status(&api, &name, UNCHANGED_STATUS_TIMEOUT).await?;
    unchanged_for(
        &api,
        &format!("the pool status request {name} (its status set)"),
        &seen,
        dur.0,
    )
    .await
}

async fn object_unchanged(w: &mut World, kind: Kind, name: String, dur: Dur) -> anyhow::Result<()> {
    let (api, name) = super::crud::lookup(w, &kind.0, &name)?;
    let seen = api
        .get(&name)
        .await
        .with_context(|| format!("reading {kind} {name}"))?;
    unchanged_for(&api, &format!("{kind} {name}"), &seen, dur.0).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse() {
        let f: PoolFilter = "the driver".parse().unwrap();
        assert_eq!(f.driver, DriverName::Of(DriverRef::The));
        assert_eq!((f.pool, f.limit), (None, None));
        let f: PoolFilter = r#"driver "other" with pool name "p" and limit 3"#.parse().unwrap();
        assert_eq!(f.driver, DriverName::Of(DriverRef::Named("other".into())));
        assert_eq!((f.pool.as_deref(), f.limit), (Some("p"), Some(3)));
        let f: PoolFilter = r#"driver name "x.example.com""#.parse().unwrap();
        assert_eq!(f.driver, DriverName::Literal("x.example.com".into()));
        assert!("the driver with colour red".parse::<PoolFilter>().is_err());
        assert!("the driver with limit many".parse::<PoolFilter>().is_err());
    }

    #[test]
    fn cells_match_values() {
        assert!(matches(&Value::Null, "none").is_ok());
        assert!(matches(&json!([]), "none").is_ok());
        assert!(matches(&json!(""), "none").is_err());
        assert!(matches(&json!("n"), "set").is_ok());
        assert!(matches(&Value::Null, "set").is_err());
        assert!(matches(&json!(0), "set").is_ok());
        assert!(matches(&json!([]), "set").is_err());
        assert!(matches(&json!(3), "more than 0").is_ok());
        assert!(matches(&json!(0), "more than 0").is_err());
        assert!(matches(&Value::Null, "more than 0").is_err());
        assert!(matches(&json!(10), "10").is_ok());
        assert_eq!(
            matches(&json!(10), "9").unwrap_err(),
            "is 10, expected 9".to_owned()
        );
        assert!(matches(&json!(["b", "a"]), "a, b").is_ok());
        assert!(matches(&json!(["a"]), "a, b").is_err());
        assert!(matches(&json!("True"), "True").is_ok());
    }

    #[test]
    fn expectations_name_what_differs() {
        let status = json!({
            "poolCount": 2,
            "pools": [
                { "poolName": "a", "totalDevices": 1, "nodeName": "n" },
                { "poolName": "b", "totalDevices": 1 },
            ],
            "conditions": [ { "type": "Complete", "status": "True" } ],
        });
        let ok = [
            Expectation::Status {
                field: "pool count".into(),
                want: "2".into(),
            },
            Expectation::Status {
                field: "pools".into(),
                want: "a, b".into(),
            },
            Expectation::Status {
                field: "pools listed".into(),
                want: "2".into(),
            },
            Expectation::Status {
                field: "condition Complete".into(),
                want: "True".into(),
            },
            Expectation::Pool {
                pool: Some("a".into()),
                field: "node name".into(),
                want: "n".into(),
            },
            Expectation::Pool {
                pool: None,
                field: "total devices".into(),
                want: "1".into(),
            },
        ];
        assert_eq!(evaluate(&ok, &status), Ok(()));
        let every = [Expectation::Pool {
            pool: None,
            field: "node name".into(),
            want: "set".into(),
        }];
        assert_eq!(
            evaluate(&every, &status).unwrap_err(),
            "pool \"b\": node name is absent, expected set"
        );
        let missing = [Expectation::Pool {
            pool: Some("c".into()),
            field: "driver".into(),
            want: "d".into(),
        }];
        assert!(
            evaluate(&missing, &status)
                .unwrap_err()
                .contains("no pool \"c\"")
        );
        let partitions = [Expectation::Partitions {
            pool: "a".into(),
            want: vec![],
        }];
        assert_eq!(evaluate(&partitions, &status), Ok(()));
    }
}
