//! What the start-up benches share: how many runs, the runtime, a local
//! control plane that must start, and the figures.
use std::time::Duration;

use dra_e2e::cluster::local::{LocalCluster, LocalClusterOptions};

/// `DRA_E2E_BENCH_RUNS`, at least 1, else `default`. libtest-style flags
/// such as `--bench` are passed by cargo; nothing here takes options, so they
/// are ignored.
pub fn runs(default: usize) -> usize {
    std::env::var("DRA_E2E_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(default)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A local control plane; a bench without one measures nothing, so it ends.
pub async fn start_cluster(bench: &str) -> LocalCluster {
    match LocalCluster::start(LocalClusterOptions::default()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{bench}: {e}");
            std::process::exit(1);
        }
    }
}

/// Minimum, median and maximum of `samples` (not empty).
pub fn summary(samples: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    (
        sorted[0],
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
    )
}
