//! How a run ends when it is not let finish: interrupted once (teardown,
//! reports) or twice (at once), during the cluster's start, mid-scenario
//! or after the scenarios; a control-plane component killed under it; its
//! ending bounded by --teardown-timeout. Every way leaves nothing behind.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;

/// Waits until a file under `home` is `wanted`, polling every `every`. False
/// if the run ended first or none came `within`.
fn wait_for_file(
    home: &Path,
    child: &mut std::process::Child,
    within: Duration,
    every: Duration,
    wanted: impl Fn(&Path) -> bool,
) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let found = walk(home).iter().any(|p| wanted(p));
        let exited = child.try_wait().unwrap().is_some();
        if found || exited || Instant::now() > deadline {
            return found;
        }
        // No event tells a test process that a file appeared elsewhere.
        std::thread::sleep(every);
    }
}

/// Waits until the run is mid-scenario: its claim is prepared once a CDI
/// spec file exists on the node. False if the run ended first (it was not
/// interrupted mid-scenario then) or nothing was prepared in time.
fn wait_until_prepared(home: &Path, child: &mut std::process::Child) -> bool {
    let cdi_spec = |p: &Path| {
        p.extension().is_some_and(|e| e == "json") && p.parent().is_some_and(|d| d.ends_with("cdi"))
    };
    let (within, every) = (Duration::from_secs(240), Duration::from_millis(200));
    wait_for_file(home, child, within, every, cdi_spec)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Kills one control-plane component of a local run while its scenario's
/// pod runs; returns the run's output, exit code and how long it took to end.
fn run_and_kill(component: &str) -> (String, Option<i32>, Duration) {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt", &[]));
    let prepared = wait_until_prepared(home.path(), &mut run.child);
    let needle = format!("{component} ");
    let pid = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let ours = cmd.contains(&*home.path().to_string_lossy());
        let binary = cmd.split(' ').next()?.rsplit('/').next()?.to_owned() + " ";
        (ours && binary == needle).then(|| e.file_name().to_string_lossy().parse::<u32>().ok())?
    });
    let killed_at = Instant::now();
    if let Some(pid) = pid {
        // A process of the run this test started.
        let _ = dra_e2e::sys::kill(pid, dra_e2e::sys::Signal::Kill);
    }
    let (code, t) = run.finish();
    let took = killed_at.elapsed();
    assert!(prepared, "the scenario never prepared its claim\n{t}");
    assert!(
        pid.is_some(),
        "no {component} process of the run found\n{t}"
    );
    assert_nothing_left(home.path(), &t);
    (t, code, took)
}

#[test]
fn interrupted_run_tears_down_and_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt", &[]));
    let prepared = wait_until_prepared(home.path(), &mut run.child);
    run.sigint();
    let (code, t) = run.finish();
    assert!(prepared, "the scenario never prepared its claim\n{t}");
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("interrupted"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    assert!(t.contains("0 passed, 1 failed"), "{t}");
    assert_nothing_left(home.path(), &t);
}

/// The first Ctrl-C starts a teardown that cannot finish (unprepare is
/// stalled); the second stops everything at once.
#[test]
fn second_interrupt_stops_at_once_and_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt-twice", &[]));
    let prepared = wait_until_prepared(home.path(), &mut run.child);
    run.sigint();
    let tearing_down = run.wait_line("tearing down running scenarios", Duration::from_secs(60));
    run.sigint();
    let (code, t) = run.finish();
    assert!(prepared, "the scenario never prepared its claim\n{t}");
    assert!(tearing_down, "the first Ctrl-C started no teardown\n{t}");
    assert_eq!(code, Some(130), "{t}");
    assert!(t.contains("stopping now"), "{t}");
    assert_nothing_left_soon(home.path(), &t);
}

/// After the scenarios, a first Ctrl-C ends the wait for a namespace that
/// would not go (its object's finalizer is never removed); the leak check
/// still names it and the run fails.
#[test]
fn interrupt_after_the_scenarios_ends_the_wait_for_namespaces() {
    let home = tempfile::tempdir().unwrap();
    let run = Watched::spawn(local_run(home.path(), "held-namespace", &[]));
    let waiting = run.wait_line("waiting for the run's namespaces", Duration::from_secs(240));
    let signalled = Instant::now();
    run.sigint();
    let (code, t) = run.finish();
    let took = signalled.elapsed();
    assert!(waiting, "the run never waited for its namespaces\n{t}");
    assert!(t.contains("1 passed, 0 failed"), "{t}");
    assert!(t.contains("not waiting for the namespaces to go"), "{t}");
    assert!(
        t.contains("leak check: left behind: Namespace dra-e2e-"),
        "{t}"
    );
    assert_eq!(code, Some(1), "{t}");
    // Loose: the namespace wait alone is two minutes.
    assert!(took < Duration::from_secs(90), "took {took:?}\n{t}");
    assert_nothing_left(home.path(), &t);
}

/// After the scenarios, a second Ctrl-C (during the leak check or the
/// cluster's stop, which follow the first) stops the cluster and exits at
/// once.
#[test]
fn second_interrupt_after_the_scenarios_exits_at_once() {
    let home = tempfile::tempdir().unwrap();
    let run = Watched::spawn(local_run(home.path(), "held-namespace", &[]));
    let waiting = run.wait_line("waiting for the run's namespaces", Duration::from_secs(240));
    run.sigint();
    // Two signals sent back to back arrive as one.
    let stopped_waiting = run.wait_line("not waiting for the namespaces", Duration::from_secs(60));
    let signalled = Instant::now();
    run.sigint();
    let (code, t) = run.finish();
    let took = signalled.elapsed();
    assert!(waiting, "the run never waited for its namespaces\n{t}");
    assert!(
        stopped_waiting,
        "the first Ctrl-C did not end the wait\n{t}"
    );
    assert_eq!(code, Some(130), "{t}");
    assert!(t.contains("stopping now"), "{t}");
    assert!(took < Duration::from_secs(30), "took {took:?}\n{t}");
    assert_nothing_left_soon(home.path(), &t);
}

/// The run's ending as a whole has a deadline: a namespace that never goes
/// does not hold the run past `--teardown-timeout`; the cluster is stopped at
/// once and the run fails, leaving nothing on the host.
#[test]
fn the_runs_ending_is_bounded_by_the_teardown_timeout() {
    let home = tempfile::tempdir().unwrap();
    let run = Watched::spawn(local_run(
        home.path(),
        "held-namespace",
        &["--teardown-timeout", "5s"],
    ));
    let waiting = run.wait_line("waiting for the run's namespaces", Duration::from_secs(240));
    let since = Instant::now();
    let (code, t) = run.finish();
    let took = since.elapsed();
    assert!(waiting, "the run never waited for its namespaces\n{t}");
    assert_eq!(code, Some(1), "{t}");
    assert!(
        t.contains(
            "leak check skipped: the run's teardown did not finish within 5s (--teardown-timeout)"
        ),
        "{t}"
    );
    assert!(t.contains("stopping the cluster at once"), "{t}");
    // Loose: without the deadline the namespace wait alone is two minutes.
    assert!(took < Duration::from_secs(60), "took {took:?}\n{t}");
    assert_nothing_left_soon(home.path(), &t);
}

/// A control-plane component that dies ends the run at once, named, with
/// its exit and its log; nothing is left (it hung for 23 minutes with etcd
/// killed, and took 10 minutes without naming a killed API server).
#[test]
fn a_dead_etcd_ends_the_run_quickly_and_says_so() {
    let (t, code, took) = run_and_kill("etcd");
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("etcd exited (signal: 9"), "{t}");
    assert!(t.contains("last lines of"), "{t}");
    assert!(t.contains("the run stopped early: etcd exited"), "{t}");
    // Loose: minutes that the old behaviour broke, not a benchmark.
    assert!(took < Duration::from_secs(180), "took {took:?}\n{t}");
}

#[test]
fn a_dead_api_server_ends_the_run_quickly_and_says_so() {
    let (t, code, took) = run_and_kill("kube-apiserver");
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("kube-apiserver exited (signal: 9"), "{t}");
    assert!(
        t.contains("the run stopped early: kube-apiserver exited"),
        "{t}"
    );
    assert!(took < Duration::from_secs(180), "took {took:?}\n{t}");
}

/// Ctrl-C while the local cluster starts stops it and removes its temp dir
/// (the runner used to die and leave PKI, kubeconfig and etcd data).
#[test]
fn interrupt_during_cluster_start_up_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut run = Watched::spawn(local_run(home.path(), "interrupt", &[]));
    // The API server is starting once its log exists; the start-up is short,
    // so it is watched closely.
    let starting = wait_for_file(
        home.path(),
        &mut run.child,
        Duration::from_secs(120),
        Duration::from_millis(50),
        |p| p.ends_with("logs/kube-apiserver.log"),
    );
    run.sigint();
    let (code, t) = run.finish();
    assert!(starting, "the cluster never started\n{t}");
    assert_eq!(code, Some(130), "{t}");
    assert!(t.contains("interrupted while starting the cluster"), "{t}");
    assert_nothing_left(home.path(), &t);
}
