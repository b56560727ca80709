//! The JUnit XML report, shaped for what CI tools group and show by: one
//! `testsuite` per feature carrying the run's properties, test cases named
//! by the scenario's title with the feature as `classname`, failures whose
//! `message` is the first failing step and its error and whose body is the
//! whole step log, skipped cases with their reason.
//!
//! The document is built and written by `quick-junit`; two things are ours:
//! the suites' `timestamp` (quick-junit writes RFC 3339 with a zone and
//! milliseconds, the JUnit schema CI tools read wants ISO 8601 without a
//! zone, so it goes in as a plain attribute), and line breaks inside
//! attribute values, written as character references (see
//! [`finish_escaping`]).
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::collect::{RunLog, ScenarioLog, SharedTitles, seconds};
use super::{Outcome, Record, ScenarioId};

/// Renders the report. `properties` describe the run (cluster, version,
/// gates, nodes) and go on every suite, where the schema puts them.
pub fn render(
    log: &RunLog,
    shared: &SharedTitles,
    records: &BTreeMap<ScenarioId, Record>,
    properties: &[(String, String)],
) -> Result<String, quick_junit::SerializeError> {
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
    let mut report = Report::new("dra-e2e");
    report.set_time(duration(seconds(log.started, log.finished)));
    for (i, (feature, list)) in features.iter().enumerate() {
        let started = list.iter().filter_map(|(s, _)| s.started).min();
        let finished = list.iter().filter_map(|(s, _)| s.finished).max();
        let path = list
            .first()
            .and_then(|(s, _)| s.feature_path.as_ref())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut suite = TestSuite::new(*feature);
        suite.set_time(duration(seconds(started, finished)));
        for (k, v) in [
            ("id", i.to_string()),
            ("package", (*feature).to_owned()),
            (
                "timestamp",
                timestamp(started.unwrap_or(SystemTime::UNIX_EPOCH)),
            ),
            ("hostname", hostname.clone()),
            ("file", path),
        ] {
            suite.extra.insert(k.into(), v.into());
        }
        suite.add_properties(properties.iter().map(|(k, v)| Property::new(k, v)));
        suite.add_test_cases(
            list.iter()
                .map(|(s, title)| case(s, title, records.get(&s.id))),
        );
        report.add_test_suite(suite);
    }
    Ok(finish_escaping(&report.to_string()?))
}

/// Seconds as the report's times take them (0 for anything odd).
fn duration(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds).unwrap_or_default()
}

/// One test case as the report shows it.
fn case(s: &ScenarioLog, title: &str, record: Option<&Record>) -> TestCase {
    let unfinished = s.finished.is_none();
    let failure = s.failure(record);
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
    let status = match s.outcome(record) {
        Outcome::Passed => TestCaseStatus::success(),
        Outcome::Skipped => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(
                record
                    .and_then(|r| r.skip_reason.as_deref())
                    .unwrap_or("skipped"),
            );
            status
        }
        Outcome::Failed => {
            let (message, kind) = match failure {
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
            };
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(message)
                .set_type(kind)
                .set_description(body.as_str());
            status
        }
    };
    // The scenario's own time, as ginkgo's spec times are: what it waited
    // for other scenarios (a slot, its nodes) is said in its output instead.
    let queued = record.map(Record::queued).unwrap_or_default();
    if !queued.is_zero() {
        let _ = writeln!(
            body,
            "waited {:.1}s for other scenarios before it started (not in its time)",
            queued.as_secs_f64()
        );
    }
    let mut case = TestCase::new(title, status);
    case.set_classname(s.feature.as_str())
        .set_time(duration(seconds(s.started, s.finished)).saturating_sub(queued))
        .set_system_out(body);
    case
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

/// What quick-junit leaves to us, on its serialised output:
///
/// - Line breaks and tabs inside attribute values become character
///   references. quick-xml escapes only markup characters in attributes, and
///   an XML reader turns a raw line break or tab in an attribute value into a
///   space (XML 1.0, 3.3.3): a failure `message` spanning lines would reach
///   Jenkins or GitLab as one line.
/// - Quotes in text are written as they are: quick-xml escapes them there
///   too, where XML needs no escape, and a reader that drops entity
///   references in text (junit-parser 1.7 does) would lose them from every
///   step log (`pod "a" is running`).
/// - The two non-characters XML 1.0 cannot hold go (quick-junit drops
///   control characters and ANSI escapes itself).
///
/// Inside a tag (between `<` and `>`) a line break can only be part of an
/// attribute value: quick-xml separates attributes with spaces and escapes
/// `<` and `>` in every value and text, so those two characters alone tell
/// tags from text.
fn finish_escaping(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut in_tag = false;
    let mut rest = xml;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            '\n' if in_tag => {
                out.push_str("&#10;");
                continue;
            }
            '\r' if in_tag => {
                out.push_str("&#13;");
                continue;
            }
            '\t' if in_tag => {
                out.push_str("&#9;");
                continue;
            }
            '&' if !in_tag => {
                if let Some(after) = rest.strip_prefix("quot;") {
                    out.push('"');
                    rest = after;
                    continue;
                }
                if let Some(after) = rest.strip_prefix("apos;") {
                    out.push('\'');
                    rest = after;
                    continue;
                }
            }
            '\u{FFFE}' | '\u{FFFF}' => continue,
            _ => {}
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::{StepLog, StepStatus};

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

    fn parse(xml: &str) -> junit_parser::TestSuites {
        junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes()))
            .unwrap_or_else(|e| panic!("{e}\n{xml}"))
    }

    /// A run of two features: a passed, a failed (its error over two lines,
    /// with markup characters and an ANSI colour) and a skipped scenario in
    /// one, a passed one in the other.
    fn run() -> (RunLog, BTreeMap<ScenarioId, Record>) {
        let passed = scenario(
            "passes",
            3,
            vec![step("pod \"a\" is running", StepStatus::Passed)],
        );
        let failed = scenario(
            "retries <prepare>",
            7,
            vec![
                step("pod \"a\" is created", StepStatus::Passed),
                step(
                    "pod \"a\" is running",
                    StepStatus::Failed("timed out\n<pending> & \u{1b}[31mred\u{1b}[0m".into()),
                ),
                step("never", StepStatus::Skipped),
            ],
        );
        let skipped = scenario(
            "needs more nodes",
            12,
            vec![step("skipped: too few nodes", StepStatus::Skipped)],
        );
        let mut other = scenario(
            "registers",
            4,
            vec![step("it registers", StepStatus::Passed)],
        );
        other.feature = "registration".into();
        other.feature_path = Some("features/b.feature".into());
        other.id.path = "features/b.feature".into();
        let mut records = BTreeMap::new();
        records.insert(passed.id.clone(), record(Outcome::Passed, None));
        records.insert(failed.id.clone(), record(Outcome::Failed, None));
        records.insert(
            skipped.id.clone(),
            record(Outcome::Skipped, Some("needs 5 nodes, the cluster has 1")),
        );
        records.insert(other.id.clone(), record(Outcome::Passed, None));
        let log = RunLog {
            scenarios: vec![passed, failed, skipped, other],
            ..Default::default()
        };
        (log, records)
    }

    fn properties() -> Vec<(String, String)> {
        vec![
            ("cluster".into(), "local \"1 node\"".into()),
            ("nodes.ready".into(), "1".into()),
        ]
    }

    /// The report reads back with a JUnit parser as what happened.
    #[test]
    fn a_report_reads_back_as_the_run() {
        let (log, records) = run();
        let xml = render(&log, &SharedTitles::new(), &records, &properties()).unwrap();
        let suites = parse(&xml);
        assert_eq!(suites.name, "dra-e2e");
        assert_eq!(
            (suites.tests, suites.failures, suites.skipped, suites.errors),
            (4, 1, 1, 0),
            "{xml}"
        );
        let names: Vec<&str> = suites.suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["kubelet", "registration"], "{xml}");
        let suite = &suites.suites[0];
        assert_eq!(
            (suite.tests, suite.failures, suite.skipped, suite.errors),
            (3, 1, 1, 0),
            "{xml}"
        );
        assert_eq!(suite.time, 1.5, "{xml}");
        assert_eq!(suite.timestamp.as_deref(), Some("2027-01-15T08:00:00"));
        assert_eq!(suite.package.as_deref(), Some("kubelet"));
        assert_eq!(suite.file.as_deref(), Some("features/a.feature"));
        assert_eq!(suite.id.as_deref(), Some("0"));
        assert!(suite.hostname.as_deref().is_some_and(|h| !h.is_empty()));
        assert_eq!(suites.suites[1].id.as_deref(), Some("1"));
        for s in &suites.suites {
            assert_eq!(
                s.properties.hashmap.get("cluster").map(String::as_str),
                Some("local \"1 node\""),
                "{xml}"
            );
            assert_eq!(s.properties.hashmap["nodes.ready"], "1");
        }
        let case = |name: &str| {
            suite
                .cases
                .iter()
                .find(|c| c.original_name == name)
                .unwrap_or_else(|| panic!("no case {name:?}\n{xml}"))
        };
        for c in &suite.cases {
            assert_eq!(c.classname.as_deref(), Some("kubelet"));
            assert_eq!(c.time, 1.5);
        }

        let passed = case("passes");
        assert!(passed.status.is_success());
        assert_eq!(
            passed.system_out.as_deref(),
            Some(
                "features/a.feature:3\n@DynamicResourceAllocation\n\
                 [passed] Then pod \"a\" is running\n"
            ),
            "{xml}"
        );

        let junit_parser::TestStatus::Failure(f) = &case("retries <prepare>").status else {
            panic!("not failed\n{xml}");
        };
        assert_eq!(f.failure_type, "StepFailed");
        assert_eq!(
            f.message,
            "Then pod \"a\" is running: timed out\n<pending> & red (artifacts: art/x)"
        );
        // junit-parser drops entity references from text (`<pending> &`)
        // and trims each piece around them: the rest is the step log.
        assert!(f.text.starts_with("features/a.feature:7\n"), "{}", f.text);
        assert!(
            f.text
                .contains("[passed] Then pod \"a\" is created\n[FAILED] Then pod \"a\" is running"),
            "{}",
            f.text
        );
        assert!(f.text.ends_with("artifacts: art/x"), "{}", f.text);
        let out = case("retries <prepare>").system_out.clone().unwrap();
        assert!(out.starts_with("features/a.feature:7\n"), "{out}");
        assert!(
            out.ends_with("[skipped] Then never\nartifacts: art/x\n"),
            "{out}"
        );
        // As written: the log's own characters, escaped only where XML must.
        assert!(
            xml.contains(
                "[FAILED] Then pod \"a\" is running\n    timed out\n    &lt;pending&gt; &amp; red\n"
            ),
            "{xml}"
        );

        let junit_parser::TestStatus::Skipped(skip) = &case("needs more nodes").status else {
            panic!("not skipped\n{xml}");
        };
        assert_eq!(skip.message, "needs 5 nodes, the cluster has 1");

        let other = &suites.suites[1].cases[0];
        assert_eq!(other.classname.as_deref(), Some("registration"));
        assert!(other.status.is_success());
    }

    /// Valid against the schema CI tools read (`xmllint`, as the runner's
    /// own end-to-end test checks a real run's report), and a line break in
    /// a failure message survives an XML reader that normalises attribute
    /// values, as xmllint's does. Needs xmllint (`make test-tools`), so
    /// `make test` runs it and the fast tier counts it as left out.
    #[cfg(feature = "cluster-tests")]
    #[test]
    fn a_report_is_valid_against_the_schema_ci_tools_read() {
        use std::path::Path;
        use std::process::Command;
        let (log, records) = run();
        let xml = render(&log, &SharedTitles::new(), &records, &properties()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        std::fs::write(&path, &xml).unwrap();
        let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/schemas/junit.xsd");
        let xmllint = |args: &[&str]| {
            Command::new("xmllint")
                .args(args)
                .arg(&path)
                .output()
                .expect("xmllint (Debian's libxml2-utils; `make test-tools`) runs")
        };
        let lint = xmllint(&["--noout", "--schema", schema.to_str().unwrap()]);
        assert!(
            lint.status.success(),
            "{}\n{xml}",
            String::from_utf8_lossy(&lint.stderr)
        );
        let message = xmllint(&["--xpath", "string(//failure/@message)"]);
        assert_eq!(
            String::from_utf8_lossy(&message.stdout).strip_suffix('\n'),
            Some("Then pod \"a\" is running: timed out\n<pending> & red (artifacts: art/x)")
        );
        assert!(
            xml.contains("timed out&#10;&lt;pending&gt; &amp; red"),
            "{xml}"
        );
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
        let shared = crate::collect::shared_titles(
            log.scenarios
                .iter()
                .map(|s| (s.feature.as_str(), s.id.name.as_str())),
        );
        let xml = render(&log, &shared, &records, &[]).unwrap();
        let suites = parse(&xml);
        let cases = &suites.suites[0].cases;
        let names: Vec<&str> = cases.iter().map(|c| c.original_name.as_str()).collect();
        // A title of its own needs no example.
        assert_eq!(names, ["runs [api=v1beta1]", "runs [api=v1]", "alone"]);
        let junit_parser::TestStatus::Skipped(skip) = &cases[0].status else {
            panic!("not skipped\n{xml}");
        };
        assert_eq!(skip.message, "needs 5 nodes");
        assert!(
            xml.contains("<skipped message=\"needs 5 nodes\"/>"),
            "{xml}"
        );
        assert!(!xml.contains("<failure"), "{xml}");
        // No properties, no empty element for them.
        assert!(!xml.contains("<properties"), "{xml}");
    }

    #[test]
    fn interrupted_and_teardown_failures_say_so() {
        let mut stopped = scenario("stopped", 3, vec![step("waits", StepStatus::Running)]);
        stopped.finished = None;
        let torn = scenario("torn", 5, vec![step("fine", StepStatus::Passed)]);
        let mut records = BTreeMap::new();
        records.insert(torn.id.clone(), Record::new(Outcome::Failed));
        let log = RunLog {
            scenarios: vec![stopped, torn],
            ..Default::default()
        };
        let xml = render(&log, &SharedTitles::new(), &records, &[]).unwrap();
        let suites = parse(&xml);
        let failure = |i: usize| match &suites.suites[0].cases[i].status {
            junit_parser::TestStatus::Failure(f) => (f.failure_type.clone(), f.message.clone()),
            other => panic!("{other:?}\n{xml}"),
        };
        assert_eq!(
            failure(0),
            (
                "Interrupted".to_owned(),
                "the scenario did not finish: the run was stopped".to_owned()
            )
        );
        assert_eq!(failure(1).0, "TeardownFailed");
        assert_eq!(suites.suites[0].cases[0].time, 0.0);
    }

    /// A case's time is the scenario's own, as a ginkgo spec's is: the
    /// wait for a slot is said in its output, not counted.
    #[test]
    fn a_cases_time_leaves_out_its_wait_for_other_scenarios() {
        let queued = scenario("queued", 3, vec![step("fine", StepStatus::Passed)]);
        let mut record = Record::new(Outcome::Passed);
        record.setup = vec![
            (
                crate::Phase::queue("wait for a free slot"),
                Duration::from_millis(1000),
            ),
            (
                crate::Phase::harness("start plugins"),
                Duration::from_millis(200),
            ),
        ];
        let mut records = BTreeMap::new();
        records.insert(queued.id.clone(), record);
        let log = RunLog {
            scenarios: vec![queued],
            ..Default::default()
        };
        let xml = render(&log, &SharedTitles::new(), &records, &[]).unwrap();
        let case = &parse(&xml).suites[0].cases[0];
        assert_eq!(case.time, 0.5, "{xml}");
        assert!(
            case.system_out.as_deref().is_some_and(|o| o
                .contains("waited 1.0s for other scenarios before it started (not in its time)")),
            "{xml}"
        );
    }

    #[test]
    fn line_breaks_in_attributes_become_references_and_quotes_in_text_stay() {
        assert_eq!(
            finish_escaping("<a m=\"x\ny\tz\r&quot;\">l1\nl2\t\u{FFFF}</a>\n"),
            "<a m=\"x&#10;y&#9;z&#13;&quot;\">l1\nl2\t</a>\n"
        );
        assert_eq!(
            finish_escaping("<a>&quot;q&quot; &apos;&amp;quot;&lt;é</a>"),
            "<a>\"q\" '&amp;quot;&lt;é</a>"
        );
    }
}
