//! What a run needs from the machine: the first run builds the control
//! plane into an empty cache, runs at once build it once, a run waiting
//! for a stuck build names its holder, and an agent variable set to
//! nothing is named as the cause. A fake build stands in for the real one,
//! which takes minutes.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::runs::Ran;
use crate::common::*;

/// A stand-in for the control-plane build: says what it builds, waits
/// `FAKE_SLEEP` seconds, links the machine's built binaries into the build's
/// cache dir and counts its runs.
fn fake_build(home: &Path) -> PathBuf {
    let script = home.join("fake-build.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         echo \"[fake] building etcd\" >&2\n\
         sleep \"${FAKE_SLEEP:-0}\"\n\
         mkdir -p \"$FAKE_TARGET\"\n\
         for b in etcd kube-apiserver kube-scheduler kube-controller-manager; do\n\
           ln -sf \"$FAKE_SOURCE/$b\" \"$FAKE_TARGET/$b\"\n\
         done\n\
         echo built >> \"$FAKE_COUNT\"\n\
         echo \"[fake] built everything\" >&2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The runner with an empty build cache whose control plane the fake
/// build provides.
fn with_empty_cache(home: &Path, mut c: Command, sleep: u32) -> Command {
    let cache = home.join("cache");
    let sub = dra_e2e::cluster::local::binaries::Versions::pinned().cache_subdir();
    let source = dra_e2e::cluster::local::Binaries::find(None)
        .expect("the control plane is built (make controlplane)");
    c.env_remove("DRA_E2E_BINARIES_DIR")
        .env("DRA_E2E_CACHE_DIR", &cache)
        .env("DRA_E2E_BUILD_CONTROLPLANE", fake_build(home))
        .env("FAKE_TARGET", cache.join("controlplane").join(sub))
        .env("FAKE_SOURCE", source.dir())
        .env("FAKE_COUNT", home.join("builds"))
        .env("FAKE_SLEEP", sleep.to_string());
    c
}

/// The main command on a machine whose cache is empty builds the control
/// plane first (showing the build's steps and time), then runs.
#[test]
fn the_first_run_builds_the_control_plane_then_runs() {
    let home = tempfile::tempdir().unwrap();
    let run = local_run(
        home.path(),
        "runner",
        &["--name", "an inline claim reaches the container"],
    );
    Ran::of(with_empty_cache(home.path(), run, 0))
        .exits(0)
        .says("dra-e2e: building the local cluster's control plane (once per machine; no earlier build here to estimate from)")
        .says("dra-e2e: [controlplane +0s] [fake] building etcd")
        .says("dra-e2e: built the local cluster's control plane in")
        .says("1 passed, 0 failed");
    let builds = std::fs::read_to_string(home.path().join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1);
    // The next run knows the build and how long it took.
    let again = Ran::of(with_empty_cache(home.path(), isolated(home.path()), 0).arg("setup"));
    let t = &again.exits(0).text;
    let builds = std::fs::read_to_string(home.path().join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1, "built again\n{t}");
}

/// Two runs starting at once on an empty cache build once: the second
/// waits for the first's build and uses it.
#[test]
fn two_runs_at_once_build_once() {
    let home = tempfile::tempdir().unwrap();
    let setup = || {
        let mut c = with_empty_cache(home.path(), isolated(home.path()), 3);
        c.arg("setup").stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let (a, b) = (setup(), setup());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let t = format!("{}\n{}", text(&a), text(&b));
    assert!(a.status.success() && b.status.success(), "{t}");
    let builds = std::fs::read_to_string(home.path().join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1, "{t}");
    assert!(
        t.contains("another dra-e2e is building the local cluster's control plane"),
        "{t}"
    );
}

/// A build that another process holds past the deadline: the waiting run
/// stops, naming the holder and what to do, instead of waiting forever.
#[test]
fn a_run_waiting_for_a_stuck_build_names_the_holder() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let lock = cache.join("controlplane.build.lock");
    // A stuck holder: flock takes the lock and becomes `sleep`.
    let mut holder = Command::new("flock")
        .arg("--no-fork")
        .arg(&lock)
        .args(["sleep", "600"])
        .spawn()
        .expect("flock (util-linux) runs");
    let held = || {
        !Command::new("flock")
            .args(["-n"])
            .arg(&lock)
            .arg("true")
            .status()
            .unwrap()
            .success()
    };
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !held() {
        assert!(
            std::time::Instant::now() < until,
            "flock never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ran = Ran::of(
        with_empty_cache(home.path(), isolated(home.path()), 0)
            .env("DRA_E2E_BUILD_LOCK_TIMEOUT", "1s")
            .arg("setup"),
    );
    let _ = holder.kill();
    let _ = holder.wait();
    ran.exits(1);
    for want in [
        "another dra-e2e is building the local cluster's control plane",
        "waited 1s for the build of the local cluster's control plane that another process holds",
        &format!("open in pid {} (`sleep 600`)", holder.id()),
        "If it is stuck, end it (kill PID",
        "set DRA_E2E_BUILD_LOCK_TIMEOUT",
    ] {
        ran.says(want);
    }
    assert!(
        !home.path().join("builds").exists(),
        "it built while another held the lock\n{}",
        ran.text
    );
}

/// DRA_E2E_AGENT set to nothing is named as the cause, not a failed exec of
/// an empty program.
#[test]
fn an_empty_agent_variable_is_named() {
    let home = tempfile::tempdir().unwrap();
    Ran::of(
        local_run(
            home.path(),
            "runner",
            &["--name", "an inline claim reaches the container"],
        )
        .env("DRA_E2E_AGENT", ""),
    )
    .exits(1)
    .says("DRA_E2E_AGENT is set but empty")
    .leak_check_clean()
    .left_nothing(home.path());
}
