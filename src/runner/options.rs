//! Where each option means something: one table, [`TABLE`], of every option
//! of every command, saying on which cluster and node kind (and, for the
//! run, with which driver deployment) it takes effect. The run and the
//! commands refuse an option given where it does nothing, before anything
//! starts ([`check_run`], [`check_command`]); docs/cli.md's option reference
//! is printed from the same table ([`markdown`], `dra-e2e options
//! --markdown`), and tests keep the table, the command tree and the document
//! equal.
//!
//! The table is split by whose options they are (`run_options`,
//! `command_options`) and joined here into one slice, so that every
//! reader (the refusals, the reference, the tests) sees the one table.
use std::fmt;
use std::path::PathBuf;

use crate::cluster::NodeKind;
use crate::profile::Mode;

/// Where a run happens: the cluster and its kind of nodes. A kubeconfig
/// cluster (kind, or any other) has the nodes it was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    LocalSimulated,
    LocalReal,
    Kubeconfig,
}

impl Place {
    pub const ALL: [Place; 3] = [Place::LocalSimulated, Place::LocalReal, Place::Kubeconfig];

    pub fn of(local: bool, node_kind: NodeKind) -> Place {
        match (local, node_kind) {
            (false, _) => Place::Kubeconfig,
            (true, NodeKind::Simulated) => Place::LocalSimulated,
            (true, NodeKind::Real) => Place::LocalReal,
        }
    }

    /// The cluster's kind, as `--cluster` says it.
    pub fn cluster(self) -> &'static str {
        match self {
            Place::LocalSimulated | Place::LocalReal => "local",
            Place::Kubeconfig => "kubeconfig",
        }
    }

    /// The kind of its nodes.
    pub fn nodes(self) -> &'static str {
        match self {
            Place::LocalSimulated => "simulated",
            Place::LocalReal => "real",
            Place::Kubeconfig => "the cluster's own",
        }
    }

    /// How a user gets there.
    fn how(self) -> &'static str {
        match self {
            Place::LocalSimulated => "the local cluster's simulated nodes (the default)",
            Place::LocalReal => "the local cluster's real nodes (--node-kind real)",
            Place::Kubeconfig => "a kubeconfig cluster (--cluster kubeconfig; kind is one)",
        }
    }

    /// A column heading of the generated reference.
    fn heading(self) -> &'static str {
        match self {
            Place::LocalSimulated => "local, simulated nodes",
            Place::LocalReal => "local, real nodes",
            Place::Kubeconfig => "kubeconfig (kind or any)",
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cluster {}, nodes {}", self.cluster(), self.nodes())
    }
}

const EVERYWHERE: &[Place] = &Place::ALL;
const LOCAL: &[Place] = &[Place::LocalSimulated, Place::LocalReal];
const SIMULATED: &[Place] = &[Place::LocalSimulated];
const LOCAL_REAL: &[Place] = &[Place::LocalReal];
const KUBECONFIG: &[Place] = &[Place::Kubeconfig];
const REAL_NODES: &[Place] = &[Place::LocalReal, Place::Kubeconfig];
/// Any driver under test.
const ANY: &[Mode] = &[];
/// The drivers the interposer can stand in front of: those the runner
/// deploys itself.
const DEPLOYED: &[Mode] = &[
    Mode::Builtin,
    Mode::RealNodes,
    Mode::Manifests,
    Mode::SimulatedNodes,
];

/// What a given option is, beyond where: its values and the run around it,
/// for the entries whose verdict depends on them.
pub struct Given<'a> {
    pub place: Place,
    /// The values as typed (none for a flag).
    pub values: Vec<String>,
    /// The image references each `--image-archive` holds.
    pub archives: &'a [(PathBuf, Vec<String>)],
    /// The proxy image, when `--proxy-image` was given.
    pub proxy_image: Option<&'a str>,
    /// The text of the driver profile's manifests (what images they name).
    pub manifests: &'a str,
    /// `--interpose` was given.
    pub interpose: bool,
}

/// A verdict finer than the place: refused with a reason, or taken with a
/// note said once in the run's opening lines.
#[derive(Debug, PartialEq, Eq)]
pub enum Finer {
    Refuse(String),
    Note(String),
}

/// One option of one command and where it applies.
#[derive(Clone)]
pub struct Opt {
    /// The command: `""` for the run, else as typed (`"cluster up"`).
    pub command: &'static str,
    /// As typed: `--image-archive`, or `-v` for an option without a long name.
    pub flag: &'static str,
    /// Where it takes effect. A command of the local cluster (`setup`,
    /// `cluster up`) is at the local place of its own `--node-kind`; the
    /// other commands reach no cluster, and all their options apply.
    pub places: &'static [Place],
    /// The driver deployments (the profile's `deployment.mode`) it takes
    /// effect with; empty: any.
    pub modes: &'static [Mode],
    /// Why it does nothing elsewhere: said when it is refused.
    pub elsewhere: &'static str,
    /// What it means, for the reference.
    pub meaning: &'static str,
    /// Arguments that give it in a test.
    pub example: &'static [&'static str],
    /// A verdict depending on the value, where the place is right.
    pub finer: Option<fn(&Given) -> Option<Finer>>,
}

impl Opt {
    pub fn applies(&self, place: Place, mode: Option<Mode>) -> bool {
        self.places.contains(&place)
            && (self.modes.is_empty() || mode.is_none_or(|m| self.modes.contains(&m)))
    }

    /// Where it applies, in words.
    pub fn where_text(&self) -> String {
        let places = if self.places == EVERYWHERE {
            "every cluster".to_owned()
        } else {
            self.places
                .iter()
                .map(|p| p.how())
                .collect::<Vec<_>>()
                .join(" and ")
        };
        match self.modes {
            [] => places,
            modes => format!(
                "{places}, with a driver whose deployment.mode is {}",
                modes
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

macro_rules! opt {
    ($command:expr, $flag:expr, $places:expr, $modes:expr, $example:expr, $elsewhere:expr, $meaning:expr $(, $finer:expr)?) => {
        Opt {
            command: $command,
            flag: $flag,
            places: $places,
            modes: $modes,
            example: $example,
            elsewhere: $elsewhere,
            meaning: $meaning,
            finer: opt!(@finer $($finer)?),
        }
    };
    (@finer) => { None };
    (@finer $f:expr) => { Some($f) };
}

/// Why a local-cluster option does nothing on a kubeconfig cluster.
const NOT_STARTED: &str = "a kubeconfig cluster is not started by the runner: it has the \
                           nodes, components and settings it was made with";

// After `opt!`, which the tables are written in.
mod command_options;
mod files;
mod reference;
mod refusals;
mod run_options;
mod tree;

pub use files::{Archive, archive_kind, check_features};
pub use reference::{BEGIN, END, OptionsArgs, cli_main, generated_part, markdown};
pub use refusals::{REFUSAL_EXIT, Refusal, check_command, check_run, refusals_at};
pub use tree::differences;

/// Every option of every command, and where it applies. A test walks the
/// command tree and fails for an option missing here.
pub static TABLE: &[Opt] = &JOINED;

/// How many options the table holds.
const LEN: usize = run_options::OPTIONS.len() + command_options::OPTIONS.len();

/// The run's options, then the commands', as one array: joined when the
/// program is built, so that [`TABLE`] stays a plain slice.
static JOINED: [Opt; LEN] = joined([run_options::OPTIONS, command_options::OPTIONS]);

/// Copies field by field: a const fn can move nothing out of a slice, and
/// `Opt` is no `Copy`.
const fn joined<const N: usize>(groups: [&[Opt]; 2]) -> [Opt; N] {
    const BLANK: Opt = opt!("", "", &[], ANY, &[], "", "");
    let mut out = [BLANK; N];
    let mut n = 0;
    let mut g = 0;
    while g < groups.len() {
        let mut i = 0;
        while i < groups[g].len() {
            let o = &groups[g][i];
            out[n] = Opt {
                command: o.command,
                flag: o.flag,
                places: o.places,
                modes: o.modes,
                elsewhere: o.elsewhere,
                meaning: o.meaning,
                example: o.example,
                finer: o.finer,
            };
            n += 1;
            i += 1;
        }
        g += 1;
    }
    assert!(n == N, "the table's length is the sum of its groups'");
    out
}

/// The table's entry for `flag` of `command`.
pub fn entry(command: &str, flag: &str) -> Option<&'static Opt> {
    TABLE
        .iter()
        .find(|o| o.command == command && o.flag == flag)
}

#[cfg(test)]
mod tests;
