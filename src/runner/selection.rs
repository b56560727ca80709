//! What the run is to run: the feature files read once, the scenarios
//! `--tags`, `--name` and `--shard` select, and the run's refusal of a
//! selection that would test nothing. Decided before any cluster starts,
//! so that a typo costs a second, not a cluster start.
use crate::report;

use super::history::History;
use super::{Opts, chaos, feature_source, features};

/// What the run is to run: the features (sharded), how many scenarios they
/// select, and the titles the suite's files share (for the reports).
pub(super) struct Selection {
    pub(super) features: Vec<cucumber::gherkin::Feature>,
    pub(super) count: usize,
    pub(super) shared: report::collect::SharedTitles,
    /// Earlier runs' durations, which ordered `features`; this run's are
    /// added at its end.
    pub(super) history: History,
    /// Where the conformance pack's scenarios are.
    pub(super) pack: std::collections::BTreeSet<report::conformance::Place>,
    /// The profile of the driver they test (`None`: the suite's own).
    pub(super) driver: Option<crate::profile::Profile>,
    /// Tagged gates the cluster's Kubernetes will not run with, and why.
    pub(super) refused_gates: Vec<(String, String)>,
    /// How many selected scenarios own their nodes (`@OwnNodes`).
    pub(super) own_nodes: usize,
    /// Control-plane and kubelet restarts during the scenarios ([`chaos`]).
    pub(super) restarts: Vec<chaos::Planned>,
}

/// Options as typed where the parsed form does not show them.
#[derive(Default)]
pub(super) struct Typed {
    /// cucumber's `--input GLOB`.
    pub(super) input: Option<String>,
    /// `--tags EXPR` (or `CUCUMBER_FILTER_TAGS`).
    pub(super) tags: Option<String>,
    /// `--binaries-dir` came from its environment variable.
    pub(super) binaries_dir_from_env: bool,
}

impl Typed {
    pub(super) fn from_matches(matches: &clap::ArgMatches) -> Self {
        let raw = |id: &str| {
            matches
                .try_get_raw(id)
                .ok()
                .flatten()
                .and_then(|mut v| v.next())
                .map(|v| v.to_string_lossy().into_owned())
        };
        Typed {
            input: raw("input"),
            tags: raw("tags"),
            binaries_dir_from_env: matches.value_source("binaries_dir")
                == Some(clap::parser::ValueSource::EnvVariable),
        }
    }
}

/// The features to run (see [`features::load`]), or one error listing
/// every problem.
pub(super) fn load_features(
    opts: &Opts,
    typed: &Typed,
) -> anyhow::Result<Vec<cucumber::gherkin::Feature>> {
    feature_source::load(
        &opts.custom.feature_sources(),
        typed.input.as_deref(),
        &opts.parser,
    )
    .map_err(feature_source::one_error)
}

/// What the run reads its scenarios from, for messages.
fn source_description(opts: &Opts, typed: &Typed) -> String {
    match &typed.input {
        Some(glob) => format!("--input {glob}"),
        None => opts
            .custom
            .feature_sources()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The scenarios `--tags` / `--name` select.
pub(super) fn selection(
    opts: &Opts,
    parsed: &[cucumber::gherkin::Feature],
) -> Vec<features::ScenarioRef> {
    features::scenarios(parsed)
        .into_iter()
        .filter(|s| features::selected(opts.tags_filter.as_ref(), opts.re_filter.as_ref(), s))
        .collect()
}

/// Refuses options that would make the run test nothing or hang, and tags
/// that are typos; returns the selected scenarios.
pub(super) fn check_selection(
    opts: &Opts,
    parsed: &[cucumber::gherkin::Feature],
) -> anyhow::Result<Vec<features::ScenarioRef>> {
    if opts.runner.concurrency == Some(0) {
        anyhow::bail!("--concurrency 0 would never start a scenario; give 1 or more");
    }
    if let Some(op) = &opts.tags_filter {
        let unknown = features::unknown_expression_tags(op, parsed);
        if !unknown.is_empty() {
            let (s, it) = if unknown.len() > 1 {
                ("s", "them")
            } else {
                ("", "it")
            };
            anyhow::bail!(
                "--tags: unknown tag{s} {} (no scenario has {it} and the suite does not know {it}; \
                 docs/tags.md lists the tags)",
                unknown.join(", ")
            );
        }
    }
    Ok(selection(opts, parsed))
}

/// The message of a run that selected no scenario.
pub(super) fn nothing_selected(opts: &Opts, typed: &Typed, total: usize) -> String {
    if let Some(shard) = opts.custom.shard {
        return format!(
            "no scenario to run: shard {shard} holds none of the selected scenarios in {} \
             (pass --allow-empty to accept an empty run)",
            source_description(opts, typed)
        );
    }
    let filter = match (&typed.tags, &opts.re_filter) {
        (Some(t), _) => format!("--tags '{t}'"),
        (None, Some(re)) => format!("--name '{}'", re.as_str()),
        (None, None) => {
            return format!(
                "no scenario to run: {} holds none (pass --allow-empty to accept an empty run)",
                source_description(opts, typed)
            );
        }
    };
    format!(
        "no scenario to run: {filter} selects none of the {total} scenarios in {} \
         (pass --allow-empty to accept an empty run)",
        source_description(opts, typed)
    )
}

pub(super) fn list(selected: &[features::ScenarioRef]) {
    for s in selected {
        let tags: Vec<String> = s.tags.iter().map(|t| format!("@{t}")).collect();
        println!(
            "{}:{}  {}{}  {}",
            s.path.display(),
            s.line,
            s.rule
                .as_ref()
                .map(|r| format!("{r} / "))
                .unwrap_or_default(),
            s.name,
            tags.join(" ")
        );
    }
    println!("{} scenarios", selected.len());
}
