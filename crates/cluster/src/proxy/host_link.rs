//! The runner's side of a node host: the node host pod's own process
//! (`dra-e2e-agent node-host`, [`dra_e2e_agent::node_host`]) reached on a
//! route that needs neither the kubelet's streaming nor the container
//! runtime where the runner can reach the node (the local cluster: the
//! node's address), and by port-forward elsewhere.
//!
//! Every use is one connection that starts with a request line
//! ([`dra_e2e_agent::host_wire`]): a socket's pool dials `serve` connections
//! ([`HostLink::serving`]), the node's files are written and read with one
//! connection per call ([`HostFiles`]), the interposer connects to a
//! driver's socket with `connect`. Nothing here is kept across a node host
//! restart but the pools themselves: they dial again as after any lost
//! connection, and their `serve` requests make the new process listen where
//! the old one did.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tracing::info;

use super::transport::{DialError, Dialled, Transport};
use dra_e2e_agent::host_wire::{Answer, MAX_LINE, Request};
use dra_e2e_conn::node_files::{NodeFiles, NodeFilesError, check_name};

/// How long one call (a file written, a listing) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum HostLinkError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error("the node host on {node} ({target}) refused {request}: {message}")]
    Refused {
        node: String,
        target: String,
        request: String,
        message: String,
    },
    #[error("the node host on {node} ({target}), {request}: {message}")]
    Broken {
        node: String,
        target: String,
        request: String,
        message: String,
    },
}

/// One node's node host, reached by `route` with the run's token.
#[derive(Debug)]
pub struct HostLink {
    route: Arc<dyn Transport>,
    token: Arc<str>,
    node: String,
    /// The node host process last seen answering: a new one means it was
    /// started again (its pod's container restarted, the node rebooted).
    instance: Mutex<Option<String>>,
}

impl HostLink {
    pub fn new(route: Arc<dyn Transport>, token: Arc<str>, node: impl Into<String>) -> Self {
        Self {
            route,
            token,
            node: node.into(),
            instance: Mutex::new(None),
        }
    }

    /// Where the connections go, for messages.
    pub fn target(&self) -> String {
        self.route.target()
    }

    fn describe(request: &Request) -> String {
        let line = request.line("-").unwrap_or_default();
        line.trim_end()
            .splitn(3, ' ')
            .nth(2)
            .unwrap_or_default()
            .to_owned()
    }

    fn broken(&self, request: &Request, message: impl Into<String>) -> HostLinkError {
        HostLinkError::Broken {
            node: self.node.clone(),
            target: self.route.target(),
            request: Self::describe(request),
            message: message.into(),
        }
    }

    /// Opens a connection for `request` (with `body` after the line) and
    /// reads the answer; on `ok`, the connection is left at the first byte
    /// after the answer line.
    pub async fn open(&self, request: &Request, body: &[u8]) -> Result<Dialled, HostLinkError> {
        let line = request
            .line(&self.token)
            .map_err(|e| self.broken(request, e.to_string()))?;
        self.route.ready().await?;
        let mut conn = self.route.dial().await?;
        conn.write_all(line.as_bytes())
            .await
            .map_err(|e| self.broken(request, format!("sending the request: {e}")))?;
        if !body.is_empty() {
            conn.write_all(body)
                .await
                .map_err(|e| self.broken(request, format!("sending {} bytes: {e}", body.len())))?;
        }
        conn.flush()
            .await
            .map_err(|e| self.broken(request, format!("sending the request: {e}")))?;
        // Byte by byte: what follows the line is the caller's.
        let mut answer = Vec::new();
        loop {
            let mut b = [0u8; 1];
            match conn.read(&mut b).await {
                Ok(0) => {
                    return Err(self.broken(
                        request,
                        "the connection ended before an answer (is a node host listening there?)",
                    ));
                }
                Ok(_) if b[0] == b'\n' => break,
                Ok(_) if answer.len() < MAX_LINE => answer.push(b[0]),
                Ok(_) => return Err(self.broken(request, "the answer line is too long")),
                Err(e) => return Err(self.broken(request, format!("reading the answer: {e}"))),
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        match Answer::parse(&answer) {
            Some(Answer::Ok { instance }) => {
                self.seen(instance);
                Ok(conn)
            }
            Some(Answer::Err(message)) => Err(HostLinkError::Refused {
                node: self.node.clone(),
                target: self.route.target(),
                request: Self::describe(request),
                message,
            }),
            None => Err(self.broken(request, format!("not an answer: {answer:?}"))),
        }
    }

    fn seen(&self, instance: String) {
        let before = self
            .instance
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(instance.clone());
        if let Some(before) = before
            && before != instance
        {
            info!(node = %self.node, %before, now = %instance, "the node host was started again");
        }
    }

    /// One request whose answer is all the connection carries; at most
    /// [`CALL_TIMEOUT`].
    pub async fn call(&self, request: &Request, body: &[u8]) -> Result<Vec<u8>, HostLinkError> {
        let run = async {
            let mut conn = self.open(request, body).await?;
            let mut out = Vec::new();
            conn.read_to_end(&mut out)
                .await
                .map_err(|e| self.broken(request, format!("reading the answer's body: {e}")))?;
            Ok(out)
        };
        tokio::time::timeout(CALL_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| {
                Err(self.broken(request, format!("no answer within {CALL_TIMEOUT:?}")))
            })
    }

    /// A transport whose connections wait on the node for clients of `socket`.
    pub fn serving(self: &Arc<Self>, socket: impl Into<PathBuf>) -> Arc<dyn Transport> {
        Arc::new(Serving {
            link: self.clone(),
            socket: socket.into(),
        })
    }

    /// Stops serving `socket` on the node and removes it.
    pub async fn close(&self, socket: &Path) -> Result<(), HostLinkError> {
        self.call(&Request::Close(socket.to_owned()), b"")
            .await
            .map(drop)
    }

    /// The files of a directory on the node.
    pub fn files(self: &Arc<Self>, dir: impl Into<PathBuf>) -> HostFiles {
        HostFiles {
            link: self.clone(),
            dir: dir.into(),
        }
    }
}

/// Connections that wait on the node for a client of one socket.
#[derive(Debug)]
struct Serving {
    link: Arc<HostLink>,
    socket: PathBuf,
}

#[async_trait]
impl Transport for Serving {
    async fn dial(&self) -> Result<Dialled, DialError> {
        self.link
            .open(&Request::Serve(self.socket.clone()), b"")
            .await
            .map_err(|e| match e {
                HostLinkError::Dial(d) => d,
                other => DialError::NotReady {
                    target: self.target(),
                    message: other.to_string(),
                },
            })
    }

    async fn ready(&self) -> Result<(), DialError> {
        self.link.route.ready().await
    }

    fn target(&self) -> String {
        format!("{} for {}", self.link.target(), self.socket.display())
    }
}

/// A flat directory on the node (the CDI spec directory, a plugin's
/// directory), reached through its node host.
#[derive(Debug, Clone)]
pub struct HostFiles {
    link: Arc<HostLink>,
    dir: PathBuf,
}

impl HostFiles {
    fn path(&self, name: &str) -> Result<PathBuf, NodeFilesError> {
        check_name(name)?;
        Ok(self.dir.join(name))
    }
}

fn remote(op: &'static str, name: &str, e: HostLinkError) -> NodeFilesError {
    NodeFilesError::Remote {
        op,
        name: name.to_owned(),
        message: e.to_string(),
    }
}

#[async_trait]
impl NodeFiles for HostFiles {
    async fn create(&self, name: &str, content: &[u8]) -> Result<(), NodeFilesError> {
        let path = self.path(name)?;
        let request = Request::Write {
            path,
            len: content.len() as u64,
        };
        self.link
            .call(&request, content)
            .await
            .map(drop)
            .map_err(|e| remote("create", name, e))
    }

    async fn remove(&self, name: &str) -> Result<(), NodeFilesError> {
        let path = self.path(name)?;
        self.link
            .call(&Request::Remove(path), b"")
            .await
            .map(drop)
            .map_err(|e| remote("remove", name, e))
    }

    async fn exists(&self, name: &str) -> Result<bool, NodeFilesError> {
        let path = self.path(name)?;
        let out = self
            .link
            .call(&Request::Exists(path), b"")
            .await
            .map_err(|e| remote("exists", name, e))?;
        match out.as_slice() {
            b"yes\n" => Ok(true),
            b"no\n" => Ok(false),
            other => Err(NodeFilesError::Remote {
                op: "exists",
                name: name.to_owned(),
                message: format!("unexpected answer {:?}", String::from_utf8_lossy(other)),
            }),
        }
    }

    async fn specs(&self) -> Result<Vec<(String, String)>, NodeFilesError> {
        let dir = self.dir.display().to_string();
        let out = self
            .link
            .call(&Request::Specs(self.dir.clone()), b"")
            .await
            .map_err(|e| remote("specs", &dir, e))?;
        let files = dra_e2e_agent::node_host::parse_specs(&out).map_err(|message| {
            NodeFilesError::Remote {
                op: "specs",
                name: dir.clone(),
                message,
            }
        })?;
        Ok(files
            .into_iter()
            .map(|(name, bytes)| (name, String::from_utf8_lossy(&bytes).into_owned()))
            .collect())
    }
}
