//! This machine, as the runner uses it to run a cluster: the processes it
//! starts and supervises, the ones a run cannot do without, and the
//! certificates it issues, the built programs it finds. The local control
//! plane and the real nodes both build on it.
pub mod agent;
pub mod binaries;
pub mod build_sources;
pub mod cgroups;
pub mod go_toolchain;
pub mod kube_version;
pub mod leftovers;
pub mod pki;
pub mod process;
pub mod services;
pub mod vital;
