//! `dra-e2e-agent node-host`: the long-lived process of a node host pod,
//! serving every driver's sockets on its node for the runner.
//!
//! A driver process keeps its sockets answering while the kubelet or the
//! container runtime restarts, and its sockets go and come back with its pod.
//! Agents started by exec could not: an exec session goes through the kubelet
//! and the runtime, so restarting either ended them. This process is the
//! pod's own, so it lives as the pod's container does, and the runner reaches
//! it on the node's address (or by port-forward where it cannot) rather than
//! through the kubelet's streaming.
//!
//! It holds no state the runner did not give it on a connection still open:
//! a `serve` connection names its socket, and the first one makes the node
//! host listen there. After the process starts again (the pod's container
//! restarted, the node rebooted) it knows no socket, and the runner's pools,
//! dialling again as they do after any loss, bring every socket back. The
//! wire is [`crate::host_wire`].
use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::endpoint::{self, Endpoint};
use crate::host_wire::{Answer, MAX_LINE, READY_PREFIX, Request, TOKEN_ENV};
use crate::proxy_agent::{AgentError, OwnSocket, bind_tcp, splice};

/// How long a connection may take to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest file `write` takes: CDI specs are a few kilobytes.
const MAX_FILE: u64 = 16 << 20;

#[derive(Debug, Parser)]
#[command(
    name = "dra-e2e-agent node-host",
    about = "Serves the runner's sockets and files on this node"
)]
pub struct Args {
    /// Where the runner connects: tcp://[host]:<port> (an empty host means
    /// every address). The token is read from DRA_E2E_NODE_HOST_TOKEN.
    #[arg(long)]
    listen: String,
}

/// The program's entry; `args` excludes the subcommand name.
pub fn cli_main(args: Vec<OsString>) -> anyhow::Result<()> {
    let args = Args::try_parse_from(std::iter::once(OsString::from("node-host")).chain(args))?;
    run(args)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let token = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{TOKEN_ENV} is not set: the node host takes requests only with the run's token"
            )
        })?;
    let (host, port) = match endpoint::parse(&args.listen) {
        Ok(Endpoint::Tcp { host, port }) => (host, port),
        _ => anyhow::bail!("--listen {:?} must be tcp://[host]:port", args.listen),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = bind_tcp(&host, port).await?;
        let addr = listener.local_addr()?;
        let host = Arc::new(NodeHost::new(token));
        println!("{READY_PREFIX} tcp={addr} instance={}", host.instance);
        info!(%addr, instance = %host.instance, "listening");
        let stop = stop_signal()?;
        tokio::pin!(stop);
        loop {
            let (conn, peer) = tokio::select! {
                _ = &mut stop => break,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let _ = conn.set_nodelay(true);
            let host = host.clone();
            tokio::spawn(async move {
                if let Err(e) = host.handle(conn).await {
                    debug!(%peer, error = %e, "connection ended");
                }
            });
        }
        host.close_all();
        Ok(())
    })
}

/// Resolves on TERM, INT or HUP: the pod is being stopped.
fn stop_signal() -> Result<impl std::future::Future<Output = ()>, AgentError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(AgentError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(AgentError::Signals)?;
    let mut hup = signal(SignalKind::hangup()).map_err(AgentError::Signals)?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
        info!("signal received, removing the sockets and stopping");
    })
}

/// One socket the node host listens on for the runner.
struct Served {
    socket: OwnSocket,
    /// The runner's connections waiting for a client, oldest first.
    waiting: Arc<Waiting>,
    accept: JoinHandle<()>,
}

#[derive(Default)]
struct Waiting {
    queue: Mutex<VecDeque<BufReader<TcpStream>>>,
    pushed: Notify,
}

impl Waiting {
    fn push(&self, conn: BufReader<TcpStream>) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(conn);
        self.pushed.notify_one();
    }

    /// The oldest waiting connection the runner has not closed meanwhile.
    async fn pop_live(&self) -> BufReader<TcpStream> {
        loop {
            let pushed = self.pushed.notified();
            tokio::pin!(pushed);
            pushed.as_mut().enable();
            loop {
                let next = self
                    .queue
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop_front();
                let Some(conn) = next else { break };
                if still_open(conn.get_ref()) {
                    return conn;
                }
                debug!("dropped a waiting connection the runner closed");
            }
            pushed.await;
        }
    }
}

/// A waiting connection has nothing to read yet: an end of file (or an
/// error) means the runner gave it up, and a kubelet paired with it would
/// be cut at once.
fn still_open(conn: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(conn.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

struct NodeHost {
    token: String,
    instance: String,
    served: Mutex<HashMap<PathBuf, Served>>,
}

impl NodeHost {
    fn new(token: String) -> Self {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            token,
            instance: format!("{}-{}", since_epoch.as_nanos(), std::process::id()),
            served: Mutex::new(HashMap::new()),
        }
    }

    fn ok(&self) -> String {
        Answer::Ok {
            instance: self.instance.clone(),
        }
        .line()
    }

    async fn handle(self: Arc<Self>, conn: TcpStream) -> std::io::Result<()> {
        let mut conn = BufReader::new(conn);
        let line = match tokio::time::timeout(REQUEST_TIMEOUT, read_line(&mut conn)).await {
            Ok(r) => r?,
            Err(_) => return Err(std::io::Error::other("no request line in time")),
        };
        let request = match Request::parse(&line, &self.token) {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "refused a request");
                let _ = conn
                    .get_mut()
                    .write_all(Answer::Err(e.to_string()).line().as_bytes())
                    .await;
                return Ok(());
            }
        };
        debug!(?request, "request");
        let outcome = match request {
            Request::Serve(path) => return self.serve(path, conn).await,
            Request::Connect(path) => return self.connect(&path, conn).await,
            Request::Close(path) => {
                self.close(&path);
                Ok(Vec::new())
            }
            Request::Sockets(dir) => crate::sockets::list(&dir).map(|entries| {
                entries
                    .iter()
                    .map(|e| format!("{}\n", crate::sockets::line(e)))
                    .collect::<String>()
                    .into_bytes()
            }),
            Request::Write { path, len } => {
                write_file(&path, len, &mut conn).await.map(|()| Vec::new())
            }
            Request::Remove(path) => match std::fs::remove_file(&path) {
                Ok(()) => Ok(Vec::new()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e),
            },
            Request::Exists(path) => Ok(if path.exists() {
                b"yes\n".to_vec()
            } else {
                b"no\n".to_vec()
            }),
            Request::Specs(dir) => specs(&dir),
        };
        let out = conn.get_mut();
        match outcome {
            Ok(body) => {
                out.write_all(self.ok().as_bytes()).await?;
                out.write_all(&body).await?;
            }
            Err(e) => {
                out.write_all(Answer::Err(e.to_string()).line().as_bytes())
                    .await?
            }
        }
        out.shutdown().await
    }

    /// Listens on `path` if not yet, answers, and queues the connection.
    async fn serve(&self, path: PathBuf, mut conn: BufReader<TcpStream>) -> std::io::Result<()> {
        let waiting = {
            let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
            match served.get(&path) {
                Some(s) => Ok(s.waiting.clone()),
                None => match OwnSocket::bind(&path) {
                    Ok((listener, socket)) => {
                        let waiting = Arc::new(Waiting::default());
                        let accept =
                            tokio::spawn(accept_loop(listener, path.clone(), waiting.clone()));
                        info!(socket = %path.display(), "serving");
                        served.insert(
                            path.clone(),
                            Served {
                                socket,
                                waiting: waiting.clone(),
                                accept,
                            },
                        );
                        Ok(waiting)
                    }
                    Err(e) => Err(e.to_string()),
                },
            }
        };
        match waiting {
            Ok(waiting) => {
                conn.get_mut().write_all(self.ok().as_bytes()).await?;
                waiting.push(conn);
            }
            Err(e) => {
                warn!(socket = %path.display(), error = %e, "cannot serve");
                conn.get_mut()
                    .write_all(Answer::Err(e).line().as_bytes())
                    .await?;
            }
        }
        Ok(())
    }

    fn close(&self, path: &Path) {
        let gone = self
            .served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path);
        match gone {
            Some(s) => {
                s.stop();
                info!(socket = %path.display(), "closed");
            }
            // What a stopped socket left (a node host started since): the
            // file, if any, is removed all the same.
            None => match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_socket() => {
                    let _ = std::fs::remove_file(path);
                }
                _ => {}
            },
        }
    }

    fn close_all(&self) {
        let all: Vec<Served> = self
            .served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in all {
            s.stop();
        }
    }

    async fn connect(&self, path: &Path, mut conn: BufReader<TcpStream>) -> std::io::Result<()> {
        match UnixStream::connect(path).await {
            Ok(unix) => {
                conn.get_mut().write_all(self.ok().as_bytes()).await?;
                let (dir, result) = splice(unix, conn).await;
                debug!(socket = %path.display(), dir, ?result, "connection ended");
                Ok(())
            }
            Err(e) => {
                let message = format!("connecting to {}: {e}", path.display());
                conn.get_mut()
                    .write_all(Answer::Err(message).line().as_bytes())
                    .await
            }
        }
    }
}

impl Served {
    fn stop(self) {
        self.accept.abort();
        self.waiting
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.socket.remove();
    }
}

/// Pairs each client of the socket with the oldest waiting connection.
async fn accept_loop(listener: UnixListener, path: PathBuf, waiting: Arc<Waiting>) {
    loop {
        let unix = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                warn!(socket = %path.display(), error = %e, "accepting a client");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let runner = waiting.pop_live().await;
        tokio::spawn(async move {
            let (dir, result) = splice(unix, runner).await;
            debug!(dir, ?result, "pair ended");
        });
    }
}

/// One line without its newline, at most [`MAX_LINE`] bytes.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> std::io::Result<String> {
    let mut buf = Vec::new();
    let n = (&mut *r)
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 || buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the request line is missing or too long",
        ));
    }
    buf.pop();
    String::from_utf8(buf).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the request line is not UTF-8",
        )
    })
}

/// Writes `len` bytes from `conn` to a temp file beside `path`, then renames
/// it over `path`: a runtime watching the directory never reads part of it.
async fn write_file<R: AsyncBufRead + Unpin>(
    path: &Path,
    len: u64,
    conn: &mut R,
) -> std::io::Result<()> {
    if len > MAX_FILE {
        return Err(std::io::Error::other(format!(
            "{len} bytes is more than a node file may have ({MAX_FILE})"
        )));
    }
    let mut content = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    (&mut *conn).take(len).read_to_end(&mut content).await?;
    if content.len() as u64 != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "the connection ended after {} of {len} bytes",
                content.len()
            ),
        ));
    }
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("a file path needs a name"))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", unique()));
    let tmp = path.with_file_name(tmp_name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&tmp, &content)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Tells two writes of one file at once apart.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The CDI spec files of `dir` (`.json`, `.yaml`, `.yml`), each as a
/// `<len> <name>` line and its bytes; none when `dir` does not exist.
fn specs(dir: &Path) -> std::io::Result<Vec<u8>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let is_spec =
            [".json", ".yaml", ".yml"].iter().any(|s| name.ends_with(s)) && !name.starts_with('.');
        if !is_spec || !entry.file_type()?.is_file() {
            continue;
        }
        match std::fs::read(entry.path()) {
            Ok(bytes) => files.push((name, bytes)),
            // Removed since the listing: gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    files.sort();
    let mut out = Vec::new();
    for (name, bytes) in files {
        out.extend_from_slice(format!("{} {name}\n", bytes.len()).as_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// Reads what [`specs`] wrote: the files' names and contents.
pub fn parse_specs(mut body: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let nl = body
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("a spec's header has no newline")?;
        let header =
            std::str::from_utf8(&body[..nl]).map_err(|_| "a spec's header is not UTF-8")?;
        let (len, name) = header
            .split_once(' ')
            .ok_or_else(|| format!("bad spec header {header:?}"))?;
        let len: usize = len
            .parse()
            .map_err(|_| format!("bad spec length in {header:?}"))?;
        let rest = &body[nl + 1..];
        if rest.len() < len {
            return Err(format!(
                "spec {name} is cut short: {} of {len} bytes",
                rest.len()
            ));
        }
        out.push((name.to_owned(), rest[..len].to_vec()));
        body = &rest[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_wire::VERSION;
    use tokio::io::AsyncWriteExt;

    async fn start(token: &str) -> (std::net::SocketAddr, Arc<NodeHost>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let host = Arc::new(NodeHost::new(token.into()));
        let h = host.clone();
        tokio::spawn(async move {
            loop {
                let (c, _) = listener.accept().await.unwrap();
                let h = h.clone();
                tokio::spawn(async move {
                    let _ = h.handle(c).await;
                });
            }
        });
        (addr, host)
    }

    async fn request(addr: std::net::SocketAddr, line: &str, body: &[u8]) -> (String, Vec<u8>) {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(line.as_bytes()).await.unwrap();
        c.write_all(body).await.unwrap();
        if !body.is_empty() {
            // What a file's writer does: nothing more comes.
            c.shutdown().await.unwrap();
        }
        let mut all = Vec::new();
        c.read_to_end(&mut all).await.unwrap();
        let nl = all.iter().position(|b| *b == b'\n').unwrap();
        (
            String::from_utf8(all[..nl].to_vec()).unwrap(),
            all[nl + 1..].to_vec(),
        )
    }

    #[tokio::test]
    async fn serves_a_socket_pairing_clients_with_waiting_connections_and_closes_it() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("sub/dra.sock");
        let (addr, host) = start("tok").await;
        let line = Request::Serve(sock.clone()).line("tok").unwrap();
        let mut runner = BufReader::new(TcpStream::connect(addr).await.unwrap());
        runner.get_mut().write_all(line.as_bytes()).await.unwrap();
        let answer = read_line(&mut runner).await.unwrap();
        assert_eq!(answer, format!("ok {}", host.instance));
        // The socket exists once the answer came; a client is paired.
        let mut kubelet = UnixStream::connect(&sock).await.unwrap();
        kubelet.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        runner.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        runner.get_mut().write_all(b"pong").await.unwrap();
        kubelet.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        let (answer, _) = request(
            addr,
            &Request::Close(sock.clone()).line("tok").unwrap(),
            b"",
        )
        .await;
        assert!(answer.starts_with("ok "), "{answer}");
        assert!(!sock.exists(), "closing removes the socket");
    }

    #[tokio::test]
    async fn a_connection_the_runner_gave_up_is_not_paired() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("dra.sock");
        let (addr, _host) = start("tok").await;
        let line = Request::Serve(sock.clone()).line("tok").unwrap();
        let mut dead = BufReader::new(TcpStream::connect(addr).await.unwrap());
        dead.get_mut().write_all(line.as_bytes()).await.unwrap();
        read_line(&mut dead).await.unwrap();
        drop(dead);
        let mut live = BufReader::new(TcpStream::connect(addr).await.unwrap());
        live.get_mut().write_all(line.as_bytes()).await.unwrap();
        read_line(&mut live).await.unwrap();
        // Give the closed one's FIN time to arrive before the client does.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut kubelet = UnixStream::connect(&sock).await.unwrap();
        kubelet.write_all(b"x").await.unwrap();
        let mut got = [0u8; 1];
        live.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"x");
    }

    #[tokio::test]
    async fn a_wrong_token_gets_nothing_done() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("dra.sock");
        let (addr, _host) = start("right").await;
        let (answer, _) = request(
            addr,
            &Request::Serve(sock.clone()).line("wrong").unwrap(),
            b"",
        )
        .await;
        assert_eq!(answer, "err wrong token");
        assert!(!sock.exists());
        let (answer, _) = request(addr, &format!("{VERSION} right serve relative\n"), b"").await;
        assert!(answer.starts_with("err path"), "{answer}");
    }

    #[tokio::test]
    async fn files_are_written_whole_listed_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (addr, _host) = start("t").await;
        let spec = dir.path().join("d-claim.json");
        let body = br#"{"cdiVersion":"0.3.0"}"#;
        let w = Request::Write {
            path: spec.clone(),
            len: body.len() as u64,
        };
        let (answer, _) = request(addr, &w.line("t").unwrap(), body).await;
        assert!(answer.starts_with("ok "), "{answer}");
        assert_eq!(std::fs::read(&spec).unwrap(), body);
        // A write cut short leaves nothing, not half a spec.
        let short = Request::Write {
            path: dir.path().join("cut.json"),
            len: 100,
        };
        let (answer, _) = request(addr, &short.line("t").unwrap(), b"only this").await;
        assert!(answer.starts_with("err "), "{answer}");
        assert!(!dir.path().join("cut.json").exists());
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let (answer, listing) = request(
            addr,
            &Request::Specs(dir.path().into()).line("t").unwrap(),
            b"",
        )
        .await;
        assert!(answer.starts_with("ok "));
        assert_eq!(
            parse_specs(&listing).unwrap(),
            [("d-claim.json".to_owned(), body.to_vec())]
        );
        let (_, yes) = request(addr, &Request::Exists(spec.clone()).line("t").unwrap(), b"").await;
        assert_eq!(yes, b"yes\n");
        request(addr, &Request::Remove(spec.clone()).line("t").unwrap(), b"").await;
        let (_, no) = request(addr, &Request::Exists(spec.clone()).line("t").unwrap(), b"").await;
        assert_eq!(no, b"no\n");
        // Removing what is gone is fine.
        let (answer, _) = request(addr, &Request::Remove(spec).line("t").unwrap(), b"").await;
        assert!(answer.starts_with("ok "));
    }

    #[tokio::test]
    async fn connect_reaches_a_socket_or_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("plugin.sock");
        let (addr, _host) = start("t").await;
        let (answer, _) = request(
            addr,
            &Request::Connect(sock.clone()).line("t").unwrap(),
            b"",
        )
        .await;
        assert!(answer.starts_with("err connecting to"), "{answer}");
        let listener = UnixListener::bind(&sock).unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"hello").await.unwrap();
        });
        let (answer, body) = request(addr, &Request::Connect(sock).line("t").unwrap(), b"").await;
        assert!(answer.starts_with("ok "), "{answer}");
        assert_eq!(body, b"hello");
    }

    #[test]
    fn specs_read_back_and_refuse_a_cut_listing() {
        assert!(parse_specs(b"").unwrap().is_empty());
        assert_eq!(
            parse_specs(b"2 a.json\n{}3 b.yml\nx: ").unwrap(),
            [
                ("a.json".to_owned(), b"{}".to_vec()),
                ("b.yml".to_owned(), b"x: ".to_vec())
            ]
        );
        assert!(
            parse_specs(b"5 a.json\n{}")
                .unwrap_err()
                .contains("cut short")
        );
    }
}
