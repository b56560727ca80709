//! KEP-5970's first behaviour: the kubelet lists a driver's registration
//! socket among the plugins it registered (its plugin manager's
//! `actual_state_of_world`, in the kubelet's metrics read through the API
//! server, [`crate::kubelet_metrics::read`]). A driver's socket is found by
//! its name (the kubelet plugin helper's default `<driver>-reg.sock`). A
//! simulated kubelet serves no metrics; it says what it registered.
use std::time::Duration;

use dra_e2e_cluster::Cluster;
use kube::Client;

use dra_e2e_kube::wait::{self, Check, WaitError};

use crate::kubelet_metrics;

/// The sockets of the plugins the kubelet registered, from its metrics
/// (`plugin_manager_total_plugins{socket_path="...",state="actual_state_of_world"}`).
pub fn registered_sockets(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("plugin_manager_total_plugins{"))
        .filter(|l| l.contains("state=\"actual_state_of_world\""))
        .filter(|l| !l.trim_end().ends_with(" 0"))
        .filter_map(|l| {
            let rest = &l[l.find("socket_path=\"")? + "socket_path=\"".len()..];
            Some(rest[..rest.find('"')?].to_owned())
        })
        .collect()
}

/// The named condition over one read of the kubelet's metrics: done once
/// a registered socket names `driver`; a failed read is pending (the
/// kubelet may be starting).
fn lists_driver<E: std::fmt::Display>(text: Result<String, E>, driver: &str) -> Check<()> {
    match text {
        Err(e) => Check::Pending(e.to_string()),
        Ok(text) => {
            let sockets = registered_sockets(&text);
            if sockets.iter().any(|s| s.contains(driver)) {
                Check::Done(())
            } else {
                Check::Pending(format!("registered plugin sockets: {sockets:?}"))
            }
        }
    }
}

/// Polls (the kubelet's metrics have no watch) until the kubelet of `node`
/// lists driver `driver`'s plugin as registered: every 200 ms what a
/// simulated kubelet says it connected, every second a real kubelet's
/// metrics.
pub async fn registered(
    cluster: &Cluster,
    client: &Client,
    node: &str,
    driver: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    if cluster.simulated_plugins(node).is_some() {
        let what = format!("the simulated kubelet of {node} to register driver {driver}'s plugin");
        return wait::poll(&what, timeout, Duration::from_millis(200), || async {
            let drivers = cluster.simulated_plugins(node).unwrap_or_default();
            if drivers.iter().any(|d| d == driver) {
                Check::Done(())
            } else {
                Check::Pending(format!("connected plugins of drivers {drivers:?}"))
            }
        })
        .await;
    }
    let what = format!("the kubelet of {node} to list driver {driver}'s plugin as registered");
    wait::poll(&what, timeout, Duration::from_secs(1), || async {
        lists_driver(kubelet_metrics::read(client, node).await, driver)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP plugin_manager_total_plugins ...\n\
plugin_manager_total_plugins{socket_path=\"/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock\",state=\"actual_state_of_world\"} 1\n\
plugin_manager_total_plugins{socket_path=\"/var/lib/kubelet/plugins_registry/other-reg.sock\",state=\"desired_state_of_world\"} 1\n\
plugin_manager_total_plugins{socket_path=\"/var/lib/kubelet/plugins_registry/gone-reg.sock\",state=\"actual_state_of_world\"} 0\n";

    #[test]
    fn registered_plugins_are_read_from_the_kubelets_metrics() {
        assert_eq!(
            registered_sockets(PAGE),
            vec!["/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock".to_owned()]
        );
    }

    #[test]
    fn only_a_registered_socket_of_the_driver_counts() {
        let ok = |t: &str| Ok::<_, String>(t.to_owned());
        assert!(matches!(
            lists_driver(ok(PAGE), "gpu.example.com"),
            Check::Done(())
        ));
        assert!(matches!(lists_driver(ok(PAGE), "other"), Check::Pending(_)));
        assert!(matches!(lists_driver(ok(PAGE), "gone"), Check::Pending(_)));
        match lists_driver(Err::<String, _>("no route"), "gpu.example.com") {
            Check::Pending(s) => assert_eq!(s, "no route"),
            other => panic!("{other:?}"),
        }
    }
}
