//! `dra-e2e-agent sockets DIR`: the unix sockets in a directory of the node,
//! one line each, so the runner can follow a driver's registration sockets
//! on a node it reaches only by exec.
//!
//! A line is `<identity> <name>`. The identity is the file's inode and its
//! change time: a driver that restarts removes its socket and binds a new
//! one under the same name, and the filesystem may hand the freed inode
//! straight back, so the inode alone would not tell the new socket from the
//! old one; a new bind always has a new change time.
use std::io;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "dra-e2e-agent sockets",
    about = "Lists the unix sockets in a directory: `<identity> <name>` per line"
)]
pub struct Args {
    /// The directory; a directory that does not exist lists nothing.
    dir: std::path::PathBuf,
}

/// One unix socket of a directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SocketEntry {
    /// Tells this socket from an earlier one of the same name.
    pub identity: String,
    /// The file name, without the directory.
    pub name: String,
}

/// The sockets in `dir`, sorted by name; nothing when `dir` does not exist.
/// Names that are not UTF-8 are left out (no driver makes them).
pub fn list(dir: &Path) -> io::Result<Vec<SocketEntry>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        // A socket removed between read_dir and the stat is simply gone.
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if meta.file_type().is_socket() {
            out.push(SocketEntry {
                identity: format!("{}-{}.{:09}", meta.ino(), meta.ctime(), meta.ctime_nsec()),
                name,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The line `run` prints for `entry`.
pub fn line(entry: &SocketEntry) -> String {
    format!("{} {}", entry.identity, entry.name)
}

/// Reads one line back; `None` for a line that is not one (a log line).
pub fn parse_line(line: &str) -> Option<SocketEntry> {
    let (identity, name) = line.trim_end_matches(['\r', '\n']).split_once(' ')?;
    let well_formed = !identity.is_empty()
        && identity
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.is_empty()
        && !name.contains('/');
    well_formed.then(|| SocketEntry {
        identity: identity.to_owned(),
        name: name.to_owned(),
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let entries = list(&args.dir).with_context(|| format!("listing {}", args.dir.display()))?;
    for e in entries {
        println!("{}", line(&e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_sockets_only_and_tells_a_rebound_socket_from_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a-reg.sock");
        let first = std::os::unix::net::UnixListener::bind(&a).unwrap();
        std::fs::write(dir.path().join("not-a-socket"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let listed = list(dir.path()).unwrap();
        assert_eq!(
            listed.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["a-reg.sock"]
        );
        // What a restarting driver does: remove, bind again, same name.
        drop(first);
        std::fs::remove_file(&a).unwrap();
        let _second = std::os::unix::net::UnixListener::bind(&a).unwrap();
        let again = list(dir.path()).unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].name, "a-reg.sock");
        assert_ne!(again[0].identity, listed[0].identity);
        // Round trip through the line the runner reads.
        assert_eq!(parse_line(&line(&again[0])), Some(again[0].clone()));
    }

    #[test]
    fn a_missing_directory_lists_nothing_and_stray_lines_are_not_entries() {
        assert!(list(Path::new("/nonexistent/dra-e2e")).unwrap().is_empty());
        assert_eq!(parse_line("INFO something happened"), None);
        assert_eq!(parse_line("12-3.000000004 "), None);
        assert_eq!(parse_line("12-3.000000004 a/b"), None);
        assert_eq!(
            parse_line("12-3.000000004 x-reg.sock\n").map(|e| e.name),
            Some("x-reg.sock".to_owned())
        );
    }
}
