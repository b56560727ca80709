//! A child process the runner supervises: a control-plane component, or a
//! real node's process 1.
//!
//! Each child is spawned *and* reaped by a dedicated thread. Two reasons:
//! `PR_SET_PDEATHSIG` fires when the thread that forked the child ends (not
//! the process), so the forking thread must live exactly as long as the child;
//! and a blocking `wait()` on that thread gives an exit event without polling.
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dra_e2e_sys::{self as sys, Signal};
use tokio::sync::watch;

/// Log lines quoted in errors about a process.
pub const LOG_TAIL_LINES: usize = 40;

/// Exit status shared between the reaper thread and everyone waiting.
struct ExitCell {
    status: Mutex<Option<ExitStatus>>,
    changed: Condvar,
    tx: watch::Sender<Option<ExitStatus>>,
    /// Set when the process is stopped to be started again: its exit is
    /// then not its life's end ([`ManagedProcess::life_watch`]).
    restarting: AtomicBool,
    /// The life of the component: shared by the processes started again in
    /// its place.
    life: Arc<watch::Sender<Option<ExitStatus>>>,
}

impl ExitCell {
    fn get(&self) -> Option<ExitStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running (or exited) component.
pub struct ManagedProcess {
    component: String,
    pid: u32,
    log_path: PathBuf,
    binary: PathBuf,
    args: Vec<OsString>,
    exit: Arc<ExitCell>,
    reaper: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ManagedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedProcess")
            .field("component", &self.component)
            .field("pid", &self.pid)
            .field("exit", &self.exit.get())
            .finish()
    }
}

impl ManagedProcess {
    /// Starts `binary args…` with stdout and stderr appended to `log_path`.
    ///
    /// The child gets its own process group, so a Ctrl-C in the terminal
    /// reaches only the runner, which then stops the cluster in order; and
    /// `PR_SET_PDEATHSIG(SIGKILL)`, so it dies with the runner even when the
    /// runner is killed without a chance to clean up.
    pub fn spawn(
        component: &str,
        binary: &Path,
        args: Vec<OsString>,
        log_path: &Path,
    ) -> io::Result<Self> {
        Self::spawn_with_life(
            component,
            binary,
            args,
            log_path,
            Arc::new(watch::channel(None).0),
        )
    }

    /// Starts the same program with the same arguments and log again, in
    /// the place of this one, which [`ManagedProcess::stop_for_restart`]
    /// stopped: the new process continues its life
    /// ([`ManagedProcess::life_watch`]).
    pub fn spawn_again(&self) -> io::Result<Self> {
        Self::spawn_with_life(
            &self.component,
            &self.binary,
            self.args.clone(),
            &self.log_path,
            self.exit.life.clone(),
        )
    }

    fn spawn_with_life(
        component: &str,
        binary: &Path,
        args: Vec<OsString>,
        log_path: &Path,
        life: Arc<watch::Sender<Option<ExitStatus>>>,
    ) -> io::Result<Self> {
        let log = File::options().create(true).append(true).open(log_path)?;
        let log_err = log.try_clone()?;
        let mut cmd = Command::new(binary);
        cmd.args(args.clone())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        // Spawned on the reaper thread below, which lives as long as the
        // child: the death signal follows the spawning thread.
        sys::die_with_parent(&mut cmd);

        let (tx, _) = watch::channel(None);
        let exit = Arc::new(ExitCell {
            status: Mutex::new(None),
            changed: Condvar::new(),
            tx,
            restarting: AtomicBool::new(false),
            life,
        });
        let (spawned_tx, spawned_rx) = std::sync::mpsc::channel::<io::Result<u32>>();
        let reaper_exit = exit.clone();
        let name = component.to_owned();
        let reaper = std::thread::Builder::new()
            .name(format!("reap-{component}"))
            .spawn(move || {
                let mut child = match cmd.spawn() {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = spawned_tx.send(Err(e));
                        return;
                    }
                };
                let _ = spawned_tx.send(Ok(child.id()));
                // Wait for the exit but leave the zombie in place, then reap
                // it under the lock: while the lock shows no status, the pid
                // cannot have been recycled, so `signal` never hits a stranger.
                let _ = sys::wait_ended_keep_zombie(child.id());
                let mut guard = reaper_exit.status.lock().unwrap_or_else(|e| e.into_inner());
                let status = match child.wait() {
                    Ok(status) => status,
                    Err(e) => {
                        // Only possible if someone else reaped our child;
                        // report it as killed so waiters do not hang.
                        tracing::error!(component = %name, error = %e, "waiting for process failed");
                        Signal::Kill.exit_status()
                    }
                };
                *guard = Some(status);
                reaper_exit.changed.notify_all();
                reaper_exit.tx.send_replace(Some(status));
                if !reaper_exit.restarting.load(Ordering::SeqCst) {
                    reaper_exit.life.send_replace(Some(status));
                }
                drop(guard);
                tracing::debug!(component = %name, %status, "process exited");
            })?;
        let pid = match spawned_rx.recv() {
            Ok(Ok(pid)) => pid,
            Ok(Err(e)) => {
                let _ = reaper.join();
                return Err(e);
            }
            Err(_) => {
                let _ = reaper.join();
                return Err(io::Error::other("process reaper thread ended unexpectedly"));
            }
        };
        tracing::info!(component, pid, log = %log_path.display(), "started");
        Ok(Self {
            component: component.to_owned(),
            pid,
            log_path: log_path.to_owned(),
            binary: binary.to_owned(),
            args,
            exit,
            reaper: Some(reaper),
        })
    }

    pub fn component(&self) -> &str {
        &self.component
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The exit status, if the process has ended.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit.get()
    }

    /// A receiver that changes to `Some` when the process ends.
    pub fn exit_watch(&self) -> watch::Receiver<Option<ExitStatus>> {
        self.exit.tx.subscribe()
    }

    /// A receiver that changes to `Some` when the component ends: when this
    /// process exits, or one started again in its place
    /// ([`ManagedProcess::spawn_again`]), unless it was stopped to be
    /// started again. What a run watches of a process it cannot do
    /// without.
    pub fn life_watch(&self) -> watch::Receiver<Option<ExitStatus>> {
        self.exit.life.subscribe()
    }

    /// Asks the process to end (SIGTERM) so as to start it again: its exit
    /// does not end its life ([`ManagedProcess::life_watch`]). Returns at
    /// once; wait on [`ManagedProcess::exit_watch`].
    pub fn stop_for_restart(&self) {
        self.exit.restarting.store(true, Ordering::SeqCst);
        self.signal(Signal::Term);
    }

    /// Sends `signal` to the child's process group unless it has been reaped
    /// (after reaping, the pid may belong to someone else).
    pub fn signal(&self, signal: Signal) {
        let guard = self.exit.status.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_some() {
            return;
        }
        // The reaper reaps only while holding this lock, so the pid is still
        // ours here; the group id equals the pid because of `process_group(0)`.
        let _ = sys::kill_group(self.pid, signal);
        drop(guard);
    }

    /// Blocks until the process has exited or `deadline` passes.
    pub fn wait_until(&self, deadline: Instant) -> Option<ExitStatus> {
        let mut guard = self.exit.status.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(status) = *guard {
                return Some(status);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            guard = self
                .exit
                .changed
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The last `max_lines` lines of the component's log.
    pub fn log_tail(&self, max_lines: usize) -> String {
        log_tail(&self.log_path, max_lines)
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        // Normally the cluster has stopped the process gracefully already;
        // this is the backstop for early-return paths.
        if self.exit_status().is_none() {
            self.signal(Signal::Kill);
            if self
                .wait_until(Instant::now() + Duration::from_secs(10))
                .is_none()
            {
                tracing::error!(component = %self.component, pid = self.pid, "process did not die after SIGKILL");
                // Joining would hang; leave the reaper thread detached.
                return;
            }
        }
        if let Some(reaper) = self.reaper.take() {
            let _ = reaper.join();
        }
    }
}

/// Stops a group of processes: SIGTERM to all, then SIGKILL to whoever is still
/// running after `grace`. Returns the components that needed SIGKILL.
pub fn stop_all(processes: &[&ManagedProcess], grace: Duration) -> Vec<String> {
    for p in processes {
        p.signal(Signal::Term);
    }
    let deadline = Instant::now() + grace;
    let mut killed = Vec::new();
    for p in processes {
        if p.wait_until(deadline).is_none() {
            tracing::warn!(component = %p.component, pid = p.pid, ?grace, "did not stop after SIGTERM; sending SIGKILL");
            p.signal(Signal::Kill);
            killed.push(p.component.clone());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in processes {
        if p.wait_until(deadline).is_none() {
            tracing::error!(component = %p.component, pid = p.pid, "still running after SIGKILL");
        }
    }
    killed
}

/// Reads the end of a log file without loading all of it.
pub fn log_tail(path: &Path, max_lines: usize) -> String {
    const MAX_BYTES: u64 = 16 * 1024;
    let read = || -> io::Result<String> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(MAX_BYTES)))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(max_lines)..].join("\n")
        }
        Err(e) => format!("(could not read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<OsString> {
        vec!["-c".into(), script.into()]
    }

    #[test]
    fn exit_is_observed_and_log_captured() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("x.log");
        let p = ManagedProcess::spawn(
            "x",
            Path::new("/bin/sh"),
            sh("echo hello; echo oops >&2; exit 3"),
            &log,
        )
        .unwrap();
        let status = p
            .wait_until(Instant::now() + Duration::from_secs(30))
            .unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(p.log_tail(1), "oops");
        assert_eq!(p.log_tail(10), "hello\noops");
    }

    #[test]
    fn stop_escalates_to_sigkill_for_a_process_ignoring_sigterm() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("x.log");
        // The shell reports readiness only after the trap is installed, so
        // SIGTERM cannot arrive before it is ignored.
        let p = ManagedProcess::spawn(
            "stubborn",
            Path::new("/bin/sh"),
            sh("trap '' TERM; echo ready; while :; do sleep 1; done"),
            &log,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&log).unwrap().contains("ready") {
            assert!(Instant::now() < deadline, "shell never got ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        let killed = stop_all(&[&p], Duration::from_millis(300));
        assert_eq!(killed, vec!["stubborn".to_string()]);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&p.exit_status().unwrap()),
            Some(Signal::Kill.number())
        );
    }

    #[tokio::test]
    async fn a_process_started_again_continues_its_life() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("x.log");
        let first = ManagedProcess::spawn(
            "x",
            Path::new("/bin/sh"),
            sh("echo run; exec sleep 600"),
            &log,
        )
        .unwrap();
        // Each has said it runs before it is stopped.
        let said = |text: &str| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while std::fs::read_to_string(&log).unwrap_or_default() != text {
                assert!(Instant::now() < deadline, "never said {text:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        said("run\n");
        let mut life = first.life_watch();
        let mut exit = first.exit_watch();
        first.stop_for_restart();
        exit.wait_for(Option::is_some).await.unwrap();
        let second = first.spawn_again().unwrap();
        assert_ne!(second.pid(), first.pid());
        drop(first);
        // The planned stop did not end the life; the second's exit does.
        assert_eq!(*life.borrow_and_update(), None);
        // Same program, same log.
        said("run\nrun\n");
        second.signal(Signal::Kill);
        let status = *life.wait_for(Option::is_some).await.unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status.unwrap()),
            Some(Signal::Kill.number())
        );
    }

    #[test]
    fn spawn_failure_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let err = ManagedProcess::spawn(
            "missing",
            Path::new("/nonexistent/binary"),
            vec![],
            &tmp.path().join("m.log"),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
