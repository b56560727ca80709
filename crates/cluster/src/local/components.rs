//! Command lines of the four components. Pure functions of the cluster's
//! layout, ports and settings, so they can be checked without running anything.
use std::ffi::OsString;
use std::path::PathBuf;

use crate::gates::FeatureGates;
use crate::host::pki::Pki;

/// Gate of the resource pool status controller (alpha in 1.37).
pub const RESOURCE_POOL_STATUS_GATE: &str = "DRAResourcePoolStatus";

/// What an alpha gate cannot work without on the local cluster: the API
/// versions that carry its objects (off by default, so `--runtime-config`
/// must name them) and the controllers that act on them (not in the default
/// controller list). One row per gate; a gate without needs has no row.
struct GateNeeds {
    gate: &'static str,
    /// The Kubernetes minors the row holds for, oldest and newest (both
    /// included); an API moves to another version between releases.
    minors: (u32, u32),
    apis: &'static [&'static str],
    controllers: &'static [&'static str],
}

/// Every release the runner knows.
const ALL_MINORS: (u32, u32) = (0, u32::MAX);

const GATE_NEEDS: &[GateNeeds] = &[
    GateNeeds {
        gate: RESOURCE_POOL_STATUS_GATE,
        minors: ALL_MINORS,
        apis: &["resource.k8s.io/v1alpha3"],
        controllers: &["resourcepoolstatusrequest-controller"],
    },
    // Workload and PodGroup are served as scheduling.k8s.io/v1beta1 in 1.37
    // (beta, off by default); the protection controller keeps a PodGroup
    // until its pods are gone. Claims for PodGroups come from the
    // resourceclaim-controller, which always runs.
    GateNeeds {
        gate: "GenericWorkload",
        minors: ALL_MINORS,
        apis: &["scheduling.k8s.io/v1beta1"],
        controllers: &["podgroup-protection-controller"],
    },
    // Until 1.35 DeviceTaintRules are served as resource.k8s.io/v1alpha3
    // only, off by default; the scheduler with the gate on waits for their
    // informer, so without the API it schedules nothing at all.
    GateNeeds {
        gate: "DRADeviceTaintRules",
        minors: (0, 35),
        apis: &["resource.k8s.io/v1alpha3"],
        controllers: &[],
    },
];

/// The controllers the local cluster runs for `gate` when it is on.
pub fn controllers_for_gate(gate: &str) -> &'static [&'static str] {
    GATE_NEEDS
        .iter()
        .find(|n| n.gate == gate)
        .map_or(&[], |n| n.controllers)
}

/// The controllers a kube-controller-manager has, as its `--help` lists
/// them ("All controllers: a, b, ..."); an older release lacks a newer
/// gate's controller and refuses to start when it is named.
pub fn known_controllers(
    kube_controller_manager: &std::path::Path,
) -> std::io::Result<Vec<String>> {
    let out = std::process::Command::new(kube_controller_manager)
        .arg("--help")
        .stdin(std::process::Stdio::null())
        .output()?;
    Ok(listed_controllers(&String::from_utf8_lossy(&out.stdout)))
}

fn listed_controllers(help: &str) -> Vec<String> {
    const ALL: &str = "All controllers: ";
    help.lines()
        .find_map(|l| l.split_once(ALL).map(|(_, rest)| rest))
        .map(|rest| {
            rest.split(',')
                .map(|c| c.trim().trim_end_matches('.').to_owned())
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The rows of the gates on in `gates`, for Kubernetes 1.`minor` (every
/// release's rows when it is not known).
fn needs_of(
    gates: &FeatureGates,
    minor: Option<u32>,
) -> impl Iterator<Item = &'static GateNeeds> + '_ {
    GATE_NEEDS.iter().filter(move |n| {
        gates.enabled(n.gate, false) && minor.is_none_or(|m| (n.minors.0..=n.minors.1).contains(&m))
    })
}

/// The service-account issuer; also the in-cluster name of the API server.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc";

/// Loopback ports, all chosen free before start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    /// The API server's address as clients are given it: its front door
    /// ([`super::front_door`]).
    pub apiserver: u16,
    /// The API server's own port, behind the front door.
    pub apiserver_behind: u16,
    pub scheduler: u16,
    pub controller_manager: u16,
}

/// What every command line is built from.
#[derive(Debug, Clone)]
pub struct Settings<'a> {
    pub ports: Ports,
    pub pki: &'a Pki,
    pub etcd_data_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub feature_gates: &'a FeatureGates,
    /// `--runtime-config` entries such as `resource.k8s.io/v1beta1=true`.
    pub runtime_config: &'a [String],
    /// The control plane's Kubernetes minor (`kube-apiserver --version`),
    /// when it could be read: what a gate needs depends on the release.
    pub minor: Option<u32>,
}

/// Controllers the DRA scenarios depend on, and the ones whose absence would
/// make ordinary objects misbehave (namespaces never finishing deletion,
/// owners' dependents never collected, pods never created from workloads).
const CONTROLLERS: &[&str] = &[
    "resourceclaim-controller",
    "device-taint-eviction-controller",
    "garbage-collector-controller",
    "namespace-controller",
    // The ServiceAccount admission plugin stays on (pods get the default
    // account, as on a real cluster), so accounts and the root CA config map
    // must be created in every namespace.
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "replicaset-controller",
    "daemonset-controller",
    "job-controller",
    "pod-garbage-collector-controller",
    // count/resourceclaims.resource.k8s.io quotas need their usage computed.
    "resourcequota-controller",
    // A node that stops renewing its Lease is marked Ready=Unknown and
    // tainted unreachable, and its pods evicted after their tolerations,
    // as on any cluster (a node lost and back, features/node_loss.feature).
    "node-lifecycle-controller",
    "taint-eviction-controller",
];

fn arg(name: &str, value: impl std::fmt::Display) -> OsString {
    format!("--{name}={value}").into()
}

fn path_arg(name: &str, value: &std::path::Path) -> OsString {
    let mut s = OsString::from(format!("--{name}="));
    s.push(value.as_os_str());
    s
}

fn gates_arg(gates: &FeatureGates) -> Option<OsString> {
    (!gates.is_empty()).then(|| arg("feature-gates", gates))
}

/// The runtime config actually passed: the requested entries plus any API an
/// enabled gate cannot work without.
pub fn effective_runtime_config(
    requested: &[String],
    gates: &FeatureGates,
    minor: Option<u32>,
) -> Vec<String> {
    let mut entries = requested.to_vec();
    for api in needs_of(gates, minor).flat_map(|n| n.apis) {
        if !entries.iter().any(|e| e.split('=').next() == Some(api)) {
            entries.push(format!("{api}=true"));
        }
    }
    entries
}

/// The controllers kube-controller-manager runs for these gates.
pub fn controllers(gates: &FeatureGates, minor: Option<u32>) -> Vec<&'static str> {
    let mut list = CONTROLLERS.to_vec();
    for c in needs_of(gates, minor).flat_map(|n| n.controllers) {
        if !list.contains(c) {
            list.push(c);
        }
    }
    list
}

/// etcd's client URL: TLS on loopback, the only way in.
pub fn etcd_url(ports: &Ports) -> String {
    format!("https://127.0.0.1:{}", ports.etcd_client)
}

/// etcd as kubeadm runs it: TLS on both listeners and a client certificate
/// from etcd's own CA required on both, so another user of the machine can
/// neither read nor write the cluster's state through etcd's port.
pub fn etcd_args(s: &Settings<'_>) -> Vec<OsString> {
    let etcd = &s.pki.etcd;
    let client = etcd_url(&s.ports);
    // A single member never dials a peer, but etcd has no way to run
    // without a peer listener; it gets the same protection.
    let peer = format!("https://127.0.0.1:{}", s.ports.etcd_peer);
    vec![
        arg("name", "default"),
        path_arg("data-dir", &s.etcd_data_dir),
        arg("listen-client-urls", &client),
        arg("advertise-client-urls", &client),
        path_arg("cert-file", &etcd.server.cert_path),
        path_arg("key-file", &etcd.server.key_path),
        arg("client-cert-auth", true),
        path_arg("trusted-ca-file", &etcd.ca.cert_path),
        arg("listen-peer-urls", &peer),
        arg("initial-advertise-peer-urls", &peer),
        arg("initial-cluster", format!("default={peer}")),
        path_arg("peer-cert-file", &etcd.peer.cert_path),
        path_arg("peer-key-file", &etcd.peer.key_path),
        arg("peer-client-cert-auth", true),
        path_arg("peer-trusted-ca-file", &etcd.ca.cert_path),
        // Test data is thrown away with the cluster; fsync would only cost time.
        arg("unsafe-no-fsync", true),
    ]
}

pub fn apiserver_args(s: &Settings<'_>) -> Vec<OsString> {
    let pki = s.pki;
    let mut args = vec![
        arg("etcd-servers", etcd_url(&s.ports)),
        path_arg("etcd-cafile", &pki.etcd.ca.cert_path),
        path_arg("etcd-certfile", &pki.etcd.apiserver_client.cert_path),
        path_arg("etcd-keyfile", &pki.etcd.apiserver_client.key_path),
        arg("bind-address", "127.0.0.1"),
        arg("advertise-address", "127.0.0.1"),
        arg("secure-port", s.ports.apiserver_behind),
        path_arg("tls-cert-file", &pki.apiserver.cert_path),
        path_arg("tls-private-key-file", &pki.apiserver.key_path),
        path_arg(
            "cert-dir",
            pki.ca
                .cert_path
                .parent()
                .unwrap_or(std::path::Path::new(".")),
        ),
        path_arg("client-ca-file", &pki.ca.cert_path),
        path_arg(
            "requestheader-client-ca-file",
            &pki.front_proxy_ca.cert_path,
        ),
        arg("requestheader-allowed-names", "front-proxy-client"),
        arg("requestheader-username-headers", "X-Remote-User"),
        arg("requestheader-group-headers", "X-Remote-Group"),
        arg("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        arg("authorization-mode", "Node,RBAC"),
        // Kubelets (real nodes) are reached as a real cluster reaches them:
        // with a client certificate from the cluster CA, their serving
        // certificates verified, at their InternalIP.
        path_arg(
            "kubelet-client-certificate",
            &pki.apiserver_kubelet_client.cert_path,
        ),
        path_arg("kubelet-client-key", &pki.apiserver_kubelet_client.key_path),
        path_arg("kubelet-certificate-authority", &pki.ca.cert_path),
        arg("kubelet-preferred-address-types", "InternalIP"),
        arg("enable-admission-plugins", "NodeRestriction"),
        arg("service-account-issuer", SERVICE_ACCOUNT_ISSUER),
        path_arg("service-account-key-file", &pki.sa_pub_path),
        path_arg("service-account-signing-key-file", &pki.sa_key_path),
        arg(
            "service-cluster-ip-range",
            crate::host::services::service_cluster_ip_range(),
        ),
        // The advertise address, 127.0.0.1, would be the `kubernetes`
        // Service's endpoint, which nothing outside the host's loopback could
        // reach: no endpoint is published. Real nodes reach the Service's
        // ClusterIP by NAT rules of their own (see `real_node::net`), which
        // need none.
        arg("endpoint-reconciler-type", "none"),
        arg("allow-privileged", true),
        // This plugin taints every new Node not-ready until the
        // node-lifecycle-controller sees it Ready and lifts the taint (on
        // its 5 s monitor period): the nodes here post Ready when they
        // register, so the taint would only delay every node's start.
        arg("disable-admission-plugins", "TaintNodesByCondition"),
        // Priority and fairness costs CPU the 2-core machines do not have.
        arg("enable-priority-and-fairness", false),
    ];
    let runtime_config = effective_runtime_config(s.runtime_config, s.feature_gates, s.minor);
    if !runtime_config.is_empty() {
        args.push(arg("runtime-config", runtime_config.join(",")));
    }
    args.extend(gates_arg(s.feature_gates));
    args
}

/// Flags kube-scheduler and kube-controller-manager share.
fn controller_common(
    s: &Settings<'_>,
    port: u16,
    serving: &crate::host::pki::CertPair,
) -> Vec<OsString> {
    let mut args = vec![
        path_arg("kubeconfig", &s.kubeconfig),
        path_arg("authentication-kubeconfig", &s.kubeconfig),
        path_arg("authorization-kubeconfig", &s.kubeconfig),
        arg("leader-elect", false),
        arg("bind-address", "127.0.0.1"),
        arg("secure-port", port),
        path_arg("tls-cert-file", &serving.cert_path),
        path_arg("tls-private-key-file", &serving.key_path),
        // Health checks without credentials; nothing more (not /metrics):
        // the port is open to every user of the machine.
        arg(
            "authorization-always-allow-paths",
            "/healthz,/readyz,/livez",
        ),
        // Scenarios create and delete many objects in bursts; the default
        // client rate limits would make controllers lag behind them. The
        // namespace controller is the hungriest: about 64 requests to sweep
        // one namespace, so at 100 a second the last scenarios' namespaces
        // queued for seconds after the run.
        arg("kube-api-qps", 1000),
        arg("kube-api-burst", 2000),
    ];
    args.extend(gates_arg(s.feature_gates));
    args
}

pub fn scheduler_args(s: &Settings<'_>) -> Vec<OsString> {
    controller_common(s, s.ports.scheduler, &s.pki.scheduler_serving)
}

pub fn controller_manager_args(s: &Settings<'_>) -> Vec<OsString> {
    let mut args = controller_common(
        s,
        s.ports.controller_manager,
        &s.pki.controller_manager_serving,
    );
    args.push(arg(
        "controllers",
        controllers(s.feature_gates, s.minor).join(","),
    ));
    args.push(path_arg(
        "service-account-private-key-file",
        &s.pki.sa_key_path,
    ));
    args.push(path_arg("root-ca-file", &s.pki.ca.cert_path));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controllers_are_read_from_the_help() {
        let help = "      --controllers strings   A list of controllers to enable.\n\
                    \t\t\tAll controllers: bootstrap-signer-controller, cronjob-controller, device-taint-eviction-controller\n\
                    \t\t\tDisabled-by-default controllers: bootstrap-signer-controller (default [*])\n";
        assert_eq!(
            listed_controllers(help),
            [
                "bootstrap-signer-controller",
                "cronjob-controller",
                "device-taint-eviction-controller"
            ]
        );
        assert!(listed_controllers("no list").is_empty());
        assert_eq!(
            controllers_for_gate("GenericWorkload"),
            ["podgroup-protection-controller"]
        );
        assert!(controllers_for_gate("DRADeviceTaints").is_empty());
    }

    fn with_settings(gates: &FeatureGates, f: impl FnOnce(&Settings<'_>)) {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();
        let rc = vec!["resource.k8s.io/v1beta1=true".to_string()];
        let s = Settings {
            ports: Ports {
                etcd_client: 1,
                etcd_peer: 2,
                apiserver: 3,
                apiserver_behind: 6,
                scheduler: 4,
                controller_manager: 5,
            },
            pki: &pki,
            etcd_data_dir: tmp.path().join("etcd"),
            kubeconfig: tmp.path().join("kubeconfig"),
            feature_gates: gates,
            runtime_config: &rc,
            minor: Some(37),
        };
        f(&s);
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        let prefix = format!("--{flag}=");
        args.iter().find_map(|a| a.strip_prefix(&prefix))
    }

    #[test]
    fn every_component_gets_the_same_gates() {
        let gates = FeatureGates::new()
            .with("DRADeviceTaints", false)
            .with("DRAPartitionableDevices", true);
        with_settings(&gates, |s| {
            for args in [
                apiserver_args(s),
                scheduler_args(s),
                controller_manager_args(s),
            ] {
                let args = strings(args);
                assert_eq!(
                    value(&args, "feature-gates"),
                    Some("DRADeviceTaints=false,DRAPartitionableDevices=true")
                );
            }
        });
        with_settings(&FeatureGates::new(), |s| {
            assert_eq!(value(&strings(apiserver_args(s)), "feature-gates"), None);
        });
    }

    #[test]
    fn resource_pool_status_gate_adds_its_controller_and_api() {
        let gates = FeatureGates::new().with(RESOURCE_POOL_STATUS_GATE, true);
        with_settings(&gates, |s| {
            let kcm = strings(controller_manager_args(s));
            let controllers = value(&kcm, "controllers").unwrap();
            assert!(controllers.contains("resourcepoolstatusrequest-controller"));
            assert!(controllers.contains("resourceclaim-controller"));
            let api = strings(apiserver_args(s));
            assert_eq!(
                value(&api, "runtime-config"),
                Some("resource.k8s.io/v1beta1=true,resource.k8s.io/v1alpha3=true")
            );
        });
        with_settings(&FeatureGates::new(), |s| {
            let kcm = strings(controller_manager_args(s));
            assert!(
                !value(&kcm, "controllers")
                    .unwrap()
                    .contains("resourcepoolstatus")
            );
        });
    }

    #[test]
    fn device_taint_rules_get_their_alpha_api_only_where_it_is_their_only_one() {
        let gates = FeatureGates::new().with("DRADeviceTaintRules", true);
        let rc = |minor| effective_runtime_config(&[], &gates, minor);
        assert_eq!(rc(Some(35)), ["resource.k8s.io/v1alpha3=true"]);
        assert!(rc(Some(36)).is_empty());
        assert!(rc(Some(37)).is_empty());
        // An unknown release gets what any release might need.
        assert_eq!(rc(None), ["resource.k8s.io/v1alpha3=true"]);
        let off = FeatureGates::new().with("DRADeviceTaintRules", false);
        assert!(effective_runtime_config(&[], &off, Some(35)).is_empty());
    }

    #[test]
    fn etcd_and_apiserver_agree_on_ports() {
        with_settings(&FeatureGates::new(), |s| {
            let etcd = strings(etcd_args(s));
            let api = strings(apiserver_args(s));
            assert_eq!(
                value(&etcd, "listen-client-urls"),
                Some("https://127.0.0.1:1")
            );
            assert_eq!(value(&api, "etcd-servers"), Some("https://127.0.0.1:1"));
            assert_eq!(
                value(&etcd, "initial-cluster"),
                Some("default=https://127.0.0.1:2")
            );
            // Behind its front door.
            assert_eq!(value(&api, "secure-port"), Some("6"));
            assert_eq!(value(&strings(scheduler_args(s)), "secure-port"), Some("4"));
            assert_eq!(
                value(&strings(controller_manager_args(s)), "secure-port"),
                Some("5")
            );
        });
    }

    #[test]
    fn etcd_demands_client_certificates_the_apiserver_has() {
        with_settings(&FeatureGates::new(), |s| {
            let etcd = strings(etcd_args(s));
            let api = strings(apiserver_args(s));
            let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
            let e = &s.pki.etcd;
            // No listener without TLS.
            for flag in ["listen-client-urls", "listen-peer-urls"] {
                let urls = value(&etcd, flag).unwrap();
                assert!(
                    urls.split(',').all(|u| u.starts_with("https://127.0.0.1:")),
                    "{flag}={urls}"
                );
            }
            assert!(!etcd.iter().any(|a| a.starts_with("--listen-metrics-urls")));
            assert_eq!(value(&etcd, "client-cert-auth"), Some("true"));
            assert_eq!(value(&etcd, "peer-client-cert-auth"), Some("true"));
            let ca = path(&e.ca.cert_path);
            assert_eq!(value(&etcd, "trusted-ca-file"), Some(ca.as_str()));
            assert_eq!(value(&etcd, "peer-trusted-ca-file"), Some(ca.as_str()));
            assert_ne!(ca, path(&s.pki.ca.cert_path), "etcd has a CA of its own");
            assert_eq!(
                value(&etcd, "cert-file"),
                Some(path(&e.server.cert_path).as_str())
            );
            assert_eq!(
                value(&etcd, "peer-key-file"),
                Some(path(&e.peer.key_path).as_str())
            );
            assert_eq!(value(&api, "etcd-cafile"), Some(ca.as_str()));
            assert_eq!(
                value(&api, "etcd-certfile"),
                Some(path(&e.apiserver_client.cert_path).as_str())
            );
            assert_eq!(
                value(&api, "etcd-keyfile"),
                Some(path(&e.apiserver_client.key_path).as_str())
            );
        });
    }

    #[test]
    fn controllers_let_anonymous_users_see_health_only() {
        with_settings(&FeatureGates::new(), |s| {
            for args in [scheduler_args(s), controller_manager_args(s)] {
                let args = strings(args);
                assert_eq!(
                    value(&args, "authorization-always-allow-paths"),
                    Some("/healthz,/readyz,/livez")
                );
                assert_eq!(value(&args, "bind-address"), Some("127.0.0.1"));
            }
        });
    }
}
