//! What can go wrong starting, running or stopping the local cluster, with
//! the end of the failing component's log quoted: a component's own words
//! are what a user needs to tell a bad gate from a taken port.
use std::path::PathBuf;
use std::time::Duration;

use super::MissingBinaries;
use crate::host::leftovers;
use crate::host::pki;
use crate::host::process::{LOG_TAIL_LINES, ManagedProcess};

/// Everything that can go wrong starting or stopping a local cluster.
#[derive(Debug, thiserror::Error)]
pub enum LocalClusterError {
    #[error(transparent)]
    Binaries(#[from] MissingBinaries),
    #[error("creating the cluster directory in {base}: {source}")]
    TempDir {
        base: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("preparing {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating the cluster's certificates: {0}")]
    Pki(#[from] pki::PkiError),
    #[error("finding free loopback ports: {0}")]
    Ports(#[source] std::io::Error),
    #[error("loading the admin kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("creating a client for {what}: {source}")]
    Client {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("starting {component} ({binary}): {source}")]
    Spawn {
        component: String,
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{component} exited ({status}); {log}")]
    Exited {
        component: String,
        status: String,
        log: Box<LogTail>,
    },
    #[error("{component} was not ready within {timeout:?} ({probe}: {last}); {log}")]
    NotReady {
        component: String,
        timeout: Duration,
        probe: String,
        last: String,
        log: Box<LogTail>,
    },
    #[error("{component} is not running in this cluster")]
    NotRunning { component: String },
    #[error("recording what the cluster makes on the host: {0}")]
    Record(#[from] leftovers::LeftoversError),
    #[error("removing the cluster directory {path}: {source}")]
    Cleanup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The end of a component's log, quoted in errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    pub path: PathBuf,
    pub tail: String,
}

impl LogTail {
    pub(super) fn of(p: &ManagedProcess) -> Box<Self> {
        Box::new(Self {
            path: p.log_path().to_owned(),
            tail: p.log_tail(LOG_TAIL_LINES),
        })
    }
}

impl std::fmt::Display for LogTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "last lines of {}:\n{}", self.path.display(), self.tail)
    }
}

impl LocalClusterError {
    /// A component could not bind its port: another process took one of the
    /// ports chosen as free in the short window before the component bound it.
    pub(super) fn is_port_conflict(&self) -> bool {
        match self {
            LocalClusterError::Exited { log, .. } => log.tail.contains("address already in use"),
            _ => false,
        }
    }
}

pub(super) fn exited_error(p: &ManagedProcess, status: String) -> LocalClusterError {
    LocalClusterError::Exited {
        component: p.component().to_owned(),
        status,
        log: LogTail::of(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited_with(tail: &str) -> LocalClusterError {
        LocalClusterError::Exited {
            component: "etcd".into(),
            status: "exit status: 1".into(),
            log: Box::new(LogTail {
                path: "/x/etcd.log".into(),
                tail: tail.into(),
            }),
        }
    }

    #[test]
    fn only_bind_failures_are_retried() {
        assert!(
            exited_with("listen tcp 127.0.0.1:4001: bind: address already in use")
                .is_port_conflict()
        );
        assert!(!exited_with("unrecognized feature gate: X").is_port_conflict());
    }

    #[test]
    fn errors_quote_the_log() {
        let msg = exited_with("line one\nline two").to_string();
        assert_eq!(
            msg,
            "etcd exited (exit status: 1); last lines of /x/etcd.log:\nline one\nline two"
        );
    }
}
