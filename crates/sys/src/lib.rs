//! The operating system calls the other crates make, as safe functions named
//! after what they do: signals and child processes, mounts, the terminal,
//! who the process runs as. Every `unsafe` of the workspace's libraries is
//! here, each with what makes it sound.
//!
//! Most calls go through `rustix`, whose functions are already safe; `libc`
//! is left only where rustix 1.x has no safe form: `kill(-1, …)` (rustix
//! signals one process or one group, never "every process but me"), signal
//! masks and `sigtimedwait` (rustix keeps them in its `runtime` module,
//! unsafe and meant for libc-less programs), and resetting the signal mask
//! between `fork` and `exec`.
//!
//! A crate of its own on the ground floor, beside `dra-e2e-conn` and
//! `dra-e2e-agent`, rather than a module of the agent: the agent (process 1
//! of real nodes, the proxy agent) needs it, and so do the cluster crate
//! (supervised processes, run records) and the runner (terminal width,
//! build locks), which have no business reaching into the agent for the
//! operating system. It depends on nothing of the workspace, and on nothing
//! but `rustix` and `libc`, so the agent stays as small as it was.
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use rustix::process::{Pid, WaitId, WaitIdOptions, WaitOptions};

// ------------------------------------------------------------ processes

/// The signals the suite sends and waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGTERM: stop, cleaning up.
    Term,
    /// SIGINT: a terminal's Ctrl-C.
    Int,
    /// SIGHUP: the terminal hung up.
    Hup,
    /// SIGQUIT: a terminal's Ctrl-\.
    Quit,
    /// SIGKILL: end now.
    Kill,
    /// SIGUSR1: a real node's process 1 reboots the node.
    Usr1,
    /// SIGUSR2: a real node's process 1 reads a request to stop, start or
    /// restart one of its daemons.
    Usr2,
    /// SIGCHLD: a child changed state.
    Child,
}

impl Signal {
    const ALL: [Signal; 8] = [
        Signal::Term,
        Signal::Int,
        Signal::Hup,
        Signal::Quit,
        Signal::Kill,
        Signal::Usr1,
        Signal::Usr2,
        Signal::Child,
    ];

    fn rustix(self) -> rustix::process::Signal {
        use rustix::process::Signal as S;
        match self {
            Signal::Term => S::TERM,
            Signal::Int => S::INT,
            Signal::Hup => S::HUP,
            Signal::Quit => S::QUIT,
            Signal::Kill => S::KILL,
            Signal::Usr1 => S::USR1,
            Signal::Usr2 => S::USR2,
            Signal::Child => S::CHILD,
        }
    }

    /// The signal's number, as [`ExitStatus::signal`] gives it.
    pub fn number(self) -> i32 {
        self.rustix().as_raw()
    }

    /// The signal numbered `n`, if it is one of these.
    pub fn from_number(n: i32) -> Option<Signal> {
        Self::ALL.into_iter().find(|s| s.number() == n)
    }

    /// The status of a process this signal ended.
    pub fn exit_status(self) -> ExitStatus {
        ExitStatus::from_raw(self.number())
    }
}

/// A process ID as signals need it: 0 and negative numbers mean groups or
/// every process to `kill(2)`, so they are refused here.
fn pid(pid: u32) -> io::Result<Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{pid} is not a process ID"),
            )
        })
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: u32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        self::pid(pid)?,
        signal.rustix(),
    )?)
}

/// Sends `signal` to every process of the group `pgid` (a child spawned with
/// `process_group(0)` leads a group whose ID is its PID).
pub fn kill_group(pgid: u32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(
        pid(pgid)?,
        signal.rustix(),
    )?)
}

/// Sends `signal` to every process this one may signal, except itself:
/// `kill(-1, signal)`. Only process 1 of a PID namespace should: there it
/// reaches exactly the other processes of the namespace.
pub fn kill_all_others(signal: Signal) -> io::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(-1, signal.number()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the process runs as root (effective UID 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The process's effective UID.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Makes the calling thread, and only it, run as user `uid` and group `gid`
/// with no supplementary group, for good: `setgroups`, `setgid` and `setuid`
/// as the kernel has them, per thread (the C library's wrappers change every
/// thread of the process). Needs root; call it from a thread of its own
/// that ends when its work is done, never from a pool's thread that other
/// work reuses. The kernel checks everything the thread does from then on
/// (paths, a socket's peer credentials) as that user's. Changing the
/// effective user also makes the whole process non-dumpable, as it stays.
pub fn drop_thread_to_user(uid: u32, gid: u32) -> io::Result<()> {
    use rustix::thread::{set_thread_gid, set_thread_groups, set_thread_uid};
    // Groups first: once the user is not root, they cannot change.
    set_thread_groups(&[])?;
    set_thread_gid(rustix::process::Gid::from_raw(gid))?;
    set_thread_uid(rustix::process::Uid::from_raw(uid))?;
    Ok(())
}

/// Makes the child `cmd` spawns die with SIGKILL when the thread that
/// spawned it ends (`PR_SET_PDEATHSIG`), so it cannot outlive the runner
/// even when the runner is killed without a chance to clean up. The signal
/// follows the spawning *thread*, so spawn from a thread that lives as long
/// as the child. A child whose parent died between `fork` and the `prctl`
/// would never get the signal, so it refuses to start (ESRCH).
///
/// Works on tokio's commands too, through `as_std_mut`.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = Pid::from_raw(std::process::id() as i32);
    let hook = move || -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if rustix::process::getppid() != parent {
            return Err(rustix::io::Errno::SRCH.into());
        }
        Ok(())
    };
    // SAFETY: the hook runs between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (rustix
    // calls the kernel directly) and allocates nothing; the error it may
    // return is built from an OS error code, without allocating.
    unsafe { cmd.pre_exec(hook) }
}

/// Starts the child `cmd` spawns with no signal blocked, whatever this
/// process blocks (a real node's process 1 blocks the signals it takes with
/// [`SignalSet::wait`], and a blocked mask is inherited through `exec`).
pub fn unblock_signals_on_exec(cmd: &mut Command) -> &mut Command {
    // SAFETY: the hook runs between fork and exec and makes only
    // async-signal-safe calls (sigemptyset, sigprocmask) on a set on its own
    // stack, which sigemptyset initialises before use.
    unsafe {
        cmd.pre_exec(|| {
            let mut empty = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(empty.as_mut_ptr());
            if libc::sigprocmask(libc::SIG_SETMASK, empty.as_ptr(), std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Reaps the child `pid` if it has ended (`waitpid(pid, WNOHANG)`); `None`
/// while it runs.
pub fn try_wait(pid: u32) -> io::Result<Option<ExitStatus>> {
    let status = rustix::process::waitpid(Some(self::pid(pid)?), WaitOptions::NOHANG)?;
    Ok(status.map(|(_, s)| ExitStatus::from_raw(s.as_raw())))
}

/// Reaps any child that has ended (`waitpid(-1, WNOHANG)`): its PID and
/// status; `None` while every child runs. An error (ECHILD) when there is
/// no child left.
pub fn try_wait_any() -> io::Result<Option<(u32, ExitStatus)>> {
    let status = rustix::process::wait(WaitOptions::NOHANG)?;
    Ok(status.map(|(pid, s)| {
        (
            pid.as_raw_nonzero().get().unsigned_abs(),
            ExitStatus::from_raw(s.as_raw()),
        )
    }))
}

/// Blocks until the child `pid` has ended, without reaping it
/// (`waitid(P_PID, pid, WEXITED | WNOWAIT)`): its PID stays taken until the
/// caller reaps it, so it cannot be given to another process meanwhile.
pub fn wait_ended_keep_zombie(pid: u32) -> io::Result<()> {
    let pid = self::pid(pid)?;
    loop {
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => return other.map(drop).map_err(Into::into),
        }
    }
}

// ------------------------------------------------------------ signals

/// Signals blocked for the whole process, to be taken one at a time with
/// [`SignalSet::wait`] instead of by handlers.
pub struct SignalSet {
    set: libc::sigset_t,
    signals: Vec<Signal>,
}

impl std::fmt::Debug for SignalSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SignalSet").field(&self.signals).finish()
    }
}

/// Blocks `signals` (`sigprocmask(SIG_BLOCK)`), so that none is lost or
/// handled before [`SignalSet::wait`] takes it. Call it before any thread
/// or child exists: threads started later inherit the mask, children too
/// unless they are started with [`unblock_signals_on_exec`].
pub fn block_signals(signals: &[Signal]) -> io::Result<SignalSet> {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set before sigaddset and
    // sigprocmask read it; all pointers are to that local set.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for s in signals {
            libc::sigaddset(set.as_mut_ptr(), s.number());
        }
        if libc::sigprocmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SignalSet {
            set: set.assume_init(),
            signals: signals.to_vec(),
        })
    }
}

impl SignalSet {
    /// Takes one pending signal of the set, waiting at most `timeout`
    /// (`sigtimedwait`); `None` when none came (or the wait was interrupted).
    pub fn wait(&self, timeout: Duration) -> Option<Signal> {
        let timeout = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        // SAFETY: the set is initialised, the timeout is a valid timespec,
        // and a null siginfo pointer is allowed.
        let n = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &timeout) };
        Signal::from_number(n)
    }
}

// ------------------------------------------------------------ mounts

fn c_string(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Mounts a fresh tmpfs on `dir` (`nosuid,nodev`), with `options` such as
/// `mode=0755`.
pub fn mount_tmpfs(dir: &Path, options: &str) -> io::Result<()> {
    use rustix::mount::MountFlags;
    let options = c_string(options)?;
    Ok(rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        options.as_c_str(),
    )?)
}

/// Mounts an overlay on `target` with overlayfs's `options`
/// (`lowerdir=…,upperdir=…,workdir=…`).
pub fn mount_overlay(target: &Path, options: &str) -> io::Result<()> {
    let options = c_string(options)?;
    Ok(rustix::mount::mount(
        "overlay",
        target,
        "overlay",
        rustix::mount::MountFlags::empty(),
        options.as_c_str(),
    )?)
}

/// Binds `source` (a file or a directory) over `target`.
pub fn mount_bind(source: &Path, target: &Path) -> io::Result<()> {
    Ok(rustix::mount::mount_bind(source, target)?)
}

/// Makes the mount at `target` and every mount below it shared
/// (`mount --make-rshared`).
pub fn make_shared_recursive(target: &Path) -> io::Result<()> {
    use rustix::mount::MountPropagationFlags as P;
    Ok(rustix::mount::mount_change(target, P::SHARED | P::REC)?)
}

/// Detaches the mount at `dir` now; the kernel cleans it up once unused
/// (`umount2(MNT_DETACH)`).
pub fn unmount_detached(dir: &Path) -> io::Result<()> {
    Ok(rustix::mount::unmount(
        dir,
        rustix::mount::UnmountFlags::DETACH,
    )?)
}

// ------------------------------------------------------------ files

/// Opens `path` with `options`, refusing to follow a symbolic link in its
/// last component (`O_NOFOLLOW`): ELOOP when it is one.
pub fn open_no_follow(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let no_follow = rustix::fs::OFlags::NOFOLLOW.bits();
    options
        .custom_flags(i32::try_from(no_follow).unwrap_or_default())
        .open(path)
}

// ------------------------------------------------------------ the terminal and stdout

/// The width in columns of the terminal stdout is, or `None` when stdout is
/// no terminal (a pipe, a file) or the terminal does not say.
pub fn terminal_width() -> Option<u16> {
    terminal_width_of(io::stdout())
}

/// The width in columns of the terminal `fd` is (`TIOCGWINSZ`).
pub fn terminal_width_of(fd: impl AsFd) -> Option<u16> {
    rustix::termios::tcgetwinsize(fd)
        .ok()
        .map(|w| w.ws_col)
        .filter(|&c| c > 0)
}

/// Whether stdout is a pipe or a socket: something a reader holds, which
/// [`wait_stdout_reader_gone`] can watch.
pub fn stdout_is_stream() -> bool {
    use rustix::fs::FileType;
    rustix::fs::fstat(io::stdout()).is_ok_and(|st| {
        matches!(
            FileType::from_raw_mode(st.st_mode),
            FileType::Fifo | FileType::Socket
        )
    })
}

/// Blocks until stdout reports an error or a hang-up, as a pipe or socket
/// does once its reader closed it: `Ok(true)` then, `Ok(false)` for any
/// other wake-up. Never returns while the reader keeps its end open.
pub fn wait_stdout_reader_gone() -> io::Result<bool> {
    wait_reader_gone(io::stdout())
}

fn wait_reader_gone(fd: impl AsFd) -> io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        // No events asked for: only POLLERR, POLLHUP and POLLNVAL come.
        let mut fds = [PollFd::new(&fd, PollFlags::empty())];
        match poll(&mut fds, None) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {
                return Ok(fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP));
            }
        }
    }
}

#[cfg(test)]
// The children are reaped through this module's own waits, not `Child::wait`.
#[allow(clippy::zombie_processes)]
mod tests {
    use super::*;
    use std::process::Stdio;
    use std::time::Instant;

    #[test]
    fn a_file_is_no_terminal() {
        let f = tempfile::tempfile().unwrap();
        assert_eq!(terminal_width_of(&f), None);
    }

    #[test]
    fn root_is_effective_uid_0() {
        assert_eq!(is_root(), effective_uid() == 0);
        let me = std::fs::metadata("/proc/self").unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::uid(&me),
            effective_uid(),
            "/proc/self belongs to the effective user"
        );
    }

    /// The `Uid:` and `Gid:` lines of the calling thread's status.
    fn thread_ids() -> (String, String, String) {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("no {key} in {status}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        (line("Uid:"), line("Gid:"), line("Groups:"))
    }

    #[test]
    fn a_thread_dropped_to_another_user_leaves_the_others_as_they_were() {
        let before = thread_ids();
        let dropped = std::thread::spawn(|| {
            drop_thread_to_user(65534, 65534).map(|()| (effective_uid(), thread_ids()))
        })
        .join()
        .unwrap();
        if is_root() {
            let (uid, (uids, gids, groups)) = dropped.unwrap();
            assert_eq!(uid, 65534);
            // Real, effective, saved and file system IDs alike: no way back.
            assert_eq!(uids, "65534 65534 65534 65534");
            assert_eq!(gids, "65534 65534 65534 65534");
            assert_eq!(groups, "");
        } else {
            assert_eq!(dropped.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        }
        assert_eq!(thread_ids(), before, "this thread kept its own");
    }

    #[test]
    fn signals_have_their_numbers() {
        assert_eq!(Signal::Kill.number(), 9);
        assert_eq!(Signal::Term.number(), 15);
        assert_eq!(Signal::Hup.number(), 1);
        assert_eq!(Signal::Quit.number(), 3);
        for s in Signal::ALL {
            assert_eq!(Signal::from_number(s.number()), Some(s));
        }
        assert_eq!(Signal::from_number(-1), None);
        assert_eq!(Signal::Kill.exit_status().signal(), Some(9));
    }

    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Polls [`try_wait`] until the child ends.
    fn reap(pid: u32) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = try_wait(pid).unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "{pid} never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_killed_child_reads_back_as_killed_by_that_signal() {
        let child = sleeper();
        assert_eq!(try_wait(child.id()).unwrap(), None, "still running");
        kill(child.id(), Signal::Term).unwrap();
        let status = reap(child.id());
        assert_eq!(status.signal(), Some(Signal::Term.number()));
        assert_eq!(status.code(), None);
        // Reaped: no such child any more.
        assert!(try_wait(child.id()).is_err());
    }

    #[test]
    fn a_group_is_signalled_whole_and_exit_codes_decode() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "sleep 600 & wait"])
            .stdin(Stdio::null())
            .process_group(0);
        let child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        kill_group(child.id(), Signal::Kill).unwrap();
        assert_eq!(reap(child.id()).signal(), Some(9));

        let child = Command::new("/bin/sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        wait_ended_keep_zombie(child.id()).unwrap();
        // Ended but not reaped: the zombie still holds its PID.
        assert!(std::path::Path::new(&format!("/proc/{}", child.id())).exists());
        assert_eq!(reap(child.id()).code(), Some(3));
    }

    #[test]
    fn no_process_id_0_or_beyond() {
        for bad in [0, u32::MAX] {
            let e = kill(bad, Signal::Term).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
    }

    #[test]
    fn a_child_started_to_die_with_its_parent_runs() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 4"]);
        die_with_parent(&mut cmd);
        unblock_signals_on_exec(&mut cmd);
        assert_eq!(cmd.status().unwrap().code(), Some(4));
    }

    #[test]
    fn a_closed_pipe_wakes_its_writer() {
        let (reader, writer) = std::io::pipe().unwrap();
        let watch = std::thread::spawn(move || wait_reader_gone(&writer));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!watch.is_finished(), "woke while the reader was there");
        drop(reader);
        assert!(watch.join().unwrap().unwrap());
    }

    #[test]
    fn no_follow_refuses_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let open = |p: &Path| open_no_follow(File::options().read(true), p);
        assert!(open(&file).is_ok());
        assert_eq!(open(&link).unwrap_err().raw_os_error(), Some(libc::ELOOP));
    }
}
