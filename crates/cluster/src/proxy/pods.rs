//! The pods agents run in on a real cluster, and the agent programs their
//! images carry.
use std::sync::atomic::{AtomicU16, Ordering};

use super::exec::{ExecError, ExecTarget};
use super::pod_files::PodFiles;

pub const DEFAULT_IMAGE: &str = "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1";
/// Where the node's CDI spec directory appears inside the pod.
pub const CDI_MOUNT: &str = "/cdi";

#[derive(Debug, thiserror::Error)]
pub enum ProxyPodsError {
    #[error("socket path {socket:?} is {len} bytes; the proxy agent accepts at most {max}")]
    SocketPathTooLong {
        socket: String,
        len: usize,
        max: usize,
    },
    #[error(transparent)]
    Exec(#[from] ExecError),
}

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
    /// also the path inside the pod) on pod port `port`. The socket's
    /// directory is made first if missing: `dra-e2e-agent` makes it itself,
    /// hostpathplugin by a shell that then becomes it.
    pub fn command(&self, socket: &str, port: u16) -> Vec<String> {
        let proxy = format!("tcp://:{port}");
        match self {
            AgentKind::HostPathPlugin => vec![
                "/bin/sh".into(),
                "-c".into(),
                r#"mkdir -p "$0" && exec "$@""#.into(),
                socket
                    .rsplit_once('/')
                    .map_or("/", |(dir, _)| if dir.is_empty() { "/" } else { dir })
                    .to_owned(),
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
    /// The pod's own node host process, with an image that carries one.
    link: Option<std::sync::Arc<super::host_link::HostLink>>,
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
            link: None,
            last_port: AtomicU16::new(FIRST_PORT_BASE),
        }
    }

    /// The pod's node host process, where it has one.
    pub fn with_link(mut self, link: Option<std::sync::Arc<super::host_link::HostLink>>) -> Self {
        self.link = link;
        self
    }

    /// The pod's node host process: with it, nothing of the pod is reached
    /// by exec.
    pub fn link(&self) -> Option<&std::sync::Arc<super::host_link::HostLink>> {
        self.link.as_ref()
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
        PodFiles::new(client, self.exec_target(), CDI_MOUNT)
    }
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

    #[test]
    fn agent_commands_by_kind() {
        let sock = "/var/lib/kubelet/plugins/d.k8s.io/dra.sock";
        assert_eq!(
            AgentKind::HostPathPlugin.command(sock, 9001),
            [
                "/bin/sh",
                "-c",
                r#"mkdir -p "$0" && exec "$@""#,
                "/var/lib/kubelet/plugins/d.k8s.io",
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
