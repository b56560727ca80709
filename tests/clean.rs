//! `dra-e2e clean` on run records made by hand in a private registry
//! (`DRA_E2E_RUN_RECORDS`): a record whose lock another process holds is a
//! live run's and stays; once that process is killed (SIGKILL) its things
//! go; something a process still uses is not removed, and the exit code
//! says so. The real nodes' side is in tests/real/reclaim.rs.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn clean(tmp: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dra-e2e"))
        .arg("clean")
        .env("DRA_E2E_RUN_RECORDS", tmp.join("runs"))
        .env("TMPDIR", tmp)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A record as a run writes it, naming `dir`.
fn write_record(tmp: &Path, id: &str, dir: &Path) -> PathBuf {
    let runs = tmp.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::set_permissions(&runs, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let path = runs.join(format!("{id}.run"));
    std::fs::write(
        &path,
        format!(
            "{{\"run\":{{\"pid\":1,\"started\":\"2026-01-01T00:00:00Z\"}}}}\n{{\"dir\":{:?}}}\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    path
}

/// `sh` running until killed: with `lock` given, holding an flock on it
/// (taken on its own open of the file, as a run takes its record's), else
/// with `arg` on its command line.
fn holder(lock: Option<&Path>, arg: &Path, ready: &Path) -> Child {
    let script = match lock {
        // exec: the process the test kills is the one holding the lock.
        Some(_) => format!(
            "exec 9>>\"$0\"; flock -n 9 || exit 3; touch {}; exec sleep 600",
            ready.display()
        ),
        None => format!("touch {}; while :; do sleep 1; done", ready.display()),
    };
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .arg(lock.unwrap_or(arg))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(child.try_wait().unwrap().is_none(), "the holder ended");
        assert!(Instant::now() < deadline, "the holder never started");
        // No event tells a test that another process created a file.
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_live_runs_dir_stays_until_its_process_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dra-e2e-live01");
    std::fs::create_dir(&dir).unwrap();
    let record = write_record(tmp.path(), "0000a11e", &dir);
    let lock_holder = holder(Some(&record), Path::new("x"), &tmp.path().join("ready"));

    let o = clean(tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains(&format!(
            "left, in use: directory {} (run 0000a11e of pid 1 started",
            dir.display()
        )),
        "{t}"
    );
    assert!(dir.exists() && record.exists(), "{t}");

    // SIGKILL: no chance to clean up; the kernel lets go of the lock.
    kill(lock_holder);
    let o = clean(tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains(&format!(
            "removed: directory {} (run 0000a11e",
            dir.display()
        )),
        "{t}"
    );
    assert!(!dir.exists(), "{t}");
    assert!(!record.exists(), "{t}");
}

#[test]
fn what_a_process_still_uses_is_not_removed_and_the_exit_code_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dra-e2e-busy01");
    std::fs::create_dir(&dir).unwrap();
    let record = write_record(tmp.path(), "0000b05e", &dir);
    let user = holder(None, &dir, &tmp.path().join("ready"));

    let o = clean(tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!(
            "could not remove: directory {} (run 0000b05e of pid 1 started 2026-01-01T00:00:00Z, gone): still used by pid {}",
            dir.display(),
            user.id()
        )),
        "{t}"
    );
    assert!(dir.exists() && record.exists(), "{t}");

    kill(user);
    let o = clean(tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(!dir.exists() && !record.exists(), "{t}");
}

#[test]
fn a_dir_without_a_record_is_named_and_left() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dra-e2e-kept01");
    std::fs::create_dir(&dir).unwrap();
    let o = clean(tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains(&format!("left: directory {} (no record", dir.display())),
        "{t}"
    );
    assert!(dir.exists());
}

#[test]
fn clean_takes_no_arguments() {
    let o = Command::new(env!("CARGO_BIN_EXE_dra-e2e"))
        .args(["clean", "--everything"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--everything"), "{}", text(&o));
}
