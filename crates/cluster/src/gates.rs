//! Feature gates, passed identically to every control-plane component (and
//! later read by the simulated kubelet), and the probe of a binary for the
//! gates it refuses. A module of the crate's own, not the local cluster's:
//! the real nodes probe their kubelet with it too, and reaching into
//! `local` for it made `local` and `real_node` lean on each other.
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

/// How a Kubernetes program is asked which gates it knows. Its `--help`
/// lists only the gates that can still be set, not the GA ones locked on,
/// which an older release may still accept; so each program is given the
/// gates and made to stop right after it has read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateProbe {
    /// kube-apiserver (and its controllers): the flag is read before
    /// `--version` is acted on.
    ApiServer,
    /// kubelet: the flag is read after `--version`, but before the config
    /// file, which is made not to exist.
    Kubelet,
}

impl GateProbe {
    fn args(self) -> &'static [&'static str] {
        match self {
            GateProbe::ApiServer => &["--version"],
            GateProbe::Kubelet => &["--config=/nonexistent/dra-e2e-gate-probe"],
        }
    }
}

/// What every Kubernetes program says of a gate it does not know.
const UNRECOGNIZED: &str = "unrecognized feature gate: ";
/// What it says of a gate switched on without the gates it depends on
/// (`X is enabled, but depends on features that are disabled: [Y Z]`).
const DEPENDS: &str = " is enabled, but depends on features that are disabled: [";

/// Why a program will not run with a gate set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRefusal {
    /// The release has no such gate (a newer release's gate).
    Unknown,
    /// The release has it, but it depends on these gates, which are off.
    Needs(Vec<String>),
    /// The release has it, but not these controllers the local cluster runs
    /// for it.
    NeedsController(Vec<String>),
}

impl fmt::Display for GateRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateRefusal::Unknown => f.write_str("does not exist"),
            GateRefusal::Needs(gates) => {
                write!(f, "depends on {}, which is off", gates.join(", "))
            }
            GateRefusal::NeedsController(controllers) => write!(
                f,
                "needs {}, which the kube-controller-manager does not have",
                controllers.join(", ")
            ),
        }
    }
}

/// Those of `gates` (name and value) that `program` refuses, and why: a
/// newer release's gate on an older one, or one whose dependencies are off
/// there. The program names one refused gate per run, so it is asked again
/// without it until it names none.
pub fn refused_by(
    program: &std::path::Path,
    probe: GateProbe,
    gates: &[(&str, bool)],
) -> std::io::Result<Vec<(String, GateRefusal)>> {
    let mut left: Vec<(&str, bool)> = gates.to_vec();
    let mut refused = Vec::new();
    while !left.is_empty() {
        let value: Vec<String> = left.iter().map(|(g, on)| format!("{g}={on}")).collect();
        let out = std::process::Command::new(program)
            .arg(format!("--feature-gates={}", value.join(",")))
            .args(probe.args())
            .stdin(std::process::Stdio::null())
            .output()?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        let Some((name, why)) = named_refusal(&text) else {
            break;
        };
        match left.iter().position(|(g, _)| *g == name) {
            Some(i) => refused.push((left.remove(i).0.to_owned(), why)),
            None => break,
        }
    }
    Ok(refused)
}

/// The gate a refusal message names, and why it is refused.
fn named_refusal(text: &str) -> Option<(&str, GateRefusal)> {
    let ident_end = |s: &str| {
        s.find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(s.len())
    };
    if let Some(at) = text.find(UNRECOGNIZED) {
        let rest = &text[at + UNRECOGNIZED.len()..];
        let name = &rest[..ident_end(rest)];
        return (!name.is_empty()).then_some((name, GateRefusal::Unknown));
    }
    let at = text.find(DEPENDS)?;
    let before = &text[..at];
    let name = &before[before
        .rfind(|c: char| !c.is_ascii_alphanumeric())
        .map_or(0, |i| i + 1)..];
    let needs = text[at + DEPENDS.len()..]
        .split(']')
        .next()?
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    (!name.is_empty()).then_some((name, GateRefusal::Needs(needs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refused_gate_is_read_from_the_message() {
        let kubelet = r#"E1205 run.go:72] "command failed" err="failed to set feature gates from initial flags-based config: unrecognized feature gate: DRAWorkloadResourceClaims""#;
        assert_eq!(
            named_refusal(kubelet),
            Some(("DRAWorkloadResourceClaims", GateRefusal::Unknown))
        );
        let apiserver = "Error: invalid argument \"Foo=true\" for \"--feature-gates\" flag: unrecognized feature gate: Foo\n";
        assert_eq!(
            named_refusal(apiserver),
            Some(("Foo", GateRefusal::Unknown))
        );
        let depends = r#"E1205 run.go:72] "command failed" err="InPlacePodLevelResourcesVerticalScaling is enabled, but depends on features that are disabled: [NodeDeclaredFeatures]""#;
        let (name, why) = named_refusal(depends).unwrap();
        assert_eq!(name, "InPlacePodLevelResourcesVerticalScaling");
        assert_eq!(why, GateRefusal::Needs(vec!["NodeDeclaredFeatures".into()]));
        assert_eq!(
            why.to_string(),
            "depends on NodeDeclaredFeatures, which is off"
        );
        assert_eq!(named_refusal("failed to load kubelet config file"), None);
    }

    /// A stand-in that refuses the gates of a list the way a Kubernetes
    /// program does, one at a time: every unknown gate is found, the known
    /// ones are kept.
    #[test]
    fn every_unknown_gate_is_found_one_run_at_a_time() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("kube-apiserver");
        std::fs::write(
            &program,
            "#!/bin/sh\nfor g in $(echo \"${1#--feature-gates=}\" | tr , ' '); do\n  \
             case $g in Old*=true) ;; *) echo \"Error: unrecognized feature gate: ${g%=true}\" >&2; exit 1;; esac\n\
             done\necho Kubernetes v1.35.4\n",
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = refused_by(
            &program,
            GateProbe::ApiServer,
            &[
                ("OldA", true),
                ("NewB", true),
                ("OldC", true),
                ("NewD", true),
            ],
        )
        .unwrap();
        let names: Vec<&str> = refused.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(names, ["NewB", "NewD"]);
        assert!(refused.iter().all(|(_, why)| *why == GateRefusal::Unknown));
        assert!(
            refused_by(&program, GateProbe::ApiServer, &[("OldA", true)])
                .unwrap()
                .is_empty()
        );
    }

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
