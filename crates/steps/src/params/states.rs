//! The states and words a sentence waits for or checks: a pod's state and
//! the states it can stay in, a claim's state, a device's health, a write
//! to a slice, `gets` or `does not get`. Each is a fixed set of words
//! declared once with `phrase_words!`.
use super::{PodState, SteadyPodState};

/// The pod states steps wait for: `running`, `gone`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodStateWord(pub PodState);

phrase_words! {
    PodStateWord as "podstate", "pod state" {
        "running" => PodStateWord(PodState::Running),
        "scheduled" => PodStateWord(PodState::Scheduled),
        "unschedulable" => PodStateWord(PodState::Unschedulable),
        "completed" => PodStateWord(PodState::Completed),
        "failed" => PodStateWord(PodState::Failed),
        "gone" => PodStateWord(PodState::Gone),
        "pending" => PodStateWord(PodState::Pending),
    }
}

/// A device health as plugins report it and pods show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health(pub crate::plugin::HealthStatus);

phrase_words! {
    Health as "health", "device health" {
        "Healthy" => Health(crate::plugin::HealthStatus::Healthy),
        "Unhealthy" => Health(crate::plugin::HealthStatus::Unhealthy),
        "Unknown" => Health(crate::plugin::HealthStatus::Unknown),
    }
}

impl Health {
    /// The word the kubelet writes into pod status.
    pub fn as_status(self) -> &'static str {
        match self.0 {
            crate::plugin::HealthStatus::Healthy => "Healthy",
            crate::plugin::HealthStatus::Unhealthy => "Unhealthy",
            crate::plugin::HealthStatus::Unknown => "Unknown",
        }
    }
}

/// A pod state that can be held for a while: `pending`, `running` or
/// `terminating`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SteadyPodStateWord(pub SteadyPodState);

phrase_words! {
    SteadyPodStateWord as "steadystate", "state a pod can stay in" {
        "pending" => SteadyPodStateWord(SteadyPodState::Pending),
        "running" => SteadyPodStateWord(SteadyPodState::Running),
        "terminating" => SteadyPodStateWord(SteadyPodState::Terminating),
    }
}

/// The claim states steps wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    Allocated,
    Deallocated,
    NotReserved,
    Deleted,
}

phrase_words! {
    ClaimState as "claimstate", "claim state" {
        "allocated" => ClaimState::Allocated,
        "deallocated" => ClaimState::Deallocated,
        "not reserved" => ClaimState::NotReserved,
        "deleted" => ClaimState::Deleted,
    }
}

/// A write to a ResourceSlice whose permission a step checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Updating,
    Deleting,
}

phrase_words! {
    Verb as "verb", "verb" {
        "updating" => Verb::Updating,
        "deleting" => Verb::Deleting,
    }
}

/// `gets` or `does not get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gets(pub bool);

phrase_words! {
    Gets as "gets", "verb" {
        "gets" => Gets(true),
        "does not get" => Gets(false),
    }
}
