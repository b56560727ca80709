//! Live progress on a terminal: one status line (done/total, passed,
//! failed, running scenarios, elapsed) kept at the bottom while the
//! scenarios' output scrolls above it. The scenario writer writes through
//! [`StatusOut`], which lifts the line off before each write and puts it back
//! after each finished line; a ticker refreshes it every second. Off a
//! terminal nothing of this is used and the output is as before.
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use super::collect::{Collector, StepStatus};
use super::{Outcomes, ScenarioId};

/// Clears the terminal line the cursor is on.
const CLEAR_LINE: &str = "\r\x1b[2K";

struct Screen {
    out: io::Stdout,
    /// The status line is drawn where the cursor is.
    shown: bool,
    /// The last write ended a line, so the cursor is at a line's start.
    at_line_start: bool,
    status: String,
    done: bool,
}

impl Screen {
    fn lift(&mut self) -> io::Result<()> {
        if self.shown {
            self.out.write_all(CLEAR_LINE.as_bytes())?;
            self.shown = false;
        }
        Ok(())
    }

    fn draw(&mut self) -> io::Result<()> {
        if !self.done && self.at_line_start && !self.status.is_empty() {
            self.lift()?;
            self.out.write_all(self.status.as_bytes())?;
            self.shown = true;
        }
        self.out.flush()
    }
}

/// The scenario output's writer on a terminal (stdout underneath).
#[derive(Clone)]
pub struct StatusOut(Arc<Mutex<Screen>>);

impl Write for StatusOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self
            .0
            .lock()
            .map_err(|_| io::Error::other("status line poisoned"))?;
        s.lift()?;
        s.out.write_all(buf)?;
        if !buf.is_empty() {
            s.at_line_start = buf.ends_with(b"\n");
        }
        s.draw()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.0.lock() {
            Ok(mut s) => s.out.flush(),
            Err(_) => Ok(()),
        }
    }
}

/// The status line of a run: what it shows and the task that refreshes it.
pub struct Progress {
    screen: Arc<Mutex<Screen>>,
    ticker: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Starts the status line for `total` scenarios; returns it and the
    /// writer the scenario output must go through.
    pub fn start(
        collector: Collector,
        outcomes: &'static Outcomes,
        total: usize,
    ) -> (Progress, StatusOut) {
        let screen = Arc::new(Mutex::new(Screen {
            out: io::stdout(),
            shown: false,
            at_line_start: true,
            status: String::new(),
            done: false,
        }));
        let started = Instant::now();
        let ticker = {
            let screen = screen.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_secs(1));
                loop {
                    every.tick().await;
                    let late = outcomes.failed_late();
                    let line = status_line(&collector, &late, total, started.elapsed(), width());
                    if let Ok(mut s) = screen.lock() {
                        s.status = line;
                        let _ = s.draw();
                    }
                }
            })
        };
        (
            Progress {
                screen: screen.clone(),
                ticker,
            },
            StatusOut(screen),
        )
    }

    /// Takes the line away for good, before the run's closing lines.
    pub fn finish(self) {
        self.ticker.abort();
        if let Ok(mut s) = self.screen.lock() {
            let _ = s.lift();
            s.done = true;
            let _ = s.out.flush();
        }
    }
}

/// The terminal's width in columns (80 when unknown).
fn width() -> usize {
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; a failed call leaves
    // it zeroed.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        80
    }
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
