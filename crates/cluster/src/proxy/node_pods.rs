//! The run's node host pods: one privileged pod per node, made the first
//! time a driver needs that node and kept until the run ends.
//!
//! With an image carrying `dra-e2e-agent` the pod's own process is the node
//! host (`dra-e2e-agent node-host`, [`super::host_link`]): it serves every
//! driver's sockets on the node's address, so the kubelet finds them
//! answering whether or not the kubelet's streaming and the container
//! runtime work, as a driver's process would. It listens on a port chosen
//! for the run and takes only requests with the run's token, which the pod
//! reads from a Secret of the run's namespace. With upstream's hostpathplugin
//! image the pod only waits, and agents run in it by exec, as upstream's
//! suite runs them. Either way a scenario pays for no pod of its own (a
//! ReplicaSet's pods take about 3 s each way on real nodes). The pod mounts the kubelet's whole `plugins` and
//! `plugins_registry` directories at their host paths, so a socket created
//! in it is the socket the kubelet sees; a driver's own plugin directory is
//! made by its first agent. The pods live in a namespace of the run's
//! own, which [`NodePods::remove`] deletes at the end; the leak check looks
//! for such namespaces by [`NODE_HOSTS_LABEL`].
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_e2e_kube::wait::{self, Check, WaitError};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, HostPathVolumeSource, Namespace, Pod, PodSpec, Secret,
    SecretKeySelector, SecurityContext, ServiceAccount, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use tokio::sync::OnceCell;
use tracing::info;

use super::host_link::HostLink;
use super::pods::ProxyPod;
use super::pods::{AgentKind, CDI_MOUNT, ProxyImage};
use super::portforward::PortForward;
use super::portforward::container_state;
use super::transport::{TcpTransport, Transport};
use dra_e2e_agent::host_wire::TOKEN_ENV;

/// Marks the namespaces of node host pods, for the leak check.
pub const NODE_HOSTS_LABEL: &str = "dra-e2e.k8s.io/node-hosts";
/// The container agents are exec'd in.
pub const CONTAINER: &str = "node-host";
const SERVICE_ACCOUNT: &str = "node-host";
/// The Secret holding the run's token, and its key.
const TOKEN_SECRET: &str = "node-host-token";
const TOKEN_KEY: &str = "token";
/// The node hosts' port is picked per run from here: below the kernel's
/// ephemeral ports, above the well-known services'.
const PORTS: std::ops::Range<u16> = 20000..30000;
/// How long the node host may take to stop: it removes its sockets.
const STOP_GRACE_SECONDS: i64 = 5;
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
    #[error("node host pod {namespace}/{pod} on node {node} runs but has no address")]
    NoAddress {
        namespace: String,
        pod: String,
        node: String,
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

/// How the runner reaches a node host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRoute {
    /// The pod's address, which is the node's: where the runner's machine
    /// routes to the nodes (the local cluster). Needs neither the kubelet
    /// nor the container runtime.
    PodAddress,
    /// Port-forward through the API server and the kubelet, for clusters
    /// whose nodes the runner cannot reach; the pools dial again by
    /// themselves after the pod, the kubelet or the node restarted.
    PortForward,
}

/// A node host broken on purpose (`--node-host-fault`), so that a test
/// can show the node-operation scenarios that must notice it fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NodeHostFault {
    #[default]
    None,
    /// Sockets served by agents exec'd through the kubelet and the
    /// container runtime, as before node hosts: a reboot's pod never finds
    /// its devices again.
    ExecAgents,
    /// A socket's connections are never dialled again once the first ones
    /// are used or lost: after a reboot the socket never comes back.
    NoRedial,
}

/// Where the node host pods find the kubelet's directories.
#[derive(Debug, Clone)]
pub struct NodeLayout {
    pub kubelet_root: String,
    pub image: ProxyImage,
    /// The node's CDI spec directory, as its runtime reads it.
    pub cdi_host_dir: String,
    pub route: HostRoute,
    pub fault: NodeHostFault,
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

    /// Whether the pods' own process is the node host: with an image that
    /// carries one, unless told to exec agents instead.
    pub fn hosted(&self) -> bool {
        self.image.agent == AgentKind::DraE2e && self.fault != NodeHostFault::ExecAgents
    }

    /// How a socket's pool dials: for as long as it runs, unless broken.
    pub fn pool(&self) -> super::PoolConfig {
        let config = super::PoolConfig::default();
        match self.fault {
            NodeHostFault::NoRedial => super::PoolConfig {
                max_dials: Some(config.slots as u64),
                ..config
            },
            NodeHostFault::None | NodeHostFault::ExecAgents => config,
        }
    }

    /// The pod serving `node`, pinned to it without the scheduler: a node
    /// host must run where it is asked to, tainted or not. With the
    /// dra-e2e image its process is the node host on `port` of the node's
    /// network; with hostpathplugin's it waits for execs.
    pub fn pod(&self, namespace: &str, node: &str, port: u16) -> Pod {
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
        let hosted = self.hosted();
        let (command, env) = if hosted {
            (
                vec![
                    dra_e2e_agent::PROGRAM.into(),
                    "node-host".into(),
                    "--listen".into(),
                    format!("tcp://:{port}"),
                ],
                Some(vec![EnvVar {
                    name: TOKEN_ENV.into(),
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: TOKEN_SECRET.into(),
                            key: TOKEN_KEY.into(),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
            )
        } else {
            // A shell that waits: agents are started by exec.
            (
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "while true; do sleep 10000; done".into(),
                ],
                None,
            )
        };
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
                host_network: hosted.then_some(true),
                // Stands for a driver's process on the node: a node short of
                // disk or memory evicts the scenarios' pods before it, as it
                // would a driver's DaemonSet pods of that class.
                priority_class_name: Some("system-node-critical".into()),
                containers: vec![Container {
                    name: CONTAINER.into(),
                    image: Some(self.image.image.clone()),
                    command: Some(command),
                    env,
                    security_context: Some(SecurityContext {
                        privileged: Some(true),
                        ..Default::default()
                    }),
                    volume_mounts: Some(mounts),
                    ..Default::default()
                }],
                volumes: Some(volumes),
                // The node host removes its sockets on TERM; PID 1 `sh`
                // ignores it, and has nothing to wait for.
                termination_grace_period_seconds: Some(if hosted { STOP_GRACE_SECONDS } else { 0 }),
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
    /// The node hosts' port on their nodes, and the token they take.
    port: u16,
    token: Arc<str>,
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
        use rand::Rng as _;
        let mut rng = rand::rng();
        let token: String = (0..32)
            .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
            .collect();
        Self {
            client,
            layout,
            port: rng.random_range(PORTS),
            token: token.into(),
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
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(TOKEN_SECRET.into()),
                        ..Default::default()
                    },
                    string_data: Some(BTreeMap::from([(
                        TOKEN_KEY.to_owned(),
                        self.token.to_string(),
                    )])),
                    ..Default::default()
                };
                Api::<Secret>::namespaced(self.client.clone(), &name)
                    .create(&PostParams::default(), &secret)
                    .await
                    .map_err(api_err(format!("creating secret {TOKEN_SECRET} in {name}")))?;
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
            .create(
                &PostParams::default(),
                &self.layout.pod(namespace, node, self.port),
            )
            .await
        {
            Ok(_) => {}
            // An earlier attempt made it and then failed waiting.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(api_err(format!("creating pod {namespace}/{name}"))(e)),
        }
        // Through the house's wait, whose watch starts again when the API
        // server restarts (a chaos run restarts it while drivers start).
        let running = wait::object(
            &api,
            &name,
            &format!("node host pod {namespace}/{name} to run"),
            START_TIMEOUT,
            |p: Option<&Pod>| match p {
                None => Check::Pending("no pod".into()),
                Some(p) if wait::pod_phase(p) == "Running" => Check::Done(p.clone()),
                Some(p) => Check::Pending(container_state(p, CONTAINER)),
            },
        )
        .await;
        let pod = match running {
            Ok(pod) => pod,
            Err(e) => {
                let last = match e {
                    WaitError::Timeout { last_seen, .. } => last_seen,
                    other => other.to_string(),
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
        let link = if self.layout.hosted() {
            Some(Arc::new(HostLink::new(
                self.route(namespace, &name, node, &pod)?,
                self.token.clone(),
                node,
            )))
        } else {
            None
        };
        Ok(Arc::new(
            ProxyPod::new(
                namespace,
                name,
                pod.metadata.uid.unwrap_or_default(),
                node,
                CONTAINER,
                self.layout.image.agent,
            )
            .with_link(link),
        ))
    }

    /// The way to the node host in `pod` (running on `node`).
    fn route(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        pod: &Pod,
    ) -> Result<Arc<dyn Transport>, NodePodsError> {
        Ok(match self.layout.route {
            HostRoute::PortForward => Arc::new(PortForward::new(
                self.client.clone(),
                namespace,
                name,
                CONTAINER,
                self.port,
            )),
            HostRoute::PodAddress => {
                // The node's network: the pod's address is the node's, and
                // stays so across the pod's restarts.
                let ip = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.as_deref())
                    .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
                    .ok_or_else(|| NodePodsError::NoAddress {
                        namespace: namespace.to_owned(),
                        pod: name.to_owned(),
                        node: node.to_owned(),
                    })?;
                Arc::new(TcpTransport::new(std::net::SocketAddr::new(ip, self.port)))
            }
        })
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
        let gone = wait::object(
            &api,
            namespace,
            &format!("namespace {namespace} to be gone"),
            REMOVE_TIMEOUT,
            |ns: Option<&Namespace>| match ns {
                Some(ns) if ns.metadata.uid.as_deref() == Some(uid.as_str()) => {
                    Check::Pending("still there".into())
                }
                _ => Check::Done(()),
            },
        )
        .await;
        match gone {
            Ok(()) => {
                info!(%namespace, "node host pods removed");
                Ok(())
            }
            Err(_) => Err(NodePodsError::NotGone {
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
            route: HostRoute::PortForward,
            fault: NodeHostFault::None,
        }
    }

    #[test]
    fn one_privileged_pod_pinned_to_its_node_tolerating_every_taint() {
        let pod = layout().pod("ns", "worker-2", 20001);
        assert_eq!(pod.metadata.name.as_deref(), Some("node-host-worker-2"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("worker-2"));
        assert_eq!(
            spec.priority_class_name.as_deref(),
            Some("system-node-critical")
        );
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

    /// With the dra-e2e image the pod's own process is the node host, on
    /// the node's network, with the run's token from the Secret; with
    /// hostpathplugin's it waits for execs, as upstream's suite has it.
    #[test]
    fn the_node_host_is_the_pods_own_process_with_the_dra_e2e_image() {
        let spec = layout().pod("ns", "n", 20001).spec.unwrap();
        assert_eq!(spec.host_network, Some(true));
        let c = &spec.containers[0];
        assert_eq!(
            c.command.as_deref().unwrap(),
            ["dra-e2e-agent", "node-host", "--listen", "tcp://:20001"]
        );
        let env = &c.env.as_ref().unwrap()[0];
        assert_eq!(env.name, TOKEN_ENV);
        let from = env
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (from.name.as_str(), from.key.as_str()),
            (TOKEN_SECRET, TOKEN_KEY)
        );
        assert!(env.value.is_none(), "the token is not in the pod's spec");
        assert_eq!(
            spec.termination_grace_period_seconds,
            Some(STOP_GRACE_SECONDS)
        );

        let mut upstream = layout();
        upstream.image = ProxyImage::default();
        let mut by_exec = layout();
        by_exec.fault = NodeHostFault::ExecAgents;
        for waiting in [upstream, by_exec] {
            assert!(!waiting.hosted());
            let spec = waiting.pod("ns", "n", 20001).spec.unwrap();
            assert_eq!(spec.host_network, None);
            assert_eq!(spec.containers[0].command.as_ref().unwrap()[0], "/bin/sh");
            assert!(spec.containers[0].env.is_none());
        }
    }

    /// Every driver's directory is reachable: the mounts are the kubelet's
    /// whole plugin directories, at their host paths.
    #[test]
    fn kubelet_directories_mounted_at_their_host_paths() {
        let spec = layout().pod("ns", "n", 20001).spec.unwrap();
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
