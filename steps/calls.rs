//! The plugin's gRPC calls: failure injection, stalling, counting, and the
//! claims it has prepared.
use std::time::Duration;

use anyhow::bail;
use cucumber::{then, when};

use super::claims::claim_name;
use super::params::{ClaimRef, DriverRef, Method, NodeSel};
use super::{World, run};
use crate::plugin::{HealthApi, NodeApi};
use crate::wait::{self, Check};

fn count(w: &World, driver: &str, node: &str, m: Method) -> anyhow::Result<u64> {
    let d = w.driver(driver)?;
    Ok(m.paths().iter().map(|p| d.call_count(node, p)).sum())
}

fn label(d: &Option<DriverRef>) -> String {
    d.as_ref().map(|d| d.0.clone()).unwrap_or_default()
}

fn opt_driver(s: &str) -> anyhow::Result<Option<DriverRef>> {
    if s.is_empty() {
        Ok(None)
    } else {
        Ok(Some(s.parse().map_err(anyhow::Error::msg)?))
    }
}

#[when(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus) (?:of (the driver|driver "[^"]+") )?is made to fail on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn make_fail(w: &mut World, m: Method, d: String, node: NodeSel) -> Result<(), String> {
    run(set_fail(w, m, d, node, true)).await
}

#[when(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus) (?:of (the driver|driver "[^"]+") )?no longer fails on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn stop_fail(w: &mut World, m: Method, d: String, node: NodeSel) -> Result<(), String> {
    run(set_fail(w, m, d, node, false)).await
}

async fn set_fail(
    w: &World,
    m: Method,
    d: String,
    node: NodeSel,
    fail: bool,
) -> anyhow::Result<()> {
    let d = label(&opt_driver(&d)?);
    let driver = w.driver(&d)?;
    for n in node.resolve(w).await? {
        for p in m.paths() {
            driver.fail(&n, p, fail);
        }
    }
    Ok(())
}

#[when(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources) (?:of (the driver|driver "[^"]+") )?is stalled on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn stall(w: &mut World, m: Method, d: String, node: NodeSel) -> Result<(), String> {
    run(async {
        let d = label(&opt_driver(&d)?);
        let driver = w.driver(&d)?;
        for n in node.resolve(w).await? {
            for p in m.paths() {
                driver.calls().stall(&n, p);
            }
        }
        Ok(())
    })
    .await
}

#[when(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources) (?:of (the driver|driver "[^"]+") )?is released on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn release(w: &mut World, m: Method, d: String, node: NodeSel) -> Result<(), String> {
    run(async {
        let d = label(&opt_driver(&d)?);
        let driver = w.driver(&d)?;
        for n in node.resolve(w).await? {
            for p in m.paths() {
                driver.calls().release(&n, p);
            }
        }
        Ok(())
    })
    .await
}

/// Waits until the method was called at least once on the node(s), and notes
/// the count for a later "has been called again".
#[then(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus|NodeWatchResources) (?:of (the driver|driver "[^"]+") )?is called on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn is_called(w: &mut World, m: Method, d: String, node: NodeSel) -> Result<(), String> {
    run(async {
        let d = label(&opt_driver(&d)?);
        for n in node.resolve(w).await? {
            let c = wait::poll(
                &format!("{m} to be called on {n}"),
                Duration::from_secs(300),
                Duration::from_millis(100),
                || {
                    let c = count(w, &d, &n, m);
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
            w.marks.insert((n, m.to_string()), c);
        }
        Ok(())
    })
    .await
}

#[then(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus|NodeWatchResources) (?:of (the driver|driver "[^"]+") )?has been called again on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn called_again(w: &mut World, m: Method, d: String, node: NodeSel) -> Result<(), String> {
    run(async {
        let d = label(&opt_driver(&d)?);
        for n in node.resolve(w).await? {
            let Some(mark) = w.marks.get(&(n.clone(), m.to_string())).copied() else {
                bail!("no earlier count of {m} on {n}; use `Then {m} is called on node N` first");
            };
            let now = count(w, &d, &n, m)?;
            if now <= mark {
                bail!("expected {m} on {n} to have been called again since it was counted ({mark} calls), observed {now}");
            }
        }
        Ok(())
    })
    .await
}

#[then(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus|NodeWatchResources) (?:of (the driver|driver "[^"]+") )?was called (\d+) times? on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn called_n(
    w: &mut World,
    m: Method,
    d: String,
    n: u64,
    node: NodeSel,
) -> Result<(), String> {
    run(async {
        let d = label(&opt_driver(&d)?);
        for node in node.resolve(w).await? {
            let c = count(w, &d, &node, m)?;
            if c != n {
                bail!("expected {m} to have been called {n} time(s) on {node}, observed {c}");
            }
        }
        Ok(())
    })
    .await
}

#[then(
    regex = r#"^(NodePrepareResources|NodeUnprepareResources|NodeWatchResources) (?:of (the driver|driver "[^"]+") )?was called through the (v1|v1beta1|v1alpha4|v1alpha1) API on (node \d+|every node|the node of pod "[^"]+")$"#
)]
async fn called_via(
    w: &mut World,
    m: Method,
    d: String,
    api: String,
    node: NodeSel,
) -> Result<(), String> {
    run(async {
        let d = label(&opt_driver(&d)?);
        let path = match m {
            Method::NodeWatchResources => api.parse::<HealthApi>()?.watch_method(),
            Method::NodePrepareResources => api.parse::<NodeApi>()?.prepare_method(),
            _ => api.parse::<NodeApi>()?.unprepare_method(),
        };
        let driver = w.driver(&d)?;
        for n in node.resolve(w).await? {
            let c = driver.call_count(&n, path);
            if c == 0 {
                let all: Vec<String> = m
                    .paths()
                    .iter()
                    .map(|p| format!("{p}: {}", driver.call_count(&n, p)))
                    .collect();
                bail!(
                    "expected {m} through the {api} API on {n}; calls observed: {}",
                    all.join(", ")
                );
            }
        }
        Ok(())
    })
    .await
}

async fn prepared_names(w: &World, d: &str, node: &str) -> anyhow::Result<Vec<(String, String)>> {
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

#[then(
    regex = r#"^the plugin on (node \d+|every node|the node of pod "[^"]+") has prepared (claim "[^"]+"|the claim of pod "[^"]+")$"#
)]
async fn has_prepared(w: &mut World, node: NodeSel, claim: ClaimRef) -> Result<(), String> {
    run(async {
        let name = claim_name(w, &claim).await?;
        for n in node.resolve(w).await? {
            let names = prepared_names(w, "", &n).await?;
            if !names.iter().any(|(c, _)| *c == name) {
                bail!(
                    "expected the plugin on {n} to have prepared claim {name}; prepared: {names:?}"
                );
            }
        }
        Ok(())
    })
    .await
}

#[then(regex = r#"^no plugin has prepared claims$"#)]
async fn none_prepared(w: &mut World) -> Result<(), String> {
    run(async {
        for (_, d) in &w.drivers {
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
    })
    .await
}

/// After a claim was force-deleted and re-created under the same name, the
/// plugin may still hold the old one (stalled unprepare).
#[then(regex = r#"^the plugin on (node \d+) still has the old claim "([^"]+)" prepared$"#)]
async fn old_prepared(w: &mut World, node: NodeSel, claim: String) -> Result<(), String> {
    run(async {
        let old = w
            .claim_uids
            .get(&claim)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("claim {claim} was not created by this scenario"))?;
        for n in node.resolve(w).await? {
            let names = prepared_names(w, "", &n).await?;
            if !names.iter().any(|(c, uid)| *c == claim && *uid == old) {
                bail!("expected the plugin on {n} to still have the old claim {claim} ({old}) prepared; prepared: {names:?}");
            }
        }
        Ok(())
    })
    .await
}

#[then(regex = r#"^the plugin on (node \d+) has prepared only the current claim "([^"]+)"$"#)]
async fn only_current(w: &mut World, node: NodeSel, claim: String) -> Result<(), String> {
    run(async {
        let api: kube::Api<k8s_openapi::api::resource::v1::ResourceClaim> =
            kube::Api::namespaced(w.client()?, &w.namespace);
        let current = api.get(&claim).await?.metadata.uid.unwrap_or_default();
        for n in node.resolve(w).await? {
            let driver = w.driver("")?;
            let prepared = driver.prepared(&n).ok_or_else(|| anyhow::anyhow!("no plugin on {n}"))?;
            let want = current.clone();
            let name = claim.clone();
            prepared
                .wait_until(&format!("only claim {claim} ({current}) prepared"), Duration::from_secs(120), move |claims| {
                    claims.len() == 1 && claims[0].name == name && claims[0].uid == want
                })
                .await
                .map_err(|e| anyhow::anyhow!("expected only claim {claim} ({current}) prepared on {n}: {e}; prepared: {:?}", prepared.claims()))?;
        }
        Ok(())
    })
    .await
}
