//! Running short commands in a proxy pod's container.
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::AsyncReadExt;
use tracing::debug;

use dra_e2e_kube::retry::{Retry, is_pod_unknown_to_kubelet};

/// A container to exec into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecTarget {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

impl std::fmt::Display for ExecTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} ({})", self.namespace, self.pod, self.container)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("exec {command:?} in {target}: {source}")]
    Start {
        target: String,
        command: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("exec {command:?} in {target} failed: {message}; stderr: {stderr}")]
    Failed {
        target: String,
        command: String,
        message: String,
        stderr: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Quotes `s` as one word for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A command line for logs and errors; long scripts are shortened.
fn describe(command: &[String]) -> String {
    let mut s = command.join(" ");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Runs `command` to completion and returns its output; a non-zero exit is
/// an error carrying stderr.
pub async fn exec_capture(
    client: &kube::Client,
    target: &ExecTarget,
    command: Vec<String>,
) -> Result<ExecOutput, ExecError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &target.namespace);
    let described = describe(&command);
    let params = AttachParams::default()
        .container(target.container.clone())
        .stdin(false)
        .stdout(true)
        .stderr(true);
    // A kubelet just restarted does not know the pod for a moment.
    let mut proc = Retry::TRANSIENT
        .run(is_pod_unknown_to_kubelet, || {
            api.exec(&target.pod, command.clone(), &params)
        })
        .await
        .map_err(|e| ExecError::Start {
            target: target.to_string(),
            command: described.clone(),
            source: Box::new(e),
        })?;
    let stdout = proc.stdout();
    let stderr = proc.stderr();
    let status = proc.take_status();
    // Drain both pipes while waiting: a full pipe would stall the command.
    let (stdout, stderr, status) =
        tokio::join!(read_to_string(stdout), read_to_string(stderr), async {
            match status {
                Some(s) => s.await,
                None => None,
            }
        });
    let _ = proc.join().await;
    debug!(%target, command = %described, ?status, "exec finished");
    match status {
        Some(s) if s.status.as_deref() == Some("Success") => Ok(ExecOutput { stdout, stderr }),
        other => Err(ExecError::Failed {
            target: target.to_string(),
            command: described,
            message: other
                .map(|s| s.message.unwrap_or_else(|| "no message".into()))
                .unwrap_or_else(|| "ended without an exit status".into()),
            stderr: stderr.trim().to_owned(),
        }),
    }
}

async fn read_to_string(r: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut buf = Vec::new();
    if let Some(mut r) = r {
        let _ = r.read_to_end(&mut buf).await;
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn long_commands_are_shortened_for_messages() {
        let cmd = vec!["sh".to_owned(), "-c".to_owned(), "é".repeat(300)];
        let d = describe(&cmd);
        assert!(d.ends_with('…'));
        assert!(d.len() <= 204);
    }
}
