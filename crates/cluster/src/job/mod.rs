//! The conformance pack run inside the cluster under test, as a Job, for a
//! driver author who cannot reach the cluster's nodes with root or a
//! port-forward (as Kubernetes' own conformance runners do).
//!
//! The runner on the author's machine ([`objects`]) makes a namespace, a
//! ServiceAccount bound to `cluster-admin` (the pack creates namespaces,
//! classes and claims), a ConfigMap with the driver profile, and a Job
//! whose one pod runs the runner image (`dra-e2e image runner`) against the
//! in-cluster config. The pod's wrapper stores the reports and the
//! transcript in ConfigMaps of that namespace ([`results`]) before it exits,
//! and the outside runner reads them back: everything travels through the
//! API server, nothing through the kubelet's streaming (logs, exec,
//! port-forward), which such clusters often do not offer.
pub mod objects;
pub mod results;

/// Labels everything a Job run makes with its namespace's name, so that
/// what one run left (it was killed) can be found by label.
pub const JOB_LABEL: &str = "dra-e2e.k8s.io/job";
