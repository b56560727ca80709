//! Start-up and stop time of real kubelet nodes (kubelet + containerd + runc)
//! on a running local control plane: image archives written, namespaces,
//! containerd with the images imported, kubelet, Node Ready — for one node
//! and for two at once.
//!
//! `make bench`, or `cargo bench --bench real_node_startup`. Runs:
//! `DRA_E2E_BENCH_RUNS` (default 3). Needs root and `make node`.
mod support;

use std::time::Instant;

use dra_e2e::cluster::real_node::{RealNodes, RealNodesOptions};
use support::summary;

fn main() {
    let runs = support::runs(3);
    let runtime = support::runtime();
    runtime.block_on(async {
        let cluster = support::start_cluster("real_node_startup").await;
        for count in [1, 2] {
            let mut laps = support::Laps::default();
            for _ in 0..runs {
                let options = RealNodesOptions {
                    ..RealNodesOptions::new(count)
                };
                let t = Instant::now();
                let mut nodes = match RealNodes::start(&cluster, &options).await {
                    Ok(n) => n,
                    Err(e) => {
                        eprintln!("real_node_startup: {e:#}");
                        std::process::exit(1);
                    }
                };
                let start = t.elapsed();
                let t = Instant::now();
                let left = tokio::task::spawn_blocking(move || nodes.stop())
                    .await
                    .expect("stopping the nodes");
                let stop = t.elapsed();
                if !left.is_empty() {
                    eprintln!("real_node_startup: left behind: {}", left.join(", "));
                    std::process::exit(1);
                }
                let what = format!("real_node_startup {count} node(s)");
                laps.record(&what, runs, "start to Ready", start, stop);
            }
            let support::Laps { starts, stops } = laps;
            println!(
                "real_node_startup {count} node(s): start to Ready median {:.2}s, stop median {:.2}s",
                summary(&starts).1.as_secs_f64(),
                summary(&stops).1.as_secs_f64()
            );
        }
        if let Err(e) = cluster.stop().await {
            eprintln!("real_node_startup: stopping the cluster: {e}");
        }
    });
}
