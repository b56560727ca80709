//! The catalogue of mutants, docs/driver-mutants.yaml: which bugs of
//! published drivers the pack must catch, how each is realised, and which
//! scenario must fail with which message. It is read and checked whole
//! before anything runs, so that a misspelt fault, a missing patch or a
//! renamed scenario fails at once instead of as a mutant that "survives".
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Deserialize;

use crate::profile::{Fault, Planter};

/// The catalogue, as the runner was built with it.
pub const CATALOGUE: &str = include_str!("../../../docs/driver-mutants.yaml");
pub(super) const CATALOGUE_PATH: &str = "docs/driver-mutants.yaml";
pub(super) const PACK: &str = "features/conformance";
const PATCHES: &str = "hack/mutants/test-driver";

/// One mutant of the catalogue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutant {
    pub name: String,
    pub bug: String,
    pub seen: String,
    #[serde(default)]
    pub fault: Option<String>,
    #[serde(default)]
    pub patch: Option<String>,
    /// `NAME=value` set in the rolling-update driver's DaemonSet: a bug
    /// that driver plants in itself when told (hack/rolling-driver).
    #[serde(default)]
    pub rolling_env: Option<String>,
    #[serde(default)]
    pub nodes: Option<String>,
    pub caught_by: Vec<Catch>,
    #[serde(default)]
    pub survives: Option<String>,
}

/// A scenario that must fail, and what its message must hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catch {
    pub scenario: String,
    pub message: String,
}

/// How a mutant is realised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Way {
    Builtin,
    Interposer,
    TestDriver,
    RollingDriver,
}

impl fmt::Display for Way {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Way::Builtin => "builtin",
            Way::Interposer => "interposer",
            Way::TestDriver => "test-driver",
            Way::RollingDriver => "rolling-driver",
        })
    }
}

impl Mutant {
    pub(super) fn fault(&self) -> Option<Fault> {
        self.fault.as_deref().and_then(Fault::from_name)
    }

    pub(super) fn on_real_nodes(&self) -> bool {
        self.nodes.as_deref() == Some("real")
    }

    /// The ways it is realised, as its fault and patch say.
    pub fn ways(&self) -> Vec<Way> {
        let mut ways = Vec::new();
        if let Some(f) = self.fault() {
            if f.planted_by(Planter::Builtin) && !self.on_real_nodes() {
                ways.push(Way::Builtin);
            }
            if f.planted_by(Planter::Interposer) {
                ways.push(Way::Interposer);
            }
        }
        if self.patch.is_some() {
            ways.push(Way::TestDriver);
        }
        if self.rolling_env.is_some() {
            ways.push(Way::RollingDriver);
        }
        ways
    }
}

/// The catalogue read and checked against the faults, the patches and the
/// pack's scenarios (`root` is the repository).
pub fn catalogue(root: &Path) -> anyhow::Result<Vec<Mutant>> {
    let mutants: Vec<Mutant> =
        serde_saphyr::from_str(CATALOGUE).with_context(|| format!("reading {CATALOGUE_PATH}"))?;
    let scenarios = pack_scenarios(&root.join(PACK))?;
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for m in &mutants {
        if !names.insert(m.name.clone()) {
            problems.push(format!("{}: listed twice", m.name));
        }
        if let Some(f) = &m.fault
            && Fault::from_name(f).is_none()
        {
            problems.push(format!("{}: unknown fault {f}", m.name));
        }
        if let Some(p) = &m.patch {
            let file = root.join(PATCHES).join(format!("{p}.patch"));
            if !file.is_file() {
                problems.push(format!("{}: no patch {}", m.name, file.display()));
            }
        }
        if m.ways().is_empty() {
            problems.push(format!(
                "{}: realised no way (no fault, no patch, no rolling_env)",
                m.name
            ));
        }
        if let Some(env) = &m.rolling_env
            && (env.split_once('=').is_none_or(|(k, _)| k.is_empty()) || !m.on_real_nodes())
        {
            problems.push(format!(
                "{}: rolling_env {env:?} must be NAME=value, with nodes: real (the rolling-update \
                 driver runs on real nodes only)",
                m.name
            ));
        }
        if m.caught_by.is_empty() && m.survives.is_none() {
            problems.push(format!("{}: names no scenario to catch it", m.name));
        }
        for c in &m.caught_by {
            if !scenarios.contains(&c.scenario) {
                problems.push(format!(
                    "{}: no scenario {:?} in {PACK}",
                    m.name, c.scenario
                ));
            }
        }
    }
    if !problems.is_empty() {
        bail!("{CATALOGUE_PATH}: {}", problems.join("; "));
    }
    Ok(mutants)
}

/// Scenario names of the pack's feature files.
pub(super) fn pack_scenarios(dir: &Path) -> anyhow::Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "feature") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            out.extend(
                text.lines()
                    .filter_map(|l| l.trim().strip_prefix("Scenario: "))
                    .map(str::to_owned),
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::PathBuf;

    use super::*;

    /// The repository.
    pub(in crate::runner::mutants) fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn the_catalogue_is_valid_and_large_enough() {
        let mutants = catalogue(&root()).unwrap();
        assert!(mutants.len() >= 25, "{}", mutants.len());
        for m in &mutants {
            assert!(!m.ways().is_empty(), "{}", m.name);
        }
    }

    /// A mutant the builtin driver and the interposer both realise.
    pub(in crate::runner::mutants) fn mutant() -> Mutant {
        Mutant {
            name: "m".into(),
            bug: "b".into(),
            seen: "s".into(),
            fault: Some("FirstClaimOnly".into()),
            patch: None,
            rolling_env: None,
            nodes: None,
            caught_by: vec![Catch {
                scenario: "several claims".into(),
                message: "did not get its device".into(),
            }],
            survives: None,
        }
    }
}
