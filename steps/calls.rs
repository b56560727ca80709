//! The plugin's gRPC calls: failure injection, stalling, counting, and the
//! claims it has prepared.
use std::time::Duration;

use anyhow::bail;
use cucumber::{then, when};

use super::World;
use super::claims::claim_name;
use super::params::{ApiVersion, ClaimPhrase, DriverRef, Method, MethodOf, NodeSel};
use crate::plugin::{HealthApi, NodeApi};
use crate::wait::{self, Check};

sentences! {
    #[when(expr = "{method} is made to fail on {node}")]
    fn make_fail(m: MethodOf, node: NodeSel);

    #[when(expr = "{method} no longer fails on {node}")]
    fn stop_fail(m: MethodOf, node: NodeSel);

    #[when(expr = "{method} is stalled on {node}")]
    fn stall(m: MethodOf, node: NodeSel);

    #[when(expr = "{method} is released on {node}")]
    fn release(m: MethodOf, node: NodeSel);

    /// Waits until the method was called at least once on the node(s), and
    /// notes the count for a later "has been called again".
    #[then(expr = "{method} is called on {node}")]
    fn is_called(m: MethodOf, node: NodeSel);

    #[then(expr = "{method} has been called again on {node}")]
    fn called_again(m: MethodOf, node: NodeSel);

    #[then(expr = "{method} was called {int} time(s) on {node}")]
    fn called_n(m: MethodOf, n: u64, node: NodeSel);

    #[then(expr = "{method} was called through the {apiversion} API on {node}")]
    fn called_via(m: MethodOf, api: ApiVersion, node: NodeSel);

    #[then(expr = "the plugin on {node} has prepared {claim}")]
    fn has_prepared(node: NodeSel, claim: ClaimPhrase);

    #[then("no plugin has prepared claims")]
    fn none_prepared();

    /// After a claim was force-deleted and re-created under the same name,
    /// the plugin may still hold the old one (stalled unprepare).
    #[then(expr = "the plugin on {node} still has the old claim {string} prepared")]
    fn old_prepared(node: NodeSel, claim: String);

    #[then(expr = "the plugin on {node} has prepared only the current claim {string}")]
    fn only_current(node: NodeSel, claim: String);
}

/// The methods whose failures the plugin can inject; the health stream is
/// not one of them.
const FAILABLE: [Method; 4] = [
    Method::NodePrepareResources,
    Method::NodeUnprepareResources,
    Method::GetInfo,
    Method::NotifyRegistrationStatus,
];

/// The methods a plugin can hold back until released.
const STALLABLE: [Method; 2] = [Method::NodePrepareResources, Method::NodeUnprepareResources];

fn count(w: &World, driver: &DriverRef, node: &str, m: Method) -> anyhow::Result<u64> {
    let d = w.driver(driver)?;
    Ok(m.paths().iter().map(|p| d.call_count(node, p)).sum())
}

async fn make_fail(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    set_fail(w, m, node, true).await
}

async fn stop_fail(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    set_fail(w, m, node, false).await
}

async fn set_fail(w: &World, m: MethodOf, node: NodeSel, fail: bool) -> anyhow::Result<()> {
    let method = m.one_of(&FAILABLE)?;
    let driver = w.driver(&m.driver)?;
    for n in node.resolve(w).await? {
        for p in method.paths() {
            driver.fail(&n, p, fail);
        }
    }
    Ok(())
}

async fn stall(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let method = m.one_of(&STALLABLE)?;
    let driver = w.driver(&m.driver)?;
    for n in node.resolve(w).await? {
        for p in method.paths() {
            driver.calls().stall(&n, p);
        }
    }
    Ok(())
}

async fn release(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let method = m.one_of(&STALLABLE)?;
    let driver = w.driver(&m.driver)?;
    for n in node.resolve(w).await? {
        for p in method.paths() {
            driver.calls().release(&n, p);
        }
    }
    Ok(())
}

async fn is_called(w: &mut World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let method = m.method;
    for n in node.resolve(w).await? {
        let c = wait::poll(
            &format!("{method} to be called on {n}"),
            Duration::from_secs(300),
            Duration::from_millis(100),
            || {
                let c = count(w, &m.driver, &n, method);
                async move {
                    match c {
                        Ok(c) if c > 0 => Check::Done(c),
                        Ok(c) => Check::Pending(format!("{c} calls")),
                        Err(e) => Check::Fail(e.to_string()),
                    }
                }
            },
        )
        .await?;
        w.marks.insert((n, method.to_string()), c);
    }
    Ok(())
}

async fn called_again(w: &World, m: MethodOf, node: NodeSel) -> anyhow::Result<()> {
    let method = m.method;
    for n in node.resolve(w).await? {
        let Some(mark) = w.marks.get(&(n.clone(), method.to_string())).copied() else {
            bail!(
                "no earlier count of {method} on {n}; use `Then {method} is called on node N` first"
            );
        };
        let now = count(w, &m.driver, &n, method)?;
        if now <= mark {
            bail!(
                "expected {method} on {n} to have been called again since it was counted ({mark} calls), observed {now}"
            );
        }
    }
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
    let driver = w.driver(&m.driver)?;
    for n in node.resolve(w).await? {
        let c = driver.call_count(&n, path);
        if c == 0 {
            let all: Vec<String> = method
                .paths()
                .iter()
                .map(|p| format!("{p}: {}", driver.call_count(&n, p)))
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
    let driver = w.driver(d)?;
    let prepared = driver
        .prepared(node)
        .ok_or_else(|| anyhow::anyhow!("driver {} has no plugin on {node}", driver.name))?;
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
        if !names.iter().any(|(c, uid)| *c == claim && *uid == old) {
            bail!(
                "expected the plugin on {n} to still have the old claim {claim} ({old}) prepared; prepared: {names:?}"
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
