//! Refusing an option given where it does nothing: the run and the
//! commands judge every option typed against the table, at the place the
//! run is and with the driver it tests, and stop with one message naming
//! all of them, before anything starts.
use std::fmt;
use std::path::{Path, PathBuf};

use super::files::{archive_kind, check_run_files};
use super::tree::given;
use super::{Finer, Given, Opt, Place, TABLE, entry};
use crate::cluster::NodeKind;
use crate::profile::Mode;

/// An option refused where it was given: the run stops before anything
/// starts, with exit status 2 (a usage error, as clap's).
#[derive(Debug)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// The exit status of a refusal.
pub const REFUSAL_EXIT: u8 = 2;

/// The refusal of `flag` (typed with `values`) where `place` and `mode`
/// are, by `table`; `None` where it applies.
fn refusal(
    table: &[Opt],
    command: &str,
    flag: &str,
    values: &[String],
    place: Place,
    mode: Option<Mode>,
) -> Option<Refusal> {
    let o = table
        .iter()
        .find(|o| o.command == command && o.flag == flag)?;
    if o.applies(place, mode) {
        return None;
    }
    let typed = match values {
        [] => flag.to_owned(),
        vs => format!("{flag} {}", vs.join(",")),
    };
    let here = match (o.places.contains(&place), mode) {
        (false, _) | (true, None) => format!("this run is on {place}"),
        (true, Some(m)) => {
            format!("this run is on {place}, with a driver whose deployment.mode is {m}")
        }
    };
    let command = match command {
        "" => String::new(),
        c => format!("dra-e2e {c} "),
    };
    Some(Refusal(format!(
        "{command}{typed}: does nothing here: {here}, and {}. It applies on {} only; drop it, \
         or run there",
        o.elsewhere,
        o.where_text()
    )))
}

/// The refusals of the run's options given in `matches` (parsed by
/// [`crate::runner::cli::try_parse_from`]) at `place` with a driver of `mode`, by
/// `table`. An option the table lacks is taken (a test keeps the table
/// whole).
pub fn refusals_at(
    table: &[Opt],
    matches: &clap::ArgMatches,
    place: Place,
    mode: Option<Mode>,
) -> Vec<Refusal> {
    given(&crate::runner::cli::command(), matches)
        .iter()
        .filter_map(|(flag, values)| refusal(table, "", flag, values, place, mode))
        .collect()
}

/// Every refusal at once, one a line: a user who gave several options
/// that do nothing learns of all of them in one go.
fn all(refusals: Vec<Refusal>) -> Result<(), Refusal> {
    match refusals.as_slice() {
        [] => Ok(()),
        rs => Err(Refusal(
            rs.iter()
                .map(|r| r.0.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        )),
    }
}

/// The run's options: refuses any given where it does nothing (by the
/// table), then checks the files they name; returns the notes to say once
/// in the run's opening lines.
pub fn check_run(
    args: &crate::runner::cli::RunArgs,
    matches: &clap::ArgMatches,
) -> Result<Vec<String>, Refusal> {
    let root = crate::runner::cli::command();
    let place = Place::of(
        args.cluster.is_local(args.kubeconfig.as_deref()),
        args.node_kind,
    );
    let given = given(&root, matches);
    // Where first: an option that does nothing here is refused as such,
    // whatever its file is.
    // `auto` chose the cluster: say how, the user did not.
    let auto = match (args.cluster, place) {
        (crate::cluster::ClusterChoice::Auto, Place::Kubeconfig) => {
            " (--cluster auto chose the kubeconfig cluster: --kubeconfig, KUBECONFIG or \
             ~/.kube/config names one; --cluster local runs on the local cluster)"
        }
        (crate::cluster::ClusterChoice::Auto, _) => {
            " (--cluster auto chose the local cluster: no kubeconfig names a cluster)"
        }
        _ => "",
    };
    all(refusals_at(TABLE, matches, place, None)).map_err(|r| Refusal(format!("{}{auto}", r.0)))?;
    check_run_files(args, matches)?;
    let profile = match &args.driver.profile {
        Some(p) => Some(
            crate::profile::Profile::load(p, crate::profile::Options { check_files: false })
                .map_err(|e| Refusal(format!("--profile {}: {e}", p.display())))?,
        ),
        None => None,
    };
    // --driver-name makes an Installed profile (KEP-5970's defaults).
    let mode = match (&profile, &args.driver.driver_name) {
        (Some(p), _) => Some(p.deployment.mode()),
        (None, Some(_)) => Some(Mode::Installed),
        (None, None) => None,
    };
    all(refusals_at(TABLE, matches, place, mode))?;
    let archives = args
        .image_archive
        .iter()
        .map(|p| archive_kind(p).map(|k| (p.clone(), k.refs)))
        .collect::<Result<Vec<_>, _>>()?;
    let manifests = manifests_text(profile.as_ref());
    let proxy_image = given
        .iter()
        .find(|(f, _)| f == "--proxy-image")
        .and_then(|(_, v)| v.first().map(String::as_str));
    let mut notes = Vec::new();
    for (flag, values) in &given {
        let Some(finer) = entry("", flag).and_then(|o| o.finer) else {
            continue;
        };
        let g = Given {
            place,
            values: values.clone(),
            archives: &archives,
            proxy_image,
            manifests: &manifests,
            interpose: args.interpose,
        };
        match finer(&g) {
            Some(Finer::Refuse(why)) => {
                return Err(Refusal(format!(
                    "{flag} {}: refused here: this run is on {place}: {why}",
                    values.join(",")
                )));
            }
            Some(Finer::Note(n)) => notes.push(n),
            None => {}
        }
    }
    Ok(notes)
}

/// The manifests a profile deploys, as one text (to find image names in).
fn manifests_text(profile: Option<&crate::profile::Profile>) -> String {
    use crate::profile::Deployment;
    let paths: &[PathBuf] = match profile.map(|p| &p.deployment) {
        Some(Deployment::RealNodes { manifests, .. } | Deployment::Manifests { manifests }) => {
            manifests
        }
        _ => &[],
    };
    paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A command's options (`setup`, `cluster up`, ...): refuses any given
/// where it does nothing, at the local place of the command's own
/// `--node-kind`, and checks the image archives it names.
pub fn check_command(matches: &clap::ArgMatches) -> Result<(), Refusal> {
    let root = crate::runner::cli::command();
    let mut cmd = &root;
    let mut m = matches;
    let mut path: Vec<String> = Vec::new();
    while let Some((name, sub)) = m.subcommand() {
        let Some(c) = cmd.find_subcommand(name) else {
            break;
        };
        path.push(name.to_owned());
        cmd = c;
        m = sub;
    }
    let command = path.join(" ");
    let real = cmd.get_arguments().any(|a| a.get_id() == "node_kind")
        && m.get_one::<NodeKind>("node_kind") == Some(&NodeKind::Real);
    let place = Place::of(
        true,
        if real {
            NodeKind::Real
        } else {
            NodeKind::Simulated
        },
    );
    let given = given(cmd, m);
    all(given
        .iter()
        .filter_map(|(flag, values)| refusal(TABLE, &command, flag, values, place, None))
        .collect())?;
    for (flag, values) in given {
        if flag == "--image-archive" {
            for v in &values {
                archive_kind(Path::new(v))?;
            }
        }
    }
    Ok(())
}
