//! The two tiers of the tests, each one binary. `cargo test` on a fresh
//! clone runs the fast tier (tests/fast.rs): everything that needs no root,
//! no Go and no control plane. The tests that do need them are the modules
//! of tests/cluster.rs, a target Cargo.toml declares with
//! `required-features = ["cluster-tests"]`, which `make test` turns on, so
//! `cargo test` does not build it at all rather than passing it empty.
//!
//! This target (no test harness: its output is always shown) says what the
//! fast tier left out, so a green `cargo test` is never read as the whole
//! suite, and fails when the split went wrong: a test file neither binary
//! names (with `autotests = false` it would never run), one both name, a
//! module of the fast tier that starts a cluster, or the cluster binary no
//! longer behind its feature.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What a module that needs a cluster, root or Go calls.
const HEAVY_MARKERS: &[&str] = &[
    "LocalCluster::start",
    "RealNodes::start",
    "local_run(",
    "on_real_nodes(",
];

/// The two binaries' roots, relative to `tests/`; the tests' shared
/// module, which both name.
const FAST: &str = "fast.rs";
const CLUSTER: &str = "cluster.rs";
const SHARED: &str = "common";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A module of a test binary: its name and its file, relative to `tests/`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Module {
    name: String,
    file: String,
}

/// The modules a root declares: each `mod name;`, from the `#[path]` above
/// it when there is one, else `name.rs`. The shared module is left out.
fn modules_of(root_text: &str) -> Vec<Module> {
    let mut out = Vec::new();
    let mut path = None;
    for line in root_text.lines().map(str::trim) {
        if let Some(p) = line
            .strip_prefix("#[path = \"")
            .and_then(|r| r.strip_suffix("\"]"))
        {
            path = Some(p.to_owned());
        } else if let Some(name) = line.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            let file = path.take().unwrap_or_else(|| format!("{name}.rs"));
            if name != SHARED {
                out.push(Module {
                    name: name.to_owned(),
                    file,
                });
            }
        }
    }
    out
}

/// The test files on disk a root must name: `tests/*.rs` and
/// `tests/*/main.rs`, the roots and this target excepted.
fn files_on_disk() -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root().join("tests"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.is_file() && name.ends_with(".rs") {
            if ![FAST, CLUSTER, "tiers.rs"].contains(&name) {
                files.push(name.to_owned());
            }
        } else if path.join("main.rs").is_file() {
            files.push(format!("{name}/main.rs"));
        }
    }
    files.sort();
    files
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
    out.sort();
    out
}

/// The text of a module: its file, and the files of the directory its
/// submodules live in (`x/` beside `x.rs`, or the directory of `x/main.rs`).
fn module_text(module: &Module) -> String {
    let tests = root().join("tests");
    let file = tests.join(&module.file);
    let dir = match file.file_name().and_then(|n| n.to_str()) {
        Some("main.rs" | "mod.rs") => file.parent().map(Path::to_owned),
        _ => Some(file.with_extension("")),
    };
    let mut files = vec![file.clone()];
    files.extend(dir.iter().flat_map(|d| sources(d)).filter(|f| *f != file));
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect()
}

/// Test functions in `text`: `#[test]` and `#[tokio::test...]` attributes.
fn count_tests(text: &str) -> usize {
    text.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("#[test]") || l.starts_with("#[tokio::test"))
        .count()
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

/// The unit tests left to `make test` in the root crate's and the member
/// crates' sources.
fn gated_in_sources() -> usize {
    let mut dirs = vec![root().join("src")];
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

/// The features a test target of Cargo.toml requires; None when there is
/// no such target.
fn required_features(manifest: &str, target: &str) -> Result<Option<Vec<String>>, String> {
    let doc: toml::Table = manifest.parse().map_err(|e| format!("Cargo.toml: {e}"))?;
    let tests = doc.get("test").and_then(|t| t.as_array());
    Ok(tests
        .into_iter()
        .flatten()
        .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(target))
        .map(|t| {
            t.get("required-features")
                .and_then(|f| f.as_array())
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        }))
}

/// The problems of a split: files neither root names or both name, fast
/// modules that call what only the cluster tier may, and the two targets'
/// declarations.
fn problems(
    fast: &[Module],
    cluster: &[Module],
    on_disk: &[String],
    fast_features: Option<&[String]>,
    cluster_features: Option<&[String]>,
    read: impl Fn(&Module) -> String,
) -> Vec<String> {
    let mut out = Vec::new();
    for file in on_disk {
        let in_fast = fast.iter().any(|m| &m.file == file);
        let in_cluster = cluster.iter().any(|m| &m.file == file);
        match (in_fast, in_cluster) {
            (false, false) => out.push(format!(
                "tests/{file} is in neither tier, so it never runs: name it with `mod` in \
                 tests/{FAST} (no root, Go or control plane) or tests/{CLUSTER}"
            )),
            (true, true) => out.push(format!(
                "tests/{file} is named by both tests/{FAST} and tests/{CLUSTER}: it runs twice"
            )),
            _ => {}
        }
    }
    for m in fast.iter().chain(cluster) {
        if !on_disk.contains(&m.file) {
            out.push(format!(
                "module {} names tests/{}, which is not a test file here",
                m.name, m.file
            ));
        }
    }
    for m in fast {
        if let Some(marker) = HEAVY_MARKERS.iter().find(|k| read(m).contains(*k)) {
            out.push(format!(
                "tests/{} calls {marker} but is in the fast tier: move its `mod` line to \
                 tests/{CLUSTER}",
                m.file
            ));
        }
    }
    match fast_features {
        None => out.push("Cargo.toml declares no test target \"fast\"".to_owned()),
        Some(f) if !f.is_empty() => out.push(format!(
            "Cargo.toml's test target \"fast\" requires {f:?}: plain `cargo test` would skip it"
        )),
        Some(_) => {}
    }
    match cluster_features {
        Some(f) if f.iter().any(|f| f == "cluster-tests") => {}
        _ => out.push(
            "Cargo.toml's test target \"cluster\" must exist with required-features = \
             [\"cluster-tests\"], or plain `cargo test` starts clusters"
                .to_owned(),
        ),
    }
    out
}

fn main() -> ExitCode {
    let read_root = |file: &str| std::fs::read_to_string(root().join("tests").join(file));
    let (manifest, fast, cluster) = match (
        std::fs::read_to_string(root().join("Cargo.toml")),
        read_root(FAST),
        read_root(CLUSTER),
    ) {
        (Ok(m), Ok(f), Ok(c)) => (m, modules_of(&f), modules_of(&c)),
        (m, f, c) => {
            for e in [m.err(), f.err(), c.err()].into_iter().flatten() {
                eprintln!("tiers: reading Cargo.toml and the two roots: {e}");
            }
            return ExitCode::FAILURE;
        }
    };
    let features = |target| required_features(&manifest, target);
    let (fast_features, cluster_features) = match (features("fast"), features("cluster")) {
        (Ok(f), Ok(c)) => (f, c),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("tiers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let problems = problems(
        &fast,
        &cluster,
        &files_on_disk(),
        fast_features.as_deref(),
        cluster_features.as_deref(),
        module_text,
    );
    self_check();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("tiers: {p}");
        }
        return ExitCode::FAILURE;
    }
    if cfg!(feature = "cluster-tests") {
        println!("tiers: cluster-tests on: both tiers were built and ran");
        return ExitCode::SUCCESS;
    }
    let counts: Vec<(&str, usize)> = cluster
        .iter()
        .map(|m| (m.name.as_str(), count_tests(&module_text(m))))
        .collect();
    let unit = gated_in_sources();
    let total: usize = counts.iter().map(|(_, c)| c).sum::<usize>() + unit;
    let listed: Vec<String> = counts.iter().map(|(n, c)| format!("{n} ({c})")).collect();
    println!(
        "\ntiers: this was the fast tier. `make test` runs the other {total} tests in {} \
         modules of tests/{CLUSTER}, which need root, Go or a control plane: {}; and {unit} \
         unit test(s) that need a tool `make test` installs\n",
        counts.len(),
        listed.join(", ")
    );
    ExitCode::SUCCESS
}

/// The checks above can fail: on a made-up split they find every kind of
/// mistake. Runs every time, as this target has no harness.
fn self_check() {
    let gated = "#[cfg(feature = \"cluster-tests\")]\n    #[test]\n    fn a() {}\n\
                 #[test]\n    fn b() {}\n#[cfg(feature = \"cluster-tests\")]\nmod m {}\n";
    assert_eq!(
        gated_unit_tests(gated),
        1,
        "the gated unit tests are miscounted"
    );
    let fast = modules_of("mod common;\nmod small;\nmod sneaky;\nmod twice;\n");
    let cluster = modules_of(
        "//! root\nmod common;\n/// doc\n#[path = \"big/main.rs\"]\nmod big;\nmod twice;\nmod gone;\n",
    );
    assert_eq!(
        cluster[0],
        Module {
            name: "big".into(),
            file: "big/main.rs".into()
        },
        "a #[path] module is misread"
    );
    let on_disk: Vec<String> = [
        "big/main.rs",
        "forgotten.rs",
        "small.rs",
        "sneaky.rs",
        "twice.rs",
    ]
    .map(str::to_owned)
    .to_vec();
    let read = |m: &Module| match m.name.as_str() {
        "sneaky" => "let c = LocalCluster::start(o).await;".to_owned(),
        _ => "#[test]\nfn t() {}".to_owned(),
    };
    let none: &[String] = &[];
    let found = problems(&fast, &cluster, &on_disk, Some(none), None, read);
    let expect = [
        "tests/forgotten.rs is in neither tier",
        "tests/twice.rs is named by both",
        "module gone names tests/gone.rs",
        "tests/sneaky.rs calls LocalCluster::start",
        "test target \"cluster\" must exist",
    ];
    assert_eq!(found.len(), expect.len(), "{found:#?}");
    for (f, e) in found.iter().zip(expect) {
        assert!(f.contains(e), "expected {e:?} in {f:?}");
    }
    let gated_fast = ["cluster-tests".to_owned()];
    let good = ["cluster-tests".to_owned()];
    let found = problems(&[], &[], &[], Some(&gated_fast), Some(&good), read);
    assert!(
        found.len() == 1 && found[0].contains("plain `cargo test` would skip it"),
        "{found:?}"
    );
    assert_eq!(
        count_tests("#[test]\nfn a() {}\n    #[tokio::test(flavor = \"multi_thread\")]\n"),
        2
    );
}
