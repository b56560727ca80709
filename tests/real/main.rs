//! Real kubelet nodes on the local cluster (root; `make node` builds their
//! components): start, stop and faults; the image archives they import; and
//! the simulated kubelet compared with a real one. One test binary, so kube
//! and tonic are linked once.
mod differential;
mod driver_updates;
mod images;
mod installed;
mod interposer;
mod job;
mod kubeconfig;
mod manifests;
mod node;
mod node_hosts;
mod pod_api;
mod proxy_image;
mod reclaim;
mod standard;
