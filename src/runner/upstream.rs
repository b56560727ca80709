//! `dra-e2e upstream`: the table of upstream's DRA e2e tests in
//! `docs/upstream-tests.md`, each with the scenario that ports it or the
//! reason it is not ported.
//!
//! Upstream's tests are listed by hand in a data file (`docs/upstream-tests.tsv`),
//! read from upstream's sources; which scenario ports which test is found in
//! the feature files, never written down: a scenario ports an upstream test
//! when its title is the test's `It(...)` title. Where upstream uses one
//! title in several contexts (the same test with and without a kubelet, per
//! API version, ...), the data file gives each of those tests a key, words
//! the scenario's title qualifier `(...)`, Rule, Feature or tags must contain.
//! A scenario whose title is no upstream title is listed in the data file as
//! the suite's own, so a misspelt title cannot pass for an extra scenario.
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use cucumber::gherkin::{self, GherkinEnv};

use super::features;

/// Where the generated section starts and ends in the file it is written into.
pub const BEGIN: &str = "<!-- upstream-table:begin -->";
pub const END: &str = "<!-- upstream-table:end -->";

/// The key alternative that picks a test when the scenario names none of the
/// keys of its title: the variant upstream's default driver runs.
const OTHERWISE: &str = "*";

/// The options of `dra-e2e upstream`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Print, write or check the table of upstream's tests and their scenarios (docs/upstream-tests.md)",
    long_about = "Print (or write into docs/upstream-tests.md, or check there) the table mapping \
                  upstream's DRA e2e tests to the scenarios that port them, or the reasons \
                  they are not ported. No cluster needed."
)]
pub struct UpstreamArgs {
    /// Feature file or directory holding the scenarios.
    #[arg(long, default_value = "features")]
    features: PathBuf,
    /// Upstream's tests, the reasons some are not ported, and the suite's own scenarios.
    #[arg(long, default_value = "docs/upstream-tests.tsv")]
    data: PathBuf,
    /// Replace the section between the markers of this file (docs/upstream-tests.md) with
    /// the table; its links are written relative to the file.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    write: Option<PathBuf>,
    /// Fail when the section between the markers of this file is not the table.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// First empty the reason of every test a scenario now ports, in the data file.
    #[arg(long)]
    drop_ported_reasons: bool,
}

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

/// One scenario as a run sees it: a Scenario, or one example row of an outline.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The feature file, as found under the features path given.
    pub path: PathBuf,
    /// The Scenario's line, or the example row's.
    pub line: usize,
    pub feature: String,
    pub rule: Option<String>,
    /// The title with the row's values in place of `<placeholders>`.
    pub title: String,
    /// The title as written.
    pub template: String,
    /// The example row's cells.
    pub row: Vec<String>,
    /// Tags of the feature, rule, scenario and examples.
    pub tags: Vec<String>,
}

impl Scenario {
    pub fn location(&self) -> String {
        format!("{}:{}", self.path.display(), self.line)
    }
}

/// Every scenario under `path`, in file order.
pub fn load_scenarios(path: &Path) -> Result<Vec<Scenario>, Vec<String>> {
    let files = features::feature_files(path).map_err(|e| vec![e.to_string()])?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let feature = match gherkin::Feature::parse_path(&file, GherkinEnv::default()) {
            Ok(f) => f,
            Err(e) => {
                errors.push(features::describe_parse_error(&e).to_string());
                continue;
            }
        };
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let mut add = |rule: Option<&gherkin::Rule>, s: &gherkin::Scenario| {
            let mut tags = feature.tags.clone();
            tags.extend(rule.iter().flat_map(|r| r.tags.iter().cloned()));
            tags.extend(s.tags.iter().cloned());
            // The driver conformance pack ports nothing of upstream's suite:
            // it has a table of its own, beside KEP-5970's behaviours.
            if tags.iter().any(|t| t == crate::report::conformance::TAG) {
                return;
            }
            let base = Scenario {
                path: file.clone(),
                line: s.position.line,
                feature: feature.name.clone(),
                rule: rule.map(|r| r.name.clone()),
                title: s.name.clone(),
                template: s.name.clone(),
                row: Vec::new(),
                tags,
            };
            if s.examples.is_empty() {
                out.push(base);
                return;
            }
            for ex in &s.examples {
                let Some(table) = &ex.table else { continue };
                let Some((header, rows)) = table.rows.split_first() else {
                    continue;
                };
                // The rows' lines: gherkin keeps only the table's position,
                // so the lines starting with `|` after `Examples:` are counted.
                let row_lines: Vec<usize> = lines
                    .iter()
                    .enumerate()
                    .skip(ex.position.line)
                    .skip_while(|(_, l)| !l.trim_start().starts_with('|'))
                    .take_while(|(_, l)| {
                        let t = l.trim_start();
                        t.starts_with('|') || t.starts_with('#') || t.is_empty()
                    })
                    .filter(|(_, l)| l.trim_start().starts_with('|'))
                    .map(|(i, _)| i + 1)
                    .skip(1)
                    .collect();
                for (i, row) in rows.iter().enumerate() {
                    let mut title = s.name.clone();
                    for (name, value) in header.iter().zip(row) {
                        title = title.replace(&format!("<{name}>"), value);
                    }
                    let mut sc = base.clone();
                    sc.title = title;
                    sc.row = row.clone();
                    sc.line = row_lines.get(i).copied().unwrap_or(ex.position.line);
                    sc.tags.extend(ex.tags.iter().cloned());
                    out.push(sc);
                }
            }
        };
        for s in &feature.scenarios {
            add(None, s);
        }
        for r in &feature.rules {
            for s in &r.scenarios {
                add(Some(r), s);
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Whether `key` occurs in `text` as whole words (case-insensitive).
fn contains_words(text: &str, key: &str) -> bool {
    let (text, key) = (text.to_lowercase(), key.to_lowercase());
    if key.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(&key).any(|(i, _)| {
        !word(text[..i].chars().next_back()) && !word(text[i + key.len()..].chars().next())
    })
}

/// What a scenario ports, by its title and context.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Match {
    /// The index of the upstream test.
    Test(usize),
    /// Upstream's title, but no single test of it: why.
    Unresolved(String),
    /// No upstream title.
    Nothing,
}

fn resolve(
    tests: &[UpstreamTest],
    group: &[usize],
    qualifier: Option<&str>,
    s: &Scenario,
) -> Match {
    if group.len() == 1 {
        return Match::Test(group[0]);
    }
    let mut sources: Vec<(&str, String)> = Vec::new();
    if let Some(q) = qualifier {
        sources.push(("title qualifier", q.to_owned()));
    }
    if let Some(r) = &s.rule {
        sources.push(("Rule", r.clone()));
    }
    sources.push(("Feature", s.feature.clone()));
    sources.push(("tags", s.tags.join(" ")));
    sources.push(("example row", s.row.join(" ")));
    for (what, text) in &sources {
        // The longest key found wins, so `v1alpha1+v1beta1` beats `v1beta1`.
        let found: Vec<(usize, usize)> = group
            .iter()
            .filter_map(|&i| {
                tests[i]
                    .keys
                    .iter()
                    .filter(|k| k.as_str() != OTHERWISE && contains_words(text, k))
                    .map(|k| k.len())
                    .max()
                    .map(|len| (i, len))
            })
            .collect();
        let Some(best) = found.iter().map(|&(_, l)| l).max() else {
            continue;
        };
        let winners: Vec<usize> = found
            .iter()
            .filter(|&&(_, l)| l == best)
            .map(|&(i, _)| i)
            .collect();
        if let [one] = winners[..] {
            return Match::Test(one);
        }
        let names: Vec<String> = winners
            .iter()
            .map(|&i| format!("`{}`", tests[i].context))
            .collect();
        return Match::Unresolved(format!(
            "its {what} `{text}` names several of upstream's contexts for this title: {}",
            names.join(", ")
        ));
    }
    let defaults: Vec<usize> = group
        .iter()
        .copied()
        .filter(|&i| tests[i].keys.iter().any(|k| k == OTHERWISE))
        .collect();
    if let [one] = defaults[..] {
        return Match::Test(one);
    }
    let wanted: Vec<String> = group
        .iter()
        .map(|&i| {
            let keys: Vec<&str> = tests[i]
                .keys
                .iter()
                .map(String::as_str)
                .filter(|k| *k != OTHERWISE)
                .collect();
            format!("`{}` for `{}`", keys.join("` or `"), tests[i].context)
        })
        .collect();
    Match::Unresolved(format!(
        "upstream has {} tests of that title, and its title qualifier, Rule, Feature, tags and \
         example row name none of their keys: {}",
        group.len(),
        wanted.join("; ")
    ))
}

fn match_scenario(
    tests: &[UpstreamTest],
    by_title: &HashMap<&str, Vec<usize>>,
    s: &Scenario,
) -> Match {
    if let Some(group) = by_title.get(s.title.as_str()) {
        return resolve(tests, group, None, s);
    }
    // `supports init containers (kubelet)`: a title and a qualifier in parentheses.
    if let Some((base, qualifier)) = s.title.strip_suffix(')').and_then(|t| t.rsplit_once(" ("))
        && let Some(group) = by_title.get(base)
    {
        return resolve(tests, group, Some(qualifier), s);
    }
    // `work using v1 API`: a shared title followed by words naming the context.
    let prefixed = by_title
        .iter()
        .filter(|(title, group)| group.len() > 1 && s.title.starts_with(&format!("{title} ")))
        .max_by_key(|(title, _)| title.len());
    if let Some((title, group)) = prefixed {
        return resolve(tests, group, Some(&s.title[title.len() + 1..]), s);
    }
    Match::Nothing
}

/// Which scenarios port which upstream test, and what is inconsistent.
#[derive(Debug, Default)]
pub struct Mapping {
    /// Per upstream test (by index), the scenarios porting it (by index).
    pub ported: Vec<Vec<usize>>,
    /// The suite's own scenarios (by index) with their row of the data file.
    pub own: Vec<(usize, usize)>,
    pub problems: Vec<String>,
}

/// A scenario's feature file relative to the features path as given, for
/// comparing with the data file's paths.
fn same_file(scenario: &Path, listed: &Path) -> bool {
    scenario == listed || scenario.ends_with(listed)
}

pub fn map(cat: &Catalogue, scenarios: &[Scenario], data: &Path) -> Mapping {
    let mut by_title: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in cat.tests.iter().enumerate() {
        by_title.entry(t.title.as_str()).or_default().push(i);
    }
    let mut m = Mapping {
        ported: vec![Vec::new(); cat.tests.len()],
        ..Mapping::default()
    };
    let mut own_used = vec![false; cat.own.len()];
    for (si, s) in scenarios.iter().enumerate() {
        let listed = cat.own.iter().position(|o| {
            same_file(&s.path, &o.feature) && (o.title == s.template || o.title == s.title)
        });
        match (match_scenario(&cat.tests, &by_title, s), listed) {
            (Match::Test(t), None) => m.ported[t].push(si),
            (Match::Test(t), Some(o)) => {
                own_used[o] = true;
                m.problems.push(format!(
                    "{}:{}: `{}` is listed as the suite's own, but {} ports upstream's `{}`: \
                     delete the own row",
                    data.display(),
                    cat.own[o].line,
                    cat.own[o].title,
                    s.location(),
                    cat.tests[t].full_name()
                ));
                m.ported[t].push(si);
            }
            (Match::Unresolved(why), _) => m.problems.push(format!(
                "{}: scenario `{}` has the title of an upstream test, but not of one test: {why}",
                s.location(),
                s.title
            )),
            (Match::Nothing, Some(o)) => {
                own_used[o] = true;
                m.own.push((si, o));
            }
            (Match::Nothing, None) => m.problems.push(format!(
                "{}: scenario `{}` ports no upstream test by its title: if it ports one, give it \
                 upstream's title exactly (a qualifier in parentheses may follow); if it is the \
                 suite's own, add `own<TAB>{}<TAB>{}<TAB>what it adds` to {}",
                s.location(),
                s.title,
                s.path.display(),
                s.template,
                data.display()
            )),
        }
    }
    for (t, ported) in cat.tests.iter().zip(&m.ported) {
        let wanted = t.tags();
        for &si in ported {
            let s = &scenarios[si];
            let missing: Vec<String> = wanted
                .iter()
                .filter(|w| !s.tags.contains(w))
                .map(|w| format!("@{w}"))
                .collect();
            if !missing.is_empty() {
                m.problems.push(format!(
                    "{}: scenario `{}` ports upstream's `{}` but lacks its tag(s) {}",
                    s.location(),
                    s.title,
                    t.full_name(),
                    missing.join(" ")
                ));
            }
        }
    }
    for (o, used) in cat.own.iter().zip(&own_used) {
        if !used {
            m.problems.push(format!(
                "{}:{}: no scenario `{}` in {} (renamed or removed?): update or delete the own row",
                data.display(),
                o.line,
                o.title,
                o.feature.display()
            ));
        }
    }
    for (t, ported) in cat.tests.iter().zip(&m.ported) {
        match (&t.reason, ported.is_empty()) {
            (None, true) => m.problems.push(format!(
                "{}:{}: upstream test `{}` has no scenario (no scenario has its title) and no \
                 reason it is not ported",
                data.display(),
                t.line,
                t.full_name()
            )),
            (Some(_), false) => {
                let at: Vec<String> = ported.iter().map(|&i| scenarios[i].location()).collect();
                m.problems.push(format!(
                    "{}:{}: upstream test `{}` is ported by {}, yet its row gives a reason it is \
                     not ported: delete the reason (`dra-e2e upstream --drop-ported-reasons` does)",
                    data.display(),
                    t.line,
                    t.full_name(),
                    at.join(", ")
                ));
            }
            _ => {}
        }
    }
    m
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// A link to the scenario's line; `base` leads from the file the link is
/// written into to the directory feature paths are relative to.
fn link(s: &Scenario, base: &str) -> String {
    let base = if s.path.is_absolute() { "" } else { base };
    format!("[{}]({base}{}#L{})", s.location(), s.path.display(), s.line)
}

/// The way from the directory of `file` back to the current directory, to
/// put before links written into `file` that are relative to the current
/// directory: "" for a file in it, "../" for `docs/upstream-tests.md`.
pub fn link_base(file: &Path) -> anyhow::Result<String> {
    let here = std::env::current_dir().context("finding the current directory")?;
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => here.join(p),
        _ => here.clone(),
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("finding the directory of {}", file.display()))?;
    let here = here
        .canonicalize()
        .context("finding the current directory")?;
    Ok(relative(&dir, &here))
}

/// The relative way from directory `from` to directory `to` (both
/// absolute), ending in '/' unless empty.
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut way = "../".repeat(from.len() - common);
    for c in &to[common..] {
        way.push_str(&c.as_os_str().to_string_lossy());
        way.push('/');
    }
    way
}

/// The section between the markers (markers included), ending in a newline;
/// links to scenarios start with `link_base` (see [`link_base`]).
pub fn render(cat: &Catalogue, scenarios: &[Scenario], m: &Mapping, link_base: &str) -> String {
    let mut porting: Vec<usize> = m.ported.iter().flatten().copied().collect();
    porting.sort_unstable();
    porting.dedup();
    // (tests, ported) of test/e2e/dra/ and of the node suite.
    let count = |node_suite: bool| {
        let of_suite = || {
            cat.tests
                .iter()
                .zip(&m.ported)
                .filter(move |(t, _)| t.is_node_suite() == node_suite)
        };
        (
            of_suite().count(),
            of_suite().filter(|(_, p)| !p.is_empty()).count(),
        )
    };
    let (e2e, e2e_ported) = count(false);
    let (node, node_ported) = count(true);
    let mut out = String::new();
    out.push_str(BEGIN);
    out.push('\n');
    out.push_str(
        "<!-- Generated by `make upstream-table` from docs/upstream-tests.tsv and the feature \
         files; edit those, not this. -->\n",
    );
    let node_suite = if node == 0 {
        String::new()
    } else {
        format!(
            "; of the {node} specs of its node suite (`test/e2e_node/dra_test.go`), \
             {node_ported} are ported and {} are not",
            node - node_ported
        )
    };
    out.push_str(&format!(
        "\nOf upstream's {e2e} tests in `test/e2e/dra/`, {e2e_ported} are ported and {} are \
         not{node_suite}, each for the reason given ({} scenarios port them). A scenario ports a \
         test when its title is the test's title; where upstream uses a title in several \
         contexts, the scenario's title qualifier `(...)`, Rule, Feature or tags name the \
         context.\n",
        e2e - e2e_ported,
        porting.len(),
    ));
    let mut sources: Vec<&str> = Vec::new();
    for t in &cat.tests {
        if !sources.contains(&t.source.as_str()) {
            sources.push(&t.source);
        }
    }
    for source in sources {
        let tests: Vec<(usize, &UpstreamTest)> = cat
            .tests
            .iter()
            .enumerate()
            .filter(|(_, t)| t.source == source)
            .collect();
        let done = tests
            .iter()
            .filter(|(i, _)| !m.ported[*i].is_empty())
            .count();
        out.push_str(&format!(
            "\n### `{source}` ({} tests, {done} ported)\n\n| upstream context (after `[sig-node] [DRA]`) | test | scenario, or why it is not ported |\n|---|---|---|\n",
            tests.len()
        ));
        for (i, t) in tests {
            let mut title = t.title.clone();
            if !t.labels.is_empty() {
                title = format!("{title} {}", t.labels);
            }
            let answer = if m.ported[i].is_empty() {
                format!(
                    "not ported: {}",
                    t.reason.as_deref().unwrap_or("(no reason given)")
                )
            } else {
                m.ported[i]
                    .iter()
                    .map(|&s| link(&scenarios[s], link_base))
                    .collect::<Vec<_>>()
                    .join("<br>")
            };
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                cell(&t.context),
                cell(&title),
                cell(&answer)
            ));
        }
    }
    if !m.own.is_empty() {
        out.push_str(&format!(
            "\n### The suite's own scenarios ({})\n\n| scenario | what it adds |\n|---|---|\n",
            m.own.len()
        ));
        for &(s, o) in &m.own {
            let sc = &scenarios[s];
            out.push_str(&format!(
                "| {} {} | {} |\n",
                link(sc, link_base),
                cell(&sc.title),
                cell(&cat.own[o].adds)
            ));
        }
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// `doc` with the text between (and including) the markers replaced by `section`.
pub fn splice(doc: &str, section: &str, path: &Path) -> anyhow::Result<String> {
    let begin = doc.find(BEGIN);
    let end = doc.find(END);
    let (Some(b), Some(e)) = (begin, end) else {
        anyhow::bail!(
            "{} has no generated section: put a line `{BEGIN}` and, below it, a line `{END}` \
             where the table goes",
            path.display()
        );
    };
    if e < b {
        anyhow::bail!("{}: `{END}` comes before `{BEGIN}`", path.display());
    }
    let after = &doc[e + END.len()..];
    let after = after.strip_prefix('\n').unwrap_or(after);
    Ok(format!("{}{section}{after}", &doc[..b]))
}

/// The section for the features and the data file, or every inconsistency;
/// links to scenarios start with `link_base` (see [`link_base`]).
pub fn generate(features_path: &Path, data: &Path, link_base: &str) -> Result<String, Vec<String>> {
    let text = std::fs::read_to_string(data)
        .map_err(|e| vec![format!("reading {}: {e}", data.display())])?;
    let cat = parse_catalogue(&text, data)?;
    let scenarios = load_scenarios(features_path)?;
    let m = map(&cat, &scenarios, data);
    if !m.problems.is_empty() {
        return Err(m.problems);
    }
    Ok(render(&cat, &scenarios, &m, link_base))
}

/// Empties, in the data file, the reason of each test a scenario now ports
/// (after scenarios for it were written); returns how many.
pub fn drop_ported_reasons(features_path: &Path, data: &Path) -> Result<usize, Vec<String>> {
    let text = std::fs::read_to_string(data)
        .map_err(|e| vec![format!("reading {}: {e}", data.display())])?;
    let cat = parse_catalogue(&text, data)?;
    let scenarios = load_scenarios(features_path)?;
    let m = map(&cat, &scenarios, data);
    let lines: Vec<usize> = cat
        .tests
        .iter()
        .zip(&m.ported)
        .filter(|(t, p)| t.reason.is_some() && !p.is_empty())
        .map(|(t, _)| t.line)
        .collect();
    if lines.is_empty() {
        return Ok(0);
    }
    let updated: Vec<String> = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            if !lines.contains(&(i + 1)) {
                return l.to_owned();
            }
            let mut fields: Vec<&str> = l.split('\t').collect();
            if let Some(reason) = fields.get_mut(6) {
                *reason = "";
            }
            fields.join("\t")
        })
        .collect();
    std::fs::write(data, updated.join("\n"))
        .map_err(|e| vec![format!("writing {}: {e}", data.display())])?;
    Ok(lines.len())
}

/// Runs `dra-e2e upstream`; returns the exit status.
pub fn cli_main(args: UpstreamArgs) -> anyhow::Result<i32> {
    if args.drop_ported_reasons {
        match drop_ported_reasons(&args.features, &args.data) {
            Ok(n) => eprintln!(
                "{}: emptied the reason of {n} test(s) a scenario now ports",
                args.data.display()
            ),
            Err(problems) => {
                for p in &problems {
                    eprintln!("{p}");
                }
                return Ok(1);
            }
        }
    }
    let base = match args.write.as_ref().or(args.check.as_ref()) {
        Some(file) => link_base(file)?,
        None => String::new(),
    };
    let section = match generate(&args.features, &args.data, &base) {
        Ok(s) => s,
        Err(problems) => {
            for p in &problems {
                eprintln!("{p}");
            }
            eprintln!(
                "{} problem(s) mapping upstream's tests ({}) to the scenarios in {}",
                problems.len(),
                args.data.display(),
                args.features.display()
            );
            return Ok(1);
        }
    };
    let doc_of =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    if let Some(path) = &args.write {
        let doc = doc_of(path)?;
        let updated = splice(&doc, &section, path)?;
        if updated != doc {
            std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
            println!("{}: upstream table updated", path.display());
        } else {
            println!("{}: upstream table already up to date", path.display());
        }
    } else if let Some(path) = &args.check {
        let doc = doc_of(path)?;
        if splice(&doc, &section, path)? != doc {
            eprintln!(
                "{}: the upstream table is not what the feature files and {} give; run `make \
                 upstream-table` (dra-e2e upstream --write {})",
                path.display(),
                args.data.display(),
                path.display()
            );
            return Ok(1);
        }
        println!("{}: upstream table up to date", path.display());
    } else {
        print!("{section}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_lead_back_from_the_written_file() {
        let way = |from: &str, to: &str| relative(Path::new(from), Path::new(to));
        assert_eq!(way("/repo", "/repo"), "");
        assert_eq!(way("/repo/docs", "/repo"), "../");
        assert_eq!(way("/repo/docs/deep", "/repo"), "../../");
        assert_eq!(way("/tmp/x", "/repo/features"), "../../repo/features/");
    }

    #[test]
    fn keys_match_whole_words_only() {
        assert!(contains_words("work using v1 API", "v1 API"));
        assert!(!contains_words("work using v1 APIs", "v1 API"));
        assert!(!contains_words("using only drapbv1beta1", "only drapbv1"));
        assert!(contains_words("v1alpha1+v1beta1", "v1beta1"));
        assert!(contains_words("Kubelet on single node", "kubelet"));
        assert!(!contains_words("anything", ""));
    }

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
