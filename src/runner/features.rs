//! Feature files: loading, listing, checking, and deciding up front which
//! scenarios this cluster cannot run.
//!
//! A scenario the cluster cannot run (too few nodes, a feature gate that is off,
//! a real container runtime needed on the local cluster) gets a first step
//! `skipped: <reason>` that matches no step definition, so cucumber reports it
//! as skipped and the reason is printed with it. Background steps of such a
//! feature are folded into its scenarios so a skipped scenario sets nothing up.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cucumber::gherkin::{self, GherkinEnv, Step, StepType};
use regex::Regex;

use crate::cluster::Environment;
use crate::report::SKIP_PREFIX;

/// Tags the suite understands as they are.
pub const KNOWN_TAGS: &[&str] = &[
    "DynamicResourceAllocation",
    "ContainerRuntime",
    "serial",
    "OwnNodes",
    "slow",
    "conformance",
    "allow.skipped",
    "retry",
    "DriverConformance",
    "DevicesPerNode",
    "DriverPods",
    "DriverSurges",
    "DriverUninstalls",
    "NodeOperations",
    "DeviceCount",
    "Interposed",
    "KubeletMetrics",
];

/// Beginnings of the tags the suite understands with a value after them.
pub const TAG_PREFIXES: &[&str] = &[
    "FeatureGate:",
    "FaultExempt:",
    "KubeletMinVersion:",
    "API:",
    "retry(",
    "retry.",
];

/// Tags the suite understands; `check` rejects others so typos surface.
pub fn tag_is_known(tag: &str) -> bool {
    if let Some(api) = tag.strip_prefix("API:") {
        return crate::ground::discovery::NeededApi::parse(api).is_some();
    }
    // A version that does not read would skip nothing, silently.
    if let Some(version) = tag.strip_prefix("KubeletMinVersion:") {
        return crate::ground::node_ready::major_minor(version).is_some();
    }
    KNOWN_TAGS.contains(&tag)
        || TAG_PREFIXES
            .iter()
            .any(|p| tag.starts_with(p) && tag.len() > p.len())
        // `@DriverCapability:<Name>`: only names of the profile's vocabulary.
        || crate::profile::capability::tag_capability(tag).is_some_and(|c| c.is_ok())
}

/// Pattern of the step that states how many nodes a scenario needs.
pub fn nodes_step() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^(\d+)(?: to (\d+))? ready nodes?$").unwrap_or_else(|_| unreachable!())
    })
}

/// Pattern of the step that adds nodes shared with other scenarios to
/// those a scenario owns.
fn more_nodes_step() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^(\d+) more ready nodes? shared with other scenarios$")
            .unwrap_or_else(|_| unreachable!())
    })
}

/// The nodes the scenario needs: its `N ready nodes` and the `N more`
/// it shares besides.
fn min_nodes(steps: &[Step]) -> Option<usize> {
    let count = |re: &Regex| -> Vec<usize> {
        steps
            .iter()
            .filter(|s| s.ty == StepType::Given)
            .filter_map(|s| re.captures(&s.value))
            .filter_map(|c| c.get(1)?.as_str().parse().ok())
            .collect()
    };
    let base = count(nodes_step()).first().copied();
    let more: usize = count(more_nodes_step()).iter().sum();
    match (base, more) {
        (None, 0) => None,
        (base, more) => Some(base.unwrap_or(0) + more),
    }
}

/// Why `env` cannot run the scenario, if it cannot.
pub fn skip_reason(
    env: &Environment,
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
) -> Option<String> {
    let tags = feature
        .tags
        .iter()
        .chain(rule.iter().flat_map(|r| r.tags.iter()))
        .chain(scenario.tags.iter());
    for tag in tags {
        if tag == "ContainerRuntime" && !env.container_runtime() {
            return Some(
                "needs a real container runtime; the local cluster's simulated kubelet runs no \
                 containers (run it with --node-kind real, or on kind)"
                    .to_owned(),
            );
        }
        if tag == "KubeletMetrics" && env.kubelet != crate::cluster::Kubelet::Real {
            return Some(
                "reads the kubelet's own metrics; the local cluster's simulated kubelet serves \
                 none (run it with --node-kind real, or on kind)"
                    .to_owned(),
            );
        }
        if tag == "NodeOperations" && !env.node_operations {
            return Some(
                "needs node operations (a reboot, or a stop, start or restart of the kubelet or \
                 containerd), which the runner has only on the local cluster's real nodes \
                 (--node-kind real)"
                    .to_owned(),
            );
        }
        if let Some(api) = tag.strip_prefix("API:")
            && env.unserved_apis.iter().any(|a| a == api)
        {
            let shown = crate::ground::discovery::NeededApi::parse(api)
                .map_or_else(|| api.to_owned(), |a| a.to_string());
            return Some(format!("needs {shown}, which this cluster does not serve"));
        }
        if let Some(gate) = tag.strip_prefix("FeatureGate:")
            && let Some((_, why)) = env.refused_gates.iter().find(|(g, _)| g == gate)
        {
            return Some(format!("feature gate {gate} {why}"));
        }
        if let (Some(gate), Some(enabled)) = (tag.strip_prefix("FeatureGate:"), &env.enabled_gates)
            && !enabled.iter().any(|g| g == gate)
        {
            return Some(format!(
                "feature gate {gate} is not enabled on this cluster (local cluster: --feature-gates {gate}=true)"
            ));
        }
        if let Some(min) = tag.strip_prefix("KubeletMinVersion:")
            && let (Some(want), Some(have)) = (
                crate::ground::node_ready::major_minor(min),
                env.kubelet_version,
            )
            && have < want
        {
            return Some(format!(
                "needs kubelet {}.{} or newer, the oldest node runs {}.{}",
                want.0, want.1, have.0, have.1
            ));
        }
    }
    let profile = env
        .driver
        .clone()
        .unwrap_or_else(|| std::sync::Arc::new(crate::profile::builtin()));
    let names = feature
        .tags
        .iter()
        .chain(rule.iter().flat_map(|r| r.tags.iter()))
        .chain(scenario.tags.iter());
    if let Some(reason) = crate::profile::skip_reason(&profile, names.clone().map(String::as_str)) {
        return Some(reason);
    }
    if names.clone().any(|t| t == "DevicesPerNode") && profile.devices_per_node.is_none() {
        return Some(format!(
            "needs to know how many devices driver {} offers per node; its profile does not say \
             (devicesPerNode)",
            profile.driver_name
        ));
    }
    if names.clone().any(|t| t == "DeviceCount") && profile.device_count.is_none() {
        return Some(format!(
            "needs to make a device of driver {} go away; its profile does not say how the \
             driver is told its device count (deviceCount)",
            profile.driver_name
        ));
    }
    if names.clone().any(|t| t == "Interposed") && !env.interposed {
        return Some(match profile.interposable() {
            Ok(()) => format!(
                "needs the interposer in front of driver {} to count, fail and stall its \
                 calls: run with --interpose",
                profile.driver_name
            ),
            Err(reason) => format!("needs the interposer: {reason}"),
        });
    }
    if names.clone().any(|t| t == "DriverPods")
        && !matches!(
            profile.deployment,
            crate::profile::Deployment::RealNodes { .. }
                | crate::profile::Deployment::Manifests { .. }
        )
    {
        return Some(format!(
            "needs the pods of driver {}, which the runner knows only when it deploys the driver \
             from manifests (deployment.mode: RealNodes or Manifests)",
            profile.driver_name
        ));
    }
    if names.clone().any(|t| t == "DriverSurges")
        && let Some(reason) = no_surge_reason(&profile)
    {
        return Some(reason);
    }
    if names.clone().any(|t| t == "DriverUninstalls")
        && let Some(reason) = crate::harness::under_test::reinstall::skip_reason(&profile)
    {
        return Some(reason);
    }
    let steps: Vec<Step> = feature
        .background
        .iter()
        .flat_map(|b| b.steps.iter())
        .chain(
            rule.iter()
                .flat_map(|r| r.background.iter().flat_map(|b| b.steps.iter())),
        )
        .chain(scenario.steps.iter())
        .cloned()
        .collect();
    if let Some(min) = min_nodes(&steps)
        && env.ready_nodes < min
    {
        return Some(format!(
            "needs at least {min} ready schedulable nodes, the cluster has {}",
            env.ready_nodes
        ));
    }
    None
}

/// Why a `@DriverSurges` scenario cannot run against `profile`'s driver:
/// it rolls the driver's DaemonSet out and needs every node to keep the
/// driver throughout, which only a surging update (a node's new pod
/// starts before its old one goes) promises. Decided from the profile's
/// manifests, before anything is deployed.
fn no_surge_reason(profile: &crate::profile::Profile) -> Option<String> {
    let driver = &profile.driver_name;
    if matches!(profile.deployment, crate::profile::Deployment::Builtin) {
        return Some(
            "needs to roll out the driver's DaemonSet; the suite's own driver is hosted by the \
             runner and has none (run it with a profile of a driver the runner deploys from \
             manifests, deployment.mode: RealNodes or Manifests)"
                .to_owned(),
        );
    }
    if !matches!(
        profile.deployment,
        crate::profile::Deployment::RealNodes { .. } | crate::profile::Deployment::Manifests { .. }
    ) {
        return Some(format!(
            "needs to roll out the DaemonSet of driver {driver}, which the runner can only when it \
             deploys the driver from manifests (deployment.mode: RealNodes or Manifests)"
        ));
    }
    let sets = match crate::harness::under_test::manifest_daemonsets(profile) {
        Ok(sets) => sets,
        Err(e) => {
            return Some(format!(
                "cannot tell whether the DaemonSet of driver {driver} updates by surging: {e}"
            ));
        }
    };
    if sets.is_empty() {
        return Some(format!(
            "needs the DaemonSet of driver {driver}; its manifests have none"
        ));
    }
    let not: Vec<String> = sets
        .iter()
        .filter_map(|ds| {
            let why = crate::harness::under_test::surges(ds).err()?;
            let name = ds.metadata.name.as_deref().unwrap_or_default();
            Some(format!("DaemonSet {name} {why}"))
        })
        .collect();
    (!not.is_empty()).then(|| {
        format!(
            "needs a driver whose DaemonSet updates by surging (maxSurge above 0), so that no \
             node goes without it during a rollout; driver {driver}'s {}",
            not.join("; ")
        )
    })
}

fn skip_step(reason: &str, position: gherkin::LineCol) -> Step {
    Step {
        keyword: "Given ".to_owned(),
        ty: StepType::Given,
        value: format!("{SKIP_PREFIX}{reason}"),
        docstring: None,
        table: None,
        span: gherkin::Span { start: 0, end: 0 },
        position,
    }
}

/// Marks the scenarios `env` cannot run; see the module docs.
pub fn mark_skipped(env: &Environment, mut feature: gherkin::Feature) -> gherkin::Feature {
    let reasons: Vec<Option<String>> = feature
        .scenarios
        .iter()
        .map(|s| skip_reason(env, &feature, None, s))
        .collect();
    let rule_reasons: Vec<Vec<Option<String>>> = feature
        .rules
        .iter()
        .map(|r| {
            r.scenarios
                .iter()
                .map(|s| skip_reason(env, &feature, Some(r), s))
                .collect()
        })
        .collect();
    let any = reasons
        .iter()
        .chain(rule_reasons.iter().flatten())
        .any(Option::is_some);
    if !any {
        return feature;
    }
    let feature_bg: Vec<Step> = feature
        .background
        .take()
        .map(|b| b.steps)
        .unwrap_or_default();
    for (scenario, reason) in feature.scenarios.iter_mut().zip(&reasons) {
        let mut steps = feature_bg.clone();
        steps.append(&mut scenario.steps);
        scenario.steps = steps;
        if let Some(r) = reason {
            scenario.steps.insert(0, skip_step(r, scenario.position));
        }
    }
    for (rule, reasons) in feature.rules.iter_mut().zip(&rule_reasons) {
        let rule_bg: Vec<Step> = rule.background.take().map(|b| b.steps).unwrap_or_default();
        for (scenario, reason) in rule.scenarios.iter_mut().zip(reasons) {
            let mut steps = feature_bg.clone();
            steps.extend(rule_bg.iter().cloned());
            steps.append(&mut scenario.steps);
            scenario.steps = steps;
            if let Some(r) = reason {
                scenario.steps.insert(0, skip_step(r, scenario.position));
            }
        }
    }
    feature
}

#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    #[error("no feature files found in {0} (pass --features PATH)")]
    NoFeatures(PathBuf),
    #[error("--input {0}: the glob matches no feature file")]
    NoInput(String),
    /// The io error is part of the message, not a separate cause, so that
    /// it is said once.
    #[error("reading features from {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// `path:line:col: reason` for a Gherkin syntax error, with the offending
/// line quoted; gherkin's own message is only "Could not parse feature file".
pub fn describe_parse_error(e: &gherkin::ParseFileError) -> FeatureError {
    match e {
        gherkin::ParseFileError::Reading { path, source } => FeatureError::Read {
            path: path.clone(),
            error: std::io::Error::new(source.kind(), source.to_string()),
        },
        gherkin::ParseFileError::Parsing {
            path,
            error,
            source,
        } => {
            // The position and the expected tokens are private fields;
            // their Display is `Error at LINE:COL: {"token", ...}`. The
            // position is where the parser gave up, often lines after the
            // culprit, so a known culprit is looked up in the text instead.
            let shown = source.to_string();
            let rest = shown.strip_prefix("Error at ").unwrap_or(&shown);
            let (pos, expected) = rest.split_once(": ").unwrap_or((rest, ""));
            let (line, col) = pos.split_once(':').unwrap_or((pos, "?"));
            let (mut line, mut col) = (line.to_owned(), col.to_owned());
            let src = std::fs::read_to_string(path).unwrap_or_default();
            let find = |pred: &dyn Fn(&str) -> bool| {
                src.lines().enumerate().find_map(|(i, l)| {
                    let t = l.trim_start();
                    pred(t).then(|| (i + 1, l.len() - t.len() + 1))
                })
            };
            let reason = match error {
                Some(gherkin::EnvError::UnknownKeyword(k)) => {
                    let k = k.lines().next().unwrap_or_default().trim().to_owned();
                    if let Some((l, c)) = find(&|t: &str| !k.is_empty() && t.starts_with(&k)) {
                        (line, col) = (l.to_string(), c.to_string());
                    }
                    if k.starts_with("\"\"\"") || k.starts_with("```") {
                        format!("doc string `{k}` is not closed")
                    } else {
                        format!(
                            "`{k}` starts with no Gherkin keyword (Feature, Rule, Background, \
                             Scenario, Scenario Outline, Examples, Given, When, Then, And, But, *)"
                        )
                    }
                }
                Some(gherkin::EnvError::InconsistentCellCount(rows)) => {
                    let width = rows.first().map(Vec::len).unwrap_or_default();
                    match rows.iter().find(|r| r.len() != width) {
                        Some(bad) => {
                            let cells = |t: &str| -> Vec<String> {
                                let t = t.trim();
                                let inner = t.strip_prefix('|').and_then(|t| t.strip_suffix('|'));
                                inner
                                    .map(|i| i.split('|').map(|c| c.trim().to_owned()).collect())
                                    .unwrap_or_default()
                            };
                            if let Some((l, c)) = find(&|t: &str| cells(t) == *bad) {
                                (line, col) = (l.to_string(), c.to_string());
                            }
                            format!(
                                "table row has {} cells, the table's first row has {width}",
                                bad.len()
                            )
                        }
                        None => "table rows have different numbers of cells".to_owned(),
                    }
                }
                Some(env) => env.to_string(),
                None => {
                    let text = line
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| src.lines().nth(n.checked_sub(1)?))
                        .map(|l| l.trim().to_owned())
                        .unwrap_or_default();
                    let mut tokens: Vec<&str> = expected
                        .trim_matches(|c| c == '{' || c == '}')
                        .split(", ")
                        .map(|t| t.trim_matches('"'))
                        .filter(|t| !t.is_empty())
                        .collect();
                    tokens.sort_unstable();
                    tokens.dedup();
                    let mut r = if text.is_empty() {
                        "unexpected end of a line or of the file".to_owned()
                    } else {
                        format!("unexpected `{text}`")
                    };
                    if !tokens.is_empty() {
                        r.push_str(&format!(" (expected {})", tokens.join(" or ")));
                    }
                    r
                }
            };
            FeatureError::Parse {
                path: PathBuf::from(format!("{}:{line}:{col}", path.display())),
                message: reason,
            }
        }
    }
}

/// Feature files under `path` (a file or a directory), sorted.
pub fn feature_files(path: &Path) -> Result<Vec<PathBuf>, FeatureError> {
    let meta = std::fs::metadata(path).map_err(|error| FeatureError::Read {
        path: path.to_owned(),
        error,
    })?;
    let mut files = Vec::new();
    if meta.is_file() {
        files.push(path.to_owned());
    } else {
        let mut stack = vec![path.to_owned()];
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|error| FeatureError::Read {
                path: dir.clone(),
                error,
            })?;
            for entry in entries {
                let p = entry
                    .map_err(|error| FeatureError::Read {
                        path: dir.clone(),
                        error,
                    })?
                    .path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "feature") {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(FeatureError::NoFeatures(path.to_owned()));
    }
    Ok(files)
}

/// Parses every feature under `path`, expanding Scenario Outlines.
pub fn parse_all(path: &Path) -> Result<Vec<gherkin::Feature>, Vec<FeatureError>> {
    let files = feature_files(path).map_err(|e| vec![e])?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match gherkin::Feature::parse_path(&file, GherkinEnv::default()) {
            Ok(f) => match cucumber::feature::Ext::expand_examples(f) {
                Ok(f) => out.push(f),
                Err(e) => errors.push(FeatureError::Parse {
                    path: file,
                    message: e.to_string(),
                }),
            },
            Err(e) => errors.push(describe_parse_error(&e)),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The features to run: the files cucumber's `--input GLOB` matches when it
/// is given (`input` is the glob as typed), otherwise those under every
/// `--features` path. Every file is parsed once, here; an empty match is an
/// error.
pub fn load(
    paths: &[PathBuf],
    input: Option<&str>,
    input_cli: &cucumber::parser::basic::Cli,
) -> Result<Vec<gherkin::Feature>, Vec<FeatureError>> {
    let Some(glob) = input else {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for path in paths {
            match parse_all(path) {
                Ok(f) => out.extend(f),
                Err(e) => errors.extend(e),
            }
        }
        return if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        };
    };
    use cucumber::Parser as _;
    use futures::{FutureExt as _, StreamExt as _};
    // The basic parser's stream is a ready iterator: it never waits.
    let results: Vec<_> = cucumber::parser::Basic::new()
        .parse(".", input_cli.clone())
        .collect::<Vec<_>>()
        .now_or_never()
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(f) => out.push(f),
            Err(cucumber::parser::Error::Parsing(e)) => errors.push(describe_parse_error(&e)),
            Err(cucumber::parser::Error::ExampleExpansion(e)) => errors.push(FeatureError::Parse {
                path: PathBuf::from(glob),
                message: e.to_string(),
            }),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if out.is_empty() {
        return Err(vec![FeatureError::NoInput(glob.to_owned())]);
    }
    Ok(out)
}

/// Tags in a `--tags` expression that no scenario in `features` carries and
/// the suite does not know: typos, as `dra-e2e check` reports them in files.
pub fn unknown_expression_tags(
    op: &gherkin::tagexpr::TagOperation,
    features: &[gherkin::Feature],
) -> Vec<String> {
    use gherkin::tagexpr::TagOperation as Op;
    fn walk<'a>(op: &'a Op, out: &mut Vec<&'a str>) {
        match op {
            Op::And(a, b) | Op::Or(a, b) => {
                walk(a, out);
                walk(b, out);
            }
            Op::Not(a) => walk(a, out),
            Op::Tag(t) => out.push(t),
        }
    }
    let mut tags = Vec::new();
    walk(op, &mut tags);
    let used: std::collections::HashSet<String> = scenarios(features)
        .into_iter()
        .flat_map(|s| s.tags)
        .collect();
    let mut unknown: Vec<String> = tags
        .into_iter()
        .map(|t| t.trim_start_matches('@'))
        .filter(|t| !tag_is_known(t) && !used.contains(*t))
        .map(|t| format!("@{t}"))
        .collect();
    unknown.dedup();
    unknown
}

/// One scenario with where it is and its effective tags.
#[derive(Debug, Clone)]
pub struct ScenarioRef {
    pub feature: String,
    pub rule: Option<String>,
    pub name: String,
    pub path: PathBuf,
    pub line: usize,
    pub tags: Vec<String>,
}

pub fn scenarios(features: &[gherkin::Feature]) -> Vec<ScenarioRef> {
    let mut out = Vec::new();
    for f in features {
        let mk = |rule: Option<&gherkin::Rule>, s: &gherkin::Scenario| {
            let mut tags: Vec<String> = f.tags.clone();
            if let Some(r) = rule {
                tags.extend(r.tags.iter().cloned());
            }
            tags.extend(s.tags.iter().cloned());
            tags.dedup();
            ScenarioRef {
                feature: f.name.clone(),
                rule: rule.map(|r| r.name.clone()),
                name: s.name.clone(),
                path: f.path.clone().unwrap_or_default(),
                line: s.position.line,
                tags,
            }
        };
        out.extend(f.scenarios.iter().map(|s| mk(None, s)));
        for r in &f.rules {
            out.extend(r.scenarios.iter().map(|s| mk(Some(r), s)));
        }
    }
    out
}

/// Adds `NAME=true` to `gates` for every `@FeatureGate:NAME` tag of the
/// selected scenarios that `gates` does not already name, and returns the
/// names added. A local cluster is ours to configure: turning on what the
/// chosen scenarios need beats skipping them, and a gate the user set either
/// way stays as set.
pub fn enable_tagged_gates(gates: &mut Vec<String>, selected: &[ScenarioRef]) -> Vec<String> {
    let named = |g: &str, gates: &[String]| {
        gates
            .iter()
            .any(|e| e.split('=').next().map(str::trim) == Some(g))
    };
    let mut added = Vec::new();
    for gate in selected
        .iter()
        .flat_map(|s| s.tags.iter())
        .filter_map(|t| t.strip_prefix("FeatureGate:"))
    {
        if !named(gate, gates) {
            gates.push(format!("{gate}=true"));
            added.push(gate.to_owned());
        }
    }
    added
}

/// Whether a scenario passes `--tags` / `--name`, as cucumber would decide.
pub fn selected(
    tags: Option<&cucumber::gherkin::tagexpr::TagOperation>,
    name: Option<&Regex>,
    s: &ScenarioRef,
) -> bool {
    if let Some(re) = name {
        return re.is_match(&s.name);
    }
    match tags {
        Some(op) => cucumber::tag::Ext::eval(op, s.tags.iter()),
        None => true,
    }
}

/// Problems `dra-e2e check` reports, each with its file:line.
pub fn check<W>(
    features: &[gherkin::Feature],
    steps: &cucumber::step::Collection<W>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for f in features {
        let path = f
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let check_tags = |tags: &[String], line: usize, problems: &mut Vec<String>| {
            for t in tags {
                if !tag_is_known(t) {
                    let hint = super::suggest::tag(t, KNOWN_TAGS, TAG_PREFIXES)
                        .map(|s| format!(" (did you mean @{s}?)"))
                        .unwrap_or_default();
                    problems.push(format!("{path}:{line}: unknown tag @{t}{hint}"));
                }
            }
        };
        check_tags(&f.tags, f.position.line, &mut problems);
        let mut all_steps: Vec<(&Step, usize)> = Vec::new();
        if let Some(b) = &f.background {
            all_steps.extend(b.steps.iter().map(|s| (s, s.position.line)));
        }
        for s in &f.scenarios {
            check_tags(&s.tags, s.position.line, &mut problems);
            all_steps.extend(s.steps.iter().map(|st| (st, st.position.line)));
        }
        for r in &f.rules {
            check_tags(&r.tags, r.position.line, &mut problems);
            if let Some(b) = &r.background {
                all_steps.extend(b.steps.iter().map(|s| (s, s.position.line)));
            }
            for s in &r.scenarios {
                check_tags(&s.tags, s.position.line, &mut problems);
                all_steps.extend(s.steps.iter().map(|st| (st, st.position.line)));
            }
        }
        let mut reported = BTreeMap::new();
        for (st, line) in all_steps {
            // Outline expansion repeats steps; report each location once.
            if reported.insert((line, st.value.clone()), ()).is_some() {
                continue;
            }
            match steps.find(st) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    let mut problem =
                        format!("{path}:{line}: undefined step: {}{}", st.keyword, st.value);
                    for s in super::suggest::steps(&st.value, st.ty) {
                        problem.push_str(&format!("\n  did you mean: \"{s}\"?"));
                    }
                    problems.push(problem);
                }
                Err(e) => problems.push(format!(
                    "{path}:{line}: ambiguous step: {}{} ({} definitions match)",
                    st.keyword,
                    st.value,
                    e.possible_matches.len()
                )),
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_gates_are_enabled_unless_the_user_set_them() {
        let scenario = |tags: &[&str]| ScenarioRef {
            feature: "f".into(),
            rule: None,
            name: "s".into(),
            path: PathBuf::new(),
            line: 1,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        };
        let selected = [
            scenario(&["DynamicResourceAllocation", "FeatureGate:A"]),
            scenario(&["FeatureGate:B", "FeatureGate:A"]),
            scenario(&["FeatureGate:C"]),
        ];
        let mut gates = vec!["B=false".to_owned()];
        let added = enable_tagged_gates(&mut gates, &selected);
        assert_eq!(added, ["A", "C"]);
        assert_eq!(gates, ["B=false", "A=true", "C=true"]);
    }

    /// Nodes shared besides a scenario's own count towards what it needs.
    #[test]
    fn more_shared_nodes_add_to_the_nodes_a_scenario_needs() {
        let given = |value: &str| Step {
            keyword: "Given ".to_owned(),
            ty: StepType::Given,
            value: value.to_owned(),
            docstring: None,
            table: None,
            span: gherkin::Span { start: 0, end: 0 },
            position: gherkin::LineCol { line: 1, col: 1 },
        };
        assert_eq!(min_nodes(&[given("a device class")]), None);
        assert_eq!(min_nodes(&[given("2 to 8 ready nodes")]), Some(2));
        assert_eq!(
            min_nodes(&[
                given("1 ready node"),
                given("1 more ready node shared with other scenarios"),
            ]),
            Some(2)
        );
    }

    /// What a cluster of an older release skips, and why: a gate its control
    /// plane refused, and a scenario for a newer kubelet than its nodes run.
    #[test]
    fn an_older_release_skips_what_it_cannot_run_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.feature");
        std::fs::write(
            &path,
            "Feature: f\n\n  @FeatureGate:New\n  Scenario: gated\n    Given 1 ready node\n\n  \
             @KubeletMinVersion:1.37\n  Scenario: newer kubelet\n    Given 1 ready node\n\n  \
             @KubeletMinVersion:1.36\n  Scenario: old enough\n    Given 1 ready node\n\n  \
             @API:resource.k8s.io/v1/devicetaintrules\n  Scenario: rules\n    Given 1 ready node\n\n  \
             @API:resource.k8s.io/v1/resourceclaims\n  Scenario: claims\n    Given 1 ready node\n",
        )
        .unwrap();
        let feature = gherkin::Feature::parse_path(&path, GherkinEnv::default()).unwrap();
        let env = Environment {
            kubelet: crate::cluster::Kubelet::Real,
            ready_nodes: 2,
            enabled_gates: Some(vec!["DynamicResourceAllocation".into()]),
            kubelet_version: Some((1, 36)),
            refused_gates: vec![("New".into(), "does not exist in Kubernetes v1.35.4".into())],
            unserved_apis: vec!["resource.k8s.io/v1/devicetaintrules".into()],
            node_operations: true,
            driver: None,
            interposed: true,
        };
        let reasons: Vec<Option<String>> = feature
            .scenarios
            .iter()
            .map(|s| skip_reason(&env, &feature, None, s))
            .collect();
        assert_eq!(
            reasons,
            [
                Some("feature gate New does not exist in Kubernetes v1.35.4".to_owned()),
                Some("needs kubelet 1.37 or newer, the oldest node runs 1.36".to_owned()),
                None,
                Some(
                    "needs resource.k8s.io/v1 devicetaintrules, which this cluster does not serve"
                        .to_owned()
                ),
                None,
            ]
        );
    }

    /// `@DriverSurges` is decided from the DaemonSet of the profile's
    /// manifests: the checked-in ones of upstream's test driver (default
    /// update strategy) and of the rolling-update driver (maxSurge 1).
    #[test]
    fn driver_surges_runs_only_on_a_driver_whose_daemonset_surges() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.feature");
        std::fs::write(
            &path,
            "Feature: f\n\n  @DriverSurges\n  Scenario: rollout\n    Given 1 ready node\n",
        )
        .unwrap();
        let feature = gherkin::Feature::parse_path(&path, GherkinEnv::default()).unwrap();
        let reason = |deployment: Option<crate::profile::Deployment>| {
            let mut profile = crate::profile::builtin();
            let builtin = deployment.is_none();
            if let Some(d) = deployment {
                profile.deployment = d;
                profile.driver_name = "d.example.com".into();
            }
            let env = Environment {
                kubelet: crate::cluster::Kubelet::Real,
                ready_nodes: 2,
                enabled_gates: None,
                kubelet_version: None,
                refused_gates: Vec::new(),
                unserved_apis: Vec::new(),
                node_operations: true,
                driver: (!builtin).then(|| std::sync::Arc::new(profile)),
                interposed: false,
            };
            skip_reason(&env, &feature, None, &feature.scenarios[0])
        };
        let manifests = |file: &str| crate::profile::Deployment::Manifests {
            manifests: vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(file)],
        };
        assert_eq!(
            reason(None).as_deref(),
            Some(
                "needs to roll out the driver's DaemonSet; the suite's own driver is hosted by \
                 the runner and has none (run it with a profile of a driver the runner deploys \
                 from manifests, deployment.mode: RealNodes or Manifests)"
            )
        );
        assert_eq!(
            reason(Some(manifests(
                "deploy/dra-test-driver/kubelet-plugin.yaml"
            )))
            .as_deref(),
            Some(
                "needs a driver whose DaemonSet updates by surging (maxSurge above 0), so that \
                 no node goes without it during a rollout; driver d.example.com's DaemonSet \
                 dra-test-driver updates with maxSurge 0 (default) and maxUnavailable 1 \
                 (default): a node's old pod goes before its new one starts"
            )
        );
        assert_eq!(
            reason(Some(manifests("deploy/rolling-driver/kubelet-plugin.yaml"))),
            None
        );
        let installed = reason(Some(crate::profile::Deployment::Installed)).unwrap();
        assert!(
            installed.contains("deploys the driver from manifests"),
            "{installed}"
        );
        let missing = reason(Some(manifests("no/such/file.yaml"))).unwrap();
        assert!(
            missing.starts_with(
                "cannot tell whether the DaemonSet of driver d.example.com updates by surging: \
                 reading manifest"
            ),
            "{missing}"
        );
    }

    fn parse_error(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.feature");
        std::fs::write(&path, text).unwrap();
        let errors = parse_all(&path).unwrap_err();
        assert_eq!(errors.len(), 1);
        let shown = errors[0].to_string();
        shown
            .strip_prefix(&path.display().to_string())
            .unwrap_or(&shown)
            .to_owned()
    }

    #[test]
    fn syntax_errors_say_line_column_and_reason() {
        let e = parse_error("Feature: x\n  Scenario: y\n    Given a\n  Blah blah\n    Then b\n");
        assert!(
            e.starts_with(":4:3: `Blah` starts with no Gherkin keyword"),
            "{e}"
        );
        let e = parse_error("Featur: x\n  Scenario: y\n    Given a\n");
        assert!(e.starts_with(":1:1: `Featur: x` starts with"), "{e}");
        let e = parse_error(
            "Feature: x\n  Scenario: y\n    Given a\n      | a | b |\n      | c |\n    Then b\n",
        );
        assert_eq!(
            e,
            ":5:7: table row has 1 cells, the table's first row has 2"
        );
        let e =
            parse_error("Feature: x\n  Scenario: z\n    Given a\n    \"\"\"\n    unterminated\n");
        assert_eq!(e, ":4:5: doc string `\"\"\"` is not closed");
    }

    #[test]
    fn capability_tags_are_known_by_their_vocabulary_only() {
        assert!(tag_is_known("DriverCapability:AdminAccess"));
        assert!(!tag_is_known("DriverCapability:AdminAcess"));
        assert!(!tag_is_known("DriverCapability:"));
    }

    #[test]
    fn expression_tags_unknown_to_suite_and_files() {
        let op: gherkin::tagexpr::TagOperation =
            "@DynamicResourceAllocation and not @Typo and not @FeatureGate:X"
                .parse()
                .unwrap();
        assert_eq!(unknown_expression_tags(&op, &[]), vec!["@Typo".to_owned()]);
    }
}

/// Generated tags and `--tags` expressions: whatever a feature file or the
/// command line holds is known, or reported naming the tag; a tag the
/// check lets through is one the runner can act on. `PROPTEST_CASES`
/// raises the bounded count (`make props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Tags near the known ones: the known words, their prefixes and values,
    /// and any other character.
    fn tag() -> impl Strategy<Value = String> {
        let mut words: Vec<&'static str> = KNOWN_TAGS.to_vec();
        words.extend(TAG_PREFIXES);
        words.extend([
            "DriverCapability:",
            "SharedDevices",
            "v",
            "1",
            ".",
            "34",
            "x",
            ":",
            "(",
            ")",
            "resource.k8s.io/v1",
            "DRADeviceTaints",
        ]);
        let word = proptest::sample::select(words).prop_map(str::to_owned);
        let piece = prop_oneof![3 => word, 1 => any::<char>().prop_map(String::from)];
        proptest::collection::vec(piece, 0..5).prop_map(|p| p.concat())
    }

    /// A one-scenario feature carrying `tag`, as gherkin reads it.
    fn feature(tag: &str) -> Option<gherkin::Feature> {
        let text = format!("Feature: f\n  @{tag}\n  Scenario: s\n    Given 1 ready node\n");
        gherkin::Feature::parse(text, GherkinEnv::default()).ok()
    }

    proptest! {
        // Failures are kept as plain tests beside these, not in files.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Any tag: known (and then one the runner can act on), or
        /// unknown, with a suggestion other than itself if any.
        #[test]
        fn any_tag_is_known_or_reported(t in tag()) {
            if tag_is_known(&t) {
                if let Some(v) = t.strip_prefix("KubeletMinVersion:") {
                    prop_assert!(crate::ground::node_ready::major_minor(v).is_some(), "{t}");
                }
            } else if let Some(s) = super::super::suggest::tag(&t, KNOWN_TAGS, TAG_PREFIXES) {
                prop_assert!(s != t, "{t} suggested as itself");
            }
        }

        /// A `--tags` expression: the tags it names that are neither known
        /// nor on a scenario are reported, each by its name, and no other.
        #[test]
        fn expression_tags_are_reported_by_name(a in tag(), b in tag(), on_scenario in tag()) {
            let expression = format!("@{a} and not @{b}");
            // The expression parser is cucumber's; only what it reads counts here.
            let Ok(op) = expression.parse::<gherkin::tagexpr::TagOperation>() else {
                return Ok(());
            };
            let features: Vec<gherkin::Feature> = feature(&on_scenario).into_iter().collect();
            let on = features.first().map(|f| f.scenarios[0].tags.clone()).unwrap_or_default();
            // The tags as cucumber read them (`\\(` is `(`).
            fn walk(op: &gherkin::tagexpr::TagOperation, out: &mut Vec<String>) {
                use gherkin::tagexpr::TagOperation as Op;
                match op {
                    Op::And(a, b) | Op::Or(a, b) => {
                        walk(a, out);
                        walk(b, out);
                    }
                    Op::Not(a) => walk(a, out),
                    Op::Tag(t) => out.push(t.trim_start_matches('@').to_owned()),
                }
            }
            let mut named = Vec::new();
            walk(&op, &mut named);
            for reported in unknown_expression_tags(&op, &features) {
                let name = reported.strip_prefix('@').unwrap_or(&reported);
                prop_assert!(named.iter().any(|t| t == name), "{reported} is not in {named:?} ({expression})");
                prop_assert!(!tag_is_known(name) && !on.iter().any(|t| t == name), "{reported}");
            }
        }
    }

    /// Inputs the properties found.
    #[test]
    fn regressions() {
        // An escaped parenthesis in an expression is cucumber's to read:
        // `@A\\(` names the tag `A(`, reported as such.
        let op: gherkin::tagexpr::TagOperation = "@A and not @Unknown\\(".parse().unwrap();
        assert_eq!(unknown_expression_tags(&op, &[]), ["@A", "@Unknown("]);
        // A version that does not read used to pass the check and then
        // skip nothing.
        assert!(!tag_is_known("KubeletMinVersion:x"));
        assert!(!tag_is_known("KubeletMinVersion:1"));
        assert!(tag_is_known("KubeletMinVersion:1.34"));
    }
}
