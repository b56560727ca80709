//! Commands in a container by exec, for the checks that read a
//! container's env and the steps that run a command in one: the session
//! started again when a just-restarted kubelet does not know the pod yet,
//! a read run again when a kubelet restart cuts its session, and every
//! failure named after the pod and container.
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, LogParams};
use tokio::io::AsyncReadExt as _;

use dra_e2e_kube::retry::{Retry, is_pod_unknown_to_kubelet};

/// The env of a container on a node with a container runtime, as `env` in it
/// prints it: a running container is asked by exec (`env` must exist in its
/// image and exit 0). An init container that already exited cannot be
/// exec'd; its env is what its script printed to its log (the pod builder's
/// init script starts with `env`). Every failure names the pod and container
/// and says what went wrong, never an empty env.
pub async fn exec_env(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
) -> anyhow::Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let target = format!("container {container} of pod {namespace}/{pod}");
    let current = pods
        .get_opt(pod)
        .await
        .with_context(|| format!("reading pod {namespace}/{pod}"))?
        .with_context(|| format!("{target}: the pod does not exist"))?;
    match exited(&current, container) {
        Some(Exited::Init(code)) => {
            let lp = LogParams {
                container: Some(container.to_owned()),
                ..Default::default()
            };
            let log = pods
                .logs(pod, &lp)
                .await
                .with_context(|| format!("reading the log of init {target}"))?;
            return env_from_init_log(&target, code, &log);
        }
        Some(Exited::Regular(code)) => {
            bail!("{target} is not running (it exited with code {code}), so `env` cannot run in it")
        }
        None => {}
    }
    let env = ["env".to_owned()];
    let out = exec_output(&pods, pod, container, &env, &target, Rerun::WhenCut).await?;
    env_from_exec(&target, out)
}

/// Runs `command` in a running container: `None` when it exited 0, else
/// what it reported (exit status, stderr).
pub async fn exec_status(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
    command: &[String],
) -> anyhow::Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let target = format!("container {container} of pod {namespace}/{pod}");
    let out = exec_output(&pods, pod, container, command, &target, Rerun::Never).await?;
    let stderr = out.stderr.trim();
    Ok(match &out.status {
        Some(st) if st.status.as_deref() == Some("Success") => None,
        Some(st) => Some(format!(
            "{}{}",
            describe_status(st),
            if stderr.is_empty() {
                String::new()
            } else {
                format!("; stderr: {stderr}")
            }
        )),
        None => Some(format!(
            "no exit status{}",
            out.stream_error
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )),
    })
}

/// Whether a command may run again when its exec session is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rerun {
    /// It only reads (`env`): a session cut before it reported its status
    /// (a kubelet that restarts under it), or one silent for
    /// [`SILENT_SESSION`], is started again until the deadline. Reading twice
    /// gives what reading once does.
    WhenCut,
    /// It may change something: it runs once.
    Never,
}

/// Runs `command` in `container` by exec and collects what it wrote and
/// its status, within [`EXEC_TIMEOUT`] after the tries to start it.
async fn exec_output(
    pods: &Api<Pod>,
    pod: &str,
    container: &str,
    command: &[String],
    target: &str,
    rerun: Rerun,
) -> anyhow::Result<ExecOutput> {
    let shown = command.join(" ");
    // The command's own time comes after the tries to start it, so that a
    // kubelet that never learns the pod ends with its own answer.
    let within = EXEC_TIMEOUT + Retry::TRANSIENT.within;
    let deadline = tokio::time::Instant::now() + within;
    let late = || anyhow::anyhow!("exec `{shown}` in {target} did not finish within {within:?}");
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attached = tokio::time::timeout(left, exec_start(pods, pod, container, command))
            .await
            .map_err(|_| late())?
            .with_context(|| format!("exec `{shown}` in {target}"))?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let limit = match rerun {
            Rerun::WhenCut => left.min(SILENT_SESSION),
            Rerun::Never => left,
        };
        let ended = tokio::time::timeout(limit, exec_collect(attached))
            .await
            .ok();
        let seen = match &ended {
            Some(out) if out.status.is_none() && out.stream_error.is_some() => Session::Cut,
            Some(_) => Session::Ended,
            None => Session::Silent,
        };
        match rerun.after(seen, limit < left) {
            Next::Return => return ended.ok_or_else(late),
            Next::Late => return Err(late()),
            Next::Again => tracing::info!(
                "exec `{shown}` in {target}: the session was {} (its kubelet restarted under \
                 it?); running it again",
                match &ended {
                    Some(out) => format!(
                        "cut before it reported its status ({})",
                        out.stream_error.as_deref().unwrap_or_default()
                    ),
                    None => format!("silent for {SILENT_SESSION:?}"),
                }
            ),
        }
    }
}

/// How an exec session went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Session {
    /// It reported how the command ended.
    Ended,
    /// Its stream failed before the command's status came.
    Cut,
    /// Nothing ended it within its limit.
    Silent,
}

/// What [`exec_output`] does after a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Return,
    Again,
    Late,
}

impl Rerun {
    /// After a session that went `seen`; `time_left` says whether the
    /// deadline leaves room beyond the session's limit.
    fn after(self, seen: Session, time_left: bool) -> Next {
        match (self, seen) {
            (Rerun::WhenCut, Session::Cut | Session::Silent) if time_left => Next::Again,
            (_, Session::Silent) => Next::Late,
            (_, Session::Ended | Session::Cut) => Next::Return,
        }
    }
}

/// Starts `command` by exec; a kubelet just restarted does not know the
/// pod for a moment, and is asked again.
async fn exec_start(
    pods: &Api<Pod>,
    pod: &str,
    container: &str,
    command: &[String],
) -> Result<kube::api::AttachedProcess, kube::Error> {
    let params = AttachParams::default()
        .container(container)
        .stdout(true)
        .stderr(true);
    Retry::TRANSIENT
        .run(is_pod_unknown_to_kubelet, || {
            pods.exec(pod, command.to_vec(), &params)
        })
        .await
}

/// What a started command wrote, its status and a failure of the stream.
async fn exec_collect(mut attached: kube::api::AttachedProcess) -> ExecOutput {
    let status = attached.take_status();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let out_stream = attached.stdout();
    let err_stream = attached.stderr();
    let read_out = async {
        match out_stream {
            Some(mut s) => s.read_to_string(&mut stdout).await.map(drop),
            None => Ok(()),
        }
    };
    let read_err = async {
        match err_stream {
            Some(mut s) => s.read_to_string(&mut stderr).await.map(drop),
            None => Ok(()),
        }
    };
    let (read_out, read_err) = tokio::join!(read_out, read_err);
    let status = match status {
        Some(s) => s.await,
        None => None,
    };
    let joined = attached.join().await;
    let stream_error = read_out
        .err()
        .map(|e| format!("reading stdout: {e}"))
        .or_else(|| read_err.err().map(|e| format!("reading stderr: {e}")))
        .or_else(|| joined.err().map(|e| e.to_string()));
    ExecOutput {
        stdout,
        stderr,
        status,
        stream_error,
    }
}

/// How long reading a container's env by exec may take once started.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a session of a command that may run again ([`Rerun::WhenCut`])
/// may stay without an end before it is started again: `env` ends in well
/// under a second, and a session a kubelet restart left open never ends
/// (seen in the chaos soak on six real nodes: an `env` begun a second before
/// the node's kubelet restarted hung for the whole 120 s).
const SILENT_SESSION: Duration = Duration::from_secs(20);

/// A container that is not running any more, with its exit code.
#[derive(Debug, PartialEq, Eq)]
enum Exited {
    Init(i32),
    Regular(i32),
}

/// Whether `container` of the pod has terminated (its current state, not a
/// previous run of a restarting container).
fn exited(pod: &Pod, container: &str) -> Option<Exited> {
    let status = pod.status.as_ref()?;
    let terminated = |list: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
        list?
            .iter()
            .find(|c| c.name == container)?
            .state
            .as_ref()?
            .terminated
            .as_ref()
            .map(|t| t.exit_code)
    };
    terminated(status.init_container_statuses.as_ref())
        .map(Exited::Init)
        .or_else(|| terminated(status.container_statuses.as_ref()).map(Exited::Regular))
}

/// The env lines an exited init container printed to its log.
fn env_from_init_log(target: &str, code: i32, log: &str) -> anyhow::Result<Vec<String>> {
    let lines: Vec<String> = log.lines().map(str::to_owned).collect();
    if lines.iter().all(|l| !l.contains('=')) {
        bail!(
            "init {target} exited (code {code}) and its log holds no env to read: an exited \
             container cannot be exec'd, so only init containers whose script prints `env` \
             (as the pod builder's does) can be checked; log: {:?}",
            log.trim()
        );
    }
    Ok(lines)
}

/// What an exec of `env` produced.
#[derive(Debug, Default)]
struct ExecOutput {
    stdout: String,
    stderr: String,
    /// The status the API server reported on the exec's error channel.
    status: Option<Status>,
    /// A failure of the stream itself.
    stream_error: Option<String>,
}

/// The env lines, if the exec succeeded: status `Success`, nothing on
/// stderr (as upstream requires) and some output.
fn env_from_exec(target: &str, out: ExecOutput) -> anyhow::Result<Vec<String>> {
    let stderr = out.stderr.trim();
    let stderr_note = if stderr.is_empty() {
        String::new()
    } else {
        format!("; stderr: {stderr}")
    };
    match &out.status {
        None => bail!(
            "exec `env` in {target} ended without reporting an exit status{}{stderr_note}",
            out.stream_error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
        Some(st) if st.status.as_deref() != Some("Success") => bail!(
            "exec `env` in {target} failed: {}{stderr_note}",
            describe_status(st)
        ),
        Some(_) => {}
    }
    if !stderr.is_empty() {
        bail!("exec `env` in {target} succeeded but wrote to stderr: {stderr}");
    }
    if out.stdout.trim().is_empty() {
        bail!("exec `env` in {target} succeeded but printed no env at all");
    }
    Ok(out.stdout.lines().map(str::to_owned).collect())
}

/// `status Failure, reason NonZeroExitCode, exit code 127: <message>`.
fn describe_status(st: &Status) -> String {
    let mut parts = vec![format!(
        "status {}",
        st.status.as_deref().unwrap_or("<none>")
    )];
    if let Some(r) = st.reason.as_deref().filter(|r| !r.is_empty()) {
        parts.push(format!("reason {r}"));
    }
    let exit_code = st
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
        .and_then(|c| c.message.as_deref());
    if let Some(code) = exit_code {
        parts.push(format!("exit code {code}"));
    }
    let mut text = parts.join(", ");
    if let Some(m) = st.message.as_deref().filter(|m| !m.is_empty()) {
        text.push_str(": ");
        text.push_str(m);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};

    const TARGET: &str = "container with-resource of pod ns/tester-1";

    /// A read (`env`) cut or left hanging by a kubelet restart is run
    /// again while the deadline allows; a command that may change
    /// something never is; a session that ended is the answer either way.
    #[test]
    fn only_a_read_runs_again_and_only_when_its_session_was_cut_or_silent() {
        use Next::*;
        use Session::*;
        let read = Rerun::WhenCut;
        assert_eq!(read.after(Cut, true), Again);
        assert_eq!(read.after(Silent, true), Again);
        assert_eq!(read.after(Ended, true), Return);
        assert_eq!(read.after(Cut, false), Return);
        assert_eq!(read.after(Silent, false), Late);
        let write = Rerun::Never;
        assert_eq!(write.after(Cut, true), Return);
        assert_eq!(write.after(Silent, true), Late);
        assert_eq!(write.after(Ended, true), Return);
    }

    fn status(status: &str, reason: &str, exit_code: Option<&str>, message: &str) -> Status {
        Status {
            status: Some(status.to_owned()),
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
            message: (!message.is_empty()).then(|| message.to_owned()),
            details: exit_code.map(|c| StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".to_owned()),
                    message: Some(c.to_owned()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn output(stdout: &str, stderr: &str, status: Option<Status>) -> ExecOutput {
        ExecOutput {
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            status,
            stream_error: None,
        }
    }

    #[test]
    fn successful_exec_yields_the_lines() {
        let env = env_from_exec(
            TARGET,
            output(
                "PATH=/bin\nuser_a=b\n",
                "",
                Some(status("Success", "", None, "")),
            ),
        )
        .unwrap();
        assert_eq!(env, ["PATH=/bin", "user_a=b"]);
    }

    #[test]
    fn failed_exec_names_container_status_and_stderr() {
        let err = env_from_exec(
            TARGET,
            output(
                "",
                "exec: \"env\": executable file not found in $PATH\n",
                Some(status(
                    "Failure",
                    "NonZeroExitCode",
                    Some("127"),
                    "command terminated with non-zero exit code",
                )),
            ),
        )
        .unwrap_err()
        .to_string();
        for part in [
            "exec `env` in container with-resource of pod ns/tester-1 failed",
            "status Failure",
            "reason NonZeroExitCode",
            "exit code 127",
            "command terminated with non-zero exit code",
            "stderr: exec: \"env\": executable file not found",
        ] {
            assert!(err.contains(part), "{part:?} missing in {err}");
        }
    }

    #[test]
    fn exec_without_status_or_with_odd_output_fails() {
        let mut out = output("user_a=b\n", "", None);
        out.stream_error = Some("connection reset".into());
        let err = env_from_exec(TARGET, out).unwrap_err().to_string();
        assert!(
            err.contains("ended without reporting an exit status (connection reset)"),
            "{err}"
        );

        let ok = || Some(status("Success", "", None, ""));
        let err = env_from_exec(TARGET, output("a=b\n", "warning\n", ok()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("wrote to stderr: warning"), "{err}");

        let err = env_from_exec(TARGET, output("\n", "", ok()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("printed no env"), "{err}");
        assert!(err.contains("with-resource"), "{err}");
    }

    #[test]
    fn status_descriptions() {
        assert_eq!(
            describe_status(&status(
                "Failure",
                "InternalError",
                None,
                "container not running"
            )),
            "status Failure, reason InternalError: container not running"
        );
        assert_eq!(describe_status(&Status::default()), "status <none>");
    }

    #[test]
    fn exited_containers_are_found_by_state() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p" },
            "status": {
                "initContainerStatuses": [
                    { "name": "init", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                      "state": { "terminated": { "exitCode": 0 } } }
                ],
                "containerStatuses": [
                    { "name": "with-resource", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                      "state": { "running": {} },
                      "lastState": { "terminated": { "exitCode": 1 } } },
                    { "name": "done", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                      "state": { "terminated": { "exitCode": 3 } } }
                ]
            }
        }))
        .unwrap();
        assert_eq!(exited(&pod, "init"), Some(Exited::Init(0)));
        assert_eq!(exited(&pod, "with-resource"), None);
        assert_eq!(exited(&pod, "done"), Some(Exited::Regular(3)));
        assert_eq!(exited(&pod, "missing"), None);
    }

    #[test]
    fn init_logs_need_env_output() {
        let env = env_from_init_log(TARGET, 0, "HOME=/\nuser_a=b\n").unwrap();
        assert_eq!(env, ["HOME=/", "user_a=b"]);
        let err = env_from_init_log(TARGET, 0, "").unwrap_err().to_string();
        assert!(err.contains("its log holds no env"), "{err}");
        assert!(err.contains("exited (code 0)"), "{err}");
    }
}
