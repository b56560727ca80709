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
mod expectations;
mod unchanged;

use std::future::Future;
use std::time::Duration;

use dra_e2e_kube::wait::{self, WaitError};
use futures::TryStreamExt as _;
use k8s_openapi::api::resource::v1alpha3::ResourcePoolStatusRequest;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, WatchEvent, WatchParams};
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

pub use expectations::{
    Expectation, POOL_FIELDS, Partition, STATUS_FIELDS, evaluate, is_pool_field, is_status_field,
    matches,
};
pub use unchanged::{ChangedError, unchanged_for};

use expectations::is_none;

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

/// The kind of a request, for the dynamic API.
pub fn resource() -> ApiResource {
    ApiResource::erase::<ResourcePoolStatusRequest>(&())
}

/// The cluster's requests (they are cluster-scoped).
pub fn requests(client: Client) -> Api<DynamicObject> {
    Api::all_with(client, &resource())
}

#[derive(Debug, thiserror::Error)]
#[error("deleting ResourcePoolStatusRequest {name}")]
pub struct DeleteError {
    name: String,
    #[source]
    source: kube::Error,
}

/// Deletes request `name`, if it is still there.
pub async fn delete(requests: &Api<DynamicObject>, name: &str) -> Result<(), DeleteError> {
    dra_e2e_kube::objects::delete_if_present(requests, name, &DeleteParams::default())
        .await
        .map_err(|source| DeleteError {
            name: name.to_owned(),
            source,
        })
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
