//! What a person watching sees: a live status line on a terminal and none
//! in a pipe, and no colour codes where stderr is no terminal. Checked
//! through what a terminal would show of the raw bytes, as only that is
//! what a person reads.
use std::process::Command;

use crate::common::runs::Ran;
use crate::common::*;

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let home = tempfile::tempdir().unwrap();
    let kc = kubeconfig_for(home.path(), "https://127.0.0.1:9");
    let err = Ran::of(
        isolated(home.path())
            .env("RUST_LOG", "debug")
            .args(["--cluster", "kubeconfig", "--kubeconfig"])
            .arg(&kc),
    )
    .stderr;
    assert!(err.lines().count() > 1, "no log lines to check\n{err}");
    assert!(!err.contains('\u{1b}'), "{err}");
}

/// The lines a terminal shows for `raw`: a carriage return moves to the
/// line's start (what follows overwrites it), `ESC [2K` clears the line,
/// a newline ends it; other escape codes are kept as text.
fn as_a_terminal_shows(raw: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line: Vec<char> = Vec::new();
    let mut col = 0;
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("\u{1b}[2K") {
            line.clear();
            col = 0;
            rest = after;
            continue;
        }
        match c {
            '\r' => col = 0,
            '\n' => {
                lines.push(line.iter().collect());
                line.clear();
                col = 0;
            }
            c => {
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
        rest = &rest[c.len_utf8()..];
    }
    lines.push(line.into_iter().collect());
    lines
}

/// On a terminal a status line (done/total, passed/failed, what runs, the
/// clock) stays under the scenario output; off a terminal there is none.
#[test]
fn a_terminal_gets_a_live_status_line_and_a_pipe_does_not() {
    let home = tempfile::tempdir().unwrap();
    let command = local_run(home.path(), "progress", &[]);
    let argv: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Quoted for the shell script(1) starts.
    assert!(argv.iter().all(|a| !a.contains('\'')), "{argv:?}");
    let argv: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
    // script(1) runs the command on a pseudo-terminal and copies what it
    // shows.
    let mut under_terminal = Command::new("script");
    under_terminal
        .args(["--quiet", "--return", "--flush", "--command"])
        .arg(argv.join(" "))
        .arg("/dev/null")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => under_terminal.env(k, v),
            None => under_terminal.env_remove(k),
        };
    }
    // Log lines on stderr while the status line stands on stdout.
    under_terminal.env("RUST_LOG", "dra_e2e=debug");
    let o = under_terminal.output().expect("script (util-linux) runs");
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("[0/1] 0 passed, 0 failed · running 1: publishes for a while · 0m0"),
        "no status line while the scenario ran\n{shown}"
    );
    assert!(shown.contains("1 passed, 0 failed"), "{shown}");
    // As the terminal shows it: no log line shares a line with the status.
    let lines = as_a_terminal_shows(&shown);
    assert!(
        lines.iter().any(|l| l.contains("DEBUG")),
        "no log line was written during the run\n{shown}"
    );
    for l in &lines {
        assert!(
            !(l.contains("DEBUG") && l.contains(" passed, ")),
            "a log line on the status line: {l:?}"
        );
    }
    assert_nothing_left(home.path(), &shown);

    let piped = Ran::of(local_run(home.path(), "progress", &[]));
    let t = &piped.exits(0).text;
    assert!(!t.contains("[0/1]"), "a status line off a terminal\n{t}");
    assert!(!t.contains('\u{1b}'), "terminal codes off a terminal\n{t}");
}
