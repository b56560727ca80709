//! Carrying connections from a node's unix sockets to the runner's servers.
pub mod agent;
