//! The run's node host pods: one privileged pod per node, made the first
//! time a driver needs that node and kept until the run ends.
//!
//! Every driver's agents run in it by exec, so a scenario pays for a few
//! execs instead of a ReplicaSet's pods starting and terminating (about 3 s
//! each way on real nodes). The pod mounts the kubelet's whole `plugins` and
//! `plugins_registry` directories at their host paths, so a socket created
//! in it is the socket the kubelet sees; a driver's own plugin directory is
//! made by its first agent. The pods live in a namespace of the run's
//! own, which [`NodePods::remove`] deletes at the end; the leak check looks
//! for such namespaces by [`NODE_HOSTS_LABEL`].
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, Namespace, Pod, PodSpec, SecurityContext, ServiceAccount,
    Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use tokio::sync::OnceCell;
use tracing::info;

use super::pods::ProxyPod;
use super::pods::{CDI_MOUNT, ProxyImage};
use super::portforward::container_state;

/// Marks the namespaces of node host pods, for the leak check.
pub const NODE_HOSTS_LABEL: &str = "dra-e2e.k8s.io/node-hosts";
/// The container agents are exec'd in.
pub const CONTAINER: &str = "node-host";
const SERVICE_ACCOUNT: &str = "node-host";
const NAMESPACE_PREFIX: &str = "dra-e2e-node-hosts-";
/// How long a node host pod may take to run.
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the namespace may take to go at the run's end.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum NodePodsError {
    #[error("{action}: {source}")]
    Api {
        action: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "node host pod {namespace}/{pod} on node {node} is not running after {timeout:?}; last seen: {last}"
    )]
    NotRunning {
        namespace: String,
        pod: String,
        node: String,
        timeout: Duration,
        last: String,
    },
    #[error("namespace {namespace} of the node host pods still exists after {timeout:?}")]
    NotGone {
        namespace: String,
        timeout: Duration,
    },
}

fn api_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> NodePodsError {
    let action = action.into();
    move |e| NodePodsError::Api {
        action,
        source: Box::new(e),
    }
}

/// Where the node host pods find the kubelet's directories.
#[derive(Debug, Clone)]
pub struct NodeLayout {
    pub kubelet_root: String,
    pub image: ProxyImage,
    /// The node's CDI spec directory, as its runtime reads it.
    pub cdi_host_dir: String,
}

impl NodeLayout {
    fn root(&self) -> &str {
        self.kubelet_root.trim_end_matches('/')
    }

    pub fn plugins_dir(&self) -> String {
        format!("{}/plugins", self.root())
    }

    pub fn registry_dir(&self) -> String {
        format!("{}/plugins_registry", self.root())
    }

    /// The pod serving `node`, pinned to it without the scheduler: a node
    /// host must run where it is asked to, tainted or not.
    pub fn pod(&self, namespace: &str, node: &str) -> Pod {
        let host_path = |name: &str, path: String| Volume {
            name: name.into(),
            host_path: Some(HostPathVolumeSource {
                path,
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Default::default()
        };
        let mount = |name: &str, path: String| VolumeMount {
            name: name.into(),
            mount_path: path,
            ..Default::default()
        };
        // Sockets are created at the paths the kubelet is told about, so
        // the kubelet's directories are mounted at their host paths.
        let volumes = vec![
            host_path("plugins", self.plugins_dir()),
            host_path("plugins-registry", self.registry_dir()),
            host_path("cdi", self.cdi_host_dir.clone()),
        ];
        let mounts = vec![
            mount("plugins", self.plugins_dir()),
            mount("plugins-registry", self.registry_dir()),
            mount("cdi", CDI_MOUNT.into()),
        ];
        Pod {
            metadata: ObjectMeta {
                name: Some(pod_name(node)),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([
                    ("app.kubernetes.io/part-of".to_owned(), "dra-e2e".to_owned()),
                    (
                        "app.kubernetes.io/component".to_owned(),
                        "node-host".to_owned(),
                    ),
                ])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.to_owned()),
                service_account_name: Some(SERVICE_ACCOUNT.into()),
                automount_service_account_token: Some(false),
                tolerations: Some(vec![Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
                containers: vec![Container {
                    name: CONTAINER.into(),
                    image: Some(self.image.image.clone()),
                    // A shell that waits: agents are started by exec.
                    command: Some(vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        "while true; do sleep 10000; done".into(),
                    ]),
                    security_context: Some(SecurityContext {
                        privileged: Some(true),
                        ..Default::default()
                    }),
                    volume_mounts: Some(mounts),
                    ..Default::default()
                }],
                volumes: Some(volumes),
                // PID 1 `sh` ignores TERM: nothing to wait for at the end.
                termination_grace_period_seconds: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

pub fn pod_name(node: &str) -> String {
    format!("node-host-{node}")
}

/// The run's node host pods, made on demand.
pub struct NodePods {
    client: kube::Client,
    layout: NodeLayout,
    namespace: OnceCell<String>,
    pods: Mutex<BTreeMap<String, Arc<OnceCell<Arc<ProxyPod>>>>>,
}

impl std::fmt::Debug for NodePods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePods")
            .field("namespace", &self.namespace.get())
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl NodePods {
    pub fn new(client: kube::Client, layout: NodeLayout) -> Self {
        Self {
            client,
            layout,
            namespace: OnceCell::new(),
            pods: Mutex::new(BTreeMap::new()),
        }
    }

    /// The client the node host pods are reached with (exec, port-forward).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn layout(&self) -> &NodeLayout {
        &self.layout
    }

    /// The namespace, once a pod was asked for.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.get().map(String::as_str)
    }

    /// The running pods on `nodes`, started at once where there are none
    /// yet. A driver's plugin directory is made by its first agent.
    pub async fn on(
        &self,
        nodes: &[String],
    ) -> Result<BTreeMap<String, Arc<ProxyPod>>, NodePodsError> {
        let ready = futures::future::try_join_all(nodes.iter().map(|node| async move {
            Ok::<_, NodePodsError>((node.clone(), self.pod_on(node).await?))
        }))
        .await?;
        Ok(ready.into_iter().collect())
    }

    async fn pod_on(&self, node: &str) -> Result<Arc<ProxyPod>, NodePodsError> {
        let cell = {
            let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
            pods.entry(node.to_owned()).or_default().clone()
        };
        cell.get_or_try_init(|| self.start(node)).await.cloned()
    }

    async fn namespace_made(&self) -> Result<&str, NodePodsError> {
        self.namespace
            .get_or_try_init(|| async {
                let ns: Namespace = Namespace {
                    metadata: ObjectMeta {
                        generate_name: Some(NAMESPACE_PREFIX.into()),
                        labels: Some(BTreeMap::from([
                            (NODE_HOSTS_LABEL.to_owned(), "true".to_owned()),
                            (
                                "pod-security.kubernetes.io/enforce".to_owned(),
                                "privileged".to_owned(),
                            ),
                        ])),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let made = Api::<Namespace>::all(self.client.clone())
                    .create(&PostParams::default(), &ns)
                    .await
                    .map_err(api_err("creating the node host pods' namespace"))?;
                let name = made.metadata.name.unwrap_or_default();
                let sa = ServiceAccount {
                    metadata: ObjectMeta {
                        name: Some(SERVICE_ACCOUNT.into()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                Api::<ServiceAccount>::namespaced(self.client.clone(), &name)
                    .create(&PostParams::default(), &sa)
                    .await
                    .map_err(api_err(format!(
                        "creating service account {SERVICE_ACCOUNT} in {name}"
                    )))?;
                info!(namespace = %name, "node host pods' namespace created");
                Ok(name)
            })
            .await
            .map(String::as_str)
    }

    async fn start(&self, node: &str) -> Result<Arc<ProxyPod>, NodePodsError> {
        let namespace = self.namespace_made().await?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let name = pod_name(node);
        match api
            .create(&PostParams::default(), &self.layout.pod(namespace, node))
            .await
        {
            Ok(_) => {}
            // An earlier attempt made it and then failed waiting.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(api_err(format!("creating pod {namespace}/{name}"))(e)),
        }
        let running = await_condition(api.clone(), &name, conditions::is_pod_running());
        let pod = match tokio::time::timeout(START_TIMEOUT, running).await {
            Ok(Ok(Some(pod))) => pod,
            outcome => {
                let last = match outcome {
                    Ok(Err(e)) => format!("watch failed: {e}"),
                    _ => match api.get_opt(&name).await {
                        Ok(Some(p)) => container_state(&p, CONTAINER),
                        Ok(None) => "the pod is gone".into(),
                        Err(e) => format!("cannot read the pod: {e}"),
                    },
                };
                return Err(NodePodsError::NotRunning {
                    namespace: namespace.to_owned(),
                    pod: name,
                    node: node.to_owned(),
                    timeout: START_TIMEOUT,
                    last,
                });
            }
        };
        info!(pod = %name, %node, "node host pod running");
        Ok(Arc::new(ProxyPod::new(
            namespace,
            name,
            pod.metadata.uid.unwrap_or_default(),
            node,
            CONTAINER,
            self.layout.image.agent,
        )))
    }

    /// Deletes the pods' namespace and waits until it is gone. Call once
    /// every driver's agents stopped.
    pub async fn remove(&self) -> Result<(), NodePodsError> {
        let Some(namespace) = self.namespace.get() else {
            return Ok(());
        };
        let api: Api<Namespace> = Api::all(self.client.clone());
        let deleted = match api.delete(namespace, &DeleteParams::background()).await {
            Ok(either) => either.left().and_then(|ns| ns.metadata.uid),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => {
                return Err(api_err(format!("deleting namespace {namespace}"))(e));
            }
        };
        // No object in the answer: it was gone already.
        let Some(uid) = deleted else {
            return Ok(());
        };
        let gone = await_condition(api, namespace, conditions::is_deleted(&uid));
        match tokio::time::timeout(REMOVE_TIMEOUT, gone).await {
            Ok(Ok(_)) => {
                info!(%namespace, "node host pods removed");
                Ok(())
            }
            _ => Err(NodePodsError::NotGone {
                namespace: namespace.clone(),
                timeout: REMOVE_TIMEOUT,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::AgentKind;

    fn layout() -> NodeLayout {
        NodeLayout {
            kubelet_root: "/var/lib/kubelet/".into(),
            image: ProxyImage {
                image: "example.com/dra-e2e:dev".into(),
                agent: AgentKind::DraE2e,
            },
            cdi_host_dir: "/var/lib/cdi".into(),
        }
    }

    #[test]
    fn one_privileged_pod_pinned_to_its_node_tolerating_every_taint() {
        let pod = layout().pod("ns", "worker-2");
        assert_eq!(pod.metadata.name.as_deref(), Some("node-host-worker-2"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("worker-2"));
        let tolerations = spec.tolerations.unwrap();
        assert_eq!(tolerations.len(), 1);
        assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
        assert!(tolerations[0].key.is_none() && tolerations[0].effect.is_none());
        assert_eq!(spec.automount_service_account_token, Some(false));
        let c = &spec.containers[0];
        assert_eq!(c.name, CONTAINER);
        assert_eq!(c.image.as_deref(), Some("example.com/dra-e2e:dev"));
        assert_eq!(c.security_context.as_ref().unwrap().privileged, Some(true));
    }

    /// Every driver's directory is reachable: the mounts are the kubelet's
    /// whole plugin directories, at their host paths.
    #[test]
    fn kubelet_directories_mounted_at_their_host_paths() {
        let spec = layout().pod("ns", "n").spec.unwrap();
        let volumes = spec.volumes.unwrap();
        let mounts = spec.containers[0].volume_mounts.clone().unwrap();
        let expect = [
            (
                "plugins",
                "/var/lib/kubelet/plugins",
                "/var/lib/kubelet/plugins",
            ),
            (
                "plugins-registry",
                "/var/lib/kubelet/plugins_registry",
                "/var/lib/kubelet/plugins_registry",
            ),
            ("cdi", "/var/lib/cdi", "/cdi"),
        ];
        assert_eq!(volumes.len(), expect.len());
        for (i, (name, host, mounted)) in expect.iter().enumerate() {
            assert_eq!(volumes[i].name, *name);
            assert_eq!(volumes[i].host_path.as_ref().unwrap().path, *host);
            assert_eq!(mounts[i].name, *name);
            assert_eq!(mounts[i].mount_path, *mounted);
        }
    }
}
