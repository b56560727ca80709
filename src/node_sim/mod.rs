//! Simulated kubelet nodes for the local cluster. Reaches plugins only through
//! their unix sockets, as a kubelet does.
