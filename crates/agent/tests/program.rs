//! The `dra-e2e-agent` program as proxy pods and real nodes run it. This
//! test is also why `cargo test` builds the program: the real-node tests of
//! the runner put it into their proxy image and run it as process 1.
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
        err.contains(dra_e2e_agent::relay::CONNECTED_PREFIX),
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
