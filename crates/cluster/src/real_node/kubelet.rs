//! A real node's kubelet: its configuration file, kubeconfig and command
//! line. Pure functions of the node's layout, so they can be checked without
//! running anything.
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::json;

/// Where the kubelet keeps its state inside the node's mount namespace:
/// the upstream default, so proxy pods mount the paths a kind node uses.
pub const ROOT_DIR: &str = "/var/lib/kubelet";
/// containerd's CRI socket inside the node's mount namespace.
pub const CRI_SOCKET: &str = "/run/containerd/containerd.sock";

/// Everything the kubelet's files are rendered from.
#[derive(Debug, Clone)]
pub struct KubeletSettings {
    pub node_name: String,
    pub node_ip: Ipv4Addr,
    /// `https://<host end of the node's link>:<port>`.
    pub server: String,
    pub ca_file: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub cgroup_root: String,
    pub resolv_conf: PathBuf,
    /// `Gate=true` pairs, the cluster's gates.
    pub feature_gates: Vec<(String, bool)>,
}

/// The KubeletConfiguration (as JSON, which the kubelet reads as YAML).
pub fn config(s: &KubeletSettings) -> serde_json::Value {
    let gates: serde_json::Map<String, serde_json::Value> = s
        .feature_gates
        .iter()
        .map(|(g, on)| (g.clone(), json!(on)))
        .collect();
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // As a production kubelet: no anonymous requests, every request
        // authenticated by client certificate or token review and
        // authorized by the API server.
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": true, "cacheTTL": "10s" },
            "x509": { "clientCAFile": s.ca_file },
        },
        "authorization": {
            "mode": "Webhook",
            "webhook": { "cacheAuthorizedTTL": "10s", "cacheUnauthorizedTTL": "5s" },
        },
        "address": s.node_ip.to_string(),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "tlsCertFile": s.serving_cert,
        "tlsPrivateKeyFile": s.serving_key,
        "containerRuntimeEndpoint": format!("unix://{CRI_SOCKET}"),
        // cgroup v1 hosts: refused by default since 1.35.
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": s.cgroup_root,
        "cgroupsPerQOS": true,
        // Root lacks CAP_SYS_RESOURCE on these machines, so no process may
        // lower its oom_score_adj (real-node facts, quirk 1).
        "oomScoreAdj": 0,
        "failSwapOn": false,
        "resolvConf": s.resolv_conf,
        "clusterDomain": "cluster.local",
        // Images are imported, never pulled: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
        // A test machine's disk may be fuller than a production node's.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "nodeStatusUpdateFrequency": "10s",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "shutdownGracePeriod": "0s",
        "featureGates": gates,
    })
}

/// The kubelet's kubeconfig: `system:node:<name>` by client certificate.
pub fn kubeconfig(s: &KubeletSettings) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "local", "cluster": {
            "server": s.server,
            "certificate-authority": s.ca_file,
            // The node reaches the API server at the host end of its link,
            // an address the serving certificate does not carry.
            "tls-server-name": "localhost",
        }}],
        "users": [{ "name": "node", "user": {
            "client-certificate": s.client_cert,
            "client-key": s.client_key,
        }}],
        "contexts": [{ "name": "node", "context": { "cluster": "local", "user": "node" } }],
        "current-context": "node",
    })
}

/// The kubelet's command line.
pub fn argv(binary: &Path, config: &Path, kubeconfig: &Path, s: &KubeletSettings) -> Vec<String> {
    vec![
        binary.display().to_string(),
        format!("--config={}", config.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--hostname-override={}", s.node_name),
        format!("--node-ip={}", s.node_ip),
        format!("--root-dir={ROOT_DIR}"),
        "--v=2".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> KubeletSettings {
        KubeletSettings {
            node_name: "n-0".into(),
            node_ip: Ipv4Addr::new(10, 200, 0, 2),
            server: "https://10.200.0.1:6443".into(),
            ca_file: "/c/ca.crt".into(),
            client_cert: "/c/client.crt".into(),
            client_key: "/c/client.key".into(),
            serving_cert: "/c/serving.crt".into(),
            serving_key: "/c/serving.key".into(),
            cgroup_root: "/dra-e2e-x-0".into(),
            resolv_conf: "/c/resolv.conf".into(),
            feature_gates: vec![("DRADeviceTaints".into(), true)],
        }
    }

    #[test]
    fn the_kubelet_api_is_not_open() {
        let c = config(&settings());
        assert_eq!(c["authentication"]["anonymous"]["enabled"], json!(false));
        assert_eq!(c["authentication"]["webhook"]["enabled"], json!(true));
        assert_eq!(c["authorization"]["mode"], json!("Webhook"));
        assert_eq!(c["readOnlyPort"], json!(0));
        assert_eq!(
            c["authentication"]["x509"]["clientCAFile"],
            json!("/c/ca.crt")
        );
        assert_eq!(c["address"], json!("10.200.0.2"));
    }

    #[test]
    fn cgroups_and_gates_follow_the_node() {
        let c = config(&settings());
        assert_eq!(c["cgroupRoot"], json!("/dra-e2e-x-0"));
        assert_eq!(c["failCgroupV1"], json!(false));
        assert_eq!(c["featureGates"]["DRADeviceTaints"], json!(true));
        let args = argv(
            Path::new("/b/kubelet"),
            Path::new("/c/k.yaml"),
            Path::new("/c/kc"),
            &settings(),
        );
        assert!(
            args.contains(&"--node-ip=10.200.0.2".to_owned()),
            "{args:?}"
        );
        assert!(
            args.contains(&"--hostname-override=n-0".to_owned()),
            "{args:?}"
        );
    }
}
