//! Typed step parameters, so a misspelt value fails to match (and `dra-e2e
//! check` reports it) instead of failing at run time.
use std::str::FromStr;
use std::time::Duration;

use crate::proto::method;

/// A kubelet plugin gRPC method, across all API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "method",
    regex = "NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus|NodeWatchResources"
)]
pub enum Method {
    NodePrepareResources,
    NodeUnprepareResources,
    GetInfo,
    NotifyRegistrationStatus,
    /// The kubelet's device health stream (counted once, when it opens).
    NodeWatchResources,
}

impl Method {
    /// Full gRPC paths of the method in every API version, as the kubelet
    /// version decides which one is called.
    pub fn paths(self) -> &'static [&'static str] {
        match self {
            Method::NodePrepareResources => &[
                method::V1_PREPARE,
                method::V1BETA1_PREPARE,
                method::V1ALPHA4_PREPARE,
            ],
            Method::NodeUnprepareResources => &[
                method::V1_UNPREPARE,
                method::V1BETA1_UNPREPARE,
                method::V1ALPHA4_UNPREPARE,
            ],
            Method::GetInfo => &[method::GET_INFO],
            Method::NotifyRegistrationStatus => &[method::NOTIFY_REGISTRATION_STATUS],
            Method::NodeWatchResources => &[method::HEALTH_V1_WATCH, method::HEALTH_V1ALPHA1_WATCH],
        }
    }
}

impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "NodePrepareResources" => Method::NodePrepareResources,
            "NodeUnprepareResources" => Method::NodeUnprepareResources,
            "GetInfo" => Method::GetInfo,
            "NotifyRegistrationStatus" => Method::NotifyRegistrationStatus,
            "NodeWatchResources" => Method::NodeWatchResources,
            other => return Err(format!("unknown method {other}")),
        })
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// `node 0`, `node 1`, ... (index into the scenario's sorted nodes) or `every node`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "node",
    regex = r#"node \d+|every node|the node of pod "[^"]+""#
)]
pub enum NodeSel {
    Index(usize),
    Every,
    /// The node a pod was scheduled to.
    OfPod(String),
}

impl FromStr for NodeSel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "every node" {
            return Ok(NodeSel::Every);
        }
        if let Some(p) = s
            .strip_prefix("the node of pod \"")
            .and_then(|r| r.strip_suffix('"'))
        {
            return Ok(NodeSel::OfPod(p.to_owned()));
        }
        s.strip_prefix("node ")
            .and_then(|n| n.parse().ok())
            .map(NodeSel::Index)
            .ok_or_else(|| format!("expected `node N` or `every node`, got {s:?}"))
    }
}

impl NodeSel {
    /// The node names selected, among the scenario's nodes.
    pub async fn resolve(&self, w: &super::World) -> anyhow::Result<Vec<String>> {
        let nodes = &w.nodes;
        match self {
            NodeSel::OfPod(pod) => {
                let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
                    kube::Api::namespaced(w.client()?, &w.namespace);
                let p = api
                    .get(pod)
                    .await
                    .map_err(|e| anyhow::anyhow!("reading pod {pod}: {e}"))?;
                let node = p
                    .spec
                    .and_then(|s| s.node_name)
                    .ok_or_else(|| anyhow::anyhow!("pod {pod} is not scheduled to a node"))?;
                Ok(vec![node])
            }
            NodeSel::Every => {
                if nodes.is_empty() {
                    anyhow::bail!("the scenario selected no nodes; add `Given 1 ready node`");
                }
                Ok(nodes.to_vec())
            }
            NodeSel::Index(i) => nodes.get(*i).map(|n| vec![n.clone()]).ok_or_else(|| {
                anyhow::anyhow!(
                    "node {i} does not exist: the scenario uses {} node(s)",
                    nodes.len()
                )
            }),
        }
    }
}

/// `the driver` or `driver "label"`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "driver", regex = r#"the driver|driver "[^"]+""#)]
pub struct DriverRef(pub String);

impl FromStr for DriverRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "the driver" {
            return Ok(DriverRef(String::new()));
        }
        s.strip_prefix("driver \"")
            .and_then(|r| r.strip_suffix('"'))
            .map(|l| DriverRef(l.to_owned()))
            .ok_or_else(|| format!("expected `the driver` or `driver \"name\"`, got {s:?}"))
    }
}

/// `claim "name"`, `the claim of pod "name"` (the claim generated for its
/// inline claim) or `the extended resource claim of pod "name"` (the claim
/// the scheduler made for its DRA-backed extended resources).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, cucumber::Parameter)]
#[param(
    name = "claim",
    regex = r#"claim "[^"]+"|the claim of pod "[^"]+"|the extended resource claim of pod "[^"]+""#
)]
pub enum ClaimRef {
    Named(String),
    OfPod(String),
    ExtendedOfPod(String),
}

impl FromStr for ClaimRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let quoted = |p: &str| {
            s.strip_prefix(p)
                .and_then(|r| r.strip_suffix('"'))
                .map(str::to_owned)
        };
        if let Some(n) = quoted("claim \"") {
            return Ok(ClaimRef::Named(n));
        }
        if let Some(p) = quoted("the claim of pod \"") {
            return Ok(ClaimRef::OfPod(p));
        }
        if let Some(p) = quoted("the extended resource claim of pod \"") {
            return Ok(ClaimRef::ExtendedOfPod(p));
        }
        Err(format!(
            "expected `claim \"name\"`, `the claim of pod \"name\"` or \
             `the extended resource claim of pod \"name\"`, got {s:?}"
        ))
    }
}

/// A duration like `20s`, `2m`, `500ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "duration", regex = r"\d+(?:ms|s|m|h)")]
pub struct Dur(pub Duration);

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s)
            .map(Dur)
            .map_err(|e| format!("bad duration {s:?}: {e}"))
    }
}

/// Who performs an API call: `the admin`, `the plugin on node 0`, or
/// `the plugin on node "name"` (any node name, even a fictional one).
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "identity",
    regex = r#"the admin|the plugin on node \d+|the plugin on node "[^"]+"|service account "[^"]+""#
)]
pub enum Identity {
    Admin,
    PluginOnIndex(usize),
    PluginOnNamed(String),
    /// A service account of the scenario's namespace, on no node.
    ServiceAccount(String),
}

impl FromStr for Identity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "the admin" {
            return Ok(Identity::Admin);
        }
        if let Some(name) = s
            .strip_prefix("service account \"")
            .and_then(|r| r.strip_suffix('"'))
        {
            return Ok(Identity::ServiceAccount(name.to_owned()));
        }
        let rest = s
            .strip_prefix("the plugin on node ")
            .ok_or_else(|| format!("unknown identity {s:?}"))?;
        if let Some(name) = rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            return Ok(Identity::PluginOnNamed(name.to_owned()));
        }
        rest.parse()
            .map(Identity::PluginOnIndex)
            .map_err(|_| format!("unknown identity {s:?}"))
    }
}

/// The pod phases and states steps wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "podstate",
    regex = "running|scheduled|unschedulable|completed|failed|gone|pending"
)]
pub enum PodState {
    Running,
    Scheduled,
    Unschedulable,
    Completed,
    Failed,
    Gone,
    Pending,
}

impl FromStr for PodState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "running" => PodState::Running,
            "scheduled" => PodState::Scheduled,
            "unschedulable" => PodState::Unschedulable,
            "completed" => PodState::Completed,
            "failed" => PodState::Failed,
            "gone" => PodState::Gone,
            "pending" => PodState::Pending,
            other => return Err(format!("unknown pod state {other}")),
        })
    }
}

/// A device health as plugins report it and pods show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "health", regex = "Healthy|Unhealthy|Unknown")]
pub struct Health(pub crate::plugin::HealthStatus);

impl FromStr for Health {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Healthy" | "Unhealthy" | "Unknown" => Ok(Health(
                s.parse()
                    .map_err(|e: std::convert::Infallible| e.to_string())?,
            )),
            other => Err(format!(
                "a device is Healthy, Unhealthy or Unknown, not {other:?}"
            )),
        }
    }
}

impl Health {
    /// The word the kubelet writes into pod status.
    pub fn as_status(self) -> &'static str {
        match self.0 {
            crate::plugin::HealthStatus::Healthy => "Healthy",
            crate::plugin::HealthStatus::Unhealthy => "Unhealthy",
            crate::plugin::HealthStatus::Unknown => "Unknown",
        }
    }
}

/// A pod state that can be held for a while: `pending` or `running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "steadystate", regex = "pending|running")]
pub enum SteadyState {
    Pending,
    /// Running and not being deleted (an eviction sets the deletion mark first).
    Running,
}

impl FromStr for SteadyState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(SteadyState::Pending),
            "running" => Ok(SteadyState::Running),
            other => Err(format!("a pod can stay pending or running, not {other:?}")),
        }
    }
}

/// Quoted, comma/and-separated strings: `"a", "b" and "c"`.
pub fn quoted_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_params() {
        assert_eq!("node 2".parse::<NodeSel>().unwrap(), NodeSel::Index(2));
        assert_eq!("every node".parse::<NodeSel>().unwrap(), NodeSel::Every);
        assert_eq!(
            "the node of pod \"p\"".parse::<NodeSel>().unwrap(),
            NodeSel::OfPod("p".into())
        );
        assert_eq!("the driver".parse::<DriverRef>().unwrap().0, "");
        assert_eq!("driver \"other\"".parse::<DriverRef>().unwrap().0, "other");
        assert_eq!(
            "the claim of pod \"p\"".parse::<ClaimRef>().unwrap(),
            ClaimRef::OfPod("p".into())
        );
        assert_eq!(
            "the extended resource claim of pod \"p\""
                .parse::<ClaimRef>()
                .unwrap(),
            ClaimRef::ExtendedOfPod("p".into())
        );
        assert_eq!(
            "the plugin on node \"x\"".parse::<Identity>().unwrap(),
            Identity::PluginOnNamed("x".into())
        );
        assert_eq!(
            "the plugin on node 1".parse::<Identity>().unwrap(),
            Identity::PluginOnIndex(1)
        );
        assert_eq!(
            quoted_list(r#""a", "b" and "c""#),
            vec!["a".to_owned(), "b".into(), "c".into()]
        );
        assert_eq!(Method::NodePrepareResources.paths().len(), 3);
    }
}
