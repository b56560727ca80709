//! Node files reached by exec into the node's proxy pod (the CDI directory).
use async_trait::async_trait;
use base64::Engine as _;

use super::exec::{ExecError, ExecTarget, exec_capture, shell_quote};
use dra_e2e_conn::node_files::{NodeFiles, NodeFilesError, check_name};

const EXISTS: &str = "exists";
const MISSING: &str = "notexist";

/// A flat directory inside a proxy pod, e.g. `/cdi` (the node's `/var/run/cdi`).
#[derive(Clone)]
pub struct PodFiles {
    client: kube::Client,
    target: ExecTarget,
    dir: String,
}

impl std::fmt::Debug for PodFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodFiles")
            .field("target", &self.target)
            .field("dir", &self.dir)
            .finish()
    }
}

impl PodFiles {
    pub fn new(client: kube::Client, target: ExecTarget, dir: impl Into<String>) -> Self {
        Self {
            client,
            target,
            dir: dir.into(),
        }
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir.trim_end_matches('/'))
    }

    async fn run(
        &self,
        op: &'static str,
        name: &str,
        cmd: Vec<String>,
    ) -> Result<String, NodeFilesError> {
        exec_capture(&self.client, &self.target, cmd)
            .await
            .map(|o| o.stdout)
            .map_err(|e| remote(op, name, e))
    }
}

fn remote(op: &'static str, name: &str, e: ExecError) -> NodeFilesError {
    NodeFilesError::Remote {
        op,
        name: name.to_owned(),
        message: e.to_string(),
    }
}

/// Writes `<path>.<shell pid>.tmp` from base64 carried inside the command
/// (stdin through exec is unreliable), then renames it over `<path>` so a
/// runtime watching the directory never reads a partial spec. The pid keeps
/// two writes of one file at once (a kubelet retrying a prepare) from
/// renaming each other's temp file away.
pub fn create_command(path: &str, content: &[u8]) -> Vec<String> {
    let tmp = format!("{}.$$.tmp", shell_quote(path));
    let dst = shell_quote(path);
    let b64 = base64::engine::general_purpose::STANDARD.encode(content);
    // Short lines keep every base64 implementation happy.
    let body: Vec<&str> = b64
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    let script = format!(
        "base64 -d >{tmp} <<'EOF' && mv -f {tmp} {dst} || {{ rm -f {tmp}; exit 1; }}\n{}\nEOF\n",
        body.join("\n")
    );
    vec!["sh".into(), "-c".into(), script]
}

pub fn remove_command(path: &str) -> Vec<String> {
    vec!["rm".into(), "-f".into(), path.into()]
}

/// Prints `exists` or `notexist`.
pub fn exists_command(path: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "if test -e {p}; then echo {EXISTS}; else echo {MISSING}; fi",
            p = shell_quote(path)
        ),
    ]
}

/// Prints `==> <name>` then the file in base64, for every spec file of
/// `dir`.
pub fn specs_command(dir: &str) -> Vec<String> {
    let d = shell_quote(dir.trim_end_matches('/'));
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "for f in {d}/*.json {d}/*.yaml {d}/*.yml; do \
             if test -f \"$f\"; then echo \"==> ${{f##*/}}\"; base64 <\"$f\" || exit 1; fi; done"
        ),
    ]
}

/// Reads what [`specs_command`] printed.
pub fn parse_specs(stdout: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    let mut finish = |c: Option<(String, String)>| -> Result<(), String> {
        if let Some((name, b64)) = c {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| format!("{name}: {e}"))?;
            out.push((name, String::from_utf8_lossy(&bytes).into_owned()));
        }
        Ok(())
    };
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix("==> ") {
            finish(current.take())?;
            current = Some((name.to_owned(), String::new()));
        } else if let Some((_, b64)) = &mut current {
            b64.push_str(line.trim());
        }
    }
    finish(current)?;
    out.sort();
    Ok(out)
}

/// Reads the marker printed by [`exists_command`].
pub fn parse_exists(stdout: &str) -> Option<bool> {
    match stdout.trim() {
        EXISTS => Some(true),
        MISSING => Some(false),
        _ => None,
    }
}

#[async_trait]
impl NodeFiles for PodFiles {
    async fn create(&self, name: &str, content: &[u8]) -> Result<(), NodeFilesError> {
        check_name(name)?;
        self.run("create", name, create_command(&self.path(name), content))
            .await
            .map(drop)
    }

    async fn remove(&self, name: &str) -> Result<(), NodeFilesError> {
        check_name(name)?;
        self.run("remove", name, remove_command(&self.path(name)))
            .await
            .map(drop)
    }

    async fn specs(&self) -> Result<Vec<(String, String)>, NodeFilesError> {
        let out = self.run("read", ".", specs_command(&self.dir)).await?;
        parse_specs(&out).map_err(|message| NodeFilesError::Remote {
            op: "read",
            name: ".".to_owned(),
            message,
        })
    }

    async fn exists(&self, name: &str) -> Result<bool, NodeFilesError> {
        check_name(name)?;
        let out = self
            .run("stat", name, exists_command(&self.path(name)))
            .await?;
        parse_exists(&out).ok_or_else(|| NodeFilesError::Remote {
            op: "stat",
            name: name.to_owned(),
            message: format!("unexpected output {:?}", out.trim()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs a built command with the local shell, as the pod's `sh` would.
    fn run(cmd: &[String]) -> std::process::Output {
        Command::new(&cmd[0]).args(&cmd[1..]).output().unwrap()
    }

    /// [`run`], which must succeed (its stderr says why not).
    fn run_ok(cmd: &[String]) -> std::process::Output {
        let out = run(cmd);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Files named like a write's temp file in `dir`.
    fn temp_files(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn spec_files_are_read_back_through_the_shell() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), "{\"kind\":\"v/c\"}\n").unwrap();
        std::fs::write(dir.path().join("b.yaml"), "kind: v/c\n".repeat(40)).unwrap();
        std::fs::write(dir.path().join("c.json.tmp"), "partial").unwrap();
        let out = run_ok(&specs_command(&dir.path().display().to_string()));
        let specs = parse_specs(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!(
            specs,
            [
                ("a.json".to_owned(), "{\"kind\":\"v/c\"}\n".to_owned()),
                ("b.yaml".to_owned(), "kind: v/c\n".repeat(40)),
            ]
        );
        let empty = tempfile::tempdir().unwrap();
        let out = run_ok(&specs_command(&empty.path().display().to_string()));
        assert!(
            parse_specs(&String::from_utf8_lossy(&out.stdout))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn two_writes_of_one_file_at_once_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("same.json").display().to_string();
        let content: Vec<u8> = vec![b'x'; 30_000];
        let writes: Vec<_> = (0..4)
            .map(|_| {
                let cmd = create_command(&path, &content);
                std::thread::spawn(move || run_ok(&cmd))
            })
            .collect();
        for w in writes {
            w.join().unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), content);
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn create_command_shape() {
        let cmd = create_command("/cdi/a.json", b"{}");
        assert_eq!(cmd[..2], ["sh", "-c"]);
        assert_eq!(
            cmd[2],
            "base64 -d >'/cdi/a.json'.$$.tmp <<'EOF' && mv -f '/cdi/a.json'.$$.tmp '/cdi/a.json' \
             || { rm -f '/cdi/a.json'.$$.tmp; exit 1; }\ne30=\nEOF\n"
        );
        assert_eq!(remove_command("/cdi/a.json"), ["rm", "-f", "/cdi/a.json"]);
    }

    #[test]
    fn commands_round_trip_through_a_real_shell() {
        let dir = tempfile::tempdir().unwrap();
        // A name with a quote and spaces; a body long enough to wrap, with
        // bytes that are not text.
        let path = dir.path().join("it's a spec.json").display().to_string();
        let content: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        run_ok(&create_command(&path, &content));
        assert_eq!(std::fs::read(&path).unwrap(), content);
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());

        let out = run(&exists_command(&path));
        assert_eq!(
            parse_exists(&String::from_utf8_lossy(&out.stdout)),
            Some(true)
        );
        assert!(run(&remove_command(&path)).status.success());
        let out = run(&exists_command(&path));
        assert_eq!(
            parse_exists(&String::from_utf8_lossy(&out.stdout)),
            Some(false)
        );
        // Removing a missing file is fine.
        assert!(run(&remove_command(&path)).status.success());
    }

    #[test]
    fn failed_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("x.json");
        let path = target.display().to_string();
        // An `mv` that fails, first on the shell's PATH.
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("mv"), "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(
            bin.join("mv"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let cmd = create_command(&path, b"data");
        let path_var = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new(&cmd[0])
            .args(&cmd[1..])
            .env("PATH", path_var)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(!target.exists());
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
        // A missing directory fails before anything is written.
        let path = dir.path().join("missing/y.json").display().to_string();
        assert!(!run(&create_command(&path, b"data")).status.success());
    }

    #[test]
    fn unknown_marker_is_not_a_boolean() {
        assert_eq!(parse_exists("exists\n"), Some(true));
        assert_eq!(parse_exists("notexist"), Some(false));
        assert_eq!(parse_exists("sh: test: not found"), None);
    }
}
