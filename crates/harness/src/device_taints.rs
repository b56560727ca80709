//! Eviction by a DeviceTaintRule: the taint's `timeAdded` the server
//! sets, and the trace the device taint manager leaves in the status of
//! the pod it evicts (kept visible by a finalizer).
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::DeviceTaintRule;
use kube::Client;
use kube::api::Api;

use dra_e2e_kube::wait::{self, Check, WaitError};

/// What the device taint manager writes into the pod it evicts.
pub const EVICTION_REASON: &str = "DeletionByDeviceTaintManager";
pub const EVICTION_MESSAGE: &str = "Device Taint manager: deleting due to NoExecute taint";

/// How far from now the server may have set a taint's `timeAdded`.
const TIME_ADDED_WITHIN_S: i64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum TaintRuleError {
    #[error("reading DeviceTaintRule {name}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("DeviceTaintRule {name}: the server set no timeAdded on the taint")]
    NoTimeAdded { name: String },
    #[error(
        "DeviceTaintRule {name}: the taint's timeAdded {added} is {off}s away from now ({now}), \
         more than a minute"
    )]
    TimeAddedOff {
        name: String,
        added: jiff::Timestamp,
        off: i64,
        now: jiff::Timestamp,
    },
}

/// Whether the taint of `rule` (named `name`) was added within a minute
/// of `now`.
fn time_added_near(
    name: &str,
    rule: &DeviceTaintRule,
    now: jiff::Timestamp,
) -> Result<(), TaintRuleError> {
    let Some(added) = &rule.spec.taint.time_added else {
        return Err(TaintRuleError::NoTimeAdded {
            name: name.to_owned(),
        });
    };
    let off = (now.as_second() - added.0.as_second()).abs();
    if off > TIME_ADDED_WITHIN_S {
        return Err(TaintRuleError::TimeAddedOff {
            name: name.to_owned(),
            added: added.0,
            off,
            now,
        });
    }
    Ok(())
}

/// Reads DeviceTaintRule `name` and checks that the server set its
/// taint's `timeAdded` within a minute of now.
pub async fn taint_added_just_now(client: Client, name: &str) -> Result<(), TaintRuleError> {
    let api: Api<DeviceTaintRule> = Api::all(client);
    let rule = api.get(name).await.map_err(|source| TaintRuleError::Read {
        name: name.to_owned(),
        source,
    })?;
    time_added_near(name, &rule, jiff::Timestamp::now())
}

/// The named condition of [`evicted`]: pod `pod` being deleted with the
/// condition DisruptionTarget=True the device taint manager sets. A pod
/// gone (no finalizer kept it) or deleted without it fails.
pub fn evicted_by_taint_manager(pod: &str, p: Option<&Pod>) -> Check<()> {
    let Some(p) = p else {
        return Check::Fail(format!(
            "pod {pod} is gone; without a finalizer its status cannot be checked"
        ));
    };
    if p.metadata.deletion_timestamp.is_none() {
        return Check::Pending(format!(
            "pod {pod} is {} and not being deleted",
            wait::describe_pod(Some(p))
        ));
    }
    let conditions = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let found = conditions.iter().any(|c| {
        c.type_ == "DisruptionTarget"
            && c.status == "True"
            && c.reason.as_deref() == Some(EVICTION_REASON)
            && c.message.as_deref() == Some(EVICTION_MESSAGE)
    });
    if found {
        return Check::Done(());
    }
    let seen: Vec<String> = conditions
        .iter()
        .map(|c| {
            format!(
                "{}={} ({}: {})",
                c.type_,
                c.status,
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        })
        .collect();
    Check::Fail(format!(
        "pod {pod} is terminating without the condition DisruptionTarget=True, \
         reason {EVICTION_REASON}, message {EVICTION_MESSAGE:?}; its conditions: {seen:?}"
    ))
}

/// Waits until pod `pod` is [`evicted_by_taint_manager`].
pub async fn evicted(pods: &Api<Pod>, pod: &str, timeout: Duration) -> Result<(), WaitError> {
    let what = format!("pod {pod} to be evicted by the device taint manager");
    wait::pod(pods, pod, &what, timeout, |p| {
        evicted_by_taint_manager(pod, p)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_taint_must_be_added_within_a_minute() {
        let rule = |added: Option<&str>| -> DeviceTaintRule {
            serde_json::from_value(json!({
                "metadata": {"name": "r"},
                "spec": {"taint": {"key": "k", "effect": "NoExecute", "timeAdded": added}},
            }))
            .unwrap()
        };
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert!(time_added_near("r", &rule(Some("2026-01-01T00:00:30Z")), now).is_ok());
        assert!(time_added_near("r", &rule(Some("2026-01-01T00:02:00Z")), now).is_ok());
        let far = time_added_near("r", &rule(Some("2025-12-31T23:59:00Z")), now).unwrap_err();
        assert_eq!(
            far.to_string(),
            "DeviceTaintRule r: the taint's timeAdded 2025-12-31T23:59:00Z is 120s away from now \
             (2026-01-01T00:01:00Z), more than a minute"
        );
        assert!(matches!(
            time_added_near("r", &rule(None), now),
            Err(TaintRuleError::NoTimeAdded { .. })
        ));
    }

    fn pod(deleting: bool, conditions: serde_json::Value) -> Pod {
        let mut p = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": []},
            "status": {"conditions": conditions},
        });
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn an_eviction_leaves_the_disruption_target_condition() {
        let evicted = json!([{"type": "DisruptionTarget", "status": "True",
            "reason": EVICTION_REASON, "message": EVICTION_MESSAGE}]);
        assert!(matches!(
            evicted_by_taint_manager("p", Some(&pod(true, evicted.clone()))),
            Check::Done(())
        ));
        assert!(matches!(
            evicted_by_taint_manager("p", Some(&pod(false, evicted))),
            Check::Pending(_)
        ));
        assert!(matches!(
            evicted_by_taint_manager("p", Some(&pod(true, json!([])))),
            Check::Fail(_)
        ));
        match evicted_by_taint_manager("p", None) {
            Check::Fail(s) => assert!(s.contains("without a finalizer"), "{s}"),
            other => panic!("{other:?}"),
        }
    }
}
