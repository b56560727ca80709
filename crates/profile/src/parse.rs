//! Reading a profile file: the YAML tree walked field by field, every
//! mistake collected with its line and field path, then the settings that
//! parse but do not fit together.
//!
//! Which keys a mapping has, and what kind of value each takes, is not
//! written here but in [`super::shape`], from which the JSON Schema is
//! generated too: fields are taken by their key there, a mapping's kind
//! says its shape, and keys it does not list are unknown.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::names::{closest, dns_subdomain_problem, is_env_name};
use super::shape::{self, Choice, Kind, Shape};
use super::yaml::{self, Node, Value, describe, line};
use super::{
    COMMAND_PLACEHOLDERS, Capability, ContainerCheck, Deployment, DeviceClass, ENV_PLACEHOLDERS,
    EnvPattern, Fault, Mistake, Mode, NAMESPACE_PLACEHOLDER, Planter, Profile, Setting,
};

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

struct Ctx<'s> {
    src: &'s str,
    dir: PathBuf,
    options: Options,
    mistakes: Vec<Mistake>,
}

impl Ctx<'_> {
    fn mistake(&mut self, line: u64, field: &str, message: impl Into<String>) {
        self.mistakes.push(Mistake {
            line,
            field: Some(field.to_owned()),
            message: message.into(),
        });
    }

    fn expected(&mut self, node: &Node, field: &str, what: &str) {
        let found = describe(self.src, node);
        let hint = match &node.value {
            Value::Bool | Value::Int(_) | Value::Float if what.contains("string") => {
                " (quote it to make it a string)"
            }
            _ => "",
        };
        self.mistake(
            line(node),
            field,
            format!("expected {what}, found {found}{hint}"),
        );
    }

    fn string(&mut self, node: &Node, field: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                self.expected(node, field, "a string");
                None
            }
        }
    }

    /// A list of strings: each item with its line and field path; items
    /// that are no string are reported and left out.
    fn strings(&mut self, node: &Node, field: &str) -> Option<Vec<Item>> {
        let Value::Seq(items) = &node.value else {
            self.expected(node, field, "a list of strings");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let f = format!("{field}[{i}]");
            if let Some(s) = self.string(item, &f) {
                out.push(Item {
                    value: s,
                    line: line(item),
                    field: f,
                });
            }
        }
        Some(out)
    }

    /// A mapping of `shape`, whose fields are then taken one by one.
    fn map<'n>(
        &mut self,
        node: &'n Node,
        field: &str,
        at: u64,
        shape: &'static Shape,
    ) -> Option<Map<'n>> {
        let Value::Map(entries) = &node.value else {
            self.expected(node, field, "a mapping");
            return None;
        };
        let entries = entries
            .iter()
            .map(|(k, v)| {
                let key = match &k.value {
                    Value::Str(s) => s.clone(),
                    _ => yaml::raw(self.src, k)
                        .map(str::to_owned)
                        .unwrap_or_else(|| describe(self.src, k)),
                };
                // `: value` has a key of no text; a path ending in nothing
                // (field ``) would not say which field is meant.
                let key = if key.trim().is_empty() {
                    format!("<empty key {key:?}>")
                } else {
                    key
                };
                (key, line(k), v)
            })
            .collect();
        Some(Map {
            shape,
            field: field.to_owned(),
            line: at,
            entries,
            taken: Vec::new(),
        })
    }

    /// The mapping a field of kind [`Kind::Mapping`] holds, of the shape
    /// that kind names.
    fn mapping<'n>(&mut self, f: &Field<'n>) -> Option<Map<'n>> {
        let Kind::Mapping(shape) = f.spec.kind else {
            self.bug(f, "a mapping");
            return None;
        };
        self.map(f.node, &f.path, f.line, shape)
    }

    /// A field of kind [`Kind::Text`] or [`Kind::Name`].
    fn text(&mut self, f: &Field) -> Option<String> {
        if !matches!(f.spec.kind, Kind::Text { .. } | Kind::Name(_)) {
            self.bug(f, "a string");
            return None;
        }
        self.string(f.node, &f.path)
    }

    /// A field of kind [`Kind::List`].
    fn list(&mut self, f: &Field) -> Option<Vec<Item>> {
        if !matches!(f.spec.kind, Kind::List { .. }) {
            self.bug(f, "a list");
            return None;
        }
        self.strings(f.node, &f.path)
    }

    /// The checker reads a field otherwise than [`shape`] describes it: a
    /// bug of dra-e2e's, said rather than hidden (tests walk every field).
    fn bug(&mut self, f: &Field, read_as: &str) {
        self.mistake(
            f.line,
            &f.path,
            format!(
                "read as {read_as}, but the profile's shape says {} (a bug in dra-e2e)",
                f.spec.kind.what()
            ),
        );
    }

    /// A relative path resolved against the profile's directory and, when
    /// files are checked, required to be an existing file.
    fn file(&mut self, item: &Item, what: &str) -> PathBuf {
        let path = lexical(&self.dir.join(&item.value));
        if self.options.check_files {
            let problem = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => None,
                Ok(_) => Some(format!("{what} {} is not a file", path.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Some(format!("{what} {} does not exist", path.display()))
                }
                Err(e) => Some(format!("{what} {}: {e}", path.display())),
            };
            if let Some(p) = problem {
                let relative = if Path::new(&item.value).is_relative() {
                    " (relative paths are relative to the profile's directory; `--no-files` \
                     skips this check for files a build has yet to produce)"
                } else {
                    " (`--no-files` skips this check for files a build has yet to produce)"
                };
                self.mistake(item.line, &item.field, format!("{p}{relative}"));
            }
        }
        path
    }
}

/// `a/b/../c` as `a/c`, for paths the user reads back in messages (a
/// profile's `../target/x` stays readable); symlinks are not resolved.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

struct Item {
    value: String,
    line: u64,
    field: String,
}

struct Map<'n> {
    /// Its keys and their kinds.
    shape: &'static Shape,
    field: String,
    /// Where the mapping is: its key's line (the first field's for the
    /// root), where missing fields are reported.
    line: u64,
    entries: Vec<(String, u64, &'n Node)>,
    taken: Vec<usize>,
}

/// A field that is set: its value, the line of its key, its path and
/// what the shape says it is.
struct Field<'n> {
    spec: &'static shape::Field,
    node: &'n Node,
    line: u64,
    path: String,
}

impl<'n> Map<'n> {
    fn path(&self, key: &str) -> String {
        if self.field.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.field)
        }
    }

    /// The field `key` of the shape; `None` when absent or null (`key:`
    /// with nothing).
    fn take(&mut self, key: &str) -> Option<Field<'n>> {
        // A key the shape lacks is never taken, so a user's field of that
        // name is reported unknown: the checker cannot accept more than the
        // schema. Tests catch the slip.
        let Some(spec) = self.shape.field(key) else {
            debug_assert!(false, "{key} is no field of {}", self.field);
            return None;
        };
        let i = self.entries.iter().position(|(k, _, _)| k == key)?;
        self.taken.push(i);
        let (_, line, node) = self.entries[i];
        match node.value {
            Value::Null => None,
            _ => Some(Field {
                spec,
                node,
                line,
                path: self.path(key),
            }),
        }
    }

    /// Whether `key` is there with a value (a null one counts as unset).
    fn has(&self, key: &str) -> bool {
        self.entries
            .iter()
            .any(|(k, _, n)| k == key && !matches!(n.value, Value::Null))
    }

    fn missing(&self, ctx: &mut Ctx, key: &str, what: &str) {
        ctx.mistake(self.line, &self.path(key), format!("missing: {what}"));
    }

    /// Takes a field that must be there; reports it missing (saying
    /// `what` it is) when it is not.
    fn required(&mut self, ctx: &mut Ctx, key: &str, what: &str) -> Option<Field<'n>> {
        debug_assert!(
            self.shape.field(key).is_some_and(|f| f.required),
            "{key} is no required field of the shape"
        );
        let field = self.take(key);
        if field.is_none() {
            self.missing(ctx, key, what);
        }
        field
    }

    /// Reports the fields nobody took: typos, or fields of another version.
    fn finish(self, ctx: &mut Ctx) {
        let known = self.shape.keys();
        for (i, (key, line, _)) in self.entries.iter().enumerate() {
            if self.taken.contains(&i) {
                continue;
            }
            let hint = match closest(key, known.iter().copied()) {
                Some(k) => format!(" (did you mean `{k}`?)"),
                None => format!(" (known: {})", known.join(", ")),
            };
            ctx.mistake(*line, &self.path(key), format!("unknown field{hint}"));
        }
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

fn device_class(ctx: &mut Ctx, f: &Field) -> Option<(DeviceClass, u64, String)> {
    let mut m = ctx.mapping(f)?;
    let name = m
        .take("name")
        .and_then(|n| Some((ctx.text(&n)?, line(n.node), n.path)));
    let selector = m.take("selector").and_then(|s| {
        let text = ctx.text(&s)?;
        if matches!(s.spec.kind, Kind::Text { blank_ok: false }) && text.trim().is_empty() {
            ctx.mistake(
                line(s.node),
                &s.path,
                "the CEL selector is empty; it must select the driver's devices, e.g. \
                 device.driver == \"gpu.example.com\"",
            );
            return None;
        }
        Some((text, line(s.node), s.path))
    });
    let set = m.has("name") || m.has("selector");
    m.finish(ctx);
    let chosen = one_of(
        ctx,
        f,
        set,
        (name, selector),
        |name_line| {
            format!(
                "conflicts with deviceClass.name (line {name_line}): use an existing class or \
                 have one created from a selector, not both"
            )
        },
        "set `name` (an existing DeviceClass) or `selector` (a CEL expression the runner \
         creates a class from)"
            .to_owned(),
    )?;
    Some(match chosen {
        OneOf::First((n, l, path)) => (DeviceClass::Existing(n), l, path),
        OneOf::Second((s, l, path)) => (DeviceClass::Selector(s), l, path),
    })
}

/// A value with the line and path of the field it came from.
type Located<T> = (T, u64, String);

/// Which of two alternative fields a mapping set.
enum OneOf<A, B> {
    First(A),
    Second(B),
}

/// The one of two alternative fields a mapping sets (`deviceClass.name` or
/// `.selector`, `flag` or `env`). Both is a mistake at the second, said by
/// `conflict` (given the first's line); neither is one at the mapping, said by
/// `missing`, unless `set` says one was there but broken (and so reported
/// where it is).
fn one_of<A, B>(
    ctx: &mut Ctx,
    f: &Field,
    set: bool,
    fields: (Option<Located<A>>, Option<Located<B>>),
    conflict: impl FnOnce(u64) -> String,
    missing: String,
) -> Option<OneOf<Located<A>, Located<B>>> {
    // The schema says the same only if the shape does.
    debug_assert!(
        matches!(
            f.spec.kind,
            Kind::Mapping(Shape {
                choice: Some(Choice::OneOf(_)),
                ..
            })
        ),
        "the shape of {} has no OneOf",
        f.path
    );
    match fields {
        (Some(a), None) => Some(OneOf::First(a)),
        (None, Some(b)) => Some(OneOf::Second(b)),
        (Some((_, first_line, _)), Some((_, l, path))) => {
            ctx.mistake(l, &path, conflict(first_line));
            None
        }
        (None, None) => {
            if !set {
                ctx.mistake(f.line, &f.path, missing);
            }
            None
        }
    }
}

/// The modes as a sentence lists them: `A, B or C`.
fn modes_text() -> String {
    let names = Mode::ALL.map(Mode::name);
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The deployment, and where its `command` is (for the rules about it).
fn deployment(ctx: &mut Ctx, f: &Field) -> Option<(Deployment, BTreeSet<Fault>, (u64, String))> {
    let mut m = ctx.mapping(f)?;
    let known_modes = || Mode::ALL.map(Mode::name).join(", ");
    let mode =
        match m.take(shape::MODE) {
            Some(mf) => ctx.text(&mf).and_then(|s| {
                match Mode::ALL.into_iter().find(|mode| mode.name() == s) {
                    Some(mode) => Some(mode),
                    None => {
                        let hint = match closest(&s, Mode::ALL.map(Mode::name)) {
                            Some(c) => format!("did you mean `{c}`?"),
                            None => format!("known: {}", known_modes()),
                        };
                        ctx.mistake(
                            line(mf.node),
                            &mf.path,
                            format!("unknown mode `{s}` ({hint})"),
                        );
                        None
                    }
                }
            }),
            None => {
                m.missing(ctx, shape::MODE, &format!("one of {}", known_modes()));
                None
            }
        };
    // The modes a field is for are the shape's.
    let only = |ctx: &mut Ctx, field: &Field| {
        let wanted = field.spec.modes;
        if let Some(mode) = mode
            && !wanted.is_empty()
            && !wanted.contains(&mode)
        {
            let names: Vec<&str> = wanted.iter().map(|m| m.name()).collect();
            // The runner imports images only into nodes it starts; on a
            // kubeconfig cluster that is the user's to do.
            let message = if mode == Mode::Manifests && field.path.ends_with(".imageArchives") {
                "only for mode RealNodes, whose nodes the runner starts and imports images \
                 into; with mode Manifests, load the images into the cluster's nodes yourself \
                 (e.g. `kind load image-archive FILE`) or have the nodes pull them"
                    .to_owned()
            } else {
                format!("only for mode {}, not {mode}", names.join(" or "))
            };
            ctx.mistake(field.line, &field.path, message);
        }
    };
    let files = |ctx: &mut Ctx, key: &str, what: &str, m: &mut Map| {
        let field = m.take(key)?;
        only(ctx, &field);
        let items = ctx.list(&field)?;
        Some((
            items.iter().map(|i| ctx.file(i, what)).collect::<Vec<_>>(),
            field.line,
        ))
    };
    let manifests = files(ctx, "manifests", "manifest", &mut m);
    let archives = files(ctx, "imageArchives", "image archive", &mut m);
    let faults_field = m.take("faults");
    let faults = faults_field.as_ref().and_then(|field| {
        let items = ctx.list(field)?;
        let mut set = BTreeSet::new();
        for i in items {
            let Some(fault) = Fault::from_name(&i.value) else {
                ctx.mistake(
                    i.line,
                    &i.field,
                    format!(
                        "unknown fault `{}` (known: {})",
                        i.value,
                        Fault::ALL
                            .iter()
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                continue;
            };
            // Only the suite's own driver breaks itself; in front of any
            // other the interposer plants what shows in the answers.
            let planter = match mode {
                Some(Mode::Builtin) => Planter::Builtin,
                Some(Mode::Installed) => {
                    ctx.mistake(
                        i.line,
                        &i.field,
                        "mode Installed cannot have faults planted: the runner interposes only \
                         a driver it deploys (mode RealNodes, Manifests or SimulatedNodes)",
                    );
                    continue;
                }
                _ => Planter::Interposer,
            };
            if !fault.planted_by(planter) {
                let who = match planter {
                    Planter::Builtin => {
                        "the suite's own driver cannot plant it (the interposer \
                                         can, in front of a driver of mode RealNodes, Manifests \
                                         or SimulatedNodes)"
                    }
                    Planter::Interposer => {
                        "the interposer cannot plant it in front of another \
                                            driver (only the suite's own driver, mode Builtin, \
                                            breaks itself this way)"
                    }
                };
                ctx.mistake(i.line, &i.field, format!("fault `{}`: {who}", i.value));
                continue;
            }
            set.insert(fault);
        }
        Some(set)
    });
    let command_field = m.take("command");
    let command = command_field.as_ref().and_then(|field| {
        only(ctx, field);
        let items = ctx.list(field)?;
        check_command(ctx, &items);
        Some(items.into_iter().map(|i| i.value).collect::<Vec<_>>())
    });
    let (has_manifests, has_command) = (m.has("manifests"), m.has("command"));
    let command_at = command_field
        .as_ref()
        .map_or_else(|| (f.line, m.path("command")), |c| (c.line, c.path.clone()));
    m.finish(ctx);
    let deployment = match mode? {
        Mode::Builtin => Deployment::Builtin,
        Mode::Installed => Deployment::Installed,
        mode @ (Mode::RealNodes | Mode::Manifests) => {
            let manifests = match manifests {
                Some((list, _)) if !list.is_empty() => list,
                Some((_, l)) => {
                    ctx.mistake(
                        l,
                        &m_path(f, "manifests"),
                        format!("lists no manifest; mode {mode} installs the driver from them"),
                    );
                    return None;
                }
                None => {
                    if !has_manifests {
                        ctx.mistake(
                            f.line,
                            &m_path(f, "manifests"),
                            format!(
                                "missing: mode {mode} installs the driver from these manifests"
                            ),
                        );
                    }
                    return None;
                }
            };
            match mode {
                Mode::RealNodes => Deployment::RealNodes {
                    manifests,
                    image_archives: archives.map(|a| a.0).unwrap_or_default(),
                },
                _ => Deployment::Manifests { manifests },
            }
        }
        Mode::SimulatedNodes => match command {
            Some(command) if !command.is_empty() => Deployment::SimulatedNodes { command },
            Some(_) => {
                ctx.mistake(
                    command_at.0,
                    &command_at.1,
                    "is empty; mode SimulatedNodes starts it once per node",
                );
                return None;
            }
            None => {
                if !has_command {
                    ctx.mistake(
                        f.line,
                        &command_at.1,
                        "missing: mode SimulatedNodes starts this command once per node",
                    );
                }
                return None;
            }
        },
    };
    Some((deployment, faults.unwrap_or_default(), command_at))
}

fn m_path(f: &Field, key: &str) -> String {
    format!("{}.{key}", f.path)
}

fn check_command(ctx: &mut Ctx, items: &[Item]) {
    let names: Vec<&str> = COMMAND_PLACEHOLDERS.iter().map(|(n, _)| *n).collect();
    for item in items {
        for c in placeholders().captures_iter(&item.value) {
            let name = c.get(1).map_or("", |m| m.as_str());
            if names.contains(&name) {
                continue;
            }
            let hint = match closest(name, names.iter().copied()) {
                Some(k) => format!("did you mean `${{{k}}}`?"),
                None => format!(
                    "known: {}",
                    names
                        .iter()
                        .map(|n| format!("${{{n}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            ctx.mistake(
                item.line,
                &item.field,
                format!("unknown placeholder `${{{name}}}` ({hint})"),
            );
        }
    }
    // A program given by path is the profile's to ship; a bare name is
    // looked up in PATH when started.
    if let Some(program) = items.first()
        && program.value.contains('/')
        && !program.value.contains("${")
    {
        ctx.file(program, "program");
    }
}

/// `flag` or `env`: how the driver is told a value (`example` is a flag
/// for the messages).
fn setting(ctx: &mut Ctx, f: &Field, example: &str) -> Option<(Setting, u64, String)> {
    let field = f.path.clone();
    let mut m = ctx.mapping(f)?;
    let flag = m.take("flag").and_then(|ff| {
        let s = ctx.text(&ff)?;
        if !s.starts_with('-') || s.len() < 2 || s.contains(char::is_whitespace) || s.contains('=')
        {
            ctx.mistake(
                line(ff.node),
                &ff.path,
                format!(
                    "`{s}` is not a flag name: it starts with `-`, has no spaces and no `=` \
                     (the runner passes FLAG=VALUE), e.g. {example}"
                ),
            );
            return None;
        }
        Some((s, line(ff.node), ff.path))
    });
    let env = m.take("env").and_then(|ef| {
        let s = ctx.text(&ef)?;
        if !is_env_name(&s) {
            ctx.mistake(
                line(ef.node),
                &ef.path,
                format!(
                    "`{s}` is not an environment variable name (letters, digits and `_`, not \
                     starting with a digit)"
                ),
            );
            return None;
        }
        Some((s, line(ef.node), ef.path))
    });
    let set = m.has("flag") || m.has("env");
    m.finish(ctx);
    let chosen = one_of(
        ctx,
        f,
        set,
        (flag, env),
        |flag_line| {
            format!(
                "conflicts with {field}.flag (line {flag_line}): the driver is told one way, not \
                 both"
            )
        },
        format!("set `flag` (e.g. {example}) or `env`"),
    )?;
    let setting = match chosen {
        OneOf::First((s, _, _)) => Setting::Flag(s),
        OneOf::Second((s, _, _)) => Setting::Env(s),
    };
    Some((setting, f.line, f.path.clone()))
}

fn capabilities(ctx: &mut Ctx, f: &Field) -> Option<BTreeSet<Capability>> {
    let items = ctx.list(f)?;
    let mut out = BTreeSet::new();
    let mut first_line = std::collections::BTreeMap::new();
    for item in items {
        match item.value.parse::<Capability>() {
            Ok(c) => {
                if let Some(l) = first_line.get(&c) {
                    ctx.mistake(
                        item.line,
                        &item.field,
                        format!("{c} is listed twice (first on line {l})"),
                    );
                } else {
                    first_line.insert(c, item.line);
                    out.insert(c);
                }
            }
            Err(e) => ctx.mistake(item.line, &item.field, e.to_string()),
        }
    }
    Some(out)
}

/// The check, and where its command is when it has one.
fn container_check(ctx: &mut Ctx, f: &Field) -> Option<(ContainerCheck, Option<(u64, String)>)> {
    let mut m = ctx.mapping(f)?;
    let env = m.take("env").and_then(|ef| {
        let items = ctx.list(&ef)?;
        if items.is_empty() {
            ctx.mistake(
                ef.line,
                &ef.path,
                "is empty; list NAME or NAME=VALUE patterns, or leave env out",
            );
        }
        let mut out = Vec::new();
        for item in items {
            let name = item.value.split_once('=').map_or(&*item.value, |(n, _)| n);
            if name.is_empty() {
                ctx.mistake(
                    item.line,
                    &item.field,
                    format!(
                        "`{}` has no variable name: write NAME or NAME=VALUE (`*` matches any text)",
                        item.value
                    ),
                );
            } else if name.contains(char::is_whitespace) {
                ctx.mistake(
                    item.line,
                    &item.field,
                    format!("variable name `{name}` contains a space"),
                );
            } else if let Some(unknown) = placeholders()
                .find_iter(&item.value)
                .map(|m| m.as_str())
                .find(|p| !ENV_PLACEHOLDERS.iter().any(|(k, _)| k == p))
            {
                ctx.mistake(
                    item.line,
                    &item.field,
                    format!(
                        "`{unknown}` is no placeholder of containerCheck.env (known: {})",
                        ENV_PLACEHOLDERS
                            .iter()
                            .map(|(k, _)| *k)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            } else {
                out.push(EnvPattern::new(item.value));
            }
        }
        Some(out)
    });
    let command_field = m.take("command");
    let command = command_field.as_ref().and_then(|cf| {
        let items = ctx.list(cf)?;
        if items.is_empty() {
            ctx.mistake(
                cf.line,
                &cf.path,
                "is empty; give the program and its arguments",
            );
        }
        Some(items.into_iter().map(|i| i.value).collect::<Vec<_>>())
    });
    debug_assert!(
        matches!(m.shape.choice, Some(Choice::AnyOf(_))),
        "the shape of {} has no AnyOf",
        f.path
    );
    let keys_set = m.has("env") || m.has("command");
    m.finish(ctx);
    let check = ContainerCheck {
        env: env.unwrap_or_default(),
        command: command.unwrap_or_default(),
    };
    if check.env.is_empty() && check.command.is_empty() {
        if !keys_set {
            ctx.mistake(
                f.line,
                &f.path,
                "say how a container shows it got its device: set `env` (variables from CDI), \
                 `command` (run in the container, exit 0 = got it) or both",
            );
        }
        return None;
    }
    Some((check, command_field.map(|c| (c.line, c.path))))
}

#[cfg(test)]
mod tests {
    use super::*;

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
