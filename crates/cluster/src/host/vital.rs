//! Processes a run cannot do without (control-plane components, real
//! nodes' process 1), and the message that names the first one to die.
use std::path::PathBuf;
use std::process::ExitStatus;

use tokio::sync::watch;

use super::process::{LOG_TAIL_LINES, ManagedProcess, log_tail};

/// A process the cluster cannot do without, watched during a run: when it
/// exits, everything that depends on it is lost.
pub struct Vital {
    /// What it is, e.g. `etcd` or `real node dra-e2e-real-0`.
    pub what: String,
    pub exit: watch::Receiver<Option<ExitStatus>>,
    /// Logs whose last lines say why it ended.
    pub logs: Vec<PathBuf>,
}

impl Vital {
    /// A process that is vital on its own, with its one log: its life,
    /// which a restart on purpose does not end
    /// ([`ManagedProcess::life_watch`]).
    pub fn of(p: &ManagedProcess) -> Vital {
        Vital {
            what: p.component().to_owned(),
            exit: p.life_watch(),
            logs: vec![p.log_path().to_owned()],
        }
    }

    /// Waits until the first of `vitals` exits and describes it: what, exit
    /// status, the last lines of its logs. Pending forever if none does.
    pub async fn first_exit(vitals: Vec<Vital>) -> String {
        if vitals.is_empty() {
            return std::future::pending().await;
        }
        let waits = vitals.into_iter().map(|mut v| {
            Box::pin(async move {
                let status = match v.exit.wait_for(Option::is_some).await {
                    Ok(s) => *s,
                    Err(_) => None,
                };
                (v.what, v.logs, status)
            })
        });
        let ((what, logs, status), _, _) = futures::future::select_all(waits).await;
        let status = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
        let tails: Vec<String> = logs
            .iter()
            .map(|l| {
                format!(
                    "last lines of {}:\n{}",
                    l.display(),
                    log_tail(l, LOG_TAIL_LINES)
                )
            })
            .collect();
        format!("{what} exited ({status}); {}", tails.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[tokio::test]
    async fn the_first_vital_to_exit_is_named_with_its_status_and_log() {
        let tmp = tempfile::tempdir().unwrap();
        let spawn = |name: &str, script: &str| {
            let log = tmp.path().join(format!("{name}.log"));
            ManagedProcess::spawn(
                name,
                Path::new("/bin/sh"),
                vec!["-c".into(), script.into()],
                &log,
            )
            .unwrap()
        };
        let long = spawn("steady", "sleep 30");
        let dies = spawn("etcd", "echo disk full; exit 3");
        let vitals = [&long, &dies].iter().map(|p| Vital::of(p)).collect();
        let said = Vital::first_exit(vitals).await;
        assert!(said.starts_with("etcd exited (exit status: 3)"), "{said}");
        assert!(said.contains("disk full"), "{said}");
        long.signal(dra_e2e_sys::Signal::Kill);
    }
}
