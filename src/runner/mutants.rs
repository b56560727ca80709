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
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde::Deserialize;

use crate::profile::{Fault, Planter};

/// The catalogue, as the runner was built with it.
pub const CATALOGUE: &str = include_str!("../../docs/driver-mutants.yaml");
const CATALOGUE_PATH: &str = "docs/driver-mutants.yaml";
const PACK: &str = "features/conformance";
const BUILTIN_PROFILE: &str = "profiles/builtin.yaml";
const SIMULATED_TEST_DRIVER: &str = "profiles/dra-test-driver-simulated.yaml";
const REAL_TEST_DRIVER: &str = "profiles/dra-test-driver.yaml";
const PATCHES: &str = "hack/mutants/test-driver";
const PATCHED_PROFILES: &str = "target/mutants/test-driver";
const ROLLING_DRIVER: &str = "profiles/rolling-driver.yaml";
/// The rolling-update driver's DaemonSet, as `make rolling-driver` writes
/// it (relative to the repository).
const ROLLING_DAEMONSET: &str = "target/rolling-driver/kubelet-plugin.yaml";
/// Long enough for a prepare the kubelet retries, short enough that a
/// mutant whose pod never runs does not hold its run for the default 300 s.
const STEP_TIMEOUT: &str = "150s";

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
    fn fault(&self) -> Option<Fault> {
        self.fault.as_deref().and_then(Fault::from_name)
    }

    fn on_real_nodes(&self) -> bool {
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
fn pack_scenarios(dir: &Path) -> anyhow::Result<BTreeSet<String>> {
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

/// One run of the pack: a mutant realised one way, or a baseline.
#[derive(Debug, Clone)]
struct Run {
    /// `None`: the unmutated driver.
    mutant: Option<String>,
    way: Way,
    real: bool,
    scenarios: BTreeSet<String>,
}

impl Run {
    fn label(&self) -> String {
        format!(
            "{}-{}{}",
            self.mutant.as_deref().unwrap_or("unmutated"),
            self.way,
            if self.real { "-real" } else { "" }
        )
    }
}

/// How one run ended.
#[derive(Debug, Clone)]
struct Ran {
    /// Exit status, `None` when killed by a signal.
    status: Option<i32>,
    /// Failed scenarios and their messages.
    failed: BTreeMap<String, String>,
    passed: BTreeSet<String>,
    /// The last lines of its output, for an error.
    tail: String,
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

fn patch_of<'a>(mutants: &'a [Mutant], name: &str) -> &'a str {
    mutants
        .iter()
        .find(|m| m.name == name)
        .and_then(|m| m.patch.as_deref())
        .unwrap_or_default()
}

/// The runs for `mutants`: each realisation, and per way the unmutated
/// driver on the union of their scenarios. Also what is not run, and why.
fn plan(
    mutants: &[&Mutant],
    ways: &[Way],
    real_nodes: bool,
) -> (Vec<Run>, BTreeMap<(String, Way), String>) {
    let mut runs = Vec::new();
    let mut not_run = BTreeMap::new();
    let mut baselines: BTreeMap<(Way, bool), BTreeSet<String>> = BTreeMap::new();
    for m in mutants {
        for way in m.ways() {
            if !ways.is_empty() && !ways.contains(&way) {
                continue;
            }
            if m.on_real_nodes() && !real_nodes {
                not_run.insert(
                    (m.name.clone(), way),
                    "needs real nodes (--real-nodes)".to_owned(),
                );
                continue;
            }
            let scenarios: BTreeSet<String> =
                m.caught_by.iter().map(|c| c.scenario.clone()).collect();
            // The patched test driver and the interposer's faults share the
            // unmutated test driver behind the interposer as their baseline.
            let base_way = if way == Way::TestDriver {
                Way::Interposer
            } else {
                way
            };
            baselines
                .entry((base_way, m.on_real_nodes()))
                .or_default()
                .extend(scenarios.iter().cloned());
            runs.push(Run {
                mutant: Some(m.name.clone()),
                way,
                real: m.on_real_nodes(),
                scenarios,
            });
        }
    }
    for ((way, real), scenarios) in baselines {
        runs.insert(
            0,
            Run {
                mutant: None,
                way,
                real,
                scenarios,
            },
        );
    }
    (runs, not_run)
}

/// Every run, `jobs` at once; results by label.
fn run_all(
    exe: &Path,
    root: &Path,
    out: &Path,
    mutants: &[Mutant],
    runs: &[Run],
    jobs: usize,
    limits: Limits,
) -> anyhow::Result<BTreeMap<String, anyhow::Result<Ran>>> {
    let queue = std::sync::Mutex::new(runs.iter().collect::<Vec<_>>());
    let results = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(run) = next else { break };
                    eprintln!("mutants: running {}", run.label());
                    let r = run_one(exe, root, out, mutants, run, limits);
                    eprintln!(
                        "mutants: {} ended: {}",
                        run.label(),
                        match &r {
                            Ok(ran) =>
                                format!("{} failed, {} passed", ran.failed.len(), ran.passed.len()),
                            Err(e) => format!("error: {e:#}"),
                        }
                    );
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(run.label(), r);
                }
            });
        }
    });
    Ok(results.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// The profile of a run, written into its directory.
fn profile_for(
    exe: &Path,
    root: &Path,
    dir: &Path,
    mutants: &[Mutant],
    run: &Run,
) -> anyhow::Result<PathBuf> {
    let fault = run
        .mutant
        .as_deref()
        .and_then(|name| mutants.iter().find(|m| m.name == name))
        .and_then(|m| m.fault.clone());
    // A patched test driver on real nodes: the real nodes' profile, with
    // an image archive of the patched binary in place of the unmutated one.
    let mut archive = None;
    let mut daemonset = None;
    let source = match (run.way, &run.mutant) {
        (Way::RollingDriver, mutant) => {
            let env = mutant
                .as_deref()
                .and_then(|name| mutants.iter().find(|m| m.name == name))
                .and_then(|m| m.rolling_env.as_deref());
            if let Some(env) = env {
                daemonset = Some(rolling_daemonset_with(root, dir, env)?);
            }
            root.join(ROLLING_DRIVER)
        }
        (Way::TestDriver, Some(name)) if run.real => {
            archive = Some(patched_image(exe, root, dir, patch_of(mutants, name))?);
            root.join(REAL_TEST_DRIVER)
        }
        (Way::TestDriver, Some(name)) => {
            // Written by `make test-driver-mutants`, with absolute paths.
            return Ok(root
                .join(PATCHED_PROFILES)
                .join(format!("{}.yaml", patch_of(mutants, name))));
        }
        (Way::Builtin, _) => root.join(BUILTIN_PROFILE),
        (_, _) if run.real => root.join(REAL_TEST_DRIVER),
        (_, _) => root.join(SIMULATED_TEST_DRIVER),
    };
    let text = std::fs::read_to_string(&source)
        .with_context(|| format!("reading {}", source.display()))?;
    // The copy lives elsewhere: its relative paths are made absolute.
    let base = source.parent().unwrap_or(root).display().to_string();
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.replace("../target/", &format!("{base}/../target/"));
        if let Some(copy) = &daemonset
            && line.trim_end().ends_with("kubelet-plugin.yaml")
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            line = format!("{indent}- {}", copy.display());
        }
        if let Some(archive) = &archive
            && line.trim_end().ends_with(UNMUTATED_ARCHIVE)
        {
            line = line.replace(
                &format!("{base}/{UNMUTATED_ARCHIVE}"),
                &archive.display().to_string(),
            );
        }
        out.push_str(&line);
        out.push('\n');
        if let Some(f) = &fault
            && line.trim_start().starts_with("mode: ")
        {
            out.push_str(&format!("  faults: [{f}]\n"));
        }
    }
    if let Some(archive) = &archive
        && !out.contains(&archive.display().to_string())
    {
        bail!(
            "{} no longer names {UNMUTATED_ARCHIVE} among its image archives: the mutants \
             runner cannot put the patched driver's archive in its place",
            source.display()
        );
    }
    let file = dir.join("profile.yaml");
    std::fs::write(&file, out).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// A copy of the rolling-update driver's DaemonSet in `dir` whose plugin
/// container also has `env` (`NAME=value`), next to its NUM_DEVICES.
fn rolling_daemonset_with(root: &Path, dir: &Path, env: &str) -> anyhow::Result<PathBuf> {
    let source = root.join(ROLLING_DAEMONSET);
    let text = std::fs::read_to_string(&source).with_context(|| {
        format!(
            "reading {} (`make rolling-driver` writes it)",
            source.display()
        )
    })?;
    let (name, value) = env
        .split_once('=')
        .with_context(|| format!("rolling_env {env:?} is not NAME=value"))?;
    let anchor = text
        .lines()
        .find(|l| l.trim() == "- name: NUM_DEVICES")
        .with_context(|| {
            format!(
                "{} sets no NUM_DEVICES to add {name} beside",
                source.display()
            )
        })?;
    let indent = &anchor[..anchor.len() - anchor.trim_start().len()];
    let value = serde_json::to_string(value).context("quoting the variable's value")?;
    let added = format!("{indent}- name: {name}\n{indent}  value: {value}\n{anchor}");
    // The profile names it from elsewhere: absolute, as `dir` may not be.
    let copy = std::path::absolute(dir.join("kubelet-plugin.yaml"))
        .context("the run directory's absolute path")?;
    std::fs::write(&copy, text.replacen(anchor, &added, 1))
        .with_context(|| format!("writing {}", copy.display()))?;
    Ok(copy)
}

/// The unmutated test driver's image archive, as profiles/dra-test-driver.yaml
/// names it (relative to the profile).
const UNMUTATED_ARCHIVE: &str = "../target/dra-test-driver/dra-test-driver.oci.tar";

/// An image archive of the test driver built from `patch`, in the run's
/// directory, under the image reference the real nodes' manifests name:
/// each run starts a cluster with real nodes of its own, which import only
/// this archive, so the manifests run the patched driver unchanged. The
/// binary is the one `make test-driver-mutant` built and wrote into the
/// patched profile's command.
fn patched_image(exe: &Path, root: &Path, dir: &Path, patch: &str) -> anyhow::Result<PathBuf> {
    use crate::profile::{Deployment, Options, Profile};
    let make = format!("run `make test-driver test-driver-mutant MUTANT={patch}` first");
    let patched = root.join(PATCHED_PROFILES).join(format!("{patch}.yaml"));
    let binary = match Profile::load(&patched, Options { check_files: true })
        .with_context(|| format!("reading the patched driver's profile ({make})"))?
        .deployment
    {
        Deployment::SimulatedNodes { command } => command.into_iter().next(),
        _ => None,
    }
    .with_context(|| format!("{} runs no command: {make}", patched.display()))?;
    let real = root.join(REAL_TEST_DRIVER);
    let manifests = match Profile::load(&real, Options { check_files: true })
        .with_context(|| format!("reading the real nodes' profile ({make})"))?
        .deployment
    {
        Deployment::RealNodes { manifests, .. } => manifests,
        _ => bail!("{} does not deploy to real nodes", real.display()),
    };
    let mut references = BTreeSet::new();
    for m in &manifests {
        let text =
            std::fs::read_to_string(m).with_context(|| format!("reading {}", m.display()))?;
        references.extend(
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("image: "))
                .map(|r| r.trim().to_owned()),
        );
    }
    let [reference] = Vec::from_iter(references)
        .try_into()
        .map_err(|refs: Vec<String>| {
            anyhow::anyhow!(
                "the manifests of {} name {} images ({refs:?}), not one: the mutants runner \
             does not know which the patched driver replaces",
                real.display(),
                refs.len()
            )
        })?;
    // The profile names it from elsewhere (relative paths there are
    // relative to the profile).
    let archive = std::path::absolute(dir.join("dra-test-driver.oci.tar"))
        .with_context(|| format!("the absolute path of {}", dir.display()))?;
    let output = Command::new(exe)
        .arg("image")
        .arg("--binary")
        .arg(&binary)
        .arg("--reference")
        .arg(&reference)
        .arg("--out")
        .arg(&archive)
        .output()
        .with_context(|| format!("running {} image", exe.display()))?;
    if !output.status.success() {
        bail!(
            "writing the image archive of {binary} as {reference} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(archive)
}

fn run_one(
    exe: &Path,
    root: &Path,
    out: &Path,
    mutants: &[Mutant],
    run: &Run,
    limits: Limits,
) -> anyhow::Result<Ran> {
    let dir = out.join(run.label());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let profile = profile_for(exe, root, &dir, mutants, run)?;
    let junit = dir.join("junit.xml");
    let _ = std::fs::remove_file(&junit);
    let names: Vec<String> = run.scenarios.iter().map(|s| regex::escape(s)).collect();
    let mut cmd = Command::new(exe);
    cmd.current_dir(root)
        .arg("--features")
        .arg(PACK)
        .arg("--profile")
        .arg(&profile)
        .arg("--name")
        .arg(format!("^({})$", names.join("|")))
        .arg("--step-timeout")
        .arg(STEP_TIMEOUT)
        .arg("--deadline")
        .arg(humantime::format_duration(limits.deadline).to_string())
        .arg("--teardown-timeout")
        .arg(humantime::format_duration(limits.teardown).to_string())
        .arg("--junit")
        .arg(&junit);
    // The ways that break upstream's test driver stand in front of it, so
    // that the checks of answers and repeated calls apply; the rolling
    // driver is judged as CI's conformance-rolling judges it.
    if matches!(run.way, Way::Interposer | Way::TestDriver) {
        cmd.arg("--interpose");
    }
    if run.real {
        cmd.args(["--cluster", "local", "--node-kind", "real", "--nodes", "2"]);
    }
    let log = dir.join("output.txt");
    let file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = cmd
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("running {}", exe.display()))?;
    let status = wait_bounded(child, limits)
        .map_err(|e| anyhow::anyhow!("run {} {e} (its output: {})", run.label(), log.display()))?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    let (failed, passed) = if junit.is_file() {
        read_junit(&junit)?
    } else {
        Default::default()
    };
    Ok(Ran {
        status: status.code(),
        failed,
        passed,
        tail,
    })
}

/// How long one run of the pack may take.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// The run's own `--deadline`: its scenarios are torn down when it passes.
    deadline: std::time::Duration,
    /// The run's own `--teardown-timeout`.
    teardown: std::time::Duration,
    /// Past deadline and teardown, before the run is stopped from here: a
    /// run that outlives its own limits hangs where they do not reach.
    grace: std::time::Duration,
}

impl Limits {
    fn after(deadline: std::time::Duration) -> Self {
        Limits {
            deadline,
            teardown: std::time::Duration::from_secs(300),
            grace: std::time::Duration::from_secs(120),
        }
    }

    fn backstop(&self) -> std::time::Duration {
        self.deadline + self.teardown + self.grace
    }
}

/// Waits for a run; one still going at its backstop is told to stop
/// (SIGTERM: it tears down what it made), then killed after its teardown
/// time.
fn wait_bounded(
    mut child: std::process::Child,
    limits: Limits,
) -> Result<std::process::ExitStatus, String> {
    use std::sync::mpsc;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let ended = |r: std::io::Result<std::process::ExitStatus>| {
        r.map_err(|e| format!("could not be waited for: {e}"))
    };
    match rx.recv_timeout(limits.backstop()) {
        Ok(r) => {
            let _ = waiter.join();
            return ended(r);
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            return Err("was lost: its waiting thread ended without a status".to_owned());
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {}
    }
    let _ = crate::sys::kill(pid, crate::sys::Signal::Term);
    let stopped = match rx.recv_timeout(limits.teardown) {
        Ok(_) => "stopped with SIGTERM",
        Err(_) => {
            let _ = crate::sys::kill(pid, crate::sys::Signal::Kill);
            let _ = rx.recv();
            "killed: it did not end on SIGTERM either"
        }
    };
    let _ = waiter.join();
    Err(format!(
        "did not end within {} (--run-deadline {}, then its teardown and {} more); {stopped}",
        humantime::format_duration(limits.backstop()),
        humantime::format_duration(limits.deadline),
        humantime::format_duration(limits.grace),
    ))
}

/// Failed scenarios with their messages, and passed ones.
fn read_junit(file: &Path) -> anyhow::Result<(BTreeMap<String, String>, BTreeSet<String>)> {
    let xml =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes()))
        .with_context(|| format!("parsing {}", file.display()))?;
    let mut failed = BTreeMap::new();
    let mut passed = BTreeSet::new();
    for suite in &suites.suites {
        for case in &suite.cases {
            match &case.status {
                junit_parser::TestStatus::Failure(f) => {
                    failed.insert(case.original_name.clone(), f.message.clone());
                }
                junit_parser::TestStatus::Error(e) => {
                    failed.insert(case.original_name.clone(), e.message.clone());
                }
                junit_parser::TestStatus::Success => {
                    passed.insert(case.original_name.clone());
                }
                _ => {}
            }
        }
    }
    Ok((failed, passed))
}

/// What a run of a mutant shows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// A scenario the catalogue names failed with the message it expects.
    Killed {
        scenario: String,
        message: String,
    },
    /// None did; what failed otherwise.
    Survived {
        failed: Vec<String>,
    },
    /// The run says nothing of the mutant: the driver never started, the
    /// run did not end, or the unmutated driver failed the same scenarios.
    Error(String),
    NotRun(String),
}

/// The first line of a message.
fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(240)
        .collect()
}

fn judge(m: &Mutant, ran: &Ran, baseline: Option<&Ran>) -> Outcome {
    match baseline {
        None => return Outcome::Error("the unmutated driver's run is missing".to_owned()),
        Some(b) => {
            let broken: Vec<&String> = m
                .caught_by
                .iter()
                .map(|c| &c.scenario)
                .filter(|s| !b.passed.contains(*s))
                .collect();
            if !broken.is_empty() {
                return Outcome::Error(format!("the unmutated driver did not pass {broken:?}"));
            }
        }
    }
    if !matches!(ran.status, Some(0 | 1)) {
        return Outcome::Error(format!(
            "the run ended with status {:?}: {}",
            ran.status, ran.tail
        ));
    }
    for (scenario, message) in &ran.failed {
        if message.contains("the driver under test") {
            return Outcome::Error(format!(
                "the driver never started in {scenario:?}: {}",
                first_line(message)
            ));
        }
    }
    // A run that neither passed nor failed any named scenario did not test
    // the mutant (a profile refused, a cluster that never started).
    if !m
        .caught_by
        .iter()
        .any(|c| ran.failed.contains_key(&c.scenario) || ran.passed.contains(&c.scenario))
    {
        return Outcome::Error(format!(
            "the run ran none of the scenarios named for it (status {:?}): {}",
            ran.status,
            first_line(&ran.tail)
        ));
    }
    for c in &m.caught_by {
        if let Some(message) = ran.failed.get(&c.scenario)
            && message.contains(&c.message)
        {
            return Outcome::Killed {
                scenario: c.scenario.clone(),
                message: first_line(message),
            };
        }
    }
    Outcome::Survived {
        failed: ran
            .failed
            .iter()
            .map(|(s, msg)| format!("{s}: {}", first_line(msg)))
            .collect(),
    }
}

/// The kill table.
struct Table {
    rows: Vec<(String, String, Outcome)>,
    /// Per mutant: killed, and whether it is expected to survive.
    mutants: Vec<(String, bool, bool)>,
    baselines_failed: Vec<String>,
}

fn verdicts(
    mutants: &[&Mutant],
    runs: &[Run],
    results: &BTreeMap<String, anyhow::Result<Ran>>,
    not_run: &BTreeMap<(String, Way), String>,
) -> Table {
    let mut rows = Vec::new();
    let mut summary = Vec::new();
    let mut baselines_failed = Vec::new();
    for r in runs.iter().filter(|r| r.mutant.is_none()) {
        match results.get(&r.label()) {
            Some(Ok(ran)) if ran.failed.is_empty() && ran.status == Some(0) => {}
            Some(Ok(ran)) => baselines_failed.push(format!(
                "{}: {}",
                r.label(),
                ran.failed
                    .iter()
                    .map(|(s, m)| format!("{s}: {}", first_line(m)))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            Some(Err(e)) => baselines_failed.push(format!("{}: {e:#}", r.label())),
            None => baselines_failed.push(format!("{}: not run", r.label())),
        }
    }
    for m in mutants {
        let mut all_killed = true;
        let mut any = false;
        for way in m.ways() {
            let outcome = if let Some(reason) = not_run.get(&(m.name.clone(), way)) {
                Outcome::NotRun(reason.clone())
            } else if let Some(run) = runs
                .iter()
                .find(|r| r.mutant.as_deref() == Some(m.name.as_str()) && r.way == way)
            {
                let base_way = if way == Way::TestDriver {
                    Way::Interposer
                } else {
                    way
                };
                let baseline = runs
                    .iter()
                    .find(|b| b.mutant.is_none() && b.way == base_way && b.real == run.real)
                    .and_then(|b| results.get(&b.label()))
                    .and_then(|r| r.as_ref().ok());
                match results.get(&run.label()) {
                    Some(Ok(ran)) => judge(m, ran, baseline),
                    Some(Err(e)) => Outcome::Error(format!("{e:#}")),
                    None => Outcome::Error("not run".to_owned()),
                }
            } else {
                // Filtered out by --way.
                continue;
            };
            any = true;
            all_killed &= matches!(outcome, Outcome::Killed { .. });
            rows.push((m.name.clone(), way.to_string(), outcome));
        }
        summary.push((m.name.clone(), any && all_killed, m.survives.is_some()));
    }
    Table {
        rows,
        mutants: summary,
        baselines_failed,
    }
}

impl Table {
    fn killed(&self) -> usize {
        self.mutants.iter().filter(|(_, k, _)| *k).count()
    }

    fn ok(&self) -> bool {
        self.baselines_failed.is_empty()
            && self
                .mutants
                .iter()
                .all(|(_, killed, survives)| *killed || *survives)
    }

    fn markdown(&self) -> String {
        let mut out = String::from(
            "| mutant | realised by | outcome | scenario | its message (first line) |\n|---|---|---|---|---|\n",
        );
        for (name, way, outcome) in &self.rows {
            let (word, scenario, message) = match outcome {
                Outcome::Killed { scenario, message } => {
                    ("killed", scenario.clone(), message.clone())
                }
                Outcome::Survived { failed } => ("**survived**", String::new(), failed.join("; ")),
                Outcome::Error(e) => ("**error**", String::new(), e.clone()),
                Outcome::NotRun(why) => ("not run", String::new(), why.clone()),
            };
            out.push_str(&format!(
                "| {name} | {way} | {word} | {scenario} | {} |\n",
                message.replace('|', "\\|")
            ));
        }
        out
    }

    fn summary(&self) -> String {
        let total = self.mutants.len();
        let killed = self.killed();
        let score = if total == 0 {
            0.0
        } else {
            100.0 * killed as f64 / total as f64
        };
        let mut s = format!("mutation score: {killed} of {total} mutants killed ({score:.1} %)");
        let survivors: Vec<&str> = self
            .mutants
            .iter()
            .filter(|(_, k, _)| !k)
            .map(|(n, _, _)| n.as_str())
            .collect();
        if !survivors.is_empty() {
            s.push_str(&format!("; not killed: {}", survivors.join(", ")));
        }
        for b in &self.baselines_failed {
            s.push_str(&format!("\nthe unmutated driver failed: {b}"));
        }
        s
    }
}

/// Where the catalogue's table sits in docs/driver-mutants.md.
pub const DOC_BEGIN: &str = "<!-- mutants-catalogue:begin -->";
pub const DOC_END: &str = "<!-- mutants-catalogue:end -->";
const MUTANTS_DOC: &str = "docs/driver-mutants.md";
/// Where the pack's behaviour table sits in docs/driver-conformance.md.
const BEHAVIOURS_BEGIN: &str = "<!-- behaviours:begin -->";
const BEHAVIOURS_END: &str = "<!-- behaviours:end -->";
const BEHAVIOURS_DOC: &str = "docs/driver-conformance.md";

/// `doc` with the text between `begin` and `end` replaced by `body`.
fn between(doc: &str, begin: &str, end: &str, body: &str) -> anyhow::Result<String> {
    let (head, rest) = doc
        .split_once(begin)
        .with_context(|| format!("no {begin} marker"))?;
    let (_, tail) = rest
        .split_once(end)
        .with_context(|| format!("no {end} marker after {begin}"))?;
    Ok(format!("{head}{begin}\n{}\n{end}{tail}", body.trim_end()))
}

fn catalogue_doc(doc: &str, mutants: &[Mutant]) -> anyhow::Result<String> {
    between(doc, DOC_BEGIN, DOC_END, &markdown(mutants))
}

/// The mutants each scenario kills: those the catalogue names it for and
/// does not expect to survive.
fn kills_by_scenario(mutants: &[Mutant]) -> BTreeMap<&str, Vec<&str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in mutants.iter().filter(|m| m.survives.is_none()) {
        for c in &m.caught_by {
            let names = out.entry(c.scenario.as_str()).or_default();
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    out
}

/// The scenario a row of the behaviour table is about: its second cell,
/// less a trailing "(`Tag`)".
fn row_scenario(row: &str) -> Option<&str> {
    let cell = row.split('|').nth(2)?.trim();
    Some(cell.split_once(" (`").map_or(cell, |(name, _)| name))
}

/// The behaviour table with its last column, the mutants each behaviour
/// kills, rewritten from the catalogue. Every scenario of the pack has a
/// row and every row a scenario: the table is what the pack checks.
fn behaviours_doc(
    doc: &str,
    mutants: &[Mutant],
    pack: &BTreeSet<String>,
) -> anyhow::Result<String> {
    let (_, rest) = doc
        .split_once(BEHAVIOURS_BEGIN)
        .with_context(|| format!("no {BEHAVIOURS_BEGIN} marker"))?;
    let (table, _) = rest
        .split_once(BEHAVIOURS_END)
        .with_context(|| format!("no {BEHAVIOURS_END} marker"))?;
    let kills = kills_by_scenario(mutants);
    let mut listed = BTreeSet::new();
    let mut out = String::from(
        "| KEP-5970 | scenario | guards against | mutants it kills |\n|---|---|---|---|\n",
    );
    for row in table
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .skip(2)
    {
        let scenario =
            row_scenario(row).with_context(|| format!("a row without a scenario: {row}"))?;
        listed.insert(scenario.to_owned());
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let [kep, name, guards, ..] = cells.as_slice() else {
            bail!("a row with fewer than three cells: {row}");
        };
        let killed = kills
            .get(scenario)
            .map_or("none".to_owned(), |m| m.join(", "));
        let kep = if kep.is_empty() {
            " ".to_owned()
        } else {
            format!(" {kep} ")
        };
        out.push_str(&format!("|{kep}| {name} | {guards} | {killed} |\n"));
    }
    let unknown: Vec<&String> = listed.difference(pack).collect();
    if !unknown.is_empty() {
        bail!("the behaviour table names scenarios the pack does not have: {unknown:?}");
    }
    let missing: Vec<&String> = pack.difference(&listed).collect();
    if !missing.is_empty() {
        bail!("the behaviour table has no row for the pack's scenarios {missing:?}");
    }
    between(doc, BEHAVIOURS_BEGIN, BEHAVIOURS_END, &out)
}

/// The catalogue as a Markdown table (docs/driver-mutants.md).
pub fn markdown(mutants: &[Mutant]) -> String {
    let mut out = String::from(
        "| mutant | the bug | seen in | realised by | caught by |\n|---|---|---|---|---|\n",
    );
    for m in mutants {
        let ways: Vec<String> = m.ways().iter().map(|w| w.to_string()).collect();
        let mut ways = ways.join(", ");
        if m.on_real_nodes() {
            ways.push_str(" (real nodes)");
        }
        let caught: Vec<String> = m
            .caught_by
            .iter()
            .map(|c| format!("{} (`{}`)", c.scenario, c.message))
            .collect();
        let caught = match &m.survives {
            Some(why) => format!("survives: {why}"),
            None => caught.join("; "),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {ways} | {caught} |\n",
            m.name, m.bug, m.seen
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn docs_driver_mutants_md_holds_the_catalogue() {
        let doc = std::fs::read_to_string(root().join("docs/driver-mutants.md")).unwrap();
        let (_, rest) = doc.split_once(DOC_BEGIN).unwrap();
        let (section, _) = rest.split_once(DOC_END).unwrap();
        let want = markdown(&catalogue(&root()).unwrap());
        assert!(
            section.trim() == want.trim(),
            "docs/driver-mutants.md is not the catalogue: run `make mutants-doc`"
        );
    }

    #[test]
    fn a_run_past_its_backstop_is_stopped_and_one_that_ends_is_waited_for() {
        let limits = Limits {
            deadline: std::time::Duration::ZERO,
            teardown: std::time::Duration::from_secs(1),
            grace: std::time::Duration::from_millis(200),
        };
        let hung = Command::new("sleep").arg("600").spawn().unwrap();
        let pid = hung.id();
        let err = wait_bounded(hung, limits).unwrap_err();
        assert!(err.contains("stopped with SIGTERM"), "{err}");
        // Reaped: the process is gone, not a zombie left behind.
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} still there"
        );
        let quick = Command::new("true").spawn().unwrap();
        let limits = Limits::after(std::time::Duration::from_secs(60));
        assert!(wait_bounded(quick, limits).unwrap().success());
    }

    #[test]
    fn docs_driver_conformance_md_says_what_each_behaviour_kills() {
        let doc = std::fs::read_to_string(root().join(BEHAVIOURS_DOC)).unwrap();
        let pack = pack_scenarios(&root().join(PACK)).unwrap();
        let want = behaviours_doc(&doc, &catalogue(&root()).unwrap(), &pack).unwrap();
        assert!(
            doc == want,
            "docs/driver-conformance.md's behaviour table is not the pack and the catalogue: run `make mutants-doc`"
        );
    }

    #[test]
    fn the_behaviour_table_must_name_the_packs_scenarios_and_no_other() {
        let mutants = catalogue(&root()).unwrap();
        let pack = pack_scenarios(&root().join(PACK)).unwrap();
        let doc = std::fs::read_to_string(root().join(BEHAVIOURS_DOC)).unwrap();
        let renamed = doc.replacen(
            "| the kubelet registers the driver's plugin |",
            "| a scenario of no pack |",
            1,
        );
        let err = behaviours_doc(&renamed, &mutants, &pack)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"a scenario of no pack\""), "{err}");
        let (head, rest) = doc.split_once(BEHAVIOURS_BEGIN).unwrap();
        let dropped: String = rest
            .lines()
            .filter(|l| !l.contains("| the kubelet registers the driver's plugin |"))
            .collect::<Vec<_>>()
            .join("\n");
        let err = behaviours_doc(
            &format!("{head}{BEHAVIOURS_BEGIN}{dropped}"),
            &mutants,
            &pack,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no row for"), "{err}");
    }

    #[test]
    fn the_catalogue_is_valid_and_large_enough() {
        let mutants = catalogue(&root()).unwrap();
        assert!(mutants.len() >= 25, "{}", mutants.len());
        for m in &mutants {
            assert!(!m.ways().is_empty(), "{}", m.name);
        }
    }

    fn ran(failed: &[(&str, &str)], passed: &[&str]) -> Ran {
        Ran {
            status: Some(if failed.is_empty() { 0 } else { 1 }),
            failed: failed
                .iter()
                .map(|(s, m)| (s.to_string(), m.to_string()))
                .collect(),
            passed: passed.iter().map(|s| s.to_string()).collect(),
            tail: String::new(),
        }
    }

    fn mutant() -> Mutant {
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

    #[test]
    fn killed_only_by_the_named_scenario_with_the_expected_message_beside_a_green_baseline() {
        let m = mutant();
        let green = ran(&[], &["several claims"]);
        let hit = ran(
            &[("several claims", "Then x: did not get its device from")],
            &[],
        );
        assert!(matches!(
            judge(&m, &hit, Some(&green)),
            Outcome::Killed { .. }
        ));
        // Another message, or another scenario, is no kill.
        let other = ran(&[("several claims", "Then x: timed out")], &[]);
        assert!(matches!(
            judge(&m, &other, Some(&green)),
            Outcome::Survived { .. }
        ));
        let elsewhere = ran(&[("reuse", "did not get its device")], &["several claims"]);
        assert!(matches!(
            judge(&m, &elsewhere, Some(&green)),
            Outcome::Survived { .. }
        ));
        // A red baseline, a driver that never started or a run that did
        // not end is an error, not a kill.
        let red = ran(&[("several claims", "did not get its device")], &[]);
        assert!(matches!(judge(&m, &hit, Some(&red)), Outcome::Error(_)));
        let never = ran(
            &[(
                "several claims",
                "Given the driver under test: did not get its device",
            )],
            &[],
        );
        assert!(matches!(judge(&m, &never, Some(&green)), Outcome::Error(_)));
        let mut killed = hit.clone();
        killed.status = None;
        assert!(matches!(
            judge(&m, &killed, Some(&green)),
            Outcome::Error(_)
        ));
        // A run that tested nothing (its profile refused, say) survives
        // nothing either: it is an error.
        let nothing = ran(&[], &[]);
        assert!(matches!(
            judge(&m, &nothing, Some(&green)),
            Outcome::Error(_)
        ));
    }

    #[test]
    fn the_rolling_driver_is_told_its_bug_in_a_copy_of_its_daemonset() {
        let root = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let built = root.path().join("target/rolling-driver");
        std::fs::create_dir_all(&built).unwrap();
        let ds = "        env:\n            - name: NUM_DEVICES\n              value: \"4\"\n";
        std::fs::write(built.join("kubelet-plugin.yaml"), ds).unwrap();
        let copy = rolling_daemonset_with(root.path(), dir.path(), "BREAK_IT=true").unwrap();
        assert_eq!(
            std::fs::read_to_string(copy).unwrap(),
            "        env:\n            - name: BREAK_IT\n              value: \"true\"\n            \
             - name: NUM_DEVICES\n              value: \"4\"\n"
        );
        // A DaemonSet without the variable to stand beside is refused, not
        // run unbroken.
        std::fs::write(built.join("kubelet-plugin.yaml"), "env: []\n").unwrap();
        let err = rolling_daemonset_with(root.path(), dir.path(), "BREAK_IT=true").unwrap_err();
        assert!(err.to_string().contains("sets no NUM_DEVICES"), "{err}");
    }

    #[test]
    fn the_plan_runs_each_way_beside_one_baseline_per_way() {
        let mut both = mutant();
        both.patch = Some("first-claim-only".into());
        let mut real = mutant();
        real.name = "r".into();
        real.fault = Some("ReplayPrepared".into());
        real.nodes = Some("real".into());
        let (runs, not_run) = plan(&[&both, &real], &[], false);
        let labels: Vec<String> = runs.iter().map(Run::label).collect();
        assert_eq!(
            labels,
            [
                "unmutated-interposer",
                "unmutated-builtin",
                "m-builtin",
                "m-interposer",
                "m-test-driver"
            ]
        );
        assert_eq!(
            not_run.keys().collect::<Vec<_>>(),
            [&("r".to_owned(), Way::Interposer)]
        );
        let (runs, _) = plan(&[&both], &[Way::Builtin], false);
        assert_eq!(runs.len(), 2);
    }
}
