//! The verdicts: whether each run of a mutant killed it, judged against
//! the unmutated driver's run on the same scenarios, and the kill table
//! and mutation score they make. Only the failure the catalogue expects
//! counts as a kill: a run that broke for another reason says nothing of
//! the mutant and is an error, never a kill or a survivor.
use std::collections::BTreeMap;

use super::Way;
use super::catalogue::Mutant;
use super::runs::{Ran, Run};

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
pub(super) struct Table {
    rows: Vec<(String, String, Outcome)>,
    /// Per mutant: killed, and whether it is expected to survive.
    mutants: Vec<(String, bool, bool)>,
    baselines_failed: Vec<String>,
}

pub(super) fn verdicts(
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
            // A run that failed before any scenario (a profile refused, a
            // cluster that never started) says why only in its output.
            Some(Ok(ran)) if ran.failed.is_empty() => baselines_failed.push(format!(
                "{}: ended with status {:?} before failing any scenario: {}",
                r.label(),
                ran.status,
                ran.tail
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("no output")
            )),
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

    pub(super) fn ok(&self) -> bool {
        self.baselines_failed.is_empty()
            && self
                .mutants
                .iter()
                .all(|(_, killed, survives)| *killed || *survives)
    }

    pub(super) fn markdown(&self) -> String {
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

    pub(super) fn summary(&self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::mutants::catalogue::tests::mutant;

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
    fn a_baseline_that_failed_before_any_scenario_says_why_from_its_output() {
        use crate::runner::mutants::runs::Run;
        let baseline = Run {
            mutant: None,
            way: Way::RollingDriver,
            real: true,
            scenarios: Default::default(),
        };
        let mut ran = ran(&[], &[]);
        ran.status = Some(1);
        ran.tail = "mutants: starting\nerror: reading kubelet-plugin.yaml: No such file\n\n".into();
        let results = BTreeMap::from([(baseline.label(), Ok(ran))]);
        let table = verdicts(&[], &[baseline], &results, &BTreeMap::new());
        assert!(!table.ok());
        assert!(
            table.summary().contains(
                "the unmutated driver failed: unmutated-rolling-driver-real: ended with status \
                 Some(1) before failing any scenario: error: reading kubelet-plugin.yaml: No such file"
            ),
            "{}",
            table.summary()
        );
    }
}
