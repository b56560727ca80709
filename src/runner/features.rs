//! Feature files: loading (`files`), listing, checking ([`check`], with
//! the known tags of `tags`), and deciding up front which scenarios this
//! cluster cannot run (`skips`).
use std::collections::BTreeMap;
use std::path::PathBuf;

use cucumber::gherkin::{self, Step};
use regex::Regex;

mod files;
mod skips;
mod tags;

pub use files::{FeatureError, describe_parse_error, feature_files, load, parse_all};
pub use skips::{mark_skipped, nodes_step, skip_reason};
pub use tags::{KNOWN_TAGS, TAG_PREFIXES, tag_is_known, unknown_expression_tags};

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
}
