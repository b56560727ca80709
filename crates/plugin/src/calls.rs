//! Counting, failure injection, stalling and logging of every gRPC call a
//! plugin receives, keyed by (node, full gRPC method path).
//!
//! [`CallsLayer`] is a tower layer put in front of both servers of a node. The
//! state behind it ([`Calls`]) is shared by all nodes of a driver. Its lock is
//! held only to update counters and the log, never while a handler runs, so calls
//! from different nodes (or parallel calls on one node) never wait for each other.
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tower::{Layer, Service};
use tracing::{Instrument, Span, debug, info};

use super::watch::{Changes, WaitTimeout};
use dra_e2e_conn::ConnInfo;
use dra_e2e_proto::dra::ClaimRef;

/// Message of an injected failure (status UNKNOWN), as upstream's harness sends it.
pub const INJECTED_ERROR: &str = "injected error";

/// What the layer does to calls of one method on one node, besides counting
/// them. Upstream's harness knows only [`Injection::Fail`]; the others are
/// what a real driver behind the interposer can meet in the field: an answer
/// lost after the work was done, a slow plugin, a connection that breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// Fail with UNKNOWN `injected error` without calling the handler.
    Fail,
    /// Call the handler (the driver does the work), then fail with UNKNOWN
    /// `injected error` instead of its answer: a partial failure the
    /// kubelet must recover from.
    FailAnswer,
    /// Call the handler after waiting this long.
    Delay(Duration),
    /// Call the handler, then close the connection the call came on instead
    /// of answering, as a plugin that crashes mid-call does.
    Cut,
}

impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Injection::Fail => f.write_str("fail before the handler"),
            Injection::FailAnswer => f.write_str("fail after the handler answered"),
            Injection::Delay(d) => write!(f, "delay by {d:?}"),
            Injection::Cut => f.write_str("cut the connection after the handler answered"),
        }
    }
}

/// How a logged call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// Still running, or stalled before the handler.
    InProgress,
    /// The handler returned a response (for a stream: the stream started).
    Ok,
    /// The handler returned an error status.
    Error { code: tonic::Code, message: String },
    /// Failed by injection; the handler was not called.
    Injected,
    /// The handler answered, and the answer was replaced by an injected
    /// failure ([`Injection::FailAnswer`]) or its connection cut
    /// ([`Injection::Cut`]).
    AnswerLost,
    /// The plugin stopped while the call was running or stalled.
    Cancelled,
    /// The client went away (e.g. its deadline passed) before the call finished.
    Abandoned,
}

/// One call received by one node's plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// Unique per [`Calls`], increasing in arrival order.
    pub id: u64,
    pub node: String,
    /// Full gRPC method path, see [`dra_e2e_proto::method`].
    pub method: String,
    pub started: jiff::Timestamp,
    pub finished: Option<jiff::Timestamp>,
    /// Claims named in a prepare/unprepare request, once the handler has read it.
    pub claims: Vec<ClaimRef>,
    /// Per-claim errors returned inside an otherwise successful response, by claim UID.
    pub claim_errors: BTreeMap<String, String>,
    pub outcome: CallOutcome,
}

impl CallRecord {
    /// The call completed and neither the call nor any of its claims failed.
    pub fn succeeded(&self) -> bool {
        self.outcome == CallOutcome::Ok && self.claim_errors.is_empty()
    }

    /// The call completed with an error, an injected failure or a per-claim error.
    pub fn failed(&self) -> bool {
        match self.outcome {
            CallOutcome::Error { .. } | CallOutcome::Injected | CallOutcome::AnswerLost => true,
            CallOutcome::Ok => !self.claim_errors.is_empty(),
            CallOutcome::InProgress | CallOutcome::Cancelled | CallOutcome::Abandoned => false,
        }
    }

    pub fn in_progress(&self) -> bool {
        self.outcome == CallOutcome::InProgress
    }
}

impl fmt::Display for CallRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} {} {}",
            self.id, self.started, self.node, self.method
        )?;
        if !self.claims.is_empty() {
            let names: Vec<String> = self.claims.iter().map(ToString::to_string).collect();
            write!(f, " claims=[{}]", names.join(", "))?;
        }
        match &self.outcome {
            CallOutcome::InProgress => write!(f, " in progress")?,
            CallOutcome::Ok => write!(f, " ok")?,
            CallOutcome::Error { code, message } => write!(f, " error {code:?}: {message}")?,
            CallOutcome::Injected => write!(f, " injected error")?,
            CallOutcome::AnswerLost => write!(f, " answered, answer lost by injection")?,
            CallOutcome::Cancelled => write!(f, " cancelled by plugin stop")?,
            CallOutcome::Abandoned => write!(f, " abandoned by the client")?,
        }
        for (uid, message) in &self.claim_errors {
            write!(f, "; claim {uid}: {message}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct MethodState {
    count: u64,
    injection: Option<Injection>,
    /// Present while the method is stalled; `true` is sent on release.
    gate: Option<watch::Sender<bool>>,
    stalled: usize,
}

#[derive(Debug, Default)]
struct State {
    methods: HashMap<(String, String), MethodState>,
    log: HashMap<String, Vec<CallRecord>>,
    /// Connections the kubelet opened to the DRA socket, per node.
    connections: HashMap<String, u64>,
}

impl State {
    fn method(&mut self, node: &str, method: &str) -> &mut MethodState {
        self.methods
            .entry((node.to_owned(), method.to_owned()))
            .or_default()
    }

    fn peek(&self, node: &str, method: &str) -> Option<&MethodState> {
        // HashMap<(String, String), _> cannot be queried with borrowed tuples;
        // the map is small, so a scan keeps the key type simple.
        self.methods
            .iter()
            .find(|((n, m), _)| n == node && m == method)
            .map(|(_, s)| s)
    }

    fn record(&mut self, node: &str, id: u64) -> Option<&mut CallRecord> {
        let log = self.log.get_mut(node)?;
        let idx = log.binary_search_by_key(&id, |r| r.id).ok()?;
        log.get_mut(idx)
    }
}

#[derive(Debug)]
struct Inner {
    driver: String,
    state: Mutex<State>,
    changes: Changes,
    next_id: AtomicU64,
}

/// Counts, fail flags, stalls and call logs of one driver, for all its nodes.
/// Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct Calls {
    inner: Arc<Inner>,
}

impl Calls {
    pub fn new(driver: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                driver: driver.into(),
                state: Mutex::new(State::default()),
                changes: Changes::default(),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    pub fn driver(&self) -> &str {
        &self.inner.driver
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; recover the data if it ever does.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The layer for `node`'s servers. Calls still running or stalled when
    /// `shutdown` is cancelled end with UNAVAILABLE, so a stopping server can drain.
    /// Handlers run in the span current here, so their logs stay attached to
    /// whatever (scenario) started the plugin.
    pub fn layer(&self, node: impl Into<String>, shutdown: CancellationToken) -> CallsLayer {
        CallsLayer {
            calls: self.clone(),
            node: Arc::from(node.into()),
            shutdown,
            span: Span::current(),
        }
    }

    /// The kubelet opened a connection to the DRA socket on `node`.
    pub fn connection_opened(&self, node: &str) {
        *self.state().connections.entry(node.to_owned()).or_default() += 1;
        self.inner.changes.bump();
    }

    /// Connections opened to the DRA socket on `node` so far: a kubelet
    /// keeps one for every call (upstream's node suite counts its
    /// listener's accepts).
    pub fn connections(&self, node: &str) -> u64 {
        self.state().connections.get(node).copied().unwrap_or(0)
    }

    /// Calls of `method` on `node` so far, injected failures included.
    pub fn count(&self, node: &str, method: &str) -> u64 {
        self.state().peek(node, method).map_or(0, |m| m.count)
    }

    /// Every (node, method) counter.
    pub fn counts(&self) -> BTreeMap<(String, String), u64> {
        self.state()
            .methods
            .iter()
            .filter(|(_, m)| m.count > 0)
            .map(|(k, m)| (k.clone(), m.count))
            .collect()
    }

    /// While set, calls of `method` on `node` fail with UNKNOWN `injected error`
    /// without reaching the handler. Takes effect for calls not yet past the
    /// stall gate.
    pub fn set_fail(&self, node: &str, method: &str, fail: bool) {
        self.inject(node, method, fail.then_some(Injection::Fail));
    }

    /// Sets what happens to calls of `method` on `node` from now on (`None`:
    /// nothing but counting). Takes effect for calls not yet past the stall
    /// gate.
    pub fn inject(&self, node: &str, method: &str, injection: Option<Injection>) {
        self.state().method(node, method).injection = injection;
        let what = injection.map_or_else(|| "none".to_owned(), |i| i.to_string());
        info!(driver = %self.inner.driver, node, method, injection = %what, "call injection changed");
        self.inner.changes.bump();
    }

    pub fn is_failing(&self, node: &str, method: &str) -> bool {
        self.injection(node, method) == Some(Injection::Fail)
    }

    pub fn injection(&self, node: &str, method: &str) -> Option<Injection> {
        self.state().peek(node, method).and_then(|m| m.injection)
    }

    /// Makes calls of `method` on `node` wait (counted and logged as in
    /// progress) until [`Calls::release`].
    pub fn stall(&self, node: &str, method: &str) {
        let mut state = self.state();
        let m = state.method(node, method);
        if m.gate.is_none() {
            m.gate = Some(watch::Sender::new(false));
        }
        drop(state);
        info!(driver = %self.inner.driver, node, method, "calls stalled");
        self.inner.changes.bump();
    }

    /// Lets stalled and future calls of `method` on `node` proceed.
    pub fn release(&self, node: &str, method: &str) {
        let gate = self.state().method(node, method).gate.take();
        if let Some(gate) = gate {
            gate.send_replace(true);
        }
        info!(driver = %self.inner.driver, node, method, "stalled calls released");
        self.inner.changes.bump();
    }

    /// Ends every injected failure and releases every stall, on every node:
    /// what a scenario broke must not keep its teardown from unpreparing.
    pub fn heal_all(&self) {
        let mut state = self.state();
        let mut healed = 0;
        for m in state.methods.values_mut() {
            if m.injection.take().is_some() {
                healed += 1;
            }
            if let Some(gate) = m.gate.take() {
                gate.send_replace(true);
                healed += 1;
            }
        }
        drop(state);
        if healed > 0 {
            info!(driver = %self.inner.driver, healed, "injected failures and stalls ended");
            self.inner.changes.bump();
        }
    }

    /// Calls of `method` on `node` currently waiting for [`Calls::release`].
    pub fn stalled(&self, node: &str, method: &str) -> usize {
        self.state().peek(node, method).map_or(0, |m| m.stalled)
    }

    /// Calls received by `node`, oldest first.
    pub fn log(&self, node: &str) -> Vec<CallRecord> {
        self.state().log.get(node).cloned().unwrap_or_default()
    }

    /// The failed `NodePrepareResources` calls `node` received for one of
    /// the claims `claim_uids` names, oldest first. A call failed before
    /// the handler read its claims (an injected failure) names none and
    /// counts for every claim.
    pub fn failed_prepares(&self, node: &str, claim_uids: &[String]) -> Vec<CallRecord> {
        let state = self.state();
        let Some(log) = state.log.get(node) else {
            return Vec::new();
        };
        log.iter()
            .filter(|r| r.method.ends_with("/NodePrepareResources") && r.failed())
            .filter(|r| r.claims.is_empty() || r.claims.iter().any(|c| claim_uids.contains(&c.uid)))
            .cloned()
            .collect()
    }

    /// Calls received by all nodes, in arrival order.
    pub fn log_all(&self) -> Vec<CallRecord> {
        let mut all: Vec<CallRecord> = self.state().log.values().flatten().cloned().collect();
        all.sort_by_key(|r| r.id);
        all
    }

    /// Starts over: every counter and call log is forgotten and every
    /// injection and stall ended, for a driver that outlives one scenario
    /// (the run's driver under test behind the interposer).
    pub fn reset(&self) {
        self.heal_all();
        let mut state = self.state();
        for m in state.methods.values_mut() {
            m.count = 0;
        }
        state.log.clear();
        drop(state);
        self.inner.changes.bump();
    }

    /// Forgets `node`'s call log; counters stay.
    pub fn clear_log(&self, node: &str) {
        self.state().log.remove(node);
        self.inner.changes.bump();
    }

    /// Waits until `method` on `node` was called at least `at_least` times.
    pub async fn wait_count(
        &self,
        node: &str,
        method: &str,
        at_least: u64,
        timeout: Duration,
    ) -> Result<u64, WaitTimeout> {
        self.inner
            .changes
            .wait_until(
                || format!("{at_least} call(s) of {method} on node {node}"),
                timeout,
                || match self.count(node, method) {
                    n if n >= at_least => Ok(n),
                    n => Err(format!("{n} call(s)")),
                },
            )
            .await
    }

    /// Waits until at least `at_least` calls of `method` on `node` are stalled.
    pub async fn wait_stalled(
        &self,
        node: &str,
        method: &str,
        at_least: usize,
        timeout: Duration,
    ) -> Result<usize, WaitTimeout> {
        self.inner
            .changes
            .wait_until(
                || format!("{at_least} stalled call(s) of {method} on node {node}"),
                timeout,
                || match self.stalled(node, method) {
                    n if n >= at_least => Ok(n),
                    n => Err(format!("{n} stalled call(s)")),
                },
            )
            .await
    }

    /// Waits until `node`'s log holds a call matching `pred`, and returns it.
    /// `what` describes the call for the timeout message.
    pub async fn wait_for_call(
        &self,
        node: &str,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&CallRecord) -> bool,
    ) -> Result<CallRecord, WaitTimeout> {
        self.inner
            .changes
            .wait_until(
                || format!("{what} on node {node}"),
                timeout,
                || {
                    let state = self.state();
                    let log = state.log.get(node).map(Vec::as_slice).unwrap_or_default();
                    match log.iter().find(|r| pred(r)) {
                        Some(r) => Ok(r.clone()),
                        None => Err(match log.last() {
                            Some(last) => format!("{} call(s), last {last}", log.len()),
                            None => "no calls".to_owned(),
                        }),
                    }
                },
            )
            .await
    }

    /// Counts and logs a new call; returns what the layer must do with it.
    fn admit(&self, node: &str, method: &str) -> Admission {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state();
        let m = state.method(node, method);
        m.count += 1;
        let gate = m.gate.as_ref().map(|g| g.subscribe());
        if gate.is_some() {
            m.stalled += 1;
        }
        state
            .log
            .entry(node.to_owned())
            .or_default()
            .push(CallRecord {
                id,
                node: node.to_owned(),
                method: method.to_owned(),
                started: jiff::Timestamp::now(),
                finished: None,
                claims: Vec::new(),
                claim_errors: BTreeMap::new(),
                outcome: CallOutcome::InProgress,
            });
        drop(state);
        self.inner.changes.bump();
        Admission { id, gate }
    }

    /// A stalled call stopped waiting; returns what is injected into it.
    fn pass_gate(&self, node: &str, method: &str, was_stalled: bool) -> Option<Injection> {
        let mut state = self.state();
        let m = state.method(node, method);
        if was_stalled {
            m.stalled = m.stalled.saturating_sub(1);
        }
        let fail = m.injection;
        drop(state);
        if was_stalled {
            self.inner.changes.bump();
        }
        fail
    }

    fn update(&self, node: &str, id: u64, f: impl FnOnce(&mut CallRecord)) {
        if let Some(record) = self.state().record(node, id) {
            f(record);
        }
        self.inner.changes.bump();
    }

    fn finish(&self, node: &str, id: u64, outcome: CallOutcome) {
        self.update(node, id, |r| {
            r.finished = Some(jiff::Timestamp::now());
            r.outcome = outcome;
        });
    }
}

struct Admission {
    id: u64,
    gate: Option<watch::Receiver<bool>>,
}

/// A call between admission and its outcome. Dropped unfinished, the client
/// went away (hyper drops the future on RST_STREAM or a closed connection),
/// which is logged as abandoned and never leaves a stalled count behind.
struct Pending {
    calls: Calls,
    node: Arc<str>,
    method: String,
    id: u64,
    stalled: bool,
    finished: bool,
}

impl Pending {
    /// Leaves the stall gate; returns what is injected into the call.
    fn pass_gate(&mut self) -> Option<Injection> {
        let was_stalled = std::mem::take(&mut self.stalled);
        self.calls.pass_gate(&self.node, &self.method, was_stalled)
    }

    fn finish(&mut self, outcome: CallOutcome) {
        if self.stalled {
            self.pass_gate();
        }
        self.finished = true;
        self.calls.finish(&self.node, self.id, outcome);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.finished {
            self.finish(CallOutcome::Abandoned);
        }
    }
}

/// Handed to gRPC handlers through the request extensions, so that they can add
/// what only they can see (claims, per-claim errors) to the call's log record.
#[derive(Debug, Clone)]
pub struct CallNote {
    calls: Calls,
    node: Arc<str>,
    id: u64,
}

impl CallNote {
    pub fn set_claims(&self, claims: Vec<ClaimRef>) {
        self.calls
            .update(&self.node, self.id, |r| r.claims = claims);
    }

    pub fn claim_error(&self, uid: &str, message: &str) {
        self.calls.update(&self.node, self.id, |r| {
            r.claim_errors.insert(uid.to_owned(), message.to_owned());
        });
    }
}

/// Applies [`Calls`] to one node's server. See [`Calls::layer`].
#[derive(Debug, Clone)]
pub struct CallsLayer {
    calls: Calls,
    node: Arc<str>,
    shutdown: CancellationToken,
    span: Span,
}

impl<S> Layer<S> for CallsLayer {
    type Service = CallsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallsService {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CallsService<S> {
    inner: S,
    layer: CallsLayer,
}

impl<S, B> Service<http::Request<B>> for CallsService<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The clone is not ready; keep the instance poll_ready was called on.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let CallsLayer {
            calls,
            node,
            shutdown,
            span,
        } = self.layer.clone();
        let method = req.uri().path().to_owned();
        let Admission { id, gate } = calls.admit(&node, &method);
        req.extensions_mut().insert(CallNote {
            calls: calls.clone(),
            node: node.clone(),
            id,
        });
        let driver = calls.driver().to_owned();
        span.in_scope(|| {
            debug!(%driver, node = %node, %method, id, stalled = gate.is_some(), "call received");
        });

        let mut pending = Pending {
            calls,
            node,
            method,
            id,
            stalled: gate.is_some(),
            finished: false,
        };
        let call = async move {
            if let Some(mut gate) = gate {
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => {
                        pending.finish(CallOutcome::Cancelled);
                        return Ok(stopping());
                    }
                    // An error means the gate was dropped, which also releases.
                    _ = gate.wait_for(|released| *released) => {}
                }
            }
            let injection = pending.pass_gate();
            match injection {
                Some(Injection::Fail) => {
                    info!(%driver, node = %pending.node, method = %pending.method, id, "failing call by injection");
                    pending.finish(CallOutcome::Injected);
                    return Ok(tonic::Status::unknown(INJECTED_ERROR).into_http());
                }
                Some(Injection::Delay(d)) => {
                    tokio::select! {
                        biased;
                        _ = shutdown.cancelled() => {
                            pending.finish(CallOutcome::Cancelled);
                            return Ok(stopping());
                        }
                        _ = tokio::time::sleep(d) => {}
                    }
                }
                _ => {}
            }
            let cut = req.extensions().get::<ConnInfo>().map(|c| c.cut.clone());
            // Biased: a stopped plugin must not start handlers on connections
            // that are still draining.
            let result = tokio::select! {
                biased;
                _ = shutdown.cancelled() => {
                    pending.finish(CallOutcome::Cancelled);
                    return Ok(stopping());
                }
                r = inner.call(req) => r,
            };
            let outcome = match &result {
                Ok(resp) => match tonic::Status::from_header_map(resp.headers()) {
                    Some(s) if s.code() != tonic::Code::Ok => CallOutcome::Error {
                        code: s.code(),
                        message: s.message().to_owned(),
                    },
                    // Unary successes carry their status in trailers.
                    _ => CallOutcome::Ok,
                },
                Err(_) => CallOutcome::Error {
                    code: tonic::Code::Internal,
                    message: "server error".to_owned(),
                },
            };
            debug!(%driver, node = %pending.node, method = %pending.method, id, ?outcome, "call finished");
            match injection {
                Some(Injection::FailAnswer) => {
                    info!(%driver, node = %pending.node, method = %pending.method, id, "failing the answered call by injection");
                    pending.finish(CallOutcome::AnswerLost);
                    // The answer's body is dropped unread: the handler's work
                    // is done, the kubelet sees only the failure.
                    drop(result);
                    return Ok(tonic::Status::unknown(INJECTED_ERROR).into_http());
                }
                Some(Injection::Cut) => {
                    info!(%driver, node = %pending.node, method = %pending.method, id, "cutting the answered call's connection by injection");
                    pending.finish(CallOutcome::AnswerLost);
                    drop(result);
                    match cut {
                        Some(cut) => {
                            cut.cut();
                            // The connection is gone; this answer never leaves.
                            return futures::future::pending().await;
                        }
                        // A connection the layer cannot close (not a
                        // `Conn`): the stream alone is reset instead.
                        None => return Ok(reset()),
                    }
                }
                _ => {}
            }
            pending.finish(outcome);
            result
        };
        Box::pin(call.instrument(span))
    }
}

/// A response whose body fails at once: h2 resets the call's stream.
fn reset() -> http::Response<Body> {
    let body = http_body_util::StreamBody::new(futures::stream::once(async {
        Err::<http_body::Frame<bytes::Bytes>, _>(tonic::Status::unavailable(
            "the call's stream was reset by injection",
        ))
    }));
    http::Response::new(Body::new(body))
}

fn stopping() -> http::Response<Body> {
    tonic::Status::unavailable("kubelet plugin is stopping").into_http()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn ok_service() -> impl Service<
        http::Request<()>,
        Response = http::Response<Body>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
    + Send
    + 'static {
        tower::service_fn(|req: http::Request<()>| async move {
            // Proves the handler ran and could reach its log record.
            let note = req.extensions().get::<CallNote>().cloned();
            if let Some(note) = note {
                note.claim_error("uid-1", "handler ran");
            }
            Ok::<_, Infallible>(http::Response::new(Body::default()))
        })
    }

    fn request(path: &str) -> http::Request<()> {
        http::Request::builder().uri(path).body(()).unwrap()
    }

    #[tokio::test]
    async fn counts_before_failing_and_skips_the_handler() {
        let calls = Calls::new("d");
        let mut svc = calls
            .layer("n1", CancellationToken::new())
            .layer(ok_service());
        calls.set_fail("n1", "/s/M", true);
        let resp = svc.call(request("/s/M")).await.unwrap();
        let status = tonic::Status::from_header_map(resp.headers()).unwrap();
        assert_eq!(status.code(), tonic::Code::Unknown);
        assert_eq!(status.message(), INJECTED_ERROR);
        assert_eq!(calls.count("n1", "/s/M"), 1);
        assert_eq!(calls.count("n2", "/s/M"), 0);
        let log = calls.log("n1");
        assert_eq!(log[0].outcome, CallOutcome::Injected);
        assert!(log[0].claim_errors.is_empty(), "handler must not run");

        calls.set_fail("n1", "/s/M", false);
        svc.call(request("/s/M")).await.unwrap();
        let log = calls.log("n1");
        assert_eq!(log[1].outcome, CallOutcome::Ok);
        assert_eq!(log[1].claim_errors["uid-1"], "handler ran");
        assert_eq!(calls.count("n1", "/s/M"), 2);
    }

    #[tokio::test]
    async fn failed_prepares_are_the_nodes_failed_prepare_calls() {
        const PREPARE: &str = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources";
        let calls = Calls::new("d");
        let mut svc = calls
            .layer("n1", CancellationToken::new())
            .layer(ok_service());
        calls.set_fail("n1", PREPARE, true);
        calls.set_fail("n1", "/s/M", true);
        svc.call(request(PREPARE)).await.unwrap();
        svc.call(request("/s/M")).await.unwrap();
        // Answered, but with a claim's error: failed too.
        calls.set_fail("n1", PREPARE, false);
        svc.call(request(PREPARE)).await.unwrap();
        let failed = calls.failed_prepares("n1", &[]);
        let outcomes: Vec<(&CallOutcome, usize)> = failed
            .iter()
            .map(|r| (&r.outcome, r.claim_errors.len()))
            .collect();
        assert_eq!(
            outcomes,
            [(&CallOutcome::Injected, 0), (&CallOutcome::Ok, 1)]
        );
        assert!(calls.failed_prepares("n2", &[]).is_empty());
    }

    #[tokio::test]
    async fn a_lost_answer_runs_the_handler_and_fails_the_call() {
        let calls = Calls::new("d");
        let mut svc = calls
            .layer("n1", CancellationToken::new())
            .layer(ok_service());
        calls.inject("n1", "/s/M", Some(Injection::FailAnswer));
        let resp = svc.call(request("/s/M")).await.unwrap();
        let status = tonic::Status::from_header_map(resp.headers()).unwrap();
        assert_eq!(status.message(), INJECTED_ERROR);
        let log = calls.log("n1");
        assert_eq!(log[0].outcome, CallOutcome::AnswerLost);
        assert_eq!(log[0].claim_errors["uid-1"], "handler ran");
        assert!(log[0].failed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_call_reaches_the_handler_after_the_delay() {
        let calls = Calls::new("d");
        let mut svc = calls
            .layer("n1", CancellationToken::new())
            .layer(ok_service());
        calls.inject("n1", "/s/M", Some(Injection::Delay(Duration::from_secs(5))));
        let started = tokio::time::Instant::now();
        let resp = svc.call(request("/s/M")).await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(5));
        assert!(tonic::Status::from_header_map(resp.headers()).is_none());
        assert_eq!(calls.log("n1")[0].outcome, CallOutcome::Ok);
        // Ended: the next call is not held.
        calls.inject("n1", "/s/M", None);
        let started = tokio::time::Instant::now();
        svc.call(request("/s/M")).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_cut_call_closes_its_connection_after_the_handler_ran() {
        let calls = Calls::new("d");
        let mut svc = calls
            .layer("n1", CancellationToken::new())
            .layer(ok_service());
        calls.inject("n1", "/s/M", Some(Injection::Cut));
        let cut = dra_e2e_conn::CutHandle::default();
        let mut req = request("/s/M");
        req.extensions_mut().insert(ConnInfo {
            peer: "test".into(),
            cut: cut.clone(),
        });
        // The answer never leaves: the call waits until the server drops it
        // with its connection.
        let call = svc.call(req);
        assert!(
            tokio::time::timeout(Duration::from_millis(200), call)
                .await
                .is_err()
        );
        assert!(cut.is_cut());
        let log = calls.log("n1");
        assert_eq!(log[0].outcome, CallOutcome::AnswerLost);
        assert_eq!(log[0].claim_errors["uid-1"], "handler ran");

        // Without a connection to cut, the call's stream is reset instead.
        let resp = svc.call(request("/s/M")).await.unwrap();
        let body = http_body_util::BodyExt::collect(resp.into_body()).await;
        assert!(body.is_err(), "the body must fail, resetting the stream");
    }
}
