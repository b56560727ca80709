//! How a mutant is realised: the profile each run is given, a copy of one
//! of the project's profiles with the fault, the patched binary or the
//! rolling driver's variable put in. The copies are written into the run's
//! own directory, so that runs side by side never share a file and a run
//! can be repeated by hand from what it left.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use super::Way;
use super::catalogue::Mutant;
use super::runs::{Run, patch_of};

const BUILTIN_PROFILE: &str = "profiles/builtin.yaml";
const SIMULATED_TEST_DRIVER: &str = "profiles/dra-test-driver-simulated.yaml";
const REAL_TEST_DRIVER: &str = "profiles/dra-test-driver.yaml";
/// The patched test drivers' profiles, as `make test-driver-mutants`
/// writes them (relative to the repository).
pub(super) const PATCHED_PROFILES: &str = "target/mutants/test-driver";
const ROLLING_DRIVER: &str = "profiles/rolling-driver.yaml";
/// The rolling-update driver's DaemonSet, as `make rolling-driver` writes
/// it (relative to the repository).
const ROLLING_DAEMONSET: &str = "target/rolling-driver/kubelet-plugin.yaml";

/// The profile of a run, written into its directory.
pub(super) fn profile_for(
    exe: &Path,
    root: &Path,
    dir: &Path,
    mutants: &[Mutant],
    run: &Run,
) -> anyhow::Result<PathBuf> {
    let fault = run
        .mutant
        .as_deref()
        .and_then(|name| mutants.iter().find(|m| m.name == name))
        .and_then(|m| m.fault.clone());
    // A patched test driver on real nodes: the real nodes' profile, with
    // an image archive of the patched binary in place of the unmutated one.
    let mut archive = None;
    let mut daemonset = None;
    let source = match (run.way, &run.mutant) {
        (Way::RollingDriver, mutant) => {
            let env = mutant
                .as_deref()
                .and_then(|name| mutants.iter().find(|m| m.name == name))
                .and_then(|m| m.rolling_env.as_deref());
            if let Some(env) = env {
                daemonset = Some(rolling_daemonset_with(root, dir, env)?);
            }
            root.join(ROLLING_DRIVER)
        }
        (Way::TestDriver, Some(name)) if run.real => {
            archive = Some(patched_image(exe, root, dir, patch_of(mutants, name))?);
            root.join(REAL_TEST_DRIVER)
        }
        (Way::TestDriver, Some(name)) => {
            // Written by `make test-driver-mutants`, with absolute paths.
            return Ok(root
                .join(PATCHED_PROFILES)
                .join(format!("{}.yaml", patch_of(mutants, name))));
        }
        (Way::Builtin, _) => root.join(BUILTIN_PROFILE),
        (_, _) if run.real => root.join(REAL_TEST_DRIVER),
        (_, _) => root.join(SIMULATED_TEST_DRIVER),
    };
    let text = std::fs::read_to_string(&source)
        .with_context(|| format!("reading {}", source.display()))?;
    // The copy lives elsewhere: its relative paths are made absolute.
    let base = source.parent().unwrap_or(root).display().to_string();
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.replace("../target/", &format!("{base}/../target/"));
        if let Some(copy) = &daemonset
            && line.trim_end().ends_with("kubelet-plugin.yaml")
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            line = format!("{indent}- {}", copy.display());
        }
        if let Some(archive) = &archive
            && line.trim_end().ends_with(UNMUTATED_ARCHIVE)
        {
            line = line.replace(
                &format!("{base}/{UNMUTATED_ARCHIVE}"),
                &archive.display().to_string(),
            );
        }
        out.push_str(&line);
        out.push('\n');
        if let Some(f) = &fault
            && line.trim_start().starts_with("mode: ")
        {
            out.push_str(&format!("  faults: [{f}]\n"));
        }
    }
    if let Some(archive) = &archive
        && !out.contains(&archive.display().to_string())
    {
        bail!(
            "{} no longer names {UNMUTATED_ARCHIVE} among its image archives: the mutants \
             runner cannot put the patched driver's archive in its place",
            source.display()
        );
    }
    let file = dir.join("profile.yaml");
    std::fs::write(&file, out).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// A copy of the rolling-update driver's DaemonSet in `dir` whose plugin
/// container also has `env` (`NAME=value`), next to its NUM_DEVICES.
fn rolling_daemonset_with(root: &Path, dir: &Path, env: &str) -> anyhow::Result<PathBuf> {
    let source = root.join(ROLLING_DAEMONSET);
    let text = std::fs::read_to_string(&source).with_context(|| {
        format!(
            "reading {} (`make rolling-driver` writes it)",
            source.display()
        )
    })?;
    let (name, value) = env
        .split_once('=')
        .with_context(|| format!("rolling_env {env:?} is not NAME=value"))?;
    let anchor = text
        .lines()
        .find(|l| l.trim() == "- name: NUM_DEVICES")
        .with_context(|| {
            format!(
                "{} sets no NUM_DEVICES to add {name} beside",
                source.display()
            )
        })?;
    let indent = &anchor[..anchor.len() - anchor.trim_start().len()];
    let value = serde_json::to_string(value).context("quoting the variable's value")?;
    let added = format!("{indent}- name: {name}\n{indent}  value: {value}\n{anchor}");
    // The profile names it from elsewhere: absolute, as `dir` may not be.
    let copy = std::path::absolute(dir.join("kubelet-plugin.yaml"))
        .context("the run directory's absolute path")?;
    std::fs::write(&copy, text.replacen(anchor, &added, 1))
        .with_context(|| format!("writing {}", copy.display()))?;
    Ok(copy)
}

/// The unmutated test driver's image archive, as profiles/dra-test-driver.yaml
/// names it (relative to the profile).
const UNMUTATED_ARCHIVE: &str = "../target/dra-test-driver/dra-test-driver.oci.tar";

/// An image archive of the test driver built from `patch`, in the run's
/// directory, under the image reference the real nodes' manifests name:
/// each run starts a cluster with real nodes of its own, which import only
/// this archive, so the manifests run the patched driver unchanged. The
/// binary is the one `make test-driver-mutant` built and wrote into the
/// patched profile's command.
fn patched_image(exe: &Path, root: &Path, dir: &Path, patch: &str) -> anyhow::Result<PathBuf> {
    use crate::profile::{Deployment, Options, Profile};
    let make = format!("run `make test-driver test-driver-mutant MUTANT={patch}` first");
    let patched = root.join(PATCHED_PROFILES).join(format!("{patch}.yaml"));
    let binary = match Profile::load(&patched, Options { check_files: true })
        .with_context(|| format!("reading the patched driver's profile ({make})"))?
        .deployment
    {
        Deployment::SimulatedNodes { command } => command.into_iter().next(),
        _ => None,
    }
    .with_context(|| format!("{} runs no command: {make}", patched.display()))?;
    let real = root.join(REAL_TEST_DRIVER);
    let manifests = match Profile::load(&real, Options { check_files: true })
        .with_context(|| format!("reading the real nodes' profile ({make})"))?
        .deployment
    {
        Deployment::RealNodes { manifests, .. } => manifests,
        _ => bail!("{} does not deploy to real nodes", real.display()),
    };
    let mut references = BTreeSet::new();
    for m in &manifests {
        let text =
            std::fs::read_to_string(m).with_context(|| format!("reading {}", m.display()))?;
        references.extend(
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("image: "))
                .map(|r| r.trim().to_owned()),
        );
    }
    let [reference] = Vec::from_iter(references)
        .try_into()
        .map_err(|refs: Vec<String>| {
            anyhow::anyhow!(
                "the manifests of {} name {} images ({refs:?}), not one: the mutants runner \
             does not know which the patched driver replaces",
                real.display(),
                refs.len()
            )
        })?;
    // The profile names it from elsewhere (relative paths there are
    // relative to the profile).
    let archive = std::path::absolute(dir.join("dra-test-driver.oci.tar"))
        .with_context(|| format!("the absolute path of {}", dir.display()))?;
    let output = Command::new(exe)
        .arg("image")
        .arg("--binary")
        .arg(&binary)
        .arg("--reference")
        .arg(&reference)
        .arg("--out")
        .arg(&archive)
        .output()
        .with_context(|| format!("running {} image", exe.display()))?;
    if !output.status.success() {
        bail!(
            "writing the image archive of {binary} as {reference} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(archive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rolling_driver_is_told_its_bug_in_a_copy_of_its_daemonset() {
        let root = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let built = root.path().join("target/rolling-driver");
        std::fs::create_dir_all(&built).unwrap();
        let ds = "        env:\n            - name: NUM_DEVICES\n              value: \"4\"\n";
        std::fs::write(built.join("kubelet-plugin.yaml"), ds).unwrap();
        let copy = rolling_daemonset_with(root.path(), dir.path(), "BREAK_IT=true").unwrap();
        assert_eq!(
            std::fs::read_to_string(copy).unwrap(),
            "        env:\n            - name: BREAK_IT\n              value: \"true\"\n            \
             - name: NUM_DEVICES\n              value: \"4\"\n"
        );
        // A DaemonSet without the variable to stand beside is refused, not
        // run unbroken.
        std::fs::write(built.join("kubelet-plugin.yaml"), "env: []\n").unwrap();
        let err = rolling_daemonset_with(root.path(), dir.path(), "BREAK_IT=true").unwrap_err();
        assert!(err.to_string().contains("sets no NUM_DEVICES"), "{err}");
    }
}
