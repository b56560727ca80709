//! A driver profile: which DRA driver is under test, and what the suite may
//! expect of it.
//!
//! The suite was built around its own test driver, which it hosts and can
//! count and break at will. Testing someone else's driver needs the facts
//! the suite cannot guess: the driver's name and DeviceClass, where it runs
//! and how it gets there, which optional behaviours it claims (scenarios
//! needing others are skipped, never failed), how a container shows it got
//! its device, and how many devices a node offers. One YAML file says them
//! (`docs/driver-profile.md` documents it field by field); for a driver
//! that is already installed, KEP-5970's two flags are enough and
//! [`Profile::from_flags`] defaults the rest, saying what it chose.
//!
//! A profile is checked as a whole before anything runs: every mistake is
//! reported with its line and field ([`Mistake`]), not only the first, so
//! that writing one is a single round of fixes.
//!
//! Ground floor: this module uses nothing of the harness.
pub mod capability;
mod fault;
pub mod init;
mod names;
mod parse;
#[cfg(test)]
mod props;
pub mod schema;
mod shape;
mod yaml;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

pub use capability::{Capability, TAG_PREFIX, UnknownCapability, skip_reason};
pub use fault::{Fault, Planter};
pub use parse::{Options, parse_str};

/// Stands for the scenario's namespace in a [`Deployment::Builtin`]
/// profile's names: the suite names each scenario's driver after it.
pub const NAMESPACE_PLACEHOLDER: &str = "${namespace}";

/// What the runner fills into a [`Deployment::SimulatedNodes`] command,
/// per node (`${name}` in any argument).
pub const COMMAND_PLACEHOLDERS: &[(&str, &str)] = &[
    ("nodeName", "the node's name"),
    ("kubeletDir", "the node's kubelet root directory"),
    (
        "registrationDir",
        "where the node's kubelet looks for registration sockets (<kubeletDir>/plugins_registry)",
    ),
    (
        "pluginDir",
        "the driver's directory for its DRA socket (<kubeletDir>/plugins/<driverName>)",
    ),
    ("cdiDir", "the node's CDI spec directory"),
    ("kubeconfig", "a kubeconfig for the driver's API access"),
    ("driverName", "the profile's driverName"),
];

/// The suite's own test driver's profile (`profiles/builtin.yaml`, built
/// into the runner): what a run tests when it is given no other.
pub fn builtin() -> Profile {
    const SOURCE: &str = include_str!("../../../profiles/builtin.yaml");
    // The file is the project's own; a test keeps it valid.
    parse_str(
        SOURCE,
        Path::new("profiles/builtin.yaml"),
        Options { check_files: false },
    )
    .unwrap_or_else(|mistakes| panic!("profiles/builtin.yaml is invalid: {mistakes:?}"))
}

/// Which driver is under test and what may be expected of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The DRA driver name (a DNS subdomain of at most 63 characters).
    pub driver_name: String,
    pub device_class: DeviceClass,
    pub deployment: Deployment,
    /// How the driver is told to put its registration socket elsewhere than
    /// the kubelet's directory, for something between kubelet and driver.
    pub registration_dir: Option<Setting>,
    /// How the driver is told how many devices each node offers, so that
    /// the runner can make one go away (restart it with one fewer).
    pub device_count: Option<Setting>,
    pub capabilities: BTreeSet<Capability>,
    pub container_check: ContainerCheck,
    /// Bugs planted on purpose (`deployment.faults`, none normally), to
    /// see the pack fail a driver that has them: planted in the suite's
    /// own driver, or by the interposer in front of any other.
    pub faults: BTreeSet<Fault>,
    /// How many devices each node offers; unknown when `None`, and then
    /// scenarios that use every device of a node cannot run.
    pub devices_per_node: Option<u32>,
    /// The file it was read from (`None`: from flags).
    pub file: Option<PathBuf>,
}

impl Profile {
    /// Whether the runner can put its interposer between the kubelet and
    /// this driver (so that scenarios count, fail and stall its calls), and
    /// if not, why. The suite's own driver is hosted by the runner and needs
    /// none.
    pub fn interposable(&self) -> Result<(), String> {
        match &self.deployment {
            Deployment::Builtin => Ok(()),
            // The command passes the directory itself, or registrationDir
            // says how (the profile check requires one of them).
            Deployment::SimulatedNodes { .. } => Ok(()),
            // The runner rewrites the manifests' DaemonSet to register
            // privately: through registrationDir's flag or variable, or
            // by pointing its plugins_registry volume elsewhere.
            Deployment::RealNodes { .. } | Deployment::Manifests { .. } => Ok(()),
            Deployment::Installed => Err(format!(
                "driver {} is installed by someone else (deployment.mode: Installed); the runner \
                 interposes only a driver it deploys, pointed at a registration directory of \
                 its own (deployment.mode RealNodes, Manifests or SimulatedNodes)",
                self.driver_name
            )),
        }
    }
}

/// The DeviceClass that scenarios' claims ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceClass {
    /// An existing class, by name.
    Existing(String),
    /// A CEL expression; the runner creates a class selecting with it.
    Selector(String),
}

/// Where the driver runs, and so what the runner has to do to get it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deployment {
    /// The suite's own test driver, hosted by the runner (on the local
    /// cluster's simulated nodes unless the run chooses others).
    Builtin,
    /// Already installed in the kubeconfig cluster; the suite installs
    /// nothing (KEP-5970's setting).
    Installed,
    /// On the local cluster's real kubelet nodes: the nodes import the
    /// image archives, then the manifests are applied. Paths are absolute
    /// (relative ones in the file are relative to the file).
    RealNodes {
        manifests: Vec<PathBuf>,
        image_archives: Vec<PathBuf>,
    },
    /// On the kubeconfig cluster: the runner applies the manifests in
    /// order and removes what it made at the end of the run. Their images
    /// must be pullable by the nodes or already on them (`kind load
    /// image-archive`): unlike real local nodes, a cluster the runner did
    /// not start imports nothing from it. Paths as for `RealNodes`.
    Manifests { manifests: Vec<PathBuf> },
    /// On the local cluster's simulated nodes: the runner starts `command`
    /// once per node, with [`COMMAND_PLACEHOLDERS`] filled in.
    SimulatedNodes { command: Vec<String> },
}

/// [`Deployment`] without its settings: the `deployment.mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Builtin,
    Installed,
    RealNodes,
    Manifests,
    SimulatedNodes,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Builtin,
        Mode::Installed,
        Mode::RealNodes,
        Mode::Manifests,
        Mode::SimulatedNodes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Builtin => "Builtin",
            Mode::Installed => "Installed",
            Mode::RealNodes => "RealNodes",
            Mode::Manifests => "Manifests",
            Mode::SimulatedNodes => "SimulatedNodes",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Deployment {
    pub fn mode(&self) -> Mode {
        match self {
            Deployment::Builtin => Mode::Builtin,
            Deployment::Installed => Mode::Installed,
            Deployment::RealNodes { .. } => Mode::RealNodes,
            Deployment::Manifests { .. } => Mode::Manifests,
            Deployment::SimulatedNodes { .. } => Mode::SimulatedNodes,
        }
    }
}

/// How the driver is told a value (its registration directory, its device
/// count): a flag or an environment variable of its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// A command-line flag taking the value (`--plugin-registration-path`),
    /// passed as `FLAG=VALUE`.
    Flag(String),
    /// An environment variable holding the value.
    Env(String),
}

impl Setting {
    /// `argv` and `env` with this setting given `value`: a flag's earlier
    /// `FLAG=...` argument replaced (or the flag added at the end), an
    /// environment variable's earlier value replaced (or the variable
    /// added).
    /// How a manifest shows it: "an argument FLAG=..." or "environment
    /// variable VAR".
    pub fn describe(&self) -> String {
        match self {
            Setting::Flag(f) => format!("an argument {f}=..."),
            Setting::Env(e) => format!("environment variable {e}"),
        }
    }

    pub fn apply(&self, argv: &mut Vec<String>, env: &mut Vec<(String, String)>, value: &str) {
        match self {
            Setting::Flag(flag) => {
                let given = format!("{flag}={value}");
                let prefix = format!("{flag}=");
                match argv.iter_mut().find(|a| a.starts_with(&prefix)) {
                    Some(a) => *a = given,
                    None => argv.push(given),
                }
            }
            Setting::Env(name) => match env.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v = value.to_owned(),
                None => env.push((name.clone(), value.to_owned())),
            },
        }
    }
}

/// How a container shows that it got its device. Both parts must hold when
/// both are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCheck {
    /// Each must match at least one variable the container has and its pod
    /// spec does not set (so: one that came from CDI).
    pub env: Vec<EnvPattern>,
    /// Run in the container; exit status 0 means it got its device. Empty:
    /// none.
    pub command: Vec<String>,
}

impl ContainerCheck {
    /// KEP-5970's check: the container has some variable the driver
    /// injected, whatever its name.
    pub fn any_injected_env() -> Self {
        ContainerCheck {
            env: vec![EnvPattern::new("*")],
            command: Vec::new(),
        }
    }
}

/// What a `containerCheck.env` pattern may name, filled in per claim and
/// request of the container checked.
pub const ENV_PLACEHOLDERS: &[(&str, &str)] = &[
    ("${claim}", "the name of a ResourceClaim the container uses"),
    (
        "${request}",
        "a request of that claim the container uses (without a subrequest)",
    ),
];

/// `NAME` or `NAME=VALUE`, where `*` in either stands for any text and
/// [`ENV_PLACEHOLDERS`] for a claim's and a request's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPattern(String);

impl EnvPattern {
    pub fn new(pattern: impl Into<String>) -> Self {
        EnvPattern(pattern.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it names the claim or request it is about
    /// ([`ENV_PLACEHOLDERS`]): then it must hold for every claim and
    /// request a container uses, and for none it does not.
    pub fn per_claim(&self) -> bool {
        ENV_PLACEHOLDERS.iter().any(|(p, _)| self.0.contains(p))
    }

    /// The pattern for one claim and request of a container. In the
    /// variable's name every character of the names that a variable name
    /// cannot hold portably (outside `[A-Za-z0-9_]`) becomes `_`, as
    /// drivers write them; in the value the names stay as they are.
    pub fn expand(&self, claim: &str, request: &str) -> EnvPattern {
        let (name, value) = match self.0.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (self.0.as_str(), None),
        };
        let portable = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let fill = |text: &str, claim: &str, request: &str| {
            text.replace("${claim}", claim)
                .replace("${request}", request)
        };
        let mut out = fill(name, &portable(claim), &portable(request));
        if let Some(v) = value {
            out.push('=');
            out.push_str(&fill(v, claim, request));
        }
        EnvPattern(out)
    }

    /// Whether variable `name` with `value` matches: a pattern without
    /// `=` matches any value.
    pub fn matches(&self, name: &str, value: &str) -> bool {
        match self.0.split_once('=') {
            Some((n, v)) => glob(n, name) && glob(v, value),
            None => glob(&self.0, name),
        }
    }
}

impl fmt::Display for EnvPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `*` matches any text, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// One mistake in a profile file: where, in which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mistake {
    pub line: u64,
    /// The field's path (`deployment.manifests[1]`); `None` for YAML syntax.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Mistake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "line {}: field `{field}`: {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("reading driver profile {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("driver profile {path}: {}", mistakes_text(.path, .mistakes))]
    Mistakes {
        path: PathBuf,
        mistakes: Vec<Mistake>,
    },
    #[error("--{flag} `{value}`: {reason}")]
    Flag {
        flag: &'static str,
        value: String,
        reason: String,
    },
}

fn mistakes_text(path: &Path, mistakes: &[Mistake]) -> String {
    let n = mistakes.len();
    let lines: Vec<String> = mistakes
        .iter()
        .map(|m| format!("{}: {m}", path.display()))
        .collect();
    format!(
        "{n} mistake{}\n{}",
        if n == 1 { "" } else { "s" },
        lines.join("\n")
    )
}

/// A profile made from flags, with what was chosen for the fields no flag
/// gave.
#[derive(Debug, Clone)]
pub struct Defaulted {
    pub profile: Profile,
    /// `field: value (why)`, one per defaulted field.
    pub defaults: Vec<String>,
}

impl fmt::Display for Defaulted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "driver {} with DeviceClass {}; defaulted:",
            self.profile.driver_name,
            match &self.profile.device_class {
                DeviceClass::Existing(c) | DeviceClass::Selector(c) => c,
            }
        )?;
        for d in &self.defaults {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

impl Profile {
    /// Reads and checks a profile file; relative paths in it are relative
    /// to its directory.
    pub fn load(path: &Path, options: Options) -> Result<Profile, ProfileError> {
        let src = std::fs::read_to_string(path).map_err(|error| ProfileError::Read {
            path: path.to_owned(),
            error,
        })?;
        parse_str(&src, path, options).map_err(|mistakes| ProfileError::Mistakes {
            path: path.to_owned(),
            mistakes,
        })
    }

    /// KEP-5970's invocation, `--driver-name NAME --device-class CLASS`: a
    /// driver already installed in the kubeconfig cluster, everything else
    /// defaulted.
    pub fn from_flags(driver_name: &str, device_class: &str) -> Result<Defaulted, ProfileError> {
        let flag = |flag, value: &str, reason| ProfileError::Flag {
            flag,
            value: value.to_owned(),
            reason,
        };
        if let Some(p) = names::dns_subdomain_problem(driver_name, 63) {
            return Err(flag(
                "driver-name",
                driver_name,
                format!("not a DRA driver name: {p}"),
            ));
        }
        if let Some(p) = names::dns_subdomain_problem(device_class, 253) {
            return Err(flag(
                "device-class",
                device_class,
                format!("not a DeviceClass name: {p}"),
            ));
        }
        let profile = Profile {
            driver_name: driver_name.to_owned(),
            device_class: DeviceClass::Existing(device_class.to_owned()),
            deployment: Deployment::Installed,
            registration_dir: None,
            device_count: None,
            capabilities: BTreeSet::new(),
            container_check: ContainerCheck::any_injected_env(),
            faults: BTreeSet::new(),
            devices_per_node: None,
            file: None,
        };
        let defaults = vec![
            "deployment.mode: Installed (the driver runs in the kubeconfig cluster already; \
             the suite installs nothing)"
                .to_owned(),
            "registrationDir: not set (nothing can be put between the kubelet and the driver)"
                .to_owned(),
            "capabilities: none (scenarios needing an optional capability are skipped)".to_owned(),
            "containerCheck.env: \"*\" (a container got its device when it has a variable \
             its pod spec does not set)"
                .to_owned(),
            "devicesPerNode: not set (scenarios using every device of a node are skipped)"
                .to_owned(),
        ];
        Ok(Defaulted { profile, defaults })
    }

    /// The profile as a profile file, which `parse_str` reads back to the
    /// same profile (with paths made absolute).
    pub fn to_yaml(&self) -> String {
        self.to_annotated_yaml(&Annotations::default())
    }

    /// The profile as a profile file with comments: `header` on top, each
    /// note above its field, and the fields `to_fill` names written
    /// commented out (what uncommenting them gives is a valid field). What
    /// `profile show` and `profile init` print; without annotations it is
    /// [`Profile::to_yaml`].
    pub fn to_annotated_yaml(&self, annotations: &Annotations) -> String {
        let mut out = String::new();
        // First, where the YAML language server looks for it.
        if let Some(r) = &annotations.schema {
            out.push_str(&schema::comment(r));
            out.push('\n');
        }
        for h in &annotations.header {
            comment(&mut out, 0, h);
        }
        for (key, lines) in self.blocks() {
            let notes: Vec<&String> = annotations
                .notes
                .iter()
                .filter(|(k, _)| *k == key)
                .flat_map(|(_, n)| n)
                .collect();
            if !notes.is_empty() {
                if !out.is_empty() {
                    out.push('\n');
                }
                for n in notes {
                    match annotations.width {
                        Some(w) => {
                            for l in wrap(n, w.saturating_sub(2)) {
                                comment(&mut out, 0, &l);
                            }
                        }
                        None => comment(&mut out, 0, n),
                    }
                }
            }
            let commented = annotations.to_fill.contains(&key);
            for l in lines {
                if commented {
                    out.push_str("# ");
                }
                out.push_str(&l);
                out.push('\n');
            }
        }
        out
    }

    /// The profile's top-level fields in the file's order, each with its
    /// lines (none for a field that is not set).
    fn blocks(&self) -> Vec<(&'static str, Vec<String>)> {
        let list =
            |out: &mut Vec<String>, indent: usize, items: &mut dyn Iterator<Item = String>| {
                for item in items {
                    out.push(format!("{}- {}", " ".repeat(indent), scalar(&item)));
                }
            };
        let paths =
            |p: &[PathBuf]| -> Vec<String> { p.iter().map(|p| p.display().to_string()).collect() };
        let mut blocks = Vec::new();
        blocks.push((
            "driverName",
            vec![format!("driverName: {}", scalar(&self.driver_name))],
        ));
        blocks.push((
            "deviceClass",
            vec![
                "deviceClass:".to_owned(),
                match &self.device_class {
                    DeviceClass::Existing(n) => format!("  name: {}", scalar(n)),
                    DeviceClass::Selector(s) => format!("  selector: {}", scalar(s)),
                },
            ],
        ));
        let mut d = vec![
            "deployment:".to_owned(),
            format!("  mode: {}", self.deployment.mode()),
        ];
        match &self.deployment {
            Deployment::Builtin | Deployment::Installed => {}
            Deployment::RealNodes {
                manifests,
                image_archives,
            } => {
                d.push("  manifests:".to_owned());
                list(&mut d, 4, &mut paths(manifests).into_iter());
                if !image_archives.is_empty() {
                    d.push("  imageArchives:".to_owned());
                    list(&mut d, 4, &mut paths(image_archives).into_iter());
                }
            }
            Deployment::Manifests { manifests } => {
                d.push("  manifests:".to_owned());
                list(&mut d, 4, &mut paths(manifests).into_iter());
            }
            Deployment::SimulatedNodes { command } => {
                d.push("  command:".to_owned());
                list(&mut d, 4, &mut command.iter().cloned());
            }
        }
        if !self.faults.is_empty() {
            d.push("  faults:".to_owned());
            list(
                &mut d,
                4,
                &mut self.faults.iter().map(|f| f.name().to_owned()),
            );
        }
        blocks.push(("deployment", d));
        for (field, setting) in [
            ("registrationDir", &self.registration_dir),
            ("deviceCount", &self.device_count),
        ] {
            let lines = match setting {
                Some(Setting::Flag(f)) => {
                    vec![format!("{field}:"), format!("  flag: {}", scalar(f))]
                }
                Some(Setting::Env(e)) => vec![format!("{field}:"), format!("  env: {}", scalar(e))],
                None => Vec::new(),
            };
            blocks.push((field, lines));
        }
        let mut c = Vec::new();
        if self.capabilities.is_empty() {
            c.push("capabilities: []".to_owned());
        } else {
            c.push("capabilities:".to_owned());
            list(
                &mut c,
                2,
                &mut self.capabilities.iter().map(|c| c.name().to_owned()),
            );
        }
        blocks.push(("capabilities", c));
        let mut c = vec!["containerCheck:".to_owned()];
        if !self.container_check.env.is_empty() {
            c.push("  env:".to_owned());
            list(
                &mut c,
                4,
                &mut self.container_check.env.iter().map(|e| e.0.clone()),
            );
        }
        if !self.container_check.command.is_empty() {
            c.push("  command:".to_owned());
            list(&mut c, 4, &mut self.container_check.command.iter().cloned());
        }
        blocks.push(("containerCheck", c));
        blocks.push((
            "devicesPerNode",
            self.devices_per_node
                .map(|n| vec![format!("devicesPerNode: {n}")])
                .unwrap_or_default(),
        ));
        blocks
    }
}

/// Comments for [`Profile::to_annotated_yaml`]; fields are named as in the
/// file (`registrationDir`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations {
    /// The JSON Schema that the first line names for editors (a path
    /// relative to the file, or a URL; [`schema::comment`]); none when
    /// `None`.
    pub schema: Option<String>,
    /// Comment lines on top of the file (below the schema's).
    pub header: Vec<String>,
    /// Comment lines above a top-level field (also when it is not set).
    pub notes: Vec<(&'static str, Vec<String>)>,
    /// Top-level fields written commented out, for the user to fill in.
    pub to_fill: Vec<&'static str>,
    /// The notes' lines wrapped at this many columns (`None`: as given).
    pub width: Option<usize>,
}

/// `text` in lines of at most `width` characters where its words allow,
/// continued lines indented as the first.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let indent: String = text.chars().take_while(|c| *c == ' ').collect();
    let mut lines = Vec::new();
    let mut line = indent.clone();
    for word in text.split_whitespace() {
        if line.len() > indent.len() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::replace(&mut line, indent.clone()));
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// `text` as a comment line (`#` alone for an empty one).
fn comment(out: &mut String, indent: usize, text: &str) {
    out.push_str(&" ".repeat(indent));
    out.push('#');
    if !text.is_empty() {
        out.push(' ');
        out.push_str(text);
    }
    out.push('\n');
}

/// A string as a YAML scalar, quoted where YAML would read it otherwise.
fn scalar(s: &str) -> String {
    serde_saphyr::to_string(&s.to_owned())
        .map(|t| t.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| format!("{s:?}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_setting_replaces_its_earlier_value_or_is_added() {
        let flag = Setting::Flag("--num-devices".into());
        let mut argv = vec![
            "drv".to_owned(),
            "--num-devices=4".to_owned(),
            "-v".to_owned(),
        ];
        let mut env = Vec::new();
        flag.apply(&mut argv, &mut env, "3");
        assert_eq!(argv, ["drv", "--num-devices=3", "-v"]);
        let mut bare = vec!["drv".to_owned()];
        flag.apply(&mut bare, &mut env, "2");
        assert_eq!(bare, ["drv", "--num-devices=2"]);
        assert!(env.is_empty());
        let var = Setting::Env("NUM_DEVICES".into());
        let mut env = vec![("NUM_DEVICES".to_owned(), "4".to_owned())];
        var.apply(&mut bare, &mut env, "3");
        var.apply(&mut bare, &mut Vec::new(), "1");
        assert_eq!(env, [("NUM_DEVICES".to_owned(), "3".to_owned())]);
        assert_eq!(bare, ["drv", "--num-devices=2"]);
    }

    use super::*;

    #[test]
    fn the_builtin_profile_parses_and_offers_the_packs_devices() {
        let p = builtin();
        assert_eq!(p.deployment, Deployment::Builtin);
        assert!(p.faults.is_empty());
        assert_eq!(p.devices_per_node, Some(4));
        assert!(p.capabilities.contains(&Capability::DeviceHealth));
    }

    #[test]
    fn env_patterns_per_claim() {
        let p = EnvPattern::new("claim_${claim}_${request}=true");
        assert!(p.per_claim());
        assert!(!EnvPattern::new("claim_*=true").per_claim());
        let e = p.expand("tester-1-my.claim", "req-0");
        assert_eq!(e.as_str(), "claim_tester_1_my_claim_req_0=true");
        assert!(e.matches("claim_tester_1_my_claim_req_0", "true"));
        assert!(!e.matches("claim_other_req_0", "true"));
        let v = EnvPattern::new("DEVICE_${request}=${claim}").expand("c-1", "r");
        assert_eq!(v.as_str(), "DEVICE_r=c-1");
    }

    #[test]
    fn env_patterns() {
        let p = EnvPattern::new("claim_*=true");
        assert!(p.matches("claim_pod_req", "true"));
        assert!(!p.matches("claim_pod_req", "false"));
        assert!(!p.matches("user_a", "true"));
        assert!(EnvPattern::new("*").matches("ANY", ""));
        assert!(EnvPattern::new("user_*").matches("user_a", "b"));
        assert!(EnvPattern::new("a*b*c").matches("aXbYc", "v"));
        assert!(!EnvPattern::new("a*b*c").matches("aXcYb", "v"));
        assert!(!EnvPattern::new("ab*b").matches("ab", "v"));
        assert!(EnvPattern::new("NVIDIA_VISIBLE_DEVICES").matches("NVIDIA_VISIBLE_DEVICES", "0"));
    }

    #[test]
    fn flags_make_an_installed_driver_and_say_what_was_defaulted() {
        let d = Profile::from_flags("gpu.example.com", "gpu.example.com").unwrap();
        assert_eq!(d.profile.deployment, Deployment::Installed);
        assert_eq!(
            d.profile.device_class,
            DeviceClass::Existing("gpu.example.com".into())
        );
        assert!(d.profile.capabilities.is_empty());
        let shown = d.to_string();
        assert!(shown.starts_with("driver gpu.example.com with DeviceClass gpu.example.com; defaulted:\n  deployment.mode: Installed"), "{shown}");
        assert_eq!(shown.lines().count(), 6, "{shown}");
        let e = Profile::from_flags("GPU", "c").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--driver-name `GPU`: not a DRA driver name: contains `G`: only lower-case letters, \
             digits, `-` and `.` are allowed (use lower case)"
        );
    }

    #[test]
    fn yaml_reads_back_to_the_same_profile() {
        let d = Profile::from_flags("gpu.example.com", "gpu").unwrap();
        let yaml = d.profile.to_yaml();
        let back = parse_str(&yaml, Path::new("/p/x.yaml"), Options { check_files: true })
            .unwrap_or_else(|m| panic!("{m:?}\n{yaml}"));
        assert_eq!(
            back,
            Profile {
                file: Some("/p/x.yaml".into()),
                ..d.profile.clone()
            }
        );
        let full = Profile {
            driver_name: "d.example.com".into(),
            device_class: DeviceClass::Selector("device.driver == \"d.example.com\"".into()),
            deployment: Deployment::SimulatedNodes {
                command: vec![
                    "/bin/driver".into(),
                    "--node-name=${nodeName}".into(),
                    "--cdi-dir".into(),
                    "${cdiDir}".into(),
                ],
            },
            registration_dir: Some(Setting::Env("REG_DIR".into())),
            device_count: Some(Setting::Flag("--num-devices".into())),
            capabilities: [Capability::AdminAccess, Capability::OpaqueConfig].into(),
            container_check: ContainerCheck {
                env: vec![EnvPattern::new("*"), EnvPattern::new("user_*=yes")],
                command: Vec::new(),
            },
            faults: [Fault::FirstClaimOnly].into(),
            devices_per_node: Some(4),
            file: Some("/p/x.yaml".into()),
        };
        let yaml = full.to_yaml();
        let back = parse_str(
            &yaml,
            Path::new("/p/x.yaml"),
            Options { check_files: false },
        )
        .unwrap_or_else(|m| panic!("{m:?}\n{yaml}"));
        assert_eq!(back, full, "{yaml}");
        let manifests = Profile {
            deployment: Deployment::Manifests {
                manifests: vec!["/p/rbac.yaml".into(), "/d/plugin.yaml".into()],
            },
            registration_dir: Some(Setting::Flag("--reg".into())),
            ..full
        };
        let yaml = manifests.to_yaml();
        let back = parse_str(
            &yaml,
            Path::new("/p/x.yaml"),
            Options { check_files: false },
        )
        .unwrap_or_else(|m| panic!("{m:?}\n{yaml}"));
        assert_eq!(back, manifests, "{yaml}");
    }
}
