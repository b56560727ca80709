//! `dra-e2e profile`: checking a driver profile, showing the profile
//! KEP-5970's two flags stand for, writing one from a driver's rendered
//! manifests, and printing the JSON Schema editors check one with. None
//! needs a cluster, so a profile can be got right before any run uses it.
use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Subcommand;

use crate::profile::init::{self, Archive, Choices, Manifest};
use crate::profile::{Annotations, Options, Profile, ProfileError, schema};

/// The options of `dra-e2e profile`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Check a driver profile, print the one --driver-name stands for, write one from a \
             driver's manifests, or print the profiles' JSON Schema",
    long_about = "Driver profiles say which DRA driver is under test (docs/driver-profile.md). \
                  Check one, print the profile KEP-5970's --driver-name and --device-class \
                  stand for, write one from the driver's rendered manifests (profile init), \
                  or print the JSON Schema that editors complete and check profiles with \
                  (profile schema)."
)]
pub struct ProfileArgs {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a profile file: every mistake with its line and field; exit
    /// status 1 when there is any.
    Check {
        /// The profile file.
        file: PathBuf,
        /// Do not require the manifests, image archives and program the
        /// profile names to exist (for files a build has yet to produce).
        #[arg(long)]
        no_files: bool,
    },
    /// Print the profile of a driver already installed in the kubeconfig
    /// cluster (KEP-5970's invocation), with what was defaulted.
    Show {
        /// The name of the installed driver.
        #[arg(long, value_name = "NAME")]
        driver_name: String,
        /// The DeviceClass that selects the driver's devices.
        #[arg(long, value_name = "CLASS")]
        device_class: String,
    },
    /// Write the profile of a driver from its rendered manifests (`helm
    /// template` output): the kubelet plugin's DaemonSet and the
    /// DeviceClass say its name, class, registration and device-count
    /// settings; what they cannot say is written commented out to fill in.
    Init {
        /// The manifest files, in the order the runner is to apply them.
        #[arg(long, value_name = "FILE", num_args = 1.., required = true)]
        manifests: Vec<PathBuf>,
        /// An image archive holding the manifests' images (as the run's
        /// --image-archive takes them); repeatable.
        #[arg(long, value_name = "FILE")]
        image_archive: Vec<PathBuf>,
        /// Write the profile to OUT (its paths relative to OUT's directory)
        /// instead of stdout.
        #[arg(short = 'o', long = "out", value_name = "OUT")]
        out: Option<PathBuf>,
        /// Overwrite OUT when it exists.
        #[arg(long, requires = "out")]
        force: bool,
        /// The DaemonSet running the kubelet plugin, when several look like one.
        #[arg(long, value_name = "NAME")]
        daemonset: Option<String>,
        /// The driver's name, when no DeviceClass of the manifests names it.
        #[arg(long, value_name = "NAME")]
        driver_name: Option<String>,
        /// The DeviceClass to use, when the manifests have several.
        #[arg(long, value_name = "CLASS")]
        device_class: Option<String>,
        /// The JSON Schema the profile's first line names for editors (`#
        /// yaml-language-server: $schema=REF`): a path relative to the
        /// profile, or a URL (`profile schema --out` writes the file).
        #[arg(long, value_name = "REF", default_value = DEFAULT_SCHEMA)]
        schema: String,
    },
    /// Print the JSON Schema (draft-07) of profile files, generated from
    /// the fields `profile check` knows: editors with YAML support complete
    /// and check a profile whose first line is `# yaml-language-server:
    /// $schema=PATH`.
    Schema {
        /// Write the schema to OUT instead of stdout.
        #[arg(short = 'o', long = "out", value_name = "OUT")]
        out: Option<PathBuf>,
    },
}

/// What `profile init` names as the schema: a file beside the profile.
const DEFAULT_SCHEMA: &str = "profile.schema.json";

/// Runs `dra-e2e profile ARGS`; returns the exit status.
pub fn cli_main(args: ProfileArgs) -> anyhow::Result<i32> {
    match args.command {
        Command::Check { file, no_files } => {
            let options = Options {
                check_files: !no_files,
            };
            match Profile::load(&file, options) {
                Ok(p) => {
                    let n = p.capabilities.len();
                    println!(
                        "{}: no mistakes: driver {}, deployment mode {}, {n} optional \
                         capabilit{} claimed{}",
                        file.display(),
                        p.driver_name,
                        p.deployment.mode(),
                        if n == 1 { "y" } else { "ies" },
                        if no_files {
                            " (the files it names were not checked)"
                        } else {
                            ""
                        }
                    );
                    Ok(0)
                }
                Err(ProfileError::Mistakes { path, mistakes }) => {
                    for m in &mistakes {
                        eprintln!("{}: {m}", path.display());
                    }
                    let n = mistakes.len();
                    eprintln!(
                        "{}: {n} mistake{}",
                        path.display(),
                        if n == 1 { "" } else { "s" }
                    );
                    Ok(1)
                }
                Err(e) => Err(e.into()),
            }
        }
        Command::Show {
            driver_name,
            device_class,
        } => {
            let d = Profile::from_flags(&driver_name, &device_class)?;
            let annotations = Annotations {
                header: d.to_string().lines().map(str::to_owned).collect(),
                ..Annotations::default()
            };
            print!("{}", d.profile.to_annotated_yaml(&annotations));
            Ok(0)
        }
        Command::Init {
            manifests,
            image_archive,
            out,
            force,
            daemonset,
            driver_name,
            device_class,
            schema,
        } => {
            let choices = Choices {
                daemonset,
                driver_name,
                device_class,
                schema: Some(schema),
            };
            init_profile(&manifests, &image_archive, out.as_deref(), force, &choices)
        }
        Command::Schema { out } => {
            let text = schema::text();
            match out {
                Some(o) => std::fs::write(&o, text)
                    .with_context(|| format!("--out {}: cannot write it", o.display()))?,
                None => print!("{text}"),
            }
            Ok(0)
        }
    }
}

/// `profile init`: reads the manifests (and the archives' image names),
/// writes the profile to `out` or stdout, and says the warnings on stderr.
fn init_profile(
    manifests: &[PathBuf],
    archives: &[PathBuf],
    out: Option<&Path>,
    force: bool,
    choices: &Choices,
) -> anyhow::Result<i32> {
    if let Some(o) = out
        && o.exists()
        && !force
    {
        bail!(
            "--out {}: exists already; give --force to overwrite it",
            o.display()
        );
    }
    // Paths in the profile are relative to its directory: OUT's, or the
    // current one for stdout.
    let cwd = std::env::current_dir().context("the current directory")?;
    let base = match out.and_then(Path::parent) {
        Some(p) if !p.as_os_str().is_empty() => cwd.join(p),
        _ => cwd.clone(),
    };
    let mut read = Vec::new();
    for m in manifests {
        let text = std::fs::read_to_string(m)
            .with_context(|| format!("--manifests {}: cannot read it", m.display()))?;
        read.push(Manifest {
            path: relative(&base, &cwd.join(m)),
            shown: m.display().to_string(),
            text,
        });
    }
    let mut held = Vec::new();
    for a in archives {
        // check_command has looked into it already; a refusal here is
        // for a file that changed since.
        let kind = super::options::archive_kind(a).map_err(|r| anyhow::anyhow!("{}", r.0))?;
        held.push(Archive {
            path: relative(&base, &cwd.join(a)),
            refs: kind.refs,
        });
    }
    let made = init::init(&read, &held, choices)?;
    for w in &made.warnings {
        eprintln!("warning: {w}");
    }
    let text = made.profile.to_annotated_yaml(&made.annotations);
    match out {
        Some(o) => {
            std::fs::write(o, &text).with_context(|| format!("--out {}", o.display()))?;
            eprintln!(
                "{}: the profile of driver {}; fill in its commented fields, then `dra-e2e \
                 profile check {}`",
                o.display(),
                made.profile.driver_name,
                o.display()
            );
            if let Some(missing) = missing_schema(&base, choices.schema.as_deref()) {
                eprintln!(
                    "{}: its first line names the schema {} for editors; `dra-e2e profile \
                     schema --out {}` writes it",
                    o.display(),
                    missing.display(),
                    missing.display()
                );
            }
        }
        None => print!("{text}"),
    }
    Ok(0)
}

/// The schema file a profile in directory `base` names, when it names a
/// file (not a URL) that is not there, as a path to give `--out`.
fn missing_schema(base: &Path, reference: Option<&str>) -> Option<PathBuf> {
    let reference = reference?;
    if reference.contains("://") {
        return None;
    }
    let path = base.join(reference);
    if path.exists() {
        return None;
    }
    // Shown relative to the current directory when it is below it.
    let cwd = std::env::current_dir().ok()?;
    Some(
        path.strip_prefix(&cwd)
            .map_or(path.clone(), Path::to_path_buf),
    )
}

/// `to` relative to directory `from` (both absolute), lexically: `..` as
/// often as needed, symlinks not resolved.
fn relative(from: &Path, to: &Path) -> PathBuf {
    fn clean(p: &Path) -> Vec<Component<'_>> {
        let mut out: Vec<Component> = Vec::new();
        for c in p.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                c => out.push(c),
            }
        }
        out
    }
    let (from, to) = (clean(from), clean(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to[common..] {
        rel.push(c);
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_relative_to_the_profiles_directory() {
        assert_eq!(
            relative(
                Path::new("/w/profiles"),
                Path::new("/w/target/d/../d/m.yaml")
            ),
            Path::new("../target/d/m.yaml")
        );
        assert_eq!(
            relative(Path::new("/w"), Path::new("/w/./m.yaml")),
            Path::new("m.yaml")
        );
    }
}
