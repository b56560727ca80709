//! Carrying connections from a node's unix sockets to the runner's servers.
//!
//! A kubelet connects to a unix socket on its node; an agent there pairs the
//! connection with one of the TCP connections the runner dialled ahead of
//! time; the bytes reach the runner's gRPC server through [`conn::Incoming`].
//! Remotely the agent runs by exec in the node's host pod (one per node for
//! the whole run, [`node_pods`]) and the runner dials through port-forward; locally the agent is a subprocess and the runner dials a
//! unix socket private to its user (never a loopback port, which every user
//! of the machine could connect to). [`ProxiedSocket`] puts the two halves
//! together. The other way round, [`connect`] opens one connection from the
//! runner to a socket on a node (the agent's `--connect` mode, by exec).
//!
//! [`conn::Incoming`]: dra_e2e_conn::Incoming
pub use dra_e2e_agent::proxy_agent as agent;
pub mod connect;
pub use dra_e2e_agent::endpoint;
pub mod exec;
pub mod exec_agent;
pub mod local;
pub mod node_pods;
pub mod pod_files;
pub mod pods;
pub mod pool;
pub mod portforward;
pub mod socket;
pub mod transport;

pub use exec_agent::ExecAgent;
pub use local::{LocalAgent, LocalAgentConfig, LocalAgentError, ProxySide};
pub use node_pods::{NodeLayout, NodePods, NodePodsError};
pub use pod_files::PodFiles;
pub use pods::{AgentKind, ProxyImage, ProxyPod, ProxyPodsError};
pub use pool::{FarEnd, PoolConfig, PoolStats, PreDialled};
pub use portforward::PortForward;
pub use socket::{LocalAgentInfo, ProxiedSocket, ProxyError};
pub use transport::{DialError, Dialled, TcpTransport, Transport, UnixTransport};
