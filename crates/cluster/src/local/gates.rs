//! Feature gates, passed identically to every control-plane component (and
//! later read by the simulated kubelet).
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A set of explicitly configured gates; anything absent keeps its default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates(BTreeMap<String, bool>);

/// `--feature-gates` text that is not `Name=true|false[,…]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid feature gate {entry:?}: expected Name=true or Name=false")]
pub struct InvalidFeatureGate {
    pub entry: String,
}

impl FeatureGates {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets one gate (builder style).
    pub fn with(mut self, name: impl Into<String>, enabled: bool) -> Self {
        self.set(name, enabled);
        self
    }

    pub fn set(&mut self, name: impl Into<String>, enabled: bool) {
        self.0.insert(name.into(), enabled);
    }

    /// The configured value, `None` when the gate keeps its default.
    pub fn get(&self, name: &str) -> Option<bool> {
        self.0.get(name).copied()
    }

    /// Whether `name` is on, given its default in this Kubernetes version.
    pub fn enabled(&self, name: &str, default: bool) -> bool {
        self.get(name).unwrap_or(default)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl FromStr for FeatureGates {
    type Err = InvalidFeatureGate;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut gates = Self::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let invalid = || InvalidFeatureGate {
                entry: entry.to_owned(),
            };
            let (name, value) = entry.split_once('=').ok_or_else(invalid)?;
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(invalid());
            }
            let enabled = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(invalid()),
            };
            gates.set(name, enabled);
        }
        Ok(gates)
    }
}

/// The `--feature-gates` value: `A=true,B=false`, sorted by name.
impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, enabled)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={enabled}")?;
        }
        Ok(())
    }
}

impl<S: Into<String>> FromIterator<(S, bool)> for FeatureGates {
    fn from_iter<I: IntoIterator<Item = (S, bool)>>(iter: I) -> Self {
        let mut gates = Self::new();
        for (name, enabled) in iter {
            gates.set(name, enabled);
        }
        gates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_sorted() {
        let g: FeatureGates = "DRAPartitionableDevices=true, DRAAdminAccess=FALSE,"
            .parse()
            .unwrap();
        assert_eq!(g.get("DRAAdminAccess"), Some(false));
        assert_eq!(g.get("Other"), None);
        assert!(g.enabled("Other", true));
        assert_eq!(
            g.to_string(),
            "DRAAdminAccess=false,DRAPartitionableDevices=true"
        );
        assert_eq!("".parse::<FeatureGates>().unwrap(), FeatureGates::new());
    }

    #[test]
    fn rejects_malformed_entries() {
        for bad in ["A", "A=yes", "=true", "A B=true"] {
            let err = bad.parse::<FeatureGates>().unwrap_err();
            assert!(err.to_string().contains("Name=true"), "{bad}: {err}");
        }
    }
}
