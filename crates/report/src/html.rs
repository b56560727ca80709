//! The HTML report (`--html FILE`): one self-contained page (no network, no
//! external assets) with the run's summary and properties, a timeline of the
//! scenarios over time in concurrency lanes (setup, steps and teardown
//! coloured apart, so it shows where the wall time went), and per scenario
//! its steps, its failure and links to its artifacts.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use super::collect::{RunLog, ScenarioLog, SharedTitles, StepStatus, seconds};
use super::conformance::Summary;
use super::{Outcome, Record, ScenarioId};

/// Renders the report that will be written to `dest` (artifact links are
/// relative to its directory).
pub fn render(
    log: &RunLog,
    shared: &SharedTitles,
    records: &BTreeMap<ScenarioId, Record>,
    properties: &[(String, String)],
    conformance: Option<(&str, &Summary)>,
    dest: &Path,
) -> String {
    let scenarios: Vec<View> = log
        .scenarios
        .iter()
        .zip(log.titles(shared))
        .enumerate()
        .map(|(i, (s, title))| View::of(i, s, title, records.get(&s.id)))
        .collect();
    let count = |o: Outcome| scenarios.iter().filter(|v| v.outcome == o).count();
    let origin = log
        .started
        .or_else(|| log.scenarios.iter().filter_map(|s| s.started).min());
    let end = log
        .finished
        .or_else(|| log.scenarios.iter().filter_map(|s| s.finished).max());
    let wall = seconds(origin, end);

    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<title>dra-e2e report</title>\n<style>\n");
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n<h1>dra-e2e report</h1>\n");
    let _ = writeln!(
        out,
        "<p class=\"summary\" id=\"summary\"><span class=\"passed\">{} passed</span>, \
         <span class=\"failed\">{} failed</span>, <span class=\"skipped\">{} skipped</span> \
         in {:.1} s</p>",
        count(Outcome::Passed),
        count(Outcome::Failed),
        count(Outcome::Skipped),
        wall
    );
    out.push_str("<table class=\"props\">\n");
    for (k, v) in properties {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    out.push_str("</table>\n");
    if let Some((driver, summary)) = conformance {
        conformance_section(&mut out, driver, summary);
    }

    timeline(&mut out, &scenarios, origin, wall);

    out.push_str("<h2>Scenarios</h2>\n");
    // Failures first: they are what a reader opens the report for.
    let mut order: Vec<&View> = scenarios.iter().collect();
    order.sort_by_key(|v| match v.outcome {
        Outcome::Failed => 0,
        Outcome::Passed => 1,
        Outcome::Skipped => 2,
    });
    for v in order {
        v.details(&mut out, dest);
    }
    out.push_str(CHECK_SCRIPT);
    out.push_str("</body>\n</html>\n");
    out
}

/// The conformance pack's outcome, behaviour by behaviour: what did not pass
/// first, skipped ones with their reason.
fn conformance_section(out: &mut String, driver: &str, s: &Summary) {
    let n = s.passed.len() + s.skipped.len() + s.failed.len();
    let _ = writeln!(
        out,
        "<h2 id=\"conformance\">Driver conformance of {}</h2>\n<p class=\"summary\">{n} \
         behaviour{}: {}</p>\n<ul class=\"conformance\">",
        esc(driver),
        if n == 1 { "" } else { "s" },
        esc(&s.counts())
    );
    for f in &s.failed {
        let _ = writeln!(out, "<li class=\"failed\">failed: {}</li>", esc(f));
    }
    for (name, why) in &s.skipped {
        let _ = writeln!(
            out,
            "<li class=\"skipped\">skipped: {} ({})</li>",
            esc(name),
            esc(why)
        );
    }
    for p in &s.passed {
        let _ = writeln!(out, "<li class=\"passed\">passed: {}</li>", esc(p));
    }
    for what in &s.unchecked {
        let _ = writeln!(out, "<li class=\"skipped\">not checked: {}</li>", esc(what));
    }
    out.push_str("</ul>\n");
}

/// One scenario as the page shows it.
struct View<'a> {
    index: usize,
    title: String,
    log: &'a ScenarioLog,
    record: Option<&'a Record>,
    outcome: Outcome,
}

impl<'a> View<'a> {
    fn of(index: usize, log: &'a ScenarioLog, title: String, record: Option<&'a Record>) -> Self {
        let outcome = log.outcome(record);
        View {
            index,
            title,
            log,
            record,
            outcome,
        }
    }

    fn class(&self) -> &'static str {
        match self.outcome {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }

    /// Setup (until the first step starts), steps, teardown (after the last
    /// step), as moments.
    fn phases(&self) -> Option<[SystemTime; 4]> {
        let start = self.log.started?;
        let end = self.log.finished.unwrap_or(start);
        let first = self
            .log
            .steps
            .iter()
            .filter_map(|s| s.started)
            .min()
            .unwrap_or(start);
        let last = self
            .log
            .steps
            .iter()
            .filter_map(|s| s.finished)
            .max()
            .unwrap_or(first);
        Some([start, first.max(start), last.max(first).min(end), end])
    }

    fn details(&self, out: &mut String, dest: &Path) {
        let s = self.log;
        let _ = writeln!(
            out,
            "<details class=\"scenario {}\" id=\"s{}\"{}>",
            self.class(),
            self.index,
            if self.outcome == Outcome::Failed {
                " open"
            } else {
                ""
            }
        );
        let _ = writeln!(
            out,
            "<summary><span class=\"badge {}\">{}</span> {} <span class=\"where\">{} — {}:{} — {:.1} s</span></summary>",
            self.class(),
            self.class(),
            esc(&self.title),
            esc(&s.feature),
            esc(&s.id.path),
            s.id.line,
            seconds(s.started, s.finished)
        );
        if !s.tags.is_empty() {
            let tags: Vec<String> = s.tags.iter().map(|t| format!("@{}", esc(t))).collect();
            let _ = writeln!(out, "<p class=\"tags\">{}</p>", tags.join(" "));
        }
        if let Some(reason) = self.record.and_then(|r| r.skip_reason.as_ref()) {
            let _ = writeln!(out, "<p class=\"reason\">skipped: {}</p>", esc(reason));
        }
        if let Some((step, error)) = s.failure(self.record) {
            let _ = writeln!(
                out,
                "<div class=\"failure\"><p>{}</p><pre>{}</pre></div>",
                esc(&step),
                esc(&error)
            );
        }
        out.push_str("<ol class=\"steps\">\n");
        for st in &s.steps {
            let (class, mark) = match &st.status {
                StepStatus::Passed => ("passed", "✔"),
                StepStatus::Failed(_) => ("failed", "✘"),
                StepStatus::Skipped => ("skipped", "–"),
                StepStatus::Running => ("failed", "…"),
            };
            let took = match (st.started, st.finished) {
                (Some(a), Some(b)) => format!(
                    " <span class=\"took\">{:.1} s</span>",
                    seconds(Some(a), Some(b))
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "<li class=\"{class}\">{mark} <b>{}</b> {}{took}</li>",
                esc(&st.keyword),
                esc(&st.text)
            );
        }
        out.push_str("</ol>\n");
        if let Some(r) = self.record {
            for (part, timings) in [
                ("setup", &r.setup),
                ("teardown", &r.teardown),
                ("after the scenario", &r.after),
            ] {
                if timings.is_empty() {
                    continue;
                }
                let phases: Vec<String> = timings
                    .iter()
                    .map(|(p, d)| format!("{} {:.2} s", esc(p.name), d.as_secs_f64()))
                    .collect();
                let _ = writeln!(
                    out,
                    "<p class=\"teardown\">{part}: {}</p>",
                    phases.join(", ")
                );
            }
        }
        if let Some(dir) = self.record.and_then(|r| r.artifacts.as_ref()) {
            artifacts(out, dir, dest);
        }
        out.push_str("</details>\n");
    }
}

/// Links to every file of a failed scenario's artifacts directory.
fn artifacts(out: &mut String, dir: &Path, dest: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let _ = write!(
        out,
        "<p class=\"artifacts\">artifacts ({}):",
        esc(&dir.display().to_string())
    );
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = write!(
            out,
            " <a href=\"{}\">{}</a>",
            esc(&link(&f, dest)),
            esc(&name)
        );
    }
    out.push_str("</p>\n");
}

/// The timeline: one lane per scenario running at the same time.
fn timeline(out: &mut String, scenarios: &[View], origin: Option<SystemTime>, wall: f64) {
    const WIDTH: f64 = 1000.0;
    const LANE: f64 = 18.0;
    let scale = if wall > 0.0 { WIDTH / wall } else { 0.0 };
    let x = |t: SystemTime| {
        origin
            .map(|o| seconds(Some(o), Some(t)) * scale)
            .unwrap_or(0.0)
    };
    // A scenario takes the first lane free when it starts.
    let mut timed: Vec<(&View, [SystemTime; 4])> = scenarios
        .iter()
        .filter(|v| v.outcome != Outcome::Skipped)
        .filter_map(|v| Some((v, v.phases()?)))
        .collect();
    timed.sort_by_key(|(_, p)| p[0]);
    let mut lanes: Vec<SystemTime> = Vec::new();
    let mut bars = String::new();
    for (v, p) in &timed {
        let lane = match lanes.iter().position(|free| *free <= p[0]) {
            Some(l) => l,
            None => {
                lanes.push(p[0]);
                lanes.len() - 1
            }
        };
        lanes[lane] = p[3];
        let y = lane as f64 * LANE;
        let tip = format!(
            "{} ({}): setup {:.1} s, steps {:.1} s, teardown {:.1} s",
            v.title,
            v.class(),
            seconds(Some(p[0]), Some(p[1])),
            seconds(Some(p[1]), Some(p[2])),
            seconds(Some(p[2]), Some(p[3]))
        );
        let _ = write!(
            bars,
            "<a href=\"#s{}\" class=\"bar {}\"><title>{}</title>",
            v.index,
            v.class(),
            esc(&tip)
        );
        for (i, phase) in ["setup", "steps", "teardown"].iter().enumerate() {
            let (a, b) = (x(p[i]), x(p[i + 1]));
            let _ = write!(
                bars,
                "<rect class=\"{phase}\" x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                y + 2.0,
                (b - a).max(0.5),
                LANE - 4.0
            );
        }
        bars.push_str("</a>\n");
    }
    let height = (lanes.len().max(1) as f64) * LANE;
    let _ = writeln!(
        out,
        "<h2>Timeline</h2>\n<p class=\"legend\"><span class=\"key setup\"></span> setup \
         <span class=\"key steps\"></span> steps <span class=\"key teardown\"></span> teardown; \
         {} lanes, {:.1} s; a bar's outline is its outcome</p>",
        lanes.len(),
        wall
    );
    let _ = writeln!(
        out,
        "<svg id=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" width=\"100%\" preserveAspectRatio=\"none\" style=\"height:{height}px\">\n{bars}</svg>"
    );
}

/// A link from the report's directory to `target`: relative when both are
/// under one root, so a CI artifact bundle keeps working when moved.
fn link(target: &Path, dest: &Path) -> String {
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_owned()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        }
    };
    let target = abs(target);
    let from = abs(dest.parent().unwrap_or(Path::new(".")));
    let t: Vec<Component> = target.components().collect();
    let f: Vec<Component> = from.components().collect();
    let common = t.iter().zip(&f).take_while(|(a, b)| a == b).count();
    if common <= 1 {
        return format!("file://{}", target.display());
    }
    let mut rel = PathBuf::new();
    for _ in common..f.len() {
        rel.push("..");
    }
    for c in &t[common..] {
        rel.push(c);
    }
    rel.display().to_string()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = r#"body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { margin: 0 0 .3em; } h2 { margin-top: 1.5em; }
.summary { font-size: 1.2em; } .passed { color: #1a7f37; } .failed { color: #c62828; } .skipped { color: #777; }
table.props { border-collapse: collapse; font-size: .9em; }
table.props th { text-align: left; padding: 1px 1em 1px 0; color: #555; font-weight: normal; }
table.props td { word-break: break-all; }
#timeline { display: block; background: #f6f8fa; border: 1px solid #ddd; }
rect.setup, .key.setup { fill: #9ecbff; background: #9ecbff; }
rect.steps, .key.steps { fill: #2f81f7; background: #2f81f7; }
rect.teardown, .key.teardown { fill: #d4a72c; background: #d4a72c; }
a.bar.failed rect { stroke: #c62828; stroke-width: 1.5; }
.key { display: inline-block; width: 1em; height: .8em; vertical-align: middle; }
details.scenario { border: 1px solid #ddd; border-radius: 4px; margin: .3em 0; padding: .2em .6em; }
details.scenario.failed { border-color: #c62828; }
summary { cursor: pointer; } .where, .took, .tags, .teardown { color: #777; font-size: .9em; }
.badge { display: inline-block; min-width: 4.5em; text-align: center; border-radius: 3px; color: #fff; font-size: .8em; }
.badge.passed { background: #1a7f37; } .badge.failed { background: #c62828; } .badge.skipped { background: #999; }
.failure pre { background: #fff0f0; padding: .5em; white-space: pre-wrap; }
ol.steps { margin: .3em 0; padding-left: 1.5em; } ol.steps li.failed { color: #c62828; } ol.steps li.skipped { color: #777; }
"#;

/// Marks the page once the browser has laid it out, with what it shows, so
/// a test (or a reader's devtools) can tell it rendered: the timeline's drawn
/// width and the scenarios that take up space.
const CHECK_SCRIPT: &str = r##"<script>
window.addEventListener("load", function () {
  var t = document.getElementById("timeline").getBoundingClientRect();
  var shown = Array.prototype.filter.call(document.querySelectorAll("details.scenario"),
    function (d) { return d.getBoundingClientRect().height > 0; }).length;
  var bars = document.querySelectorAll("#timeline a.bar").length;
  document.body.setAttribute("data-rendered", "timeline-width=" + Math.round(t.width) +
    " bars=" + bars + " scenarios-shown=" + shown);
});
</script>
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_under_one_root() {
        assert_eq!(
            link(
                Path::new("/w/target/art/x/events.txt"),
                Path::new("/w/target/report.html")
            ),
            "art/x/events.txt"
        );
        assert_eq!(
            link(Path::new("/w/a/f.txt"), Path::new("/w/b/c/r.html")),
            "../../a/f.txt"
        );
        assert_eq!(
            link(Path::new("/a/f.txt"), Path::new("/b/r.html")),
            "file:///a/f.txt"
        );
    }
}
