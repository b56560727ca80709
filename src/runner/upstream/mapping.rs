//! Which scenario ports which upstream test: a scenario ports a test when
//! its title is the test's `It(...)` title and, where upstream uses that
//! title more than once, its context names the test's key. Every scenario
//! must port one test or be listed as the suite's own, and every test must
//! be ported or say why not, so that a misspelt title is found, not
//! counted as an extra scenario.
use std::collections::HashMap;
use std::path::Path;

use super::catalogue::{Catalogue, OTHERWISE, UpstreamTest};
use super::scenarios::{Scenario, contains_words};

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
