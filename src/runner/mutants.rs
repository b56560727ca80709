//! `dra-e2e mutants`: mutation testing of the conformance pack. Each mutant
//! of the catalogue (`docs/driver-mutants.yaml`) is a driver broken the way
//! a published driver has been; the pack is run against it, only the
//! scenarios the catalogue names for it, and the mutant is killed when one
//! of them fails with the message the catalogue expects while the same
//! scenarios pass against the unmutated driver. The kill table says, per
//! mutant and per way it is realised, what failed and how; the mutation
//! score is the share of catalogued mutants killed.
//!
//! A mutant is realised up to four ways, each a run of this runner:
//! - `builtin`: the suite's own driver plants the fault in itself
//!   (`deployment.faults` in a copy of profiles/builtin.yaml);
//! - `interposer`: the interposer plants it in the answers of upstream's
//!   test driver (a copy of profiles/dra-test-driver-simulated.yaml, run
//!   with `--interpose`);
//! - `test-driver`: upstream's test driver built from a patch
//!   (`make test-driver-mutants` writes its profile), run behind the
//!   interposer, whose checks of answers and repeated calls then apply; on
//!   real nodes the runner writes an image archive of the patched binary
//!   into the run's directory and runs profiles/dra-test-driver.yaml with it;
//! - `rolling-driver`: the project's rolling-update driver on real nodes, a
//!   variable in a copy of its DaemonSet telling it to break itself (for
//!   what only a surging DaemonSet shows).
use std::path::PathBuf;

use anyhow::{Context as _, bail};

mod catalogue;
mod docs;
mod realise;
mod runs;
mod verdicts;

pub use catalogue::{CATALOGUE, Catch, Mutant, Way, catalogue};
pub use docs::{DOC_BEGIN, DOC_END, markdown};

use catalogue::{CATALOGUE_PATH, PACK, pack_scenarios};
use docs::{BEHAVIOURS_DOC, MUTANTS_DOC, behaviours_doc, catalogue_doc};
use realise::PATCHED_PROFILES;
use runs::{Limits, patch_of, plan, run_all};
use verdicts::verdicts;

/// The options of `dra-e2e mutants`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Run the conformance pack against drivers broken on purpose and print the kill table",
    long_about = "Mutation testing of the conformance pack: every mutant of docs/driver-mutants.yaml \
                  (a driver broken the way a published driver has been) is run with only the \
                  scenarios named to catch it, beside the unmutated driver on the same scenarios; \
                  prints the kill table and the mutation score. Runs from the repository's root; \
                  the test-driver way needs `make test-driver-mutants` first."
)]
pub struct MutantsArgs {
    /// Only this mutant; repeat for several.
    #[arg(long = "mutant", value_name = "NAME")]
    only: Vec<String>,
    /// Only this way of realising them; repeat for several.
    #[arg(long = "way", value_name = "WAY")]
    ways: Vec<Way>,
    /// Also run the mutants that only real nodes show (root; `make node test-driver`).
    #[arg(long)]
    real_nodes: bool,
    /// Runs at once (each starts a local cluster of its own).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=8))]
    jobs: u16,
    /// Where each run's profile, output and JUnit report are kept.
    #[arg(long, value_name = "DIR", default_value = "target/mutants/runs")]
    out: PathBuf,
    /// Limit of one run of the pack (a mutant one way, or a baseline): it
    /// is passed on as the run's `--deadline`, and a run that has not ended
    /// its teardown well after it is stopped and counted as an error.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "20m")]
    run_deadline: std::time::Duration,
    /// Print the catalogue as a Markdown table and exit (no cluster needed).
    #[arg(long)]
    list: bool,
    /// Write the catalogue's tables into the docs and exit: the catalogue
    /// into docs/driver-mutants.md, the mutants each behaviour kills into
    /// docs/driver-conformance.md (no cluster needed).
    #[arg(long, conflicts_with = "list")]
    write_docs: bool,
}

pub fn cli_main(args: &MutantsArgs) -> anyhow::Result<i32> {
    let root = std::env::current_dir().context("the current directory")?;
    let mutants = catalogue(&root)?;
    if args.list {
        print!("{}", markdown(&mutants));
        return Ok(0);
    }
    if args.write_docs {
        let pack = pack_scenarios(&root.join(PACK))?;
        for file in [MUTANTS_DOC, BEHAVIOURS_DOC] {
            let path = root.join(file);
            let doc = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let new = if file == MUTANTS_DOC {
                catalogue_doc(&doc, &mutants)
            } else {
                behaviours_doc(&doc, &mutants, &pack)
            }
            .with_context(|| format!("writing into {file}"))?;
            std::fs::write(&path, new).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("mutants: wrote {file}");
        }
        return Ok(0);
    }
    let unknown: Vec<&String> = args
        .only
        .iter()
        .filter(|n| !mutants.iter().any(|m| &m.name == *n))
        .collect();
    if !unknown.is_empty() {
        bail!(
            "--mutant: no mutant {unknown:?} in {CATALOGUE_PATH} (known: {})",
            mutants
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let chosen: Vec<&Mutant> = mutants
        .iter()
        .filter(|m| args.only.is_empty() || args.only.contains(&m.name))
        .collect();
    let (runs, not_run) = plan(&chosen, &args.ways, args.real_nodes);
    for name in runs
        .iter()
        .filter(|r| r.way == Way::TestDriver)
        .filter_map(|r| r.mutant.as_deref())
    {
        let profile = root
            .join(PATCHED_PROFILES)
            .join(format!("{}.yaml", patch_of(&mutants, name)));
        if !profile.is_file() {
            bail!(
                "{} is missing: build the patched test drivers first (`make test-driver-mutants`)",
                profile.display()
            );
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let exe = std::env::current_exe().context("finding this runner's executable")?;
    let limits = Limits::after(args.run_deadline);
    let results = run_all(
        &exe,
        &root,
        &args.out,
        &mutants,
        &runs,
        args.jobs.into(),
        limits,
    )?;
    let table = verdicts(&chosen, &runs, &results, &not_run);
    print!("{}", table.markdown());
    eprintln!("{}", table.summary());
    Ok(if table.ok() { 0 } else { 1 })
}
