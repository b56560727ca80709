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

/// The start and stop times of a bench's runs, each printed as it comes.
#[derive(Default)]
pub struct Laps {
    pub starts: Vec<Duration>,
    pub stops: Vec<Duration>,
}

impl Laps {
    /// Records one of `runs` runs of `what`, whose start is `started` (the
    /// words before the start's figure).
    pub fn record(
        &mut self,
        what: &str,
        runs: usize,
        started: &str,
        start: Duration,
        stop: Duration,
    ) {
        println!(
            "{what} run {}/{runs}: {started} {:.2}s, stop {:.2}s",
            self.starts.len() + 1,
            start.as_secs_f64(),
            stop.as_secs_f64()
        );
        self.starts.push(start);
        self.stops.push(stop);
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
