//! The command line as people meet it, run as the built binary, with no
//! cluster: every command's `--help`, shell completions, clap's errors for
//! what is not a command or an option, and `check`'s suggestions; and the
//! agent program beside it.
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

/// The `dra-e2e-agent` program as proxy pods and real nodes run it, built
/// from this package so that `cargo install` puts it beside the runner. This
/// test is also why `cargo test` builds the program: the real-node tests put
/// it into their proxy image and run it as process 1.
mod agent {
    use std::io::{Read as _, Write as _};
    use std::os::unix::net::UnixListener;
    use std::process::{Command, Stdio};

    const AGENT: &str = env!("CARGO_BIN_EXE_dra-e2e-agent");
    #[test]
    fn connect_mode_relays_a_unix_socket_over_stdin_and_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("plugin.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut got = [0u8; 4];
            conn.read_exact(&mut got).unwrap();
            conn.write_all(b"pong").unwrap();
            // The agent ends the connection when either side ends: wait for it.
            let mut rest = Vec::new();
            conn.read_to_end(&mut rest).unwrap();
            got
        });
        let mut child = Command::new(AGENT)
            .args(["proxy-agent", "--connect"])
            .arg(&socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"ping").unwrap();
        let mut out = [0u8; 4];
        child.stdout.take().unwrap().read_exact(&mut out).unwrap();
        // The end of stdin is the end of the connection.
        drop(stdin);
        let status = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(&server.join().unwrap(), b"ping");
        assert_eq!(&out, b"pong");
        assert!(status.success(), "{status}: {err}");
        assert!(
            err.contains(dra_e2e::agent::relay::CONNECTED_PREFIX),
            "{err}"
        );
    }

    #[test]
    fn a_missing_socket_fails_naming_it() {
        let out = Command::new(AGENT)
            .args(["proxy-agent", "--connect", "/nonexistent/dra.sock"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("/nonexistent/dra.sock"), "{err}");
    }

    #[test]
    fn every_sub_command_has_help_and_a_wrong_one_is_named() {
        for args in [
            &["--help"][..],
            &["proxy-agent", "--help"],
            &["node-init", "--help"],
        ] {
            let out = Command::new(AGENT).args(args).output().unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
            assert!(!out.stdout.is_empty(), "{args:?} printed no help");
        }
        let out = Command::new(AGENT).arg("proxy").output().unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("proxy"));
    }
}
