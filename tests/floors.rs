//! The floors of the workspace (docs/development.md): every crate depends
//! only on crates of lower floors, read from the manifests Cargo builds
//! from. Cargo already refuses cycles; this refuses an edge that points
//! sideways or up, such as the simulated kubelet reaching for the plugin
//! servers it must only meet through sockets.
use crate::common::rust_files;
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
    ("dra-e2e-report", 5),
    ("dra-e2e-steps", 6),
    ("dra-e2e", 7),
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

/// The crates whose plain name (below) is a crate the runner uses, and the
/// name src/lib.rs gives them instead: `kube` would read as kube-rs.
const RENAMED: &[(&str, &str)] = &[("dra-e2e-kube", "ground")];

/// The name src/lib.rs re-exports the workspace crate `package` under: its
/// package name without `dra-e2e-`, `-` as `_` (its directory in `crates/`),
/// but for the crates in [`RENAMED`].
fn front_door_name(package: &str) -> String {
    match RENAMED.iter().find(|(p, _)| *p == package) {
        Some((_, name)) => (*name).to_owned(),
        None => package.trim_start_matches("dra-e2e-").replace('-', "_"),
    }
}

/// The workspace's crates below the runner: (package, the identifier code
/// names it by, its front door name).
fn workspace_crates() -> Vec<(&'static str, String, String)> {
    FLOORS
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| *p != "dra-e2e")
        .map(|p| (p, p.replace('-', "_"), front_door_name(p)))
        .collect()
}

/// What one `use` item brings in: each leaf's path and the name it is
/// brought in under (`None` for a glob).
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let with = |ident: &syn::Ident| {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        syn::UseTree::Path(p) => use_leaves(&p.tree, &with(&p.ident), out),
        syn::UseTree::Name(n) => {
            let path = with(&n.ident);
            let name = path.last().cloned();
            out.push((path, name));
        }
        syn::UseTree::Rename(r) => out.push((with(&r.ident), Some(r.rename.to_string()))),
        syn::UseTree::Glob(_) => out.push((prefix.to_vec(), None)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_leaves(t, prefix, out)),
    }
}

/// What is wrong with the front door, `lib` (the text of src/lib.rs), given
/// the workspace's `crates` ([`workspace_crates`]): it re-exports each crate
/// once, whole, `pub`, under its front door name, at its top, and nothing
/// from inside a crate, so that code says `crate::ground::wait` and not
/// `crate::wait`.
fn front_door_problems(lib: &str, crates: &[(&str, String, String)]) -> Vec<String> {
    let file = match syn::parse_file(lib) {
        Ok(f) => f,
        Err(e) => return vec![format!("src/lib.rs does not parse: {e}")],
    };
    let mut problems = Vec::new();
    let mut times = vec![0; crates.len()];
    // (items, the inline module they are in)
    let mut todo = vec![(&file.items, None::<String>)];
    while let Some((items, module)) = todo.pop() {
        for item in items {
            let (leaves, public) = match item {
                syn::Item::Mod(m) => {
                    if let Some((_, inner)) = &m.content {
                        todo.push((inner, Some(m.ident.to_string())));
                    }
                    continue;
                }
                syn::Item::ExternCrate(e) => {
                    let rename = e.rename.as_ref().map(|(_, r)| r.to_string());
                    let name = rename.unwrap_or_else(|| e.ident.to_string());
                    let public = matches!(e.vis, syn::Visibility::Public(_));
                    (vec![(vec![e.ident.to_string()], Some(name))], public)
                }
                syn::Item::Use(u) => {
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &[], &mut leaves);
                    (leaves, matches!(u.vis, syn::Visibility::Public(_)))
                }
                _ => continue,
            };
            for (path, name) in leaves {
                let shown = match &name {
                    None => format!("{}::*", path.join("::")),
                    Some(n) if path.last() == Some(n) => path.join("::"),
                    Some(n) => format!("{} as {n}", path.join("::")),
                };
                // `crate::ground::wait` and `ground::wait` name the same.
                let inside = path
                    .iter()
                    .skip_while(|s| *s == "crate" || *s == "self")
                    .collect::<Vec<_>>();
                let Some(first) = inside.first() else {
                    continue;
                };
                let Some(i) = crates
                    .iter()
                    .position(|(_, ident, door)| *first == ident || *first == door)
                else {
                    continue;
                };
                let (package, ident, door) = &crates[i];
                if inside.len() > 1 || name.is_none() {
                    let rest = match inside.len() > 1 {
                        true => inside[1..].iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                        false => vec!["*"],
                    };
                    problems.push(format!(
                        "src/lib.rs re-exports `{shown}` from inside {package}: re-export the \
                         crate whole (`pub use {ident} as {door};`) and name `{door}::{}`",
                        rest.join("::")
                    ));
                    continue;
                }
                if let Some(m) = &module {
                    problems.push(format!(
                        "src/lib.rs's module {m} re-exports `{shown}`: the crates are re-exported \
                         at the top of src/lib.rs"
                    ));
                    continue;
                }
                times[i] += 1;
                if !public {
                    problems.push(format!(
                        "src/lib.rs brings in `{shown}` without `pub`: `pub use {ident} as {door};`"
                    ));
                } else if *first != ident || name.as_ref() != Some(door) {
                    problems.push(format!(
                        "src/lib.rs re-exports `{shown}`: {package} is `pub use {ident} as {door};`"
                    ));
                }
            }
        }
    }
    for ((package, ident, door), n) in crates.iter().zip(times) {
        match n {
            1 => {}
            0 => problems.push(format!(
                "src/lib.rs does not re-export {package}: `pub use {ident} as {door};`"
            )),
            n => problems.push(format!(
                "src/lib.rs re-exports {package} {n} times: once, `pub use {ident} as {door};`"
            )),
        }
    }
    problems
}

/// The front door names each crate once, under its own name
/// (docs/development.md, "Layout"): `crate::cluster::proxy`, never a flat
/// `crate::proxy` that hides which crate `proxy` lives in.
#[test]
fn the_front_door_names_each_crate_once_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates = workspace_crates();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let problems = front_door_problems(&lib, &crates);
    assert!(problems.is_empty(), "{problems:#?}");

    // A crate gets another name only where its plain one is a crate the
    // runner uses, and no other crate's plain name is one.
    let top: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let used = |name: &str| {
        ["dependencies", "dev-dependencies"].iter().any(|s| {
            top.get(*s)
                .and_then(|d| d.as_table())
                .is_some_and(|d| d.keys().any(|k| k.replace('-', "_") == name))
        })
    };
    for (package, _, door) in &crates {
        let plain = package.trim_start_matches("dra-e2e-").replace('-', "_");
        match RENAMED.iter().any(|(p, _)| p == package) {
            true => assert!(
                used(&plain),
                "{package} is renamed {door}, but `{plain}` is free"
            ),
            false => assert!(
                !used(&plain),
                "{package}'s name `{plain}` is a crate the runner uses"
            ),
        }
    }

    // What the check refuses.
    let whole = "pub use dra_e2e_kube as ground;\n";
    let others: String = crates
        .iter()
        .filter(|(p, _, _)| *p != "dra-e2e-kube")
        .map(|(_, ident, door)| format!("pub use {ident} as {door};\n"))
        .collect();
    assert_eq!(
        front_door_problems(&format!("{others}{whole}"), &crates),
        Vec::<String>::new()
    );
    let refused = |text: &str| front_door_problems(&format!("{others}{text}"), &crates);
    assert_eq!(
        refused(&format!("{whole}pub use dra_e2e_kube::wait;\n")),
        [
            "src/lib.rs re-exports `dra_e2e_kube::wait` from inside dra-e2e-kube: re-export the \
          crate whole (`pub use dra_e2e_kube as ground;`) and name `ground::wait`"
        ]
    );
    for (text, names) in [
        // flat, in a group, through the front door's name, glob
        (
            "pub use dra_e2e_kube::{objects, wait as waits};",
            "`dra_e2e_kube::wait as waits`",
        ),
        ("pub use crate::ground::wait;", "`crate::ground::wait`"),
        ("pub use dra_e2e_kube::*;", "`dra_e2e_kube::*`"),
        // in a module of its own
        (
            "pub mod waits { pub use dra_e2e_kube::wait; }",
            "`dra_e2e_kube::wait`",
        ),
    ] {
        let problems = refused(&format!("{whole}{text}\n"));
        assert!(
            problems.iter().any(|p| p.contains(names)),
            "{text}: {problems:#?}"
        );
    }
    for (text, names) in [
        ("", "does not re-export dra-e2e-kube"),
        (
            "pub use dra_e2e_kube as kube_ground;",
            "`dra_e2e_kube as kube_ground`",
        ),
        ("pub use dra_e2e_kube;", "`dra_e2e_kube`"),
        ("use dra_e2e_kube as ground;", "without `pub`"),
        (
            "pub use dra_e2e_kube as ground;\npub use ground as kube2;",
            "2 times",
        ),
        (
            "pub use dra_e2e_kube as ground;\npub mod m { pub use dra_e2e_kube as ground; }",
            "module m",
        ),
    ] {
        let problems = refused(&format!("{text}\n"));
        assert!(
            problems.iter().any(|p| p.contains(names)),
            "{text}: {problems:#?}"
        );
    }
}

/// Where `text` (Rust source) names one of the workspace's crates by its
/// own identifier (`dra_e2e_kube`), comments and strings left out.
fn named_directly(text: &str, crates: &[(&str, String, String)]) -> Vec<String> {
    fn walk(tokens: proc_macro2::TokenStream, idents: &[&str], out: &mut Vec<String>) {
        for t in tokens {
            match t {
                proc_macro2::TokenTree::Ident(i) if idents.iter().any(|n| i == n) => {
                    out.push(i.to_string())
                }
                proc_macro2::TokenTree::Group(g) => walk(g.stream(), idents, out),
                _ => {}
            }
        }
    }
    let idents: Vec<&str> = crates.iter().map(|(_, i, _)| i.as_str()).collect();
    let mut out = Vec::new();
    match text.parse::<proc_macro2::TokenStream>() {
        Ok(tokens) => walk(tokens, &idents, &mut out),
        Err(e) => out.push(format!("does not read as Rust tokens: {e}")),
    }
    out
}

/// The runner's code reaches the crates through the front door
/// (`crate::harness::driver`, `dra_e2e::harness::driver`), never by their
/// own identifiers, which src/lib.rs alone uses. The agent's program, the
/// agent crate's binary that the runner's package builds, calls its crate.
#[test]
fn the_runner_reaches_the_crates_through_the_front_door() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates = workspace_crates();
    let mut files = vec![root.join("build-features.rs")];
    for dir in ["src", "crates/steps/src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    // The step library names the floors below it in its own lib.rs, as
    // the runner does in src/lib.rs, so that its steps read alike.
    let own = [
        root.join("src/lib.rs"),
        root.join("src/bin/dra-e2e-agent.rs"),
        root.join("crates/steps/src/lib.rs"),
    ];
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !own.contains(f)) {
        for name in named_directly(&std::fs::read_to_string(f).unwrap(), &crates) {
            found.push(format!(
                "{}: {name}",
                f.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "name these through the front door (`crate::ground::wait` in src/ and crates/steps/, \
         `dra_e2e::ground::wait` in tests/ and benches/): {found:#?}"
    );
    // What the check reads: code, not comments or strings.
    let agent = std::fs::read_to_string(&own[1]).unwrap();
    assert_eq!(named_directly(&agent, &crates), ["dra_e2e_agent"]);
    let text = "// dra_e2e_kube::wait\nconst S: &str = \"dra_e2e_kube::wait\";\nuse dra_e2e_kube::wait;\nfn f() { dra_e2e_harness::driver::f() }\n";
    assert_eq!(
        named_directly(text, &crates),
        ["dra_e2e_kube", "dra_e2e_harness"]
    );
}

/// The longest a Rust file of the project's own may be.
const MOST_LINES: usize = 900;

/// Files over [`MOST_LINES`], with their length; generated code (below
/// `target/`) and fixtures (inputs of tests, not code) are not read.
fn too_long(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(path, _)| !path.contains("/fixtures/"))
        .filter_map(|(path, text)| {
            let lines = text.lines().count();
            (lines > MOST_LINES).then(|| format!("{path}: {lines} lines"))
        })
        .collect()
}

/// A file a reader can hold in mind: none over 900 lines, tests included.
/// A longer file holds more than one job; split it by job.
#[test]
fn no_rust_file_is_over_900_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("build-features.rs")];
    for dir in ["src", "tests", "benches", "crates"] {
        rust_files(&root.join(dir), &mut paths);
    }
    let files: Vec<(String, String)> = paths
        .iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == "target"))
        .map(|p| {
            let shown = p.strip_prefix(root).unwrap().display().to_string();
            (shown, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    assert!(files.len() > 100, "read {} files", files.len());
    let long = too_long(&files);
    assert!(long.is_empty(), "split these by job: {long:#?}");

    // A file one line over is named; a fixture of that length is not.
    let over = "x\n".repeat(MOST_LINES + 1);
    let examples = [
        ("src/big.rs".to_owned(), over.clone()),
        ("tests/fixtures/mutant/big.rs".to_owned(), over),
        ("src/fits.rs".to_owned(), "x\n".repeat(MOST_LINES)),
    ];
    assert_eq!(too_long(&examples), ["src/big.rs: 901 lines"]);
}
