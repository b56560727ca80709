//! Where a run's scenarios come from: the suite's own feature files, built
//! into the runner, or files the user names.
//!
//! The runner carries the suite (`build-features.rs` embeds `features/` at
//! build time), so an installed runner runs the conformance pack in a
//! driver's own repository, with no checkout of this one. `--features PATH`
//! replaces the built-in set, `--add-features PATH` runs a repository's own
//! scenarios beside it, and `dra-e2e features export DIR` writes the
//! built-in files out to read or adapt. A built-in file keeps its path from
//! the checkout's top (`features/kep5970.feature`) in every report, the same
//! path `features export` writes it under.
use std::path::{Path, PathBuf};

use cucumber::gherkin::{self, GherkinEnv};

use super::features::{self, FeatureError};

/// Every built-in feature file: its path from the checkout's top, and its
/// text.
static BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/features.rs"));

/// One place scenarios are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeatureSource {
    /// The suite's feature files, built into the runner.
    Builtin,
    /// A feature file, or a directory of them, the user named.
    Path(PathBuf),
}

impl FeatureSource {
    /// The sources of a run or a check: the paths given replace the
    /// built-in set; the added ones go beside what is run (the built-in set
    /// when no path is given).
    pub fn resolve(given: &[PathBuf], added: &[PathBuf]) -> Vec<FeatureSource> {
        let mut out: Vec<FeatureSource> = if given.is_empty() {
            vec![FeatureSource::Builtin]
        } else {
            given.iter().cloned().map(FeatureSource::Path).collect()
        };
        out.extend(added.iter().cloned().map(FeatureSource::Path));
        out
    }
}

impl std::fmt::Display for FeatureSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeatureSource::Builtin => write!(f, "the built-in features"),
            FeatureSource::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The built-in files, by path from the checkout's top.
pub fn builtin_files() -> &'static [(&'static str, &'static str)] {
    BUILTIN
}

/// Parses the built-in features, expanding Scenario Outlines.
pub fn parse_builtin() -> Result<Vec<gherkin::Feature>, Vec<FeatureError>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (path, text) in BUILTIN {
        let parsed = gherkin::Feature::parse(text, GherkinEnv::default())
            .map_err(|e| e.to_string())
            .and_then(|mut f| {
                f.path = Some(PathBuf::from(path));
                cucumber::feature::Ext::expand_examples(f).map_err(|e| e.to_string())
            });
        match parsed {
            Ok(f) => out.push(f),
            Err(message) => errors.push(FeatureError::Parse {
                path: PathBuf::from(path),
                message,
            }),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Parses every source in order; `input`, cucumber's `--input GLOB`, takes
/// the place of all of them.
pub fn load(
    sources: &[FeatureSource],
    input: Option<&str>,
    input_cli: &cucumber::parser::basic::Cli,
) -> Result<Vec<gherkin::Feature>, Vec<FeatureError>> {
    if input.is_some() {
        return features::load(&[], input, input_cli);
    }
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for source in sources {
        let parsed = match source {
            FeatureSource::Builtin => parse_builtin(),
            FeatureSource::Path(p) => features::parse_all(p),
        };
        match parsed {
            Ok(f) => out.extend(f),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Every problem of a [`load`] or [`parse_builtin`] as one error, a line
/// each.
pub fn one_error(errors: Vec<FeatureError>) -> anyhow::Error {
    anyhow::anyhow!(
        "{}",
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Why `features export` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "features export {dir}: {} already exists and differs from the built-in file (pass \
         --force to overwrite it; nothing was written)",
        file.display()
    )]
    Differs { dir: PathBuf, file: PathBuf },
    #[error("features export {dir}: writing {}: {error}", file.display())]
    Write {
        dir: PathBuf,
        file: PathBuf,
        error: std::io::Error,
    },
}

/// Writes the built-in files under `dir`, each at its path below
/// `features/` (`dir/conformance/kep5970.feature`), and returns them. A file
/// already there with other content is refused before anything is written,
/// unless `force`; one with the same content is left as it is.
pub fn export(dir: &Path, force: bool) -> Result<Vec<PathBuf>, ExportError> {
    let targets: Vec<(PathBuf, &str)> = BUILTIN
        .iter()
        .map(|(path, text)| {
            let below = path.strip_prefix("features/").unwrap_or(path);
            (dir.join(below), *text)
        })
        .collect();
    if !force
        && let Some((file, _)) = targets
            .iter()
            .find(|(file, text)| std::fs::read(file).is_ok_and(|old| old != text.as_bytes()))
    {
        return Err(ExportError::Differs {
            dir: dir.to_owned(),
            file: file.clone(),
        });
    }
    let write = |file: &Path, text: &str| -> std::io::Result<()> {
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, text)
    };
    for (file, text) in &targets {
        write(file, text).map_err(|error| ExportError::Write {
            dir: dir.to_owned(),
            file: file.clone(),
            error,
        })?;
    }
    Ok(targets.into_iter().map(|(f, _)| f).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_set_is_the_checkouts_features_directory() {
        let top = Path::new(env!("CARGO_MANIFEST_DIR"));
        let on_disk = features::feature_files(&top.join("features")).unwrap();
        let built: Vec<PathBuf> = BUILTIN.iter().map(|(p, _)| top.join(p)).collect();
        assert_eq!(built, on_disk);
        for (path, text) in BUILTIN {
            assert_eq!(
                std::fs::read_to_string(top.join(path)).unwrap(),
                *text,
                "{path}"
            );
        }
    }

    #[test]
    fn the_built_in_features_parse_with_their_checkout_paths() {
        let parsed = parse_builtin().unwrap();
        assert_eq!(parsed.len(), BUILTIN.len());
        assert!(
            parsed
                .iter()
                .any(|f| f.path.as_deref()
                    == Some(Path::new("features/conformance/kep5970.feature")))
        );
    }

    #[test]
    fn given_paths_replace_the_built_in_set_and_added_ones_join_it() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(FeatureSource::resolve(&[], &[]), [FeatureSource::Builtin]);
        assert_eq!(
            FeatureSource::resolve(&[], &[p("mine")]),
            [FeatureSource::Builtin, FeatureSource::Path(p("mine"))]
        );
        assert_eq!(
            FeatureSource::resolve(&[p("a")], &[p("b")]),
            [FeatureSource::Path(p("a")), FeatureSource::Path(p("b"))]
        );
    }

    #[test]
    fn export_writes_every_file_and_refuses_to_overwrite_a_changed_one() {
        let dir = tempfile::tempdir().unwrap();
        let written = export(dir.path(), false).unwrap();
        assert_eq!(written.len(), BUILTIN.len());
        let kep = dir.path().join("conformance/kep5970.feature");
        assert!(written.contains(&kep));
        // The same content again: nothing to refuse.
        export(dir.path(), false).unwrap();
        std::fs::write(&kep, "Feature: mine\n").unwrap();
        let other = dir.path().join("kubelet_calls.feature");
        std::fs::remove_file(&other).unwrap();
        let e = export(dir.path(), false).unwrap_err();
        assert!(
            matches!(e, ExportError::Differs { ref file, .. } if *file == kep),
            "{e}"
        );
        assert!(e.to_string().contains("--force"), "{e}");
        assert!(!other.exists(), "a refused export wrote nothing");
        export(dir.path(), true).unwrap();
        assert_ne!(std::fs::read_to_string(&kep).unwrap(), "Feature: mine\n");
    }
}
