//! The data file, `docs/upstream-tests.tsv`: upstream's tests as read
//! from upstream's sources, with the keys that tell apart tests sharing a
//! title and the reason a test is not ported, and the suite's own
//! scenarios with what each adds. Written by hand, so every row is checked
//! as it is read and every problem is said with its line.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The key alternative that picks a test when the scenario names none of the
/// keys of its title: the variant upstream's default driver runs.
pub(super) const OTHERWISE: &str = "*";

/// How the data file's sources name the node suite's files; the others
/// are under `test/e2e/dra/`.
const NODE_SUITE_DIR: &str = "e2e_node/";

/// One of upstream's tests, as the data file lists it.
#[derive(Debug, Clone)]
pub struct UpstreamTest {
    /// Line in the data file.
    pub line: usize,
    /// File under upstream's `test/e2e/dra/`.
    pub source: String,
    /// The contexts around the test, with their labels, after `[sig-node] [DRA]`.
    pub context: String,
    /// The `It(...)` text.
    pub title: String,
    /// Labels of the `It` itself (`[Conformance]`, `[KubeletMinVersion:1.34]`, ...).
    pub labels: String,
    /// Alternatives, one of which a scenario's context names, for titles
    /// upstream uses more than once.
    pub keys: Vec<String>,
    /// Why no scenario ports it.
    pub reason: Option<String>,
}

impl UpstreamTest {
    /// A spec of the node suite (`test/e2e_node/`), not of `test/e2e/dra/`.
    pub fn is_node_suite(&self) -> bool {
        self.source.starts_with(NODE_SUITE_DIR)
    }

    /// The name Ginkgo reports, as its label filter and CI dashboards show it.
    pub fn full_name(&self) -> String {
        let mut n = format!("[sig-node] [DRA] {} {}", self.context, self.title);
        if !self.labels.is_empty() {
            n.push(' ');
            n.push_str(&self.labels);
        }
        n
    }
}

impl UpstreamTest {
    /// The tags a scenario porting the test carries: those of upstream's
    /// labels that select, skip or serialise tests as the suite's tags do
    /// (`[Feature:DynamicResourceAllocation]`, feature gates, kubelet
    /// versions, `[Serial]`, `[Slow]`, `[Conformance]`).
    ///
    /// The node suite's `[Serial]` is not one of them: upstream runs it one
    /// spec at a time on a node of its own, and its specs share that node's
    /// only plugin names. A scenario has drivers and a namespace of its own;
    /// those that stop a node's daemons have their nodes to themselves
    /// (`@OwnNodes`) by their own tags.
    pub fn tags(&self) -> Vec<String> {
        let node_suite = self.is_node_suite();
        let mut tags: Vec<String> = format!("{} {}", self.context, self.labels)
            .split('[')
            .filter_map(|part| part.split_once(']').map(|(label, _)| label))
            .filter_map(|label| match label {
                "Feature:DynamicResourceAllocation" => Some("DynamicResourceAllocation".to_owned()),
                "Serial" if node_suite => None,
                "Serial" | "Slow" | "Conformance" => Some(label.to_lowercase()),
                l if l.starts_with("FeatureGate:") || l.starts_with("KubeletMinVersion:") => {
                    Some(l.to_owned())
                }
                _ => None,
            })
            .collect();
        tags.dedup();
        tags
    }
}

/// A scenario of the suite that ports no upstream test, and what it adds.
#[derive(Debug, Clone)]
pub struct OwnScenario {
    pub line: usize,
    pub feature: PathBuf,
    pub title: String,
    pub adds: String,
}

#[derive(Debug, Default)]
pub struct Catalogue {
    pub tests: Vec<UpstreamTest>,
    pub own: Vec<OwnScenario>,
}

/// Reads the data file: tab-separated, `#` starts a comment line.
///
/// `upstream SOURCE CONTEXT TITLE LABELS KEYS REASON` and
/// `own FEATURE-FILE TITLE WHAT-IT-ADDS`; KEYS are alternatives separated by
/// ` | `; empty fields stay empty between the tabs.
pub fn parse_catalogue(text: &str, path: &Path) -> Result<Catalogue, Vec<String>> {
    let mut cat = Catalogue::default();
    let mut errors = Vec::new();
    let at = |line: usize| format!("{}:{line}", path.display());
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = raw.split('\t').map(str::trim).collect();
        match fields[0] {
            "upstream" => {
                if fields.len() != 7 {
                    errors.push(format!(
                        "{}: an upstream row has 7 tab-separated fields (upstream, source, context, \
                         title, labels, keys, reason), this one has {}",
                        at(line),
                        fields.len()
                    ));
                    continue;
                }
                if fields[3].is_empty() || fields[1].is_empty() {
                    errors.push(format!(
                        "{}: the source and the title may not be empty",
                        at(line)
                    ));
                    continue;
                }
                let keys = fields[5]
                    .split(" | ")
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned)
                    .collect();
                cat.tests.push(UpstreamTest {
                    line,
                    source: fields[1].to_owned(),
                    context: fields[2].to_owned(),
                    title: fields[3].to_owned(),
                    labels: fields[4].to_owned(),
                    keys,
                    reason: (!fields[6].is_empty()).then(|| fields[6].to_owned()),
                });
            }
            "own" => {
                if fields.len() != 4 || fields[1..].iter().any(|f| f.is_empty()) {
                    errors.push(format!(
                        "{}: an own row has 4 tab-separated, non-empty fields (own, feature file, \
                         scenario title, what it adds)",
                        at(line)
                    ));
                    continue;
                }
                cat.own.push(OwnScenario {
                    line,
                    feature: PathBuf::from(fields[1]),
                    title: fields[2].to_owned(),
                    adds: fields[3].to_owned(),
                });
            }
            other => errors.push(format!(
                "{}: a row starts with `upstream` or `own`, not `{other}`",
                at(line)
            )),
        }
    }
    let mut by_title: BTreeMap<&str, Vec<&UpstreamTest>> = BTreeMap::new();
    for t in &cat.tests {
        by_title.entry(t.title.as_str()).or_default().push(t);
    }
    for group in by_title.values().filter(|g| g.len() > 1) {
        for (i, t) in group.iter().enumerate() {
            if group[..i].iter().any(|o| o.context == t.context) {
                errors.push(format!(
                    "{}: upstream test `{}` is listed twice",
                    at(t.line),
                    t.full_name()
                ));
            } else if t.keys.is_empty() {
                errors.push(format!(
                    "{}: upstream uses the title `{}` {} times, so this row needs keys: words a \
                     scenario's title qualifier, Rule, Feature or tags contain for this context \
                     (`{}`) and not for the others",
                    at(t.line),
                    t.title,
                    group.len(),
                    t.context
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(cat)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_used_twice_needs_keys_and_rows_need_their_fields() {
        let text = "upstream\tdra.go\tcontrol plane\tuses all resources\t\t\t\n\
                    upstream\tdra.go\tkubelet on multiple nodes\tuses all resources\t\tkubelet\t\n\
                    upstream\tdra.go\tkubelet\ttoo few fields\n\
                    own\tfeatures/x.feature\tno note\t\n\
                    extra\tsomething\n";
        let errors = parse_catalogue(text, Path::new("t.tsv")).expect_err("inconsistent rows");
        let all = errors.join("\n");
        assert!(all.contains("t.tsv:1: upstream uses the title `uses all resources` 2 times, so this row needs keys"), "{all}");
        assert!(
            all.contains("t.tsv:3: an upstream row has 7 tab-separated fields"),
            "{all}"
        );
        assert!(
            all.contains("t.tsv:4: an own row has 4 tab-separated, non-empty fields"),
            "{all}"
        );
        assert!(
            all.contains("t.tsv:5: a row starts with `upstream` or `own`, not `extra`"),
            "{all}"
        );
        assert_eq!(errors.len(), 4, "{all}");
    }

    #[test]
    fn tags_are_those_of_the_labels_the_suite_mirrors() {
        let t = UpstreamTest {
            line: 1,
            source: "dra.go".into(),
            context: "kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRADeviceTaints]"
                .into(),
            title: "DeviceTaintRule evicts pod".into(),
            labels: "[Serial] [FeatureGate:DRADeviceTaintRules] [KubeletMinVersion:1.34]".into(),
            keys: Vec::new(),
            reason: None,
        };
        assert_eq!(
            t.tags(),
            [
                "DynamicResourceAllocation",
                "FeatureGate:DRADeviceTaints",
                "serial",
                "FeatureGate:DRADeviceTaintRules",
                "KubeletMinVersion:1.34"
            ]
        );
    }

    #[test]
    fn the_node_suites_serial_label_asks_for_no_tag() {
        let t = UpstreamTest {
            line: 1,
            source: "e2e_node/dra_test.go".into(),
            context: "[Feature:DynamicResourceAllocation] Resource Health \
                      [FeatureGate:ResourceHealthStatus] [Serial]"
                .into(),
            title: "should reflect device health changes in the Pod's status".into(),
            labels: String::new(),
            keys: Vec::new(),
            reason: None,
        };
        assert!(t.is_node_suite());
        assert_eq!(
            t.tags(),
            [
                "DynamicResourceAllocation",
                "FeatureGate:ResourceHealthStatus"
            ]
        );
    }
}
