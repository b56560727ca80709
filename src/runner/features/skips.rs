//! Deciding up front which scenarios this cluster cannot run: too few
//! nodes, a feature gate that is off or refused, a kubelet older than the
//! scenario needs, an API not served, a driver that lacks what the scenario
//! tests. Such a scenario gets a first step `skipped: <reason>` that
//! matches no step definition, so cucumber reports it as skipped and the
//! reason is printed with it; its background steps are folded into it so
//! that a skipped scenario sets nothing up.
use cucumber::gherkin::{self, Step, StepType};
use regex::Regex;

use crate::cluster::Environment;
use crate::report::SKIP_PREFIX;

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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use cucumber::gherkin::GherkinEnv;

    use super::*;

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
}
