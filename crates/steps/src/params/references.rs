//! Which object of the scenario a sentence names: a node (by index, every
//! node, a pod's node, a list or a range of them), a driver, a claim, an
//! identity that makes an API call, a kind, a pod's containers. Typed, so
//! that a misspelt reference fails to match instead of naming nothing.
use std::str::FromStr;

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
    pub async fn resolve(&self, w: &crate::World) -> anyhow::Result<Vec<String>> {
        let nodes = &w.nodes;
        match self {
            NodeSel::OfPod(pod) => {
                let node = w
                    .pod(pod)
                    .await?
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
#[derive(Debug, Clone, PartialEq, Eq, Default, cucumber::Parameter)]
#[param(name = "driver", regex = r#"the driver|driver "[^"]+""#)]
pub enum DriverRef {
    /// The unnamed driver, or else the scenario's first.
    #[default]
    The,
    Named(String),
}

impl FromStr for DriverRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "the driver" {
            return Ok(DriverRef::The);
        }
        s.strip_prefix("driver \"")
            .and_then(|r| r.strip_suffix('"'))
            .map(|l| DriverRef::Named(l.to_owned()))
            .ok_or_else(|| format!("expected `the driver` or `driver \"name\"`, got {s:?}"))
    }
}

impl std::fmt::Display for DriverRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverRef::The => f.write_str("the driver"),
            DriverRef::Named(l) => write!(f, "driver \"{l}\""),
        }
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
pub enum ClaimPhrase {
    Named(String),
    OfPod(String),
    ExtendedOfPod(String),
}

impl FromStr for ClaimPhrase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let quoted = |p: &str| {
            s.strip_prefix(p)
                .and_then(|r| r.strip_suffix('"'))
                .map(str::to_owned)
        };
        if let Some(n) = quoted("claim \"") {
            return Ok(ClaimPhrase::Named(n));
        }
        if let Some(p) = quoted("the claim of pod \"") {
            return Ok(ClaimPhrase::OfPod(p));
        }
        if let Some(p) = quoted("the extended resource claim of pod \"") {
            return Ok(ClaimPhrase::ExtendedOfPod(p));
        }
        Err(format!(
            "expected `claim \"name\"`, `the claim of pod \"name\"` or \
             `the extended resource claim of pod \"name\"`, got {s:?}"
        ))
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

/// `1` or `1 to 4`: how many ready nodes a scenario uses, at least and at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "noderange", regex = r"\d+(?: to \d+)?")]
pub struct NodeRange {
    pub min: usize,
    pub max: usize,
}

impl FromStr for NodeRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |n: &str| {
            n.trim()
                .parse::<usize>()
                .map_err(|e| format!("node count {n:?} in {s:?}: {e}"))
        };
        match s.split_once(" to ") {
            Some((min, max)) => Ok(NodeRange {
                min: number(min)?,
                max: number(max)?,
            }),
            None => {
                let n = number(s)?;
                Ok(NodeRange { min: n, max: n })
            }
        }
    }
}

/// `node 0`, `nodes 0 and 2`, `nodes 0, 1 and 3`: some of the scenario's
/// nodes by index, for what runs on only part of them.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "nodelist", regex = r"nodes? \d+(?:(?:, | and )\d+)*")]
pub struct NodeList(pub Vec<usize>);

impl FromStr for NodeList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (plural, list) = match (s.strip_prefix("nodes "), s.strip_prefix("node ")) {
            (Some(l), _) => (true, l),
            (None, Some(l)) => (false, l),
            _ => return Err(format!("expected `node N` or `nodes N and M`, got {s:?}")),
        };
        let mut indexes = Vec::new();
        for word in list
            .split([',', ' '])
            .filter(|w| !w.is_empty() && *w != "and")
        {
            let i: usize = word
                .parse()
                .map_err(|_| format!("{word:?} in {s:?} is no node index (0, 1, ...)"))?;
            if indexes.contains(&i) {
                return Err(format!("{s:?} names node {i} twice"));
            }
            indexes.push(i);
        }
        if plural != (indexes.len() > 1) {
            return Err(format!(
                "write `node N` for one node and `nodes N and M` for several, got {s:?}"
            ));
        }
        indexes.sort_unstable();
        Ok(NodeList(indexes))
    }
}

impl NodeList {
    /// The names of these nodes among the scenario's.
    pub fn names(&self, w: &crate::World) -> anyhow::Result<Vec<String>> {
        self.0
            .iter()
            .map(|&i| w.node(i).map(str::to_owned))
            .collect()
    }
}

impl std::fmt::Display for NodeList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "node {one}"),
            [rest @ .., last] => {
                let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
                write!(f, "nodes {} and {last}", rest.join(", "))
            }
            [] => f.write_str("no node"),
        }
    }
}

/// A Kubernetes kind as manifests spell it: `DeviceClass`, `ResourceSlice`...
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "kind", regex = "[A-Z][A-Za-z]+")]
pub struct Kind(pub String);

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Kind(s.to_owned()))
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `every container`, `container "name"` or `init container "name"`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "containers",
    regex = r#"every container|container "[^"]+"|init container "[^"]+""#
)]
pub enum Containers {
    Every,
    Named(String),
    Init(String),
}

impl FromStr for Containers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "every container" {
            return Ok(Containers::Every);
        }
        let quoted = |p: &str| {
            s.strip_prefix(p)
                .and_then(|r| r.strip_suffix('"'))
                .map(str::to_owned)
        };
        if let Some(c) = quoted("init container \"") {
            return Ok(Containers::Init(c));
        }
        quoted("container \"")
            .map(Containers::Named)
            .ok_or_else(|| format!("expected `every container`, `container \"name\"` or `init container \"name\"`, got {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Method, quoted_list};

    #[test]
    fn nodes_drivers_claims_and_identities_parse() {
        assert_eq!("node 2".parse::<NodeSel>().unwrap(), NodeSel::Index(2));
        assert_eq!("every node".parse::<NodeSel>().unwrap(), NodeSel::Every);
        assert_eq!(
            "the node of pod \"p\"".parse::<NodeSel>().unwrap(),
            NodeSel::OfPod("p".into())
        );
        assert_eq!("the driver".parse::<DriverRef>().unwrap(), DriverRef::The);
        assert_eq!(
            "driver \"other\"".parse::<DriverRef>().unwrap(),
            DriverRef::Named("other".into())
        );
        assert_eq!(
            "the claim of pod \"p\"".parse::<ClaimPhrase>().unwrap(),
            ClaimPhrase::OfPod("p".into())
        );
        assert_eq!(
            "the extended resource claim of pod \"p\""
                .parse::<ClaimPhrase>()
                .unwrap(),
            ClaimPhrase::ExtendedOfPod("p".into())
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

    #[test]
    fn node_lists_name_one_node_or_several() {
        assert_eq!("node 1".parse::<NodeList>().unwrap(), NodeList(vec![1]));
        assert_eq!(
            "nodes 2 and 0".parse::<NodeList>().unwrap(),
            NodeList(vec![0, 2])
        );
        assert_eq!(
            "nodes 0, 1 and 3".parse::<NodeList>().unwrap(),
            NodeList(vec![0, 1, 3])
        );
        assert_eq!(NodeList(vec![0, 1, 3]).to_string(), "nodes 0, 1 and 3");
        assert_eq!(NodeList(vec![1]).to_string(), "node 1");
        for bad in [
            "nodes 1",
            "node 0 and 1",
            "nodes 1 and 1",
            "node x",
            "nodes",
        ] {
            assert!(bad.parse::<NodeList>().is_err(), "{bad}");
        }
    }

    #[test]
    fn node_counts_are_one_number_or_a_range() {
        assert_eq!(
            "1 to 4".parse::<NodeRange>().unwrap(),
            NodeRange { min: 1, max: 4 }
        );
        assert_eq!(
            "2".parse::<NodeRange>().unwrap(),
            NodeRange { min: 2, max: 2 }
        );
    }
}
