//! The README and the documents in docs/: every relative link leads to a file
//! that exists (and every `#anchor` into a markdown file to one of its
//! headings, by GitHub's rules; every `#L<n>` into another file to one of its
//! lines), docs/steps.md is what the step catalogue gives, and the worked
//! examples use only defined steps. No cluster, root or Go is involved.
use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

use common::bin;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What a link leads to.
enum Target {
    File(String),
    Dir,
}

/// README.md and docs/*.md, by their paths in the repository.
fn documents() -> BTreeMap<PathBuf, String> {
    let mut docs = BTreeMap::new();
    let mut paths = vec![PathBuf::from("README.md")];
    for entry in std::fs::read_dir(repo().join("docs")).expect("docs/ is readable") {
        let name = PathBuf::from(entry.expect("a docs/ entry").file_name());
        if name.extension().is_some_and(|e| e == "md") {
            paths.push(Path::new("docs").join(name));
        }
    }
    for path in paths {
        let text = std::fs::read_to_string(repo().join(&path))
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        docs.insert(path, text);
    }
    docs
}

/// A path of the repository as it is on disk.
fn on_disk(path: &Path) -> Option<Target> {
    let full = repo().join(path);
    if full.is_dir() {
        return Some(Target::Dir);
    }
    std::fs::read(&full)
        .ok()
        .map(|bytes| Target::File(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The lines of a markdown text outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<String> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let opens = marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char);
        match &fence {
            None if opens => fence = Some(marker),
            None => lines.push((i + 1, line)),
            Some(open) => {
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
            }
        }
    }
    lines
}

/// `line` with its code spans blanked out (a link inside one is no link).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let ticks = "`".repeat(run);
        let after = &rest[start + run..];
        // The span closes at the next run of exactly as many backticks.
        let mut close = None;
        let mut from = 0;
        while let Some(i) = after[from..].find(&ticks) {
            let at = from + i;
            let longer = after[at + run..].starts_with('`');
            if !longer && (at == 0 || !after[..at].ends_with('`')) {
                close = Some(at);
                break;
            }
            from = at + after[at..].chars().take_while(|&c| c == '`').count();
        }
        match close {
            Some(at) => {
                out.push_str(&rest[..start]);
                out.push(' ');
                rest = &after[at + run..];
            }
            None => {
                out.push_str(&rest[..start + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` with each inline link `[words](target)` replaced by its words.
fn link_words(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let Some(open) = rest[..i].rfind('[') else {
            break;
        };
        let Some(close) = rest[i + 2..].find(')') else {
            break;
        };
        let bang = rest[..open].ends_with('!');
        out.push_str(&rest[..if bang { open - 1 } else { open }]);
        out.push_str(&rest[open + 1..i]);
        rest = &rest[i + 2 + close + 1..];
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading: its text (a link's words, not its target)
/// in lower case, without punctuation but '-' and '_', spaces made '-'.
fn anchor(heading: &str) -> String {
    link_words(heading)
        .trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown text's headings; a repeated one is numbered
/// as GitHub numbers it (`x`, `x-1`, `x-2`).
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (_, line) in prose(text) {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let hashes = line[indent..].chars().take_while(|&c| c == '#').count();
        if indent > 3 || !(1..=6).contains(&hashes) {
            continue;
        }
        let rest = &line[indent + hashes..];
        if !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        // A closing sequence of '#'s is no part of the text.
        let mut words = rest.trim();
        let stripped = words.trim_end_matches('#');
        if stripped.is_empty() || stripped.ends_with(' ') {
            words = stripped.trim_end();
        }
        let base = anchor(words);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The destinations of the inline links and images of a markdown text,
/// with their line numbers; code spans and fenced blocks hold none.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let mut depth = 0;
            let mut end = None;
            for (j, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = Some(j);
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let Some(end) = end else {
                break;
            };
            // A title after the destination is no part of it.
            let dest = after[..end].split_whitespace().next().unwrap_or_default();
            let dest = dest.trim_start_matches('<').trim_end_matches('>');
            out.push((n, dest.to_owned()));
            rest = &after[end + 1..];
        }
    }
    out
}

/// `%20` and the like decoded, as a browser follows a link.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with `.` and `..` resolved, or None when it leaves the repository.
fn normalized(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every relative link of `docs` (markdown texts by their paths in the
/// repository) that leads nowhere: to no file (`find` gives the repository's
/// other files), to no heading of a markdown file, or past a file's last line.
fn broken_links(
    docs: &BTreeMap<PathBuf, String>,
    find: &dyn Fn(&Path) -> Option<Target>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in docs {
        let dir = path.parent().unwrap_or(Path::new(""));
        for (line, dest) in links(text) {
            let at = format!("{}:{line}: link `{dest}`", path.display());
            if dest.is_empty() {
                problems.push(format!("{at} is empty"));
                continue;
            }
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = match dest.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (dest.as_str(), None),
            };
            let target_path = if file.is_empty() {
                path.clone()
            } else {
                let Some(p) = normalized(&dir.join(percent_decoded(file))) else {
                    problems.push(format!("{at} leads out of the repository"));
                    continue;
                };
                p
            };
            let target = match docs.get(&target_path) {
                Some(t) => Some(Target::File(t.clone())),
                None => find(&target_path),
            };
            let Some(target) = target else {
                problems.push(format!("{at}: there is no {}", target_path.display()));
                continue;
            };
            let Some(fragment) = fragment else {
                continue;
            };
            let fragment = percent_decoded(fragment);
            match target {
                Target::Dir => problems.push(format!(
                    "{at}: {} is a directory, it has no #{fragment}",
                    target_path.display()
                )),
                Target::File(text) if target_path.extension().is_some_and(|e| e == "md") => {
                    if !anchors(&text).contains(&fragment) {
                        problems.push(format!(
                            "{at}: {} has no heading whose anchor is #{fragment}",
                            target_path.display()
                        ));
                    }
                }
                Target::File(text) => {
                    // #L12 or #L12-L20: lines of the file.
                    let lines: Option<Vec<usize>> = fragment
                        .split('-')
                        .map(|l| l.strip_prefix('L').and_then(|n| n.parse().ok()))
                        .collect();
                    match lines {
                        Some(lines) if (1..=2).contains(&lines.len()) => {
                            let last = text.lines().count();
                            if let Some(n) = lines.iter().find(|&&n| n == 0 || n > last) {
                                problems.push(format!(
                                    "{at}: {} has lines 1 to {last}, no line {n}",
                                    target_path.display()
                                ));
                            }
                        }
                        _ => problems.push(format!(
                            "{at}: #{fragment} into {} is no line (#L<n>)",
                            target_path.display()
                        )),
                    }
                }
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_of_the_readme_and_docs_leads_somewhere() {
    let docs = documents();
    assert!(docs.len() > 5, "found only {:?}", docs.keys());
    let problems = broken_links(&docs, &on_disk);
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_link_that_leads_nowhere_is_found() {
    let docs: BTreeMap<PathBuf, String> = [
        (
            "README.md",
            "# Title\n\
             \n\
             ## Two words\n\
             \n\
             See [the guide](docs/guide.md#the-part), [gone](docs/gone.md),\n\
             [a part that is not there](docs/guide.md#no-such-part), [here](#two-words),\n\
             [nowhere here](#nowhere), [the web](https://example.com/x.md), `[code](no/link.md)`,\n\
             ![a picture](docs/picture.png) and [a directory](features).\n\
             \n\
             ```sh\n\
             [fenced](no/link.md)\n\
             ```\n",
        ),
        (
            "docs/guide.md",
            "# Guide\n\
             \n\
             ## The part\n\
             \n\
             [back](../README.md#title), [a line](../features/x.feature#L2),\n\
             [past the end](../features/x.feature#L9), [out](../../outside.md),\n\
             [in the pictures](picture.png#somewhere), [missing picture](pictures/gone.png).\n",
        ),
    ]
    .into_iter()
    .map(|(p, t)| (PathBuf::from(p), t.to_owned()))
    .collect();
    let files: HashMap<PathBuf, Option<&str>> = [
        ("features/x.feature", Some("Feature: x\n  Scenario: y\n")),
        ("docs/picture.png", Some("")),
        ("features", None),
    ]
    .into_iter()
    .map(|(p, t)| (PathBuf::from(p), t))
    .collect();
    let find = |p: &Path| {
        files.get(p).map(|t| match t {
            Some(t) => Target::File((*t).to_owned()),
            None => Target::Dir,
        })
    };
    assert_eq!(
        broken_links(&docs, &find),
        [
            "README.md:5: link `docs/gone.md`: there is no docs/gone.md",
            "README.md:6: link `docs/guide.md#no-such-part`: docs/guide.md has no heading whose anchor is #no-such-part",
            "README.md:7: link `#nowhere`: README.md has no heading whose anchor is #nowhere",
            "docs/guide.md:6: link `../features/x.feature#L9`: features/x.feature has lines 1 to 2, no line 9",
            "docs/guide.md:6: link `../../outside.md` leads out of the repository",
            "docs/guide.md:7: link `picture.png#somewhere`: #somewhere into docs/picture.png is no line (#L<n>)",
            "docs/guide.md:7: link `pictures/gone.png`: there is no docs/pictures/gone.png",
        ]
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    for (heading, expected) in [
        ("Upstream's tests, one by one", "upstreams-tests-one-by-one"),
        (
            "`dra.go` (130 tests, 130 ported)",
            "drago-130-tests-130-ported",
        ),
        ("`registrationDir` (optional)", "registrationdir-optional"),
        ("What a driver's pods see", "what-a-drivers-pods-see"),
        ("The project's own tests", "the-projects-own-tests"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("See [the guide](docs/guide.md)", "see-the-guide"),
        ("Speed: 3.4 × faster", "speed-34--faster"),
    ] {
        assert_eq!(anchor(heading), expected, "{heading}");
    }
    assert_eq!(
        anchors(
            "# A\n\n## A ##\n\n```\n# not a heading\n```\n    # indented code\n#no space\n### A\n"
        ),
        ["a", "a-1", "a-2"]
    );
}

#[test]
fn code_spans_and_fences_hold_no_links() {
    assert_eq!(
        without_code("a `[x](y)` b ``c ` [d](e)`` [f](g)"),
        "a   b   [f](g)"
    );
    assert_eq!(
        links(
            "[a](b) `[c](d)`\n```\n[e](f)\n```\n  ~~~~\n[g](h)\n  ~~~~\n[i](j \"title\") [k](l(m))\n"
        ),
        [
            (1, "b".to_owned()),
            (8, "j".to_owned()),
            (8, "l(m)".to_owned())
        ]
    );
}

fn output(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_step_catalogue_document_is_what_the_catalogue_gives() {
    let o = Command::new(bin())
        .current_dir(repo())
        .args(["steps", "--markdown"])
        .output()
        .expect("the runner binary starts");
    assert!(o.status.success(), "{}", output(&o));
    let generated = String::from_utf8(o.stdout).expect("utf-8");
    let written = std::fs::read_to_string(repo().join("docs/steps.md")).expect("docs/steps.md");
    assert!(
        written == generated,
        "docs/steps.md is not what `dra-e2e steps --markdown` prints; run `make steps-doc`"
    );
    for topic in [
        "## Nodes and drivers",
        "## Pods",
        "## Manifests and API checks",
    ] {
        assert!(
            generated.contains(topic),
            "{topic} missing from\n{generated}"
        );
    }
}

/// docs/profile.schema.json, which the shipped profiles name for editors,
/// is what `dra-e2e profile schema` prints.
#[test]
fn the_committed_profile_schema_is_what_profile_schema_prints() {
    let o = Command::new(bin())
        .current_dir(repo())
        .args(["profile", "schema"])
        .output()
        .expect("the runner binary starts");
    assert!(o.status.success(), "{}", output(&o));
    let generated = String::from_utf8(o.stdout).expect("utf-8");
    let written = std::fs::read_to_string(repo().join("docs/profile.schema.json"))
        .expect("docs/profile.schema.json");
    assert!(
        written == generated,
        "docs/profile.schema.json is not what `dra-e2e profile schema` prints; run `make \
         profile-schema`"
    );
    assert!(
        generated.contains("\"$schema\": \"http://json-schema.org/draft-07/schema#\""),
        "{generated}"
    );
}

#[test]
fn steps_takes_no_other_argument() {
    let o = Command::new(bin())
        .current_dir(repo())
        .args(["steps", "--markdwon"])
        .output()
        .expect("the runner binary starts");
    // clap's usage error: the unknown argument, and the one that exists.
    assert_eq!(o.status.code(), Some(2), "{}", output(&o));
    assert!(
        output(&o).contains("unexpected argument '--markdwon'")
            && output(&o).contains("--markdown"),
        "{}",
        output(&o)
    );
}

/// The worked examples (```gherkin blocks) of the README and docs/ stay
/// valid scenarios.
#[test]
fn the_worked_examples_use_only_defined_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let mut found = Vec::new();
    for (path, text) in documents() {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```gherkin\n") {
            let body = &rest[start + "```gherkin\n".len()..];
            let end = body.find("\n```").expect("a gherkin block ends") + 1;
            let name = format!("example{}.feature", found.len());
            std::fs::write(tmp.path().join(&name), &body[..end]).unwrap();
            found.push(format!("{}: {name}", path.display()));
            rest = &body[end..];
        }
    }
    assert!(
        found.iter().any(|f| f.starts_with("README.md:")),
        "the README has a gherkin example: {found:?}"
    );
    let o = Command::new(bin())
        .current_dir(repo())
        .args(["check", tmp.path().to_str().unwrap()])
        .output()
        .expect("the runner binary starts");
    assert!(o.status.success(), "{found:?}\n{}", output(&o));
}
