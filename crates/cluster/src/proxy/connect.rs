//! One connection from the runner to a unix socket on a node, opened as a
//! process on the node would open it: how the interposer reaches the sockets
//! of a driver that runs there.
//!
//! Both ends of it live here. In the proxy pod, `dra-e2e-agent proxy-agent
//! --connect <socket>` connects to the socket and copies stdin to it and its
//! output to stdout ([`relay`]). In the runner, [`dial`] execs that command
//! in the node's proxy pod and hands out the exec's stdout and stdin as one
//! byte stream ([`PodConnection`]).
//!
//! A connect failure in the pod would otherwise show only as the exec
//! ending, so the agent says on **stderr** when it is connected (a
//! [`CONNECTED_PREFIX`] line) and writes nothing to stdout before: `dial`
//! returns only once that line arrived, and otherwise fails with what the
//! agent printed (its error names the socket path) and the exec's status.
//! stderr keeps the byte stream clean and costs no second exec (a separate
//! `test -S` check would, and still race with the socket's removal).
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, AttachedProcess};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, Join, ReadHalf, SimplexStream, WriteHalf};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug};

pub use dra_e2e_agent::relay::{CONNECTED_PREFIX, ConnectError, RelayEnd, relay};

use super::exec::ExecTarget;
use super::exec_agent::check_socket_path;
use super::pods::{AgentKind, ProxyPod};

/// How long starting the exec and connecting in the pod may take together.
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long to wait for the exec's status once a failed agent closed stderr.
const STATUS_WAIT: Duration = Duration::from_secs(5);

/// Buffer of each direction of the exec stream (kube's default is 1 KiB,
/// small for gRPC messages).
const EXEC_BUF: usize = 64 * 1024;

/// The agent's stderr lines kept for an error message.
const STDERR_LINES_KEPT: usize = 20;

/// The program of the dra-e2e proxy image, as `AgentKind::DraE2e` runs it.
const PROGRAM: &str = dra_e2e_agent::PROGRAM;

/// The command that connects to `socket` inside a pod whose image carries
/// `agent`; `None` where that agent has no connect mode (hostpathplugin).
pub fn connect_command(agent: AgentKind, socket: &str) -> Option<Vec<String>> {
    match agent {
        AgentKind::DraE2e => Some(vec![
            PROGRAM.into(),
            "proxy-agent".into(),
            "--connect".into(),
            socket.into(),
        ]),
        AgentKind::HostPathPlugin => None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error(
        "the proxy pod {target} runs upstream's hostpathplugin, which cannot connect to a \
         socket on its node: the interposer needs the dra-e2e proxy image; choose one that \
         carries `dra-e2e-agent` on its PATH with --proxy-image <image> (an image whose name \
         does not contain \"hostpathplugin\" is taken to carry it)"
    )]
    NoConnectMode { target: String },
    #[error("{0}")]
    PathTooLong(#[source] super::pods::ProxyPodsError),
    /// The exec did not start; said as any exec's start is.
    #[error(transparent)]
    Start(super::exec::ExecError),
    #[error("exec {command:?} in {target} has no {stream} stream")]
    NoStream {
        target: String,
        command: String,
        stream: &'static str,
    },
    #[error("exec {command:?} in {target} ended before connecting: {detail}")]
    NotConnected {
        target: String,
        command: String,
        detail: String,
    },
    #[error("exec {command:?} in {target} did not connect within {after:?}")]
    Timeout {
        target: String,
        command: String,
        after: Duration,
    },
}

/// A connection to a socket on a node, carried by an exec session of the
/// agent in the node's proxy pod: reads are the agent's stdout, writes its
/// stdin. Shutting it down closes the agent's stdin, which ends it;
/// dropping it ends the exec session (the agent then sees its stdin close).
pub struct PodConnection {
    io: Join<ReadHalf<SimplexStream>, WriteHalf<SimplexStream>>,
    process: AttachedProcess,
    stderr_drain: JoinHandle<()>,
}

dra_e2e_conn::pass_through_io!([] PodConnection, io);

impl Drop for PodConnection {
    fn drop(&mut self) {
        // AttachedProcess aborts on drop too; said here so it is not lost in
        // a refactoring.
        self.process.abort();
        self.stderr_drain.abort();
    }
}

impl std::fmt::Debug for PodConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodConnection").finish_non_exhaustive()
    }
}

/// Opens one connection to `socket` (a host path, mounted at the same path
/// in the pod) by exec of the agent's connect mode in `pod`. Returns once
/// the agent reported the connection; a missing socket, or an agent without
/// the connect mode, fails here with what the agent printed.
pub async fn dial(
    client: kube::Client,
    pod: &ProxyPod,
    socket: &str,
) -> Result<PodConnection, DialError> {
    let target = pod.exec_target();
    let command = connect_command(pod.agent, socket).ok_or_else(|| DialError::NoConnectMode {
        target: target.to_string(),
    })?;
    check_socket_path(pod.agent, socket).map_err(DialError::PathTooLong)?;
    let shown = command.join(" ");
    match tokio::time::timeout(DIAL_TIMEOUT, start(client, &target, command, &shown)).await {
        Ok(r) => r,
        Err(_) => Err(DialError::Timeout {
            target: target.to_string(),
            command: shown,
            after: DIAL_TIMEOUT,
        }),
    }
}

async fn start(
    client: kube::Client,
    target: &ExecTarget,
    command: Vec<String>,
    shown: &str,
) -> Result<PodConnection, DialError> {
    let api: Api<Pod> = Api::namespaced(client, &target.namespace);
    let params = AttachParams::default()
        .container(target.container.clone())
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .tty(false)
        .max_stdin_buf_size(EXEC_BUF)
        .max_stdout_buf_size(EXEC_BUF);
    let mut process = api.exec(&target.pod, command, &params).await.map_err(|e| {
        DialError::Start(super::exec::ExecError::Start {
            target: target.to_string(),
            command: shown.to_owned(),
            source: Box::new(e),
        })
    })?;
    let no_stream = |stream| DialError::NoStream {
        target: target.to_string(),
        command: shown.to_owned(),
        stream,
    };
    let stdout = process.stdout().ok_or_else(|| no_stream("stdout"))?;
    let stdin = process.stdin().ok_or_else(|| no_stream("stdin"))?;
    let mut stderr = BufReader::new(process.stderr().ok_or_else(|| no_stream("stderr"))?);
    let status = process.take_status();
    // The agent writes nothing to stdout before it is connected, so stdout
    // cannot fill up while only stderr is read here.
    if let Err(lines) = await_connected(&mut stderr).await {
        let status = match status {
            Some(s) => tokio::time::timeout(STATUS_WAIT, s).await.ok().flatten(),
            None => None,
        };
        return Err(DialError::NotConnected {
            target: target.to_string(),
            command: shown.to_owned(),
            detail: not_connected_detail(&lines, status.as_ref()),
        });
    }
    debug!(%target, command = %shown, "connected through the proxy pod");
    // stderr must be read to its end: a full stderr buffer would stall the
    // exec's stdout too.
    let span = tracing::debug_span!("pod connection", %target);
    let stderr_drain = tokio::spawn(
        async move {
            let mut lines = stderr.lines();
            while let Ok(Some(line)) = lines.next_line().await {
                debug!("agent: {line}");
            }
            if let Some(s) = status {
                let status = s.await;
                debug!(?status, "connection's exec ended");
            }
        }
        .instrument(span),
    );
    Ok(PodConnection {
        io: tokio::io::join(stdout, stdin),
        process,
        stderr_drain,
    })
}

/// Reads the agent's stderr up to its [`CONNECTED_PREFIX`] line. Fails with
/// the last lines read when stderr ends (or breaks) first.
async fn await_connected<R: AsyncRead + Unpin>(
    stderr: &mut BufReader<R>,
) -> Result<(), Vec<String>> {
    let mut seen: Vec<String> = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        match stderr.read_line(&mut line).await {
            Ok(0) => return Err(seen),
            Ok(_) => {
                let text = line.trim_end();
                if text.starts_with(CONNECTED_PREFIX) {
                    return Ok(());
                }
                if !text.is_empty() {
                    if seen.len() == STDERR_LINES_KEPT {
                        seen.remove(0);
                    }
                    seen.push(text.to_owned());
                }
            }
            Err(e) => {
                seen.push(format!("(reading stderr: {e})"));
                return Err(seen);
            }
        }
    }
}

/// `stderr: <lines>; exec status: <message>`, whichever are known.
fn not_connected_detail(stderr: &[String], status: Option<&Status>) -> String {
    let mut parts = Vec::new();
    if stderr.is_empty() {
        parts.push("the agent printed nothing".to_owned());
    } else {
        parts.push(format!("stderr: {}", stderr.join(" | ")));
    }
    match status {
        Some(s) => parts.push(format!(
            "exec status {}: {}",
            s.status.as_deref().unwrap_or("<none>"),
            s.message.as_deref().unwrap_or("no message")
        )),
        None => parts.push("no exec status".to_owned()),
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::UnixListener;

    #[test]
    fn the_connect_command_runs_the_same_program_as_the_agent() {
        let socket = "/var/lib/kubelet/plugins/d.k8s.io/dra.sock";
        let cmd = connect_command(AgentKind::DraE2e, socket).unwrap();
        assert_eq!(
            cmd,
            ["dra-e2e-agent", "proxy-agent", "--connect", socket].map(String::from)
        );
        assert_eq!(cmd[..2], AgentKind::DraE2e.command(socket, 9001)[..2]);
        assert!(connect_command(AgentKind::HostPathPlugin, socket).is_none());
    }

    #[test]
    fn hostpathplugin_pods_refuse_with_the_flag_to_use() {
        let msg = DialError::NoConnectMode {
            target: "ns/p (pause)".into(),
        }
        .to_string();
        assert!(msg.contains("dra-e2e proxy image"), "{msg}");
        assert!(msg.contains("--proxy-image"), "{msg}");
    }

    #[tokio::test]
    async fn bytes_flow_both_ways_until_the_socket_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut got = [0u8; 4];
            conn.read_exact(&mut got).await.unwrap();
            conn.write_all(b"pong").await.unwrap();
            got
        });
        let (mut to_agent, agent_in) = tokio::io::duplex(64);
        let (agent_out, mut from_agent) = tokio::io::duplex(64);
        let mut connected = false;
        let relayed = async {
            relay(&path, agent_in, agent_out, || connected = true)
                .await
                .unwrap()
        };
        let talk = async {
            to_agent.write_all(b"ping").await.unwrap();
            let mut out = Vec::new();
            from_agent.read_to_end(&mut out).await.unwrap();
            out
        };
        let (end, out) = tokio::join!(relayed, talk);
        assert!(connected);
        assert_eq!(out, b"pong");
        assert_eq!(server.await.unwrap(), *b"ping");
        assert_eq!(end.direction, "socket->stdout");
        assert_eq!(end.result.unwrap(), 4);
    }

    #[tokio::test]
    async fn the_end_of_input_ends_the_relay_and_closes_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).await.unwrap();
            got
        });
        let (mut to_agent, agent_in) = tokio::io::duplex(64);
        let (agent_out, _from_agent) = tokio::io::duplex(64);
        let relayed =
            tokio::spawn(async move { relay(&path, agent_in, agent_out, || {}).await.unwrap() });
        to_agent.write_all(b"request").await.unwrap();
        drop(to_agent);
        let end = relayed.await.unwrap();
        assert_eq!(end.direction, "stdin->socket");
        assert_eq!(end.result.unwrap(), 7);
        assert_eq!(server.await.unwrap(), b"request");
    }

    #[tokio::test]
    async fn a_missing_socket_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such.sock");
        let (_to_agent, agent_in) = tokio::io::duplex(64);
        let (agent_out, _from_agent) = tokio::io::duplex(64);
        let mut connected = false;
        let err = relay(&path, agent_in, agent_out, || connected = true)
            .await
            .unwrap_err();
        assert!(!connected);
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("No such file"), "{msg}");
    }

    #[tokio::test]
    async fn dial_waits_for_the_connected_line_past_log_lines() {
        let (mut w, r) = tokio::io::duplex(256);
        w.write_all(b"INFO starting\nproxy-agent connected unix=/s\nlater\n")
            .await
            .unwrap();
        let mut r = BufReader::new(r);
        await_connected(&mut r).await.unwrap();
        let mut rest = String::new();
        r.read_line(&mut rest).await.unwrap();
        assert_eq!(rest, "later\n");
    }

    #[tokio::test]
    async fn an_agent_that_ends_unconnected_is_reported_with_its_words() {
        let (mut w, r) = tokio::io::duplex(256);
        w.write_all(b"error: connecting to unix socket /x.sock: No such file\n")
            .await
            .unwrap();
        drop(w);
        let lines = await_connected(&mut BufReader::new(r)).await.unwrap_err();
        let status = Status {
            status: Some("Failure".into()),
            message: Some("command terminated with non-zero exit code".into()),
            ..Default::default()
        };
        let detail = not_connected_detail(&lines, Some(&status));
        assert!(
            detail.contains("stderr: error: connecting to unix socket /x.sock"),
            "{detail}"
        );
        assert!(detail.contains("exec status Failure"), "{detail}");
        assert_eq!(
            not_connected_detail(&[], None),
            "the agent printed nothing; no exec status"
        );
    }
}
