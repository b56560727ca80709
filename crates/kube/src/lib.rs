//! The Kubernetes API ground every floor above stands on: the objects a
//! scenario makes, named as upstream's tests name them ([`objects`]); waits
//! that watch with a deadline and say what they last saw ([`wait`]); and
//! what "a ready node" means ([`node_ready`]); and the toolkit for objects
//! of any kind ([`dynamic`]: the subset rule, patches, updates retried on
//! conflicts, watches that record); the one retry policy ([`retry`]) and
//! the one way to make a client whose requests ride out an API server
//! restarting ([`client`]); the conditions on a controller's pods and a
//! node's evictions ([`controller_pods`]). Nothing here knows about drivers,
//! plugins or how the cluster was started.
pub mod client;
pub mod controller_pods;
pub mod discovery;
pub mod dynamic;
pub mod node_ready;
pub mod objects;
pub mod retry;
pub mod wait;
