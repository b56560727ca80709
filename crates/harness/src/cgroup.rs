//! The cgroup values and the oom_score_adj the kubelet derives from a pod's
//! resources, as upstream's `dra_node_allocatable_resources.go` checks
//! them, and the shell that reads them inside a container.
//!
//! Why it exists: what the kubelet must have written (cpu.shares or
//! cpu.weight from the CPU request, the CFS quota from the CPU limit, the
//! memory limit, oom_score_adj from the QoS class and the memory request) is
//! arithmetic with several conventions (the kubelet's MilliCPUToShares, two
//! cgroup v2 weight conversions upstream accepts, the quota's rounding).
//! Pure functions here carry that arithmetic with its tests; the steps only
//! read the files and compare.
use std::collections::BTreeMap;

/// The CFS period the kubelet uses (µs).
pub const QUOTA_PERIOD: i128 = 100_000;
/// The kubelet's bounds of cpu.shares.
pub const MIN_SHARES: i128 = 2;
pub const MAX_SHARES: i128 = 262_144;
/// The least CFS quota the kubelet writes (µs).
pub const MIN_QUOTA: i128 = 1000;
/// Where upstream's test pod mounts the node's cgroup tree in its first
/// container, to find the pod's own cgroup.
pub const NODE_CGROUP_MOUNT: &str = "/sysfscgroup";

/// The kubelet's cpu.shares for a CPU request in millicores
/// (MilliCPUToShares).
pub fn cpu_shares(milli_cpu: i128) -> i128 {
    (milli_cpu * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// The cgroup v2 cpu.weight of `shares`, in both conversions upstream
/// accepts: the kubelet's linear one, and runc 1.3's.
pub fn cpu_weights(shares: i128) -> [i128; 2] {
    let linear = 1 + ((shares - 2) * 9999) / 262_142;
    #[allow(clippy::cast_precision_loss)]
    let l = (shares as f64).log2();
    #[allow(clippy::cast_possible_truncation)]
    let runc = 10f64.powf((l * l + 125.0 * l) / 612.0 - 7.0 / 34.0).ceil() as i128;
    [linear, runc]
}

/// The CFS quotas (µs per [`QUOTA_PERIOD`]) upstream accepts for a CPU
/// limit in millicores: `[-1]` for none; a limit that is no multiple of
/// 10m may also be rounded up to one (when that gives another quota).
pub fn cpu_quotas(limit_milli: i128) -> Vec<i128> {
    if limit_milli == 0 {
        return vec![-1];
    }
    let quota = |m: i128| (m * QUOTA_PERIOD / 1000).max(MIN_QUOTA);
    let mut v = vec![quota(limit_milli)];
    let rounded = quota((limit_milli / 10 + 1) * 10);
    if limit_milli % 10 != 0 && rounded != v[0] {
        v.push(rounded);
    }
    v
}

/// A pod's QoS class as its status names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The class `status.qosClass` names; `None` before it is set.
    pub fn of_status(qos: &str) -> Option<QosClass> {
        match qos {
            "Guaranteed" => Some(QosClass::Guaranteed),
            "Burstable" => Some(QosClass::Burstable),
            "BestEffort" => Some(QosClass::BestEffort),
            _ => None,
        }
    }
}

/// The kubelet's oom_score_adj of a container (GetContainerOOMScoreAdjust,
/// with the DRA share in the memory request), memory in bytes.
pub fn oom_score_adj(qos: QosClass, memory_request: i128, node_memory: i128) -> i128 {
    match qos {
        QosClass::Guaranteed => -997,
        QosClass::BestEffort => 1000,
        QosClass::Burstable => burstable_oom_score_adj(memory_request, node_memory),
    }
}

/// A Burstable container's: 1000 − 1000 × request / node memory, at least 2.
pub fn burstable_oom_score_adj(memory_request: i128, node_memory: i128) -> i128 {
    if node_memory <= 0 {
        return 2;
    }
    (1000 - 1000 * memory_request / node_memory).max(2)
}

/// What the kubelet should have set for one cgroup, in upstream's terms:
/// millicores and bytes; `None` is not set.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Limits {
    pub cpu_request: Option<i128>,
    pub cpu_limit: Option<i128>,
    pub memory_limit: Option<i128>,
}

/// The cgroup hierarchy a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One cgroup file and the values it may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileExpectation {
    pub file: &'static str,
    /// Any of these passes.
    pub allowed: Vec<String>,
    /// What the values stand for, for the failure message.
    pub why: String,
}

/// The files a cgroup with `limits` must hold; `spec_cpu_request` is the
/// container's own CPU request (millicores) when `limits` states none.
/// An unset memory limit is left unchecked, as upstream does.
pub fn expected_files(
    limits: &Limits,
    spec_cpu_request: i128,
    version: Version,
) -> Vec<FileExpectation> {
    let mut out = Vec::new();
    let request = limits.cpu_request.unwrap_or(spec_cpu_request);
    let limit = limits.cpu_limit.unwrap_or(0);
    // A limit without a request: shares from the limit (upstream's rule).
    let shares_from = if request == 0 && limit != 0 {
        limit
    } else {
        request
    };
    let shares = cpu_shares(shares_from);
    let why_shares = format!("cpu request {shares_from}m");
    out.push(match version {
        Version::V2 => FileExpectation {
            file: "cpu.weight",
            allowed: cpu_weights(shares).iter().map(i128::to_string).collect(),
            why: why_shares,
        },
        Version::V1 => FileExpectation {
            file: "cpu.shares",
            allowed: vec![shares.to_string()],
            why: why_shares,
        },
    });
    let quotas = cpu_quotas(limit);
    let why_limit = if limit == 0 {
        "no cpu limit".to_owned()
    } else {
        format!("cpu limit {limit}m")
    };
    out.push(match version {
        Version::V2 => FileExpectation {
            file: "cpu.max",
            allowed: quotas
                .iter()
                .map(|q| {
                    if *q == -1 {
                        format!("max {QUOTA_PERIOD}")
                    } else {
                        format!("{q} {QUOTA_PERIOD}")
                    }
                })
                .collect(),
            why: why_limit,
        },
        Version::V1 => FileExpectation {
            file: "cpu.cfs_quota_us",
            allowed: quotas.iter().map(i128::to_string).collect(),
            why: why_limit,
        },
    });
    if let Some(m) = limits.memory_limit {
        out.push(FileExpectation {
            file: match version {
                Version::V2 => "memory.max",
                Version::V1 => "memory.limit_in_bytes",
            },
            allowed: vec![m.to_string()],
            why: format!("memory limit {}", mebi(m)),
        });
    }
    out
}

/// Bytes as `NMi` when whole mebibytes, else as bytes.
pub fn mebi(bytes: i128) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{}Mi", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// A shell script that prints `v2=yes|no` and `file=value` for the cgroup
/// files [`expected_files`] names: of the container it runs in (its own
/// cgroup, as the runtime mounts it), or of the pod with `pod_uid` (found
/// by its UID under the node's cgroup tree at [`NODE_CGROUP_MOUNT`], with
/// `dir=` the directory found).
pub fn read_script(pod_uid: Option<&str>) -> String {
    let show = |dir: &str, files: &[&str]| {
        files
            .iter()
            .map(|f| format!("printf '{f}='; head -n 1 {dir}/{f};"))
            .collect::<String>()
    };
    match pod_uid {
        None => format!(
            "if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo v2=yes; {} else echo v2=no; {} {} fi",
            show("/sys/fs/cgroup", &["cpu.weight", "cpu.max", "memory.max"]),
            show("/sys/fs/cgroup/cpu", &["cpu.shares", "cpu.cfs_quota_us"]),
            show("/sys/fs/cgroup/memory", &["memory.limit_in_bytes"]),
        ),
        Some(uid) => {
            let find = |root: &str| {
                format!(
                    "$(find {root}/ -maxdepth 6 -type d \\( -name '*{}*' -o -name '*{uid}*' \\) 2>/dev/null | head -n 1)",
                    uid.replace('-', "_")
                )
            };
            format!(
                "if [ -f {m}/cgroup.controllers ]; then echo v2=yes; d={v2}; echo dir=$d; {} \
                 else echo v2=no; c={cpu}; echo dir=$c; {} m={mem}; {} fi",
                show("$d", &["cpu.weight", "cpu.max", "memory.max"]),
                show("$c", &["cpu.shares", "cpu.cfs_quota_us"]),
                show("$m", &["memory.limit_in_bytes"]),
                m = NODE_CGROUP_MOUNT,
                v2 = find(NODE_CGROUP_MOUNT),
                cpu = find(&format!("{NODE_CGROUP_MOUNT}/cpu")),
                mem = find(&format!("{NODE_CGROUP_MOUNT}/memory")),
            )
        }
    }
}

/// What [`read_script`] printed, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading(pub BTreeMap<String, String>);

impl Reading {
    /// Reads `name=value` lines.
    pub fn parse(out: &str) -> Reading {
        Reading(
            out.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect(),
        )
    }

    pub fn version(&self) -> Version {
        if self.0.get("v2").map(String::as_str) == Some("yes") {
            Version::V2
        } else {
            Version::V1
        }
    }

    /// The pod's cgroup directory the script found, if it looked for one.
    pub fn dir(&self) -> Option<&str> {
        self.0
            .get("dir")
            .map(String::as_str)
            .filter(|d| !d.is_empty())
    }

    /// What each expected file holds that it may not: `file is X, expected
    /// A or B (why)`.
    pub fn mismatches(&self, expected: &[FileExpectation]) -> Vec<String> {
        expected
            .iter()
            .filter_map(|e| {
                let actual = self
                    .0
                    .get(e.file)
                    .map(String::as_str)
                    .unwrap_or("(unreadable)");
                (!e.allowed.iter().any(|a| a == actual)).then(|| {
                    format!(
                        "{} is {actual}, expected {} ({})",
                        e.file,
                        e.allowed.join(" or "),
                        e.why
                    )
                })
            })
            .collect()
    }
}

/// Why a node's memory capacity could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NodeMemoryError {
    #[error("reading node {node}")]
    Read {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("node {node} reports no memory capacity")]
    Missing { node: String },
}

/// The memory capacity Node `node` reports, as written there: what the
/// kubelet's oom_score_adj of a Burstable container is relative to.
pub async fn node_memory(client: &kube::Client, node: &str) -> Result<String, NodeMemoryError> {
    let nodes: kube::api::Api<k8s_openapi::api::core::v1::Node> =
        kube::api::Api::all(client.clone());
    let n = nodes
        .get(node)
        .await
        .map_err(|source| NodeMemoryError::Read {
            node: node.to_owned(),
            source,
        })?;
    n.status
        .and_then(|s| s.capacity)
        .and_then(|c| c.get("memory").map(|q| q.0.clone()))
        .ok_or_else(|| NodeMemoryError::Missing {
            node: node.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(request: Option<i128>, limit: Option<i128>, memory: Option<i128>) -> Limits {
        Limits {
            cpu_request: request,
            cpu_limit: limit,
            memory_limit: memory,
        }
    }

    fn allowed(files: &[FileExpectation], file: &str) -> Vec<String> {
        files
            .iter()
            .find(|f| f.file == file)
            .map(|f| f.allowed.clone())
            .unwrap_or_default()
    }

    #[test]
    fn shares_follow_milli_cpu_to_shares() {
        assert_eq!(cpu_shares(0), 2);
        assert_eq!(cpu_shares(1), 2);
        assert_eq!(cpu_shares(100), 102);
        assert_eq!(cpu_shares(1000), 1024);
        assert_eq!(cpu_shares(3000), 3072);
        assert_eq!(cpu_shares(1_000_000), 262_144);
    }

    #[test]
    fn weights_in_both_conversions() {
        assert_eq!(cpu_weights(2), [1, 1]);
        assert_eq!(cpu_weights(1024)[0], 39);
        assert_eq!(cpu_weights(1024)[1], 100);
        assert_eq!(cpu_weights(262_144)[0], 10_000);
        assert_eq!(cpu_weights(262_144)[1], 10_000);
    }

    #[test]
    fn quotas_from_limits() {
        assert_eq!(cpu_quotas(0), [-1]);
        assert_eq!(cpu_quotas(5000), [500_000]);
        // At least 1000 µs.
        assert_eq!(cpu_quotas(1), [1000]);
        // No multiple of 10m: also rounded up to one.
        assert_eq!(cpu_quotas(255), [25_500, 26_000]);
    }

    #[test]
    fn oom_score_adj_by_qos_class() {
        assert_eq!(oom_score_adj(QosClass::Guaranteed, 1 << 30, 24 << 30), -997);
        assert_eq!(oom_score_adj(QosClass::BestEffort, 0, 24 << 30), 1000);
        // 1524Mi of a 24 GiB node.
        assert_eq!(
            oom_score_adj(QosClass::Burstable, 1524 << 20, 24 << 30),
            938
        );
        // More than the node has: the floor.
        assert_eq!(burstable_oom_score_adj(30 << 30, 24 << 30), 2);
        assert_eq!(burstable_oom_score_adj(1, 0), 2);
        assert_eq!(QosClass::of_status("Burstable"), Some(QosClass::Burstable));
        assert_eq!(QosClass::of_status(""), None);
    }

    #[test]
    fn cgroup_v1_values_follow_the_kubelet() {
        let f = expected_files(
            &limits(Some(3000), Some(5000), Some(5096 << 20)),
            0,
            Version::V1,
        );
        assert_eq!(f[0].file, "cpu.shares");
        assert_eq!(f[0].allowed, ["3072"]);
        assert_eq!(f[1].file, "cpu.cfs_quota_us");
        assert_eq!(f[1].allowed, ["500000"]);
        assert_eq!(f[2].file, "memory.limit_in_bytes");
        assert_eq!(f[2].allowed, [(5096i128 << 20).to_string()]);
        assert_eq!(f[2].why, "memory limit 5096Mi");
        // Nothing set: the minimum shares, no quota, the memory limit unchecked.
        let none = expected_files(&Limits::default(), 0, Version::V1);
        assert_eq!(allowed(&none, "cpu.shares"), ["2"]);
        assert_eq!(allowed(&none, "cpu.cfs_quota_us"), ["-1"]);
        assert_eq!(none.len(), 2);
        // A limit without a request: shares from the limit (upstream's rule).
        let lim = expected_files(&limits(None, Some(4000), None), 0, Version::V1);
        assert_eq!(allowed(&lim, "cpu.shares"), ["4096"]);
        // The container's own request when the row states none.
        let spec = expected_files(&limits(None, Some(300), None), 100, Version::V1);
        assert_eq!(allowed(&spec, "cpu.shares"), ["102"]);
    }

    #[test]
    fn cgroup_v2_values_accept_both_weight_conversions() {
        let f = expected_files(&limits(Some(1000), Some(2000), None), 0, Version::V2);
        assert_eq!(f[0].file, "cpu.weight");
        assert_eq!(f[0].allowed, ["39", "100"]);
        assert_eq!(f[1].file, "cpu.max");
        assert_eq!(f[1].allowed, ["200000 100000"]);
        let none = expected_files(&Limits::default(), 0, Version::V2);
        assert_eq!(allowed(&none, "cpu.max"), ["max 100000"]);
        let mem = expected_files(&limits(None, None, Some(1000)), 0, Version::V2);
        assert_eq!(allowed(&mem, "memory.max"), ["1000"]);
        assert_eq!(mem[2].why, "memory limit 1000 bytes");
    }

    #[test]
    fn a_reading_names_what_differs() {
        let r = Reading::parse(
            "v2=yes\ndir=/sysfscgroup/kubepods/pod1\ncpu.weight=39\ncpu.max=max 100000\nnoise\n",
        );
        assert_eq!(r.version(), Version::V2);
        assert_eq!(r.dir(), Some("/sysfscgroup/kubepods/pod1"));
        let want = expected_files(
            &limits(Some(1000), Some(2000), Some(1 << 30)),
            0,
            Version::V2,
        );
        assert_eq!(
            r.mismatches(&want),
            [
                "cpu.max is max 100000, expected 200000 100000 (cpu limit 2000m)",
                "memory.max is (unreadable), expected 1073741824 (memory limit 1024Mi)",
            ]
        );
        let v1 = Reading::parse("v2=no\ndir=\n");
        assert_eq!(v1.version(), Version::V1);
        assert_eq!(v1.dir(), None);
    }

    #[test]
    fn the_script_reads_the_files_it_names() {
        let own = read_script(None);
        for f in ["cpu.weight", "cpu.max", "memory.max", "cpu.shares"] {
            assert!(own.contains(&format!("printf '{f}='")), "{own}");
        }
        let pod = read_script(Some("ab-cd"));
        assert!(pod.contains("-name '*ab_cd*' -o -name '*ab-cd*'"), "{pod}");
        assert!(pod.contains("echo dir=$d"), "{pod}");
    }
}
