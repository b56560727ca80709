//! Reading feature files: finding them under the `--features` paths or
//! cucumber's `--input` glob, parsing each once (Scenario Outlines
//! expanded), and saying where a file is malformed by line, column and
//! reason, where gherkin itself says only that it could not parse it.
use std::path::{Path, PathBuf};

use cucumber::gherkin::{self, GherkinEnv};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
