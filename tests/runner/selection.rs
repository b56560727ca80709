//! What a run selects: a tag expression or a run of skips that would test
//! nothing fails unless allowed, and shards split the selection so that
//! their reports together name every scenario once.
use crate::common::runs::Ran;
use crate::common::*;

/// A kubeconfig that points nowhere: a run reaching for the cluster fails
/// on it, so a test passing with it shows the run stopped before.
const NO_CLUSTER: [&str; 4] = ["--cluster", "kubeconfig", "--kubeconfig", "/nonexistent"];

#[test]
fn a_tag_expression_selecting_nothing_fails_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    let none = "@DynamicResourceAllocation and not @DynamicResourceAllocation";
    let ran = Ran::of(
        isolated(home.path())
            .args(NO_CLUSTER)
            .args(["--tags", none]),
    );
    ran.exits(1)
        .says(&format!(
            "error: no scenario to run: --tags '{none}' selects none of the"
        ))
        .says("--allow-empty");
    let t = &ran.text;
    assert!(!t.contains("kubeconfig"), "reached for the cluster\n{t}");
    Ran::of(isolated(home.path()).args(["--list", "--tags", none])).exits(1);
    // An empty shard may be fine for a CI matrix; no cluster is needed then.
    Ran::of(
        isolated(home.path())
            .args(NO_CLUSTER)
            .args(["--tags", none, "--allow-empty"]),
    )
    .exits(0)
    .says("0 passed, 0 failed");
}

#[test]
fn a_run_where_every_scenario_was_skipped_fails_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    Ran::of(local_run(home.path(), "all-skipped", &[]))
        .exits(1)
        .says("0 passed, 0 failed, 1 skipped")
        .says("no scenario ran: all 1 selected scenarios were skipped")
        .left_nothing(home.path());
    Ran::of(local_run(home.path(), "all-skipped", &["--allow-empty"]))
        .exits(0)
        .left_nothing(home.path());
}

/// `--shard I/N` for I in 1..=N splits the selection: every scenario of the
/// suite is listed by exactly one shard.
#[test]
fn shards_partition_the_selection() {
    let home = tempfile::tempdir().unwrap();
    let listed = |extra: &[&str]| -> Vec<String> {
        let o = isolated(home.path())
            .args(["--list", "--tags", "@DynamicResourceAllocation"])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines()
            .filter(|l| l.contains(".feature:"))
            .map(str::to_owned)
            .collect()
    };
    let all = listed(&[]);
    let mut union: Vec<String> = (1..=3)
        .flat_map(|i| listed(&["--shard", &format!("{i}/3")]))
        .collect();
    assert!(!all.is_empty());
    union.sort();
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(
        union, expected,
        "the shards together list each scenario once"
    );
}

/// The JUnit reports of N shard runs together name every scenario exactly
/// once (outline rows included).
#[test]
fn shard_reports_together_name_every_scenario_once() {
    let mut names = Vec::new();
    for i in 1..=3 {
        let home = tempfile::tempdir().unwrap();
        let junit = home.path().join("junit.xml");
        let ran = Ran::of(local_run(
            home.path(),
            "shards",
            &[
                "--shard",
                &format!("{i}/3"),
                "--allow-empty",
                "--junit",
                junit.to_str().unwrap(),
            ],
        ));
        ran.exits(0);
        let xml = std::fs::read_to_string(&junit).unwrap_or_default();
        let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes())).unwrap();
        names.extend(
            suites
                .suites
                .iter()
                .flat_map(|s| &s.cases)
                .map(|c| c.original_name.clone()),
        );
        ran.left_nothing(home.path());
    }
    names.sort();
    let mut expected: Vec<String> = ["first", "second", "third", "fourth"]
        .iter()
        .map(|s| s.to_string())
        .chain((5..=8).map(|n| format!("by row [n={n}]")))
        .collect();
    expected.sort();
    assert_eq!(names, expected);
}
