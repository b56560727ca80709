//! The one description of a profile file's fields: which mapping has which
//! keys, of what kind, which are required, which exclude each other, which
//! belong to which deployment mode.
//!
//! The checker ([`super::parse`]) takes every field through it and reports
//! keys it does not list as unknown; the JSON Schema that editors use
//! ([`super::schema`]) is generated from it. So `profile check` and an
//! editor cannot disagree on a key or a field's shape: a field added here
//! is known to both. What only the checker knows are rules on values (name
//! syntax, placeholders, files that must exist, fields one mode needs).
use super::{Capability, Fault, Mode};

/// A mapping of the profile.
#[derive(Debug)]
pub(crate) struct Shape {
    pub doc: &'static str,
    pub fields: &'static [Field],
    /// Fields of which one (or at least one) must be set.
    pub choice: Option<Choice>,
}

/// Alternative fields of a mapping; set means there and not null.
#[derive(Debug)]
pub(crate) enum Choice {
    /// Exactly one of them (`deviceClass.name` or `.selector`).
    OneOf(&'static [&'static str]),
    /// One of them or more (`containerCheck.env`, `.command`).
    AnyOf(&'static [&'static str]),
}

/// A field of a mapping.
#[derive(Debug)]
pub(crate) struct Field {
    pub key: &'static str,
    pub kind: Kind,
    /// Must be there, and not null (a null field counts as not set).
    pub required: bool,
    pub doc: &'static str,
    /// The `deployment.mode`s it may be set with; empty: any. Only for
    /// fields of [`DEPLOYMENT`], beside its [`MODE`].
    pub modes: &'static [Mode],
}

/// What a field's value is.
#[derive(Debug)]
pub(crate) enum Kind {
    /// A string; `blank_ok: false` when it must have more than spaces.
    Text {
        blank_ok: bool,
    },
    /// A string, one of these names.
    Name(fn() -> Vec<&'static str>),
    /// A list of strings (of these names, when given).
    List {
        names: Option<fn() -> Vec<&'static str>>,
        /// The fewest items it may have.
        min_items: u32,
        /// Whether an item may be listed twice.
        unique: bool,
    },
    /// A whole number from 1 to `u32::MAX`.
    Count,
    Mapping(&'static Shape),
}

impl Kind {
    /// What a value of this kind is, for "expected X" messages.
    pub fn what(&self) -> &'static str {
        match self {
            Kind::Text { .. } | Kind::Name(_) => "a string",
            Kind::List { .. } => "a list of strings",
            Kind::Count => "a whole number",
            Kind::Mapping(_) => "a mapping",
        }
    }
}

impl Shape {
    pub fn field(&'static self, key: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.key == key)
    }

    pub fn keys(&self) -> Vec<&'static str> {
        self.fields.iter().map(|f| f.key).collect()
    }
}

/// The key of [`DEPLOYMENT`] that the other fields' `modes` refer to.
pub(crate) const MODE: &str = "mode";

fn mode_names() -> Vec<&'static str> {
    Mode::ALL.map(Mode::name).to_vec()
}

fn capability_names() -> Vec<&'static str> {
    Capability::ALL.map(Capability::name).to_vec()
}

fn fault_names() -> Vec<&'static str> {
    Fault::ALL.iter().map(|f| f.name()).collect()
}

const fn optional(key: &'static str, kind: Kind, doc: &'static str) -> Field {
    Field {
        key,
        kind,
        required: false,
        doc,
        modes: &[],
    }
}

const fn required(key: &'static str, kind: Kind, doc: &'static str) -> Field {
    Field {
        required: true,
        ..optional(key, kind, doc)
    }
}

const TEXT: Kind = Kind::Text { blank_ok: true };

const fn strings(min_items: u32) -> Kind {
    Kind::List {
        names: None,
        min_items,
        unique: false,
    }
}

/// A driver profile file (docs/driver-profile.md).
pub(crate) static PROFILE: Shape = Shape {
    doc: "A dra-e2e driver profile: which DRA driver is under test and what the suite may expect \
          of it (docs/driver-profile.md). Check one with `dra-e2e profile check FILE`.",
    fields: &[
        required(
            "driverName",
            TEXT,
            "The DRA driver's name, a DNS subdomain of at most 63 characters, e.g. \
             gpu.example.com. `${namespace}` stands for the scenario's namespace (mode Builtin \
             only).",
        ),
        required(
            "deviceClass",
            Kind::Mapping(&DEVICE_CLASS),
            "The DeviceClass that scenarios' claims ask for: `name` of an existing one or a CEL \
             `selector` the runner creates one from.",
        ),
        required(
            "deployment",
            Kind::Mapping(&DEPLOYMENT),
            "Where the driver runs, and so what the runner does to get it there.",
        ),
        optional(
            "registrationDir",
            Kind::Mapping(&SETTING),
            "How the driver is told to put its registration socket elsewhere than the kubelet's \
             plugins_registry directory (for the interposer): a `flag` or an `env` variable. Not \
             for mode Builtin.",
        ),
        optional(
            "capabilities",
            Kind::List {
                names: Some(capability_names),
                min_items: 0,
                unique: true,
            },
            "The optional DRA behaviours the driver claims; scenarios needing one it does not \
             claim are skipped, never failed.",
        ),
        optional(
            "containerCheck",
            Kind::Mapping(&CONTAINER_CHECK),
            "How a container shows it got its device. Left out: any variable its pod spec does \
             not set.",
        ),
        optional(
            "devicesPerNode",
            Kind::Count,
            "How many devices each node offers; without it, scenarios that use every device of a \
             node are skipped.",
        ),
        optional(
            "deviceCount",
            Kind::Mapping(&SETTING),
            "How the driver is told how many devices a node offers (`flag` or `env`), so that the \
             runner can restart it with one fewer. Needs devicesPerNode and a driver the runner \
             deploys.",
        ),
    ],
    choice: None,
};

static DEVICE_CLASS: Shape = Shape {
    doc: "Set `name` (an existing DeviceClass) or `selector` (a CEL expression the runner creates \
          a class from), not both.",
    fields: &[
        optional(
            "name",
            TEXT,
            "An existing DeviceClass, by name (a DNS subdomain of at most 253 characters).",
        ),
        optional(
            "selector",
            Kind::Text { blank_ok: false },
            "A CEL expression; the runner creates a DeviceClass selecting devices with it, e.g. \
             device.driver == \"gpu.example.com\".",
        ),
    ],
    choice: Some(Choice::OneOf(&["name", "selector"])),
};

static DEPLOYMENT: Shape = Shape {
    doc: "Where the driver runs: `mode`, and the fields that mode takes.",
    fields: &[
        required(
            MODE,
            Kind::Name(mode_names),
            "Builtin: the suite's own test driver. Installed: already in the kubeconfig cluster. \
             RealNodes: the local cluster's real nodes, from manifests and image archives. \
             Manifests: the kubeconfig cluster, from manifests. SimulatedNodes: the local \
             cluster's simulated nodes, a command started per node.",
        ),
        Field {
            modes: &[Mode::RealNodes, Mode::Manifests],
            ..optional(
                "manifests",
                strings(1),
                "The driver's manifest files, applied in order (relative paths are relative to \
                 the profile). Required for modes RealNodes and Manifests.",
            )
        },
        Field {
            modes: &[Mode::RealNodes],
            ..optional(
                "imageArchives",
                strings(0),
                "OCI image archives every real node imports before the manifests are applied.",
            )
        },
        Field {
            modes: &[Mode::SimulatedNodes],
            ..optional(
                "command",
                strings(1),
                "The driver's kubelet plugin, started once per simulated node, with \
                 ${nodeName}, ${kubeletDir}, ${registrationDir}, ${pluginDir}, ${cdiDir}, \
                 ${kubeconfig} and ${driverName} filled in. Required for mode SimulatedNodes.",
            )
        },
        optional(
            "faults",
            Kind::List {
                names: Some(fault_names),
                min_items: 0,
                unique: false,
            },
            "Bugs planted on purpose, to see the conformance pack fail a driver that has them \
             (docs/driver-mutants.md). Not for mode Installed.",
        ),
    ],
    choice: None,
};

static SETTING: Shape = Shape {
    doc: "How the driver is told a value: a command-line `flag` (passed as FLAG=VALUE) or an \
          `env` variable, not both.",
    fields: &[
        optional(
            "flag",
            TEXT,
            "A command-line flag, starting with `-`, e.g. --plugin-registration-path.",
        ),
        optional("env", TEXT, "An environment variable's name."),
    ],
    choice: Some(Choice::OneOf(&["flag", "env"])),
};

static CONTAINER_CHECK: Shape = Shape {
    doc: "Set `env`, `command` or both.",
    fields: &[
        optional(
            "env",
            strings(1),
            "Patterns NAME or NAME=VALUE (`*` matches any text); each must match a variable the \
             container has and its pod spec does not set (one that came through CDI).",
        ),
        optional(
            "command",
            strings(1),
            "Run in the container; exit status 0 means it got its device. Not with mode \
             SimulatedNodes, whose nodes run no containers.",
        ),
    ],
    choice: Some(Choice::AnyOf(&["env", "command"])),
};
