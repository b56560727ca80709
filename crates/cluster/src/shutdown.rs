//! The cluster's end: a death the run cannot do without noticed, the stop
//! in order (nodes before the control plane) and the kill of a second
//! Ctrl-C, each saying what the user should know of what stayed behind.
use std::time::Duration;

use crate::{Cluster, Kind, local};

/// How long a simulated node may take to stop at the end of a run.
const SIM_NODE_STOP: Duration = Duration::from_secs(20);

impl Cluster {
    /// Resolves, with what happened, when a process the run cannot do without
    /// exits: a control-plane component or a real node (the local cluster
    /// only; a real cluster's health is its own). Pending forever otherwise.
    pub fn first_death(&self) -> impl std::future::Future<Output = String> + use<> {
        let mut vitals = Vec::new();
        if let Kind::Local(l) = &self.kind {
            if let Ok(c) = l.cluster.lock()
                && let Some(c) = c.as_ref()
            {
                vitals.extend(c.vitals());
            }
            if let Some(real) = &l.real
                && let Ok(n) = real.nodes.lock()
                && let Some(n) = n.as_ref()
            {
                vitals.extend(n.nodes().iter().filter_map(|n| n.vital()));
            }
        }
        crate::host::vital::Vital::first_exit(vitals)
    }

    /// Second Ctrl-C: kill the local cluster's processes without waiting.
    /// Returns what the user should know: what real nodes left behind, and
    /// where kept files are.
    pub fn kill_now(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Kind::Local(l) = &self.kind {
            // The components running now (a restarted one has a new PID),
            // each signalled only while it is not reaped, so never a
            // stranger who got its PID. Real nodes are not among them:
            // killing their `unshare` parent would orphan process 1.
            if let Ok(c) = l.cluster.lock()
                && let Some(c) = c.as_ref()
            {
                c.kill_components();
            }
            // Process 1 of each real node is killed, its namespace with it;
            // then its links and cgroups are removed.
            if let Some(real) = &l.real
                && let Ok(mut n) = real.nodes.lock()
                && let Some(mut nodes) = n.take()
            {
                notes.extend(
                    nodes
                        .kill()
                        .into_iter()
                        .map(|left| format!("left behind by a real node: {left}")),
                );
            }
            if let Ok(mut c) = l.cluster.lock()
                && let Some(c) = c.take()
            {
                notes.extend(kept_files(&c));
                // Dropping removes the temp dir.
                drop(c);
            }
        }
        notes
    }

    /// Stops the nodes, then the local cluster's processes.
    pub async fn shutdown(&self) -> Shutdown {
        let mut done = Shutdown::default();
        if let Kind::Local(l) = &self.kind {
            if let Some(real) = &l.real {
                let nodes = real.nodes.lock().ok().and_then(|mut n| n.take());
                if let Some(mut nodes) = nodes {
                    done.left = tokio::task::spawn_blocking(move || nodes.stop())
                        .await
                        .unwrap_or_else(|e| vec![format!("stopping the real nodes: {e}")]);
                }
            }
            let nodes = l
                .nodes
                .write()
                .map(|mut n| std::mem::take(&mut *n))
                .unwrap_or_default();
            // Bounded: a node deletes its Node object on the way out, which
            // never answers when the control plane has died.
            for n in nodes {
                let name = n.name().to_owned();
                match tokio::time::timeout(SIM_NODE_STOP, n.stop()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => done
                        .notes
                        .push(format!("stopping simulated node {name}: {e}")),
                    Err(_) => done.notes.push(format!(
                        "simulated node {name} did not stop within {SIM_NODE_STOP:?}; leaving it to the cluster's end"
                    )),
                }
            }
            let cluster = l.cluster.lock().ok().and_then(|mut c| c.take());
            if let Some(c) = cluster {
                let kept = kept_files(&c);
                if let Err(e) = c.stop().await {
                    done.notes.push(format!("stopping the local cluster: {e}"));
                }
                done.notes.extend(kept);
            }
        }
        done
    }
}

/// What stopping the cluster found.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// What real nodes left on the host (processes, mounts, cgroups, links,
    /// `ip_forward`), which should be nothing.
    pub left: Vec<String>,
    /// What the user should know besides: stops that failed, kept files.
    pub notes: Vec<String>,
}

/// Where the local cluster's files stay, when they are kept.
fn kept_files(c: &local::LocalCluster) -> Option<String> {
    c.keeps_files()
        .then(|| format!("local cluster files kept in {}", c.dir().display()))
}
