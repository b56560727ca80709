//! The optional DRA behaviours a driver may claim, and what a scenario
//! needing one does when the profile does not claim it: it is skipped with
//! that reason, never failed. A driver that cannot share devices is not
//! broken; a suite that fails it for that is.
//!
//! One spelling everywhere: the profile's `capabilities` list and the
//! scenario tag `@DriverCapability:<Name>` both use the names below.
use std::fmt;
use std::str::FromStr;

use super::Profile;
use super::names::closest;

/// Prefix of the scenario tags that name a capability (cucumber hands tags
/// over without the `@`).
pub const TAG_PREFIX: &str = "DriverCapability:";

/// An optional behaviour of a DRA driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// A device may be allocated to several claims at once (the slices mark
    /// it `allowMultipleAllocations`).
    SharedDevices,
    /// A claim may get several devices (a request's `count`, several
    /// requests), and the driver prepares them all for the pod.
    MultipleDevicesPerClaim,
    /// Claims with `adminAccess: true` get devices that other claims use.
    AdminAccess,
    /// Devices draw on shared counters (`sharedCounters`,
    /// `consumesCounters`), so overlapping partitions exclude each other.
    PartitionableDevices,
    /// Devices have capacity that a claim takes a share of
    /// (`capacity.requests`, request policies).
    ConsumableCapacity,
    /// The driver serves the kubelet's device health service; unhealthy
    /// devices show in the pod's status.
    DeviceHealth,
    /// The driver writes device metadata files that containers read.
    DeviceMetadata,
    /// Opaque configuration in a claim (and its class) reaches the prepared
    /// device.
    OpaqueConfig,
    /// The driver publishes taints on its devices.
    DeviceTaints,
    /// The driver's devices carry binding conditions it reports in the
    /// claim's status before the pod is bound.
    BindingConditions,
    /// The driver writes `status.devices` of the claims it prepares.
    DeviceStatus,
}

impl Capability {
    pub const ALL: [Capability; 11] = [
        Capability::SharedDevices,
        Capability::MultipleDevicesPerClaim,
        Capability::AdminAccess,
        Capability::PartitionableDevices,
        Capability::ConsumableCapacity,
        Capability::DeviceHealth,
        Capability::DeviceMetadata,
        Capability::OpaqueConfig,
        Capability::DeviceTaints,
        Capability::BindingConditions,
        Capability::DeviceStatus,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Capability::SharedDevices => "SharedDevices",
            Capability::MultipleDevicesPerClaim => "MultipleDevicesPerClaim",
            Capability::AdminAccess => "AdminAccess",
            Capability::PartitionableDevices => "PartitionableDevices",
            Capability::ConsumableCapacity => "ConsumableCapacity",
            Capability::DeviceHealth => "DeviceHealth",
            Capability::DeviceMetadata => "DeviceMetadata",
            Capability::OpaqueConfig => "OpaqueConfig",
            Capability::DeviceTaints => "DeviceTaints",
            Capability::BindingConditions => "BindingConditions",
            Capability::DeviceStatus => "DeviceStatus",
        }
    }

    /// The scenario tag that asks for this capability, without the `@`.
    pub fn tag(self) -> String {
        format!("{TAG_PREFIX}{}", self.name())
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no capability, with the closest one when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown capability `{name}`{}", suggestion(.closest))]
pub struct UnknownCapability {
    pub name: String,
    pub closest: Option<Capability>,
}

fn suggestion(closest: &Option<Capability>) -> String {
    match closest {
        Some(c) => format!(" (did you mean `{c}`?)"),
        None => format!(
            " (known: {})",
            Capability::ALL.map(Capability::name).join(", ")
        ),
    }
}

impl FromStr for Capability {
    type Err = UnknownCapability;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownCapability {
                name: s.to_owned(),
                closest: closest(s, Capability::ALL.iter().map(|c| c.name()))
                    .and_then(|n| n.parse().ok()),
            })
    }
}

/// Whether `tag` (without `@`) is a capability tag naming a known
/// capability; `None` when it is no capability tag at all.
pub fn tag_capability(tag: &str) -> Option<Result<Capability, UnknownCapability>> {
    tag.strip_prefix(TAG_PREFIX).map(str::parse)
}

/// Why a scenario with `tags` (without `@`; feature, rule and scenario tags
/// together) cannot run against the driver of `profile`, if it cannot: the
/// first capability it needs that the profile does not claim.
pub fn skip_reason<'a>(
    profile: &Profile,
    tags: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let whose = match &profile.file {
        Some(f) => format!("its profile {}", f.display()),
        None => "a driver given by --driver-name claims no optional capability".to_owned(),
    };
    for tag in tags {
        match tag_capability(tag) {
            None => {}
            Some(Ok(c)) if profile.capabilities.contains(&c) => {}
            Some(Ok(c)) => {
                return Some(format!(
                    "needs driver capability {c}, which driver {} does not claim ({whose})",
                    profile.driver_name
                ));
            }
            // `dra-e2e check` rejects such tags; a run that gets one anyway
            // must not pretend the driver lacks something that does not exist.
            Some(Err(e)) => return Some(format!("tag @{tag}: {e}")),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_typos_get_the_closest() {
        for c in Capability::ALL {
            assert_eq!(c.name().parse::<Capability>(), Ok(c));
            assert_eq!(tag_capability(&c.tag()), Some(Ok(c)));
        }
        let e = "AdminAcess".parse::<Capability>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown capability `AdminAcess` (did you mean `AdminAccess`?)"
        );
        let e = "Teleport".parse::<Capability>().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown capability `Teleport` (known: SharedDevices, "),
            "{e}"
        );
        assert_eq!(tag_capability("FeatureGate:X"), None);
    }

    #[test]
    fn scenarios_needing_an_unclaimed_capability_are_skipped_with_the_reason() {
        let mut p = Profile::from_flags("gpu.example.com", "gpu")
            .unwrap()
            .profile;
        let tags = ["DynamicResourceAllocation", "DriverCapability:AdminAccess"];
        assert_eq!(
            skip_reason(&p, tags),
            Some(
                "needs driver capability AdminAccess, which driver gpu.example.com does not \
                 claim (a driver given by --driver-name claims no optional capability)"
                    .to_owned()
            )
        );
        p.capabilities.insert(Capability::AdminAccess);
        assert_eq!(skip_reason(&p, tags), None);
        p.file = Some("p.yaml".into());
        assert_eq!(
            skip_reason(&p, ["DriverCapability:DeviceHealth"]),
            Some(
                "needs driver capability DeviceHealth, which driver gpu.example.com does not \
                 claim (its profile p.yaml)"
                    .to_owned()
            )
        );
        assert_eq!(skip_reason(&p, ["slow", "FeatureGate:X"]), None);
    }
}
