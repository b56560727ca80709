//! ResourcePoolStatusRequests (`resource.k8s.io/v1alpha3`, gate
//! DRAResourcePoolStatus): a one-shot snapshot of a driver's pools that the
//! control plane writes into the request's status. A scenario makes one
//! request at a time ("the pool status request") and checks its status with
//! tables of fields; the checks and the retries with fresh requests while
//! the status differs are the harness's ([`crate::harness::pool_status`]).
use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{then, when};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use super::World;
use super::params::{DriverRef, Dur, Kind};
use crate::ground::objects;
use crate::ground::wait::WaitError;
use crate::harness::pool_status::{
    self, Expectation, POOL_FIELDS, Partition, PoolRequest, STATUS_FIELDS, UNCHANGED_STATUS_TIMEOUT,
};

/// What the pool status steps remember between steps: the scenario's
/// current ResourcePoolStatusRequest ("the pool status request") and what
/// its status must show so far, which each check adds to.
#[derive(Debug, Default)]
pub struct PoolStatusMemory {
    /// The scenario's current ResourcePoolStatusRequest and its checks.
    pub request: Option<PoolRequest>,
}

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

fn api(w: &World) -> anyhow::Result<Api<DynamicObject>> {
    Ok(pool_status::requests(w.client()?))
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
    w.create_object(&api, pool_status::resource(), false, &obj)
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
    let pool = match &filter.pool {
        Some(p) => Some(objects::expand(p, &w.vars())?),
        None => None,
    };
    let spec = pool_status::spec(&driver, pool.as_deref(), filter.limit);
    let name = create(w, &spec).await?;
    w.pool_status.request = Some(PoolRequest::new(name, spec));
    Ok(())
}

const NO_REQUEST: &str = "this scenario made no pool status request yet; add `When a pool status request for the driver is created`";

/// The scenario's requests, as [`pool_status::settle`] reads and replaces
/// them: created with their cleanup, deleted with it.
struct ScenarioRequests<'w> {
    w: &'w mut World,
    api: Api<DynamicObject>,
}

impl pool_status::Requests for ScenarioRequests<'_> {
    type Error = anyhow::Error;

    async fn status(&mut self, name: &str) -> Result<Value, WaitError> {
        let o = pool_status::wait_status(&self.api, name, pool_status::STATUS_TIMEOUT).await?;
        Ok(pool_status::status_of(&o))
    }

    async fn create(&mut self, spec: &Value) -> anyhow::Result<String> {
        create(self.w, spec).await
    }

    async fn delete(&mut self, name: &str) -> anyhow::Result<()> {
        pool_status::delete(&self.api, name).await?;
        self.w
            .scenario
            .forget_object("ResourcePoolStatusRequest", name);
        Ok(())
    }
}

/// Adds `new` to what the current request must show, then waits until a
/// request shows all of it (see [`pool_status::settle`]).
async fn settle(w: &mut World, new: Vec<Expectation>) -> anyhow::Result<()> {
    let api = api(w)?;
    let mut request = w.pool_status.request.take().context(NO_REQUEST)?;
    let settled = pool_status::settle(&mut ScenarioRequests { w, api }, &mut request, new).await;
    w.pool_status.request = Some(request);
    settled
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
        if !pool_status::is_status_field(&field) {
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
            if !pool_status::is_pool_field(&field) {
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

async fn request_unchanged(w: &mut World, dur: Dur) -> anyhow::Result<()> {
    let api = api(w)?;
    let name = w
        .pool_status
        .request
        .as_ref()
        .context(NO_REQUEST)?
        .name()
        .to_owned();
    let seen = pool_status::wait_status(&api, &name, UNCHANGED_STATUS_TIMEOUT).await?;
    let what = format!("the pool status request {name} (its status set)");
    Ok(pool_status::unchanged_for(&api, &what, &seen, dur.0).await?)
}

async fn object_unchanged(w: &mut World, kind: Kind, name: String, dur: Dur) -> anyhow::Result<()> {
    let (api, name) = super::crud::lookup(w, &kind.0, &name)?;
    let seen = api
        .get(&name)
        .await
        .with_context(|| format!("reading {kind} {name}"))?;
    Ok(pool_status::unchanged_for(&api, &format!("{kind} {name}"), &seen, dur.0).await?)
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
}
