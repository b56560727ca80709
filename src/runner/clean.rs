//! `dra-e2e clean`: removes, on demand, what runs that are gone left on the
//! host (temp dirs, real nodes' network namespaces, links and cgroups), as
//! every run does before it starts its local cluster; see
//! [`crate::cluster::host::leftovers`] for how a gone run is told from a live one.
use crate::cluster::host::leftovers::{REGISTRY_ENV, Registry};

/// The options of `dra-e2e clean` (none).
#[derive(Debug, clap::Args)]
#[command(
    about = "Remove what killed runs left on the host; never what a live run uses",
    long_about = "Remove what runs that are gone (killed with SIGKILL, say) left on this host: \
        their local cluster's temp dir, their real nodes' network namespaces, links and cgroup \
        directories. Each run records what it makes in a file it keeps locked while it lives \
        (/run/dra-e2e for root, dra-e2e.runs in the temp dir otherwise, or $DRA_E2E_RUN_RECORDS); \
        what a live run's record names is left alone. Prints what was removed and what was \
        left; exits with 1 if something could not be removed."
)]
pub struct CleanArgs {}

/// Entry point of the `clean` subcommand. Returns the exit code.
pub fn cli_main(_: CleanArgs) -> anyhow::Result<i32> {
    let registry = Registry::for_this_user();
    let r = registry.reclaim(true);
    for line in &r.removed {
        println!("removed: {line}");
    }
    for line in &r.alive {
        println!("left, in use: {line}");
    }
    for line in &r.unrecorded {
        println!("left: {line}");
    }
    for line in &r.failed {
        println!("could not remove: {line}");
    }
    println!(
        "clean: {} removed, {} left in use, {} left, {} could not be removed (records in {}{})",
        r.removed.len(),
        r.alive.len(),
        r.unrecorded.len(),
        r.failed.len(),
        registry.dir().display(),
        match std::env::var_os(REGISTRY_ENV) {
            Some(_) => format!(", from ${REGISTRY_ENV}"),
            None => String::new(),
        }
    );
    Ok(if r.failed.is_empty() { 0 } else { 1 })
}
