//! An in-memory log of what a node did, kept for failure artifacts and for
//! tests that need to know the order of things.
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use dra_e2e_proto::health::HealthStatus;

/// Entries kept per node; older ones are dropped.
const CAPACITY: usize = 4096;

/// Something the node did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEventKind {
    PluginRegistered {
        driver: String,
        endpoint: String,
        service: String,
    },
    PluginRejected {
        socket: String,
        error: String,
    },
    PluginDeregistered {
        driver: String,
        endpoint: String,
    },
    PluginConnection {
        driver: String,
        endpoint: String,
        connected: bool,
    },
    Prepared {
        pod: String,
        driver: String,
        claims: Vec<String>,
    },
    PrepareFailed {
        pod: String,
        error: String,
    },
    Unprepared {
        driver: String,
        claims: Vec<String>,
    },
    UnprepareFailed {
        error: String,
    },
    ContainerStarted {
        pod: String,
        container: String,
        restart_count: i32,
    },
    ContainerExited {
        pod: String,
        container: String,
        exit_code: i32,
    },
    /// The runtime could not create the container (a CDI device it cannot
    /// resolve); `error` says why in more detail than the pod status.
    ContainerCreateFailed {
        pod: String,
        container: String,
        error: String,
    },
    PodFinished {
        pod: String,
        phase: String,
    },
    PodDeleted {
        pod: String,
    },
    WipeScheduled {
        driver: String,
    },
    WipeCancelled {
        driver: String,
    },
    SlicesWiped {
        /// `None` for the wipe of all node slices at start.
        driver: Option<String>,
    },
    /// A plugin's health stream changed what the node knows about a device
    /// (a device no longer reported is `Unknown` again).
    DeviceHealth {
        driver: String,
        pool: String,
        device: String,
        health: HealthStatus,
        message: String,
    },
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    pub at: jiff::Timestamp,
    pub kind: NodeEventKind,
}

impl fmt::Display for NodeEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use NodeEventKind::*;
        match self {
            PluginRegistered {
                driver,
                endpoint,
                service,
            } => write!(
                f,
                "registered plugin {driver} at {endpoint} using {service}"
            ),
            PluginRejected { socket, error } => write!(f, "rejected plugin at {socket}: {error}"),
            PluginDeregistered { driver, endpoint } => {
                write!(f, "deregistered plugin {driver} at {endpoint}")
            }
            PluginConnection {
                driver,
                endpoint,
                connected,
            } => write!(
                f,
                "plugin {driver} at {endpoint} {}",
                if *connected {
                    "connected"
                } else {
                    "disconnected"
                }
            ),
            Prepared {
                pod,
                driver,
                claims,
            } => write!(
                f,
                "prepared {} for pod {pod} with {driver}",
                claims.join(", ")
            ),
            PrepareFailed { pod, error } => write!(f, "prepare for pod {pod} failed: {error}"),
            Unprepared { driver, claims } => {
                write!(f, "unprepared {} with {driver}", claims.join(", "))
            }
            UnprepareFailed { error } => write!(f, "unprepare failed: {error}"),
            ContainerStarted {
                pod,
                container,
                restart_count,
            } => write!(
                f,
                "started container {container} of pod {pod} (restarts: {restart_count})"
            ),
            ContainerExited {
                pod,
                container,
                exit_code,
            } => write!(
                f,
                "container {container} of pod {pod} exited with {exit_code}"
            ),
            ContainerCreateFailed {
                pod,
                container,
                error,
            } => write!(
                f,
                "could not create container {container} of pod {pod}: {error}"
            ),
            PodFinished { pod, phase } => write!(f, "pod {pod} finished: {phase}"),
            PodDeleted { pod } => write!(f, "pod {pod} deleted"),
            WipeScheduled { driver } => write!(f, "scheduled wipe of {driver} slices"),
            WipeCancelled { driver } => write!(f, "cancelled wipe of {driver} slices"),
            SlicesWiped { driver: Some(d) } => write!(f, "wiped node slices of {d}"),
            SlicesWiped { driver: None } => write!(f, "wiped all node slices"),
            DeviceHealth {
                driver,
                pool,
                device,
                health,
                message,
            } => {
                write!(f, "device {driver}/{pool}/{device} is {health}")?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for NodeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.at, self.kind)
    }
}

/// A shared, bounded journal that can be waited on.
#[derive(Debug, Clone)]
pub struct Journal(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    entries: Mutex<VecDeque<NodeEvent>>,
    /// Bumped on every record, so waiters wake without polling.
    recorded: tokio::sync::watch::Sender<u64>,
}

impl Default for Journal {
    fn default() -> Self {
        Self(Arc::new(Inner {
            entries: Mutex::default(),
            recorded: tokio::sync::watch::Sender::new(0),
        }))
    }
}

impl Journal {
    pub fn record(&self, kind: NodeEventKind) {
        {
            let mut q = self.0.entries.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() == CAPACITY {
                q.pop_front();
            }
            q.push_back(NodeEvent {
                at: jiff::Timestamp::now(),
                kind,
            });
        }
        self.0.recorded.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn entries(&self) -> Vec<NodeEvent> {
        self.0
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The first entry (oldest first) matching `pred`, waiting up to
    /// `timeout` for one to be recorded; `None` if none came in time.
    pub async fn wait_for(
        &self,
        timeout: std::time::Duration,
        pred: impl Fn(&NodeEventKind) -> bool,
    ) -> Option<NodeEvent> {
        let mut rx = self.0.recorded.subscribe();
        tokio::time::timeout(timeout, async {
            loop {
                rx.borrow_and_update();
                if let Some(e) = self.entries().into_iter().find(|e| pred(&e.kind)) {
                    return e;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn wait_for_wakes_on_a_later_record() {
        let j = Journal::default();
        let waiter = {
            let j = j.clone();
            tokio::spawn(async move {
                j.wait_for(
                    Duration::from_secs(10),
                    |k| matches!(k, NodeEventKind::PodDeleted { pod } if pod == "ns/a"),
                )
                .await
            })
        };
        j.record(NodeEventKind::PodDeleted { pod: "ns/b".into() });
        j.record(NodeEventKind::PodDeleted { pod: "ns/a".into() });
        let got = waiter.await.expect("waiter ran").expect("event seen");
        assert_eq!(got.kind, NodeEventKind::PodDeleted { pod: "ns/a".into() });
    }

    #[tokio::test]
    async fn wait_for_gives_up_after_its_timeout() {
        let j = Journal::default();
        j.record(NodeEventKind::PodDeleted { pod: "ns/b".into() });
        let got = j
            .wait_for(
                Duration::from_millis(20),
                |k| matches!(k, NodeEventKind::PodDeleted { pod } if pod == "ns/a"),
            )
            .await;
        assert_eq!(got, None);
    }
}
