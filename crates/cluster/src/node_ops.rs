//! Acting on one node of the cluster: rebooting it, cutting it off,
//! driving its daemons, reaching its containers and reading its kubelet's
//! log; each says plainly when the cluster's kind has no such node, since
//! only the local cluster's nodes are the runner's to operate.
use anyhow::Context as _;

use crate::{Cluster, Kind, remote};

impl Cluster {
    /// Reboots real node `node` of the local cluster (see
    /// [`crate::real_node::RealNode::reboot`]); returns once asked.
    pub fn reboot_node(&self, node: &str) -> anyhow::Result<()> {
        let real = match &self.kind {
            Kind::Local(l) => l.real.as_ref(),
            Kind::Remote(_) => None,
        };
        let Some(real) = real else {
            anyhow::bail!(
                "cannot reboot node {node}: the runner reboots only the local cluster's real \
                 nodes (--node-kind real)"
            );
        };
        real.on(node, |n| Ok(n.reboot()?))
    }

    /// Cuts node `node` of the local cluster off the control plane (`cut`)
    /// or connects it again: a simulated node's link to the API server
    /// ([`dra_e2e_node_sim::link`]), a real node's packets to and from its
    /// relay of the API server. Other clusters' nodes are not the runner's
    /// to cut off.
    pub fn set_node_cut(&self, node: &str, cut: bool) -> anyhow::Result<()> {
        let verb = if cut { "cut off" } else { "reconnect" };
        let Kind::Local(l) = &self.kind else {
            anyhow::bail!(
                "cannot {verb} node {node}: the runner cuts off only the local cluster's nodes \
                 from its control plane (--cluster local)"
            );
        };
        if let Some(real) = &l.real {
            return real.on(node, |n| {
                n.set_cut(cut)
                    .with_context(|| format!("cannot {verb} real node {node}"))
            });
        }
        let nodes = l
            .nodes
            .read()
            .map_err(|_| anyhow::anyhow!("the simulated nodes' lock is poisoned"))?;
        let n = nodes
            .iter()
            .find(|n| n.name() == node)
            .ok_or_else(|| anyhow::anyhow!("no simulated node {node} in this cluster"))?;
        n.link().set_cut(cut);
        Ok(())
    }

    /// Stops, starts or restarts daemon `daemon` of real node `node` of the
    /// local cluster (see [`crate::real_node::RealNode::daemon`]).
    pub fn node_daemon(
        &self,
        node: &str,
        op: crate::real_node::init::DaemonOp,
        daemon: &str,
    ) -> anyhow::Result<Option<u32>> {
        let real = match &self.kind {
            Kind::Local(l) => l.real.as_ref(),
            Kind::Remote(_) => None,
        };
        let Some(real) = real else {
            anyhow::bail!(
                "cannot {op:?} the {daemon} of node {node}: the runner controls the daemons only \
                 of the local cluster's real nodes (--node-kind real)"
            );
        };
        real.on(node, |n| Ok(n.daemon(op, daemon)?))
    }

    /// The environment of a running container, as `env` inside it prints it.
    pub async fn container_env(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> anyhow::Result<Vec<String>> {
        match &self.kind {
            Kind::Local(l) if l.real.is_some() => {
                remote::exec_env(&self.client, namespace, pod, container).await
            }
            Kind::Local(l) => {
                let nodes = l
                    .nodes
                    .read()
                    .map_err(|_| anyhow::anyhow!("simulated nodes lock poisoned"))?;
                for n in nodes.iter() {
                    if let Some(env) = n.container_env(namespace, pod, container) {
                        return Ok(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect());
                    }
                }
                anyhow::bail!(
                    "no simulated node runs container {container} of pod {namespace}/{pod}"
                )
            }
            Kind::Remote(_) => remote::exec_env(&self.client, namespace, pod, container).await,
        }
    }

    /// Ends a running container's process as a crash would, so that its
    /// pod's restart policy decides what follows: `kill -TERM 1` by exec in
    /// it (the pod builder's default command exits at once on SIGTERM;
    /// `sh`, which runs it, is in every image the suite uses). The kubelet
    /// then creates the container again from the pod's prepared claims,
    /// without asking the driver. A simulated node has no exec: its kubelet
    /// ends the container itself, with the same status 0, and creates it
    /// again from the CDI specs as they are then.
    pub async fn end_container_process(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> anyhow::Result<()> {
        let target = format!("container {container} of pod {namespace}/{pod}");
        match &self.kind {
            Kind::Local(l) if l.real.is_none() => {
                // Asked under the lock, answered outside it.
                let answer = {
                    let nodes = l
                        .nodes
                        .read()
                        .map_err(|_| anyhow::anyhow!("simulated nodes lock poisoned"))?;
                    nodes
                        .iter()
                        .find_map(|n| n.end_container(namespace, pod, container))
                };
                let answer = answer.with_context(|| format!("no simulated node runs {target}"))?;
                answer
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "the simulated kubelet stopped tending pod {namespace}/{pod}"
                        )
                    })?
                    .map_err(|e| anyhow::anyhow!("cannot end the process of {target}: {e}"))
            }
            Kind::Local(_) | Kind::Remote(_) => {
                let kill = ["sh", "-c", "kill -TERM 1"].map(str::to_owned);
                if let Some(failure) =
                    remote::exec_status(&self.client, namespace, pod, container, &kill).await?
                {
                    anyhow::bail!("`kill -TERM 1` in {target} failed: {failure}");
                }
                Ok(())
            }
        }
    }

    /// The kubelet's log of a node (local cluster only: the simulated
    /// kubelet's journal, or a real kubelet's log file).
    pub fn node_log(&self, node: &str) -> Option<String> {
        match &self.kind {
            Kind::Local(l) if l.real.is_some() => {
                let real = l.real.as_ref()?;
                let (_, path) = real.kubelet_logs.iter().find(|(n, _)| n == node)?;
                std::fs::read_to_string(path).ok()
            }
            Kind::Local(l) => l
                .nodes
                .read()
                .ok()?
                .iter()
                .find(|n| n.name() == node)
                .map(|n| {
                    n.events()
                        .iter()
                        .map(|e| format!("{e}\n"))
                        .collect::<String>()
                }),
            Kind::Remote(_) => None,
        }
    }
}
