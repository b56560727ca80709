//! Control-plane restarts at set moments of a run, for showing that a run
//! rides them out: `--restart-control-plane kube-apiserver@20s,kube-apiserver@50s`
//! restarts each named component of the local cluster that long after the
//! scenarios start (`make chaos-api`).
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::cluster::Cluster;
use crate::cluster::local::ControlPlaneComponent;

/// The option that asks for the restarts.
pub const OPTION: &str = "--restart-control-plane";

/// One restart: what and when, from the scenarios' start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub component: ControlPlaneComponent,
    pub at: Duration,
}

/// One restart as the option spells it, `<component>@<time>`.
pub fn parse_one(item: &str) -> Result<Planned, String> {
    parse(item)
        .map_err(|e| format!("{e:#}"))?
        .pop()
        .ok_or_else(|| "no restart given: <component>@<time>, e.g. kube-apiserver@30s".to_owned())
}

/// The restarts of `text`, comma-separated, in time order.
pub fn parse(text: &str) -> anyhow::Result<Vec<Planned>> {
    let mut all = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, at)) = item.split_once('@') else {
            bail!("{item:?} is not <component>@<time>, e.g. kube-apiserver@30s");
        };
        let component = ControlPlaneComponent::named(name.trim()).with_context(|| {
            format!(
                "{name:?} is no component the runner restarts ({})",
                ControlPlaneComponent::ALL.map(|c| c.name()).join(", ")
            )
        })?;
        let at =
            humantime::parse_duration(at.trim()).with_context(|| format!("{at:?} is no time"))?;
        all.push(Planned { component, at });
    }
    all.sort_by_key(|p| p.at);
    Ok(all)
}

/// Carries out `plan` on `cluster`, saying what each restart took; pending
/// once done, so that it never ends a run.
pub async fn run(plan: &[Planned], cluster: &Cluster) {
    let start = tokio::time::Instant::now();
    for p in plan {
        tokio::time::sleep_until(start + p.at).await;
        let began = tokio::time::Instant::now();
        match cluster.restart_component(p.component.name()).await {
            Ok(()) => crate::note!(
                "dra-e2e: {OPTION}: restarted {} at {:.1} s; ready again after {:.1} s",
                p.component,
                p.at.as_secs_f64(),
                began.elapsed().as_secs_f64()
            ),
            Err(e) => crate::note!("dra-e2e: {OPTION}: restarting {}: {e:#}", p.component),
        }
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_read_as_component_at_time_in_time_order() {
        let plan = parse("kube-scheduler@1m, kube-apiserver@20s,").unwrap();
        assert_eq!(
            plan,
            vec![
                Planned {
                    component: ControlPlaneComponent::ApiServer,
                    at: Duration::from_secs(20)
                },
                Planned {
                    component: ControlPlaneComponent::Scheduler,
                    at: Duration::from_secs(60)
                },
            ]
        );
        assert!(parse("").unwrap().is_empty());
        let e = parse("etcd@5s").unwrap_err().to_string();
        assert!(e.contains("\"etcd\" is no component"), "{e}");
        assert!(parse("kube-apiserver").is_err());
        assert!(parse("kube-apiserver@soon").is_err());
    }
}
