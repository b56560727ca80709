//! The single layer of an image: a tar of its entries, parents first, in a
//! stable order, owned by root, with a fixed modification time so the same
//! inputs give the same digest.
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};

use super::{Entry, FileSource, ImageError};

/// Entries keyed by their path inside the layer without the leading `/`.
/// A `BTreeMap` puts every directory before what it contains.
pub(super) type Plan<'a> = BTreeMap<String, Planned<'a>>;

pub(super) enum Planned<'a> {
    Dir(u32),
    File(u32, &'a FileSource),
    Symlink(&'a str),
}

/// Checks the entries and adds the parent directories they imply.
pub(super) fn plan<'a>(image: &str, entries: &'a [Entry]) -> Result<Plan<'a>, ImageError> {
    let bad = |path: &str, reason: String| ImageError::LayerPath {
        image: image.to_owned(),
        path: path.to_owned(),
        reason,
    };
    let mut plan = Plan::new();
    // Paths given explicitly; others in `plan` are implied parents, which a
    // later directory entry may give a mode.
    let mut declared = std::collections::HashSet::new();
    for entry in entries {
        let path = entry.path();
        let rel = normalize(path).map_err(|r| bad(path, r.to_owned()))?;
        let planned = match entry {
            Entry::Dir { mode, .. } => Planned::Dir(*mode),
            Entry::File { mode, source, .. } => Planned::File(*mode, source),
            Entry::Symlink { target, .. } => {
                if target.is_empty() || target.contains('\0') {
                    return Err(bad(path, "symlink target is empty or has a NUL".into()));
                }
                Planned::Symlink(target)
            }
        };
        if !declared.insert(rel.clone()) {
            return Err(bad(path, "declared twice".into()));
        }
        // Parents: each must be a directory, declared or implied.
        let mut parent = String::new();
        for comp in rel.split('/').take(rel.split('/').count() - 1) {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(comp);
            match plan.get(&parent) {
                Some(Planned::Dir(_)) => {}
                Some(_) => {
                    return Err(bad(
                        path,
                        format!("its parent /{parent} is not a directory"),
                    ));
                }
                None => {
                    plan.insert(parent.clone(), Planned::Dir(0o755));
                }
            }
        }
        if !matches!(planned, Planned::Dir(_)) {
            // Something already below this path makes it a directory.
            let prefix = format!("{rel}/");
            if plan
                .range(prefix.clone()..)
                .next()
                .is_some_and(|(k, _)| k.starts_with(&prefix))
            {
                return Err(bad(path, "other entries are below it".into()));
            }
        }
        plan.insert(rel, planned);
    }
    Ok(plan)
}

/// `/a/b` -> `a/b`; refuses relative paths, `.`/`..` and empty components.
fn normalize(path: &str) -> Result<String, &'static str> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err("must be an absolute path");
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Err("the root directory cannot be an entry");
    }
    if rest.contains('\0') {
        return Err("contains a NUL byte");
    }
    if rest
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("has an empty, `.` or `..` component");
    }
    Ok(rest.to_owned())
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode & 0o7777);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    // Names are cosmetic; ids decide ownership.
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
    h.set_mtime(0);
    h
}

/// Writes the layer tar to `out` and returns `out` once the tar is complete.
pub(super) fn write<W: Write>(image: &str, plan: &Plan<'_>, out: W) -> Result<W, ImageError> {
    let io_err = |op: &'static str, path: String| {
        move |source| ImageError::Io {
            image: image.to_owned(),
            op,
            path: path.into(),
            source,
        }
    };
    let mut tar = tar::Builder::new(out);
    for (rel, planned) in plan {
        let written = || format!("layer entry /{rel}");
        match planned {
            Planned::Dir(mode) => {
                let mut h = header(tar::EntryType::Directory, *mode, 0);
                tar.append_data(&mut h, format!("{rel}/"), io::empty())
                    .map_err(io_err("writing", written()))?;
            }
            Planned::Symlink(target) => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                tar.append_link(&mut h, rel, target)
                    .map_err(io_err("writing", written()))?;
            }
            Planned::File(mode, FileSource::Bytes(bytes)) => {
                let mut h = header(tar::EntryType::Regular, *mode, bytes.len() as u64);
                tar.append_data(&mut h, rel, bytes.as_slice())
                    .map_err(io_err("writing", written()))?;
            }
            Planned::File(mode, FileSource::Host(host)) => {
                let shown = || host.display().to_string();
                let file = File::open(host).map_err(io_err("reading", shown()))?;
                let len = file.metadata().map_err(io_err("reading", shown()))?.len();
                let mut h = header(tar::EntryType::Regular, *mode, len);
                // `take` keeps the entry consistent with its header if the
                // file grows meanwhile; a file that shrinks fails the write.
                tar.append_data(&mut h, rel, file.take(len))
                    .map_err(io_err("copying into the layer", shown()))?;
            }
        }
    }
    tar.into_inner()
        .map_err(io_err("writing", "the layer".to_owned()))
}
