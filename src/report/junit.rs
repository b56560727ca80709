//! The JUnit XML report, shaped for what CI tools group and show by: one
//! `testsuite` per feature carrying the run's properties, test cases named
//! by the scenario's title with the feature as `classname`, failures whose
//! `message` is the first failing step and its error and whose body is the
//! whole step log, skipped cases with their reason.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::SystemTime;

use super::collect::{RunLog, ScenarioLog, SharedTitles, seconds};
use super::{Outcome, Record, ScenarioId};

/// Renders the report. `properties` describe the run (cluster, version,
/// gates, nodes) and go on every suite, where the schema puts them.
pub fn render(
    log: &RunLog,
    shared: &SharedTitles,
    records: &BTreeMap<ScenarioId, Record>,
    properties: &[(String, String)],
) -> String {
    let hostname = hostname();
    // Features in the order their first scenario started.
    let titles = log.titles(shared);
    let mut features: Vec<(&str, Vec<(&ScenarioLog, &str)>)> = Vec::new();
    for (s, title) in log.scenarios.iter().zip(&titles) {
        match features.iter_mut().find(|(f, _)| *f == s.feature) {
            Some((_, list)) => list.push((s, title)),
            None => features.push((&s.feature, vec![(s, title)])),
        }
    }
    let cases: Vec<Vec<Case>> = features
        .iter()
        .map(|(_, list)| {
            list.iter()
                .map(|(s, title)| Case::of(s, title, records.get(&s.id)))
                .collect()
        })
        .collect();
    let count = |f: &dyn Fn(&Case) -> bool| cases.iter().flatten().filter(|c| f(c)).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"dra-e2e\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
        count(&|_| true),
        count(&|c| c.outcome == Outcome::Failed),
        count(&|c| c.outcome == Outcome::Skipped),
        seconds(log.started, log.finished),
    );
    for (i, ((feature, list), cases)) in features.iter().zip(&cases).enumerate() {
        let failures = cases
            .iter()
            .filter(|c| c.outcome == Outcome::Failed)
            .count();
        let skipped = cases
            .iter()
            .filter(|c| c.outcome == Outcome::Skipped)
            .count();
        let started = list.iter().filter_map(|(s, _)| s.started).min();
        let finished = list.iter().filter_map(|(s, _)| s.finished).max();
        let path = list
            .first()
            .and_then(|(s, _)| s.feature_path.as_ref())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  <testsuite id=\"{i}\" name=\"{}\" package=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{:.3}\" timestamp=\"{}\" hostname=\"{}\" file=\"{}\">",
            attr(feature),
            attr(feature),
            cases.len(),
            seconds(started, finished),
            timestamp(started.unwrap_or(SystemTime::UNIX_EPOCH)),
            attr(&hostname),
            attr(&path),
        );
        out.push_str("    <properties>\n");
        for (k, v) in properties {
            let _ = writeln!(
                out,
                "      <property name=\"{}\" value=\"{}\"/>",
                attr(k),
                attr(v)
            );
        }
        out.push_str("    </properties>\n");
        for c in cases {
            c.write(&mut out);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// One test case as the report shows it.
struct Case {
    name: String,
    classname: String,
    time: f64,
    outcome: Outcome,
    /// Failure: `(message, type)`; skipped: `(reason, "")`.
    verdict: Option<(String, &'static str)>,
    body: String,
}

impl Case {
    fn of(s: &ScenarioLog, title: &str, record: Option<&Record>) -> Case {
        let unfinished = s.finished.is_none();
        let failure = s.failure(record);
        let outcome = s.outcome(record);
        let location = format!("{}:{}", s.id.path, s.id.line);
        let mut body = format!("{location}\n");
        if let Some(r) = &s.rule {
            let _ = writeln!(body, "Rule: {r}");
        }
        if !s.tags.is_empty() {
            let tags: Vec<String> = s.tags.iter().map(|t| format!("@{t}")).collect();
            let _ = writeln!(body, "{}", tags.join(" "));
        }
        body.push_str(&s.step_log());
        if let Some(e) = record.and_then(|r| r.late_failure.as_ref()) {
            let _ = writeln!(body, "[FAILED] after the scenario ended\n    {e}");
        }
        let artifacts = record.and_then(|r| r.artifacts.as_ref());
        if let Some(dir) = artifacts {
            let _ = writeln!(body, "artifacts: {}", dir.display());
        }
        let verdict = match outcome {
            Outcome::Passed => None,
            Outcome::Skipped => Some((
                record
                    .and_then(|r| r.skip_reason.clone())
                    .unwrap_or_else(|| "skipped".to_owned()),
                "",
            )),
            Outcome::Failed => Some(match failure {
                Some((step, error)) => {
                    let kind = if step.starts_with("scenario setup") {
                        "HookFailed"
                    } else if s.first_failure().is_none() {
                        "AfterScenarioFailed"
                    } else {
                        "StepFailed"
                    };
                    let mut message = format!("{step}: {error}");
                    if let Some(dir) = artifacts {
                        let _ = write!(message, " (artifacts: {})", dir.display());
                    }
                    (message, kind)
                }
                None if unfinished => (
                    "the scenario did not finish: the run was stopped".to_owned(),
                    "Interrupted",
                ),
                // Steps passed, the teardown failed.
                None => (
                    "the scenario's teardown failed; see the run's output".to_owned(),
                    "TeardownFailed",
                ),
            }),
        };
        Case {
            name: title.to_owned(),
            classname: s.feature.clone(),
            time: seconds(s.started, s.finished),
            outcome,
            verdict,
            body,
        }
    }

    fn write(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">",
            attr(&self.name),
            attr(&self.classname),
            self.time
        );
        match (&self.outcome, &self.verdict) {
            (Outcome::Failed, Some((message, kind))) => {
                let _ = writeln!(
                    out,
                    "      <failure message=\"{}\" type=\"{kind}\">{}</failure>",
                    attr(message),
                    text(&self.body)
                );
            }
            (Outcome::Skipped, Some((reason, _))) => {
                let _ = writeln!(out, "      <skipped message=\"{}\"/>", attr(reason));
            }
            _ => {}
        }
        let _ = writeln!(out, "      <system-out>{}</system-out>", text(&self.body));
        out.push_str("    </testcase>\n");
    }
}

/// ISO 8601 without a zone, as the JUnit schema's `timestamp` wants (UTC).
fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .trim_end_matches('Z')
        .to_owned()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Where escaped text goes: attribute values keep line breaks as
/// references; element content keeps them as they are.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Attribute,
    Content,
}

/// Text escaped for `place`, with characters XML 1.0 cannot hold (ANSI
/// escapes among them) dropped.
fn escape(s: &str, place: Place) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if place == Place::Attribute => out.push_str("&quot;"),
            '\n' if place == Place::Attribute => out.push_str("&#10;"),
            '\t' if place == Place::Attribute => out.push_str("&#9;"),
            '\n' | '\t' => out.push(c),
            c if allowed(c) => out.push(c),
            _ => {}
        }
    }
    out
}

fn attr(s: &str) -> String {
    escape(s, Place::Attribute)
}

fn text(s: &str) -> String {
    escape(s, Place::Content)
}

/// Characters XML 1.0 allows (besides tab and line breaks).
fn allowed(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::collect::{StepLog, StepStatus};
    use std::time::Duration;

    fn scenario(name: &str, line: usize, steps: Vec<StepLog>) -> ScenarioLog {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        ScenarioLog {
            id: ScenarioId {
                path: "features/a.feature".into(),
                line,
                name: name.into(),
            },
            feature: "kubelet".into(),
            feature_path: Some("features/a.feature".into()),
            rule: None,
            example: vec![],
            tags: vec!["DynamicResourceAllocation".into()],
            started: Some(t0),
            finished: Some(t0 + Duration::from_millis(1500)),
            steps,
            hook_failure: None,
        }
    }

    fn step(text: &str, status: StepStatus) -> StepLog {
        StepLog {
            keyword: "Then".into(),
            text: text.into(),
            background: false,
            status,
            started: None,
            finished: None,
        }
    }

    fn record(outcome: Outcome, skip: Option<&str>) -> Record {
        Record {
            skip_reason: skip.map(str::to_owned),
            artifacts: (outcome == Outcome::Failed).then(|| "art/x".into()),
            ..Record::new(outcome)
        }
    }

    #[test]
    fn failures_name_the_first_failing_step_and_its_error() {
        let s = scenario(
            "retries <prepare>",
            7,
            vec![
                step("pod \"a\" is created", StepStatus::Passed),
                step(
                    "pod \"a\" is running",
                    StepStatus::Failed("timed out\n<pending>".into()),
                ),
                step("never", StepStatus::Skipped),
            ],
        );
        let mut records = BTreeMap::new();
        records.insert(s.id.clone(), record(Outcome::Failed, None));
        let log = RunLog {
            scenarios: vec![s],
            ..Default::default()
        };
        let xml = render(
            &log,
            &SharedTitles::new(),
            &records,
            &[("cluster".into(), "local".into())],
        );
        assert!(
            xml.contains("name=\"retries &lt;prepare&gt;\" classname=\"kubelet\" time=\"1.500\""),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"Then pod &quot;a&quot; is running: timed out&#10;&lt;pending&gt; (artifacts: art/x)\" type=\"StepFailed\">"),
            "{xml}"
        );
        assert!(xml.contains("[FAILED] Then pod \"a\" is running"), "{xml}");
        assert!(
            xml.contains("<property name=\"cluster\" value=\"local\"/>"),
            "{xml}"
        );
        assert!(xml.contains("tests=\"1\" failures=\"1\""), "{xml}");
    }

    #[test]
    fn skipped_cases_carry_the_reason_and_outlines_their_example() {
        let mut s = scenario(
            "runs",
            9,
            vec![step("skipped: too few nodes", StepStatus::Skipped)],
        );
        s.example = vec![("api".into(), "v1beta1".into())];
        let mut other = s.clone();
        other.id.line = 10;
        other.example = vec![("api".into(), "v1".into())];
        let mut single = s.clone();
        single.id.name = "alone".into();
        let mut records = BTreeMap::new();
        records.insert(
            s.id.clone(),
            record(Outcome::Skipped, Some("needs 5 nodes")),
        );
        let log = RunLog {
            scenarios: vec![s, other, single],
            ..Default::default()
        };
        let shared = crate::report::collect::shared_titles(
            log.scenarios
                .iter()
                .map(|s| (s.feature.as_str(), s.id.name.as_str())),
        );
        let xml = render(&log, &shared, &records, &[]);
        assert!(
            xml.contains("<testcase name=\"runs [api=v1beta1]\""),
            "{xml}"
        );
        assert!(xml.contains("<testcase name=\"runs [api=v1]\""), "{xml}");
        // A title of its own needs no example.
        assert!(xml.contains("<testcase name=\"alone\""), "{xml}");
        assert!(
            xml.contains("<skipped message=\"needs 5 nodes\"/>"),
            "{xml}"
        );
        assert!(!xml.contains("<failure"), "{xml}");
    }

    #[test]
    fn text_xml_cannot_hold_is_dropped() {
        assert_eq!(attr("a\u{1b}[31mb\"c"), "a[31mb&quot;c");
        assert_eq!(text("x<y\n\u{0}"), "x&lt;y\n");
    }
}
