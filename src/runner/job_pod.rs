//! `dra-e2e job-pod` (hidden): the wrapper `dra-e2e job` runs in its Job's
//! pod. It runs the runner as a child with the arguments it was given (and
//! reports of its own choosing), passes its output on, then stores the
//! JUnit report, the HTML report, the transcript and the artifacts in
//! ConfigMaps of the pod's namespace ([`crate::cluster::job::results`]) and
//! exits with the runner's status. The runner outside reads them through
//! the API server: a cluster whose kubelets it cannot reach (no logs, exec
//! or port-forward) still hands them over.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use crate::cluster::job::results::Results;

/// Where the runner writes its reports and artifacts in the pod.
const OUT_DIR: &str = "/tmp/dra-e2e-job";
/// The pod's namespace, as the kubelet mounts it with the token.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// The kubelet copies this file into the container's terminated state,
/// where the outside runner reads it when the results never came.
const TERMINATION_LOG: &str = "/dev/termination-log";
/// Artifacts larger than this (as a tar, before gzip) stay in the pod:
/// the results must fit a handful of ConfigMaps.
const MAX_ARTIFACTS: u64 = 32 << 20;
/// How long storing the results may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the runner with `args`, stores the results; returns its status.
pub fn cli_main(args: Vec<std::ffi::OsString>) -> anyhow::Result<i32> {
    let args: Vec<_> = match args.split_first() {
        Some((first, rest)) if first == "--" => rest.to_vec(),
        _ => args,
    };
    let out = PathBuf::from(OUT_DIR);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {OUT_DIR}"))?;
    let exe = std::env::current_exe().context("finding the running dra-e2e executable")?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let exit_status = rt.block_on(run_runner(&exe, &args, &out, &log))?;
    let transcript = log.lock().map(|l| l.clone()).unwrap_or_default();

    let mut files = std::collections::BTreeMap::new();
    for name in ["junit.xml", "report.html"] {
        match std::fs::read(out.join(name)) {
            Ok(bytes) => {
                files.insert(name.to_owned(), bytes);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("dra-e2e job-pod: reading {name}: {e}"),
        }
    }
    match artifacts_tar(&out.join("artifacts")) {
        Ok(Some(tar)) => {
            files.insert("artifacts.tar".to_owned(), tar);
        }
        Ok(None) => {}
        Err(e) => eprintln!("dra-e2e job-pod: the artifacts stay in the pod: {e:#}"),
    }
    files.insert("run.log".to_owned(), transcript.clone());
    let results = Results { exit_status, files };
    let stored = rt.block_on(async {
        tokio::time::timeout(STORE_TIMEOUT, store(&results))
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {STORE_TIMEOUT:?}")))
    });
    // What the outside runner shows when the results are missing: the
    // transcript's end, or why storing failed.
    let note = match &stored {
        Ok(()) => tail(&transcript, 3000),
        Err(e) => format!(
            "storing the results failed: {e:#}\n{}",
            tail(&transcript, 2000)
        ),
    };
    let _ = std::fs::write(TERMINATION_LOG, note);
    stored.context("storing the results in ConfigMaps")?;
    Ok(exit_status)
}

/// Runs the runner with `args` and reports in `out`, its output passed on
/// and kept in `log`; returns its exit status (128 + the signal that ended
/// it). The wrapper is the container's process 1, the one the kubelet
/// stops the pod through: SIGTERM and SIGINT are passed on, so that the
/// runner tears its scenarios down as it does when stopped anywhere else.
async fn run_runner(
    exe: &Path,
    args: &[std::ffi::OsString],
    out: &Path,
    log: &Arc<Mutex<Vec<u8>>>,
) -> anyhow::Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut child = tokio::process::Command::new(exe)
        .args(args)
        .arg("--junit")
        .arg(out.join("junit.xml"))
        .arg("--html")
        .arg(out.join("report.html"))
        .arg("--artifacts")
        .arg(out.join("artifacts"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let copies = [
        child
            .stdout
            .take()
            .map(|s| tee(s, tokio::io::stdout(), log.clone())),
        child
            .stderr
            .take()
            .map(|s| tee(s, tokio::io::stderr(), log.clone())),
    ];
    let pid = child.id();
    let status = loop {
        let signal = tokio::select! {
            status = child.wait() => break status.context("waiting for the runner")?,
            _ = terminate.recv() => crate::sys::Signal::Term,
            _ = interrupt.recv() => crate::sys::Signal::Int,
        };
        if let Some(pid) = pid {
            // It may have ended already; its status says so.
            let _ = crate::sys::kill(pid, signal);
        }
    };
    for copy in copies.into_iter().flatten() {
        let _ = copy.await;
    }
    Ok(status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt as _;
        128 + status.signal().unwrap_or(0)
    }))
}

/// Copies `from` to `to` and into `log` as it comes.
fn tee(
    mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    mut to: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    log: Arc<Mutex<Vec<u8>>>,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    tokio::spawn(async move {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let _ = to.write_all(&buf[..n]).await;
            let _ = to.flush().await;
            if let Ok(mut l) = log.lock() {
                l.extend_from_slice(&buf[..n]);
            }
        }
    })
}

/// The last `max` bytes of `text`, from a line start.
fn tail(text: &[u8], max: usize) -> String {
    let start = text.len().saturating_sub(max);
    let s = String::from_utf8_lossy(&text[start..]);
    match (start, s.find('\n')) {
        (0, _) | (_, None) => s.into_owned(),
        (_, Some(i)) => s[i + 1..].to_owned(),
    }
}

/// The artifacts directory as a tar, `None` when there is none; an error
/// when it is too large to hand over.
fn artifacts_tar(dir: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    b.append_dir_all("artifacts", dir)
        .with_context(|| format!("archiving {}", dir.display()))?;
    let tar = b.into_inner().context("finishing the tar")?;
    if tar.len() as u64 > MAX_ARTIFACTS {
        anyhow::bail!(
            "{} holds {} MiB, more than the {} MiB the results carry",
            dir.display(),
            tar.len() >> 20,
            MAX_ARTIFACTS >> 20
        );
    }
    Ok(Some(tar))
}

/// Creates the results' ConfigMaps, the parts before the index.
async fn store(results: &Results) -> anyhow::Result<()> {
    let namespace = std::fs::read_to_string(NAMESPACE_FILE)
        .with_context(|| format!("reading the pod's namespace from {NAMESPACE_FILE}"))?;
    let namespace = namespace.trim();
    let config = crate::cluster::remote::load_config(None).await?;
    let client = kube::Client::try_from(config).context("building the client")?;
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let (parts, index) = results.to_config_maps(namespace)?;
    for cm in parts.iter().chain(std::iter::once(&index)) {
        let name = cm.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), cm)
            .await
            .with_context(|| format!("creating ConfigMap {namespace}/{name}"))?;
    }
    println!(
        "dra-e2e job-pod: results stored in ConfigMap {namespace}/{} and {} part(s)",
        crate::cluster::job::results::INDEX,
        parts.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_starts_at_a_line() {
        assert_eq!(tail(b"a\nbb\nccc\n", 100), "a\nbb\nccc\n");
        assert_eq!(tail(b"a\nbb\nccc\n", 6), "ccc\n");
    }
}
