//! The proxy pods' ReplicaSet: one privileged, sleeping pod per node that
//! exposes the kubelet's plugin directories at their host paths.
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, HostPathVolumeSource, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

pub const BASE_NAME: &str = "dra-test-driver";
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1";
pub const DEFAULT_KUBELET_ROOT: &str = "/var/lib/kubelet";
pub const CONTAINER_NAME: &str = "pause";
/// Where the node's CDI spec directory appears inside the pod.
pub const CDI_MOUNT: &str = "/cdi";
pub const CDI_HOST_DIR: &str = "/var/run/cdi";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";

/// Which agent program the proxy image carries; decides the exec command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// csi-driver-host-path's `/hostpathplugin` in `--proxy-endpoint` mode.
    HostPathPlugin,
    /// An image with `dra-e2e` on its `PATH` (and `sh`, `base64`, `mv`, `rm`).
    DraE2e,
}

/// The longest socket path a unix listen accepts (`sun_path` is 108 bytes,
/// NUL included).
const SUN_PATH_MAX: usize = 107;

impl AgentKind {
    /// The command that starts the agent for `socket` (a host path, which is
    /// also the path inside the pod) on pod port `port`.
    pub fn command(&self, socket: &str, port: u16) -> Vec<String> {
        let proxy = format!("tcp://:{port}");
        match self {
            AgentKind::HostPathPlugin => vec![
                "/hostpathplugin".into(),
                "--v=5".into(),
                format!("--endpoint={socket}"),
                format!("--proxy-endpoint={proxy}"),
            ],
            AgentKind::DraE2e => vec![
                dra_e2e_agent::PROGRAM.into(),
                "proxy-agent".into(),
                "--endpoint".into(),
                socket.into(),
                "--proxy-endpoint".into(),
                proxy,
            ],
        }
    }

    /// hostpathplugin v1.17.1 listens on `"/" + path`, one byte more.
    pub fn max_socket_path(&self) -> usize {
        match self {
            AgentKind::HostPathPlugin => SUN_PATH_MAX - 1,
            AgentKind::DraE2e => SUN_PATH_MAX,
        }
    }
}

/// Image of the proxy pods and the agent it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyImage {
    pub image: String,
    pub agent: AgentKind,
}

impl Default for ProxyImage {
    fn default() -> Self {
        Self {
            image: DEFAULT_IMAGE.into(),
            agent: AgentKind::HostPathPlugin,
        }
    }
}

/// What the proxy pods of one driver instance look like.
#[derive(Debug, Clone)]
pub struct ProxyPodsSpec {
    pub namespace: String,
    pub driver_name: String,
    /// Appended to the ReplicaSet name (upstream `NameSuffix`).
    pub name_suffix: String,
    /// Distinguishes two instances of one driver (rolling updates).
    pub instance_suffix: String,
    /// Nodes to cover, one pod each.
    pub nodes: Vec<String>,
    pub kubelet_root: String,
    pub image: ProxyImage,
    /// The node's CDI spec directory, as its container runtime is
    /// configured (`cdi_spec_dirs` in containerd): spec files written
    /// anywhere else are never seen.
    pub cdi_host_dir: String,
}

impl ProxyPodsSpec {
    pub fn new(
        namespace: impl Into<String>,
        driver_name: impl Into<String>,
        nodes: Vec<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            driver_name: driver_name.into(),
            name_suffix: String::new(),
            instance_suffix: String::new(),
            nodes,
            kubelet_root: DEFAULT_KUBELET_ROOT.into(),
            image: ProxyImage::default(),
            cdi_host_dir: CDI_HOST_DIR.into(),
        }
    }

    pub fn name(&self) -> String {
        format!("{BASE_NAME}{}{}", self.name_suffix, self.instance_suffix)
    }

    /// Value of the instance label, unique per driver instance.
    pub fn instance(&self) -> String {
        format!("{}{}", self.driver_name, self.instance_suffix)
    }

    pub fn service_account(&self) -> String {
        format!("dra-kubelet-plugin-{}-service-account", self.instance())
    }

    /// The driver's plugin directory, on the host and in the pod alike.
    pub fn plugin_dir(&self) -> String {
        format!(
            "{}/plugins/{}",
            self.kubelet_root.trim_end_matches('/'),
            self.driver_name
        )
    }

    /// The kubelet's registration directory, on the host and in the pod alike.
    pub fn registry_dir(&self) -> String {
        format!(
            "{}/plugins_registry",
            self.kubelet_root.trim_end_matches('/')
        )
    }

    /// Label selector matching exactly this instance's pods.
    pub fn selector(&self) -> String {
        format!("{LABEL_INSTANCE}={}", self.instance())
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_INSTANCE.to_owned(), self.instance()),
            (LABEL_PART_OF.to_owned(), BASE_NAME.to_owned()),
            (LABEL_NAME.to_owned(), format!("{BASE_NAME}-kubelet-plugin")),
            (LABEL_COMPONENT.to_owned(), "kubelet-plugin".to_owned()),
        ])
    }

    pub fn replica_set(&self) -> ReplicaSet {
        let labels = self.labels();
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
        // The agent creates sockets at the paths the kubelet is told about,
        // so the plugin directories are mounted at their host paths.
        let volumes = vec![
            host_path("socket-dir", self.plugin_dir()),
            host_path("registration-dir", self.registry_dir()),
            host_path("cdi-dir", self.cdi_host_dir.clone()),
        ];
        let mounts = vec![
            mount("socket-dir", self.plugin_dir()),
            mount("registration-dir", self.registry_dir()),
            mount("cdi-dir", CDI_MOUNT.into()),
        ];
        let container = Container {
            name: CONTAINER_NAME.into(),
            image: Some(self.image.image.clone()),
            // Only a shell that waits: agents are started later by exec.
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
        };
        let affinity = Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.into(),
                            operator: "In".into(),
                            values: Some(self.nodes.clone()),
                        }]),
                        ..Default::default()
                    }],
                }),
                ..Default::default()
            }),
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            LABEL_INSTANCE.to_owned(),
                            self.instance(),
                        )])),
                        ..Default::default()
                    }),
                    topology_key: HOSTNAME_LABEL.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(self.name()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels.clone()),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(i32::try_from(self.nodes.len()).unwrap_or(i32::MAX)),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..Default::default()
                },
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        service_account_name: Some(self.service_account()),
                        affinity: Some(affinity),
                        containers: vec![container],
                        volumes: Some(volumes),
                        // PID 1 `sh` ignores TERM; don't wait 30 s for it at teardown.
                        termination_grace_period_seconds: Some(1),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ProxyPodsSpec {
        let mut s = ProxyPodsSpec::new(
            "dra-e2e-abc",
            "dra-e2e-abc.k8s.io",
            vec!["worker".into(), "worker2".into()],
        );
        s.name_suffix = "-x".into();
        s.instance_suffix = "-2".into();
        s
    }

    #[test]
    fn names_labels_and_replicas() {
        let rs = spec().replica_set();
        assert_eq!(rs.metadata.name.as_deref(), Some("dra-test-driver-x-2"));
        assert_eq!(rs.metadata.namespace.as_deref(), Some("dra-e2e-abc"));
        let spec_ = rs.spec;
        assert_eq!(spec_.replicas, Some(2));
        let labels = spec_.selector.match_labels.unwrap();
        assert_eq!(labels[LABEL_INSTANCE], "dra-e2e-abc.k8s.io-2");
        assert_eq!(labels[LABEL_PART_OF], "dra-test-driver");
        assert_eq!(labels[LABEL_NAME], "dra-test-driver-kubelet-plugin");
        assert_eq!(labels[LABEL_COMPONENT], "kubelet-plugin");
        let tmpl = spec_.template.unwrap();
        assert_eq!(tmpl.metadata.unwrap().labels.unwrap(), labels);
        assert_eq!(
            tmpl.spec.unwrap().service_account_name.as_deref(),
            Some("dra-kubelet-plugin-dra-e2e-abc.k8s.io-2-service-account")
        );
    }

    #[test]
    fn affinities_pin_one_pod_per_selected_node() {
        let pod = spec().replica_set().spec.template.unwrap().spec.unwrap();
        let affinity = pod.affinity.unwrap();
        let anti = affinity
            .pod_anti_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap();
        assert_eq!(anti.len(), 1);
        assert_eq!(anti[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(
            anti[0]
                .label_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap(),
            &BTreeMap::from([(LABEL_INSTANCE.to_owned(), "dra-e2e-abc.k8s.io-2".to_owned())])
        );
        let terms = affinity
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms;
        let expr = &terms[0].match_expressions.as_ref().unwrap()[0];
        assert_eq!(expr.key, "kubernetes.io/hostname");
        assert_eq!(expr.operator, "In");
        assert_eq!(
            expr.values.as_deref(),
            Some(&["worker".to_owned(), "worker2".to_owned()][..])
        );
    }

    #[test]
    fn one_privileged_container_mounting_host_dirs_at_identical_paths() {
        let mut s = spec();
        s.kubelet_root = "/var/lib/kubelet/".into();
        s.image = ProxyImage {
            image: "example.com/dra-e2e:dev".into(),
            agent: AgentKind::DraE2e,
        };
        let pod = s.replica_set().spec.template.unwrap().spec.unwrap();
        assert_eq!(pod.containers.len(), 1);
        let c = &pod.containers[0];
        assert_eq!(c.name, "pause");
        assert_eq!(c.image.as_deref(), Some("example.com/dra-e2e:dev"));
        assert_eq!(c.security_context.as_ref().unwrap().privileged, Some(true));
        assert_eq!(
            c.command.as_deref().unwrap(),
            ["/bin/sh", "-c", "while true; do sleep 10000; done"]
        );
        let volumes = pod.volumes.unwrap();
        let mounts = c.volume_mounts.as_ref().unwrap();
        let expect = [
            (
                "socket-dir",
                "/var/lib/kubelet/plugins/dra-e2e-abc.k8s.io",
                "/var/lib/kubelet/plugins/dra-e2e-abc.k8s.io",
            ),
            (
                "registration-dir",
                "/var/lib/kubelet/plugins_registry",
                "/var/lib/kubelet/plugins_registry",
            ),
            ("cdi-dir", "/var/run/cdi", "/cdi"),
        ];
        assert_eq!(volumes.len(), 3);
        assert_eq!(mounts.len(), 3);
        for (i, (name, host, mounted)) in expect.iter().enumerate() {
            assert_eq!(volumes[i].name, *name);
            let hp = volumes[i].host_path.as_ref().unwrap();
            assert_eq!(hp.path, *host);
            assert_eq!(hp.type_.as_deref(), Some("DirectoryOrCreate"));
            assert_eq!(mounts[i].name, *name);
            assert_eq!(mounts[i].mount_path, *mounted);
        }
    }

    /// The spec files must land where the node's runtime reads them; a
    /// runtime configured for another directory never sees `/var/run/cdi`.
    #[test]
    fn cdi_specs_go_where_the_runtime_reads_them() {
        let mut s = spec();
        s.cdi_host_dir = "/var/lib/cdi".into();
        let pod = s.replica_set().spec.template.unwrap().spec.unwrap();
        let volumes = pod.volumes.unwrap();
        let cdi = volumes.iter().find(|v| v.name == "cdi-dir").unwrap();
        assert_eq!(cdi.host_path.as_ref().unwrap().path, "/var/lib/cdi");
    }

    #[test]
    fn default_image_is_hostpathplugin() {
        let s = ProxyPodsSpec::new("ns", "d.k8s.io", vec!["n".into()]);
        let pod = s.replica_set().spec.template.unwrap().spec.unwrap();
        assert_eq!(
            pod.containers[0].image.as_deref(),
            Some("registry.k8s.io/sig-storage/hostpathplugin:v1.17.1")
        );
        assert_eq!(s.image.agent, AgentKind::HostPathPlugin);
        assert_eq!(s.name(), "dra-test-driver");
    }

    #[test]
    fn agent_commands_by_kind() {
        let sock = "/var/lib/kubelet/plugins/d.k8s.io/dra.sock";
        assert_eq!(
            AgentKind::HostPathPlugin.command(sock, 9001),
            [
                "/hostpathplugin",
                "--v=5",
                "--endpoint=/var/lib/kubelet/plugins/d.k8s.io/dra.sock",
                "--proxy-endpoint=tcp://:9001"
            ]
        );
        assert_eq!(
            AgentKind::DraE2e.command(sock, 9002),
            [
                "dra-e2e-agent",
                "proxy-agent",
                "--endpoint",
                sock,
                "--proxy-endpoint",
                "tcp://:9002"
            ]
        );
        // hostpathplugin v1.17.1 prepends '/', costing one byte of sun_path.
        assert_eq!(AgentKind::HostPathPlugin.max_socket_path(), 106);
        assert_eq!(AgentKind::DraE2e.max_socket_path(), 107);
    }
}
