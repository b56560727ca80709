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
use std::path::{Path, PathBuf};

use anyhow::Context as _;

mod catalogue;
mod mapping;
mod scenarios;
mod table;

pub use catalogue::{Catalogue, OwnScenario, UpstreamTest, parse_catalogue};
pub use mapping::{Mapping, map};
pub use scenarios::{Scenario, load_scenarios};
pub use table::{link_base, render, splice};

/// Where the generated section starts and ends in the file it is written into.
pub const BEGIN: &str = "<!-- upstream-table:begin -->";
pub const END: &str = "<!-- upstream-table:end -->";

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
