//! Faults at set moments of a run, for showing that a run rides them out:
//! `--restart-control-plane kube-apiserver@20s,kube-apiserver@50s`
//! restarts each named component of the local cluster, and
//! `--restart-kubelet @30s,dra-e2e-node-2@1m` a real node's kubelet, that
//! long after the scenarios start (`make chaos-api`, `make soak
//! SOAK_CHAOS=N`).
//!
//! A kubelet is restarted only on a node no scenario owns (the scenarios
//! that stop and start kubelets themselves own their nodes, and a restart
//! would undo their stop): the restart takes a fault lease
//! ([`NodeLeases::fault`]), which waits for such a node and keeps owners
//! off it until the kubelet is back ([`node_daemon::operate`]). The
//! scenarios sharing the node go on: they are what the fault is for. It
//! waits for a moment when no `restartPolicy: Never` pod is starting there
//! ([`node_daemon::no_pod_starting`]): a start the kubelet's exit cuts
//! fails such a pod for good, in Kubernetes as here.
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;

use crate::cluster::Cluster;
use crate::cluster::local::ControlPlaneComponent;
use crate::cluster::real_node::init::DaemonOp;
use crate::harness::node_daemon::{self, Daemon};
use crate::harness::node_lease::NodeLeases;

/// The option that asks for control-plane restarts.
pub const OPTION: &str = "--restart-control-plane";
/// The option that asks for kubelet restarts.
pub const KUBELET_OPTION: &str = "--restart-kubelet";

/// How long a kubelet restart waits for its node to have no pod starting
/// ([`node_daemon::no_pod_starting`]) before it is given up.
const QUIET_TIMEOUT: Duration = Duration::from_secs(120);

/// What a fault restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Component(ControlPlaneComponent),
    /// The kubelet of the named real node, or of one the runner picks at
    /// random among those no scenario owns at that moment.
    Kubelet(Option<String>),
}

impl Target {
    fn option(&self) -> &'static str {
        match self {
            Target::Component(_) => OPTION,
            Target::Kubelet(_) => KUBELET_OPTION,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Component(c) => write!(f, "{c}"),
            Target::Kubelet(Some(n)) => write!(f, "the kubelet of node {n}"),
            Target::Kubelet(None) => f.write_str("the kubelet of a node no scenario owns"),
        }
    }
}

/// One restart: what and when, from the scenarios' start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub target: Target,
    pub at: Duration,
}

/// One control-plane restart as its option spells it, `<component>@<time>`.
pub fn parse_one(item: &str) -> Result<Planned, String> {
    parse(item)
        .map_err(|e| format!("{e:#}"))?
        .pop()
        .ok_or_else(|| "no restart given: <component>@<time>, e.g. kube-apiserver@30s".to_owned())
}

/// One kubelet restart as its option spells it, `[<node>]@<time>`: no
/// node is a node the runner picks.
pub fn parse_kubelet_one(item: &str) -> Result<Planned, String> {
    let Some((node, at)) = item.trim().split_once('@') else {
        return Err(format!(
            "{item:?} is not [<node>]@<time>, e.g. @30s (a node the runner picks) or \
             dra-e2e-node-1@30s"
        ));
    };
    let node = node.trim();
    let name_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if !node.chars().all(name_char) {
        return Err(format!("{node:?} is no node name"));
    }
    Ok(Planned {
        target: Target::Kubelet((!node.is_empty()).then(|| node.to_owned())),
        at: time(at).map_err(|e| format!("{e:#}"))?,
    })
}

fn time(at: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(at.trim()).with_context(|| format!("{at:?} is no time"))
}

/// The control-plane restarts of `text`, comma-separated, in time order.
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
        all.push(Planned {
            target: Target::Component(component),
            at: time(at)?,
        });
    }
    all.sort_by_key(|p| p.at);
    Ok(all)
}

/// Carries out `plan` (in time order) on `cluster`, saying what each
/// restart took; pending once done, so that it never ends a run. Each
/// restart starts at its moment, whether or not the one before is over
/// (a kubelet restart may wait for a node no scenario owns).
pub async fn run(plan: &[Planned], cluster: &Arc<Cluster>, leases: &Arc<NodeLeases>) {
    let start = tokio::time::Instant::now();
    let restarts = plan.iter().map(|p| async move {
        tokio::time::sleep_until(start + p.at).await;
        let began = tokio::time::Instant::now();
        let option = p.target.option();
        match restart(&p.target, cluster, leases).await {
            Ok(what) => crate::report::note!(
                "dra-e2e: {option}: restarted {what} at {:.1} s; ready again after {:.1} s",
                p.at.as_secs_f64(),
                began.elapsed().as_secs_f64()
            ),
            Err(e) => crate::report::note!("dra-e2e: {option}: restarting {}: {e:#}", p.target),
        }
    });
    futures::future::join_all(restarts).await;
    std::future::pending().await
}

/// Restarts `target`; says what it restarted.
async fn restart(
    target: &Target,
    cluster: &Arc<Cluster>,
    leases: &Arc<NodeLeases>,
) -> anyhow::Result<String> {
    match target {
        Target::Component(c) => {
            cluster.restart_component(c.name()).await?;
            Ok(c.to_string())
        }
        Target::Kubelet(named) => {
            let nodes: Api<Node> = Api::all(cluster.client());
            let candidates = match named {
                Some(n) => vec![n.clone()],
                None => {
                    let mut all: Vec<String> = nodes
                        .list(&ListParams::default())
                        .await
                        .context("listing the nodes")?
                        .items
                        .into_iter()
                        .filter_map(|n| n.metadata.name)
                        .collect();
                    // At random, so that a soak's restarts fall on every node.
                    let first = rand::random_range(0..all.len().max(1));
                    all.rotate_left(first);
                    all
                }
            };
            let lease = leases.fault(&candidates, "kubelet restart").await;
            let node = lease.nodes().first().cloned().unwrap_or_default();
            let pods: Api<Pod> = Api::all(cluster.client());
            node_daemon::no_pod_starting(&pods, &node, QUIET_TIMEOUT)
                .await
                .with_context(|| {
                    format!("not carried out: no quiet moment on node {node} to restart in")
                })?;
            node_daemon::operate(cluster, &node, Daemon::Kubelet, DaemonOp::Restart).await?;
            drop(lease);
            Ok(format!("the kubelet of node {node}"))
        }
    }
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
                    target: Target::Component(ControlPlaneComponent::ApiServer),
                    at: Duration::from_secs(20)
                },
                Planned {
                    target: Target::Component(ControlPlaneComponent::Scheduler),
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

    #[test]
    fn kubelet_restarts_read_as_an_optional_node_at_time() {
        assert_eq!(
            parse_kubelet_one("@30s"),
            Ok(Planned {
                target: Target::Kubelet(None),
                at: Duration::from_secs(30)
            })
        );
        assert_eq!(
            parse_kubelet_one(" dra-e2e-node-2@1m "),
            Ok(Planned {
                target: Target::Kubelet(Some("dra-e2e-node-2".into())),
                at: Duration::from_secs(60)
            })
        );
        let e = parse_kubelet_one("30s").unwrap_err();
        assert!(e.contains("is not [<node>]@<time>"), "{e}");
        let e = parse_kubelet_one("Node_1@30s").unwrap_err();
        assert!(e.contains("\"Node_1\" is no node name"), "{e}");
        let e = parse_kubelet_one("@soon").unwrap_err();
        assert!(e.contains("\"soon\" is no time"), "{e}");
    }
}
