//! The table of upstream's tests in docs/upstream-tests.md: it is what
//! `dra-e2e upstream` prints for the suite's features, and the command finds
//! every way the data file and the features can disagree. No cluster is
//! involved.
use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{bin, fixtures};

/// `dra-e2e upstream ARGS` run in `dir`.
fn upstream(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .arg("upstream")
        .args(args)
        .output()
        .expect("the runner binary starts")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_docs_table_is_what_the_features_and_the_data_file_give() {
    let o = upstream(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &["--check", "docs/upstream-tests.md"],
    );
    assert!(
        o.status.success(),
        "docs/upstream-tests.md's table is stale or inconsistent (run `make upstream-table`):\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn every_upstream_test_of_the_catalogue_has_a_row() {
    // Upstream's test/e2e/dra holds 153 tests: dra.go 130, health.go 3,
    // compatibility_groups.go 2, dra_node_allocatable_resources.go 18. Its
    // node suite, test/e2e_node/dra_test.go at v1.37.2, 45 specs: Resource
    // Kubelet Plugin 20 (13 Its, 3 tables of 2 entries, 1 It), Two resource
    // Kubelet Plugins 6, ResourceSlice 7 (3 Its, 2 tables of 2), Resource
    // Health with the gate 7, and without it 1 + 1 + a table of 3.
    let data = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/upstream-tests.tsv"),
    )
    .expect("docs/upstream-tests.tsv is readable");
    let mut per_source = std::collections::BTreeMap::new();
    for line in data.lines().filter(|l| l.starts_with("upstream\t")) {
        let source = line.split('\t').nth(1).unwrap_or_default();
        *per_source.entry(source.to_owned()).or_insert(0) += 1;
    }
    let expected: std::collections::BTreeMap<String, i32> = [
        ("dra.go", 130),
        ("health.go", 3),
        ("compatibility_groups.go", 2),
        ("dra_node_allocatable_resources.go", 18),
        ("e2e_node/dra_test.go", 45),
    ]
    .into_iter()
    .map(|(s, n)| (s.to_owned(), n))
    .collect();
    assert_eq!(per_source, expected);
}

#[test]
fn scenarios_map_by_title_rule_qualifier_and_example_row() {
    let dir = fixtures("upstream-table/good");
    let o = upstream(&dir, &["--data", "../upstream-tests.tsv"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    for row in [
        // A title upstream uses once.
        "| kubelet [Feature:DynamicResourceAllocation] | registers plugin | [features/kubelet.feature:3](features/kubelet.feature#L3) |",
        // One title in two contexts, told apart by the scenarios' Rules.
        "| control plane | supports init containers | [features/kubelet.feature:7](features/kubelet.feature#L7) |",
        "| kubelet [Feature:DynamicResourceAllocation] on single node | supports init containers | [features/kubelet.feature:11](features/kubelet.feature#L11) |",
        // Outline rows, each mapped to its own test at its row's line.
        "| kubelet [Feature:DynamicResourceAllocation] with multiple drivers using only drapbv1 [KubeletMinVersion:1.34] | work | [features/multiple_drivers.feature:9](features/multiple_drivers.feature#L9) |",
        "| kubelet [Feature:DynamicResourceAllocation] with multiple drivers using drapbv1beta1 and drapbv1 | work | [features/multiple_drivers.feature:13](features/multiple_drivers.feature#L13) |",
        // A qualifier in parentheses, and the default key when none is named.
        "with a driver which serves all health API versions | must reflect device health changes in the pod status | [features/device_health.feature:3](features/device_health.feature#L3) |",
        "with a driver which only serves the v1 health API | must reflect device health changes in the pod status [KubeletMinVersion:1.37] | [features/device_health.feature:7](features/device_health.feature#L7) |",
        // A longer key wins over one it contains (v1alpha1+v1beta1 over v1beta1).
        "| metadata [Feature:DynamicResourceAllocation] v1alpha1+v1beta1 | must mount device metadata for resource claims | not ported: needs the driver to write device metadata files |",
        // The suite's own scenario.
        "| [features/crud.feature:6](features/crud.feature#L6) an extra check of our own | shows an own scenario in the table |",
    ] {
        assert!(out.contains(row), "missing row\n  {row}\nin\n{out}");
    }
    assert!(
        out.contains(
            "Of upstream's 10 tests in `test/e2e/dra/`, 8 are ported and 2 are not, each for the \
             reason given (8 scenarios port them)"
        ),
        "{out}"
    );
}

#[test]
fn every_disagreement_between_data_and_features_is_named() {
    let dir = fixtures("upstream-table/broken");
    let o = upstream(&dir, &["--data", "../upstream-tests.tsv"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(stdout(&o).is_empty(), "no table is printed: {}", stdout(&o));
    for expected in [
        // An upstream test with neither a scenario nor a reason.
        "../upstream-tests.tsv:4: upstream test `[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] registers plugin` has no scenario (no scenario has its title) and no reason it is not ported",
        // A reason given for a test a scenario ports.
        "../upstream-tests.tsv:7: upstream test `[sig-node] [DRA] metadata [Feature:DynamicResourceAllocation] v1beta1 must mount device metadata for resource claims` is ported by features/kubelet.feature:9, yet its row gives a reason it is not ported: delete the reason (`dra-e2e upstream --drop-ported-reasons` does)",
        // A scenario claiming an upstream title that does not exist.
        "features/kubelet.feature:3: scenario `registers plugins` ports no upstream test by its title",
        // Upstream's title, but no context of it named.
        "features/kubelet.feature:6: scenario `supports init containers` has the title of an upstream test, but not of one test: upstream has 2 tests of that title",
        // Upstream's gates and kubelet versions missing from the tags.
        "features/kubelet.feature:12: scenario `must reflect device health changes in the pod status (v1 health API)` ports upstream's `[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:ResourceHealthStatus] [KubeletMinVersion:1.36] with a driver which only serves the v1 health API must reflect device health changes in the pod status [KubeletMinVersion:1.37]` but lacks its tag(s) @DynamicResourceAllocation @FeatureGate:ResourceHealthStatus @KubeletMinVersion:1.36 @KubeletMinVersion:1.37",
        // An own row whose scenario is gone.
        "../upstream-tests.tsv:13: no scenario `an extra check of our own` in features/crud.feature",
        "13 problem(s) mapping upstream's tests",
    ] {
        assert!(err.contains(expected), "missing\n  {expected}\nin\n{err}");
    }
}

/// Copies the fixture features of `good` and the data file into a temp
/// dir, as a repository has them, with the stale document in its `docs/`.
fn repository_with_a_stale_table() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let features = tmp.path().join("features");
    std::fs::create_dir_all(&features).expect("features dir");
    for entry in std::fs::read_dir(fixtures("upstream-table/good/features")).expect("fixtures") {
        let entry = entry.expect("fixture entry");
        std::fs::copy(entry.path(), features.join(entry.file_name())).expect("copy feature");
    }
    std::fs::copy(
        fixtures("upstream-table/upstream-tests.tsv"),
        tmp.path().join("upstream-tests.tsv"),
    )
    .expect("copy data");
    std::fs::create_dir_all(tmp.path().join("docs")).expect("docs dir");
    std::fs::copy(
        fixtures("upstream-table/stale.md"),
        tmp.path().join("docs/stale.md"),
    )
    .expect("copy the stale document");
    tmp
}

#[test]
fn check_fails_on_a_stale_table_and_write_replaces_only_the_table() {
    let tmp = repository_with_a_stale_table();
    let dir = tmp.path();
    let data = ["--data", "upstream-tests.tsv"];

    let o = upstream(dir, &[&data[..], &["--check", "docs/stale.md"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("docs/stale.md: the upstream table is not what the feature files and upstream-tests.tsv give; run `make upstream-table`"),
        "{}",
        stderr(&o)
    );

    let o = upstream(dir, &[&data[..], &["--write", "docs/stale.md"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let written = std::fs::read_to_string(dir.join("docs/stale.md")).expect("read the document");
    // The printed table links from the current directory; written into
    // docs/, its links lead back from there.
    let printed = stdout(&upstream(dir, &data));
    assert!(
        printed.contains("[features/kubelet.feature:3](features/kubelet.feature#L3)"),
        "{printed}"
    );
    let table = printed.replace("](features/", "](../features/");
    assert_eq!(
        written,
        format!(
            "# A document with a stale table\n\nText before the table stays.\n\n{table}\nText after the table stays.\n"
        )
    );
    assert!(
        written.contains("[features/kubelet.feature:3](../features/kubelet.feature#L3)"),
        "{written}"
    );

    let o = upstream(dir, &[&data[..], &["--check", "docs/stale.md"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_document_without_markers_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let doc = tmp.path().join("upstream-tests.md");
    std::fs::write(&doc, "# no table here\n").expect("write the document");
    let o = upstream(
        &fixtures("upstream-table/good"),
        &[
            "--data",
            "../upstream-tests.tsv",
            "--write",
            doc.to_str().expect("utf-8 temp path"),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no generated section: put a line `<!-- upstream-table:begin -->`"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&doc).expect("read the document"),
        "# no table here\n"
    );
}

#[test]
fn reasons_of_tests_now_ported_can_be_dropped() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("upstream-tests.tsv");
    std::fs::copy(fixtures("upstream-table/upstream-tests.tsv"), &data).expect("copy data");
    let before = std::fs::read_to_string(&data).expect("read data");
    let o = upstream(
        &fixtures("upstream-table/broken"),
        &[
            "--data",
            data.to_str().expect("utf-8 temp path"),
            "--drop-ported-reasons",
        ],
    );
    let err = stderr(&o);
    assert!(
        err.contains("emptied the reason of 1 test(s) a scenario now ports"),
        "{err}"
    );
    // The other disagreements are still there.
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("yet its row gives a reason"), "{err}");
    let after = std::fs::read_to_string(&data).expect("read data");
    let changed: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines())
        .filter(|(b, a)| b != a)
        .collect();
    assert_eq!(
        changed,
        [(
            "upstream\tdra.go\tmetadata [Feature:DynamicResourceAllocation] v1beta1\tmust mount device metadata for resource claims\t\tv1beta1\tneeds the driver to write device metadata files",
            "upstream\tdra.go\tmetadata [Feature:DynamicResourceAllocation] v1beta1\tmust mount device metadata for resource claims\t\tv1beta1\t"
        )]
    );
    assert_eq!(before.lines().count(), after.lines().count());
}

/// Rows of a tab-separated data file, its `#` comments left out.
fn rows(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// What is wrong with the fidelity record against the ported tests
/// (CONTEXT, TITLE): a ported test without a row, a row of no ported test,
/// an unknown verdict, a `differs` that names no difference.
fn fidelity_mistakes(ported: &[(String, String)], fidelity: &[Vec<String>]) -> Vec<String> {
    let mut out = Vec::new();
    for (context, title) in ported {
        if !fidelity
            .iter()
            .any(|r| r.len() >= 2 && r[0] == *context && r[1] == *title)
        {
            out.push(format!("no fidelity row for {context} / {title}"));
        }
    }
    for r in fidelity {
        let key = (r[0].clone(), r.get(1).cloned().unwrap_or_default());
        if !ported.contains(&key) {
            out.push(format!("a fidelity row for no ported test: {r:?}"));
        }
        match r.get(3).map(String::as_str) {
            Some("same") | Some("not-compared") => {}
            Some("differs") if r.get(4).is_some_and(|d| !d.trim().is_empty()) => {}
            Some("differs") => out.push(format!("`differs` without the differences: {r:?}")),
            other => out.push(format!(
                "verdict {other:?} is not same, differs or not-compared: {r:?}"
            )),
        }
    }
    out
}

/// Where a SCENARIO location of the fidelity record no longer points at
/// its scenario: a `Scenario` line with the title, or an Examples row of an
/// outline with it (locations move when feature files change).
fn moved_locations(root: &Path, fidelity: &[Vec<String>]) -> Vec<String> {
    let mut out = Vec::new();
    for r in fidelity {
        let (title, locations) = (&r[1], r.get(2).cloned().unwrap_or_default());
        for location in locations.split(", ") {
            let Some((file, line)) = location.split_once(':') else {
                out.push(format!("{location}: not file:line"));
                continue;
            };
            let lines: Vec<String> = std::fs::read_to_string(root.join(file))
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect();
            let n: usize = line.parse().unwrap_or(0);
            let Some(text) = n.checked_sub(1).and_then(|i| lines.get(i)) else {
                out.push(format!("{location}: no such line (for {title})"));
                continue;
            };
            let is_title = |l: &str| {
                let l = l.trim_start();
                (l.starts_with("Scenario:") || l.starts_with("Scenario Outline:"))
                    && l.contains(title.as_str())
            };
            // An outline's title has placeholders: the text before the
            // first one must begin the test's title.
            let is_outline_of = |l: &str| {
                l.trim_start()
                    .strip_prefix("Scenario Outline:")
                    .and_then(|t| t.split('<').next())
                    .is_some_and(|fixed| title.starts_with(fixed.trim()))
            };
            let points_at = if text.trim_start().starts_with('|') {
                lines[..n - 1]
                    .iter()
                    .rev()
                    .find(|l| l.trim_start().starts_with("Scenario"))
                    .is_some_and(|l| is_title(l) || is_outline_of(l))
            } else {
                is_title(text)
            };
            if !points_at {
                out.push(format!(
                    "{location} is not scenario {title:?}: {}",
                    text.trim()
                ));
            }
        }
    }
    out
}

#[test]
fn every_ported_test_has_its_comparison_with_upstream() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ported: Vec<(String, String)> = rows(&root.join("docs/upstream-tests.tsv"))
        .into_iter()
        .filter(|r| r[0] == "upstream" && r.get(6).is_none_or(|reason| reason.is_empty()))
        .map(|r| (r[2].clone(), r[3].clone()))
        .collect();
    assert_eq!(ported.len(), 178, "ported upstream tests");
    let fidelity = rows(&root.join("docs/upstream-fidelity.tsv"));
    let mistakes = fidelity_mistakes(&ported, &fidelity);
    assert!(mistakes.is_empty(), "{mistakes:#?}");
    let moved = moved_locations(root, &fidelity);
    assert!(moved.is_empty(), "the record's locations moved: {moved:#?}");

    // Each mistake is caught: a row dropped, a verdict misspelt, a bare `differs`.
    let mut broken = fidelity.clone();
    broken.remove(0);
    broken[0][3] = "same-ish".into();
    broken[1][3] = "differs".into();
    broken[1].truncate(4);
    let mistakes = fidelity_mistakes(&ported, &broken);
    assert_eq!(mistakes.len(), 3, "{mistakes:#?}");
    // A location one line off is caught.
    let mut moved = fidelity[..1].to_vec();
    let (file, line) = moved[0][2].split_once(':').unwrap();
    moved[0][2] = format!("{file}:{}", line.parse::<usize>().unwrap() + 1);
    assert_eq!(moved_locations(root, &moved).len(), 1, "{moved:?}");
}
