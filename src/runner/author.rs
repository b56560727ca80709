//! Commands for scenario authors: `dra-e2e steps` and `dra-e2e check`.
use std::path::PathBuf;

use cucumber::World as _;

use super::features;
use crate::steps::{World, catalogue};

/// Prints the step catalogue: as text, or with `--markdown` as the
/// document `docs/steps.md`.
pub fn steps(args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    match args.iter().map(|a| a.to_str()).collect::<Vec<_>>()[..] {
        [] => {}
        [Some("--markdown")] => {
            print!("{}", catalogue::markdown());
            return Ok(());
        }
        _ => anyhow::bail!(
            "dra-e2e steps takes no argument but --markdown (got {})",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        ),
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

/// Checks feature files without a cluster (every path given, `features`
/// when none is); returns the exit code.
pub fn check(args: Vec<std::ffi::OsString>) -> anyhow::Result<i32> {
    let mut paths: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    if paths.is_empty() {
        paths.push(PathBuf::from("features"));
    }
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
