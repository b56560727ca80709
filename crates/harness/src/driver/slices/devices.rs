//! The devices a test driver's slices list, as feature files write them:
//! names, attributes and taints, parsed from a step's words, and the
//! driver's default devices.
use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A device attribute value as written in a feature file (`true`, `3`, `"x"`).
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    Bool(bool),
    Int(i64),
    String(String),
    Version(String),
}

impl Attribute {
    /// Reads `true`/`false`, an integer, `v1.2.3`-like versions, or a string.
    pub fn parse(s: &str) -> Self {
        let s = s.trim();
        if let Ok(b) = s.parse::<bool>() {
            return Attribute::Bool(b);
        }
        if let Ok(i) = s.parse::<i64>() {
            return Attribute::Int(i);
        }
        let unquoted = s.trim_matches('"');
        if unquoted.split('.').count() == 3 && unquoted.split('.').all(|p| p.parse::<u64>().is_ok())
        {
            return Attribute::Version(unquoted.to_owned());
        }
        Attribute::String(unquoted.to_owned())
    }

    fn to_json(&self) -> Value {
        match self {
            Attribute::Bool(b) => json!({ "bool": b }),
            Attribute::Int(i) => json!({ "int": i }),
            Attribute::String(s) => json!({ "string": s }),
            Attribute::Version(v) => json!({ "version": v }),
        }
    }
}

/// A device taint (`key=value:Effect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl std::str::FromStr for Taint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("taint {s:?} must look like key=value:Effect"))?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if !["NoSchedule", "NoExecute", "None"].contains(&effect) {
            return Err(format!(
                "taint effect {effect:?} must be NoSchedule, NoExecute or None"
            ));
        }
        Ok(Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: effect.to_owned(),
        })
    }
}

/// Upstream's taint of "tainted" network devices.
pub fn default_taint() -> Taint {
    Taint {
        key: "example.com/taint".to_owned(),
        value: "tainted".to_owned(),
        effect: "NoSchedule".to_owned(),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    pub name: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub taints: Vec<Taint>,
}

impl DeviceSpec {
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            attributes: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// The device as the API has it: name, attributes and taints.
    pub fn to_json(&self) -> Value {
        let mut d = json!({ "name": self.name });
        if !self.attributes.is_empty() {
            d["attributes"] = self
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        if !self.taints.is_empty() {
            d["taints"] = self
                .taints
                .iter()
                .map(|t| json!({ "key": t.key, "value": t.value, "effect": t.effect }))
                .collect();
        }
        d
    }
}

/// Upstream's node-local device names: `device-00`, `device-01`, ...
pub fn node_local_devices(count: usize) -> Vec<DeviceSpec> {
    (0..count)
        .map(|i| DeviceSpec::named(format!("device-{i:02}")))
        .collect()
}

/// Upstream's network device names: `device-0`, `device-1`, ...
pub fn network_devices(count: usize, taints: &[Taint]) -> Vec<DeviceSpec> {
    (0..count)
        .map(|i| {
            let mut d = DeviceSpec::named(format!("device-{i}"));
            d.taints = taints.to_vec();
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_parsing() {
        assert_eq!(Attribute::parse("true"), Attribute::Bool(true));
        assert_eq!(Attribute::parse("3"), Attribute::Int(3));
        assert_eq!(
            Attribute::parse("1.2.3"),
            Attribute::Version("1.2.3".into())
        );
        assert_eq!(Attribute::parse("\"x\""), Attribute::String("x".into()));
    }

    #[test]
    fn taint_parsing() {
        let t: Taint = "example.com/taint=tainted:NoExecute".parse().unwrap();
        assert_eq!(t.key, "example.com/taint");
        assert_eq!(t.value, "tainted");
        assert_eq!(t.effect, "NoExecute");
        assert!("k=v:Sometimes".parse::<Taint>().is_err());
        assert!("novalue".parse::<Taint>().is_err());
    }
}

/// Generated `tainted` phrases: a taint, or a refusal naming the phrase or
/// the effect. `PROPTEST_CASES` raises the bounded count (`make
/// props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use crate::props::text;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::default())]

        #[test]
        fn any_taint_parses_or_is_named(
            s in text(&["example.com/t", "=", ":", "NoSchedule", "NoExecute", "None", "x"], 8),
        ) {
            match s.parse::<Taint>() {
                Ok(t) => {
                    prop_assert!(["NoSchedule", "NoExecute", "None"].contains(&t.effect.as_str()));
                    let back = if t.value.is_empty() && !s.contains('=') {
                        format!("{}:{}", t.key, t.effect)
                    } else {
                        format!("{}={}:{}", t.key, t.value, t.effect)
                    };
                    prop_assert_eq!(back, s);
                }
                Err(m) => prop_assert!(
                    m.contains(&format!("{s:?}")) || m.starts_with("taint effect "),
                    "{m}"
                ),
            }
        }
    }
}
