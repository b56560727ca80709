//! Carrying connections from a node's unix sockets to the runner's servers.
//!
//! A kubelet connects to a unix socket on its node; an agent there pairs the
//! connection with one of the TCP connections the runner dialled ahead of
//! time; the bytes reach the runner's gRPC server through [`conn::Incoming`].
//! On real nodes the agent is the node host pod's own process (one per node
//! for the whole run, [`node_pods`], [`host_link`]), which the runner dials
//! at the node's address or through port-forward; with upstream's
//! hostpathplugin image, agents run by exec in that pod instead
//! ([`exec_agent`]). On simulated nodes the agent is a subprocess and the runner dials a
//! unix socket private to its user (never a loopback port, which every user
//! of the machine could connect to). [`ProxiedSocket`] puts the two halves
//! together. The other way round, [`connect`] opens one connection from the
//! runner to a socket on a node (the agent's `--connect` mode, by exec).
//!
//! [`conn::Incoming`]: dra_e2e_conn::Incoming
pub mod connect;
pub use dra_e2e_agent::endpoint;
pub mod exec;
pub mod exec_agent;
pub mod host_link;
pub mod local;
pub mod node_pods;
pub mod pod_files;
pub mod pods;
pub mod pool;
pub mod portforward;
pub mod socket;
pub mod transport;

pub use exec_agent::ExecAgent;
pub use host_link::{HostFiles, HostLink, HostLinkError};
pub use local::{LocalAgent, LocalAgentConfig, LocalAgentError, ProxySide};
pub use node_pods::{HostRoute, NodeHostFault, NodeLayout, NodePods, NodePodsError};
pub use pod_files::PodFiles;
pub use pods::{AgentKind, ProxyImage, ProxyPod, ProxyPodsError};
pub use pool::{FarEnd, PoolConfig, PoolStats, PreDialled};
pub use portforward::PortForward;
pub use socket::{LocalAgentInfo, ProxiedSocket, ProxyError};
pub use transport::{DialError, Dialled, TcpTransport, Transport, UnixTransport};
