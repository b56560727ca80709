//! What happened in a run, step by step, as the reports need it: a cucumber
//! writer teed beside the console output that keeps every scenario's steps,
//! their errors and their times. The JUnit report (and later views) render
//! from it; outcomes, skip reasons and artifacts come from [`super::Outcomes`].
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use cucumber::event::{self, Cucumber, Feature, HookType, Rule, Scenario, Step};
use cucumber::{Event, gherkin, parser};

use super::{Outcome, Record, ScenarioId};

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepStatus {
    /// Started and not finished (the run stopped under it).
    Running,
    Passed,
    /// With the error cucumber reports.
    Failed(String),
    /// No step matched it (a scenario the cluster cannot run is marked so).
    Skipped,
}

#[derive(Debug, Clone)]
pub struct StepLog {
    /// `Given`, `When`, `Then`, `And`…
    pub keyword: String,
    pub text: String,
    /// From the feature's background.
    pub background: bool,
    pub status: StepStatus,
    pub started: Option<SystemTime>,
    pub finished: Option<SystemTime>,
}

/// One scenario's last attempt (a retry replaces the earlier ones).
#[derive(Debug, Clone)]
pub struct ScenarioLog {
    pub id: ScenarioId,
    pub feature: String,
    pub feature_path: Option<PathBuf>,
    pub rule: Option<String>,
    /// An outline's example row as header/value pairs; empty otherwise.
    pub example: Vec<(String, String)>,
    pub tags: Vec<String>,
    pub started: Option<SystemTime>,
    pub finished: Option<SystemTime>,
    pub steps: Vec<StepLog>,
    /// A before or after hook that failed: the scenario's setup or teardown.
    pub hook_failure: Option<String>,
}

/// Seconds from `a` to `b`, 0 when either is unknown.
pub fn seconds(a: Option<SystemTime>, b: Option<SystemTime>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => b.duration_since(a).map(|d| d.as_secs_f64()).unwrap_or(0.0),
        _ => 0.0,
    }
}

impl ScenarioLog {
    /// How the scenario ended. The runner's record decides (it knows skips
    /// and teardown); a scenario the run stopped under has none and counts
    /// as failed, as does one with a failed step or hook.
    pub fn outcome(&self, record: Option<&Record>) -> Outcome {
        match record {
            Some(r) => r.outcome,
            None if self.first_failure().is_some() || self.finished.is_none() => Outcome::Failed,
            None => Outcome::Passed,
        }
    }

    /// The first failure: a failed step (with its text) or a failed hook.
    pub fn first_failure(&self) -> Option<(String, String)> {
        self.steps
            .iter()
            .find_map(|s| match &s.status {
                StepStatus::Failed(e) => Some((format!("{} {}", s.keyword, s.text), e.clone())),
                _ => None,
            })
            .or_else(|| {
                self.hook_failure
                    .as_ref()
                    .map(|e| ("scenario setup or teardown".to_owned(), e.clone()))
            })
    }

    /// What failed the scenario: [`ScenarioLog::first_failure`], else a
    /// check that went on after it ended (its record says).
    pub fn failure(&self, record: Option<&Record>) -> Option<(String, String)> {
        self.first_failure().or_else(|| {
            record
                .and_then(|r| r.late_failure.as_ref())
                .map(|e| ("after the scenario ended".to_owned(), e.clone()))
        })
    }

    /// The scenario's title with its outline's example row, for where the
    /// title alone does not tell rows apart (see [`RunLog::titles`]).
    pub fn title_with_example(&self) -> String {
        if self.example.is_empty() {
            return self.id.name.clone();
        }
        let row: Vec<String> = self
            .example
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{} [{}]", self.id.name, row.join(", "))
    }

    /// Every step as one line: status, keyword, text, and the error of a
    /// failed one below it.
    pub fn step_log(&self) -> String {
        let mut out = String::new();
        for s in &self.steps {
            let mark = match &s.status {
                StepStatus::Running => "unfinished",
                StepStatus::Passed => "passed",
                StepStatus::Failed(_) => "FAILED",
                StepStatus::Skipped => "skipped",
            };
            let took = match (s.started, s.finished) {
                (Some(a), Some(b)) => b
                    .duration_since(a)
                    .map(|d| format!(" ({:.1} s)", d.as_secs_f64()))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            out.push_str(&format!("[{mark}] {} {}{took}\n", s.keyword, s.text));
            if let StepStatus::Failed(e) = &s.status {
                for l in e.lines() {
                    out.push_str(&format!("    {l}\n"));
                }
            }
        }
        if let Some(e) = &self.hook_failure {
            out.push_str(&format!("[FAILED] scenario setup or teardown\n    {e}\n"));
        }
        out
    }
}

/// All scenarios of a run in the order they started.
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    pub scenarios: Vec<ScenarioLog>,
    pub started: Option<SystemTime>,
    pub finished: Option<SystemTime>,
}

/// The (feature, title) pairs more than one scenario of the suite has, e.g.
/// an outline whose title does not name its example; reports add the example
/// row to those. Taken from every selected file, not only what ran, so a
/// shard's report names a row as the others do.
pub type SharedTitles = std::collections::BTreeSet<(String, String)>;

/// The titles `scenarios` share, for [`RunLog::titles`].
pub fn shared_titles<'a>(scenarios: impl Iterator<Item = (&'a str, &'a str)>) -> SharedTitles {
    let mut seen = std::collections::BTreeSet::new();
    let mut shared = SharedTitles::new();
    for (feature, name) in scenarios {
        let key = (feature.to_owned(), name.to_owned());
        if !seen.insert(key.clone()) {
            shared.insert(key);
        }
    }
    shared
}

impl RunLog {
    /// Each scenario's title as reports show it: its own, or with its
    /// example row where its title is shared (see [`SharedTitles`]).
    pub fn titles(&self, shared: &SharedTitles) -> Vec<String> {
        self.scenarios
            .iter()
            .map(|s| {
                if shared.contains(&(s.feature.clone(), s.id.name.clone())) {
                    s.title_with_example()
                } else {
                    s.id.name.clone()
                }
            })
            .collect()
    }
}

/// The cucumber writer that fills a [`RunLog`]; clone it to read the log.
#[derive(Debug, Clone, Default)]
pub struct Collector(Arc<Mutex<RunLog>>);

impl Collector {
    /// A collector that already holds `log` (for tests of what reads it).
    #[cfg(test)]
    pub fn with(log: RunLog) -> Self {
        Self(Arc::new(Mutex::new(log)))
    }

    pub fn snapshot(&self) -> RunLog {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl<W: cucumber::World> cucumber::Writer<W> for Collector {
    type Cli = cucumber::cli::Empty;

    async fn handle_event(&mut self, event: parser::Result<Event<Cucumber<W>>>, _: &Self::Cli) {
        // Parse errors end the run before any scenario; the runner reports them.
        let Ok(event) = event else { return };
        let (event, at) = (event.value, event.at);
        let Ok(mut log) = self.0.lock() else { return };
        match event {
            Cucumber::Started => {
                log.started = Some(at);
            }
            Cucumber::Finished => log.finished = Some(at),
            Cucumber::ParsingFinished { .. } => {}
            Cucumber::Feature(f, ev) => match ev {
                Feature::Scenario(sc, ev) => on_scenario(&mut log, &f, None, &sc, ev.event, at),
                Feature::Rule(r, Rule::Scenario(sc, ev)) => {
                    on_scenario(&mut log, &f, Some(&r), &sc, ev.event, at)
                }
                Feature::Started | Feature::Finished | Feature::Rule(..) => {}
            },
        }
    }
}

impl cucumber::writer::NonTransforming for Collector {}

// The log is kept per scenario, so it is the same whichever way the
// scenarios' events interleave: a collector may follow the events as they
// happen (for live progress) beside the normalised output.
impl cucumber::writer::Normalized for Collector {}

fn on_scenario<W>(
    log: &mut RunLog,
    feature: &gherkin::Feature,
    rule: Option<&gherkin::Rule>,
    scenario: &gherkin::Scenario,
    ev: Scenario<W>,
    at: SystemTime,
) {
    let id = ScenarioId::of(feature, scenario);
    if let Scenario::Started = ev {
        // A retry starts over.
        log.scenarios.retain(|s| s.id != id);
        log.scenarios.push(ScenarioLog {
            id: id.clone(),
            feature: feature.name.clone(),
            feature_path: feature.path.clone(),
            rule: rule.map(|r| r.name.clone()),
            example: example_row(scenario),
            tags: scenario.tags.clone(),
            started: Some(at),
            finished: None,
            steps: Vec::new(),
            hook_failure: None,
        });
        return;
    }
    let Some(s) = log.scenarios.iter_mut().rev().find(|s| s.id == id) else {
        return;
    };
    match ev {
        Scenario::Started | Scenario::Log(_) => {}
        Scenario::Finished => s.finished = Some(at),
        Scenario::Hook(kind, event::Hook::Failed(_, info)) => {
            let which = match kind {
                HookType::Before => "setting up the scenario",
                HookType::After => "tearing down the scenario",
            };
            s.hook_failure = Some(format!("{which}: {}", panic_text(&info)));
        }
        Scenario::Hook(..) => {}
        Scenario::Background(step, ev) => on_step(s, &step, true, ev, at),
        Scenario::Step(step, ev) => on_step(s, &step, false, ev, at),
    }
}

fn on_step<W>(
    s: &mut ScenarioLog,
    step: &gherkin::Step,
    background: bool,
    ev: Step<W>,
    at: SystemTime,
) {
    let status = match ev {
        Step::Started => {
            s.steps.push(StepLog {
                keyword: step.keyword.trim().to_owned(),
                text: step.value.clone(),
                background,
                status: StepStatus::Running,
                started: Some(at),
                finished: None,
            });
            return;
        }
        Step::Passed(..) => StepStatus::Passed,
        Step::Skipped => StepStatus::Skipped,
        Step::Failed(_, _, _, e) => StepStatus::Failed(match e {
            event::StepError::Panic(info) => panic_text(&info),
            other => other.to_string(),
        }),
    };
    match s
        .steps
        .iter_mut()
        .rev()
        .find(|l| l.text == step.value && l.status == StepStatus::Running)
    {
        Some(l) => {
            l.status = status;
            l.finished = Some(at);
        }
        // Skipped steps are never started.
        None => s.steps.push(StepLog {
            keyword: step.keyword.trim().to_owned(),
            text: step.value.clone(),
            background,
            status,
            started: None,
            finished: Some(at),
        }),
    }
}

/// The message of a step's panic or returned error.
fn panic_text(info: &event::Info) -> String {
    if let Some(s) = info.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = info.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        "the step panicked with a value that is not text".to_owned()
    }
}

/// The header/value pairs of an expanded outline's row (cucumber keeps the
/// header and that one row).
fn example_row(scenario: &gherkin::Scenario) -> Vec<(String, String)> {
    scenario
        .examples
        .first()
        .and_then(|e| e.table.as_ref())
        .and_then(|t| Some((t.rows.first()?, t.rows.get(1)?)))
        .map(|(h, v)| h.iter().cloned().zip(v.iter().cloned()).collect())
        .unwrap_or_default()
}
