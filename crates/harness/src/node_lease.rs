//! Which scenario may use which node while the run goes on.
//!
//! Most scenarios share nodes: their drivers, claims and pods live side by
//! side on the same kubelets. A scenario that stops a node's kubelet or its
//! container runtime, or counts everything a kubelet holds, needs its nodes
//! to itself (`@OwnNodes`); it used to run alone on the whole cluster
//! (`@serial`), and on real nodes those scenarios were most of a run's wall
//! time while the other nodes sat idle. With leases the rest of the cluster
//! goes on with other scenarios.
//!
//! The rules, kept here and unit-tested:
//! - a shared lease takes the first ready nodes no scenario owns or waits to
//!   own, between the scenario's minimum and maximum; it waits while fewer
//!   than its minimum are free;
//! - an own lease takes the last ready nodes no one else owns, reserves them
//!   at once (no new shared lease lands there) and holds them once the
//!   shared leases on them have ended;
//! - owners are served in the order they started ([`Ticket`]), not in
//!   the order their first steps happen to ask: the longest start first,
//!   and a node going free goes to the next of them;
//! - own leases never hold more than all but [`SHARED_KEEP`] of the ready
//!   nodes (all but one on two nodes, the only one on one), so scenarios
//!   that need two nodes are never starved by a queue of node operations;
//! - a lease ends when its last handle is dropped, once the scenario's
//!   teardown has ended. The waits after it (until a kubelet wipes a gone
//!   plugin's slices, 30 s later) hold none: an owner that stops that
//!   kubelet meanwhile delays the wipe by the seconds it is stopped, and
//!   one that restarts it makes it at once (a starting kubelet wipes every
//!   slice of its node), well within the wait's two minutes. Holding the
//!   nodes through those waits cost each owner 30 s on its node.
//!
//! Leases are the run's own bookkeeping; what keeps other scenarios' pods
//! off an owned node in the cluster is a `NoSchedule` taint
//! ([`OWN_NODE_TAINT`]) that the owner's pods tolerate ([`taint`],
//! [`toleration`]).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use dra_e2e_kube::retry::{Retry, is_conflict};
use dra_e2e_kube::wait::note;
use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::Notify;

pub use dra_e2e_kube::node_ready::OWN_NODE_TAINT;

/// How many ready nodes own leases leave to shared ones, at most: enough
/// for the suite's two-node scenarios.
pub const SHARED_KEEP: usize = 2;

/// How a scenario uses its nodes, or the runner's fault injection one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Shared(Faults),
    Own,
    /// A fault the runner injects (`--restart-kubelet`): on a node no
    /// scenario owns, which no owner may reserve meanwhile; the scenarios
    /// sharing it go on, as they are what the fault is for.
    Fault,
}

/// Whether a scenario sharing its nodes rides out the runner's faults
/// (`--restart-kubelet`) on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Faults {
    #[default]
    RideOut,
    /// No fault is injected into its nodes while it runs, and it waits for
    /// one in progress: what it shows is something Kubernetes itself does
    /// not ride out (the tag that asks for it says why, docs/tags.md).
    Exempt,
}

/// The run's leases.
#[derive(Debug, Default)]
pub struct NodeLeases {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Shared leases per node.
    shared: BTreeMap<String, usize>,
    /// Owned or reserved nodes and their owner.
    own: BTreeMap<String, String>,
    /// Nodes the runner is injecting a fault into, and the fault.
    faults: BTreeMap<String, String>,
    /// Shared leases per node that are exempt from faults.
    exempt: BTreeMap<String, usize>,
    /// Tickets of owners not yet served, the first served first.
    queue: BTreeSet<u64>,
    next_ticket: u64,
}

impl State {
    fn shared_on(&self, node: &str) -> usize {
        self.shared.get(node).copied().unwrap_or(0)
    }

    fn try_shared(
        &mut self,
        ready: &[String],
        min: usize,
        max: usize,
        faults: Faults,
    ) -> Option<Vec<String>> {
        let exempt = faults == Faults::Exempt;
        let free: Vec<String> = ready
            .iter()
            .filter(|n| !self.own.contains_key(*n))
            .filter(|n| !exempt || !self.faults.contains_key(*n))
            .take(max)
            .cloned()
            .collect();
        if free.len() < min.max(1) {
            return None;
        }
        for n in &free {
            *self.shared.entry(n.clone()).or_default() += 1;
            if exempt {
                *self.exempt.entry(n.clone()).or_default() += 1;
            }
        }
        Some(free)
    }

    fn try_own(&mut self, ready: &[String], count: usize, owner: &str) -> Option<Vec<String>> {
        let keep = SHARED_KEEP.min(ready.len().saturating_sub(1));
        let owned_ready = ready.iter().filter(|n| self.own.contains_key(*n)).count();
        if owned_ready + count > ready.len() - keep {
            return None;
        }
        // From the end, where shared leases (which take the first free
        // nodes) are fewest; the order of the scenario's nodes stays sorted.
        let mut picked: Vec<String> = ready
            .iter()
            .rev()
            .filter(|n| !self.own.contains_key(*n) && !self.faults.contains_key(*n))
            .take(count)
            .cloned()
            .collect();
        if picked.len() < count {
            return None;
        }
        picked.sort();
        for n in &picked {
            self.own.insert(n.clone(), owner.to_owned());
        }
        Some(picked)
    }

    fn release(&mut self, nodes: &[String], how: Use) {
        for n in nodes {
            match how {
                Use::Shared(faults) => {
                    count_down(&mut self.shared, n);
                    if faults == Faults::Exempt {
                        count_down(&mut self.exempt, n);
                    }
                }
                Use::Own => {
                    self.own.remove(n);
                }
                Use::Fault => {
                    self.faults.remove(n);
                }
            }
        }
    }

    fn describe(&self, ready: &[String]) -> String {
        let exempt = |n: &String| match self.exempt.get(n) {
            Some(e) => format!(" ({e} exempt from faults)"),
            None => String::new(),
        };
        let mut parts = Vec::new();
        for n in ready {
            match (self.own.get(n), self.shared_on(n)) {
                (Some(owner), 0) => parts.push(format!("{n} owned by {owner:?}")),
                (Some(owner), s) => parts.push(format!(
                    "{n} reserved by {owner:?}, still used by {s} scenario(s){}",
                    exempt(n)
                )),
                (None, s) => parts.push(format!("{n} used by {s} scenario(s){}", exempt(n))),
            }
            if let Some(fault) = self.faults.get(n) {
                parts.push(format!("{n} under the runner's fault {fault:?}"));
            }
        }
        if parts.is_empty() {
            "no ready node".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

fn count_down(counts: &mut BTreeMap<String, usize>, node: &str) {
    if let Some(c) = counts.get_mut(node) {
        *c = c.saturating_sub(1);
        if *c == 0 {
            counts.remove(node);
        }
    }
}

/// Why a lease could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(
        "the scenario needs {wanted} ready node(s) of its own, but the cluster has {ready}: owned \
         nodes leave {keep} to the other scenarios (add nodes, e.g. --nodes {more})"
    )]
    TooFewNodes {
        wanted: usize,
        ready: usize,
        keep: usize,
        more: usize,
    },
}

impl NodeLeases {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What holds the nodes of `ready` now, for a wait's error.
    pub fn describe(&self, ready: &[String]) -> String {
        self.lock().describe(ready)
    }

    /// The nodes scenarios own or have reserved now, sorted. They are the
    /// run's even while not Ready (a scenario stopped their kubelet or cut
    /// them off): their owner's teardown makes them Ready before it lets
    /// them go.
    pub fn owned(&self) -> Vec<String> {
        self.lock().own.keys().cloned().collect()
    }

    /// A place in the owners' queue, taken when an owner starts.
    pub fn ticket(self: &Arc<Self>) -> Ticket {
        let mut state = self.lock();
        let id = state.next_ticket;
        state.next_ticket += 1;
        state.queue.insert(id);
        Ticket {
            leases: self.clone(),
            id,
        }
    }

    /// Between `min` and `max` of `ready` (sorted), shared, once at least
    /// `min` are free: not owned, and for a scenario exempt from faults
    /// none in progress. Cancel-safe: dropped while waiting, it holds
    /// nothing.
    pub async fn shared(
        self: &Arc<Self>,
        ready: &[String],
        min: usize,
        max: usize,
        faults: Faults,
    ) -> Lease {
        let what = match faults {
            Faults::RideOut => format!("{min} node(s) no scenario owns"),
            Faults::Exempt => {
                format!("{min} node(s) no scenario owns and no fault is injected into")
            }
        };
        let nodes = self
            .until(&what, |state| {
                state
                    .try_shared(ready, min, max, faults)
                    .ok_or_else(|| state.describe(ready))
            })
            .await;
        Lease::new(self, nodes, Use::Shared(faults))
    }

    /// `count` of `ready` (sorted) to the scenario `owner` alone: reserved
    /// once `ticket` is the first in the queue and they are free of other
    /// owners, held once every shared lease on them has ended. Cancel-safe:
    /// dropped while waiting, it reserves nothing and leaves the queue.
    pub async fn own(
        self: &Arc<Self>,
        ready: &[String],
        count: usize,
        owner: &str,
        ticket: Ticket,
    ) -> Result<Lease, LeaseError> {
        let keep = SHARED_KEEP.min(ready.len().saturating_sub(1));
        if count > ready.len() - keep {
            return Err(LeaseError::TooFewNodes {
                wanted: count,
                ready: ready.len(),
                keep,
                more: count + SHARED_KEEP,
            });
        }
        let what = format!("{count} node(s) no other scenario owns");
        let nodes = self
            .until(&what, |state| {
                let first = state.queue.first() == Some(&ticket.id);
                first
                    .then(|| state.try_own(ready, count, owner))
                    .flatten()
                    .ok_or_else(|| state.describe(ready))
            })
            .await;
        drop(ticket);
        let lease = Lease::new(self, nodes, Use::Own);
        self.until("the other scenarios on the nodes it owns to end", |state| {
            let drained = lease.nodes().iter().all(|n| state.shared_on(n) == 0);
            if drained {
                Ok(())
            } else {
                Err(state.describe(lease.nodes()))
            }
        })
        .await;
        Ok(lease)
    }

    /// The first of `candidates` that no scenario owns or has reserved, no
    /// scenario exempt from faults uses and no other fault holds, for the runner's fault `fault`; waits while
    /// there is none. Owners do not reserve it until the lease ends;
    /// shared leases go on there and new ones land there. Cancel-safe.
    pub async fn fault(self: &Arc<Self>, candidates: &[String], fault: &str) -> Lease {
        let what = format!("a node no scenario owns, for the runner's fault {fault:?}");
        let node = self
            .until(&what, |state| {
                let free = candidates
                    .iter()
                    .find(|n| {
                        !state.own.contains_key(*n)
                            && !state.faults.contains_key(*n)
                            && !state.exempt.contains_key(*n)
                    })
                    .cloned();
                match free {
                    Some(n) => {
                        state.faults.insert(n.clone(), fault.to_owned());
                        Ok(n)
                    }
                    None => Err(state.describe(candidates)),
                }
            })
            .await;
        Lease::new(self, vec![node], Use::Fault)
    }

    /// Until `check` succeeds on the state, checked again on every change;
    /// what it last saw otherwise is noted for the step's timeout message.
    async fn until<T>(
        &self,
        what: &str,
        mut check: impl FnMut(&mut State) -> Result<T, String>,
    ) -> T {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match check(&mut self.lock()) {
                Ok(done) => return done,
                Err(seen) => note(what, &seen),
            }
            changed.await;
        }
    }
}

/// An owner's place in the queue; dropped, it leaves the queue.
#[derive(Debug)]
pub struct Ticket {
    leases: Arc<NodeLeases>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.leases.lock().queue.remove(&self.id);
        self.leases.changed.notify_waiters();
    }
}

/// Nodes a scenario holds; the lease ends when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Lease(Arc<Held>);

#[derive(Debug)]
struct Held {
    leases: Arc<NodeLeases>,
    nodes: Vec<String>,
    how: Use,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.leases.lock().release(&self.nodes, self.how);
        self.leases.changed.notify_waiters();
    }
}

impl Lease {
    fn new(leases: &Arc<NodeLeases>, nodes: Vec<String>, how: Use) -> Self {
        // A reservation is a change too: a shared lease waiting for nodes
        // may now have fewer to wait for.
        leases.changed.notify_waiters();
        Lease(Arc::new(Held {
            leases: leases.clone(),
            nodes,
            how,
        }))
    }

    /// The nodes, sorted.
    pub fn nodes(&self) -> &[String] {
        &self.0.nodes
    }

    pub fn how(&self) -> Use {
        self.0.how
    }
}

/// The taint an owned node carries while its owner runs; `owner` is the
/// owner's namespace, so a taint left behind says whose it was.
pub fn taint(owner: &str) -> Taint {
    Taint {
        key: OWN_NODE_TAINT.to_owned(),
        value: Some(owner.to_owned()),
        effect: "NoSchedule".to_owned(),
        time_added: None,
    }
}

/// What the owner's pods carry to be scheduled on its own nodes.
pub fn toleration() -> Toleration {
    Toleration {
        key: Some(OWN_NODE_TAINT.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some("NoSchedule".to_owned()),
        ..Default::default()
    }
}

/// Puts the own-node taint on `node` (`Some(owner)`) or takes it off
/// (`None`), leaving every other taint as it is. A node is written by its
/// kubelet all the time, so a conflict is read again and retried, as every
/// conflict is ([`Retry::CONFLICTS`]).
pub async fn set_taint(client: &kube::Client, node: &str, owner: Option<&str>) -> kube::Result<()> {
    Retry::CONFLICTS
        .run(is_conflict, || write_taint(client, node, owner))
        .await
}

async fn write_taint(client: &kube::Client, node: &str, owner: Option<&str>) -> kube::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let current = nodes.get(node).await?;
    let mut taints: Vec<Taint> = current
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != OWN_NODE_TAINT)
        .collect();
    if let Some(owner) = owner {
        taints.push(taint(owner));
    }
    // The resourceVersion makes a concurrent change of the node's taints
    // (the node lifecycle controller's) a conflict rather than a loss.
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": current.metadata.resource_version },
        "spec": { "taints": taints },
    });
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    async fn soon<F: std::future::Future>(f: F) -> Option<F::Output> {
        tokio::time::timeout(Duration::from_millis(50), f)
            .await
            .ok()
    }

    #[tokio::test]
    async fn shared_leases_take_the_first_free_nodes_and_share_them() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(4);
        let a = leases.shared(&ready, 1, 1, Faults::RideOut).await;
        let b = leases.shared(&ready, 2, 8, Faults::RideOut).await;
        assert_eq!(a.nodes(), ["node-0"]);
        assert_eq!(b.nodes(), ready.as_slice());
    }

    #[tokio::test]
    async fn an_owner_takes_the_last_nodes_and_waits_until_their_shared_leases_end() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(3);
        let everywhere = leases.shared(&ready, 1, 3, Faults::RideOut).await;
        let owner = tokio::spawn({
            let (leases, ready) = (leases.clone(), ready.clone());
            async move {
                leases
                    .own(&ready, 1, "kubelet restart", leases.ticket())
                    .await
            }
        });
        // Reserved at once: a new shared lease no longer lands on node-2.
        tokio::task::yield_now().await;
        let mut describe = String::new();
        for _ in 0..100 {
            describe = leases.describe(&ready);
            if describe.contains("reserved") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(
            describe.contains("node-2 reserved by \"kubelet restart\""),
            "{describe}"
        );
        let later = leases.shared(&ready, 1, 3, Faults::RideOut).await;
        assert_eq!(later.nodes(), ["node-0", "node-1"]);
        assert!(!owner.is_finished());
        drop(everywhere);
        let own = owner.await.unwrap().unwrap();
        assert_eq!(own.nodes(), ["node-2"]);
        assert_eq!(own.how(), Use::Own);
    }

    #[tokio::test]
    async fn a_fault_waits_for_a_node_no_one_owns_and_keeps_owners_off_it() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(4);
        let shared = leases.shared(&ready, 1, 4, Faults::RideOut).await;
        // Not waiting for the shared leases: it is for them.
        let fault = leases.fault(&ready, "kubelet restart").await;
        assert_eq!(fault.nodes(), ["node-0"]);
        assert_eq!(fault.how(), Use::Fault);
        let second = leases.fault(&ready[..1], "another");
        assert!(soon(second).await.is_none(), "one fault per node");
        drop(shared);
        // node-0 is not reserved by an owner while the fault holds it;
        // own leases take the last nodes, and all but two of four.
        let owner = leases.own(&ready, 2, "c", leases.ticket()).await.unwrap();
        assert_eq!(owner.nodes(), ["node-2", "node-3"]);
        let only = leases.fault(&ready[2..], "owned");
        assert!(soon(only).await.is_none(), "no fault on owned nodes");
        drop(fault);
        let again = leases.fault(&ready, "again").await;
        assert_eq!(again.nodes(), ["node-0"]);
        // Shared leases still land on a faulted node.
        assert_eq!(
            leases.shared(&ready, 2, 2, Faults::RideOut).await.nodes(),
            ["node-0", "node-1"]
        );
    }

    #[tokio::test]
    async fn no_fault_lands_where_an_exempt_scenario_runs_and_it_waits_for_one_in_progress() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(3);
        let exempt = leases.shared(&ready, 1, 1, Faults::Exempt).await;
        assert_eq!(exempt.nodes(), ["node-0"]);
        assert!(
            leases
                .describe(&ready)
                .contains("node-0 used by 1 scenario(s) (1 exempt from faults)")
        );
        let fault = leases.fault(&ready, "kubelet restart").await;
        assert_eq!(
            fault.nodes(),
            ["node-1"],
            "not on the exempt scenario's node"
        );
        // Another exempt scenario needing two nodes waits for the fault to
        // end; one that rides faults out does not.
        let waiting = tokio::spawn({
            let (leases, ready) = (leases.clone(), ready.clone());
            async move { leases.shared(&ready, 3, 3, Faults::Exempt).await }
        });
        let riding = leases.shared(&ready, 3, 3, Faults::RideOut).await;
        assert_eq!(riding.nodes().len(), 3);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(fault);
        let everywhere = waiting.await.unwrap();
        assert_eq!(everywhere.nodes(), ready.as_slice());
        drop(exempt);
        drop(riding);
        // An exempt lease remains on every node: no fault.
        assert!(soon(leases.fault(&ready, "blocked")).await.is_none());
        drop(everywhere);
        assert_eq!(leases.fault(&ready, "free").await.nodes(), ["node-0"]);
    }

    #[tokio::test]
    async fn a_shared_lease_waits_for_its_minimum_and_gets_it_when_an_owner_ends() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(3);
        let own = leases.own(&ready, 1, "a", leases.ticket()).await.unwrap();
        assert!(
            soon(leases.shared(&ready, 3, 3, Faults::RideOut))
                .await
                .is_none()
        );
        let waiting = tokio::spawn({
            let (leases, ready) = (leases.clone(), ready.clone());
            async move { leases.shared(&ready, 3, 3, Faults::RideOut).await }
        });
        let after = own.clone();
        drop(own);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a clone still holds the node");
        drop(after);
        assert_eq!(waiting.await.unwrap().nodes(), ready.as_slice());
    }

    #[tokio::test]
    async fn owners_leave_two_nodes_to_shared_leases_and_queue_for_the_rest() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(4);
        let first = leases.own(&ready, 1, "a", leases.ticket()).await.unwrap();
        let second = leases.own(&ready, 1, "b", leases.ticket()).await.unwrap();
        assert_eq!(first.nodes(), ["node-3"]);
        assert_eq!(second.nodes(), ["node-2"]);
        assert!(
            soon(leases.own(&ready, 1, "c", leases.ticket()))
                .await
                .is_none()
        );
        assert_eq!(
            leases.shared(&ready, 2, 2, Faults::RideOut).await.nodes(),
            ["node-0", "node-1"]
        );
        drop(first);
        let third = soon(leases.own(&ready, 1, "c", leases.ticket()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(third.nodes(), ["node-3"]);
    }

    #[tokio::test]
    async fn one_node_is_owned_as_a_whole_cluster_and_two_leave_one() {
        let leases = Arc::new(NodeLeases::default());
        let one = nodes(1);
        let own = leases.own(&one, 1, "a", leases.ticket()).await.unwrap();
        assert!(
            soon(leases.shared(&one, 1, 1, Faults::RideOut))
                .await
                .is_none()
        );
        drop(own);
        let two = nodes(2);
        let own = leases.own(&two, 1, "a", leases.ticket()).await.unwrap();
        assert_eq!(own.nodes(), ["node-1"]);
        assert!(matches!(
            leases.own(&two, 2, "b", leases.ticket()).await,
            Err(LeaseError::TooFewNodes { wanted: 2, .. })
        ));
    }

    #[tokio::test]
    async fn owners_are_served_in_the_order_they_started() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(3);
        let held = leases.own(&ready, 1, "a", leases.ticket()).await.unwrap();
        let (first, second) = (leases.ticket(), leases.ticket());
        // The second asks first, and waits behind the first all the same.
        let later = tokio::spawn({
            let (leases, ready) = (leases.clone(), ready.clone());
            async move { leases.own(&ready, 1, "second", second).await }
        });
        let earlier = tokio::spawn({
            let (leases, ready) = (leases.clone(), ready.clone());
            async move { leases.own(&ready, 1, "first", first).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!later.is_finished() && !earlier.is_finished());
        drop(held);
        let got = earlier.await.unwrap().unwrap();
        assert!(!later.is_finished(), "{}", leases.describe(&ready));
        drop(got);
        later.await.unwrap().unwrap();
        // A ticket given up leaves the queue.
        let gone = leases.ticket();
        drop(gone);
        assert!(
            soon(leases.own(&ready, 1, "c", leases.ticket()))
                .await
                .is_some()
        );
    }

    #[tokio::test]
    async fn a_wait_given_up_reserves_nothing() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(3);
        let shared = leases.shared(&ready, 3, 3, Faults::RideOut).await;
        assert!(
            soon(leases.own(&ready, 1, "a", leases.ticket()))
                .await
                .is_none()
        );
        assert!(
            !leases.describe(&ready).contains("reserved"),
            "{}",
            leases.describe(&ready)
        );
        drop(shared);
        assert_eq!(
            leases
                .shared(&ready, 3, 3, Faults::RideOut)
                .await
                .nodes()
                .len(),
            3
        );
    }

    /// An owned node away (not Ready) is still counted: a shared lease
    /// that needs every node waits for it instead of failing.
    #[tokio::test]
    async fn owned_nodes_are_the_runs_while_away() {
        let leases = Arc::new(NodeLeases::default());
        let ready = nodes(3);
        let own = leases.own(&ready, 1, "a", leases.ticket()).await.unwrap();
        let away = own.nodes().to_vec();
        assert_eq!(leases.owned(), away);
        // The owner cut its node off: only the others are Ready now.
        let mut seen: Vec<String> = ready
            .iter()
            .filter(|n| !away.contains(n))
            .cloned()
            .collect();
        seen.extend(leases.owned());
        seen.sort();
        assert_eq!(seen, ready);
        assert!(
            soon(leases.shared(&seen, 3, 3, Faults::RideOut))
                .await
                .is_none()
        );
        drop(own);
        assert!(leases.owned().is_empty());
        assert_eq!(
            leases
                .shared(&seen, 3, 3, Faults::RideOut)
                .await
                .nodes()
                .len(),
            3
        );
    }

    #[test]
    fn the_taint_is_tolerated_by_the_toleration_and_only_it() {
        let t = taint("dra-e2e-abc");
        let tol = toleration();
        assert_eq!(tol.key.as_deref(), Some(t.key.as_str()));
        assert_eq!(tol.effect.as_deref(), Some(t.effect.as_str()));
        assert_eq!(t.value.as_deref(), Some("dra-e2e-abc"));
    }
}
