//! Waiting for a component to become ready.
//!
//! Readiness endpoints have no watch, so they are probed on a short interval
//! until a deadline; the component's exit ends the wait at once, so a crash is
//! reported immediately with its log rather than as a timeout.
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::host::process::ManagedProcess;

const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// One probe may not hang longer than this (a half-started server can accept
/// connections and then not answer).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How a readiness wait ended, when not with success.
#[derive(Debug)]
pub enum NotReady {
    Exited { status: std::process::ExitStatus },
    Timeout { probe: String, last: String },
}

/// Probes until `probe` returns `Ok`, the process exits, or `timeout` passes.
pub async fn wait_ready<F, Fut>(
    process: &ManagedProcess,
    probe_name: &str,
    timeout: Duration,
    mut probe: F,
) -> Result<(), NotReady>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    let mut exit = process.exit_watch();
    let mut last;
    loop {
        if let Some(status) = *exit.borrow_and_update() {
            return Err(NotReady::Exited { status });
        }
        match tokio::time::timeout(PROBE_TIMEOUT, probe()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => last = e,
            Err(_) => last = format!("no answer within {PROBE_TIMEOUT:?}"),
        }
        if Instant::now() >= deadline {
            return Err(NotReady::Timeout {
                probe: probe_name.to_owned(),
                last,
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(PROBE_INTERVAL) => {}
            _ = exit.changed() => {}
        }
    }
}

/// `GET path` with a kube client (whose TLS settings carry the credentials
/// the component demands); succeeds when the server answers 2xx.
///
/// The port is first checked with a bare TCP connect: kube-rs logs every
/// failed request at error level, and a start-up would otherwise fill the
/// runner's log with connection errors.
pub async fn probe_kube(client: &kube::Client, port: u16, path: &str) -> Result<(), String> {
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(request)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[tokio::test]
    async fn wait_ends_when_the_process_exits() {
        let tmp = tempfile::tempdir().unwrap();
        let p = ManagedProcess::spawn(
            "short-lived",
            Path::new("/bin/sh"),
            vec!["-c".into(), "exit 7".into()],
            &tmp.path().join("log"),
        )
        .unwrap();
        let result = wait_ready(&p, "never", Duration::from_secs(3600), || async {
            Err("refused".to_string())
        })
        .await;
        match result {
            Err(NotReady::Exited { status }) => assert_eq!(status.code(), Some(7)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn wait_times_out_with_the_last_probe_result() {
        let tmp = tempfile::tempdir().unwrap();
        let p = ManagedProcess::spawn(
            "sleeper",
            Path::new("/bin/sh"),
            vec!["-c".into(), "exec sleep 600".into()],
            &tmp.path().join("log"),
        )
        .unwrap();
        let result = wait_ready(&p, "GET /x", Duration::from_millis(250), || async {
            Err("still refused".to_string())
        })
        .await;
        match result {
            Err(NotReady::Timeout { probe, last }) => {
                assert_eq!(probe, "GET /x");
                assert_eq!(last, "still refused");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
