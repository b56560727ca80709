//! The simulated kubelet against the real control plane, one module per
//! area: pods (prepare, containers, status), ResourceSlices and leases, and
//! device health. One test binary, so kube and tonic are linked once.
mod health;
mod pods;
mod slices;
mod support;
