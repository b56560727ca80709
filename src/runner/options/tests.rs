//! The options table against the command tree, every place and driver
//! mode, and docs/cli.md; each check with a broken variant that it catches.
use std::path::Path;

use super::run_options::{archive_used, proxy_image_where_it_runs};
use super::tree::options_of;
use super::*;
use crate::cluster::proxy::pods::DEFAULT_IMAGE as UPSTREAM_PROXY_IMAGE;

/// The arguments that put a parsed run at `place`. A kubeconfig cluster
/// needs no kubeconfig here: nothing connects.
fn place_args(place: Place) -> &'static [&'static str] {
    match place {
        Place::LocalSimulated => &["--cluster", "local"],
        Place::LocalReal => &["--cluster", "local", "--node-kind", "real"],
        Place::Kubeconfig => &["--cluster", "kubeconfig"],
    }
}

/// Walks `table` as the run sees it: every option of the command tree at
/// every place, with no driver profile and with each deployment mode, given
/// by its example; returns what is wrong (an option the table lacks, an
/// example that does not parse, a refusal that does not say the option,
/// the run's place and where the option applies, or a refusal where the
/// table says the option applies).
fn walk(table: &[Opt]) -> Vec<String> {
    let mut wrong = differences(table, &super::super::cli::command());
    let root = super::super::cli::command();
    for (_, flag) in options_of(&root) {
        let Some(o) = table
            .iter()
            .find(|o| o.command.is_empty() && o.flag == flag)
        else {
            continue; // said by differences
        };
        for place in Place::ALL {
            // The place's own flags, but the one the example gives.
            let own: Vec<&str> = place_args(place)
                .chunks(2)
                .filter(|pair| pair[0] != o.flag)
                .flatten()
                .copied()
                .collect();
            let args: Vec<&str> = std::iter::once("dra-e2e")
                .chain(own.iter().copied())
                .chain(o.example.iter().copied())
                .collect();
            let matches = match super::super::cli::try_parse_from(&args) {
                Ok((_, m)) => m,
                Err(e) => {
                    wrong.push(format!("{flag}: its example {args:?} does not parse: {e}"));
                    continue;
                }
            };
            for mode in std::iter::once(None).chain(Mode::ALL.map(Some)) {
                let refusals = refusals_at(table, &matches, place, mode);
                let own: Vec<&Refusal> = refusals
                    .iter()
                    .filter(|r| {
                        r.0.starts_with(&format!("{flag} ")) || r.0.starts_with(&format!("{flag}:"))
                    })
                    .collect();
                let at = format!("{flag} at {place}, driver {mode:?}");
                match (o.applies(place, mode), own.as_slice()) {
                    (true, []) => {}
                    (true, [r, ..]) => wrong.push(format!("{at}: applies, yet refused: {r}")),
                    (false, []) => wrong.push(format!("{at}: does not apply, yet taken")),
                    (false, [r, ..]) => {
                        if o.elsewhere.is_empty() {
                            wrong.push(format!("{at}: refused with no reason: {r}"));
                        }
                        for part in [place.to_string(), o.where_text(), o.elsewhere.to_owned()] {
                            if !r.0.contains(&part) {
                                wrong.push(format!("{at}: the refusal does not say {part:?}: {r}"));
                            }
                        }
                    }
                }
            }
        }
    }
    wrong
}

#[test]
fn every_option_of_every_command_is_in_the_table_once() {
    assert_eq!(
        differences(TABLE, &super::super::cli::command()),
        Vec::<String>::new()
    );
    for o in TABLE {
        let twins = TABLE
            .iter()
            .filter(|p| p.command == o.command && p.flag == o.flag)
            .count();
        assert_eq!(
            twins, 1,
            "{} {} is in the table {twins} times",
            o.command, o.flag
        );
        // A refusal says why; an option refused somewhere needs a reason.
        let somewhere = o.places != EVERYWHERE || !o.modes.is_empty();
        assert!(
            !somewhere || !o.elsewhere.is_empty(),
            "{} {}: refused somewhere, with no reason",
            o.command,
            o.flag
        );
    }
}

#[test]
fn the_walk_of_the_whole_table_finds_nothing_wrong() {
    assert_eq!(walk(TABLE), Vec::<String>::new());
}

/// Broken variant: an option left out of the table fails the walk, named.
#[test]
fn an_option_left_out_of_the_table_fails_the_walk() {
    for left_out in ["--cdi-dir", "--image-archive", "--timings", "-v"] {
        let broken: Vec<Opt> = TABLE
            .iter()
            .filter(|o| !(o.command.is_empty() && o.flag == left_out))
            .cloned()
            .collect();
        let wrong = walk(&broken);
        assert!(
            wrong
                .iter()
                .any(|w| w == &format!("dra-e2e {left_out}: not in the options table")),
            "{left_out}: {wrong:?}"
        );
    }
    // A command's option too.
    let broken: Vec<Opt> = TABLE
        .iter()
        .filter(|o| !(o.command == "cluster up" && o.flag == "--wipe-delay"))
        .cloned()
        .collect();
    assert!(
        walk(&broken).contains(&"cluster up --wipe-delay: not in the options table".to_owned())
    );
}

/// Broken variant: an entry saying an option applies where it does not
/// (or the reverse) is caught by the walk of its refusals, and an entry
/// for an option that does not exist by the tree.
#[test]
fn a_wrong_or_stale_entry_fails_the_walk() {
    let mut broken: Vec<Opt> = TABLE.to_vec();
    for o in &mut broken {
        if o.flag == "--wipe-delay" && o.command.is_empty() {
            o.elsewhere = "";
        }
    }
    let mut gone = TABLE[0].clone();
    gone.flag = "--no-such-option";
    broken.push(gone);
    let wrong = walk(&broken);
    assert!(
        wrong
            .iter()
            .any(|w| w.starts_with("--wipe-delay at cluster kubeconfig")
                && w.contains("refused with no reason")),
        "{wrong:?}"
    );
    assert!(
        wrong
            .iter()
            .any(|w| w.contains("--no-such-option: in the options table, not in the command tree")),
        "{wrong:?}"
    );
}

#[test]
fn the_issues_commands_are_refused_on_simulated_nodes_naming_the_option_and_place() {
    for (args, says) in [
        (
            &["--image-archive", "/nonexist.tar"][..],
            "--image-archive /nonexist.tar: does nothing here: this run is on cluster local, nodes simulated",
        ),
        (
            &["--proxy-image", "foo/bar:1"],
            "--proxy-image foo/bar:1: does nothing here: this run is on cluster local, nodes simulated",
        ),
        (
            &["--cdi-dir", "/x"],
            "--cdi-dir /x: does nothing here: this run is on cluster local, nodes simulated",
        ),
        (
            &["--kubelet-root-dir", "/x"],
            "--kubelet-root-dir /x: does nothing here: this run is on cluster local, nodes simulated",
        ),
    ] {
        let full: Vec<&str> = ["dra-e2e", "--name", "parameters reach"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let (_, m) = super::super::cli::try_parse_from(&full).unwrap();
        let r = refusals_at(TABLE, &m, Place::LocalSimulated, None);
        assert!(
            r.first().is_some_and(|r| r.0.starts_with(says)),
            "{args:?}: {r:?}"
        );
    }
}

/// Values from the environment are the machine's: not refused.
#[test]
fn options_given_by_the_environment_are_not_refused() {
    let m = super::super::cli::command()
        .mut_arg("binaries_dir", |a| a.env("DRA_E2E_OPTIONS_TEST_BINARIES"))
        .try_get_matches_from(["dra-e2e", "--cluster", "kubeconfig"])
        .unwrap();
    assert!(refusals_at(TABLE, &m, Place::Kubeconfig, None).is_empty());
    let (_, m) = super::super::cli::try_parse_from(["dra-e2e", "--binaries-dir", "/b"]).unwrap();
    assert_eq!(refusals_at(TABLE, &m, Place::Kubeconfig, None).len(), 1);
}

fn given_proxy(
    place: Place,
    image: &str,
    archives: &[(PathBuf, Vec<String>)],
    interpose: bool,
) -> Option<Finer> {
    proxy_image_where_it_runs(&Given {
        place,
        values: vec![image.to_owned()],
        archives,
        proxy_image: Some(image),
        manifests: "",
        interpose,
    })
}

#[test]
fn a_proxy_image_is_used_where_given_and_said_when_the_nodes_lack_it() {
    // On a kubeconfig cluster it is the proxy, as upstream's suite has it.
    assert_eq!(
        given_proxy(Place::Kubeconfig, UPSTREAM_PROXY_IMAGE, &[], false),
        None
    );
    // On real local nodes without its archive, upstream's name is the
    // runner's own image: said.
    assert!(matches!(
        given_proxy(Place::LocalReal, UPSTREAM_PROXY_IMAGE, &[], false),
        Some(Finer::Note(n)) if n.contains("import upstream's archive with --image-archive")
    ));
    let upstream = [(
        PathBuf::from("h.tar"),
        vec![UPSTREAM_PROXY_IMAGE.to_owned()],
    )];
    assert_eq!(
        given_proxy(Place::LocalReal, UPSTREAM_PROXY_IMAGE, &upstream, false),
        None
    );
    // Another image is used: said when no archive brings it.
    assert!(matches!(
        given_proxy(Place::LocalReal, "localhost/agent:1", &[], false),
        Some(Finer::Note(n)) if n.contains("no --image-archive holds it")
    ));
    let archives = [(PathBuf::from("a.tar"), vec!["localhost/agent:1".to_owned()])];
    assert_eq!(
        given_proxy(Place::LocalReal, "localhost/agent:1", &archives, false),
        None
    );
}

/// The interposer needs `proxy-agent --connect`: hostpathplugin with it is
/// refused everywhere, saying why.
#[test]
fn hostpathplugin_with_the_interposer_is_refused_with_the_reason() {
    for place in [Place::LocalReal, Place::Kubeconfig] {
        match given_proxy(place, UPSTREAM_PROXY_IMAGE, &[], true) {
            Some(Finer::Refuse(why)) => {
                assert!(
                    why.contains("which upstream's hostpathplugin lacks"),
                    "{why}"
                );
            }
            other => panic!("{place}: {other:?}"),
        }
    }
    assert_eq!(
        given_proxy(Place::Kubeconfig, "localhost/agent:1", &[], true),
        None
    );
}

#[test]
fn an_archive_no_image_of_the_run_names_is_said() {
    let archives = [(PathBuf::from("a.tar"), vec!["localhost/x:1".to_owned()])];
    let g = |manifests: &str, proxy: Option<&str>| {
        archive_used(&Given {
            place: Place::LocalReal,
            values: vec!["a.tar".to_owned()],
            archives: &archives,
            proxy_image: proxy,
            manifests,
            interpose: false,
        })
    };
    assert!(matches!(g("", None), Some(Finer::Note(n)) if n.contains("a.tar (localhost/x:1)")));
    assert_eq!(g("image: localhost/x:1\n", None), None);
    assert_eq!(g("", Some("localhost/x:1")), None);
}

/// Writes a tar with `files` (name, content) into `path`, gzipped or not.
fn write_tar(path: &Path, files: &[(&str, &str)], gzip: bool) {
    let mut b = tar::Builder::new(Vec::new());
    for (name, content) in files {
        let mut h = tar::Header::new_ustar();
        h.set_size(content.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, content.as_bytes()).unwrap();
    }
    let bytes = b.into_inner().unwrap();
    let bytes = if gzip {
        use std::io::Write as _;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&bytes).unwrap();
        e.finish().unwrap()
    } else {
        bytes
    };
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn image_archives_are_told_apart_from_what_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let index = r#"{"manifests":[{"annotations":{"io.containerd.image.name":"localhost/a:1"}}]}"#;
    write_tar(
        &p("oci.tar"),
        &[("oci-layout", "{}"), ("index.json", index)],
        false,
    );
    write_tar(
        &p("oci.tar.gz"),
        &[("oci-layout", "{}"), ("index.json", index)],
        true,
    );
    write_tar(
        &p("docker.tar"),
        &[("manifest.json", r#"[{"RepoTags":["b:2"]}]"#)],
        false,
    );
    write_tar(&p("other.tar"), &[("hello.txt", "hi")], false);
    std::fs::write(p("text"), "not an image\n").unwrap();
    std::fs::write(p("empty"), "").unwrap();
    std::fs::write(p("elf"), b"\x7fELF\x02\x01\x01").unwrap();
    std::fs::write(p("gz"), {
        use std::io::Write as _;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"plain text, gzipped").unwrap();
        e.finish().unwrap()
    })
    .unwrap();
    assert_eq!(
        archive_kind(&p("oci.tar")).unwrap(),
        Archive {
            format: "OCI",
            refs: vec!["localhost/a:1".to_owned()]
        }
    );
    assert_eq!(archive_kind(&p("oci.tar.gz")).unwrap().format, "OCI");
    assert_eq!(
        archive_kind(&p("docker.tar")).unwrap(),
        Archive {
            format: "Docker",
            refs: vec!["b:2".to_owned()]
        }
    );
    for (name, is) in [
        (
            "other.tar",
            "it is a tar archive holding neither oci-layout and index.json nor manifest.json (it starts with hello.txt)",
        ),
        ("text", "it is text, starting \"not an image\""),
        ("empty", "it is an empty file"),
        ("elf", "it is an ELF program"),
        ("gz", "it is gzip-compressed data, not a tar archive"),
    ] {
        let e = archive_kind(&p(name)).unwrap_err().0;
        assert!(
            e.starts_with(&format!(
                "--image-archive {}: not an OCI or Docker image archive",
                p(name).display()
            )),
            "{e}"
        );
        assert!(e.ends_with(is), "{name}: {e}");
    }
    let e = archive_kind(&p("missing.tar")).unwrap_err().0;
    assert!(
        e.contains("missing.tar: cannot read it: No such file or directory"),
        "{e}"
    );
    let e = archive_kind(dir.path()).unwrap_err().0;
    assert!(e.ends_with("is a directory, not a file"), "{e}");
}

fn doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md"))
        .expect("docs/cli.md")
}

/// The first line where `written` and `generated` differ, for a short
/// failure message.
fn first_difference(written: &str, generated: &str) -> Option<String> {
    let (w, g) = (written.lines(), generated.lines());
    w.zip(g)
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| {
            format!(
                "line {}: the document has\n{a}\nthe table gives\n{b}",
                i + 1
            )
        })
        .or_else(|| (written != generated).then(|| "one is longer".to_owned()))
}

#[test]
fn docs_cli_md_holds_the_reference_the_table_gives() {
    let doc = doc();
    let written = generated_part(&doc).expect("docs/cli.md has the generated part's markers");
    if let Some(d) = first_difference(written, &markdown(TABLE)) {
        panic!("docs/cli.md's option reference is not the table's; run `make cli-doc`: {d}");
    }
}

/// Broken variant: a table that changed (an option moved) no longer
/// matches the document.
#[test]
fn a_changed_table_no_longer_matches_the_document() {
    let mut changed = TABLE.to_vec();
    for o in &mut changed {
        if o.flag == "--cdi-dir" {
            o.places = EVERYWHERE;
        }
    }
    let doc = doc();
    let d = first_difference(generated_part(&doc).unwrap(), &markdown(&changed));
    assert!(d.is_some_and(|d| d.contains("| `--cdi-dir` | yes | yes | yes |")));
    let row = markdown(TABLE);
    assert!(
        row.contains("| `--cdi-dir` | refused | refused | yes | any |"),
        "{row}"
    );
}
