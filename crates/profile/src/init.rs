//! `dra-e2e profile init`: a driver profile read off the driver's rendered
//! manifests (`helm template` output). The kubelet plugin's DaemonSet and
//! the DeviceClass say most of it: the driver's name, its class, how it is
//! told its registration directory and its device count, where it writes
//! CDI specs, and which images the nodes need. What no manifest says
//! (capabilities, how a container shows its device) is written commented
//! out, with a hint, for the author to fill in.
use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::names::dns_subdomain_problem;
use super::{Annotations, Capability, ContainerCheck, Deployment, DeviceClass, Profile, Setting};

/// The kubelet's directory of registration sockets (under its default
/// root); a setting whose value holds it is the registration setting.
pub const PLUGINS_REGISTRY: &str = "/var/lib/kubelet/plugins_registry";
/// Where container runtimes read CDI specs.
const CDI_DIRS: &[&str] = &["/var/run/cdi", "/run/cdi", "/etc/cdi"];

/// One manifest file.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// As the profile names it (relative to the profile's directory).
    pub path: PathBuf,
    /// As the user gave it, for messages.
    pub shown: String,
    pub text: String,
}

/// One image archive and the image references it holds.
#[derive(Debug, Clone)]
pub struct Archive {
    /// As the profile names it (relative to the profile's directory).
    pub path: PathBuf,
    pub refs: Vec<String>,
}

/// What the user decided where the manifests leave a choice.
#[derive(Debug, Clone, Default)]
pub struct Choices {
    /// The kubelet plugin's DaemonSet, by name, when several look like one.
    pub daemonset: Option<String>,
    pub driver_name: Option<String>,
    pub device_class: Option<String>,
    /// The JSON Schema the profile's first line names for editors (a path
    /// relative to the profile, or a URL); no such line when `None`.
    pub schema: Option<String>,
}

/// The profile found, with its comments and what the user should know.
#[derive(Debug, Clone)]
pub struct Init {
    pub profile: Profile,
    pub annotations: Annotations,
    /// Said on stderr: what was not found, and what that means.
    pub warnings: Vec<String>,
}

/// Why no profile could be made, in terms of what the user gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitError(pub String);

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InitError {}

/// An object of the manifests and the file it is in.
struct Object<'m> {
    file: &'m str,
    kind: String,
    name: String,
    namespace: Option<String>,
    value: Value,
}

impl Object<'_> {
    /// `namespace/name` (or `name`) and its file, for messages.
    fn shown(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{} ({})", self.name, self.file),
            None => format!("{} ({})", self.name, self.file),
        }
    }

    fn pod_spec(&self) -> Option<&Value> {
        match self.kind.as_str() {
            "Pod" => self.value.get("spec"),
            "CronJob" => self.value.pointer("/spec/jobTemplate/spec/template/spec"),
            _ => self.value.pointer("/spec/template/spec"),
        }
    }
}

/// A container's settings: its arguments (command and args) as flags and
/// values, and its literal environment variables.
struct Container {
    name: String,
    flags: Vec<(String, String)>,
    env: Vec<(String, String)>,
}

impl Container {
    fn of(c: &Value) -> Container {
        let strings = |key: &str| -> Vec<String> {
            c.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut argv = strings("command");
        argv.extend(strings("args"));
        let mut flags = Vec::new();
        for (i, a) in argv.iter().enumerate() {
            if !a.starts_with('-') {
                continue;
            }
            match a.split_once('=') {
                Some((f, v)) => flags.push((f.to_owned(), v.to_owned())),
                // `--flag VALUE`, two arguments.
                None => {
                    if let Some(next) = argv.get(i + 1).filter(|n| !n.starts_with('-')) {
                        flags.push((a.clone(), next.clone()));
                    }
                }
            }
        }
        let env = c
            .get("env")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        Some((
                            e.get("name")?.as_str()?.to_owned(),
                            e.get("value")?.as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Container {
            name: c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            flags,
            env,
        }
    }

    /// Every flag and variable as a setting with its value.
    fn settings(&self) -> impl Iterator<Item = (Setting, &str)> {
        self.flags
            .iter()
            .map(|(f, v)| (Setting::Flag(f.clone()), v.as_str()))
            .chain(
                self.env
                    .iter()
                    .map(|(n, v)| (Setting::Env(n.clone()), v.as_str())),
            )
    }
}

/// A setting as the manifest shows it: `--flag=value` or `VAR=value`.
fn given(setting: &Setting, value: &str) -> String {
    match setting {
        Setting::Flag(f) => format!("{f}={value}"),
        Setting::Env(e) => format!("{e}={value}"),
    }
}

fn containers(spec: &Value, keys: &[&str]) -> Vec<Value> {
    keys.iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect()
}

/// The hostPath directories a pod spec mounts.
fn host_paths(spec: &Value) -> Vec<String> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.pointer("/hostPath/path")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn regex(cell: &'static OnceLock<Regex>, re: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(re).unwrap_or_else(|_| unreachable!()))
}

/// The driver a DeviceClass's CEL selectors name (`device.driver == "..."`).
fn class_driver(class: &Value) -> Option<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(&RE, r#"device\.driver\s*==\s*["']([^"']+)["']"#);
    class
        .pointer("/spec/selectors")?
        .as_array()?
        .iter()
        .filter_map(|s| s.pointer("/cel/expression")?.as_str())
        .find_map(|e| re.captures(e).map(|c| c[1].to_owned()))
}

fn is_device_count(name: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    regex(
        &RE,
        r"(?i)^-*(num[-_]?devices|n[-_]?devices|device[-_]?count|devices[-_]?per[-_]?node)$",
    )
    .is_match(name)
}

fn is_driver_name(name: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    regex(&RE, r"(?i)^-*(dra[-_]?)?driver[-_]?name$").is_match(name)
}

/// Whether a DaemonSet looks like a kubelet plugin: it mounts the
/// kubelet's plugin directories or names the registration directory.
fn looks_like_plugin(spec: &Value) -> bool {
    host_paths(spec)
        .iter()
        .any(|p| p.contains("plugins_registry") || p.contains("kubelet/plugins"))
        || containers(spec, &["containers"]).iter().any(|c| {
            Container::of(c)
                .settings()
                .any(|(_, v)| v.contains("plugins_registry"))
        })
}

fn files_text(manifests: &[Manifest]) -> String {
    manifests
        .iter()
        .map(|m| m.shown.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads the manifests and makes the profile of the driver they deploy on
/// the local cluster's real nodes.
pub fn init(
    manifests: &[Manifest],
    archives: &[Archive],
    choices: &Choices,
) -> Result<Init, InitError> {
    let mut objects = Vec::new();
    for m in manifests {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&m.text)
            .map_err(|e| InitError(format!("{}: not valid YAML: {e}", m.shown)))?;
        for value in docs {
            let text = |p: &str| value.pointer(p).and_then(Value::as_str).map(str::to_owned);
            let Some(kind) = text("/kind") else { continue };
            objects.push(Object {
                file: &m.shown,
                name: text("/metadata/name").unwrap_or_default(),
                namespace: text("/metadata/namespace"),
                kind,
                value,
            });
        }
    }
    let files = files_text(manifests);
    let mut warnings = Vec::new();

    // The kubelet plugin's DaemonSet.
    let sets: Vec<&Object> = objects.iter().filter(|o| o.kind == "DaemonSet").collect();
    let names = |sets: &[&Object]| -> String {
        sets.iter()
            .map(|o| o.shown())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ds = match &choices.daemonset {
        Some(want) => *sets.iter().find(|o| &o.name == want).ok_or_else(|| {
            InitError(format!(
                "--daemonset {want}: no DaemonSet of that name in {files} ({})",
                if sets.is_empty() {
                    "they hold none".to_owned()
                } else {
                    format!("they hold {}", names(&sets))
                }
            ))
        })?,
        None => {
            let plugins: Vec<&Object> = sets
                .iter()
                .copied()
                .filter(|o| o.pod_spec().is_some_and(looks_like_plugin))
                .collect();
            match (sets.as_slice(), plugins.as_slice()) {
                ([], _) => {
                    let kinds: BTreeSet<&str> = objects.iter().map(|o| o.kind.as_str()).collect();
                    return Err(InitError(format!(
                        "no DaemonSet in {files}: a DRA driver's kubelet plugin runs as a \
                         DaemonSet on every node, and profile init reads the driver's settings \
                         from it ({}); give the file that holds it too",
                        if kinds.is_empty() {
                            "the files hold no Kubernetes object".to_owned()
                        } else {
                            format!(
                                "found only {}",
                                kinds.into_iter().collect::<Vec<_>>().join(", ")
                            )
                        }
                    )));
                }
                ([one], _) | (_, [one]) => *one,
                (_, []) => {
                    return Err(InitError(format!(
                        "{} DaemonSets in {files} and none looks like a kubelet plugin (none \
                         mounts the kubelet's plugin directories): {}; say which one runs the \
                         driver with --daemonset NAME",
                        sets.len(),
                        names(&sets)
                    )));
                }
                (_, several) => {
                    return Err(InitError(format!(
                        "{} DaemonSets in {files} look like kubelet plugins (they mount the \
                         kubelet's plugin directories): {}; say which one runs the driver with \
                         --daemonset NAME",
                        several.len(),
                        names(several)
                    )));
                }
            }
        }
    };
    let spec = ds.pod_spec().cloned().unwrap_or(Value::Null);
    let ds_shown = format!("DaemonSet {}", ds.shown());
    let mut plugin_containers: Vec<Container> = containers(&spec, &["containers"])
        .iter()
        .map(Container::of)
        .collect();
    // Notes name the container a setting is in only when there is a choice.
    if let [one] = plugin_containers.as_mut_slice() {
        one.name.clear();
    }
    let mounts = host_paths(&spec);

    // Registration: a setting whose value names plugins_registry.
    let registration = plugin_containers.iter().find_map(|c| {
        c.settings()
            .find(|(_, v)| v.contains("plugins_registry"))
            .map(|(s, v)| {
                let shown = given_in(c, &s, v);
                (s, shown)
            })
    });
    let registry_mounted = mounts.iter().any(|p| p.ends_with("/plugins_registry"));
    let registration_note = match &registration {
        Some((_, shown)) => vec![format!(
            "{shown}: the runner passes its own directory this way to sit between the kubelet \
             and the driver (--interpose)."
        )],
        None if registry_mounted => {
            warnings.push(format!(
                "{ds_shown}: no registration setting found (looked for a container argument \
                 or environment variable whose value is or contains {PLUGINS_REGISTRY}); the \
                 driver then must use the default path, which the DaemonSet mounts: the profile \
                 has no registrationDir, and the runner points that volume elsewhere to interpose"
            ));
            vec![format!(
                "Not set: no container argument or variable of the DaemonSet names \
                 {PLUGINS_REGISTRY}, so the driver uses the default path; add `flag:` or \
                 `env:` here if it has a setting for it."
            )]
        }
        None => {
            return Err(InitError(format!(
                "{ds_shown}: no registration setting found: looked for a container argument \
                 (--FLAG=DIR or --FLAG DIR) or environment variable whose value is or contains \
                 {PLUGINS_REGISTRY}, and for a hostPath volume of that directory. The driver \
                 then must use the default path, which the DaemonSet does not mount by itself; \
                 add the flag or variable that sets it to the DaemonSet, or mount {PLUGINS_REGISTRY} \
                 as its own hostPath volume"
            )));
        }
    };

    // The CDI directory: a hostPath of a runtime's CDI directory, and the
    // setting naming it.
    let cdi_mount = mounts
        .iter()
        .find(|p| CDI_DIRS.iter().any(|d| p.trim_end_matches('/') == *d))
        .cloned();
    let cdi_setting = cdi_mount.as_ref().and_then(|dir| {
        plugin_containers.iter().find_map(|c| {
            c.settings()
                .find(|(_, v)| v.trim_end_matches('/') == dir.trim_end_matches('/'))
                .map(|(s, v)| given_in(c, &s, v))
        })
    });
    let cdi = match (&cdi_mount, &cdi_setting) {
        (Some(d), Some(s)) => format!("CDI specs: hostPath {d}, named by {s}"),
        (Some(d), None) => format!("CDI specs: hostPath {d} (no setting of the driver names it)"),
        (None, _) => {
            warnings.push(format!(
                "{ds_shown}: no hostPath volume of {}: a driver's CDI specs must be where the \
                 container runtime reads them",
                CDI_DIRS.join(" or ")
            ));
            format!("CDI specs: no hostPath of {} found", CDI_DIRS.join(" or "))
        }
    };

    // The device count.
    let device_count = plugin_containers.iter().find_map(|c| {
        c.settings().find_map(|(s, v)| {
            let name = match &s {
                Setting::Flag(f) | Setting::Env(f) => f.clone(),
            };
            let n: u32 = v.trim().parse().ok().filter(|n| *n >= 1)?;
            is_device_count(&name).then(|| (s.clone(), n, given_in(c, &s, v)))
        })
    });

    // The driver and its class.
    let classes: Vec<(&Object, Option<String>)> = objects
        .iter()
        .filter(|o| o.kind == "DeviceClass")
        .map(|o| (o, class_driver(&o.value)))
        .collect();
    let from_daemonset = || -> Option<(String, String)> {
        plugin_containers
            .iter()
            .find_map(|c| {
                c.settings()
                    .find(|(s, v)| {
                        let (Setting::Flag(n) | Setting::Env(n)) = s;
                        is_driver_name(n) && dns_subdomain_problem(v, 63).is_none()
                    })
                    .map(|(s, v)| (v.to_owned(), format!("{ds_shown}: {}", given_in(c, &s, v))))
            })
            .or_else(|| {
                mounts.iter().find_map(|p| {
                    let (_, last) = p.trim_end_matches('/').rsplit_once("/kubelet/plugins/")?;
                    (last.contains('.') && dns_subdomain_problem(last, 63).is_none()).then(|| {
                        (
                            last.to_owned(),
                            format!("{ds_shown}: its hostPath volume {p}"),
                        )
                    })
                })
            })
    };
    let chosen_class = choices
        .device_class
        .as_ref()
        .and_then(|want| classes.iter().find(|(o, _)| &o.name == want));
    let (driver, driver_from) = match (&choices.driver_name, chosen_class) {
        (Some(d), _) => (d.clone(), "--driver-name".to_owned()),
        (None, Some((o, Some(d)))) => (
            d.clone(),
            format!("the selector of DeviceClass {}", o.shown()),
        ),
        _ => {
            let named: BTreeSet<&String> = classes.iter().filter_map(|(_, d)| d.as_ref()).collect();
            match named.into_iter().collect::<Vec<_>>().as_slice() {
                [one] => {
                    let (o, _) = classes
                        .iter()
                        .find(|(_, d)| d.as_ref() == Some(*one))
                        .unwrap_or_else(|| unreachable!());
                    (
                        (*one).clone(),
                        format!("the selector of DeviceClass {}", o.shown()),
                    )
                }
                [] => from_daemonset().ok_or_else(|| {
                    InitError(format!(
                        "no DeviceClass in {files} names the driver (a CEL selector \
                         `device.driver == \"...\"`), and nothing in {ds_shown} does (looked for \
                         a --driver-name argument or DRIVER_NAME variable, and a hostPath \
                         volume /var/lib/kubelet/plugins/<driver>): give the driver's name with \
                         --driver-name NAME"
                    ))
                })?,
                several => {
                    return Err(InitError(format!(
                        "the DeviceClasses in {files} select devices of several drivers ({}): \
                         say which is under test with --driver-name NAME",
                        several
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
    };
    if let Some(p) = dns_subdomain_problem(&driver, 63) {
        return Err(InitError(format!(
            "driver name `{driver}` (from {driver_from}) is not a DRA driver name: {p}"
        )));
    }
    let of_driver: Vec<&Object> = classes
        .iter()
        .filter(|(_, d)| d.as_deref() == Some(driver.as_str()))
        .map(|(o, _)| *o)
        .collect();
    let (device_class, class_note) = match &choices.device_class {
        Some(c) => (
            DeviceClass::Existing(c.clone()),
            format!("--device-class {c}."),
        ),
        None => match of_driver
            .iter()
            .find(|o| o.name == driver)
            .or(of_driver.first())
        {
            Some(o) => {
                let others: Vec<&str> = of_driver
                    .iter()
                    .filter(|x| x.name != o.name)
                    .map(|x| x.name.as_str())
                    .collect();
                (
                    DeviceClass::Existing(o.name.clone()),
                    if others.is_empty() {
                        format!("DeviceClass {}.", o.shown())
                    } else {
                        format!(
                            "DeviceClass {}; the manifests have {} too (--device-class picks \
                             another).",
                            o.shown(),
                            others.join(", ")
                        )
                    },
                )
            }
            None => (
                DeviceClass::Selector(format!("device.driver == \"{driver}\"")),
                "No DeviceClass of the driver in the manifests: the runner creates one with \
                 this selector."
                    .to_owned(),
            ),
        },
    };

    // Images: every container's of every workload, and whether an
    // archive holds it.
    let mut images = BTreeSet::new();
    for o in &objects {
        if let Some(spec) = o.pod_spec() {
            for c in containers(spec, &["initContainers", "containers"]) {
                if let Some(i) = c.get("image").and_then(Value::as_str) {
                    images.insert(i.to_owned());
                }
            }
        }
    }
    let mut deployment_note = vec![
        "On the local cluster's real nodes (--node-kind real); paths are relative to this \
         file."
            .to_owned(),
    ];
    if archives.is_empty() {
        deployment_note.push(format!(
            "Real local nodes pull nothing: each node must be able to get these images, so \
             list their archives as deployment.imageArchives (or pass the run's \
             --image-archive): {}.",
            images.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    } else {
        let missing: Vec<&String> = images
            .iter()
            .filter(|i| !archives.iter().any(|a| a.refs.contains(i)))
            .collect();
        deployment_note.push(format!(
            "The image archives hold {}.",
            images
                .iter()
                .filter(|i| !missing.contains(i))
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if !missing.is_empty() {
            let list = missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            warnings.push(format!(
                "no --image-archive holds {list}, which the manifests name: real local nodes \
                 pull nothing, so add their archives"
            ));
            deployment_note.push(format!("No archive holds {list}: add theirs."));
        }
    }

    let (count_note, per_node_note) = match &device_count {
        Some((_, _, shown)) => (
            vec![format!(
                "{shown} in the DaemonSet: the runner changes it to make a device go away."
            )],
            vec![format!("From {shown}.")],
        ),
        None => {
            warnings.push(format!(
                "{ds_shown}: no device count found (looked for an argument like --num-devices=N \
                 or a variable like NUM_DEVICES): set devicesPerNode and deviceCount by hand, \
                 or scenarios tagged @DevicesPerNode and @DeviceCount are skipped"
            ));
            (
                vec![
                    "Not found: the flag (`flag: --num-devices`) or variable (`env:`) that \
                     tells the driver how many devices to offer; without it @DeviceCount is \
                     skipped."
                        .to_owned(),
                ],
                vec![
                    "Not found: how many devices each node offers (`devicesPerNode: N`); \
                     without it @DevicesPerNode is skipped."
                        .to_owned(),
                ],
            )
        }
    };

    let capability_names: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
    let profile = Profile {
        driver_name: driver.clone(),
        device_class,
        deployment: Deployment::RealNodes {
            manifests: manifests.iter().map(|m| m.path.clone()).collect(),
            image_archives: archives.iter().map(|a| a.path.clone()).collect(),
        },
        registration_dir: registration.as_ref().map(|(s, _)| s.clone()),
        device_count: device_count.as_ref().map(|(s, _, _)| s.clone()),
        capabilities: BTreeSet::new(),
        container_check: ContainerCheck::any_injected_env(),
        faults: BTreeSet::new(),
        devices_per_node: device_count.as_ref().map(|(_, n, _)| *n),
        file: None,
    };
    let mut header = vec![
        format!(
            "Written by `dra-e2e profile init` from {files}; docs/driver-profile.md explains \
             every field. Read off the manifests:"
        ),
        format!("  the kubelet plugin: {ds_shown}"),
        format!("  {cdi}"),
        format!(
            "  images: {}",
            images.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
        "Fill in what they cannot say (the commented fields), then check it with `dra-e2e \
         profile check FILE`."
            .to_owned(),
    ];
    if images.is_empty() {
        header.remove(3);
    }
    let header = header.iter().flat_map(|h| wrap_note(h)).collect();
    let annotations = Annotations {
        schema: choices.schema.clone(),
        header,
        notes: vec![
            ("driverName", vec![format!("From {driver_from}.")]),
            ("deviceClass", vec![class_note]),
            ("deployment", deployment_note),
            ("registrationDir", registration_note),
            ("deviceCount", count_note),
            (
                "capabilities",
                vec![format!(
                    "Fill in: the optional behaviours the driver claims (scenarios needing one \
                     it does not claim are skipped), any of {}.",
                    capability_names.join(", ")
                )],
            ),
            (
                "containerCheck",
                vec![
                    "Fill in: how a container shows it got its device, e.g. a variable the \
                     driver's CDI spec sets (`env: [\"NAME=VALUE\"]`); left out, any variable \
                     its pod spec does not set."
                        .to_owned(),
                ],
            ),
            ("devicesPerNode", per_node_note),
        ],
        to_fill: vec!["capabilities", "containerCheck"],
        width: Some(78),
    };
    Ok(Init {
        profile,
        annotations,
        warnings,
    })
}

/// A header line wrapped as the notes are.
fn wrap_note(text: &str) -> Vec<String> {
    super::wrap(text, 76)
}

/// How a container gives a setting, for notes: `--flag=value (container
/// c)`.
fn given_in(c: &Container, s: &Setting, v: &str) -> String {
    if c.name.is_empty() {
        given(s, v)
    } else {
        format!("{} (container {})", given(s, v), c.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Vec<Manifest> {
        vec![Manifest {
            path: "m.yaml".into(),
            shown: "m.yaml".into(),
            text: text.to_owned(),
        }]
    }

    /// A driver told everything through variables, the registration
    /// directory as a separate argument elsewhere: both forms are found.
    const ENV_DRIVER: &str = "\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: plugin, namespace: d}
spec:
  template:
    spec:
      containers:
        - name: plugin
          image: example.com/gpu:v1
          env:
            - {name: DRIVER_NAME, value: gpu.example.com}
            - {name: KUBELET_REGISTRAR_DIRECTORY_PATH, value: /var/lib/kubelet/plugins_registry}
            - {name: NUM_DEVICES, value: \"8\"}
            - {name: CDI_ROOT, value: /etc/cdi}
      volumes:
        - {name: r, hostPath: {path: /var/lib/kubelet/plugins_registry}}
        - {name: c, hostPath: {path: /etc/cdi}}
";

    #[test]
    fn settings_in_variables_and_the_driver_name_without_a_class() {
        let made = init(&manifest(ENV_DRIVER), &[], &Choices::default()).unwrap();
        let p = &made.profile;
        assert_eq!(p.driver_name, "gpu.example.com");
        assert_eq!(
            p.device_class,
            DeviceClass::Selector("device.driver == \"gpu.example.com\"".into())
        );
        assert_eq!(
            p.registration_dir,
            Some(Setting::Env("KUBELET_REGISTRAR_DIRECTORY_PATH".into()))
        );
        assert_eq!(p.device_count, Some(Setting::Env("NUM_DEVICES".into())));
        assert_eq!(p.devices_per_node, Some(8));
        assert!(made.warnings.is_empty(), "{:?}", made.warnings);
        let text = p.to_annotated_yaml(&made.annotations);
        assert!(
            text.contains("#   CDI specs: hostPath /etc/cdi, named by CDI_ROOT=/etc/cdi\n"),
            "{text}"
        );
        assert!(text.contains("example.com/gpu:v1"), "{text}");
        let back = crate::parse_str(
            &text,
            std::path::Path::new("/p/x.yaml"),
            crate::Options { check_files: false },
        )
        .unwrap_or_else(|m| panic!("{m:?}\n{text}"));
        assert_eq!(back.driver_name, p.driver_name);
    }

    #[test]
    fn a_flag_and_its_value_as_two_arguments() {
        let two = ENV_DRIVER.replace(
            "          env:\n",
            "          args: [--registrar, /var/lib/kubelet/plugins_registry, --num-devices, \"2\"]\n          env:\n",
        )
        .replace("KUBELET_REGISTRAR_DIRECTORY_PATH", "OTHER")
        .replace("/var/lib/kubelet/plugins_registry}", "/x}")
        .replace("NUM_DEVICES", "N");
        let made = init(&manifest(&two), &[], &Choices::default()).unwrap();
        assert_eq!(
            made.profile.registration_dir,
            Some(Setting::Flag("--registrar".into()))
        );
        assert_eq!(
            made.profile.device_count,
            Some(Setting::Flag("--num-devices".into()))
        );
    }

    #[test]
    fn no_driver_name_anywhere_asks_for_it() {
        let nameless = ENV_DRIVER.replace("DRIVER_NAME", "OTHER");
        let e = init(&manifest(&nameless), &[], &Choices::default()).unwrap_err();
        assert!(
            e.0.starts_with("no DeviceClass in m.yaml names the driver"),
            "{e}"
        );
        assert!(
            e.0.ends_with("give the driver's name with --driver-name NAME"),
            "{e}"
        );
        let made = init(
            &manifest(&nameless),
            &[],
            &Choices {
                driver_name: Some("x.example.com".into()),
                ..Choices::default()
            },
        )
        .unwrap();
        assert_eq!(made.profile.driver_name, "x.example.com");
    }
}
