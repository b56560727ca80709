//! Where the `dra-e2e-agent` program is: the small binary that is process 1
//! of every real node and the program of the proxy image. `cargo run` builds
//! only the runner, so the agent is looked for and, where this is a checkout
//! the runner was built from, built the same way, once.
//!
//! In order: `DRA_E2E_AGENT` (a path; an error if it is empty or not an
//! executable; the local cluster's socket agents use it too),
//! `dra-e2e-agent` beside the running program (or beside the test binary's
//! `deps/` directory), else `cargo build --bin dra-e2e-agent` into the target
//! directory the running program came from, when that checkout and `cargo`
//! are there.
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::binaries::is_executable;

/// Environment variable naming the agent program explicitly.
pub const AGENT_ENV: &str = "DRA_E2E_AGENT";
/// The agent's file name, as Cargo builds it.
pub const AGENT_PROGRAM: &str = "dra-e2e-agent";

/// The workspace this code was built from: the agent is built there.
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{AGENT_ENV}={0}: not an executable file")]
    NotExecutable(PathBuf),
    #[error("{AGENT_ENV} is set but empty: unset it, or name a dra-e2e-agent program")]
    Empty,
    #[error(
        "{AGENT_PROGRAM} is not beside {exe} and cannot be built here ({why}); build it with \
         `cargo build --bin dra-e2e-agent` in the dra-e2e checkout, or name it with {AGENT_ENV}"
    )]
    Missing { exe: String, why: String },
    #[error(
        "cannot run Cargo ({cargo}) to build {AGENT_PROGRAM}: {source}; build it with `cargo \
         build --bin dra-e2e-agent`, or name it with {AGENT_ENV}"
    )]
    Cargo {
        cargo: String,
        #[source]
        source: std::io::Error,
    },
    #[error("building {AGENT_PROGRAM} with `{command}` failed ({status}); its output is above")]
    Build { command: String, status: String },
    #[error("`{command}` succeeded but {path} is not there")]
    NotBuilt { command: String, path: PathBuf },
}

/// The agent program, built first if needed (see the module docs).
pub fn agent_program() -> Result<PathBuf, AgentError> {
    let exe = std::env::current_exe().ok();
    locate(
        |k| std::env::var_os(k),
        exe.as_deref(),
        Path::new(WORKSPACE),
        build,
    )
}

/// [`agent_program`] with its inputs given: the environment, the running
/// program and the checkout, and how to build.
fn locate(
    env: impl Fn(&str) -> Option<OsString>,
    exe: Option<&Path>,
    workspace: &Path,
    build: impl FnOnce(&Path, &Path, &str) -> Result<(), AgentError>,
) -> Result<PathBuf, AgentError> {
    if let Some(path) = env(AGENT_ENV) {
        if path.is_empty() {
            return Err(AgentError::Empty);
        }
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(AgentError::NotExecutable(path))
        };
    }
    let shown = exe.map_or_else(
        || "the running program".to_owned(),
        |e| e.display().to_string(),
    );
    let Some(dir) = exe.and_then(Path::parent) else {
        return Err(AgentError::Missing {
            exe: shown,
            why: "the running program's path is unknown".into(),
        });
    };
    // Test binaries live in `<target>/<profile>/deps`, programs one up.
    let profile_dir = if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    for candidate in [dir.join(AGENT_PROGRAM), profile_dir.join(AGENT_PROGRAM)] {
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    if !workspace.join("crates/agent/Cargo.toml").is_file() {
        return Err(AgentError::Missing {
            exe: shown,
            why: format!("no dra-e2e checkout at {}", workspace.display()),
        });
    }
    // Any directory has a parent and a name: only Cargo's own profile
    // directories (with its `.fingerprint`) say where and how to build. A
    // runner copied elsewhere would otherwise ask Cargo for a profile named
    // after the directory it was copied to.
    let (true, Some(target), Some(profile)) = (
        profile_dir.join(".fingerprint").is_dir(),
        profile_dir.parent(),
        profile_dir.file_name().and_then(|n| n.to_str()),
    ) else {
        return Err(AgentError::Missing {
            exe: shown,
            why: "the running program is not in a Cargo target directory".into(),
        });
    };
    // Cargo's `debug` directory is the `dev` profile's.
    let profile = if profile == "debug" { "dev" } else { profile };
    build(workspace, target, profile)?;
    let built = profile_dir.join(AGENT_PROGRAM);
    if is_executable(&built) {
        Ok(built)
    } else {
        Err(AgentError::NotBuilt {
            command: build_command(target, profile).join(" "),
            path: built,
        })
    }
}

fn build_command(target: &Path, profile: &str) -> Vec<String> {
    [
        "cargo",
        "build",
        "--quiet",
        "-p",
        "dra-e2e",
        "--bin",
        AGENT_PROGRAM,
        "--profile",
        profile,
        "--target-dir",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([target.display().to_string()])
    .collect()
}

/// Runs Cargo (the one that built the runner when `cargo run` started it),
/// saying so through the crate's progress sink.
fn build(workspace: &Path, target: &Path, profile: &str) -> Result<(), AgentError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    build_with(&cargo, workspace, target, profile, crate::progress::say)
}

fn build_with(
    cargo: &std::ffi::OsStr,
    workspace: &Path,
    target: &Path,
    profile: &str,
    say: impl FnOnce(&str),
) -> Result<(), AgentError> {
    let args = build_command(target, profile);
    // Said as the runner's other first-run builds say theirs: a build of a
    // minute or more that nobody announced reads as a hang.
    say(&format!(
        "dra-e2e: building {AGENT_PROGRAM}, the program of real nodes and proxy pods: {}",
        args.join(" ")
    ));
    let status = Command::new(cargo)
        .args(&args[1..])
        .current_dir(workspace)
        .status()
        .map_err(|source| AgentError::Cargo {
            cargo: Path::new(cargo).display().to_string(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(AgentError::Build {
            command: args.join(" "),
            status: status.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_cargo_that_cannot_run_is_named_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let cargo = dir.path().join("no-cargo-here");
        let said = std::cell::RefCell::new(Vec::new());
        let say = |line: &str| said.borrow_mut().push(line.to_owned());
        let err = build_with(cargo.as_os_str(), dir.path(), dir.path(), "dev", say).unwrap_err();
        assert!(matches!(err, AgentError::Cargo { .. }), "{err:?}");
        // The build was announced through the sink it was given, not
        // printed past it.
        let said = said.into_inner();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("dra-e2e: building dra-e2e-agent"),
            "{said:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&cargo.display().to_string()), "{msg}");
        assert!(msg.contains("cargo build --bin dra-e2e-agent"), "{msg}");
        assert!(msg.contains(AGENT_ENV), "{msg}");
    }

    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn no_build(_: &Path, _: &Path, _: &str) -> Result<(), AgentError> {
        panic!("nothing should be built")
    }

    #[test]
    fn the_environment_wins_and_must_name_an_executable() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let env = |k: &str| (k == AGENT_ENV).then(|| agent.clone().into_os_string());
        let err = locate(env, None, dir.path(), no_build).unwrap_err();
        assert!(err.to_string().contains("DRA_E2E_AGENT="), "{err}");
        let empty = |k: &str| (k == AGENT_ENV).then(OsString::new);
        let err = locate(empty, None, dir.path(), no_build).unwrap_err();
        assert!(err.to_string().contains("set but empty"), "{err}");
        executable(&agent);
        assert_eq!(locate(env, None, dir.path(), no_build).unwrap(), agent);
    }

    #[test]
    fn beside_the_runner_or_beside_a_test_binarys_deps() {
        let dir = tempfile::tempdir().unwrap();
        let debug = dir.path().join("target/debug");
        executable(&debug.join(AGENT_PROGRAM));
        let runner = debug.join("dra-e2e");
        let test = debug.join("deps/runner-0123");
        for exe in [&runner, &test] {
            let found = locate(|_| None, Some(exe), dir.path(), no_build).unwrap();
            assert_eq!(found, debug.join(AGENT_PROGRAM));
        }
    }

    #[test]
    fn built_into_the_runners_target_directory_with_its_profile() {
        let dir = tempfile::tempdir().unwrap();
        executable(&dir.path().join("crates/agent/Cargo.toml"));
        let release = dir.path().join("target/release");
        std::fs::create_dir_all(release.join(".fingerprint")).unwrap();
        let asked = std::cell::RefCell::new(None);
        let found = locate(
            |_| None,
            Some(&release.join("dra-e2e")),
            dir.path(),
            |ws, target, profile| {
                *asked.borrow_mut() = Some((ws.to_owned(), target.to_owned(), profile.to_owned()));
                executable(&target.join("release").join(AGENT_PROGRAM));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(found, release.join(AGENT_PROGRAM));
        assert_eq!(
            asked.into_inner().unwrap(),
            (
                dir.path().to_owned(),
                dir.path().join("target"),
                "release".to_owned()
            )
        );
    }

    /// A runner copied out of Cargo's target directory (to /tmp/x/) is not
    /// built for as if /tmp were a target directory and x a profile.
    #[test]
    fn a_runner_copied_out_of_its_target_directory_builds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        executable(&dir.path().join("crates/agent/Cargo.toml"));
        let exe = dir.path().join("copies/dra-e2e");
        let err = locate(|_| None, Some(&exe), dir.path(), no_build).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("not in a Cargo target directory") && msg.contains("DRA_E2E_AGENT"),
            "{msg}"
        );
    }

    #[test]
    fn without_a_checkout_the_error_says_how_to_get_it() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("bin/dra-e2e");
        let err = locate(|_| None, Some(&exe), dir.path(), no_build).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("cargo build --bin dra-e2e-agent") && msg.contains("DRA_E2E_AGENT"),
            "{msg}"
        );
    }
}
