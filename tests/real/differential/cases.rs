//! The cases: the pods each kubelet runs, with or without a claim, and the
//! state each case is compared in.

use dra_e2e::ground::objects::{self, PodClaims, PodShape};
use k8s_openapi::api::core::v1::{Event, Pod};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    None,
    /// A claim from the template with upstream's default config.
    Default,
    /// A claim whose CDI spec never reaches the node.
    CdiMissing,
}

pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) claim: Claim,
    pub(super) init: Option<Vec<String>>,
    pub(super) command: Option<&'static str>,
    pub(super) restart_policy: &'static str,
    /// The state to compare in; evaluated on each pod separately.
    pub(super) settled: fn(&Pod, &[Event]) -> bool,
    /// Restart counts only say whether the container restarted.
    pub(super) restarts_vary: bool,
}

fn container_status<'a>(
    pod: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

pub(super) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub(super) fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(super) fn has_event(events: &[Event], reason: &str) -> bool {
    events.iter().any(|e| e.reason.as_deref() == Some(reason))
}

pub(super) fn cases() -> Vec<Case> {
    // Settled by status alone: events trail the status of a real kubelet
    // and are compared once both pods are here.
    fn running(p: &Pod, _: &[Event]) -> bool {
        phase(p) == "Running" && ready(p)
    }
    fn succeeded(p: &Pod, _: &[Event]) -> bool {
        phase(p) == "Succeeded"
    }
    // Each case says only how it differs from a plain running pod.
    let plain = |name| Case {
        name,
        claim: Claim::None,
        init: None,
        command: None,
        restart_policy: "Never",
        settled: running,
        restarts_vary: false,
    };
    vec![
        plain("plain"),
        Case {
            init: Some(Vec::new()),
            ..plain("init")
        },
        Case {
            command: Some("exit 0"),
            settled: succeeded,
            ..plain("completes")
        },
        Case {
            command: Some("exit 1"),
            settled: |p, _| phase(p) == "Failed",
            ..plain("fails")
        },
        Case {
            command: Some("exit 1"),
            restart_policy: "Always",
            settled: |p, _| {
                container_status(p, objects::CONTAINER).is_some_and(|c| {
                    c.restart_count >= 1
                        && c.state
                            .as_ref()
                            .and_then(|s| s.waiting.as_ref())
                            .and_then(|w| w.reason.as_deref())
                            == Some("CrashLoopBackOff")
                })
            },
            restarts_vary: true,
            ..plain("restarts")
        },
        Case {
            claim: Claim::Default,
            ..plain("claim")
        },
        Case {
            claim: Claim::Default,
            init: Some(vec![objects::DEFAULT_USER_ENV.to_owned()]),
            ..plain("claim-init")
        },
        Case {
            claim: Claim::CdiMissing,
            // Whatever the kubelet says about it, it says it with a warning.
            settled: |_, e| {
                e.iter().any(|e| {
                    e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("Failed")
                })
            },
            ..plain("cdi-fails")
        },
        Case {
            claim: Claim::Default,
            command: Some("exit 0"),
            settled: succeeded,
            ..plain("claim-completes")
        },
    ]
}

pub(super) const TEMPLATE: &str = "claim";
pub(super) const CDI_MISSING_TEMPLATE: &str = "cdi-missing";

pub(super) fn pod_for(case: &Case, name: &str, node: &str) -> Pod {
    let mut shape = PodShape::new(name);
    shape.claims = match case.claim {
        Claim::None => PodClaims::None,
        Claim::Default => PodClaims::Inline {
            template: TEMPLATE.to_owned(),
        },
        Claim::CdiMissing => PodClaims::Inline {
            template: CDI_MISSING_TEMPLATE.to_owned(),
        },
    };
    shape.init_container = case.init.clone();
    shape.command = case.command.map(str::to_owned);
    shape.restart_policy = case.restart_policy.to_owned();
    // Through the scheduler, which allocates the claims.
    shape.node_selector = Some(node.to_owned());
    shape.build().expect("test pod")
}
