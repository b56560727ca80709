//! Commands for scenario authors: `dra-e2e steps` and `dra-e2e check`.
use std::path::PathBuf;

use cucumber::World as _;

use super::features;
use crate::steps::{World, catalogue};

/// Prints the step catalogue: as text, or with `--markdown` as the
/// document `docs/steps.md`.
pub fn steps(markdown: bool) -> anyhow::Result<()> {
    if markdown {
        print!("{}", catalogue::markdown());
        return Ok(());
    }
    for topic in catalogue::CATALOGUE {
        println!("## {}\n", topic.title);
        for e in topic.entries {
            println!("  {}", e.pattern);
            println!("      {}", e.description);
            println!(
                "      e.g. {}",
                e.example.lines().next().unwrap_or_default()
            );
            println!();
        }
    }
    Ok(())
}

/// The options of `dra-e2e check`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Check feature files for undefined or ambiguous steps and unknown tags (no cluster \
             needed)",
    long_about = "Check feature files without a cluster: every step must match exactly one \
                  step definition and every tag must be one the suite knows. Each problem is \
                  printed with its file:line, an undefined step with the closest steps of the \
                  catalogue and an unknown tag with the closest known tag; the exit status is \
                  1 when there is any."
)]
pub struct CheckArgs {
    /// Feature files or directories of feature files to check.
    #[arg(value_name = "PATH", default_value = "features")]
    pub paths: Vec<PathBuf>,
}

/// Checks feature files without a cluster (every path given, `features`
/// when none is); returns the exit code.
pub fn check(args: CheckArgs) -> anyhow::Result<i32> {
    let paths = args.paths;
    let mut parsed = Vec::new();
    let mut errors = Vec::new();
    for path in &paths {
        match features::parse_all(path) {
            Ok(p) => parsed.extend(p),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("{e}");
        }
        return Ok(1);
    }
    let problems = features::check(&parsed, &World::collection());
    for p in &problems {
        eprintln!("{p}");
    }
    let scenarios = features::scenarios(&parsed).len();
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    if problems.is_empty() {
        println!(
            "{} feature files, {scenarios} scenarios: every step is defined once, every tag is known",
            parsed.len()
        );
        Ok(0)
    } else {
        eprintln!("{} problem(s) in {}", problems.len(), shown.join(", "));
        Ok(1)
    }
}
