//! What is checked and built before the cluster starts: the report paths
//! can be written, the programs the local cluster runs are in the cache
//! (built when they are not), the feature gates the scenarios are tagged
//! with are ones the control plane runs with, and the driver's profile
//! loads. Each fails the run in its first seconds with one message, not
//! after a cluster start.
use std::path::Path;

use anyhow::Context as _;

use super::cli::RunArgs;
use super::selection::Typed;
use super::{preflight, setup};

/// Where the local cluster's built programs are (`None`: not the local
/// cluster, or not real nodes).
#[derive(Debug, Default)]
pub(super) struct Built {
    pub(super) control_plane: Option<std::path::PathBuf>,
    pub(super) node: Option<std::path::PathBuf>,
}

/// Report and artifact paths are usable, the versions asked for fit the
/// cluster, and the local cluster's sockets fit in the temp dir: checked
/// before anything starts; then what the local cluster runs is built.
pub(super) async fn check_outputs_and_host(args: &RunArgs, typed: &Typed) -> anyhow::Result<Built> {
    if let Some(p) = &args.junit {
        preflight::check_output_file("--junit", p)?;
    }
    if let Some(p) = &args.cucumber_json {
        preflight::check_output_file("--cucumber-json", p)?;
    }
    if let Some(p) = &args.html {
        preflight::check_output_file("--html", p)?;
    }
    preflight::check_output_dir("--artifacts", &args.artifacts)?;
    let local = args.cluster.is_local(args.kubeconfig.as_deref());
    let real = args.node_kind == crate::cluster::NodeKind::Real;
    args.versions.check()?;
    if !local {
        return Ok(Built::default());
    }
    if !real {
        preflight::check_temp_dir(&std::env::temp_dir(), args.nodes)?;
    }
    // The hint to build them belongs to this error only.
    // Found from the environment variable, it is said to be.
    let explicit = args
        .binaries_dir
        .as_deref()
        .filter(|_| !typed.binaries_dir_from_env);
    let explicit = explicit.map(Path::to_owned);
    let versions = args.versions.clone();
    // Builds what is missing from the cache (the first run on a machine, or
    // the first with another version).
    tokio::task::spawn_blocking(move || {
        use setup::Part;
        let control_plane = setup::ensure(
            Part::ControlPlane,
            explicit.as_deref(),
            versions.for_part(Part::ControlPlane),
        )?;
        let node = match real {
            true => Some(setup::ensure(
                Part::Node,
                None,
                versions.for_part(Part::Node),
            )?),
            false => None,
        };
        anyhow::Ok(Built {
            control_plane: Some(control_plane),
            node,
        })
    })
    .await
    .context("the build task ended early")?
    .map_err(|e| {
        anyhow::anyhow!(
            "{e:#}; or run against a real cluster with --cluster kubeconfig --kubeconfig FILE"
        )
    })
}

/// Splits the gates the selected scenarios are tagged with (`added`, already
/// in `gates`) by whether the control plane at `dir` runs with them: those it
/// refuses (a newer release's gate, or one whose dependencies this release
/// keeps off) are taken out of `gates` and returned with why, so that their
/// scenarios are skipped saying so instead of the API server refusing to
/// start. A gate the user set that it refuses is an error.
pub(super) fn refused_gates(
    dir: &Path,
    gates: &mut Vec<String>,
    added: &[String],
) -> anyhow::Result<Vec<(String, String)>> {
    let apiserver = dir.join(crate::cluster::local::binaries::KUBE_APISERVER);
    let named: Vec<(&str, bool)> = gates
        .iter()
        .filter_map(|g| g.split_once('='))
        .map(|(g, v)| (g.trim(), v.trim().eq_ignore_ascii_case("true")))
        .collect();
    let mut refused = crate::cluster::local::gates_refused_by(
        &apiserver,
        crate::cluster::local::GateProbe::ApiServer,
        &named,
    )
    .with_context(|| {
        format!(
            "asking {} which feature gates it takes",
            apiserver.display()
        )
    })?;
    // A gate the API server takes may still need a controller this
    // release's kube-controller-manager does not have.
    let kcm = dir.join(crate::cluster::local::binaries::KUBE_CONTROLLER_MANAGER);
    let controllers = crate::cluster::local::components::known_controllers(&kcm)
        .with_context(|| format!("asking {} which controllers it has", kcm.display()))?;
    // A help text this parser does not understand lists nothing: then no
    // gate is refused for a controller rather than every one.
    for (gate, on) in named.iter().filter(|_| !controllers.is_empty()) {
        let missing: Vec<String> = crate::cluster::local::components::controllers_for_gate(gate)
            .iter()
            .filter(|c| !controllers.iter().any(|k| k == *c))
            .map(|c| (*c).to_owned())
            .collect();
        if *on && !missing.is_empty() && !refused.iter().any(|(r, _)| r == gate) {
            refused.push((
                (*gate).to_owned(),
                crate::cluster::local::GateRefusal::NeedsController(missing),
            ));
        }
    }
    let version = crate::cluster::host::kube_version::program_version(&apiserver)
        .map_or_else(|| "this release".to_owned(), |v| format!("Kubernetes {v}"));
    if let Some((gate, why)) = refused.iter().find(|(g, _)| !added.contains(g)) {
        anyhow::bail!(
            "--feature-gates {gate}: the local control plane ({version}, {}) will not run with \
             it: it {why}",
            dir.display()
        );
    }
    gates.retain(|g| {
        !refused
            .iter()
            .any(|(r, _)| g.split('=').next().map(str::trim) == Some(r))
    });
    let refused: Vec<(String, String)> = refused
        .into_iter()
        .map(|(g, why)| (g, format!("{why} in {version}")))
        .collect();
    for (gate, why) in &refused {
        crate::report::note!("dra-e2e: feature gate {gate} {why}: its scenarios are skipped");
    }
    Ok(refused)
}

/// The profile of the driver a run tests: `--profile FILE`, KEP-5970's
/// `--driver-name` and `--device-class`, or none (the suite's own driver).
pub(super) fn driver_profile(args: &RunArgs) -> anyhow::Result<Option<crate::profile::Profile>> {
    use crate::profile::{Options, Profile};
    if let Some(path) = &args.driver.profile {
        return Ok(Some(Profile::load(path, Options { check_files: true })?));
    }
    if let (Some(name), Some(class)) = (&args.driver.driver_name, &args.driver.device_class) {
        let defaulted = Profile::from_flags(name, class)?;
        crate::report::note!("dra-e2e: {defaulted}");
        return Ok(Some(defaulted.profile));
    }
    Ok(None)
}
