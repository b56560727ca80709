//! What the tests that run the runner binary share: the binary, the
//! fixtures, following a run's output, and the check that a run left no
//! process or temp dir behind. A module of both tiers' binaries
//! (tests/fast.rs, tests/cluster.rs).
#![allow(dead_code)]
pub mod allocation;
pub mod manifests;
pub mod runs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every `.rs` file below `dir`, recursively, into `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_dra-e2e")
}

/// The `dra-e2e-agent` program beside the runner (`cargo test` builds it
/// for its own tests): the local agents of a driver hosted in a test
/// binary, and real nodes' process 1.
pub fn agent() -> PathBuf {
    Path::new(bin()).with_file_name("dra-e2e-agent")
}

/// The build cache as this test process sees it, so no run a test starts
/// builds the control plane again.
pub fn machine_cache() -> PathBuf {
    let dir = dra_e2e::cluster::local::binaries::locate(None).dir;
    let sub = dra_e2e::cluster::local::binaries::Versions::pinned().cache_subdir();
    match dir.ends_with(Path::new("controlplane").join(&sub)) {
        true => dir.ancestors().nth(2).unwrap().to_owned(),
        // Binaries from DRA_E2E_BINARIES_DIR: the cache root is where the
        // scripts put it.
        false => std::env::var_os("DRA_E2E_CACHE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/dra-e2e")
            }),
    }
}

/// The runner with no kubeconfig and its temp files under `home`.
pub fn isolated(home: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env("TMPDIR", home)
        .env("DRA_E2E_CACHE_DIR", machine_cache());
    c
}

/// The runner on its own one-node local cluster, on a fixture directory.
pub fn local_run(home: &Path, fixture: &str, extra: &[&str]) -> Command {
    let mut c = isolated(home);
    c.env("DRA_E2E_AGENT", agent())
        .args(["--cluster", "local", "--features"])
        .arg(fixtures(fixture));
    // One node unless the fixture needs more (`--nodes` may be given once).
    if !extra.contains(&"--nodes") {
        c.args(["--nodes", "1"]);
    }
    c.args(extra);
    c
}

/// A finished run's stdout and stderr, one after the other.
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Processes whose command line mentions `dir` (a run's private temp dir),
/// with their pids.
pub fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&needle) {
                found.push((pid, cmd));
            }
        }
    }
    found
}

/// No temp dir of a run under `home` and no process mentioning it.
pub fn assert_nothing_left(home: &Path, t: &str) {
    let left: Vec<_> = std::fs::read_dir(home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("dra-e2e-"))
        .collect();
    assert!(left.is_empty(), "temp dirs left: {left:?}\n{t}");
    let procs = processes_under(home);
    assert!(procs.is_empty(), "processes left: {procs:?}\n{t}");
}

/// [`assert_nothing_left`] after a runner that exited at once: its children
/// die with it (PDEATHSIG), a moment after it.
pub fn assert_nothing_left_soon(home: &Path, t: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !processes_under(home).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_nothing_left(home, t);
}

/// A run whose output lines (stdout and stderr) a test can wait for while
/// it goes on.
pub struct Watched {
    pub child: std::process::Child,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Watched {
    pub fn spawn(mut c: Command) -> Watched {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
        let out = follow(child.stdout.take().unwrap(), lines_tx.clone());
        let err = follow(child.stderr.take().unwrap(), lines_tx);
        Watched {
            child,
            out,
            err,
            lines,
        }
    }

    /// Waits for a line (stdout or stderr) containing `needle`; false when
    /// the run ended or `within` passed first.
    pub fn wait_line(&self, needle: &str, within: Duration) -> bool {
        self.line_with(needle, within).is_some()
    }

    /// The first line (stdout or stderr) containing `needle`; `None` when
    /// the run ended or `within` passed first.
    pub fn line_with(&self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    pub fn sigint(&self) {
        // Our own child: it may have ended already, which the caller sees.
        let _ = dra_e2e::sys::kill(self.child.id(), dra_e2e::sys::Signal::Int);
    }

    /// Waits for the run to end: its exit code and all it printed.
    pub fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let t = format!("{}\n{}", self.out.join().unwrap(), self.err.join().unwrap());
        (status.code(), t)
    }
}

/// Collects a stream's text in the background, passing each line on.
fn follow(
    stream: impl std::io::Read + Send + 'static,
    lines: std::sync::mpsc::Sender<String>,
) -> std::thread::JoinHandle<String> {
    use std::io::BufRead as _;
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
        {
            all.push_str(&line);
            all.push('\n');
            let _ = lines.send(line);
        }
        all
    })
}

/// The line of a run's output that says a proxy agent exited, and the
/// socket the agent with command line `agent` served.
pub fn agent_failure<'a>(t: &'a str, agent: &'a str) -> (&'a str, &'a str) {
    let line = t
        .lines()
        .find(|l| l.contains("exited unexpectedly"))
        .unwrap_or_else(|| panic!("no failure names the agent\n{t}"));
    // The runner's agent takes `--endpoint <socket>`, hostpathplugin's
    // command line `--endpoint=<socket>`.
    let mut words = agent.split_whitespace();
    let socket = std::iter::from_fn(|| {
        let w = words.next()?;
        Some(match w.strip_prefix("--endpoint") {
            Some("") => words.next(),
            Some(v) => v.strip_prefix('='),
            None => None,
        })
    })
    .flatten()
    .next()
    .unwrap_or_else(|| panic!("no --endpoint in {agent:?}"));
    (line, socket)
}

/// Each scenario's JUnit failure message, by scenario name (`did not fail:
/// …` for a scenario that did not fail).
pub fn junit_failures(junit: &Path) -> std::collections::BTreeMap<String, String> {
    let xml = std::fs::read_to_string(junit).unwrap();
    let suites = junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes())).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for suite in &suites.suites {
        for case in &suite.cases {
            let message = match &case.status {
                junit_parser::TestStatus::Failure(f) => f.message.clone(),
                other => format!("did not fail: {other:?}"),
            };
            out.insert(case.original_name.clone(), message);
        }
    }
    out
}

/// The run's JUnit report holds exactly the `expected` scenarios, each failed
/// at the step its message starts with, the message saying every one of the
/// parts: (scenario, failing step, parts).
pub fn assert_failures(junit: &Path, expected: &[(&str, &str, &[&str])]) {
    let got = junit_failures(junit);
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for (scenario, step, parts) in expected {
        let message = got
            .get(*scenario)
            .unwrap_or_else(|| panic!("no scenario {scenario:?} in {got:#?}"));
        assert!(
            message.starts_with(step),
            "{scenario}: expected the failure of {step:?}, got {message}"
        );
        for part in *parts {
            assert!(
                message.contains(part),
                "{scenario}: expected {part:?} in {message}"
            );
        }
    }
}

/// The output of one scenario: from its `Scenario:` line to the next.
pub fn scenario_output<'a>(t: &'a str, name: &str) -> &'a str {
    let head = format!("Scenario: {name}\n");
    let start = t
        .find(&head)
        .unwrap_or_else(|| panic!("no scenario {name:?} in the output\n{t}"));
    let rest = &t[start + head.len()..];
    let end = rest.find("Scenario: ").unwrap_or(rest.len());
    &rest[..end]
}

/// A run of a fixture directory whose every scenario breaks what one check
/// guards, as it ended: its home (kept until dropped), output and JUnit report.
pub struct BrokenRun {
    pub home: tempfile::TempDir,
    pub output: String,
    pub junit: PathBuf,
}

/// Runs the runner on fixture directory `fixture` (with `extra` arguments)
/// and checks that every scenario failed, each at the step and with the
/// message parts `expected` gives (scenario, failing step, parts), and that
/// nothing was left behind.
pub fn broken_variants(
    fixture: &str,
    extra: &[&str],
    expected: &[(&str, &str, &[&str])],
) -> BrokenRun {
    broken_variants_with(fixture, extra, expected, |_| {})
}

/// [`broken_variants`] with the command adjusted first (its environment).
pub fn broken_variants_with(
    fixture: &str,
    extra: &[&str],
    expected: &[(&str, &str, &[&str])],
    adjust: impl FnOnce(&mut Command),
) -> BrokenRun {
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let artifacts = home.path().join("artifacts");
    let mut command = local_run(home.path(), fixture, extra);
    command
        .arg("--junit")
        .arg(&junit)
        .arg("--artifacts")
        .arg(&artifacts);
    adjust(&mut command);
    let o = command.output().unwrap();
    let output = text(&o);
    assert_eq!(o.status.code(), Some(1), "{output}");
    assert!(
        output.contains(&format!("0 passed, {} failed", expected.len())),
        "{output}"
    );
    assert!(
        output.contains("leak check: nothing left behind"),
        "{output}"
    );
    assert_failures(&junit, expected);
    assert_nothing_left(home.path(), &output);
    BrokenRun {
        home,
        output,
        junit,
    }
}

/// For a runner on real nodes whose HOME is the test's: the node components
/// stay where the build put them.
pub fn on_real_nodes(c: &mut Command) {
    c.env(
        "DRA_E2E_NODE_BINARIES_DIR",
        dra_e2e::cluster::real_node::binaries::locate(None).dir,
    );
}

pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn kubeconfig_for(home: &Path, server: &str) -> PathBuf {
    let kc = home.join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{ server: '{server}' }}\n\
             users:\n- name: u\n  user: {{ token: wrong }}\ncontexts:\n- name: x\n  context: {{ cluster: c, user: u }}\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    kc
}
