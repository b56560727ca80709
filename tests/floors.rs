//! The floors of the workspace (docs/development.md): every crate depends
//! only on crates of lower floors, read from the manifests Cargo builds
//! from. Cargo already refuses cycles; this refuses an edge that points
//! sideways or up, such as the simulated kubelet reaching for the plugin
//! servers it must only meet through sockets.
use std::collections::BTreeMap;
use std::path::Path;

/// Each crate's floor; the ground is 1, the operating system's calls 0.
const FLOORS: &[(&str, u8)] = &[
    ("dra-e2e-sys", 0),
    ("dra-e2e-proto", 1),
    ("dra-e2e-conn", 1),
    ("dra-e2e-kube", 1),
    ("dra-e2e-profile", 1),
    ("dra-e2e-agent", 1),
    ("dra-e2e-plugin", 2),
    ("dra-e2e-node-sim", 2),
    ("dra-e2e-cluster", 3),
    ("dra-e2e-harness", 4),
    ("dra-e2e", 5),
];

/// The workspace's crates and the workspace crates each depends on (normal
/// dependencies: what its code can reach).
fn edges(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut manifests = vec![root.join("Cargo.toml")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        manifests.push(entry.path().join("Cargo.toml"));
    }
    manifests
        .iter()
        .map(|m| {
            let text =
                std::fs::read_to_string(m).unwrap_or_else(|e| panic!("{}: {e}", m.display()));
            let doc: toml::Table = text
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", m.display()));
            let name = doc["package"]["name"].as_str().unwrap().to_owned();
            let deps = doc
                .get("dependencies")
                .and_then(|d| d.as_table())
                .map(|d| {
                    d.keys()
                        .filter(|k| k.starts_with("dra-e2e"))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            (name, deps)
        })
        .collect()
}

/// Edges that do not point to a lower floor, and crates without a floor.
fn wrong_edges(edges: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let floor = |c: &str| FLOORS.iter().find(|(n, _)| *n == c).map(|(_, f)| *f);
    let mut out = Vec::new();
    for (name, deps) in edges {
        let Some(own) = floor(name) else {
            out.push(format!("{name} has no floor in tests/floors.rs"));
            continue;
        };
        for dep in deps {
            match floor(dep) {
                Some(f) if f < own => {}
                Some(f) => out.push(format!("{name} (floor {own}) depends on {dep} (floor {f})")),
                None => out.push(format!("{dep} has no floor in tests/floors.rs")),
            }
        }
    }
    out
}

#[test]
fn every_dependency_points_down() {
    let edges = edges(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(edges.len(), FLOORS.len(), "crates: {:?}", edges.keys());
    let wrong = wrong_edges(&edges);
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The simulated kubelet meets plugins only through their sockets.
    assert!(
        !edges["dra-e2e-node-sim"]
            .iter()
            .any(|d| d == "dra-e2e-plugin")
    );
}

#[test]
fn a_sideways_or_upward_edge_is_named() {
    let mut edges = BTreeMap::new();
    edges.insert(
        "dra-e2e-node-sim".to_owned(),
        vec!["dra-e2e-plugin".to_owned()],
    );
    edges.insert(
        "dra-e2e-conn".to_owned(),
        vec!["dra-e2e-harness".to_owned()],
    );
    edges.insert("dra-e2e-new".to_owned(), vec![]);
    assert_eq!(
        wrong_edges(&edges),
        [
            "dra-e2e-conn (floor 1) depends on dra-e2e-harness (floor 4)",
            "dra-e2e-new has no floor in tests/floors.rs",
            "dra-e2e-node-sim (floor 2) depends on dra-e2e-plugin (floor 2)",
        ]
    );
}

/// Whether `manifest` gives its tests tokio's paused clock (`test-util`),
/// in its dependencies or dev-dependencies.
fn has_test_util(manifest: &toml::Table) -> bool {
    ["dependencies", "dev-dependencies"].iter().any(|section| {
        manifest
            .get(*section)
            .and_then(|d| d.get("tokio"))
            .and_then(|t| t.get("features"))
            .and_then(|f| f.as_array())
            .is_some_and(|f| f.iter().any(|v| v.as_str() == Some("test-util")))
    })
}

/// Whether Rust code below `dir` stops tokio's clock.
fn uses_paused_clock(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            uses_paused_clock(&p)
        } else {
            p.extension().is_some_and(|x| x == "rs")
                && std::fs::read_to_string(&p).is_ok_and(|t| {
                    ["start_paused", "time::pause(", "time::advance("]
                        .iter()
                        .any(|n| t.contains(n))
                })
        }
    })
}

/// `cargo test -p <crate>` builds each crate with its own features; inside
/// the workspace another crate's `test-util` would hide a missing one until
/// someone tests the crate alone.
#[test]
fn a_crate_whose_tests_pause_the_clock_asks_for_it_itself() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let dir = entry.path();
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        if uses_paused_clock(&dir.join("src")) && !has_test_util(&manifest) {
            missing.push(dir.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "these crates' tests pause tokio's clock without `tokio = {{ features = [\"test-util\"] }}` in their dev-dependencies: {missing:?}"
    );
    // What the check reads: a manifest without it is caught.
    let without: toml::Table = "[dev-dependencies]\ntokio.workspace = true\n"
        .parse()
        .unwrap();
    assert!(!has_test_util(&without));
    let with: toml::Table =
        "[dev-dependencies]\ntokio = { workspace = true, features = [\"test-util\"] }\n"
            .parse()
            .unwrap();
    assert!(has_test_util(&with));
    assert!(uses_paused_clock(&root.join("crates/kube/src")));
}

/// What is wrong with the lints of the crate `name` whose manifest is
/// `manifest`, given the workspace's `[workspace.lints]`: every crate but
/// `dra-e2e-sys` inherits them (`[lints] workspace = true`), and
/// `dra-e2e-sys`, where the workspace's `unsafe` lives, has a table of its
/// own that is the workspace's but allows `unsafe_code`.
fn lint_problems(name: &str, manifest: &toml::Table, workspace: &toml::Table) -> Vec<String> {
    let lints = manifest.get("lints").and_then(|l| l.as_table());
    let inherits = lints
        .and_then(|l| l.get("workspace"))
        .and_then(|w| w.as_bool())
        == Some(true);
    if name != "dra-e2e-sys" {
        return match inherits {
            true => vec![],
            false => vec![format!(
                "{name} does not inherit the workspace's lints ([lints] workspace = true)"
            )],
        };
    }
    let Some(own) = lints.filter(|_| !inherits) else {
        return vec![format!(
            "{name} must have its own [lints] table allowing unsafe_code"
        )];
    };
    // The workspace's lints with `unsafe_code` allowed.
    let mut expected = workspace.clone();
    expected
        .entry("rust")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .unwrap()
        .insert("unsafe_code".into(), "allow".into());
    match *own == expected {
        true => vec![],
        false => vec![format!(
            "{name}'s lints {own:?} are not the workspace's with unsafe_code allowed: {expected:?}"
        )],
    }
}

/// `unsafe` only in crates/sys (docs/development.md): the workspace forbids
/// it, and every crate's manifest, the runner's package with its tests
/// included, takes that lint but crates/sys.
#[test]
fn unsafe_code_is_forbidden_outside_crates_sys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &Path| -> toml::Table {
        std::fs::read_to_string(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let top = read(&root.join("Cargo.toml"));
    let workspace = top["workspace"]["lints"].as_table().unwrap().clone();
    assert_eq!(
        workspace["rust"]["unsafe_code"].as_str(),
        Some("forbid"),
        "{workspace:?}"
    );
    let mut manifests = vec![root.join("Cargo.toml")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        manifests.push(entry.path().join("Cargo.toml"));
    }
    let mut problems = Vec::new();
    for m in &manifests {
        let manifest = read(m);
        let name = manifest["package"]["name"].as_str().unwrap().to_owned();
        problems.extend(lint_problems(&name, &manifest, &workspace));
    }
    assert_eq!(manifests.len(), FLOORS.len());
    assert!(problems.is_empty(), "{problems:#?}");

    // What the check refuses: a crate without the workspace's lints, one
    // that overrides them, and crates/sys inheriting the forbid or
    // dropping another workspace lint.
    let parse = |s: &str| -> toml::Table { s.parse().unwrap() };
    let with_more = parse("rust.unsafe_code = \"forbid\"\nclippy.dbg_macro = \"deny\"\n");
    for (name, manifest, lints) in [
        ("dra-e2e-kube", "", &workspace),
        (
            "dra-e2e-kube",
            "[lints.rust]\nunsafe_code = \"allow\"\n",
            &workspace,
        ),
        ("dra-e2e-sys", "[lints]\nworkspace = true\n", &workspace),
        (
            "dra-e2e-sys",
            "[lints.rust]\nunsafe_code = \"allow\"\n",
            &with_more,
        ),
    ] {
        assert_eq!(
            lint_problems(name, &parse(manifest), lints).len(),
            1,
            "{name}: {manifest}"
        );
    }
    let sys_own = "[lints.rust]\nunsafe_code = \"allow\"\n[lints.clippy]\ndbg_macro = \"deny\"\n";
    assert_eq!(
        lint_problems("dra-e2e-sys", &parse(sys_own), &with_more),
        Vec::<String>::new()
    );
}
