//! Start-up time of the local cluster: the first start in the process (cold:
//! binaries not yet in the page cache if nothing else ran them recently, no
//! TLS or client state warmed up) and a few more (warm).
//!
//! `make bench`, or `cargo bench --bench local_cluster_startup`. Runs:
//! `DRA_E2E_BENCH_RUNS` (default 4, the first one cold). Binaries are found as
//! for the tests (DRA_E2E_BINARIES_DIR, else the build cache).
mod support;

use std::time::Instant;

use support::summary;

fn main() {
    let runs = support::runs(4);
    let runtime = support::runtime();

    let mut laps = support::Laps::default();
    for run in 0..runs {
        let (start, stop) = runtime.block_on(async {
            let t = Instant::now();
            let cluster = support::start_cluster("local_cluster_startup").await;
            let start = t.elapsed();
            let t = Instant::now();
            if let Err(e) = cluster.stop().await {
                eprintln!("local_cluster_startup: stopping: {e}");
                std::process::exit(1);
            }
            (start, t.elapsed())
        });
        let started = if run == 0 { "cold start" } else { "warm start" };
        laps.record("local_cluster_startup", runs, started, start, stop);
    }
    let support::Laps { starts, stops } = laps;

    println!(
        "local_cluster_startup cold start: {:.2}s",
        starts[0].as_secs_f64()
    );
    if runs > 1 {
        let (min, median, max) = summary(&starts[1..]);
        println!(
            "local_cluster_startup warm start over {} runs: min {:.2}s, median {:.2}s, max {:.2}s",
            runs - 1,
            min.as_secs_f64(),
            median.as_secs_f64(),
            max.as_secs_f64()
        );
    }
    let (_, median_stop, max_stop) = summary(&stops);
    println!(
        "local_cluster_startup stop: median {:.2}s, max {:.2}s",
        median_stop.as_secs_f64(),
        max_stop.as_secs_f64()
    );
}
