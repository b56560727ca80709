//! The tags the suite understands. A tag in a feature file or a `--tags`
//! expression that is neither known nor on any scenario is a typo, and a
//! typo in a tag selects or skips scenarios silently: `dra-e2e check` and
//! the run report it by name instead.
use cucumber::gherkin;

use super::scenarios;

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

#[cfg(test)]
mod tests {
    use super::*;

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
    use cucumber::gherkin::GherkinEnv;

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
            } else if let Some(s) = crate::runner::suggest::tag(&t, KNOWN_TAGS, TAG_PREFIXES) {
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
