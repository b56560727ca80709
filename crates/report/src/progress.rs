//! Live progress on a terminal: one status line (done/total, passed,
//! failed, running scenarios, elapsed) kept at the bottom while the
//! scenarios' output scrolls above it. The line lives on the process's
//! [`Terminal`](super::terminal), which scenario output and log lines both
//! go through; a ticker refreshes it every second. Off a terminal nothing of
//! this is used and the output is as before.
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use super::collect::{Collector, StepStatus};
use super::terminal::{Terminal, TerminalOut};
use super::{Outcomes, ScenarioId};

/// The scenario output's writer on a terminal (stdout underneath).
pub type StatusOut = TerminalOut;

/// The status line of a run: what it shows and the task that refreshes it.
pub struct Progress {
    terminal: Terminal,
    /// Whether the line still stands; the ticker checks it under the lock,
    /// so that no tick draws the line again after [`Progress::finish`].
    live: Arc<std::sync::Mutex<bool>>,
    ticker: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Starts the status line for `total` scenarios on the process's
    /// terminal; returns it and the writer the scenario output must go
    /// through.
    pub fn start(
        collector: Collector,
        outcomes: Arc<Outcomes>,
        total: usize,
    ) -> (Progress, StatusOut) {
        let terminal = super::terminal::process().clone();
        let started = Instant::now();
        let live = Arc::new(std::sync::Mutex::new(true));
        let ticker = {
            let terminal = terminal.clone();
            let live = live.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_secs(1));
                loop {
                    every.tick().await;
                    let late = outcomes.failed_late();
                    let line = status_line(&collector, &late, total, started.elapsed(), width());
                    // The guard stays held while the line is drawn.
                    if let Ok(l) = live.lock()
                        && *l
                    {
                        terminal.set_status(line);
                    }
                }
            })
        };
        let out = terminal.out();
        (
            Progress {
                terminal,
                live,
                ticker,
            },
            out,
        )
    }

    /// Takes the line away for good, before the run's closing lines.
    pub fn finish(self) {
        self.ticker.abort();
        if let Ok(mut live) = self.live.lock() {
            *live = false;
            self.terminal.clear_status();
        }
    }
}

/// The terminal's width in columns (80 when unknown).
fn width() -> usize {
    dra_e2e_sys::terminal_width().map_or(80, usize::from)
}

/// `[12/103] 11 passed, 1 failed · running: a, b · 1m23s`, cut to `width`.
/// Scenarios in `failed_late` count as failed even though their steps
/// passed: a wait after them failed.
pub fn status_line(
    collector: &Collector,
    failed_late: &BTreeSet<ScenarioId>,
    total: usize,
    elapsed: Duration,
    width: usize,
) -> String {
    let log = collector.snapshot();
    let mut passed = 0;
    let mut failed = 0;
    let mut skipped = 0;
    let mut running = Vec::new();
    for s in &log.scenarios {
        if s.finished.is_none() {
            running.push(s.id.name.as_str());
        } else if s.first_failure().is_some() || failed_late.contains(&s.id) {
            failed += 1;
        } else if s.steps.iter().any(|st| st.status == StepStatus::Skipped) {
            skipped += 1;
        } else {
            passed += 1;
        }
    }
    let done = passed + failed + skipped;
    let mut line = format!("[{done}/{total}] {passed} passed, {failed} failed");
    if skipped > 0 {
        line.push_str(&format!(", {skipped} skipped"));
    }
    let secs = elapsed.as_secs();
    let clock = format!(" · {}m{:02}s", secs / 60, secs % 60);
    if !running.is_empty() {
        line.push_str(&format!(
            " · running {}: {}",
            running.len(),
            running.join(", ")
        ));
    }
    let room = width.saturating_sub(clock.chars().count() + 1);
    if line.chars().count() > room {
        line = line
            .chars()
            .take(room.saturating_sub(1))
            .collect::<String>()
            + "…";
    }
    line + &clock
}

#[cfg(test)]
mod tests {
    use super::super::collect::{RunLog, ScenarioLog};
    use super::*;

    #[test]
    fn the_line_fits_the_terminal_and_keeps_the_clock() {
        let c = Collector::default();
        let none = BTreeSet::new();
        let line = status_line(&c, &none, 103, Duration::from_secs(83), 40);
        assert_eq!(line, "[0/103] 0 passed, 0 failed · 1m23s");
        let narrow = status_line(&c, &none, 103, Duration::from_secs(83), 20);
        assert!(narrow.ends_with("… · 1m23s"), "{narrow}");
        assert!(narrow.chars().count() <= 20, "{narrow}");
    }

    #[test]
    fn a_scenario_that_failed_after_it_ended_counts_as_failed() {
        let id = |name: &str| ScenarioId {
            path: "f.feature".into(),
            line: 1,
            name: name.into(),
        };
        let ended = |name: &str| ScenarioLog {
            id: id(name),
            feature: "f".into(),
            feature_path: None,
            rule: None,
            example: Vec::new(),
            tags: Vec::new(),
            started: Some(std::time::SystemTime::UNIX_EPOCH),
            finished: Some(std::time::SystemTime::UNIX_EPOCH),
            steps: Vec::new(),
            hook_failure: None,
        };
        let c = Collector::with(RunLog {
            scenarios: vec![ended("a"), ended("b")],
            ..Default::default()
        });
        let late = BTreeSet::from([id("b")]);
        let line = status_line(&c, &late, 2, Duration::from_secs(1), 80);
        assert!(line.starts_with("[2/2] 1 passed, 1 failed"), "{line}");
    }
}
