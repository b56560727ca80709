//! The plugin methods a sentence names, with the driver it asks and the
//! API version a call went through: the kubelet calls a method through
//! whichever API version it speaks, so a method is every version's gRPC
//! path at once.
use std::str::FromStr;

use super::{DriverRef, words};
use crate::proto::method;

/// A kubelet plugin gRPC method, across all API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    NodePrepareResources,
    NodeUnprepareResources,
    GetInfo,
    NotifyRegistrationStatus,
    /// The kubelet's device health stream (counted once, when it opens).
    NodeWatchResources,
}

impl Method {
    /// Full gRPC paths of the method in every API version, as the kubelet
    /// version decides which one is called.
    pub fn paths(self) -> &'static [&'static str] {
        match self {
            Method::NodePrepareResources => &[
                method::V1_PREPARE,
                method::V1BETA1_PREPARE,
                method::V1ALPHA4_PREPARE,
            ],
            Method::NodeUnprepareResources => &[
                method::V1_UNPREPARE,
                method::V1BETA1_UNPREPARE,
                method::V1ALPHA4_UNPREPARE,
            ],
            Method::GetInfo => &[method::GET_INFO],
            Method::NotifyRegistrationStatus => &[method::NOTIFY_REGISTRATION_STATUS],
            Method::NodeWatchResources => &[method::HEALTH_V1_WATCH, method::HEALTH_V1ALPHA1_WATCH],
        }
    }
}

phrase_words! {
    Method as "methodname", "method" {
        "NodePrepareResources" => Method::NodePrepareResources,
        "NodeUnprepareResources" => Method::NodeUnprepareResources,
        "GetInfo" => Method::GetInfo,
        "NotifyRegistrationStatus" => Method::NotifyRegistrationStatus,
        "NodeWatchResources" => Method::NodeWatchResources,
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// `NodePrepareResources`, or `NodePrepareResources of driver "x"`: a method
/// of one of the scenario's drivers ("the driver" when none is named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodOf {
    pub method: Method,
    pub driver: DriverRef,
}

impl cucumber::Parameter for MethodOf {
    const REGEX: &'static str = words::regex_concat![
        "(?:",
        <Method as cucumber::Parameter>::REGEX,
        ")(?: of (?:",
        <DriverRef as cucumber::Parameter>::REGEX,
        "))?"
    ];
    const NAME: &'static str = "method";
}

impl MethodOf {
    /// Fails unless the method is one of `allowed` (a step that acts on
    /// some methods only).
    pub fn one_of(&self, allowed: &[Method]) -> anyhow::Result<Method> {
        if allowed.contains(&self.method) {
            return Ok(self.method);
        }
        let names: Vec<String> = allowed.iter().map(Method::to_string).collect();
        anyhow::bail!(
            "this step applies to {}, not {}",
            names.join(", "),
            self.method
        )
    }
}

impl FromStr for MethodOf {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // The parts' errors quote only their part, which may be empty
        // (`GetInfo of `): the whole is said too.
        let whole = |e: String| format!("{e}, in {s:?}");
        let (method, driver) = match s.split_once(" of ") {
            Some((m, d)) => (m, d.parse().map_err(whole)?),
            None => (s, DriverRef::The),
        };
        Ok(MethodOf {
            method: method.parse().map_err(whole)?,
            driver,
        })
    }
}

/// An API version a method was called through: `v1`, `v1beta1`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersion(pub String);

phrase_words! {
    ApiVersion as "apiversion", "API version" {
        "v1" => ApiVersion("v1".to_owned()),
        "v1beta1" => ApiVersion("v1beta1".to_owned()),
        "v1alpha4" => ApiVersion("v1alpha4".to_owned()),
        "v1alpha1" => ApiVersion("v1alpha1".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_names_its_driver_or_means_the_driver() {
        assert_eq!(
            "GetInfo of driver \"x\"".parse::<MethodOf>().unwrap(),
            MethodOf {
                method: Method::GetInfo,
                driver: DriverRef::Named("x".into())
            }
        );
        assert_eq!(
            "NodeWatchResources".parse::<MethodOf>().unwrap().driver,
            DriverRef::The
        );
    }
}
