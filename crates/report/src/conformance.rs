//! The conformance summary: how the driver under test did on the
//! `@DriverConformance` scenarios, behaviour by behaviour (each scenario
//! guards one), for the closing lines and the reports' properties.
use std::collections::{BTreeMap, BTreeSet};

use super::{Outcome, Record, ScenarioId};

/// The tag of the conformance pack's scenarios (without `@`).
pub const TAG: &str = "DriverConformance";

/// A scenario by where it is: its feature file and line.
pub type Place = (String, usize);

/// The pack's outcome for one driver.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub passed: Vec<String>,
    /// With the reason.
    pub skipped: Vec<(String, String)>,
    pub failed: Vec<String>,
    /// Checks the pack makes where it can and could not make in this run,
    /// with why: a green run promises no more than what was checked.
    pub unchecked: Vec<String>,
}

impl Summary {
    /// The pack's scenarios among `records` (those at `pack`'s places);
    /// `None` when the run had none of them.
    pub fn of(records: &BTreeMap<ScenarioId, Record>, pack: &BTreeSet<Place>) -> Option<Summary> {
        let mut s = Summary::default();
        let mut any = false;
        for (id, r) in records {
            if !pack.contains(&(id.path.clone(), id.line)) {
                continue;
            }
            any = true;
            match r.outcome {
                Outcome::Passed => s.passed.push(id.name.clone()),
                Outcome::Failed => s.failed.push(id.name.clone()),
                Outcome::Skipped => s.skipped.push((
                    id.name.clone(),
                    r.skip_reason
                        .clone()
                        .unwrap_or_else(|| "skipped".to_owned()),
                )),
            }
        }
        any.then_some(s)
    }

    /// `N passed, M skipped, K failed` of the pack's behaviours.
    pub fn counts(&self) -> String {
        format!(
            "{} passed, {} skipped, {} failed",
            self.passed.len(),
            self.skipped.len(),
            self.failed.len()
        )
    }

    /// The closing lines: the counts, then each behaviour not passed.
    pub fn lines(&self, driver: &str) -> Vec<String> {
        let n = self.passed.len() + self.skipped.len() + self.failed.len();
        let mut out = vec![format!(
            "driver conformance of {driver}: {n} behaviour{}: {}",
            if n == 1 { "" } else { "s" },
            self.counts()
        )];
        for f in &self.failed {
            out.push(format!("  failed: {f}"));
        }
        for (name, why) in &self.skipped {
            out.push(format!("  skipped: {name} ({why})"));
        }
        for what in &self.unchecked {
            out.push(format!("  not checked: {what}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(path: &str, line: usize, name: &str) -> ScenarioId {
        ScenarioId {
            path: path.into(),
            line,
            name: name.into(),
        }
    }

    #[test]
    fn only_the_packs_scenarios_count_and_what_did_not_pass_is_named() {
        let mut records = BTreeMap::new();
        records.insert(
            id("c.feature", 3, "registers"),
            Record::new(Outcome::Passed),
        );
        records.insert(
            id("c.feature", 9, "unprepares"),
            Record::new(Outcome::Failed),
        );
        let mut skipped = Record::new(Outcome::Skipped);
        skipped.skip_reason = Some("needs driver capability AdminAccess".into());
        records.insert(id("c.feature", 20, "admin"), skipped);
        records.insert(
            id("other.feature", 3, "not the pack"),
            Record::new(Outcome::Failed),
        );
        let pack: BTreeSet<Place> = [3, 9, 20]
            .into_iter()
            .map(|l| ("c.feature".to_owned(), l))
            .collect();
        let mut s = Summary::of(&records, &pack).unwrap();
        assert_eq!(s.counts(), "1 passed, 1 skipped, 1 failed");
        s.unchecked
            .push("the CDI specs on the nodes (run with --interpose)".into());
        assert_eq!(
            s.lines("gpu.example.com"),
            vec![
                "driver conformance of gpu.example.com: 3 behaviours: 1 passed, 1 skipped, 1 failed",
                "  failed: unprepares",
                "  skipped: admin (needs driver capability AdminAccess)",
                "  not checked: the CDI specs on the nodes (run with --interpose)",
            ]
        );
        assert_eq!(Summary::of(&records, &BTreeSet::new()), None);
    }
}
