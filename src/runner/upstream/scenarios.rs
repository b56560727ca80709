//! The suite's scenarios as the table sees them: every Scenario and every
//! example row of an outline, with the title the row's values make, its
//! place in the file and its tags. Which test a scenario ports is read
//! from its title and context, never written down, so this is all the
//! table knows of the feature files.
use std::path::{Path, PathBuf};

use cucumber::gherkin::{self, GherkinEnv};

use crate::runner::features;

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
pub(super) fn contains_words(text: &str, key: &str) -> bool {
    let (text, key) = (text.to_lowercase(), key.to_lowercase());
    if key.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(&key).any(|(i, _)| {
        !word(text[..i].chars().next_back()) && !word(text[i + key.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_whole_words_only() {
        assert!(contains_words("work using v1 API", "v1 API"));
        assert!(!contains_words("work using v1 APIs", "v1 API"));
        assert!(!contains_words("using only drapbv1beta1", "only drapbv1"));
        assert!(contains_words("v1alpha1+v1beta1", "v1beta1"));
        assert!(contains_words("Kubelet on single node", "kubelet"));
        assert!(!contains_words("anything", ""));
    }
}
