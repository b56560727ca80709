//! Reading a profile file: the YAML tree walked field by field, every
//! mistake collected with its line and field path, then the settings that
//! parse but do not fit together.
//!
//! Which keys a mapping has, and what kind of value each takes, is not
//! written here but in [`super::shape`], from which the JSON Schema is
//! generated too: fields are taken by their key there, a mapping's kind
//! says its shape, and keys it does not list are unknown.
mod deployment;
mod fields;
mod sections;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::names::dns_subdomain_problem;
use super::shape::{self, Kind};
use super::yaml::{self, Node, Value, describe, line};
use super::{
    ContainerCheck, Deployment, DeviceClass, Mistake, Mode, NAMESPACE_PLACEHOLDER, Profile,
};
use deployment::{deployment, modes_text};
use fields::Ctx;
use sections::{capabilities, container_check, device_class, setting};

/// How thoroughly to check.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Whether the files a profile names (manifests, image archives, a
    /// command given by path) must exist. Off for a profile whose files a
    /// build has yet to produce.
    pub check_files: bool,
}

/// Parses and checks profile text read from `file` (whose directory
/// relative paths are relative to); every mistake, sorted by line.
pub fn parse_str(src: &str, file: &Path, options: Options) -> Result<Profile, Vec<Mistake>> {
    let root = match yaml::parse(src) {
        Ok(root) => root,
        Err(e) => {
            return Err(vec![Mistake {
                line: e.line,
                field: None,
                message: format!("not valid YAML: {}", e.message),
            }]);
        }
    };
    let mut ctx = Ctx {
        src,
        // Absolute, so that the paths in the profile (and in messages
        // about them) do not depend on where the runner is started later.
        dir: profile_dir(file),
        options,
        mistakes: Vec::new(),
    };
    let profile = read(&mut ctx, &root, file);
    let mut mistakes = ctx.mistakes;
    // Sorting is stable: mistakes on one line keep the order of the walk.
    mistakes.sort_by_key(|m| m.line);
    match profile {
        Some(p) if mistakes.is_empty() => Ok(p),
        // Every way to no profile reports why; this keeps a rule that
        // forgot from passing a broken profile as a clean one.
        None if mistakes.is_empty() => Err(vec![Mistake {
            line: 1,
            field: None,
            message: "the profile could not be read (no reason was recorded: a bug in dra-e2e)"
                .to_owned(),
        }]),
        _ => Err(mistakes),
    }
}

fn profile_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => {
            std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
        }
        _ => std::env::current_dir().unwrap_or_default(),
    }
}

fn placeholders() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\$\{([^}]*)\}").unwrap_or_else(|_| unreachable!()))
}

/// A name's problem as a DNS subdomain, `${namespace}` standing for a
/// namespace name (whether it may be there is checked apart).
fn name_problem(name: &str, max: usize) -> Option<String> {
    // A namespace of the suite's own runs, as long as they get.
    let filled = name.replace(NAMESPACE_PLACEHOLDER, "dra-e2e-abcde");
    dns_subdomain_problem(&filled, max)
}

fn read(ctx: &mut Ctx, root: &Node, file: &Path) -> Option<Profile> {
    if let Value::Null = root.value {
        ctx.mistakes.push(Mistake {
            line: 1,
            field: None,
            message: "the profile is empty; it needs at least driverName, deviceClass and \
                      deployment"
                .to_owned(),
        });
        return None;
    }
    let Value::Map(_) = root.value else {
        let found = describe(ctx.src, root);
        ctx.mistakes.push(Mistake {
            line: line(root),
            field: None,
            message: format!("expected a mapping of the profile's fields, found {found}"),
        });
        return None;
    };
    let mut m = ctx.map(root, "", line(root), &shape::PROFILE)?;

    let driver = m
        .required(
            ctx,
            "driverName",
            "the DRA driver's name, e.g. gpu.example.com",
        )
        .and_then(|f| ctx.text(&f).map(|s| (s, f)));
    let class = m
        .required(
            ctx,
            "deviceClass",
            "the DeviceClass to use: `name` of an existing one or a CEL `selector`",
        )
        .and_then(|f| device_class(ctx, &f));
    let deployment = m
        .required(
            ctx,
            "deployment",
            &format!("where the driver runs: `mode` {}", modes_text()),
        )
        .and_then(|f| deployment(ctx, &f));
    let registration = m
        .take("registrationDir")
        .and_then(|f| setting(ctx, &f, "--plugin-registration-path"));
    let device_count = m
        .take("deviceCount")
        .and_then(|f| setting(ctx, &f, "--num-devices"));
    let capabilities = m
        .take("capabilities")
        .and_then(|f| capabilities(ctx, &f))
        .unwrap_or_default();
    let check = match m.take("containerCheck") {
        Some(f) => container_check(ctx, &f),
        None => Some((ContainerCheck::any_injected_env(), None)),
    };
    let devices = m.take("devicesPerNode").and_then(|f| match &f.node.value {
        _ if !matches!(f.spec.kind, Kind::Count) => {
            ctx.bug(&f, "a whole number");
            None
        }
        Value::Int(n) if *n >= 1 => match u32::try_from(*n) {
            Ok(n) => Some((n, f.line, f.path)),
            Err(_) => {
                ctx.mistake(line(f.node), &f.path, format!("{n} is too large"));
                None
            }
        },
        Value::Int(n) => {
            ctx.mistake(
                line(f.node),
                &f.path,
                format!("must be at least 1, not {n}"),
            );
            None
        }
        _ => {
            ctx.expected(f.node, &f.path, f.spec.kind.what());
            None
        }
    });
    m.finish(ctx);

    // What parses but does not fit together. Each rule needs the mode; a
    // mode that did not parse was reported already.
    let mode = deployment.as_ref().map(|(d, _, _)| d.mode());
    let builtin_only = |ctx: &mut Ctx, value: &str, l: u64, path: &str| {
        if value.contains(NAMESPACE_PLACEHOLDER) && mode.is_some_and(|m| m != Mode::Builtin) {
            ctx.mistake(
                l,
                path,
                format!(
                    "`{NAMESPACE_PLACEHOLDER}` is only for deployment.mode Builtin, whose \
                     drivers the suite names per scenario"
                ),
            );
            true
        } else {
            false
        }
    };
    if let Some((name, f)) = &driver {
        let l = line(f.node);
        if !builtin_only(ctx, name, l, &f.path)
            && let Some(p) = name_problem(name, 63)
        {
            ctx.mistake(
                l,
                &f.path,
                format!("`{name}` is not a DRA driver name: {p}"),
            );
        }
    }
    if let Some((c, l, path)) = &class {
        match c {
            DeviceClass::Existing(n) => {
                if !builtin_only(ctx, n, *l, path)
                    && let Some(p) = name_problem(n, 253)
                {
                    ctx.mistake(*l, path, format!("`{n}` is not a DeviceClass name: {p}"));
                }
            }
            DeviceClass::Selector(s) => {
                builtin_only(ctx, s, *l, path);
            }
        }
    }
    if let Some((_, l, path)) = &registration
        && mode == Some(Mode::Builtin)
    {
        ctx.mistake(
            *l,
            path,
            "not for deployment.mode Builtin: the runner hosts that driver itself",
        );
    }
    if let Some((c, Some((l, path)))) = &check
        && !c.command.is_empty()
        && mode == Some(Mode::SimulatedNodes)
    {
        ctx.mistake(
            *l,
            path,
            "simulated nodes run no containers, so no command can run in one; use \
             containerCheck.env",
        );
    }
    if let Some((Deployment::SimulatedNodes { command }, _, command_at)) = &deployment {
        let passes_dir = command.iter().any(|a| a.contains("${registrationDir}"));
        match (passes_dir, &registration) {
            (false, None) => ctx.mistake(
                command_at.0,
                &command_at.1,
                "never tells the driver where the node's kubelet looks for plugins: pass \
                 `${registrationDir}` in it, or set registrationDir (otherwise every node's \
                 driver registers with the host's /var/lib/kubelet/plugins_registry)",
            ),
            (true, Some((_, l, path))) => ctx.mistake(
                *l,
                path,
                format!(
                    "conflicts with `${{registrationDir}}` in deployment.command (line {}): \
                     the directory would be passed twice; keep one",
                    command_at.0
                ),
            ),
            _ => {}
        }
    }

    if let Some((_, l, path)) = &device_count {
        if devices.is_none() {
            ctx.mistake(
                *l,
                path,
                "needs devicesPerNode: the runner restarts the driver with one device fewer \
                 than it, then with it again",
            );
        }
        if let Some(m) = mode
            && !matches!(m, Mode::RealNodes | Mode::Manifests | Mode::SimulatedNodes)
        {
            ctx.mistake(
                *l,
                path,
                format!(
                    "the runner restarts only a driver it deploys (deployment.mode RealNodes, \
                     Manifests or SimulatedNodes), not one in mode {m}"
                ),
            );
        }
    }

    Some(Profile {
        driver_name: driver?.0,
        device_class: class?.0,
        faults: deployment.as_ref()?.1.clone(),
        deployment: deployment?.0,
        registration_dir: registration.map(|r| r.0),
        device_count: device_count.map(|r| r.0),
        capabilities,
        container_check: check?.0,
        devices_per_node: devices.map(|d| d.0),
        file: Some(file.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Setting;

    fn mistakes(src: &str) -> Vec<String> {
        match parse_str(src, Path::new("/p/x.yaml"), Options { check_files: false }) {
            Ok(p) => panic!("no mistake found in\n{src}\n{p:?}"),
            Err(m) => m.iter().map(ToString::to_string).collect(),
        }
    }

    const BASE: &str =
        "driverName: gpu.example.com\ndeviceClass:\n  name: gpu\ndeployment:\n  mode: Installed\n";

    #[test]
    fn a_device_count_needs_devices_per_node_and_a_driver_the_runner_deploys() {
        assert_eq!(
            mistakes(&format!("{BASE}deviceCount:\n  flag: --num-devices\n")),
            [
                "line 6: field `deviceCount`: needs devicesPerNode: the runner restarts the driver with one device fewer than it, then with it again",
                "line 6: field `deviceCount`: the runner restarts only a driver it deploys (deployment.mode RealNodes, Manifests or SimulatedNodes), not one in mode Installed",
            ]
        );
        assert_eq!(
            mistakes(&format!(
                "{BASE}devicesPerNode: 2\ndeviceCount:\n  flag: num-devices\n"
            )),
            [
                "line 8: field `deviceCount.flag`: `num-devices` is not a flag name: it starts with `-`, has no spaces and no `=` (the runner passes FLAG=VALUE), e.g. --num-devices",
            ]
        );
        let sim = "driverName: gpu.example.com\ndeviceClass:\n  name: gpu\ndeployment:\n  mode: SimulatedNodes\n  command: [drv, \"--reg=${registrationDir}\"]\ndevicesPerNode: 2\ndeviceCount:\n  env: NUM_DEVICES\n";
        let p = parse_str(sim, Path::new("p.yaml"), Options { check_files: false }).unwrap();
        assert_eq!(p.device_count, Some(Setting::Env("NUM_DEVICES".into())));
    }

    #[test]
    fn types_and_unknown_fields_of_nested_mappings() {
        assert_eq!(
            mistakes(&format!("{BASE}capabilities: AdminAccess\n")),
            [
                "line 6: field `capabilities`: expected a list of strings, found the string `AdminAccess`"
            ]
        );
        assert_eq!(
            mistakes(
                "driverName: 123\ndeviceClass:\n  name: yes\ndeployment:\n  mode: Installed\n"
            ),
            [
                "line 1: field `driverName`: expected a string, found a number `123` (quote it to make it a string)",
                "line 3: field `deviceClass.name`: expected a string, found a boolean `yes` (quote it to make it a string)",
            ]
        );
        assert_eq!(
            mistakes(&format!("{BASE}registrationDir:\n  flags: --x\n")),
            [
                "line 6: field `registrationDir`: set `flag` (e.g. --plugin-registration-path) or `env`",
                "line 7: field `registrationDir.flags`: unknown field (did you mean `flag`?)",
            ]
        );
        assert_eq!(
            mistakes("driverName: d.example.com\ndeviceClass: gpu\ndeployment: [Installed]\n"),
            [
                "line 2: field `deviceClass`: expected a mapping, found the string `gpu`",
                "line 3: field `deployment`: expected a mapping, found a list",
            ]
        );
        assert_eq!(
            mistakes("- a\n"),
            ["line 1: expected a mapping of the profile's fields, found a list"]
        );
    }

    #[test]
    fn a_field_without_a_value_is_unset() {
        let p = parse_str(
            &format!("{BASE}registrationDir:\ncapabilities:\ncontainerCheck:\n"),
            Path::new("/p/x.yaml"),
            Options { check_files: true },
        )
        .unwrap();
        assert_eq!(p.registration_dir, None);
        assert_eq!(p.container_check, ContainerCheck::any_injected_env());
        assert_eq!(
            mistakes("driverName:\ndeviceClass:\n  name:\ndeployment:\n  mode: Installed\n"),
            [
                "line 1: field `driverName`: missing: the DRA driver's name, e.g. gpu.example.com",
                "line 2: field `deviceClass`: set `name` (an existing DeviceClass) or `selector` (a CEL expression the runner creates a class from)",
            ]
        );
    }

    #[test]
    fn values_that_parse_but_are_wrong() {
        assert_eq!(
            mistakes(&format!(
                "{BASE}registrationDir:\n  flag: plugin-dir\ncapabilities: [OpaqueConfig, OpaqueConfig]\ncontainerCheck:\n  env: []\n  command: []\n"
            )),
            [
                "line 7: field `registrationDir.flag`: `plugin-dir` is not a flag name: it starts with `-`, has no spaces and no `=` (the runner passes FLAG=VALUE), e.g. --plugin-registration-path",
                "line 8: field `capabilities[1]`: OpaqueConfig is listed twice (first on line 8)",
                "line 10: field `containerCheck.env`: is empty; list NAME or NAME=VALUE patterns, or leave env out",
                "line 11: field `containerCheck.command`: is empty; give the program and its arguments",
            ]
        );
        assert_eq!(
            mistakes(&format!("{BASE}registrationDir:\n  env: 1PLUGIN\n")),
            [
                "line 7: field `registrationDir.env`: `1PLUGIN` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
            ]
        );
        assert_eq!(
            mistakes(
                "driverName: d.example.com\ndeviceClass:\n  name: c\ndeployment:\n  mode: RealNodes\n  manifests: []\n"
            ),
            [
                "line 6: field `deployment.manifests`: lists no manifest; mode RealNodes installs the driver from them"
            ]
        );
        assert_eq!(
            mistakes(
                "driverName: d.example.com\ndeviceClass:\n  name: c\ndeployment:\n  mode: SimulatedNodes\n"
            ),
            [
                "line 4: field `deployment.command`: missing: mode SimulatedNodes starts this command once per node"
            ]
        );
    }

    const MANIFESTS: &str =
        "driverName: d.example.com\ndeviceClass:\n  name: c\ndeployment:\n  mode: Manifests\n";

    #[test]
    fn a_manifests_profile_names_its_files_relative_to_itself_and_may_restart_the_driver() {
        let src = format!(
            "{MANIFESTS}  manifests: [rbac.yaml, ../d/plugin.yaml]\nregistrationDir:\n  flag: --reg\ndevicesPerNode: 2\ndeviceCount:\n  flag: --num-devices\n"
        );
        let p = parse_str(&src, Path::new("/p/x.yaml"), Options { check_files: false })
            .unwrap_or_else(|m| panic!("{m:?}"));
        assert_eq!(
            p.deployment,
            Deployment::Manifests {
                manifests: vec!["/p/rbac.yaml".into(), "/d/plugin.yaml".into()]
            }
        );
        assert_eq!(p.deployment.mode(), Mode::Manifests);
        assert_eq!(p.device_count, Some(Setting::Flag("--num-devices".into())));
        assert_eq!(p.interposable(), Ok(()));
        // Without registrationDir too: the runner then points the
        // DaemonSet's plugins_registry volume elsewhere.
        let bare = parse_str(
            &format!("{MANIFESTS}  manifests: [a.yaml]\n"),
            Path::new("/p/x.yaml"),
            Options { check_files: false },
        )
        .unwrap();
        assert_eq!(bare.interposable(), Ok(()));
    }

    #[test]
    fn a_manifests_profile_loads_no_images_and_needs_a_manifest() {
        assert_eq!(
            mistakes(&format!(
                "{MANIFESTS}  manifests: [a.yaml]\n  imageArchives: [a.oci.tar]\n"
            )),
            [
                "line 7: field `deployment.imageArchives`: only for mode RealNodes, whose nodes the runner starts and imports images into; with mode Manifests, load the images into the cluster's nodes yourself (e.g. `kind load image-archive FILE`) or have the nodes pull them"
            ]
        );
        assert_eq!(
            mistakes(&format!("{MANIFESTS}  manifests: []\n")),
            [
                "line 6: field `deployment.manifests`: lists no manifest; mode Manifests installs the driver from them"
            ]
        );
        assert_eq!(
            mistakes(MANIFESTS),
            [
                "line 4: field `deployment.manifests`: missing: mode Manifests installs the driver from these manifests"
            ]
        );
        assert_eq!(
            mistakes(&format!(
                "{MANIFESTS}  command: [drv]\n  manifests: [a.yaml]\n"
            )),
            ["line 6: field `deployment.command`: only for mode SimulatedNodes, not Manifests"]
        );
        // Manifests with another mode names both modes that take them.
        assert_eq!(
            mistakes(&format!("{BASE}  manifests: [a.yaml]\n")),
            [
                "line 6: field `deployment.manifests`: only for mode RealNodes or Manifests, not Installed"
            ]
        );
        assert_eq!(
            mistakes("driverName: d.example.com\ndeviceClass:\n  name: c\n"),
            [
                "line 1: field `deployment`: missing: where the driver runs: `mode` Builtin, Installed, RealNodes, Manifests or SimulatedNodes"
            ]
        );
    }

    #[test]
    fn relative_paths_are_relative_to_the_profile() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("m.yaml"), "").unwrap();
        std::fs::write(dir.path().join("sub/driver"), "").unwrap();
        let src = "driverName: d.example.com\ndeviceClass:\n  name: c\ndeployment:\n  mode: RealNodes\n  manifests: [../m.yaml, .]\n";
        let file = dir.path().join("sub/p.yaml");
        let m = parse_str(src, &file, Options { check_files: true }).unwrap_err();
        assert_eq!(
            m.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "line 6: field `deployment.manifests[1]`: manifest {}/sub is not a file (relative paths are relative to the profile's directory; `--no-files` skips this check for files a build has yet to produce)",
                dir.path().display()
            )]
        );
        let src = src.replace(", .]", "]");
        let p = parse_str(&src, &file, Options { check_files: true }).unwrap();
        assert_eq!(
            p.deployment,
            Deployment::RealNodes {
                manifests: vec![dir.path().join("m.yaml")],
                image_archives: vec![]
            }
        );
    }
}
