//! Replacing an agent left behind for the same socket.
//!
//! An exec session can end without its process: when containerd restarts,
//! the shim keeps the exec'd agent alive and holding its output pipe, so the
//! agent never learns that nobody reads it any more. It keeps the proxy port
//! and the socket, and the agent the runner starts in its place could bind
//! neither. The newest agent for a socket is the one the runner talks to, so
//! it ends any older one first (the same rule as a stale socket file, which
//! a new agent removes).
use std::path::Path;
use std::time::{Duration, Instant};

use dra_e2e_sys::{self as sys, Signal};
use tracing::{info, warn};

/// How long an older agent gets to remove its socket and exit after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// How often its exit is looked for meanwhile.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// Whether `argv` is a pairing agent serving `endpoint`: `proxy-agent`
/// among its words (`dra-e2e proxy-agent` or `dra-e2e-agent proxy-agent`)
/// and `--endpoint <endpoint>` or `--endpoint=<endpoint>`.
pub fn serves(argv: &[String], endpoint: &str) -> bool {
    if !argv.iter().any(|a| a == "proxy-agent") {
        return false;
    }
    argv.windows(2)
        .any(|w| w[0] == "--endpoint" && w[1] == endpoint)
        || argv
            .iter()
            .any(|a| a.strip_prefix("--endpoint=") == Some(endpoint))
}

/// Ends every other process of this user that is an agent for `endpoint`
/// and waits until each is gone (SIGKILL after [`TERM_GRACE`]); returns
/// the ones it found.
pub fn replace_older(endpoint: &str) -> Vec<u32> {
    let me = std::process::id();
    let older = older_agents(Path::new("/proc"), endpoint, me);
    for &pid in &older {
        info!(pid, endpoint, "ending an older agent of the same socket");
        if sys::kill(pid, Signal::Term).is_err() {
            continue; // gone already, or not ours to signal
        }
        let deadline = Instant::now() + TERM_GRACE;
        while alive(pid) {
            if Instant::now() >= deadline {
                warn!(
                    pid,
                    "the older agent did not exit after SIGTERM; killing it"
                );
                let _ = sys::kill(pid, Signal::Kill);
                break;
            }
            std::thread::sleep(EXIT_POLL);
        }
    }
    older
}

fn older_agents(proc: &Path, endpoint: &str, me: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(proc.join(pid.to_string()).join("cmdline"))
                .map(|raw| {
                    let argv: Vec<String> = raw
                        .split(|b| *b == 0)
                        .filter(|w| !w.is_empty())
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect();
                    serves(&argv, endpoint)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// A zombie counts as gone: it holds no socket or port any more.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn an_agent_is_recognised_by_its_subcommand_and_endpoint() {
        let e = "/var/lib/kubelet/plugins/d/dra.sock";
        assert!(serves(
            &argv(&format!(
                "/dra-e2e-agent proxy-agent --endpoint {e} --proxy-endpoint tcp://:9001"
            )),
            e
        ));
        assert!(serves(
            &argv(&format!(
                "dra-e2e proxy-agent --endpoint={e} --proxy-endpoint unix:///x"
            )),
            e
        ));
        // Another socket, another program, or the connect mode.
        assert!(!serves(
            &argv("/dra-e2e-agent proxy-agent --endpoint /other.sock --proxy-endpoint tcp://:9001"),
            e
        ));
        assert!(!serves(
            &argv(&format!("/hostpathplugin --endpoint={e}")),
            e
        ));
        assert!(!serves(
            &argv(&format!("/dra-e2e-agent proxy-agent --connect {e}")),
            e
        ));
    }

    /// Keeps the shell itself running (a lone `sleep` would be exec'd in its
    /// place, command line and all).
    const LOOP: &str = "while :; do sleep 0.05; done";

    /// Children of a test, killed and reaped however the test ends: a
    /// failed assertion must not leave them running (nor holding the output
    /// pipe of whoever runs the tests).
    struct Children(Vec<std::process::Child>);

    impl Drop for Children {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    #[test]
    fn an_older_agent_of_the_same_socket_is_ended_and_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = dir.path().join("plugin.sock").display().to_string();
        let other_endpoint = dir.path().join("elsewhere.sock").display().to_string();
        let spawn = |e: &str| {
            // A stand-in whose command line names the endpoint as an agent's does.
            std::process::Command::new("sh")
                .args(["-c", LOOP, "proxy-agent", "--endpoint", e])
                .spawn()
                .unwrap()
        };
        let mut children = Children(vec![spawn(&endpoint), spawn(&other_endpoint)]);
        let (older, other) = (children.0[0].id(), children.0[1].id());
        let cmdline = |pid: u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                .unwrap_or_else(|e| format!("unreadable: {e}"))
        };
        let seen = cmdline(older);
        let ended = replace_older(&endpoint);
        assert_eq!(
            ended,
            [older],
            "the older agent {older} (command line {seen:?}) was not the one found"
        );
        // Ended by SIGTERM, not left running.
        let status = children.0[0]
            .try_wait()
            .unwrap()
            .unwrap_or_else(|| panic!("the older agent still runs: {}", cmdline(older)));
        assert!(!status.success());
        assert!(
            children.0[1].try_wait().unwrap().is_none(),
            "another socket's agent ({other}) was ended"
        );
    }
}
