//! Commands for scenario authors: `dra-e2e steps`, `dra-e2e check` and
//! `dra-e2e features export`.
use std::path::PathBuf;

use cucumber::World as _;

use super::feature_source::{self, FeatureSource};
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
    /// Feature files or directories of feature files to check (default:
    /// the built-in ones).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Checks feature files without a cluster (every path given, the built-in
/// ones when none is); returns the exit code.
pub fn check(args: CheckArgs) -> anyhow::Result<i32> {
    let sources = FeatureSource::resolve(&args.paths, &[]);
    let (parsed, errors) = match feature_source::load(&sources, None, &Default::default()) {
        Ok(parsed) => (parsed, Vec::new()),
        Err(errors) => (Vec::new(), errors),
    };
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
    let shown: Vec<String> = sources.iter().map(ToString::to_string).collect();
    if problems.is_empty() {
        println!(
            "{} feature files ({}), {scenarios} scenarios: every step is defined once, every \
             tag is known",
            parsed.len(),
            shown.join(", ")
        );
        Ok(0)
    } else {
        eprintln!("{} problem(s) in {}", problems.len(), shown.join(", "));
        Ok(1)
    }
}

/// The options of `dra-e2e features`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Work with the feature files built into the runner",
    long_about = "The runner carries the suite's feature files and runs them by default \
                  (`--features PATH` runs others instead, `--add-features PATH` others \
                  besides). `features export DIR` writes the built-in files out, to read them \
                  or to adapt them in a repository of one's own."
)]
pub struct FeaturesArgs {
    #[command(subcommand)]
    pub command: FeaturesCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum FeaturesCommand {
    /// Write the built-in feature files into DIR, as features/ holds them
    /// (DIR/conformance/kep5970.feature, ...); a file there with other
    /// content is refused unless --force.
    Export {
        /// The directory to write into (made when missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Overwrite files whose content differs from the built-in one.
        #[arg(long)]
        force: bool,
    },
    /// List the built-in feature files with their scenario counts.
    List,
}

/// Runs `dra-e2e features ...`.
pub fn features_command(args: FeaturesArgs) -> anyhow::Result<()> {
    match args.command {
        FeaturesCommand::Export { dir, force } => {
            let written = feature_source::export(&dir, force)?;
            println!(
                "wrote {} built-in feature files into {}",
                written.len(),
                dir.display()
            );
        }
        FeaturesCommand::List => {
            let parsed = feature_source::parse_builtin().map_err(feature_source::one_error)?;
            for f in &parsed {
                let n = features::scenarios(std::slice::from_ref(f)).len();
                let path = f.path.as_deref().unwrap_or(std::path::Path::new("?"));
                println!("{}  {n} scenario(s)  {}", path.display(), f.name);
            }
        }
    }
    Ok(())
}
