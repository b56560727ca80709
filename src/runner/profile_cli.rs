//! `dra-e2e profile`: checking a driver profile, and showing the profile
//! KEP-5970's two flags stand for. Neither needs a cluster, so a profile
//! can be got right before any run uses it.
use std::path::PathBuf;

use clap::Subcommand;

use crate::profile::{Options, Profile, ProfileError};

/// The options of `dra-e2e profile`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Check a driver profile, or print the one --driver-name stands for",
    long_about = "Driver profiles say which DRA driver is under test (docs/driver-profile.md). \
                  Check one, or print the profile KEP-5970's --driver-name and --device-class \
                  stand for."
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
}

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
            for line in d.to_string().lines() {
                println!("# {line}");
            }
            print!("{}", d.profile.to_yaml());
            Ok(0)
        }
    }
}
