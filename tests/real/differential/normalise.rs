//! What a pod looks like, normalised: its status and events flattened to
//! fields, with what legitimately differs between the two kubelets (times,
//! IPs, IDs, names) replaced, so that only real differences remain.
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::Value;

use super::cases::Case;

/// Replaces the names of things that legitimately differ between the two
/// pods, then patterns (container IDs, back-off delays, generated names).
pub(super) struct Normaliser {
    literals: Vec<(String, String)>,
    patterns: Vec<(regex::Regex, &'static str)>,
}

impl Normaliser {
    pub(super) fn new(mut literals: Vec<(String, String)>) -> Self {
        literals.retain(|(from, _)| !from.is_empty());
        // Longer first: a claim name contains its pod's name.
        literals.sort_by_key(|l| std::cmp::Reverse(l.0.len()));
        let p = |re: &str| regex::Regex::new(re).expect("pattern");
        Self {
            literals,
            patterns: vec![
                (p(r"[0-9a-f]{64}"), "<hex>"),
                (
                    p(r"back-off \d+(\.\d+)?(ms|s|m)(\d+(\.\d+)?(ms|s))?"),
                    "back-off <delay>",
                ),
                (p(r"kube-api-access-[a-z0-9]{5}"), "kube-api-access-<x>"),
            ],
        }
    }

    fn apply(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for (from, to) in &self.literals {
            out = out.replace(from.as_str(), to);
        }
        for (re, to) in &self.patterns {
            out = re.replace_all(&out, *to).into_owned();
        }
        out
    }
}

fn is_time_field(key: &str) -> bool {
    key.ends_with("At") || key.ends_with("Time") || key.ends_with("Timestamp")
}

/// Flattens JSON into `path -> value`; list items are keyed by their
/// `name` or `type` when they have one (and the order of those keys is a
/// field of its own), else by position. Empty lists and objects count as
/// absent, as the API server's `omitempty` makes them.
fn flatten(path: &str, key: &str, v: &Value, n: &Normaliser, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(&p, k, v, n, out);
            }
        }
        Value::Array(items) => {
            let mut keys = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let k = item
                    .get("name")
                    .or_else(|| item.get("type"))
                    .and_then(Value::as_str)
                    .map(|s| n.apply(s));
                if let Some(k) = &k {
                    keys.push(k.clone());
                }
                let k = k.unwrap_or_else(|| i.to_string());
                flatten(&format!("{path}[{k}]"), key, item, n, out);
            }
            if keys.len() > 1 {
                out.insert(format!("{path} (order)"), keys.join(", "));
            }
        }
        Value::Null => {}
        Value::String(s) => {
            let value = if is_time_field(key) {
                "<time>".to_owned()
            } else if key == "containerID" || key == "imageID" {
                if s.is_empty() { "\"\"" } else { "<set>" }.to_owned()
            } else if key.to_ascii_lowercase().ends_with("ip") || path.contains("IPs[") {
                "<ip>".to_owned()
            } else {
                format!("{:?}", n.apply(s))
            };
            out.insert(path.to_owned(), value);
        }
        other => {
            out.insert(path.to_owned(), other.to_string());
        }
    }
}

/// Events a real kubelet writes because of how this machine's real node is
/// set up, not because of what the pod does: without cluster DNS (the local
/// cluster has none) every pod gets `MissingClusterDNS`.
const ENVIRONMENT_EVENTS: &[&str] = &["MissingClusterDNS"];

/// The memory limit a real kubelet reads from the cgroup of a pod without
/// limits on a cgroup v1 host (the kernel's "unlimited", 2^63 - 4096 bytes);
/// it says which cgroup version the host runs, nothing about the pod.
const CGROUP_V1_UNLIMITED: &str = "\"9007199254740988Ki\"";

/// The fields compared for one pod.
pub(super) fn view(
    case: &Case,
    pod: &Pod,
    events: &[Event],
    n: &Normaliser,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let status = serde_json::to_value(pod.status.clone().unwrap_or_default()).expect("status");
    flatten("", "", &status, n, &mut out);
    // PodIPs are keyed by address, which differs; what matters is that
    // there is one.
    let ips = regex::Regex::new(r"IPs\[[^\]]*\]").expect("pattern");
    out = out
        .into_iter()
        .map(|(k, v)| (ips.replace_all(&k, "IPs[]").into_owned(), v))
        .collect();
    if out.get("resources.limits.memory").map(String::as_str) == Some(CGROUP_V1_UNLIMITED) {
        out.remove("resources.limits.memory");
    }
    if case.restarts_vary {
        for (k, v) in out.iter_mut() {
            if k.ends_with(".restartCount") && v.parse::<i64>().is_ok_and(|c| c >= 1) {
                *v = ">= 1".to_owned();
            }
        }
    }
    let mut by_reason: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in events {
        let reason = e.reason.as_deref().unwrap_or("?");
        if ENVIRONMENT_EVENTS.contains(&reason) {
            continue;
        }
        let mut key = format!("event {} {reason}", e.type_.as_deref().unwrap_or("?"));
        if let Some(at) = e.involved_object.field_path.as_deref() {
            key.push_str(&format!(" ({at})"));
        }
        by_reason
            .entry(key)
            .or_default()
            .insert(n.apply(e.message.as_deref().unwrap_or_default()));
    }
    for (k, messages) in by_reason {
        let messages: Vec<String> = messages.into_iter().map(|m| format!("{m:?}")).collect();
        out.insert(k, messages.join(" + "));
    }
    out
}

/// `field: simulated X | real Y` for every field that differs.
pub(super) fn diff(sim: &BTreeMap<String, String>, real: &BTreeMap<String, String>) -> Vec<String> {
    let keys: BTreeSet<&String> = sim.keys().chain(real.keys()).collect();
    let absent = "(absent)".to_owned();
    keys.into_iter()
        .filter_map(|k| {
            let (s, r) = (
                sim.get(k).unwrap_or(&absent),
                real.get(k).unwrap_or(&absent),
            );
            (s != r).then(|| format!("    {k}:\n        simulated {s}\n        real      {r}"))
        })
        .collect()
}
