//! ResourcePoolStatusRequests (`resource.k8s.io/v1alpha3`, gate
//! DRAResourcePoolStatus): what a scenario expects of a request's status,
//! and the retries until a request shows it.
//!
//! Why it exists: a request is a one-shot snapshot of a driver's pools,
//! written by the control plane from what its caches held when it processed
//! the request. So, as upstream does, a request whose status differs from
//! what is expected is replaced by a fresh one with the same spec, for up
//! to [`RETRY_FOR`]; every check made on the request so far is made again
//! on its replacement, so the status that finally passes satisfies all of
//! them. That loop, its deadline and what it last saw are scenario logic:
//! they live here, beside the checks, and the steps only parse tables into
//! [`Expectation`]s and hand over how to create and delete a request
//! ([`Requests`]).
use std::future::Future;
use std::time::Duration;

use dra_e2e_kube::wait::{self, WaitError};
use futures::TryStreamExt as _;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

/// How long the controller gets to set the status of one request.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(15);
/// How long fresh requests are made while the status differs.
pub const RETRY_FOR: Duration = Duration::from_secs(60);
/// The least time between one request and its replacement.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);
/// How long "stays unchanged" waits for the status to be set first.
pub const UNCHANGED_STATUS_TIMEOUT: Duration = Duration::from_secs(30);

/// The spec of a request for `driver`'s pools, optionally of one pool and
/// at most `limit` of them.
pub fn spec(driver: &str, pool: Option<&str>, limit: Option<i32>) -> Value {
    let mut spec = json!({ "driver": driver });
    if let Some(pool) = pool {
        spec["poolName"] = pool.into();
    }
    if let Some(limit) = limit {
        spec["limit"] = limit.into();
    }
    spec
}

/// One check of a request's status: a table row or a partition table.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
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

/// One entry of a pool's partitionSummary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Partition {
    pub attribute: String,
    pub kind: String,
    pub total: i64,
    pub allocatable: i64,
}

/// The status-level fields a table may name.
pub const STATUS_FIELDS: &str = "`pool count`, `pools`, `pools listed`, `condition <Type>`";

/// Pool fields as the table names them, and where they are in a pool's
/// status. `shareable capacity` is the list of capacities, each as
/// `<name> total=<q> consumed=<q> available=<q>`.
pub const POOL_FIELDS: &[(&str, &str)] = &[
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

/// Whether a table may name `field` among the status-level fields.
pub fn is_status_field(field: &str) -> bool {
    status_field(&Value::Null, field).is_some()
}

/// Whether a table may name `field` among a pool's fields.
pub fn is_pool_field(field: &str) -> bool {
    POOL_FIELDS.iter().any(|(f, _)| *f == field)
}

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
                .map(|c| {
                    let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("absent");
                    Value::String(format!(
                        "{} total={} consumed={} available={}",
                        text("name"),
                        text("total"),
                        text("consumed"),
                        text("available")
                    ))
                })
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
/// empty), `set` (present; a list: not empty), `more than N`, a
/// comma-separated list of names in any order (for list fields), or the
/// value itself.
pub fn matches(got: &Value, want: &str) -> Result<(), String> {
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
pub fn evaluate(checks: &[Expectation], status: &Value) -> Result<(), String> {
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

/// A scenario's current request and what its steps expect of it.
#[derive(Debug)]
pub struct PoolRequest {
    name: String,
    spec: Value,
    checks: Vec<Expectation>,
    created: Instant,
    /// Requests made with this spec so far (replacements included).
    made: usize,
}

impl PoolRequest {
    /// Request `name`, just made with `spec`.
    pub fn new(name: String, spec: Value) -> PoolRequest {
        PoolRequest {
            name,
            spec,
            checks: Vec::new(),
            created: Instant::now(),
            made: 1,
        }
    }

    /// The name of the request in use (the latest replacement).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn checks(&self) -> &[Expectation] {
        &self.checks
    }

    /// How many requests were made with the spec, replacements included.
    pub fn made(&self) -> usize {
        self.made
    }
}

/// The requests [`settle`] reads and replaces: the scenario creates them
/// (and registers their cleanup) and deletes them (and forgets it).
pub trait Requests {
    type Error: From<WaitError>;
    /// The status of request `name` once the control plane has set it
    /// (see [`wait_status`]).
    fn status(&mut self, name: &str) -> impl Future<Output = Result<Value, WaitError>>;
    /// Creates a request with `spec`; its name.
    fn create(&mut self, spec: &Value) -> impl Future<Output = Result<String, Self::Error>>;
    /// Deletes request `name`, if it is still there.
    fn delete(&mut self, name: &str) -> impl Future<Output = Result<(), Self::Error>>;
}

fn has_status(o: &DynamicObject) -> bool {
    o.data.get("status").is_some_and(|s| !is_none(s))
}

/// The status of a request object, `null` when unset.
pub fn status_of(o: &DynamicObject) -> Value {
    o.data.get("status").cloned().unwrap_or(Value::Null)
}

/// Watches request `name` until the controller has set its status.
pub async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    timeout: Duration,
) -> Result<DynamicObject, WaitError> {
    let deadline = Instant::now() + timeout;
    let what = format!(
        "the control plane to set the status of ResourcePoolStatusRequest {name} \
         (is the resourcepoolstatusrequest controller running?)"
    );
    let failed = |message: String| WaitError::Failed {
        what: what.clone(),
        message,
    };
    loop {
        let seen = api
            .get(name)
            .await
            .map_err(|e| failed(format!("reading it: {e}")))?;
        if has_status(&seen) {
            return Ok(seen);
        }
        let rv = seen.metadata.resource_version.clone().unwrap_or_default();
        let mut last_seen = format!("no status at resourceVersion {rv}");
        wait::note(&what, &last_seen);
        let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
        let mut events = std::pin::pin!(
            api.watch(&wp, &rv)
                .await
                .map_err(|e| failed(format!("watching it: {e}")))?
        );
        loop {
            match tokio::time::timeout_at(deadline, events.try_next()).await {
                Err(_) => {
                    return Err(WaitError::Timeout {
                        what,
                        after: timeout,
                        last_seen,
                    });
                }
                Ok(Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => {
                    if has_status(&o) {
                        return Ok(o);
                    }
                    last_seen = format!(
                        "no status at resourceVersion {}",
                        o.metadata.resource_version.unwrap_or_default()
                    );
                    wait::note(&what, &last_seen);
                }
                Ok(Ok(Some(WatchEvent::Deleted(_)))) => {
                    return Err(failed("it was deleted".to_owned()));
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) => {
                    tracing::debug!(%what, error = %e, "watch error, watching again");
                    break;
                }
                Ok(Ok(Some(WatchEvent::Bookmark(_)))) => {}
                // The server ends watches now and then, and a restarted one
                // breaks them: read and watch again.
                Ok(Ok(None)) => break,
                Ok(Err(e)) => {
                    tracing::debug!(%what, error = %e, "watch broke, watching again");
                    // Not in a tight loop while the server is away.
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                    break;
                }
            }
        }
    }
}

/// Adds `new` to what `request` must show, then waits until a request shows
/// all of it, replacing the request through `requests` while it does not,
/// for up to [`RETRY_FOR`]. On timeout the error says what the last
/// request's status was and which check it failed.
pub async fn settle<R: Requests>(
    requests: &mut R,
    request: &mut PoolRequest,
    new: Vec<Expectation>,
) -> Result<(), R::Error> {
    request.checks.extend(new);
    let what = format!(
        "a pool status request with spec {} to report what is expected",
        request.spec
    );
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let verdict = match requests.status(&request.name).await {
            Ok(status) => evaluate(&request.checks, &status).map_err(|e| {
                let yaml = serde_saphyr::to_string(&status).unwrap_or_else(|_| status.to_string());
                format!("{e}\nits status:\n{yaml}")
            }),
            Err(e) => Err(e.to_string()),
        };
        let Err(why) = verdict else {
            return Ok(());
        };
        let last_seen = format!(
            "request {} (the last of {} made with its spec): {why}",
            request.name, request.made
        );
        wait::note(&what, &last_seen);
        let next = (request.created + RETRY_EVERY).max(Instant::now());
        if next >= deadline {
            return Err(WaitError::Timeout {
                what,
                after: RETRY_FOR,
                last_seen,
            }
            .into());
        }
        tokio::time::sleep_until(next).await;
        requests.delete(&request.name).await?;
        request.name = requests.create(&request.spec).await?;
        request.created = Instant::now();
        request.made += 1;
    }
}

/// How an object that was to stay unchanged did not.
#[derive(Debug, thiserror::Error)]
pub enum ChangedError {
    #[error("{what} changed within {dur:?}: resourceVersion {from} became {to}")]
    Changed {
        what: String,
        dur: Duration,
        from: String,
        to: String,
    },
    #[error("{what} was deleted within {dur:?}")]
    Deleted { what: String, dur: Duration },
    #[error("{what}: watching it from resourceVersion {from} failed: {message}")]
    WatchFailed {
        what: String,
        from: String,
        message: String,
    },
    #[error("{doing} {what}: {source}")]
    Api {
        doing: &'static str,
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// Watches object `seen` for `dur`: any change of it fails, and so does a
/// different resourceVersion when it is read again at the end. A watch
/// whose start has expired (410: an API server restarted meanwhile keeps
/// no history from before) is started again from a fresh list of the
/// object, once that list shows it still at the resourceVersion seen.
pub async fn unchanged_for(
    api: &Api<DynamicObject>,
    what: &str,
    seen: &DynamicObject,
    dur: Duration,
) -> Result<(), ChangedError> {
    let name = seen.metadata.name.clone().unwrap_or_default();
    let rv = seen.metadata.resource_version.clone().unwrap_or_default();
    let api_error = |doing, source| ChangedError::Api {
        doing,
        what: what.to_owned(),
        source,
    };
    let changed = |to: String| ChangedError::Changed {
        what: what.to_owned(),
        dur,
        from: rv.clone(),
        to,
    };
    let end = Instant::now() + dur;
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut from = rv.clone();
    'watch: while Instant::now() < end {
        let mut events = std::pin::pin!(
            api.watch(&wp, &from)
                .await
                .map_err(|e| api_error("watching", e))?
        );
        loop {
            match tokio::time::timeout_at(end, events.try_next()).await {
                Err(_) => break 'watch,
                Ok(Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => {
                    return Err(changed(o.metadata.resource_version.unwrap_or_default()));
                }
                Ok(Ok(Some(WatchEvent::Deleted(_)))) => {
                    return Err(ChangedError::Deleted {
                        what: what.to_owned(),
                        dur,
                    });
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) if e.code == 410 => {
                    let lp =
                        kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
                    let list = api.list(&lp).await.map_err(|e| api_error("listing", e))?;
                    let Some(now) = list.items.first() else {
                        return Err(ChangedError::Deleted {
                            what: what.to_owned(),
                            dur,
                        });
                    };
                    let now = now.metadata.resource_version.clone().unwrap_or_default();
                    if now != rv {
                        return Err(changed(now));
                    }
                    from = list.metadata.resource_version.unwrap_or(now);
                    continue 'watch;
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) => {
                    return Err(ChangedError::WatchFailed {
                        what: what.to_owned(),
                        from: from.clone(),
                        message: e.to_string(),
                    });
                }
                Ok(Ok(Some(WatchEvent::Bookmark(_)))) => {}
                Ok(Ok(None)) => continue 'watch,
                Ok(Err(e)) => return Err(api_error("watching", e)),
            }
        }
    }
    let after = api.get(&name).await.map_err(|e| api_error("reading", e))?;
    let now = after.metadata.resource_version.unwrap_or_default();
    if now != rv {
        return Err(changed(now));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_the_driver_and_what_narrows_it() {
        assert_eq!(spec("d", None, None), json!({ "driver": "d" }));
        assert_eq!(
            spec("d", Some("p"), Some(2)),
            json!({ "driver": "d", "poolName": "p", "limit": 2 })
        );
    }

    #[test]
    fn fields_are_known_by_name() {
        assert!(is_status_field("pool count"));
        assert!(is_status_field("condition Complete"));
        assert!(!is_status_field("colour"));
        assert!(is_pool_field("shareable capacity"));
        assert!(!is_pool_field("pool count"));
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
        assert!(matches(&json!(1), "more than x").is_err());
        assert!(matches(&json!(10), "10").is_ok());
        assert_eq!(
            matches(&json!(10), "9").unwrap_err(),
            "is 10, expected 9".to_owned()
        );
        assert!(matches(&json!(["b", "a"]), "a, b").is_ok());
        assert_eq!(
            matches(&json!(["a"]), "a, b").unwrap_err(),
            "are [\"a\"], expected [\"a\", \"b\"]"
        );
        assert!(matches(&json!("True"), "True").is_ok());
        assert!(matches(&json!(true), "true").is_ok());
    }

    #[test]
    fn expectations_name_what_differs() {
        let status = json!({
            "poolCount": 2,
            "pools": [
                { "poolName": "a", "totalDevices": 1, "nodeName": "n",
                  "shareableSummary": { "capacity": [ { "name": "memory", "total": "32", "consumed": "8", "available": "24" } ] },
                  "partitionSummary": [
                      { "attribute": "x", "type": "int", "total": 2, "allocatable": 1 },
                  ] },
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
                pool: Some("a".into()),
                field: "shareable capacity".into(),
                want: "memory total=32 consumed=8 available=24".into(),
            },
            Expectation::Pool {
                pool: None,
                field: "total devices".into(),
                want: "1".into(),
            },
            Expectation::Partitions {
                pool: "a".into(),
                want: vec![Partition {
                    attribute: "x".into(),
                    kind: "int".into(),
                    total: 2,
                    allocatable: 1,
                }],
            },
        ];
        assert_eq!(evaluate(&ok, &status), Ok(()));
        // The amounts count, not only the capacity's name.
        for want in ["memory", "memory total=32 consumed=0 available=32"] {
            let amounts = [Expectation::Pool {
                pool: Some("a".into()),
                field: "shareable capacity".into(),
                want: want.into(),
            }];
            assert!(evaluate(&amounts, &status).is_err(), "{want}");
        }
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
        assert_eq!(
            evaluate(&missing, &status).unwrap_err(),
            "no pool \"c\" is listed (pools: [\"a\", \"b\"])"
        );
        let partitions = [Expectation::Partitions {
            pool: "b".into(),
            want: vec![Partition {
                attribute: "x".into(),
                kind: "int".into(),
                total: 2,
                allocatable: 2,
            }],
        }];
        assert_eq!(
            evaluate(&partitions, &status).unwrap_err(),
            "pool \"b\": the partition summary is empty, expected x=int (total 2, allocatable 2)"
        );
        assert_eq!(
            evaluate(&every, &json!({})).unwrap_err(),
            "no pool is listed"
        );
    }

    /// Requests whose statuses come from a list, one per request made;
    /// the last one stays.
    struct Scripted {
        statuses: Vec<Value>,
        made: Vec<String>,
        deleted: Vec<String>,
    }

    impl Scripted {
        fn new(statuses: Vec<Value>) -> Scripted {
            Scripted {
                statuses,
                made: vec!["r-1".into()],
                deleted: Vec::new(),
            }
        }
    }

    impl Requests for Scripted {
        type Error = WaitError;
        async fn status(&mut self, name: &str) -> Result<Value, WaitError> {
            let i = self.made.iter().position(|m| m == name).expect("made");
            Ok(self.statuses[i.min(self.statuses.len() - 1)].clone())
        }
        async fn create(&mut self, _: &Value) -> Result<String, WaitError> {
            self.made.push(format!("r-{}", self.made.len() + 1));
            Ok(self.made.last().cloned().unwrap_or_default())
        }
        async fn delete(&mut self, name: &str) -> Result<(), WaitError> {
            self.deleted.push(name.to_owned());
            Ok(())
        }
    }

    fn count(want: &str) -> Expectation {
        Expectation::Status {
            field: "pool count".into(),
            want: want.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_differs_is_replaced_until_one_shows_every_check() {
        let mut requests =
            Scripted::new(vec![json!({ "poolCount": 1 }), json!({ "poolCount": 2 })]);
        let mut request = PoolRequest::new("r-1".into(), spec("d", None, None));
        let started = Instant::now();
        settle(&mut requests, &mut request, vec![count("2")])
            .await
            .unwrap();
        assert_eq!(request.name(), "r-2");
        assert_eq!(request.made(), 2);
        assert_eq!(requests.deleted, ["r-1"]);
        // Not sooner than RETRY_EVERY after the first.
        assert!(started.elapsed() >= RETRY_EVERY);
        // Earlier checks are made again on later requests.
        let e = settle(&mut requests, &mut request, vec![count("more than 1")]).await;
        assert!(e.is_ok());
        assert_eq!(request.checks().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_never_shows_it_times_out_with_what_it_last_saw() {
        let mut requests = Scripted::new(vec![json!({ "poolCount": 1 })]);
        let mut request = PoolRequest::new("r-1".into(), spec("d", None, None));
        let started = Instant::now();
        let e = settle(&mut requests, &mut request, vec![count("2")])
            .await
            .unwrap_err();
        let WaitError::Timeout {
            what,
            after,
            last_seen,
        } = &e
        else {
            panic!("{e}");
        };
        assert_eq!(*after, RETRY_FOR);
        assert!(what.contains(r#"spec {"driver":"d"}"#), "{what}");
        let made = request.made();
        assert_eq!(made, requests.made.len());
        assert!(made > 20, "{made} requests in a minute");
        assert!(
            last_seen.starts_with(&format!(
                "request r-{made} (the last of {made} made with its spec): pool count is 1, expected 2"
            )),
            "{last_seen}"
        );
        assert!(
            last_seen.contains("its status:\npoolCount: 1"),
            "{last_seen}"
        );
        assert!(started.elapsed() <= RETRY_FOR);
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_that_is_never_set_is_what_was_last_seen() {
        struct Unset;
        impl Requests for Unset {
            type Error = WaitError;
            async fn status(&mut self, name: &str) -> Result<Value, WaitError> {
                Err(WaitError::Timeout {
                    what: format!("the status of {name}"),
                    after: STATUS_TIMEOUT,
                    last_seen: "no status".into(),
                })
            }
            async fn create(&mut self, _: &Value) -> Result<String, WaitError> {
                Ok("r-2".into())
            }
            async fn delete(&mut self, _: &str) -> Result<(), WaitError> {
                Ok(())
            }
        }
        let mut request = PoolRequest::new("r-1".into(), spec("d", None, None));
        let e = settle(&mut Unset, &mut request, vec![count("1")])
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("waiting for the status of r-2; last seen: no status"),
            "{e}"
        );
    }

    #[test]
    fn a_change_says_what_became_of_the_object() {
        let e = ChangedError::Changed {
            what: "Pod tester-1".into(),
            dur: Duration::from_secs(5),
            from: "1".into(),
            to: "2".into(),
        };
        assert_eq!(
            e.to_string(),
            "Pod tester-1 changed within 5s: resourceVersion 1 became 2"
        );
    }

    #[test]
    fn a_request_counts_its_replacements() {
        let r = PoolRequest::new("r-1".into(), spec("d", None, None));
        assert_eq!((r.name(), r.made(), r.checks().len()), ("r-1", 1, 0));
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "ResourcePoolStatusRequest",
            "metadata": { "name": "r-1" },
            "status": { "poolCount": 0 },
        }))
        .unwrap();
        assert!(has_status(&o));
        assert_eq!(status_of(&o), json!({ "poolCount": 0 }));
    }
}
