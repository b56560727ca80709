//! The command line as people meet it, run as the built binary, with no
//! cluster: every command's `--help`, shell completions, clap's errors for
//! what is not a command or an option, and `check`'s suggestions.
use std::process::{Command, Output};

fn dra_e2e(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dra-e2e"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running dra-e2e {args:?}: {e}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn every_command_has_a_help_that_shows_its_options() {
    for (args, wants) in [
        (
            &["--help"][..],
            &["--tags", "--cluster", "--features", "setup", "check"][..],
        ),
        (&["-h"], &["--tags", "completions"]),
        (
            &["setup", "--help"],
            &["Usage: dra-e2e setup", "--node-kind"],
        ),
        (&["steps", "--help"], &["Usage: dra-e2e steps"]),
        (&["check", "--help"], &["Usage: dra-e2e check", "[PATH]..."]),
        (
            &["upstream", "--help"],
            &["--write", "--check", "--data", "--features"],
        ),
        (&["cluster", "--help"], &["Usage: dra-e2e cluster", "up"]),
        (
            &["cluster", "up", "--help"],
            &["--nodes", "--node-kind", "--keep"],
        ),
        (&["clean", "--help"], &["Usage: dra-e2e clean"]),
        (&["profile", "--help"], &["check", "show"]),
        (&["profile", "check", "--help"], &["<FILE>", "--no-files"]),
        (&["image", "--help"], &["--binary", "--reference", "--out"]),
        (&["completions", "--help"], &["<SHELL>", "bash"]),
        (&["help", "setup"], &["--node-kind"]),
        // The agent's own help, as its callers (hostpathplugin's shim) see it.
        (
            &["proxy-agent", "--help"],
            &["--endpoint", "--proxy-endpoint"],
        ),
    ] {
        let o = dra_e2e(args);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}\n{out}{}", stderr(&o));
        for want in wants {
            assert!(out.contains(want), "{args:?}: no {want:?} in\n{out}");
        }
    }
}

/// CUCUMBER_FILTER_TAGS is the run's `--tags`: a run refuses a bad one,
/// the commands do not care.
#[test]
fn a_bad_tag_expression_in_the_environment_is_the_runs_business() {
    let with_env = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dra-e2e"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CUCUMBER_FILTER_TAGS", "@a and (")
            .args(args)
            .output()
            .unwrap()
    };
    let o = with_env(&["check", "tests/fixtures/misspelt"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("undefined step"), "{}", stderr(&o));
    let o = with_env(&["--list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("invalid value '@a and (' for '--tags <tagexpr>'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn completions_name_the_commands() {
    let o = dra_e2e(&["completions", "bash"]);
    let script = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    for command in [
        "setup",
        "check",
        "steps",
        "profile",
        "cluster",
        "completions",
    ] {
        assert!(script.contains(command), "no {command} in\n{script}");
    }
    assert!(script.contains("--tags"), "{script}");
    assert!(!script.contains("node-init"), "{script}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = dra_e2e(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains("setup"), "{shell}");
    }
}

#[test]
fn what_is_no_command_or_option_is_clap_error() {
    for (args, want) in [
        (&["stup"][..], "unrecognized subcommand 'stup'"),
        (&["--bogus"], "unexpected argument '--bogus'"),
        (&["setup", "--bogus"], "unexpected argument '--bogus'"),
        (
            &["setup", "--node-kind", "vm"],
            "invalid value 'vm' for '--node-kind <KIND>'",
        ),
        (
            &["--list", "setup"],
            "the subcommand 'setup' cannot be used with '--list'",
        ),
        (&["completions", "tcsh"], "invalid value 'tcsh'"),
    ] {
        let o = dra_e2e(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}\n{err}");
        assert!(err.starts_with("error: "), "{args:?}\n{err}");
        assert!(err.contains(want), "{args:?}: no {want:?} in\n{err}");
        assert!(err.contains("try '--help'"), "{args:?}\n{err}");
    }
}

#[test]
fn check_suggests_the_closest_step_and_tag() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("typos.feature"),
        "@DynamicResourceAlocation\n\
         Feature: typos\n\
         \n\
         \x20 Scenario: a pod\n\
         \x20   Given 1 ready node\n\
         \x20   And a drvier with 1 device per node\n\
         \x20   When pod \"tester-1\" with an inline claim is created\n\
         \x20   Then pod \"tester-1\" is runing\n\
         \x20   And the weather is nice today\n",
    )
    .unwrap();
    let o = dra_e2e(&["check", dir.path().to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let file = dir.path().join("typos.feature");
    let want = format!(
        "{f}:2: unknown tag @DynamicResourceAlocation (did you mean @DynamicResourceAllocation?)\n\
         {f}:6: undefined step: And a drvier with 1 device per node\n\
         \x20 did you mean: \"Given a driver [\"<name>\"] with <resources>[, <setting>]...\"?\n\
         {f}:8: undefined step: Then pod \"tester-1\" is runing\n\
         \x20 did you mean: \"Then pod \"tester-1\" is running\"?\n\
         {f}:9: undefined step: And the weather is nice today\n\
         4 problem(s) in {d}\n",
        f = file.display(),
        d = dir.path().display()
    );
    assert_eq!(err, want);
}
