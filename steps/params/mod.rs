//! Typed step parameters, so a misspelt value fails to match (and `dra-e2e
//! check` reports it) instead of failing at run time.
use std::str::FromStr;
use std::time::Duration;

mod driver_phrase;
pub mod words;

/// Declares a phrase parameter made of fixed words once: from `"word" =>
/// value` pairs, the type's `cucumber::Parameter` (its regex: the words,
/// escaped, joined by `|`, built at compile time; tried in the order
/// written) and its `FromStr` (whose error lists the words), with the words
/// as `WORDS`. The type itself is declared beside it.
///
/// ```text
/// phrase_words! {
///     Verb as "verb", "verb" {
///         "updating" => Verb::Updating,
///         "deleting" => Verb::Deleting,
///     }
/// }
/// ```
///
/// `Verb as "verb"` names the parameter `{verb}` in sentences; the second
/// string says what a word is, for the error.
///
/// A type of a lower floor that has words of its own (`WORDS` and
/// `from_words`, as `ground::dynamic::PatchType`) gets a newtype here:
/// `phrase_words! { PatchTypeWord(PatchType) as "patchtype", "patch type" }`.
macro_rules! phrase_words {
    ($ty:ident as $name:literal, $what:literal { $($word:literal => $value:expr),+ $(,)? }) => {
        impl $ty {
            /// The words of the parameter, in the order its regex tries them.
            pub const WORDS: &'static [&'static str] = &[$($word),+];
        }

        $crate::steps::params::phrase_words!(@parameter $ty, $name);

        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($value),)+
                    other => Err(format!(
                        "unknown {} {other:?}; expected {}",
                        $what,
                        $crate::steps::params::words::listing(Self::WORDS)
                    )),
                }
            }
        }
    };
    // A newtype over a type of a lower floor that keeps its own words
    // (`WORDS`, in the order the regex tries them, and `from_words`).
    ($ty:ident($inner:ty) as $name:literal, $what:literal) => {
        impl $ty {
            /// The words of the parameter, in the order its regex tries them.
            pub const WORDS: &'static [&'static str] = &<$inner>::WORDS;
        }

        $crate::steps::params::phrase_words!(@parameter $ty, $name);

        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$inner>::from_words(s).map($ty).ok_or_else(|| {
                    format!(
                        "unknown {} {s:?}; expected {}",
                        $what,
                        $crate::steps::params::words::listing(Self::WORDS)
                    )
                })
            }
        }
    };
    // The cucumber parameter of either form: a regex that tries `WORDS` in order.
    (@parameter $ty:ident, $name:literal) => {
        impl ::cucumber::Parameter for $ty {
            const REGEX: &'static str = {
                const LEN: usize = $crate::steps::params::words::alternation_len($ty::WORDS);
                const BYTES: [u8; LEN] =
                    $crate::steps::params::words::alternation::<LEN>($ty::WORDS);
                $crate::steps::params::words::text(&BYTES)
            };
            const NAME: &'static str = $name;
        }
    };
}
pub(crate) use phrase_words;

pub use crate::ground::wait::{PodState, SteadyPodState};
use crate::proto::method;
pub use driver_phrase::{DriverPhrase, ResourcesPhrase};

/// A kubelet plugin gRPC method, across all API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

phrase_words! {
    Method as "methodname", "method" {
        "NodePrepareResources" => Method::NodePrepareResources,
        "NodeUnprepareResources" => Method::NodeUnprepareResources,
        "GetInfo" => Method::GetInfo,
        "NotifyRegistrationStatus" => Method::NotifyRegistrationStatus,
        "NodeWatchResources" => Method::NodeWatchResources,
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// `NodePrepareResources`, or `NodePrepareResources of driver "x"`: a method
/// of one of the scenario's drivers ("the driver" when none is named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodOf {
    pub method: Method,
    pub driver: DriverRef,
}

impl cucumber::Parameter for MethodOf {
    const REGEX: &'static str = words::regex_concat![
        "(?:",
        <Method as cucumber::Parameter>::REGEX,
        ")(?: of (?:",
        <DriverRef as cucumber::Parameter>::REGEX,
        "))?"
    ];
    const NAME: &'static str = "method";
}

impl MethodOf {
    /// Fails unless the method is one of `allowed` (a step that acts on
    /// some methods only).
    pub fn one_of(&self, allowed: &[Method]) -> anyhow::Result<Method> {
        if allowed.contains(&self.method) {
            return Ok(self.method);
        }
        let names: Vec<String> = allowed.iter().map(Method::to_string).collect();
        anyhow::bail!(
            "this step applies to {}, not {}",
            names.join(", "),
            self.method
        )
    }
}

impl FromStr for MethodOf {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // The parts' errors quote only their part, which may be empty
        // (`GetInfo of `): the whole is said too.
        let whole = |e: String| format!("{e}, in {s:?}");
        let (method, driver) = match s.split_once(" of ") {
            Some((m, d)) => (m, d.parse().map_err(whole)?),
            None => (s, DriverRef::The),
        };
        Ok(MethodOf {
            method: method.parse().map_err(whole)?,
            driver,
        })
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

/// The pod states steps wait for: `running`, `gone`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodStateWord(pub PodState);

phrase_words! {
    PodStateWord as "podstate", "pod state" {
        "running" => PodStateWord(PodState::Running),
        "scheduled" => PodStateWord(PodState::Scheduled),
        "unschedulable" => PodStateWord(PodState::Unschedulable),
        "completed" => PodStateWord(PodState::Completed),
        "failed" => PodStateWord(PodState::Failed),
        "gone" => PodStateWord(PodState::Gone),
        "pending" => PodStateWord(PodState::Pending),
    }
}

/// A device health as plugins report it and pods show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health(pub crate::plugin::HealthStatus);

phrase_words! {
    Health as "health", "device health" {
        "Healthy" => Health(crate::plugin::HealthStatus::Healthy),
        "Unhealthy" => Health(crate::plugin::HealthStatus::Unhealthy),
        "Unknown" => Health(crate::plugin::HealthStatus::Unknown),
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

/// A pod state that can be held for a while: `pending`, `running` or
/// `terminating`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SteadyPodStateWord(pub SteadyPodState);

phrase_words! {
    SteadyPodStateWord as "steadystate", "state a pod can stay in" {
        "pending" => SteadyPodStateWord(SteadyPodState::Pending),
        "running" => SteadyPodStateWord(SteadyPodState::Running),
        "terminating" => SteadyPodStateWord(SteadyPodState::Terminating),
    }
}

/// The claim states steps wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    Allocated,
    Deallocated,
    NotReserved,
    Deleted,
}

phrase_words! {
    ClaimState as "claimstate", "claim state" {
        "allocated" => ClaimState::Allocated,
        "deallocated" => ClaimState::Deallocated,
        "not reserved" => ClaimState::NotReserved,
        "deleted" => ClaimState::Deleted,
    }
}

/// A write to a ResourceSlice whose permission a step checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Updating,
    Deleting,
}

phrase_words! {
    Verb as "verb", "verb" {
        "updating" => Verb::Updating,
        "deleting" => Verb::Deleting,
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
    pub fn names(&self, w: &super::World) -> anyhow::Result<Vec<String>> {
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

/// One or more quoted strings: `"a"`, `"a", "b" and "c"`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "strings", regex = r#"".+""#)]
pub struct Strings(pub Vec<String>);

impl FromStr for Strings {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Strings(quoted_list(s)))
    }
}

/// A quoted text that may itself hold quotes (a CEL expression):
/// everything between the first and the last quote.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "quoted", regex = r#"".+""#)]
pub struct Quoted(pub String);

impl FromStr for Quoted {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .map(|t| Quoted(t.to_owned()))
            .ok_or_else(|| format!("expected a quoted text, got {s:?}"))
    }
}

/// An API version a method was called through: `v1`, `v1beta1`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersion(pub String);

phrase_words! {
    ApiVersion as "apiversion", "API version" {
        "v1" => ApiVersion("v1".to_owned()),
        "v1beta1" => ApiVersion("v1beta1".to_owned()),
        "v1alpha4" => ApiVersion("v1alpha4".to_owned()),
        "v1alpha1" => ApiVersion("v1alpha1".to_owned()),
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

/// `gets` or `does not get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gets(pub bool);

phrase_words! {
    Gets as "gets", "verb" {
        "gets" => Gets(true),
        "does not get" => Gets(false),
    }
}

/// The claims of a pod sentence: `with an inline claim`, `using claim "a"`,
/// `using claims "a" and "b"` or `without claims`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "podclaims",
    regex = "with an inline claim|using claims? .+|without claims"
)]
pub enum PodClaimsPhrase {
    Inline,
    External(Vec<String>),
    None,
}

impl FromStr for PodClaimsPhrase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "with an inline claim" => Ok(PodClaimsPhrase::Inline),
            "without claims" => Ok(PodClaimsPhrase::None),
            _ => s
                .strip_prefix("using claim")
                .map(|list| PodClaimsPhrase::External(quoted_list(list)))
                .ok_or_else(|| format!("unknown claims {s:?}")),
        }
    }
}

/// The settings of `a second instance "x" of <driver>, <settings>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "instancesettings", regex = ".+")]
pub struct InstanceSettings {
    pub start_later: bool,
    pub rolling_update: bool,
}

impl FromStr for InstanceSettings {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut settings = InstanceSettings {
            start_later: false,
            rolling_update: false,
        };
        for m in s.split(", ").map(str::trim).filter(|m| !m.is_empty()) {
            match m {
                "not started yet" => settings.start_later = true,
                "in rolling-update mode" => settings.rolling_update = true,
                other => {
                    return Err(format!(
                        "unknown instance setting {other:?}; known: `not started yet`, `in rolling-update mode`"
                    ));
                }
            }
        }
        Ok(settings)
    }
}

/// What follows `a device class`: `[ for <driver>][ with parameters {json}][,]
/// [ serving extended resource "name"]`. The JSON is read by the step, which
/// says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Default, cucumber::Parameter)]
#[param(
    name = "classoptions",
    regex = r#"(?: for (?:the driver|driver "[^"]+"))?(?: with parameters \{.*\})?(?:,? serving extended resource "[^"]+")?"#
)]
pub struct ClassOptions {
    pub driver: DriverRef,
    pub parameters: Option<String>,
    pub extended_resource: Option<String>,
}

impl FromStr for ClassOptions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut options = ClassOptions::default();
        let mut rest = s;
        if let Some((head, resource)) = rest.rsplit_once(" serving extended resource \"") {
            options.extended_resource = Some(
                resource
                    .strip_suffix('"')
                    .ok_or_else(|| format!("unterminated extended resource name in {s:?}"))?
                    .to_owned(),
            );
            rest = head.strip_suffix(',').unwrap_or(head);
        }
        if let Some((head, json)) = rest.split_once(" with parameters ") {
            options.parameters = Some(json.to_owned());
            rest = head;
        }
        if let Some(driver) = rest.strip_prefix(" for ") {
            // The driver's error quotes only its part, which may be empty.
            options.driver = driver.parse().map_err(|e| format!("{e}, in {s:?}"))?;
        } else if !rest.is_empty() {
            return Err(format!("unknown device class options {s:?}"));
        }
        Ok(options)
    }
}

/// What follows `an external claim "name"`: `[ for <driver>][ with admin access]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, cucumber::Parameter)]
#[param(
    name = "claimoptions",
    regex = r#"(?: for (?:the driver|driver "[^"]+"))?(?: with admin access)?"#
)]
pub struct ClaimOptions {
    pub driver: DriverRef,
    pub admin_access: bool,
}

impl FromStr for ClaimOptions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rest, admin_access) = match s.strip_suffix(" with admin access") {
            Some(r) => (r, true),
            None => (s, false),
        };
        let driver = match rest.strip_prefix(" for ") {
            // The driver's error quotes only its part, which may be empty.
            Some(d) => d.parse().map_err(|e| format!("{e}, in {s:?}"))?,
            None if rest.is_empty() => DriverRef::The,
            None => return Err(format!("unknown claim options {s:?}")),
        };
        Ok(ClaimOptions {
            driver,
            admin_access,
        })
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
    use cucumber::Parameter;

    /// A words parameter's regex, anchored, matches each of its words and
    /// no other text, has no capture group, and each word parses.
    fn words_hold<T: Parameter + FromStr<Err = String> + std::fmt::Debug>(words: &[&str]) {
        let re = regex::Regex::new(&format!("^(?:{})$", T::REGEX)).expect("a valid regex");
        assert_eq!(re.captures_len(), 1, "{} has a capture group", T::REGEX);
        for w in words {
            assert!(re.is_match(w), "{} does not match {w:?}", T::REGEX);
            w.parse::<T>().unwrap_or_else(|e| panic!("{w:?}: {e}"));
        }
        assert!(!re.is_match("sideways"));
        let e = "sideways".parse::<T>().unwrap_err();
        assert!(e.contains("\"sideways\""), "{e}");
        for w in words {
            assert!(e.contains(&format!("`{w}`")), "{e} lacks {w}");
        }
    }

    #[test]
    fn word_parameters_spell_their_words_once() {
        // The regexes are the ones the words gave before they were spelt once.
        assert_eq!(
            PodStateWord::REGEX,
            "running|scheduled|unschedulable|completed|failed|gone|pending"
        );
        assert_eq!(SteadyPodStateWord::REGEX, "pending|running|terminating");
        assert_eq!(Health::REGEX, "Healthy|Unhealthy|Unknown");
        assert_eq!(
            ClaimState::REGEX,
            "allocated|deallocated|not reserved|deleted"
        );
        assert_eq!(Verb::REGEX, "updating|deleting");
        assert_eq!(ApiVersion::REGEX, "v1|v1beta1|v1alpha4|v1alpha1");
        assert_eq!(Gets::REGEX, "gets|does not get");
        assert_eq!(
            MethodOf::REGEX,
            r#"(?:NodePrepareResources|NodeUnprepareResources|GetInfo|NotifyRegistrationStatus|NodeWatchResources)(?: of (?:the driver|driver "[^"]+"))?"#
        );
        words_hold::<PodStateWord>(PodStateWord::WORDS);
        words_hold::<SteadyPodStateWord>(SteadyPodStateWord::WORDS);
        words_hold::<Health>(Health::WORDS);
        words_hold::<ClaimState>(ClaimState::WORDS);
        words_hold::<Verb>(Verb::WORDS);
        words_hold::<ApiVersion>(ApiVersion::WORDS);
        words_hold::<Gets>(Gets::WORDS);
        words_hold::<Method>(Method::WORDS);
        words_hold::<crate::steps::crud::PatchTypeWord>(crate::steps::crud::PatchTypeWord::WORDS);
        words_hold::<crate::steps::crud::Watched>(crate::steps::crud::Watched::WORDS);
        assert_eq!(
            "not reserved".parse::<ClaimState>(),
            Ok(ClaimState::NotReserved)
        );
        assert_eq!("does not get".parse::<Gets>(), Ok(Gets(false)));
        assert_eq!(
            "Unhealthy".parse::<Health>().map(Health::as_status),
            Ok("Unhealthy")
        );
        assert_eq!(
            "runing".parse::<PodStateWord>().unwrap_err(),
            "unknown pod state \"runing\"; expected `running`, `scheduled`, `unschedulable`, \
             `completed`, `failed`, `gone` or `pending`"
        );
    }

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
    fn a_method_names_its_driver_or_means_the_driver() {
        assert_eq!(
            "GetInfo of driver \"x\"".parse::<MethodOf>().unwrap(),
            MethodOf {
                method: Method::GetInfo,
                driver: DriverRef::Named("x".into())
            }
        );
        assert_eq!(
            "NodeWatchResources".parse::<MethodOf>().unwrap().driver,
            DriverRef::The
        );
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

    #[test]
    fn the_optional_tails_of_class_and_claim_sentences_parse() {
        assert_eq!(
            r#" for driver "a" with parameters {"x":"y"}, serving extended resource "r""#
                .parse::<ClassOptions>()
                .unwrap(),
            ClassOptions {
                driver: DriverRef::Named("a".into()),
                parameters: Some(r#"{"x":"y"}"#.into()),
                extended_resource: Some("r".into()),
            }
        );
        assert_eq!(
            " serving extended resource \"r\""
                .parse::<ClassOptions>()
                .unwrap(),
            ClassOptions {
                extended_resource: Some("r".into()),
                ..ClassOptions::default()
            }
        );
        assert_eq!("".parse::<ClassOptions>().unwrap(), ClassOptions::default());
        assert_eq!(
            " for the driver with admin access"
                .parse::<ClaimOptions>()
                .unwrap(),
            ClaimOptions {
                driver: DriverRef::The,
                admin_access: true
            }
        );
    }

    #[test]
    fn pod_claims_containers_and_instance_settings_parse() {
        assert_eq!(
            "using claims \"a\" and \"b\""
                .parse::<PodClaimsPhrase>()
                .unwrap(),
            PodClaimsPhrase::External(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            "init container \"i\"".parse::<Containers>().unwrap(),
            Containers::Init("i".into())
        );
        assert!("blue".parse::<InstanceSettings>().is_err());
    }
}

#[cfg(test)]
mod props;
