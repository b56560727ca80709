//! Scenario outcomes, the closing summary line, timing figures, the
//! artifacts of failed scenarios, and the reports written from them.
pub mod collect;
pub mod conformance;
pub mod html;
pub mod junit;
pub mod progress;
pub mod terminal;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use cucumber::gherkin;

/// Text of the first step of a scenario the runner decided not to run; the
/// reason follows it. No step matches it, so cucumber reports the scenario
/// as skipped.
pub const SKIP_PREFIX: &str = "skipped: ";

/// Whether the runner marked the scenario as skipped (see [`SKIP_PREFIX`]).
pub fn is_marked_skipped(scenario: &gherkin::Scenario) -> bool {
    scenario
        .steps
        .first()
        .is_some_and(|s| s.value.starts_with(SKIP_PREFIX))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    Skipped,
}

/// A scenario's identity that stays stable across runs and retries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScenarioId {
    pub path: String,
    pub line: usize,
    pub name: String,
}

impl ScenarioId {
    pub fn of(
        feature: &cucumber::gherkin::Feature,
        scenario: &cucumber::gherkin::Scenario,
    ) -> Self {
        ScenarioId {
            path: feature
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            line: scenario.position.line,
            name: scenario.name.clone(),
        }
    }
}

impl std::fmt::Display for ScenarioId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}:{})", self.name, self.path, self.line)
    }
}

pub use dra_e2e_harness::timing::{CLUSTER_START, Cost, Laps, Phase, Timings};

#[derive(Debug, Clone)]
pub struct Record {
    pub outcome: Outcome,
    /// From the start of setup to the end of teardown.
    pub duration: Duration,
    pub setup: Timings,
    pub teardown: Timings,
    /// Checks that went on after the scenario ended, beside the scenarios
    /// that followed (a driver's slices wiped): not in `duration`.
    pub after: Timings,
    pub skip_reason: Option<String>,
    /// Where the artifacts of a failed scenario are.
    pub artifacts: Option<PathBuf>,
    /// Why a check that went on after the scenario failed it.
    pub late_failure: Option<String>,
}

impl Record {
    /// The scenario's own time: `duration` without its waits for other
    /// scenarios to let go of its nodes (what a run alone would have taken).
    pub fn own_duration(&self) -> Duration {
        self.duration.saturating_sub(self.queued())
    }

    /// How long the scenario waited for other scenarios (a free slot, its
    /// nodes): a run alone would not have.
    pub fn queued(&self) -> Duration {
        self.setup
            .iter()
            .filter(|(p, _)| p.cost == Cost::Queue)
            .map(|(_, d)| *d)
            .sum()
    }

    pub fn new(outcome: Outcome) -> Self {
        Record {
            outcome,
            duration: Duration::ZERO,
            setup: Vec::new(),
            teardown: Vec::new(),
            after: Vec::new(),
            skip_reason: None,
            artifacts: None,
            late_failure: None,
        }
    }
}

/// Outcomes of the run; a retried scenario keeps its last attempt.
#[derive(Debug, Default)]
pub struct Outcomes {
    records: Mutex<BTreeMap<ScenarioId, Record>>,
    teardown_failures: std::sync::atomic::AtomicUsize,
    namespaces: Mutex<Vec<String>>,
}

impl Outcomes {
    /// A namespace this run created (checked for leftovers at the end).
    pub fn namespace_created(&self, ns: &str) {
        if let Ok(mut n) = self.namespaces.lock() {
            n.push(ns.to_owned());
        }
    }

    pub fn namespaces(&self) -> Vec<String> {
        self.namespaces
            .lock()
            .map(|n| n.clone())
            .unwrap_or_default()
    }

    /// A scenario's teardown left something behind or failed.
    pub fn teardown_failed(&self) {
        self.teardown_failures
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn teardown_failures(&self) -> usize {
        self.teardown_failures
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn record(&self, id: ScenarioId, record: Record) {
        if let Ok(mut m) = self.records.lock() {
            m.insert(id, record);
        }
    }

    /// A check that went on after scenario `id` ended has ended: its time
    /// joins the record, and its failure fails the scenario.
    pub fn finished_late(
        &self,
        id: &ScenarioId,
        phase: Phase,
        took: Duration,
        failure: Option<String>,
    ) {
        let Ok(mut m) = self.records.lock() else {
            return;
        };
        let Some(r) = m.get_mut(id) else { return };
        r.after.push((phase, took));
        if let Some(f) = failure {
            r.outcome = Outcome::Failed;
            r.late_failure.get_or_insert(f);
        }
    }

    /// The phases of a teardown that ran after its scenario was recorded.
    pub fn torn_down(&self, id: &ScenarioId, mut phases: Timings) {
        if let Ok(mut m) = self.records.lock()
            && let Some(r) = m.get_mut(id)
        {
            r.teardown.append(&mut phases);
        }
    }

    /// Scenarios whose steps passed but a wait after them failed.
    pub fn failed_late(&self) -> std::collections::BTreeSet<ScenarioId> {
        self.records
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|(_, r)| r.late_failure.is_some())
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn snapshot(&self) -> BTreeMap<ScenarioId, Record> {
        self.records.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

/// `N passed, N failed` plus `, N skipped` when any were.
pub fn summary_line(records: &BTreeMap<ScenarioId, Record>) -> String {
    let count = |o| records.values().filter(|r| r.outcome == o).count();
    let (p, f, s) = (
        count(Outcome::Passed),
        count(Outcome::Failed),
        count(Outcome::Skipped),
    );
    if s > 0 {
        format!("{p} passed, {f} failed, {s} skipped")
    } else {
        format!("{p} passed, {f} failed")
    }
}

/// Skip reasons grouped, for the end of the run.
pub fn skip_summary(records: &BTreeMap<ScenarioId, Record>) -> Vec<String> {
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for r in records.values() {
        if let Some(reason) = &r.skip_reason {
            *by_reason.entry(reason).or_default() += 1;
        }
    }
    by_reason
        .into_iter()
        .map(|(reason, n)| format!("{n} skipped: {reason}"))
        .collect()
}

/// One line per failed scenario, said last beside the counts: a run's tail
/// (what CI logs and `tail` show) names what failed and why without
/// scrolling back through the scenarios. The error's first line only; the
/// scenario's own output above and the reports hold the rest.
pub fn failure_summary(
    log: &collect::RunLog,
    records: &BTreeMap<ScenarioId, Record>,
) -> Vec<String> {
    const MAX: usize = 300;
    log.scenarios
        .iter()
        .filter_map(|s| {
            let record = records.get(&s.id);
            if s.outcome(record) != Outcome::Failed {
                return None;
            }
            let (step, error) = s.failure(record).unwrap_or_else(|| {
                (
                    "(unfinished)".to_owned(),
                    "the run stopped under it".to_owned(),
                )
            });
            let mut first = error
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_owned();
            if first.chars().count() > MAX {
                first = first.chars().take(MAX).collect::<String>() + "…";
            }
            Some(format!(
                "failed: {}:{}: {}: {step}: {first}",
                s.id.path,
                s.id.line,
                s.title_with_example()
            ))
        })
        .collect()
}

/// Where a run's time went: its own phases (cluster start, scenarios, the
/// waits after them), per scenario (median, slowest five), the fixed cost
/// each scenario pays in harness work, and every setup and teardown phase.
pub fn timings(records: &BTreeMap<ScenarioId, Record>, run: &Timings) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut ran: Vec<(&ScenarioId, &Record)> = records
        .iter()
        .filter(|(_, r)| r.outcome != Outcome::Skipped)
        .collect();
    let total: Duration = run.iter().map(|(_, d)| *d).sum();
    let _ = writeln!(
        out,
        "run: {:.1}s for {} scenarios",
        total.as_secs_f64(),
        ran.len()
    );
    for (phase, d) in run {
        let _ = writeln!(out, "  {:>6.1}s  {}", d.as_secs_f64(), phase.name);
    }
    if ran.is_empty() {
        return out;
    }
    ran.sort_by_key(|(_, r)| r.own_duration());
    let start: Duration = run
        .iter()
        .filter(|(p, _)| *p == CLUSTER_START)
        .map(|(_, d)| *d)
        .sum();
    let floor = start + ran[ran.len() - 1].1.own_duration();
    let _ = writeln!(
        out,
        "floor: {:.1}s (cluster start and the longest scenario); run/floor {:.2}",
        floor.as_secs_f64(),
        total.as_secs_f64() / floor.as_secs_f64().max(0.001)
    );
    let median = ran[ran.len() / 2].1.own_duration();
    let _ = writeln!(out, "per scenario: median {:.1}s", median.as_secs_f64());
    let _ = writeln!(out, "slowest:");
    for (id, r) in ran.iter().rev().take(5) {
        let _ = writeln!(out, "  {:>6.1}s  {}", r.own_duration().as_secs_f64(), id);
    }
    let mut fixed: Vec<Duration> = ran
        .iter()
        .map(|(_, r)| {
            r.setup
                .iter()
                .chain(&r.teardown)
                .filter(|(p, _)| p.cost == Cost::Harness)
                .map(|(_, d)| *d)
                .sum()
        })
        .collect();
    fixed.sort();
    let _ = writeln!(
        out,
        "fixed cost per scenario (harness work in setup and teardown, not the waits upstream makes too): median {:.2}s, 90th percentile {:.2}s",
        fixed[fixed.len() / 2].as_secs_f64(),
        fixed[fixed.len() * 9 / 10].as_secs_f64()
    );
    let scenario_time: f64 = ran.iter().map(|(_, r)| r.duration.as_secs_f64()).sum();
    // Only setup is part of a scenario's time; the rest runs beside later
    // scenarios, so its share of scenario time would mean nothing.
    for (part, of, within) in [
        (
            "setup",
            (|r: &Record| &r.setup) as fn(&Record) -> &Timings,
            true,
        ),
        (
            "teardown, after the steps, beside the scenarios that followed",
            |r: &Record| &r.teardown,
            false,
        ),
        (
            "after the scenarios, beside the ones that followed",
            |r: &Record| &r.after,
            false,
        ),
    ] {
        let mut phases: BTreeMap<Phase, (Duration, usize)> = BTreeMap::new();
        let mut sum = Duration::ZERO;
        for (_, r) in &ran {
            for (phase, d) in of(r) {
                let e = phases.entry(*phase).or_default();
                e.0 += *d;
                e.1 += 1;
                sum += *d;
            }
        }
        if phases.is_empty() {
            continue;
        }
        let share = if within {
            format!(
                "{:.0}% of scenario time",
                100.0 * sum.as_secs_f64() / scenario_time.max(0.001)
            )
        } else {
            format!(
                "{:.2}s per scenario, not in scenario time",
                sum.as_secs_f64() / ran.len() as f64
            )
        };
        let _ = writeln!(out, "{part}: {:.1}s in total ({share})", sum.as_secs_f64());
        let mut phases: Vec<_> = phases.into_iter().collect();
        phases.sort_by_key(|p| std::cmp::Reverse(p.1.0));
        for (phase, (d, n)) in phases {
            let kind = match phase.cost {
                Cost::Harness => "",
                Cost::Wait => ", a wait upstream makes too",
                Cost::Queue => ", waiting for other scenarios, not in its own time",
            };
            let _ = writeln!(
                out,
                "  {:>6.1}s  {} (mean {:.2}s over {n}{kind})",
                d.as_secs_f64(),
                phase.name,
                d.as_secs_f64() / n as f64
            );
        }
    }
    out
}

/// A directory name that is safe and recognisable for a scenario.
pub fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').chars().take(80).collect()
}

/// Writes one artifact file, creating its directory.
pub fn write_artifact(dir: &Path, name: &str, content: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    std::fs::write(&path, content)?;
    Ok(path)
}

/// An error and its causes on one line, each cause said once: a cause whose
/// text its parent already includes (`reading X: {source}` with the same
/// source attached) is not repeated.
pub fn error_message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        #[derive(Debug, thiserror::Error)]
        #[error("reading x: {0}")]
        struct Twice(#[source] std::io::Error);
        let e = anyhow::Error::new(Twice(io)).context("loading");
        let m = error_message(&e);
        assert_eq!(m, "loading: reading x: entity not found");
    }

    fn rec(outcome: Outcome, secs: u64) -> Record {
        Record {
            duration: Duration::from_secs(secs),
            teardown: vec![(Phase::harness("driver"), Duration::from_secs(1))],
            skip_reason: (outcome == Outcome::Skipped).then(|| "too few nodes".to_owned()),
            ..Record::new(outcome)
        }
    }

    fn id(n: usize) -> ScenarioId {
        ScenarioId {
            path: "f.feature".into(),
            line: n,
            name: format!("s{n}"),
        }
    }

    #[test]
    fn summary_mentions_skipped_only_when_present() {
        let mut m = BTreeMap::new();
        m.insert(id(1), rec(Outcome::Passed, 1));
        m.insert(id(2), rec(Outcome::Failed, 1));
        assert_eq!(summary_line(&m), "1 passed, 1 failed");
        m.insert(id(3), rec(Outcome::Skipped, 0));
        assert_eq!(summary_line(&m), "1 passed, 1 failed, 1 skipped");
        assert_eq!(skip_summary(&m), vec!["1 skipped: too few nodes"]);
    }

    #[test]
    fn failures_are_named_last_with_their_first_line() {
        use collect::{RunLog, ScenarioLog, StepLog, StepStatus};
        let log_of = |n: usize, status: StepStatus| ScenarioLog {
            id: id(n),
            feature: "f".into(),
            feature_path: None,
            rule: None,
            example: vec![],
            tags: vec![],
            started: None,
            finished: None,
            steps: vec![StepLog {
                keyword: "Then".into(),
                text: "the pod runs".into(),
                background: false,
                status,
                started: None,
                finished: None,
            }],
            hook_failure: None,
        };
        let log = RunLog {
            scenarios: vec![
                log_of(1, StepStatus::Passed),
                log_of(
                    2,
                    StepStatus::Failed("\npod p not running\nlast seen: Pending".into()),
                ),
            ],
            ..RunLog::default()
        };
        let mut m = BTreeMap::new();
        m.insert(id(1), rec(Outcome::Passed, 1));
        m.insert(id(2), rec(Outcome::Failed, 1));
        assert_eq!(
            failure_summary(&log, &m),
            vec!["failed: f.feature:2: s2: Then the pod runs: pod p not running"]
        );
        m.insert(id(2), rec(Outcome::Passed, 1));
        assert!(failure_summary(&log, &m).is_empty());
    }

    #[test]
    fn retried_scenario_keeps_last_outcome() {
        let o = Outcomes::default();
        o.record(id(1), rec(Outcome::Failed, 1));
        o.record(id(1), rec(Outcome::Passed, 2));
        assert_eq!(summary_line(&o.snapshot()), "1 passed, 0 failed");
    }

    #[test]
    fn timings_list_median_and_teardown() {
        let mut m = BTreeMap::new();
        for i in 1..=7 {
            m.insert(id(i), rec(Outcome::Passed, i as u64));
        }
        let run = vec![
            (CLUSTER_START, Duration::from_secs(5)),
            (Phase::harness("scenarios"), Duration::from_secs(25)),
        ];
        let t = timings(&m, &run);
        assert!(t.contains("run: 30.0s for 7 scenarios"), "{t}");
        // 5 s to start and 7 s for the longest scenario.
        assert!(t.contains("floor: 12.0s"), "{t}");
        assert!(t.contains("run/floor 2.50"), "{t}");
        assert!(t.contains("median 4.0s"), "{t}");
        assert!(t.contains("7.0s  s7"), "{t}");
        assert!(t.contains("driver (mean 1.00s over 7)"), "{t}");
        // Only harness phases count as fixed cost: 1 s of teardown each.
        assert!(t.contains("fixed cost per scenario"), "{t}");
        assert!(t.contains("median 1.00s"), "{t}");
        // Teardown runs beside later scenarios: no share of their time.
        assert!(
            t.contains("teardown, after the steps, beside the scenarios that followed: 7.0s in total (1.00s per scenario, not in scenario time)"),
            "{t}"
        );
    }

    #[test]
    fn a_late_failure_fails_the_scenario_and_adds_its_time() {
        let o = Outcomes::default();
        o.record(id(1), rec(Outcome::Passed, 1));
        let wiped = Phase::wait("wait for slices to be wiped");
        o.finished_late(&id(1), wiped, Duration::from_secs(3), None);
        assert_eq!(summary_line(&o.snapshot()), "1 passed, 0 failed");
        o.finished_late(
            &id(1),
            wiped,
            Duration::from_secs(120),
            Some("slices stayed".into()),
        );
        let r = &o.snapshot()[&id(1)];
        assert_eq!(r.outcome, Outcome::Failed);
        assert_eq!(r.late_failure.as_deref(), Some("slices stayed"));
        assert_eq!(r.after.len(), 2);
    }

    #[test]
    fn slug_is_path_safe() {
        assert_eq!(
            slug("Must retry: NodePrepare/Resources!"),
            "must-retry-nodeprepare-resources"
        );
    }
}
