//! The two tiers of the tests. `cargo test` on a fresh clone runs the fast
//! tier: everything that needs no root, no Go and no control plane. The test
//! targets that do need them are declared in Cargo.toml with
//! `required-features = ["cluster-tests"]`, which `make test` turns on, so
//! `cargo test` does not build them at all rather than passing them empty.
//!
//! This target (no test harness: its output is always shown) says what the
//! fast tier left out, so a green `cargo test` is never read as the whole
//! suite, and fails when the declaration went wrong: a heavy target that
//! does not exist, or a target outside the declaration that starts a
//! cluster.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What a target that needs a cluster, root or Go calls.
const HEAVY_MARKERS: &[&str] = &[
    "LocalCluster::start",
    "RealNodes::start",
    "local_run(",
    "on_real_nodes(",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of test target `name`: `tests/<name>.rs`, or every `.rs` of
/// `tests/<name>/` for a target made of modules.
fn target_files(name: &str) -> Vec<PathBuf> {
    let single = root().join("tests").join(format!("{name}.rs"));
    if single.is_file() {
        return vec![single];
    }
    let dir = root().join("tests").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Test functions in `text`: `#[test]` and `#[tokio::test...]` attributes.
fn count_tests(text: &str) -> usize {
    text.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("#[test]") || l.starts_with("#[tokio::test"))
        .count()
}

/// The test targets on disk: `tests/*.rs` and `tests/*/main.rs`.
fn targets_on_disk() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root().join("tests"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = entry.path();
        let name = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
        match name {
            Some(n) if path.extension().is_some_and(|e| e == "rs") => names.push(n),
            Some(n) if path.join("main.rs").is_file() => names.push(n),
            _ => {}
        }
    }
    names.sort();
    names
}

/// Unit tests of the crates' sources that need a tool `make test` installs
/// (xmllint, chromium, busybox-static) sit behind `#[cfg(feature = "cluster-tests")]`
/// right above their `#[test]`; counted here so the fast tier names them too.
fn gated_unit_tests(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
    lines
        .windows(2)
        .filter(|w| {
            w[0] == "#[cfg(feature = \"cluster-tests\")]"
                && (w[1].starts_with("#[test]") || w[1].starts_with("#[tokio::test"))
        })
        .count()
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The unit tests left to `make test` in the root crate's and the member
/// crates' sources.
fn gated_in_sources() -> usize {
    let mut dirs = vec![root().join("src"), root().join("steps")];
    for entry in std::fs::read_dir(root().join("crates"))
        .into_iter()
        .flatten()
        .flatten()
    {
        dirs.push(entry.path().join("src"));
    }
    dirs.iter()
        .flat_map(|d| sources(d))
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|t| gated_unit_tests(&t))
        .sum()
}

/// The targets Cargo.toml declares heavy, in its order.
fn heavy_targets(manifest: &str) -> Result<Vec<String>, String> {
    let doc: toml::Table = manifest.parse().map_err(|e| format!("Cargo.toml: {e}"))?;
    let tests = doc.get("test").and_then(|t| t.as_array());
    Ok(tests
        .into_iter()
        .flatten()
        .filter(|t| {
            t.get("required-features")
                .and_then(|f| f.as_array())
                .is_some_and(|f| f.iter().any(|f| f.as_str() == Some("cluster-tests")))
        })
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_owned))
        .collect())
}

/// The problems of a declaration: heavy targets that do not exist, light
/// ones that call what only heavy ones may.
fn problems(heavy: &[String], on_disk: &[String], read: impl Fn(&str) -> String) -> Vec<String> {
    let mut out = Vec::new();
    for name in heavy {
        if !on_disk.contains(name) {
            out.push(format!(
                "Cargo.toml declares the test target {name:?} heavy, but tests/{name}.rs \
                 and tests/{name}/main.rs do not exist"
            ));
        }
    }
    // This target names the markers itself.
    for name in on_disk
        .iter()
        .filter(|n| !heavy.contains(n) && *n != "tiers")
    {
        let text = read(name);
        if let Some(marker) = HEAVY_MARKERS.iter().find(|m| text.contains(*m)) {
            out.push(format!(
                "tests/{name} calls {marker} but is in the fast tier: declare it in \
                 Cargo.toml with required-features = [\"cluster-tests\"]"
            ));
        }
    }
    out
}

fn main() -> ExitCode {
    let manifest = match std::fs::read_to_string(root().join("Cargo.toml")) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("reading Cargo.toml: {e}");
            return ExitCode::FAILURE;
        }
    };
    let heavy = match heavy_targets(&manifest) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let on_disk = targets_on_disk();
    let read = |name: &str| -> String {
        target_files(name)
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect()
    };
    let problems = problems(&heavy, &on_disk, read);
    self_check();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("tiers: {p}");
        }
        return ExitCode::FAILURE;
    }
    if cfg!(feature = "cluster-tests") {
        println!("tiers: cluster-tests on: every test target was built and ran");
        return ExitCode::SUCCESS;
    }
    let counts: BTreeMap<&str, usize> = heavy
        .iter()
        .map(|n| (n.as_str(), count_tests(&read(n))))
        .collect();
    let unit = gated_in_sources();
    let total: usize = counts.values().sum::<usize>() + unit;
    let listed: Vec<String> = counts.iter().map(|(n, c)| format!("{n} ({c})")).collect();
    println!(
        "\ntiers: this was the fast tier. `make test` runs the other {total} tests in {} \
         targets, which need root, Go or a control plane: {}; and {unit} unit test(s) that \
         need a tool `make test` installs\n",
        counts.len(),
        listed.join(", ")
    );
    ExitCode::SUCCESS
}

/// The checks above can fail: on a made-up declaration they find both kinds
/// of mistake. Runs every time, as this target has no harness.
fn self_check() {
    let gated = "#[cfg(feature = \"cluster-tests\")]\n    #[test]\n    fn a() {}\n\
                 #[test]\n    fn b() {}\n#[cfg(feature = \"cluster-tests\")]\nmod m {}\n";
    assert_eq!(
        gated_unit_tests(gated),
        1,
        "the gated unit tests are miscounted"
    );
    let heavy = vec!["gone".to_owned(), "big".to_owned()];
    let on_disk = vec!["big".to_owned(), "small".to_owned(), "sneaky".to_owned()];
    let found = problems(&heavy, &on_disk, |name| match name {
        "sneaky" => "let c = LocalCluster::start(o).await;".to_owned(),
        _ => "#[test]\nfn t() {}".to_owned(),
    });
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("\"gone\""), "{found:?}");
    assert!(
        found[1].contains("tests/sneaky calls LocalCluster::start"),
        "{found:?}"
    );
    assert_eq!(
        count_tests("#[test]\nfn a() {}\n    #[tokio::test(flavor = \"multi_thread\")]\n"),
        2
    );
}
