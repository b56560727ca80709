//! Proxy pods on a real cluster: deploy the ReplicaSet, map pods to nodes,
//! tear it all down.
pub mod manifest;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use tracing::{debug, info, warn};

pub use self::manifest::{AgentKind, ProxyImage, ProxyPodsSpec};
use super::exec::{ExecError, ExecTarget};
use super::pod_files::PodFiles;
use super::portforward::container_state;

#[derive(Debug, thiserror::Error)]
pub enum ProxyPodsError {
    #[error("{action} ReplicaSet {namespace}/{name}: {source}")]
    Api {
        action: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("ReplicaSet {namespace}/{name} not available after {timeout:?}; last seen: {last}")]
    NotAvailable {
        namespace: String,
        name: String,
        timeout: Duration,
        last: String,
    },
    #[error(
        "ReplicaSet {namespace}/{name}: expected one running pod on each of {expected:?}, found {found:?}"
    )]
    PodsMismatch {
        namespace: String,
        name: String,
        expected: Vec<String>,
        found: Vec<String>,
    },
    #[error("pods of ReplicaSet {namespace}/{name} still exist after {timeout:?}: {remaining:?}")]
    PodsNotGone {
        namespace: String,
        name: String,
        timeout: Duration,
        remaining: Vec<String>,
    },
    #[error("socket path {socket:?} is {len} bytes; the proxy agent accepts at most {max}")]
    SocketPathTooLong {
        socket: String,
        len: usize,
        max: usize,
    },
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// Pod ports handed to agents count up from here, so the first is 9001.
const FIRST_PORT_BASE: u16 = 9000;

/// One proxy pod, on one node.
#[derive(Debug)]
pub struct ProxyPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
    pub container: String,
    pub agent: AgentKind,
    last_port: AtomicU16,
}

impl ProxyPod {
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        uid: impl Into<String>,
        node: impl Into<String>,
        container: impl Into<String>,
        agent: AgentKind,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            node: node.into(),
            container: container.into(),
            agent,
            last_port: AtomicU16::new(FIRST_PORT_BASE),
        }
    }

    /// A pod port never used before in this pod (9001, 9002, …): a stopped
    /// agent may linger and still hold its old port.
    pub fn allocate_port(&self) -> u16 {
        self.last_port.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn exec_target(&self) -> ExecTarget {
        ExecTarget {
            namespace: self.namespace.clone(),
            pod: self.name.clone(),
            container: self.container.clone(),
        }
    }

    /// The node's CDI spec directory, reached by exec.
    pub fn cdi_files(&self, client: kube::Client) -> PodFiles {
        PodFiles::new(client, self.exec_target(), manifest::CDI_MOUNT)
    }
}

/// The deployed proxy pods of one driver instance.
pub struct ProxyPods {
    client: kube::Client,
    spec: ProxyPodsSpec,
    pods: Vec<Arc<ProxyPod>>,
}

impl std::fmt::Debug for ProxyPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyPods")
            .field("name", &self.spec.name())
            .field("pods", &self.pods)
            .finish()
    }
}

impl ProxyPods {
    /// Creates the ReplicaSet, waits until all replicas are available and maps
    /// the pods to nodes. On failure, whatever was created is removed again.
    pub async fn deploy(
        client: kube::Client,
        spec: ProxyPodsSpec,
        timeout: Duration,
    ) -> Result<ProxyPods, ProxyPodsError> {
        let api: Api<ReplicaSet> = Api::namespaced(client.clone(), &spec.namespace);
        let name = spec.name();
        api.create(&PostParams::default(), &spec.replica_set())
            .await
            .map_err(|e| api_err("creating", &spec, e))?;
        info!(namespace = %spec.namespace, %name, nodes = ?spec.nodes, "proxy ReplicaSet created");
        match Self::wait_and_map(&client, &spec, timeout).await {
            Ok(pods) => Ok(ProxyPods { client, spec, pods }),
            Err(e) => {
                if let Err(cleanup) = remove(&client, &spec, timeout).await {
                    warn!(error = %cleanup, "removing the proxy ReplicaSet after a failed deploy");
                }
                Err(e)
            }
        }
    }

    async fn wait_and_map(
        client: &kube::Client,
        spec: &ProxyPodsSpec,
        timeout: Duration,
    ) -> Result<Vec<Arc<ProxyPod>>, ProxyPodsError> {
        let api: Api<ReplicaSet> = Api::namespaced(client.clone(), &spec.namespace);
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), &spec.namespace);
        let name = spec.name();
        let want = i32::try_from(spec.nodes.len()).unwrap_or(i32::MAX);
        let available = await_condition(api.clone(), &name, move |rs: Option<&ReplicaSet>| {
            rs.and_then(|rs| rs.status.as_ref())
                .and_then(|s| s.available_replicas)
                .unwrap_or(0)
                >= want
        });
        if !matches!(tokio::time::timeout(timeout, available).await, Ok(Ok(_))) {
            return Err(ProxyPodsError::NotAvailable {
                namespace: spec.namespace.clone(),
                name: name.clone(),
                timeout,
                last: describe_progress(&api, &pods_api, spec).await,
            });
        }
        let list = pods_api
            .list(&ListParams::default().labels(&spec.selector()))
            .await
            .map_err(|e| api_err("listing pods of", spec, e))?;
        let mut pods: Vec<Arc<ProxyPod>> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                Some(Arc::new(ProxyPod::new(
                    spec.namespace.clone(),
                    p.metadata.name.clone()?,
                    p.metadata.uid.clone()?,
                    p.spec.as_ref()?.node_name.clone()?,
                    manifest::CONTAINER_NAME,
                    spec.image.agent,
                )))
            })
            .collect();
        pods.sort_by(|a, b| a.node.cmp(&b.node));
        let mut found: Vec<String> = pods.iter().map(|p| p.node.clone()).collect();
        let mut expected = spec.nodes.clone();
        expected.sort();
        found.dedup();
        if found != expected || pods.len() != expected.len() {
            return Err(ProxyPodsError::PodsMismatch {
                namespace: spec.namespace.clone(),
                name,
                expected,
                found: pods
                    .iter()
                    .map(|p| format!("{} on {}", p.name, p.node))
                    .collect(),
            });
        }
        for p in &pods {
            debug!(pod = %p.name, node = %p.node, "proxy pod ready");
        }
        Ok(pods)
    }

    pub fn spec(&self) -> &ProxyPodsSpec {
        &self.spec
    }

    /// The pods, sorted by node name.
    pub fn pods(&self) -> &[Arc<ProxyPod>] {
        &self.pods
    }

    pub fn pod_on(&self, node: &str) -> Option<&Arc<ProxyPod>> {
        self.pods.iter().find(|p| p.node == node)
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Scales to 0, waits until the pods are gone, deletes the ReplicaSet.
    /// Stop the agents (their sockets are removed by exec) before this.
    pub async fn teardown(self, timeout: Duration) -> Result<(), ProxyPodsError> {
        remove(&self.client, &self.spec, timeout).await
    }

    /// The first half of [`ProxyPods::teardown`]: the scale-down, after which
    /// nothing of the driver runs on the nodes any more. The second half,
    /// the wait until the pods are gone and the ReplicaSet's deletion, is
    /// handed back to run whenever the caller likes.
    pub async fn begin_teardown(
        self,
        timeout: Duration,
    ) -> Result<
        impl std::future::Future<Output = Result<(), ProxyPodsError>> + Send + 'static,
        ProxyPodsError,
    > {
        let exists = scale_down(&self.client, &self.spec).await?;
        let (client, spec) = (self.client, self.spec);
        Ok(async move {
            match exists {
                true => finish_removal(client, spec, timeout).await,
                false => Ok(()),
            }
        })
    }
}

fn api_err(action: &'static str, spec: &ProxyPodsSpec, e: kube::Error) -> ProxyPodsError {
    ProxyPodsError::Api {
        action,
        namespace: spec.namespace.clone(),
        name: spec.name(),
        source: Box::new(e),
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

async fn remove(
    client: &kube::Client,
    spec: &ProxyPodsSpec,
    timeout: Duration,
) -> Result<(), ProxyPodsError> {
    if scale_down(client, spec).await? {
        finish_removal(client.clone(), spec.clone(), timeout).await?;
    }
    Ok(())
}

/// Scales the ReplicaSet to 0; false when it does not exist.
async fn scale_down(client: &kube::Client, spec: &ProxyPodsSpec) -> Result<bool, ProxyPodsError> {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), &spec.namespace);
    let scale = serde_json::json!({ "spec": { "replicas": 0 } });
    match api
        .patch(&spec.name(), &PatchParams::default(), &Patch::Merge(&scale))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(api_err("scaling down", spec, e)),
    }
}

/// After [`scale_down`]: waits until the pods are gone, then deletes the
/// ReplicaSet.
async fn finish_removal(
    client: kube::Client,
    spec: ProxyPodsSpec,
    timeout: Duration,
) -> Result<(), ProxyPodsError> {
    let (client, spec) = (&client, &spec);
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), &spec.namespace);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &spec.namespace);
    let name = spec.name();
    let gone = async {
        let list = pods_api
            .list(&ListParams::default().labels(&spec.selector()))
            .await
            .map_err(|e| e.to_string())?;
        for p in list.items {
            let (Some(pod), uid) = (p.metadata.name, p.metadata.uid.unwrap_or_default()) else {
                continue;
            };
            await_condition(pods_api.clone(), &pod, conditions::is_deleted(&uid))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    };
    match tokio::time::timeout(timeout, gone).await {
        Ok(Ok(())) => {}
        Ok(Err(message)) => {
            return Err(ProxyPodsError::PodsNotGone {
                namespace: spec.namespace.clone(),
                name,
                timeout,
                remaining: vec![format!("(watch failed: {message})")],
            });
        }
        Err(_) => {
            let remaining = pods_api
                .list(&ListParams::default().labels(&spec.selector()))
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .filter_map(|p| p.metadata.name)
                        .collect()
                })
                .unwrap_or_default();
            return Err(ProxyPodsError::PodsNotGone {
                namespace: spec.namespace.clone(),
                name,
                timeout,
                remaining,
            });
        }
    }
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(api_err("deleting", spec, e)),
    }
    info!(namespace = %spec.namespace, %name, "proxy ReplicaSet removed");
    Ok(())
}

async fn describe_progress(api: &Api<ReplicaSet>, pods: &Api<Pod>, spec: &ProxyPodsSpec) -> String {
    let rs = match api.get_opt(&spec.name()).await {
        Ok(Some(rs)) => rs,
        Ok(None) => return "ReplicaSet not found".into(),
        Err(e) => return format!("cannot read the ReplicaSet: {e}"),
    };
    let status = rs.status.unwrap_or_default();
    let mut out = format!(
        "replicas {}, ready {}, available {}",
        status.replicas,
        status.ready_replicas.unwrap_or(0),
        status.available_replicas.unwrap_or(0)
    );
    if let Some(c) = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
    {
        out.push_str(&format!(
            "; {}",
            c.message.unwrap_or(c.reason.unwrap_or_default())
        ));
    }
    if let Ok(list) = pods
        .list(&ListParams::default().labels(&spec.selector()))
        .await
    {
        for p in list.items {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_else(|| "unscheduled".into());
            out.push_str(&format!(
                "; {} on {node}: {}",
                p.metadata.name.clone().unwrap_or_default(),
                container_state(&p, manifest::CONTAINER_NAME)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_count_up_from_9001_and_are_never_reused() {
        let pod = ProxyPod::new("ns", "p", "uid", "node", "pause", AgentKind::HostPathPlugin);
        assert_eq!(pod.allocate_port(), 9001);
        assert_eq!(pod.allocate_port(), 9002);
        assert_eq!(pod.allocate_port(), 9003);
    }
}
