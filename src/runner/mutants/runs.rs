//! Running the pack against the mutants: the plan (each realisation, and
//! beside them one run of the unmutated driver per way, the baseline a
//! kill is judged against), the runs themselves a few at once, each a
//! child runner bounded in time, and what each run's JUnit report says.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

use super::Way;
use super::catalogue::{Mutant, PACK};
use super::realise::profile_for;

/// Long enough for a prepare the kubelet retries, short enough that a
/// mutant whose pod never runs does not hold its run for the default 300 s.
const STEP_TIMEOUT: &str = "150s";

/// One run of the pack: a mutant realised one way, or a baseline.
#[derive(Debug, Clone)]
pub(super) struct Run {
    /// `None`: the unmutated driver.
    pub(super) mutant: Option<String>,
    pub(super) way: Way,
    pub(super) real: bool,
    pub(super) scenarios: BTreeSet<String>,
}

impl Run {
    pub(super) fn label(&self) -> String {
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
pub(super) struct Ran {
    /// Exit status, `None` when killed by a signal.
    pub(super) status: Option<i32>,
    /// Failed scenarios and their messages.
    pub(super) failed: BTreeMap<String, String>,
    pub(super) passed: BTreeSet<String>,
    /// The last lines of its output, for an error.
    pub(super) tail: String,
}

pub(super) fn patch_of<'a>(mutants: &'a [Mutant], name: &str) -> &'a str {
    mutants
        .iter()
        .find(|m| m.name == name)
        .and_then(|m| m.patch.as_deref())
        .unwrap_or_default()
}

/// The runs for `mutants`: each realisation, and per way the unmutated
/// driver on the union of their scenarios. Also what is not run, and why.
pub(super) fn plan(
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
pub(super) fn run_all(
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
pub(super) struct Limits {
    /// The run's own `--deadline`: its scenarios are torn down when it passes.
    pub(super) deadline: std::time::Duration,
    /// The run's own `--teardown-timeout`.
    pub(super) teardown: std::time::Duration,
    /// Past deadline and teardown, before the run is stopped from here: a
    /// run that outlives its own limits hangs where they do not reach.
    pub(super) grace: std::time::Duration,
}

impl Limits {
    pub(super) fn after(deadline: std::time::Duration) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::mutants::catalogue::tests::mutant;

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
