//! Checks made before the cluster starts, so that a mistake in the options
//! costs a second, not a cluster start and a run.
use std::path::{Path, PathBuf};

use anyhow::bail;

/// `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = crate::harness::driver::sockets::MAX_SOCKET_PATH;

/// The longest driver label (`a driver "<label>" with ...`) in the suite's
/// features; a unit test keeps it true.
pub const LONGEST_DRIVER_LABEL: &str = "long-driver-name";

/// The longest unix socket path the local cluster creates below its temp
/// dir, with the temp dir left out: a rolling-update plugin's DRA socket
/// `plugins/<driver>/dra-<uid>.sock` of the driver with the longest label,
/// on the node with the highest index. The registration socket
/// `plugins_registry/<driver>-reg.sock` is as long; a rolling-update one
/// shortens its name when it would not fit. (The temp dir's suffix is 6
/// characters, a namespace is `dra-e2e-` plus 5, a uid 8 hex digits.)
pub fn longest_socket_tail(nodes: usize) -> String {
    let node = nodes.saturating_sub(1);
    let driver = crate::harness::driver::Driver::name_for(
        "dra-e2e-xxxxx",
        &format!("-{LONGEST_DRIVER_LABEL}"),
    );
    format!("/dra-e2e-XXXXXX/n/{node}/plugins/{driver}/dra-xxxxxxxx.sock")
}

/// Refuses a temp dir so long that the local cluster's socket paths would
/// not fit in `sun_path` (scenarios would fail one by one, late).
pub fn check_temp_dir(tmp: &Path, nodes: usize) -> anyhow::Result<()> {
    let tail = longest_socket_tail(nodes);
    let len = tmp.as_os_str().len() + tail.len();
    if len > MAX_SOCKET_PATH {
        bail!(
            "TMPDIR {} ({} bytes) is too long for the local cluster's unix sockets: the longest, \
             {}{tail}, would be {len} bytes, over the {MAX_SOCKET_PATH} a socket path may have; \
             use a TMPDIR of at most {} bytes (e.g. TMPDIR=/tmp)",
            tmp.display(),
            tmp.as_os_str().len(),
            tmp.display(),
            MAX_SOCKET_PATH.saturating_sub(tail.len())
        );
    }
    Ok(())
}

/// A directory entry can be created in `dir`: a probe file comes and goes.
fn probe_writable(option: &str, path: &Path, dir: &Path) -> anyhow::Result<()> {
    match tempfile::Builder::new()
        .prefix(".dra-e2e-probe-")
        .tempfile_in(dir)
    {
        Ok(_) => Ok(()),
        Err(e) => bail!(
            "{option} {}: cannot write in {}: {}",
            path.display(),
            dir.display(),
            io_reason(&e)
        ),
    }
}

/// An io error's text without tempfile's "… at path" decorations.
fn io_reason(e: &std::io::Error) -> String {
    std::io::Error::from(e.kind()).to_string()
}

/// A report file `path` given with `option` can be written at the end of
/// the run: its directory exists and is writable, and it is not a directory.
pub fn check_output_file(option: &str, path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        bail!("{option} {}: is a directory, not a file", path.display());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        let what = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        bail!(
            "{option} {}: the directory {} {what}",
            path.display(),
            dir.display()
        );
    }
    probe_writable(option, path, &dir)
}

/// A directory given with `option` can be created (when needed) and
/// written: its nearest existing ancestor is a writable directory. Nothing
/// is created here.
pub fn check_output_dir(option: &str, path: &Path) -> anyhow::Result<()> {
    let mut existing = path;
    while !existing.exists() {
        match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => existing = p,
            _ => {
                existing = Path::new(".");
                break;
            }
        }
    }
    if !existing.is_dir() {
        bail!(
            "{option} {}: {} is not a directory",
            path.display(),
            existing.display()
        );
    }
    probe_writable(option, path, existing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_tail_is_the_longest_socket_path_the_driver_makes() {
        use crate::harness::driver::sockets::socket_paths;
        for nodes in [1, 2, 10, 11] {
            // The longest temp dir the check lets through.
            let tail = longest_socket_tail(nodes);
            let tmp = "/".to_owned() + &"t".repeat(MAX_SOCKET_PATH - tail.len() - 1);
            check_temp_dir(Path::new(&tmp), nodes).unwrap();
            let root = PathBuf::from(format!("{tmp}/dra-e2e-XXXXXX/n/{}", nodes - 1));
            let driver = crate::harness::driver::Driver::name_for(
                "dra-e2e-xxxxx",
                &format!("-{LONGEST_DRIVER_LABEL}"),
            );
            let (dra, reg) = socket_paths(&root, &driver, None);
            // A rolling-update registration socket shortens its name to fit.
            let (rolling_dra, rolling_reg) = socket_paths(&root, &driver, Some("xxxxxxxx"));
            let lens: Vec<usize> = [dra, reg, rolling_dra, rolling_reg]
                .iter()
                .map(|p| p.as_os_str().len())
                .collect();
            assert!(lens.iter().all(|&l| l <= MAX_SOCKET_PATH), "{lens:?}");
            assert_eq!(lens[..3].iter().max(), Some(&MAX_SOCKET_PATH), "{lens:?}");
        }
    }

    #[test]
    fn no_feature_names_a_driver_longer_than_the_budget() {
        let re = regex::Regex::new(r#"driver "([^"]+)""#).unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("features");
        for f in crate::runner::features::feature_files(&dir).unwrap() {
            let text = std::fs::read_to_string(&f).unwrap();
            for c in re.captures_iter(&text) {
                assert!(
                    c[1].len() <= LONGEST_DRIVER_LABEL.len(),
                    "{}: driver label {:?} is longer than LONGEST_DRIVER_LABEL",
                    f.display(),
                    &c[1]
                );
            }
        }
    }

    #[test]
    fn temp_dir_limit() {
        let tail = longest_socket_tail(2).len();
        let ok = "/".to_owned() + &"a".repeat(MAX_SOCKET_PATH - tail - 1);
        check_temp_dir(Path::new(&ok), 2).unwrap();
        let long = ok.clone() + "b";
        let e = check_temp_dir(Path::new(&long), 2).unwrap_err().to_string();
        assert!(e.contains(&long), "{e}");
        assert!(e.contains(&format!("at most {}", ok.len())), "{e}");
    }

    #[test]
    fn output_paths() {
        let tmp = tempfile::tempdir().unwrap();
        check_output_file("--junit", &tmp.path().join("j.xml")).unwrap();
        let e = check_output_file("--junit", &tmp.path().join("no/j.xml")).unwrap_err();
        assert!(e.to_string().starts_with("--junit "), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(check_output_file("--junit", tmp.path()).is_err());
        check_output_dir("--artifacts", &tmp.path().join("a/b")).unwrap();
        assert!(!tmp.path().join("a").exists());
        std::fs::write(tmp.path().join("f"), "").unwrap();
        let e = check_output_dir("--artifacts", &tmp.path().join("f/a")).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
    }
}
