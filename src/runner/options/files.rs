//! The files and directories the options name, read before anything
//! starts: a path that cannot be read, or an image archive that is no
//! image archive, fails the run in its first second with the option's
//! name, not minutes later inside a node import.
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::Refusal;

/// A file the run reads can be read: it exists, is no directory, and opens.
fn readable_file(flag: &str, path: &Path) -> Result<std::fs::File, Refusal> {
    let refuse = |why: String| Refusal(format!("{flag} {}: {why}", path.display()));
    if path.is_dir() {
        return Err(refuse("is a directory, not a file".to_owned()));
    }
    std::fs::File::open(path).map_err(|e| refuse(format!("cannot read it: {e}")))
}

/// A directory the run reads can be listed.
fn readable_dir(flag: &str, path: &Path) -> Result<(), Refusal> {
    let refuse = |why: String| Refusal(format!("{flag} {}: {why}", path.display()));
    if path.exists() && !path.is_dir() {
        return Err(refuse("is not a directory".to_owned()));
    }
    std::fs::read_dir(path)
        .map(drop)
        .map_err(|e| refuse(format!("cannot read it: {e}")))
}

/// The feature paths can be read: each a file or a directory. Checked
/// first of all, before they are parsed (and before `--list`).
pub fn check_features(flag: &str, paths: &[PathBuf]) -> Result<(), Refusal> {
    for f in paths {
        if f.is_dir() {
            readable_dir(flag, f)?;
        } else {
            readable_file(flag, f)?;
        }
    }
    Ok(())
}

/// The files and directories the run's options name, checked before
/// anything starts; the image archives are looked into too.
pub(super) fn check_run_files(
    args: &crate::runner::cli::RunArgs,
    matches: &clap::ArgMatches,
) -> Result<(), Refusal> {
    check_features("--features", &args.features)?;
    check_features("--add-features", &args.add_features)?;
    if let Some(p) = &args.kubeconfig {
        readable_file("--kubeconfig", p)?;
    }
    if let Some(p) = &args.driver.profile {
        readable_file("--profile", p)?;
    }
    if let Some(d) = &args.binaries_dir
        && matches.value_source("binaries_dir") == Some(clap::parser::ValueSource::CommandLine)
    {
        readable_dir("--binaries-dir", d)?;
    }
    for a in &args.image_archive {
        archive_kind(a)?;
    }
    Ok(())
}

/// What an image archive is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// "OCI" or "Docker".
    pub format: &'static str,
    /// The image references it names.
    pub refs: Vec<String>,
}

/// Reads `path` as an OCI image layout or a `docker save` archive (either
/// may be gzip-compressed), or refuses it saying what it is instead.
pub fn archive_kind(path: &Path) -> Result<Archive, Refusal> {
    let flag = "--image-archive";
    let mut file = readable_file(flag, path)?;
    let refuse = |what: String| {
        Refusal(format!(
            "{flag} {}: not an OCI or Docker image archive: it is {what}",
            path.display()
        ))
    };
    let mut head = [0u8; 512];
    let n = read_up_to(&mut file, &mut head)
        .map_err(|e| Refusal(format!("{flag} {}: cannot read it: {e}", path.display())))?;
    let head = &head[..n];
    let file = std::fs::File::open(path)
        .map_err(|e| Refusal(format!("{flag} {}: cannot read it: {e}", path.display())))?;
    let (gz, reader): (bool, Box<dyn std::io::Read>) = if head.starts_with(&[0x1f, 0x8b]) {
        (true, Box::new(flate2::read::GzDecoder::new(file)))
    } else if is_tar(head) {
        (false, Box::new(file))
    } else {
        return Err(refuse(describe(head)));
    };
    let tar_what = if gz {
        "a gzip-compressed tar"
    } else {
        "a tar archive"
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|_| refuse(format!("{tar_what} that cannot be read")))?;
    let (mut oci, mut index, mut manifest): (bool, Option<String>, Option<String>) =
        (false, None, None);
    let mut names = Vec::new();
    for e in entries {
        let Ok(mut e) = e else {
            if gz && names.is_empty() {
                return Err(refuse("gzip-compressed data, not a tar archive".to_owned()));
            }
            return Err(refuse(format!("{tar_what} that ends early or is damaged")));
        };
        let name = e
            .path()
            .map(|p| p.to_string_lossy().trim_start_matches("./").to_owned())
            .unwrap_or_default();
        let mut text = || {
            let mut s = String::new();
            e.read_to_string(&mut s).ok().map(|_| s)
        };
        match name.as_str() {
            "oci-layout" => oci = true,
            "index.json" => index = text(),
            "manifest.json" => manifest = text(),
            _ => {}
        }
        if names.len() < 5 && !name.is_empty() {
            names.push(name);
        }
    }
    if oci || index.is_some() {
        return Ok(Archive {
            format: "OCI",
            refs: index.as_deref().map(oci_refs).unwrap_or_default(),
        });
    }
    if let Some(m) = manifest {
        return Ok(Archive {
            format: "Docker",
            refs: docker_refs(&m),
        });
    }
    Err(refuse(match names.as_slice() {
        [] => format!("an empty {}", tar_what.trim_start_matches("a ")),
        _ => format!(
            "{tar_what} holding neither oci-layout and index.json nor manifest.json (it starts \
             with {})",
            names.join(", ")
        ),
    }))
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// A POSIX or GNU tar header: "ustar" at offset 257.
fn is_tar(head: &[u8]) -> bool {
    head.len() >= 262 && &head[257..262] == b"ustar"
}

/// What a file that is no tar is, by its first bytes.
fn describe(head: &[u8]) -> String {
    if head.is_empty() {
        return "an empty file".to_owned();
    }
    for (magic, what) in [
        (&b"\x7fELF"[..], "an ELF program"),
        (b"PK\x03\x04", "a zip archive"),
        (b"BZh", "bzip2-compressed data"),
        (b"\xfd7zXZ", "xz-compressed data"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
        (b"%PDF", "a PDF document"),
    ] {
        if head.starts_with(magic) {
            return what.to_owned();
        }
    }
    match std::str::from_utf8(head) {
        Ok(text) => {
            let first: String = text.lines().next().unwrap_or("").chars().take(40).collect();
            format!("text, starting {first:?}")
        }
        Err(_) => format!("{} bytes of data of no kind it knows", head.len()),
    }
}

/// The image names an OCI index gives its manifests.
fn oci_refs(index: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(index) else {
        return Vec::new();
    };
    v["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let a = &m["annotations"];
            a["io.containerd.image.name"]
                .as_str()
                .or_else(|| a["org.opencontainers.image.ref.name"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

/// The tags a `docker save` manifest lists.
fn docker_refs(manifest: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(manifest) else {
        return Vec::new();
    };
    v.as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["RepoTags"].as_array().into_iter().flatten())
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}
