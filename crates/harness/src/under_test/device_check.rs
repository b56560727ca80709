//! Whether a container got its devices from the driver under test, judged
//! claim by claim and request by request: a driver that prepares only the
//! first claim of a call, or one request of a claim, still gives a
//! container *some* variable, so "any injected variable matches" would
//! pass it. Two sources are read: the container's environment against the
//! profile's `containerCheck.env` patterns (per claim where they name
//! `${claim}` / `${request}`), and, where the runner sees them (its own
//! driver, or any driver behind the interposer), the driver's answers to
//! NodePrepareResources against the claims' allocations.
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use dra_e2e_profile::ContainerCheck;
use dra_e2e_proto::dra::PreparedDevice;

/// A claim of a pod as far as the driver under test is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverClaim {
    pub name: String,
    pub uid: String,
    /// The requests (base names) with devices of the driver, or of them
    /// those the container asks for.
    pub requests: BTreeSet<String>,
    /// `(pool, device)` allocated by the driver for those requests.
    pub devices: BTreeSet<(String, String)>,
}

/// The claims of the driver that `container` of `pod` uses, and those of
/// the pod it does not use. `claims` are the namespace's claims.
pub fn claims_of_container(
    pod: &Pod,
    container: &str,
    claims: &[ResourceClaim],
    driver: &str,
) -> (Vec<DriverClaim>, Vec<DriverClaim>) {
    let Some(spec) = &pod.spec else {
        return (Vec::new(), Vec::new());
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    // The pod's name of a claim -> the ResourceClaim's name.
    let object_name = |pod_claim: &str| -> Option<String> {
        let entry = spec
            .resource_claims
            .iter()
            .flatten()
            .find(|c| c.name == pod_claim)?;
        entry.resource_claim_name.clone().or_else(|| {
            statuses
                .iter()
                .find(|s| s.name == pod_claim)
                .and_then(|s| s.resource_claim_name.clone())
        })
    };
    let wanted: Vec<(String, Option<String>)> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter(|c| c.name == container)
        .flat_map(|c| {
            c.resources
                .as_ref()
                .and_then(|r| r.claims.clone())
                .unwrap_or_default()
        })
        .map(|c| (c.name, c.request))
        .collect();
    let mut used = Vec::new();
    let mut unused = Vec::new();
    for pod_claim in spec.resource_claims.iter().flatten() {
        let Some(name) = object_name(&pod_claim.name) else {
            continue;
        };
        let Some(object) = claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        let asked: Vec<&Option<String>> = wanted
            .iter()
            .filter(|(n, _)| *n == pod_claim.name)
            .map(|(_, r)| r)
            .collect();
        let all_requests = asked.is_empty() || asked.iter().any(|r| r.is_none());
        let results = object
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .unwrap_or_default();
        let mut found = DriverClaim {
            name,
            uid: object.metadata.uid.clone().unwrap_or_default(),
            requests: BTreeSet::new(),
            devices: BTreeSet::new(),
        };
        for r in results.iter().filter(|r| r.driver == driver) {
            let base = r.request.split('/').next().unwrap_or_default().to_owned();
            if all_requests || asked.iter().any(|a| a.as_deref() == Some(base.as_str())) {
                found.requests.insert(base);
                found.devices.insert((r.pool.clone(), r.device.clone()));
            }
        }
        if found.requests.is_empty() {
            continue;
        }
        if asked.is_empty() {
            unused.push(found);
        } else {
            used.push(found);
        }
    }
    (used, unused)
}

/// What is wrong with the variables `injected` into a container that uses
/// `used` and not `unused`, by the profile's patterns.
pub fn env_problems(
    check: &ContainerCheck,
    used: &[DriverClaim],
    unused: &[DriverClaim],
    injected: &[(String, String)],
) -> Vec<String> {
    let has = |p: &dra_e2e_profile::EnvPattern| injected.iter().any(|(k, v)| p.matches(k, v));
    let mut problems = Vec::new();
    for pattern in &check.env {
        if !pattern.per_claim() {
            if !has(pattern) {
                problems.push(format!("no variable matches {:?}", pattern.as_str()));
            }
            continue;
        }
        for claim in used {
            for request in &claim.requests {
                let want = pattern.expand(&claim.name, request);
                if !has(&want) {
                    problems.push(format!(
                        "no variable matches {:?} (claim {}, request {request})",
                        want.as_str(),
                        claim.name
                    ));
                }
            }
        }
        for claim in unused {
            for request in &claim.requests {
                let other = pattern.expand(&claim.name, request);
                for (k, v) in injected.iter().filter(|(k, v)| other.matches(k, v)) {
                    problems.push(format!(
                        "it has {k}={v} of claim {}, which it does not use",
                        claim.name
                    ));
                }
            }
        }
    }
    problems
}

/// The variables `injected` into a container that the driver gives for
/// the claims in `unused` (none of which the container uses): by the
/// profile's per-claim patterns, or by any pattern that names no claim.
pub fn foreign_variables(
    check: &ContainerCheck,
    unused: &[DriverClaim],
    injected: &[(String, String)],
) -> Vec<String> {
    let mut found = BTreeSet::new();
    for pattern in &check.env {
        let wanted: Vec<dra_e2e_profile::EnvPattern> = if pattern.per_claim() {
            unused
                .iter()
                .flat_map(|c| c.requests.iter().map(|r| pattern.expand(&c.name, r)))
                .collect()
        } else {
            vec![pattern.clone()]
        };
        for (k, v) in injected {
            if wanted.iter().any(|p| p.matches(k, v)) {
                found.insert(format!("{k}={v}"));
            }
        }
    }
    found.into_iter().collect()
}

/// What is wrong with the driver's answers to NodePrepareResources for the
/// claims a container uses: every allocated device answered, with a CDI
/// device, and no other. `answered` gives the devices last answered for a
/// claim's UID.
pub fn answer_problems(
    used: &[DriverClaim],
    answered: impl Fn(&str) -> Option<Vec<PreparedDevice>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for claim in used {
        let Some(devices) = answered(&claim.uid) else {
            problems.push(format!(
                "no answer of the driver to NodePrepareResources for claim {} was seen",
                claim.name
            ));
            continue;
        };
        let with_cdi: BTreeSet<(String, String)> = devices
            .iter()
            .filter(|d| !d.cdi_device_ids.is_empty())
            .map(|d| (d.pool_name.clone(), d.device_name.clone()))
            .collect();
        let all: BTreeSet<(String, String)> = devices
            .iter()
            .map(|d| (d.pool_name.clone(), d.device_name.clone()))
            .collect();
        let show = |s: &BTreeSet<(String, String)>| {
            s.iter()
                .map(|(p, d)| format!("{p}/{d}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let missing: BTreeSet<_> = claim.devices.difference(&with_cdi).cloned().collect();
        let extra: BTreeSet<_> = all.difference(&claim.devices).cloned().collect();
        if !missing.is_empty() || !extra.is_empty() {
            problems.push(format!(
                "the driver answered NodePrepareResources for claim {} with [{}] where it is \
                 allocated [{}]{}{}",
                claim.name,
                devices
                    .iter()
                    .map(|d| format!("{}/{} {:?}", d.pool_name, d.device_name, d.cdi_device_ids))
                    .collect::<Vec<_>>()
                    .join(", "),
                show(&claim.devices),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!("; no CDI device for {}", show(&missing))
                },
                if extra.is_empty() {
                    String::new()
                } else {
                    format!("; not allocated: {}", show(&extra))
                },
            ));
        }
    }
    problems
}

/// The CDI device IDs (`vendor/class=name`) a spec file defines; none for
/// a file that does not parse (a runtime skips it too).
pub fn defined_ids(name: &str, text: &str) -> Vec<String> {
    let value: Option<serde_json::Value> = if name.ends_with(".json") {
        serde_json::from_str(text).ok()
    } else {
        serde_saphyr::from_str(text).ok()
    };
    let Some(value) = value else {
        return Vec::new();
    };
    let kind = value["kind"].as_str().unwrap_or_default();
    value["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str())
        .map(|n| format!("{kind}={n}"))
        .collect()
}

/// The spec files among `specs` (name, text) that still define one of
/// `ids`, as `file defines id`.
pub fn still_defined(specs: &[(String, String)], ids: &[String]) -> Vec<String> {
    specs
        .iter()
        .flat_map(|(name, text)| {
            defined_ids(name, text)
                .into_iter()
                .filter(|id| ids.contains(id))
                .map(move |id| format!("{name} defines {id}"))
        })
        .collect()
}

/// The IDs among `ids` that no spec file among `specs` (name, text)
/// defines: devices the driver answered that a container runtime cannot
/// find, so the container fails to start (or, on a node without a runtime,
/// would).
pub fn undefined(specs: &[(String, String)], ids: &[String]) -> Vec<String> {
    let defined: BTreeSet<String> = specs
        .iter()
        .flat_map(|(name, text)| defined_ids(name, text))
        .collect();
    ids.iter()
        .filter(|id| !defined.contains(*id))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_e2e_profile::EnvPattern;

    fn claim(name: &str, requests: &[&str], devices: &[&str]) -> DriverClaim {
        DriverClaim {
            name: name.into(),
            uid: format!("uid-{name}"),
            requests: requests.iter().map(|r| r.to_string()).collect(),
            devices: devices
                .iter()
                .map(|d| ("pool".to_owned(), d.to_string()))
                .collect(),
        }
    }

    fn env(vars: &[&str]) -> Vec<(String, String)> {
        vars.iter()
            .map(|v| {
                let (k, v) = v.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    fn check(pattern: &str) -> ContainerCheck {
        ContainerCheck {
            env: vec![EnvPattern::new(pattern)],
            command: Vec::new(),
        }
    }

    #[test]
    fn every_claim_and_request_needs_its_variable_and_none_of_another_claim() {
        let per = check("claim_${claim}_${request}=true");
        let used = [
            claim("c-1", &["a", "b"], &["d0"]),
            claim("c-2", &["a"], &["d1"]),
        ];
        let all = env(&["claim_c_1_a=true", "claim_c_1_b=true", "claim_c_2_a=true"]);
        assert!(env_problems(&per, &used, &[], &all).is_empty());
        // The first claim only: the old "any variable" check passes it.
        let first = env(&["claim_c_1_a=true", "claim_c_1_b=true"]);
        assert!(env_problems(&check("claim_*=true"), &used, &[], &first).is_empty());
        let p = env_problems(&per, &used, &[], &first);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("claim c-2, request a"), "{p:?}");
        // The first request only.
        let p = env_problems(
            &per,
            &used,
            &[],
            &env(&["claim_c_1_a=true", "claim_c_2_a=true"]),
        );
        assert!(p[0].contains("request b"), "{p:?}");
        // Another claim's variable in a container that does not use it.
        let unused = [claim("c-3", &["a"], &["d2"])];
        let p = env_problems(
            &per,
            &used,
            &unused,
            &env(&[
                "claim_c_1_a=true",
                "claim_c_1_b=true",
                "claim_c_2_a=true",
                "claim_c_3_a=true",
            ]),
        );
        assert_eq!(
            p,
            ["it has claim_c_3_a=true of claim c-3, which it does not use"]
        );
        // A container without claims: the others' variables, by either kind
        // of pattern.
        let vars = env(&["claim_c_3_a=true", "OTHER=1"]);
        assert_eq!(
            foreign_variables(&per, &unused, &vars),
            ["claim_c_3_a=true"]
        );
        assert!(foreign_variables(&per, &[], &vars).is_empty());
        assert_eq!(
            foreign_variables(&check("claim_*=true"), &[], &vars),
            ["claim_c_3_a=true"]
        );
    }

    #[test]
    fn spec_files_in_either_format_name_their_ids() {
        let json = r#"{"cdiVersion":"0.3.0","kind":"d.example.com/test","devices":[{"name":"claim-u1-r","containerEdits":{"env":["A=1"]}}]}"#;
        let yaml = "cdiVersion: 0.5.0\nkind: v.example.com/gpu\ndevices:\n  - name: gpu0\n  - name: gpu1\n";
        assert_eq!(
            defined_ids("a.json", json),
            ["d.example.com/test=claim-u1-r"]
        );
        assert_eq!(
            defined_ids("b.yaml", yaml),
            ["v.example.com/gpu=gpu0", "v.example.com/gpu=gpu1"]
        );
        assert!(defined_ids("c.json", "{").is_empty());
        let specs = [
            ("a.json".to_owned(), json.to_owned()),
            ("b.yaml".to_owned(), yaml.to_owned()),
        ];
        assert_eq!(
            still_defined(&specs, &["v.example.com/gpu=gpu1".to_owned()]),
            ["b.yaml defines v.example.com/gpu=gpu1"]
        );
        assert!(still_defined(&specs, &["x/y=z".to_owned()]).is_empty());
    }

    #[test]
    fn ids_no_spec_defines_are_undefined() {
        let json = r#"{"cdiVersion":"0.3.0","kind":"d.example.com/test","devices":[{"name":"claim-u1-r"}]}"#;
        let specs = [
            ("a.json".to_owned(), json.to_owned()),
            // A file that does not parse defines nothing, as for a runtime.
            ("broken.json".to_owned(), "{".to_owned()),
        ];
        let ids = |i: &[&str]| i.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(undefined(&specs, &ids(&["d.example.com/test=claim-u1-r"])).is_empty());
        assert_eq!(
            undefined(
                &specs,
                &ids(&[
                    "d.example.com/test=claim-u1-r",
                    "d.example.com/test=claim-u2-r"
                ])
            ),
            ["d.example.com/test=claim-u2-r"]
        );
        // Same name, another kind: not the device answered.
        assert_eq!(
            undefined(&specs, &ids(&["e.example.com/test=claim-u1-r"])),
            ["e.example.com/test=claim-u1-r"]
        );
        assert_eq!(undefined(&[], &ids(&["d/x=y"])), ["d/x=y"]);
        assert!(undefined(&specs, &[]).is_empty());
    }

    fn dev(name: &str, ids: &[&str]) -> PreparedDevice {
        PreparedDevice {
            request_names: vec!["a".into()],
            pool_name: "pool".into(),
            device_name: name.into(),
            cdi_device_ids: ids.iter().map(|i| i.to_string()).collect(),
            share_id: None,
        }
    }

    #[test]
    fn answers_must_name_every_allocated_device_with_a_cdi_device_and_no_other() {
        let used = [claim("c-1", &["a"], &["d0", "d1"])];
        let good = |_: &str| Some(vec![dev("d0", &["v/c=0"]), dev("d1", &["v/c=1"])]);
        assert!(answer_problems(&used, good).is_empty());
        let first_only = |_: &str| Some(vec![dev("d0", &["v/c=0"])]);
        let p = answer_problems(&used, first_only);
        assert!(p[0].contains("no CDI device for pool/d1"), "{p:?}");
        let no_ids = |_: &str| Some(vec![dev("d0", &["v/c=0"]), dev("d1", &[])]);
        assert!(answer_problems(&used, no_ids)[0].contains("no CDI device for pool/d1"));
        let wrong = |_: &str| Some(vec![dev("d0", &["v/c=0"]), dev("d1-wrong", &["v/c=1"])]);
        let p = answer_problems(&used, wrong);
        assert!(p[0].contains("not allocated: pool/d1-wrong"), "{p:?}");
        assert!(answer_problems(&used, |_| None)[0].contains("no answer"));
    }
}
