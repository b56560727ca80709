//! The socket proxy: the agent on its own, its exit, local agents for the
//! local cluster, port-forward, and the runner with a killed agent. One test
//! binary, so kube and tonic are linked once.
mod agent;
mod agent_exit;
mod isolation;
mod local;
mod portforward;
mod runner;
mod support;
