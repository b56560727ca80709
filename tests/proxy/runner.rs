//! The runner binary and its local proxy agents end to end: a killed agent
//! fails its scenario at once with the agent named, and agents still start
//! after the runner's executable file was replaced mid-run.
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{agent_failure, assert_nothing_left, bin, fixtures, processes_under};

/// `program` on its own local cluster with one node, on a fixture directory;
/// no kubeconfig in reach, temp files under `home`.
fn local_run(program: &Path, home: &Path, fixture: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("DRA_E2E_AGENT")
        .env("TMPDIR", home)
        .args(["--cluster", "local", "--nodes", "1", "--features"])
        .arg(fixtures(fixture))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Collects a child's stdout and stderr in the background.
fn outputs(child: &mut Child) -> impl FnOnce() -> String + use<> {
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    move || format!("{}\n{}", out.join().unwrap(), err.join().unwrap())
}

/// Like [`outputs`], and also passes each stdout line to `lines` as it comes.
fn streamed_outputs(
    child: &mut Child,
    lines: std::sync::mpsc::Sender<String>,
) -> impl FnOnce() -> String + use<> {
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut all = String::new();
        for line in out.lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = lines.send(line);
        }
        all
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    move || format!("{}\n{}", out.join().unwrap(), err.join().unwrap())
}

/// SIGKILL of the agent serving the plugin's DRA socket while the scenario
/// waits for its pod: the scenario fails within seconds with the agent named
/// (driver, node, socket), not after the pod wait's 300 s, and teardown still
/// removes everything.
#[test]
fn a_killed_agent_fails_its_scenario_at_once_and_teardown_cleans_up() {
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut child = local_run(Path::new(bin()), home.path(), "agent-killed", &[])
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let output = streamed_outputs(&mut child, lines_tx);
    // The scenario reports each step as it finishes: once the pod is created,
    // the next step waits for it (and the claim can never be prepared).
    let deadline = Instant::now() + Duration::from_secs(240);
    let waiting = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) if l.contains("pod \"tester-1\" with an inline claim is created") => break true,
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    if !waiting {
        let _ = child.kill();
        panic!("the scenario never reached its pod wait\n{}", output());
    }
    // The agent of the DRA socket: its command line names `proxy-agent` and
    // the socket in the run's temp dir.
    let agent = loop {
        let found = processes_under(home.path())
            .into_iter()
            .find(|(_, cmd)| cmd.contains("proxy-agent") && cmd.contains("/dra.sock"));
        if found.is_some() || Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break found;
        }
        // No event tells a test process that another process started.
        std::thread::sleep(Duration::from_millis(100));
    };
    let Some((pid, cmd)) = agent else {
        let _ = child.kill();
        panic!("no agent process showed up\n{}", output());
    };
    // A moment for the wait to start (it would end the scenario either way).
    std::thread::sleep(Duration::from_secs(1));
    let killed = Instant::now();
    // A pid just read from /proc; a test-only process.
    dra_e2e::sys::kill(pid.unsigned_abs(), dra_e2e::sys::Signal::Kill)
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    let status = child.wait().unwrap();
    let after_kill = killed.elapsed();
    let t = output();
    assert_eq!(status.code(), Some(1), "{t}");
    assert!(t.contains("0 passed, 1 failed"), "{t}");
    let (line, socket) = agent_failure(&t, &cmd);
    for part in [
        ".k8s.io on node ",
        "the proxy agent for socket ",
        socket,
        &format!("(pid {pid})"),
        "SIGKILL",
    ] {
        assert!(line.contains(part), "{part:?} missing in {line:?}\n{t}");
    }
    assert!(
        t.contains("the step was waiting for pod tester-1 to be running"),
        "the failure did not end the pod wait\n{t}"
    );
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    // Loose bounds, not a benchmark: the pod wait alone would take 300 s.
    assert!(
        after_kill < Duration::from_secs(120),
        "{after_kill:?} from the kill to the end of the run\n{t}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(400),
        "{:?} for the whole run\n{t}",
        started.elapsed()
    );
    assert_nothing_left(home.path(), &t);
}

/// A rebuild relinks the runner's executable mid-run: agents started after
/// that still run the runner's own image, not the path it was started from.
#[test]
fn agents_start_after_the_runner_binary_was_replaced() {
    let home = tempfile::tempdir().unwrap();
    let copy_dir = home.path().join("bin");
    std::fs::create_dir(&copy_dir).unwrap();
    let copy = copy_dir.join("dra-e2e");
    std::fs::copy(bin(), &copy).unwrap();
    let mut child = local_run(
        &copy,
        home.path(),
        "runner",
        &["--name", "an inline claim reaches the container"],
    )
    .spawn()
    .unwrap();
    let output = outputs(&mut child);
    // spawn() returns once the copy is executing; the driver (and its agents)
    // start only after the local cluster is up.
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&copy, "#!/bin/sh\necho 'not the runner' >&2\nexit 97\n").unwrap();
    let mut perms = std::fs::metadata(&copy).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&copy, perms).unwrap();
    let status = child.wait().unwrap();
    let t = output();
    assert_eq!(status.code(), Some(0), "{t}");
    assert!(t.contains("1 passed, 0 failed"), "{t}");
    assert!(!t.contains("not the runner"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    std::fs::remove_dir_all(&copy_dir).unwrap();
    assert_nothing_left(home.path(), &t);
}
