//! The optional tails and settings of longer sentences: the claims of a
//! pod, the settings of a second driver instance, what follows `a device
//! class` and `an external claim`. Each tail is one parameter, so that a
//! sentence with an unknown setting fails to parse saying which.
use std::str::FromStr;

use super::{DriverRef, quoted_list};

/// The claims of a pod sentence: `with an inline claim`, `using claim "a"`,
/// `using claims "a" and "b"` or `without claims`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(
    name = "podclaims",
    regex = "with an inline claim|using claims? .+|without claims"
)]
pub enum PodClaimsPhrase {
    Inline,
    External(Vec<String>),
    None,
}

impl FromStr for PodClaimsPhrase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "with an inline claim" => Ok(PodClaimsPhrase::Inline),
            "without claims" => Ok(PodClaimsPhrase::None),
            _ => s
                .strip_prefix("using claim")
                .map(|list| PodClaimsPhrase::External(quoted_list(list)))
                .ok_or_else(|| format!("unknown claims {s:?}")),
        }
    }
}

/// The settings of `a second instance "x" of <driver>, <settings>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "instancesettings", regex = ".+")]
pub struct InstanceSettings {
    pub start_later: bool,
    pub rolling_update: bool,
}

impl FromStr for InstanceSettings {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut settings = InstanceSettings {
            start_later: false,
            rolling_update: false,
        };
        for m in s.split(", ").map(str::trim).filter(|m| !m.is_empty()) {
            match m {
                "not started yet" => settings.start_later = true,
                "in rolling-update mode" => settings.rolling_update = true,
                other => {
                    return Err(format!(
                        "unknown instance setting {other:?}; known: `not started yet`, `in rolling-update mode`"
                    ));
                }
            }
        }
        Ok(settings)
    }
}

/// What follows `a device class`: `[ for <driver>][ with parameters {json}][,]
/// [ serving extended resource "name"]`. The JSON is read by the step, which
/// says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Default, cucumber::Parameter)]
#[param(
    name = "classoptions",
    regex = r#"(?: for (?:the driver|driver "[^"]+"))?(?: with parameters \{.*\})?(?:,? serving extended resource "[^"]+")?"#
)]
pub struct ClassOptions {
    pub driver: DriverRef,
    pub parameters: Option<String>,
    pub extended_resource: Option<String>,
}

impl FromStr for ClassOptions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut options = ClassOptions::default();
        let mut rest = s;
        if let Some((head, resource)) = rest.rsplit_once(" serving extended resource \"") {
            options.extended_resource = Some(
                resource
                    .strip_suffix('"')
                    .ok_or_else(|| format!("unterminated extended resource name in {s:?}"))?
                    .to_owned(),
            );
            rest = head.strip_suffix(',').unwrap_or(head);
        }
        if let Some((head, json)) = rest.split_once(" with parameters ") {
            options.parameters = Some(json.to_owned());
            rest = head;
        }
        if let Some(driver) = rest.strip_prefix(" for ") {
            // The driver's error quotes only its part, which may be empty.
            options.driver = driver.parse().map_err(|e| format!("{e}, in {s:?}"))?;
        } else if !rest.is_empty() {
            return Err(format!("unknown device class options {s:?}"));
        }
        Ok(options)
    }
}

/// What follows `an external claim "name"`: `[ for <driver>][ with admin access]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, cucumber::Parameter)]
#[param(
    name = "claimoptions",
    regex = r#"(?: for (?:the driver|driver "[^"]+"))?(?: with admin access)?"#
)]
pub struct ClaimOptions {
    pub driver: DriverRef,
    pub admin_access: bool,
}

impl FromStr for ClaimOptions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rest, admin_access) = match s.strip_suffix(" with admin access") {
            Some(r) => (r, true),
            None => (s, false),
        };
        let driver = match rest.strip_prefix(" for ") {
            // The driver's error quotes only its part, which may be empty.
            Some(d) => d.parse().map_err(|e| format!("{e}, in {s:?}"))?,
            None if rest.is_empty() => DriverRef::The,
            None => return Err(format!("unknown claim options {s:?}")),
        };
        Ok(ClaimOptions {
            driver,
            admin_access,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Containers;

    #[test]
    fn the_optional_tails_of_class_and_claim_sentences_parse() {
        assert_eq!(
            r#" for driver "a" with parameters {"x":"y"}, serving extended resource "r""#
                .parse::<ClassOptions>()
                .unwrap(),
            ClassOptions {
                driver: DriverRef::Named("a".into()),
                parameters: Some(r#"{"x":"y"}"#.into()),
                extended_resource: Some("r".into()),
            }
        );
        assert_eq!(
            " serving extended resource \"r\""
                .parse::<ClassOptions>()
                .unwrap(),
            ClassOptions {
                extended_resource: Some("r".into()),
                ..ClassOptions::default()
            }
        );
        assert_eq!("".parse::<ClassOptions>().unwrap(), ClassOptions::default());
        assert_eq!(
            " for the driver with admin access"
                .parse::<ClaimOptions>()
                .unwrap(),
            ClaimOptions {
                driver: DriverRef::The,
                admin_access: true
            }
        );
    }

    #[test]
    fn pod_claims_containers_and_instance_settings_parse() {
        assert_eq!(
            "using claims \"a\" and \"b\""
                .parse::<PodClaimsPhrase>()
                .unwrap(),
            PodClaimsPhrase::External(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            "init container \"i\"".parse::<Containers>().unwrap(),
            Containers::Init("i".into())
        );
        assert!("blue".parse::<InstanceSettings>().is_err());
    }
}
