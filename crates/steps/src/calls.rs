//! The plugin's gRPC calls: failure injection, stalling, counting, and the
//! claims it has prepared.
use std::time::Duration;

use anyhow::bail;
use cucumber::{then, when};

use super::World;
use super::claims::claim_name;
use super::params::{ApiVersion, ClaimPhrase, DriverRef, Dur, Method, MethodOf, NodeSel};
use crate::ground::wait;
use crate::harness::calls;
use crate::plugin::calls::{CallOutcome, CallRecord, INJECTED_ERROR, Injection};
use crate::plugin::{Calls, HealthApi, NodeApi};

/// What the call-counting steps remember between steps: the count "`<method>`
/// is called on node N" saw, per node and method, so that "has been called
/// again" waits for a call after it rather than for any call at all.
#[derive(Debug, Default)]
pub struct CallMemory {
    /// Call counts remembered by "is called" for "has been called again".
    pub marks: std::collections::BTreeMap<(String, String), u64>,
}

sentences! {
    #[when(expr = "{method} is made to fail on {node}")]
    fn make_fail(m: MethodOf, node: NodeSel);

    /// The driver does the work, the kubelet gets an error instead of its
    /// answer.
    #[when(expr = "{method} is made to fail after the driver answers on {node}")]
    fn fail_answer(m: MethodOf, node: NodeSel);

    #[when(expr = "{method} is delayed by {duration} on {node}")]
    fn delay(m: MethodOf, d: Dur, node: NodeSel);

    /// The driver does the work, then the connection the call came on is
    /// closed instead of answering.
    #[when(expr = "{method} has its connection cut after the driver answers on {node}")]
    fn cut(m: MethodOf, node: NodeSel);

    /// Ends whatever was injected (a failure, a delay, a cut).
    #[when(expr = "{method} no longer fails on {node}")]
    #[when(expr = "{method} is no longer delayed on {node}")]
    #[when(expr = "{method} is no longer cut on {node}")]
    fn stop_fail(m: MethodOf, node: NodeSel);

    #[when(expr = "{method} is stalled on {node}")]
    fn stall(m: MethodOf, node: NodeSel);

    #[when(expr = "{method} is released on {node}")]
    fn release(m: MethodOf, node: NodeSel);

    /// Waits until the method was called at least once on the node(s), and
    /// notes the count for a later "has been called again".
    #[then(expr = "{method} is called on {node}")]
    fn is_called(m: MethodOf, node: NodeSel);

    /// Moves the count on, so that a later "has been called again" waits
    /// for yet another call.
    #[then(expr = "{method} has been called again on {node}")]
    fn called_again(m: MethodOf, node: NodeSel);

    /// Upstream's `NodePrepareResourcesSucceeded` and its kin: a call that
    /// completed without an error, for the call or any of its claims.
    #[then(expr = "{method} has succeeded on {node}")]
    fn succeeded(m: MethodOf, node: NodeSel);

    /// The count when the step starts holds for the whole duration, as
    /// upstream's `Consistently` on `CountCalls`.
    #[then(expr = "{method} is not called again on {node} for {duration}")]
    fn not_called_again(m: MethodOf, node: NodeSel, d: Dur);

    #[then(expr = "{method} was called {int} time(s) on {node}")]
    fn called_n(m: MethodOf, n: u64, node: NodeSel);

    /// Upstream's node suite counts its listener's accepts: a kubelet keeps
    /// one connection to a plugin for every call, health stream included.
    #[then(expr = "the kubelet opened {int} connection(s) to the DRA socket of {driver} on {node}")]
    fn connections(n: u64, d: DriverRef, node: NodeSel);

    #[then(expr = "{method} was called through the {apiversion} API on {node}")]
    fn called_via(m: MethodOf, api: ApiVersion, node: NodeSel);

    #[then(expr = "the plugin on {node} has prepared {claim}")]
    fn has_prepared(node: NodeSel, claim: ClaimPhrase);

    #[then("no plugin has prepared claims")]
    fn none_prepared();

    /// After a claim was force-deleted and re-created under the same name,
    /// the plugin may still hold the old one (stalled unprepare).
    #[then(expr = "the plugin on {node} has prepared only the old claim {string}")]
    fn old_prepared(node: NodeSel, claim: String);

    #[then(expr = "the plugin on {node} has prepared only the current claim {string}")]
    fn only_current(node: NodeSel, claim: String);
}

/// The methods whose failures the plugin can inject (failed, failed after
/// the answer, delayed, cut).
const FAILABLE: [Method; 4] = [
    Method::NodePrepareResources,
    Method::NodeUnprepareResources,
    Method::GetInfo,
    Method::NotifyRegistrationStatus,
];

/// The health stream can be failed as it opens, and nothing else: an
/// answer it never finishes cannot be replaced, delayed or cut.
const FAILABLE_AS_OPENED: [Method; 5] = [
    Method::NodePrepareResources,
    Method::NodeUnprepareResources,
    Method::GetInfo,
    Method::NotifyRegistrationStatus,
    Method::NodeWatchResources,
];

/// How long the kubelet may take to call again (upstream's retry timeout).
const RETRY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long "is called" waits for a first call.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// The methods a plugin can hold back until released.
const STALLABLE: [Method; 2] = [Method::NodePrepareResources, Method::NodeUnprepareResources];

fn count(w: &World, driver: &DriverRef, node: &str, m: Method) -> anyhow::Result<u64> {
    let calls = w.calls_of(driver)?;
    Ok(m.paths().iter().map(|p| calls.count(node, p)).sum())
}

async fn make_fail(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    inject(w, m, node, Some(Injection::Fail)).await
}

async fn fail_answer(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    inject(w, m, node, Some(Injection::FailAnswer)).await
}

async fn delay(w: &World, m: MethodOf, d: Dur, node: NodeSel) -> anyhow::Result<()> {
    inject(w, m, node, Some(Injection::Delay(d.0))).await
}

async fn cut(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    inject(w, m, node, Some(Injection::Cut)).await
}

async fn stop_fail(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    inject(w, m, node, None).await
}

async fn inject(
    w: &World,
    m: MethodOf,
    node: NodeSel,
    injection: Option<Injection>,
) -> anyhow::Result<()> {
    let method = match injection {
        None | Some(Injection::Fail) => m.one_of(&FAILABLE_AS_OPENED)?,
        Some(_) => m.one_of(&FAILABLE)?,
    };
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        for p in method.paths() {
            calls.inject(&n, p, injection);
        }
    }
    Ok(())
}

async fn stall(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let method = m.one_of(&STALLABLE)?;
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        for p in method.paths() {
            calls.stall(&n, p);
        }
    }
    Ok(())
}

async fn release(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let method = m.one_of(&STALLABLE)?;
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        for p in method.paths() {
            calls.release(&n, p);
        }
    }
    Ok(())
}

/// The method as the harness's call waits name it.
fn observed(m: Method) -> (String, &'static [&'static str]) {
    (m.to_string(), m.paths())
}

async fn is_called(w: &mut World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let (name, paths) = observed(m.method);
    let method = calls::Method { name: &name, paths };
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        let c = calls::called_more_than(&calls, &n, method, 0, CALL_TIMEOUT).await?;
        w.calls.marks.insert((n, m.method.to_string()), c);
    }
    Ok(())
}

/// Waits (as the kubelet retries on its own schedule) until the method was
/// called more often than when it was counted.
async fn called_again(w: &mut World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let (name, paths) = observed(m.method);
    let method = calls::Method { name: &name, paths };
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        let Some(mark) = w.calls.marks.get(&(n.clone(), name.clone())).copied() else {
            bail!("no earlier count of {name} on {n}; use `Then {name} is called on node N` first");
        };
        let now = calls::called_more_than(&calls, &n, method, mark, RETRY_TIMEOUT).await?;
        w.calls.marks.insert((n, name.clone()), now);
    }
    Ok(())
}

async fn succeeded(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let (name, paths) = observed(m.method);
    let method = calls::Method { name: &name, paths };
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        calls::a_call_succeeded(&calls, &n, method, RETRY_TIMEOUT).await?;
    }
    Ok(())
}

async fn not_called_again(w: &World, m: MethodOf, node: NodeSel, d: Dur) -> anyhow::Result<()> {
    let (name, paths) = observed(m.method);
    let method = calls::Method { name: &name, paths };
    let nodes = node.resolve(w).await?;
    calls::not_called_again(&w.calls_of(&m.driver)?, &nodes, method, d.0).await?;
    Ok(())
}

async fn called_n(w: &World, m: MethodOf, n: u64, node: NodeSel) -> anyhow::Result<()> {
    let method = m.method;
    for node in node.resolve(w).await? {
        let c = count(w, &m.driver, &node, method)?;
        if c != n {
            bail!("expected {method} to have been called {n} time(s) on {node}, observed {c}");
        }
    }
    Ok(())
}

async fn connections(w: &World, n: u64, d: DriverRef, node: NodeSel) -> anyhow::Result<()> {
    if w.external_driver(&d).is_some() {
        bail!(
            "the connections to a plugin are counted only for the suite's own drivers, not for \
             the driver under test"
        );
    }
    let calls = w.calls_of(&d)?;
    for node in node.resolve(w).await? {
        let c = calls.connections(&node);
        if c != n {
            bail!(
                "expected the kubelet to have opened {n} connection(s) to the DRA socket of driver \
                 {} on {node}, observed {c}",
                calls.driver()
            );
        }
    }
    Ok(())
}

async fn called_via(w: &World, m: MethodOf, api: ApiVersion, node: NodeSel) -> anyhow::Result<()> {
    let path = match m.one_of(&[
        Method::NodePrepareResources,
        Method::NodeUnprepareResources,
        Method::NodeWatchResources,
    ])? {
        Method::NodeWatchResources => api.0.parse::<HealthApi>()?.watch_method(),
        Method::NodePrepareResources => api.0.parse::<NodeApi>()?.prepare_method(),
        _ => api.0.parse::<NodeApi>()?.unprepare_method(),
    };
    let method = m.method;
    let calls = w.calls_of(&m.driver)?;
    for n in node.resolve(w).await? {
        let c = calls.count(&n, path);
        if c == 0 {
            let all: Vec<String> = method
                .paths()
                .iter()
                .map(|p| format!("{p}: {}", calls.count(&n, p)))
                .collect();
            bail!(
                "expected {method} through the {} API on {n}; calls observed: {}",
                api.0,
                all.join(", ")
            );
        }
    }
    Ok(())
}

/// (name, UID) of the claims the driver's plugin on `node` has prepared.
fn prepared_names(w: &World, d: &DriverRef, node: &str) -> anyhow::Result<Vec<(String, String)>> {
    let prepared = w.prepared_of(d, node)?;
    if w.external_driver(d).is_some() {
        // The driver under test serves the whole run: only this scenario's
        // claims are its business.
        return Ok(prepared
            .claims()
            .into_iter()
            .filter(|c| prepared.get(c).is_some_and(|p| p.namespace == w.namespace))
            .map(|c| (c.name, c.uid))
            .collect());
    }
    Ok(prepared
        .claims()
        .into_iter()
        .map(|c| (c.name, c.uid))
        .collect())
}

async fn has_prepared(w: &World, node: NodeSel, claim: ClaimPhrase) -> anyhow::Result<()> {
    let name = claim_name(w, &claim).await?;
    for n in node.resolve(w).await? {
        let names = prepared_names(w, &DriverRef::The, &n)?;
        if !names.iter().any(|(c, _)| *c == name) {
            bail!("expected the plugin on {n} to have prepared claim {name}; prepared: {names:?}");
        }
    }
    Ok(())
}

async fn none_prepared(w: &World) -> anyhow::Result<()> {
    if w.external_driver(&DriverRef::The).is_some() {
        for n in &w.nodes {
            let prepared = w.prepared_of(&DriverRef::The, n)?;
            let ours = |c: &crate::plugin::ClaimId| {
                prepared.get(c).is_some_and(|p| p.namespace == w.namespace)
            };
            prepared
                .wait_until(
                    "the scenario's claims to be unprepared",
                    Duration::from_secs(60),
                    |claims| !claims.iter().any(ours),
                )
                .await
                .map_err(|e| {
                    anyhow::anyhow!("the driver under test on {n} still has claims prepared: {e}")
                })?;
        }
    }
    for (_, d) in w.scenario.drivers() {
        for n in d.nodenames() {
            if let Some(p) = d.prepared(n) {
                p.wait_until_empty(Duration::from_secs(60))
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "the plugin of {} on {n} still has claims prepared: {e}",
                            d.name
                        )
                    })?;
            }
        }
    }
    Ok(())
}

async fn old_prepared(w: &World, node: NodeSel, claim: String) -> anyhow::Result<()> {
    let old = w
        .scenario
        .claim_uid(&claim)
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("claim {claim} was not created by this scenario"))?;
    for n in node.resolve(w).await? {
        let names = prepared_names(w, &DriverRef::The, &n)?;
        if names != [(claim.clone(), old.clone())] {
            bail!(
                "expected the plugin on {n} to have only the old claim {claim} ({old}) prepared; prepared: {names:?}"
            );
        }
    }
    Ok(())
}

async fn only_current(w: &World, node: NodeSel, claim: String) -> anyhow::Result<()> {
    let current = w.claim(&claim).await?.metadata.uid.unwrap_or_default();
    // Checked at once, not waited for: a pod that runs must not have been
    // started before the old claim was unprepared.
    for n in node.resolve(w).await? {
        let names = prepared_names(w, &DriverRef::The, &n)?;
        if names != [(claim.clone(), current.clone())] {
            bail!("expected only claim {claim} ({current}) prepared on {n}; prepared: {names:?}");
        }
    }
    Ok(())
}

/// What a failed pod wait adds from the call logs of `calls` (the
/// scenario's hosted drivers, the interposed driver under test): per
/// driver, how many `NodePrepareResources` calls for the pod's claims
/// failed on its node, and why the last one did.
pub(crate) fn prepare_errors(calls: Vec<Calls>) -> wait::diagnose::DriverNotes {
    std::sync::Arc::new(move |node: &str, claim_uids: &[String]| {
        calls
            .iter()
            .filter_map(|c| {
                let failed = c.failed_prepares(node, claim_uids);
                let last = failed.last()?;
                Some(format!(
                    "driver {}: {} failed NodePrepareResources call(s) on {node}, the last at {}: {}",
                    c.driver(),
                    failed.len(),
                    last.started.strftime("%H:%M:%SZ"),
                    call_failure(last)
                ))
            })
            .collect()
    })
}

/// Why a failed call failed: its error, and each of its claims' errors.
fn call_failure(r: &CallRecord) -> String {
    let mut parts = Vec::new();
    match &r.outcome {
        CallOutcome::Error { code, message } => parts.push(format!("{code:?}: {message}")),
        CallOutcome::Injected => parts.push(format!("{INJECTED_ERROR} (injected)")),
        CallOutcome::AnswerLost => parts.push("answered, the answer lost by injection".to_owned()),
        _ => {}
    }
    parts.extend(
        r.claim_errors
            .iter()
            .map(|(uid, m)| format!("claim {uid}: {m}")),
    );
    parts.join("; ")
}
