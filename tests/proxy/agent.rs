//! `dra-e2e proxy-agent` as a process: CLI compatibility with hostpathplugin's
//! proxy mode, pairing order, no half-close, cleanup.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::support::AGENT_EXE;
use dra_e2e::sys::Signal;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixStream};
use tokio::process::{Child, ChildStdout, Command};

const WAIT: Duration = Duration::from_secs(10);

struct Running {
    child: Child,
    stdout: Option<tokio::io::Lines<BufReader<ChildStdout>>>,
    tcp: SocketAddr,
}

/// Starts the agent with `args` and waits for its ready line.
async fn start(args: &[&str]) -> Running {
    let mut child = Command::new(AGENT_EXE)
        .arg("proxy-agent")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let tcp = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("tcp="))
        .unwrap()
        .parse()
        .unwrap();
    Running {
        child,
        stdout: Some(lines),
        tcp,
    }
}

/// The agent on `sock`, pairing with connections to a TCP port of its own.
async fn start_on_tcp(sock: &Path) -> Running {
    let sock = sock.display().to_string();
    start(&["--endpoint", &sock, "--proxy-endpoint", "tcp://127.0.0.1:0"]).await
}

async fn terminate(mut r: Running) -> std::process::ExitStatus {
    let _ = dra_e2e::sys::kill(r.child.id().unwrap(), Signal::Term);
    tokio::time::timeout(WAIT, r.child.wait())
        .await
        .unwrap()
        .unwrap()
}

fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

#[tokio::test]
async fn hostpathplugin_style_flags_and_term_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("dra.sock");
    // A stale file where the socket goes is replaced.
    std::fs::write(&sock, b"stale").unwrap();
    let endpoint = format!("--endpoint={}", sock.display());
    let r = start(&["--v=5", &endpoint, "--proxy-endpoint=tcp://127.0.0.1:0"]).await;
    assert!(is_socket(&sock));
    let status = terminate(r).await;
    assert!(status.success(), "{status}");
    assert!(!sock.exists(), "socket removed on TERM");

    for signal in [Signal::Int, Signal::Hup, Signal::Quit] {
        let uri = format!("unix://{}", sock.display());
        let mut r = start(&[
            "--v",
            "3",
            "--endpoint",
            &uri,
            "--proxy-endpoint",
            "TCP://127.0.0.1:0",
        ])
        .await;
        assert!(is_socket(&sock));
        let _ = dra_e2e::sys::kill(r.child.id().unwrap(), signal);
        let status = tokio::time::timeout(WAIT, r.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "signal {signal:?}: {status}");
        assert!(!sock.exists(), "signal {signal:?}: socket removed");
    }
}

#[tokio::test]
async fn pairs_by_order_and_carries_bytes_queued_before_pairing() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let r = start_on_tcp(&sock).await;
    // Two pre-dialled connections that speak first, as a server sends SETTINGS.
    let mut first = TcpStream::connect(r.tcp).await.unwrap();
    first.write_all(b"first").await.unwrap();
    let mut second = TcpStream::connect(r.tcp).await.unwrap();
    second.write_all(b"second").await.unwrap();

    let mut a = UnixStream::connect(&sock).await.unwrap();
    let mut buf = [0u8; 5];
    a.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"first");
    let mut b = UnixStream::connect(&sock).await.unwrap();
    let mut buf = [0u8; 6];
    b.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"second");

    // Both directions carry bytes.
    a.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    first.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"ping");
    terminate(r).await;
}

#[tokio::test]
async fn no_half_close_across_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let r = start_on_tcp(&sock).await;
    let mut tcp = TcpStream::connect(r.tcp).await.unwrap();
    let mut unix = UnixStream::connect(&sock).await.unwrap();
    unix.write_all(b"req").await.unwrap();
    unix.shutdown().await.unwrap(); // half-close: "I'm done writing"

    let mut got = Vec::new();
    tcp.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"req", "the TCP side sees the bytes, then EOF");
    // A reply after the half-close does not reach the client: the agent
    // closed both sides when the first one ended.
    let _ = tcp.write_all(b"reply").await;
    let mut reply = Vec::new();
    let _ = unix.read_to_end(&mut reply).await;
    assert!(reply.is_empty(), "got {reply:?}");
    terminate(r).await;
}

#[tokio::test]
async fn exits_and_cleans_up_when_its_output_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let mut r = start_on_tcp(&sock).await;
    assert!(is_socket(&sock));
    // As when an exec session ends: the pipe's reading end closes.
    drop(r.stdout.take());
    let status = tokio::time::timeout(WAIT, r.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(!sock.exists());
}

/// A path of exactly `len` bytes inside `dir`.
fn path_of_len(dir: &Path, len: usize) -> PathBuf {
    let base = dir.display().to_string().len() + 1;
    dir.join("s".repeat(len - base))
}

#[tokio::test]
async fn longest_socket_path_works_and_longer_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let ok = path_of_len(dir.path(), 107);
    assert_eq!(ok.as_os_str().len(), 107);
    let ok_arg = ok.display().to_string();
    let r = start(&[
        "--endpoint",
        &ok_arg,
        "--proxy-endpoint",
        "tcp://127.0.0.1:0",
    ])
    .await;
    assert!(is_socket(&ok));
    terminate(r).await;

    let long = path_of_len(dir.path(), 108).display().to_string();
    let out = Command::new(AGENT_EXE)
        .args([
            "proxy-agent",
            "--endpoint",
            &long,
            "--proxy-endpoint",
            "tcp://127.0.0.1:0",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("listening on unix socket"), "{stderr}");
}

#[tokio::test]
async fn bad_arguments_fail_with_a_message() {
    for args in [
        vec!["--endpoint", "/tmp/x.sock"],
        // A unix proxy endpoint needs its scheme.
        vec!["--endpoint", "/tmp/x.sock", "--proxy-endpoint", "/tmp/y"],
        vec!["--endpoint", "tcp://:1", "--proxy-endpoint", "tcp://:2"],
    ] {
        let out = Command::new(AGENT_EXE)
            .arg("proxy-agent")
            .args(&args)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}

#[tokio::test]
async fn tcp_port_in_use_fails_and_removes_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = Command::new(AGENT_EXE)
        .args(["proxy-agent", "--endpoint"])
        .arg(&sock)
        .arg("--proxy-endpoint")
        .arg(format!("tcp://{}", taken.local_addr().unwrap()))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("listening on tcp"));
    assert!(!sock.exists(), "socket left behind");
}
