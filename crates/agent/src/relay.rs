//! The agent's `--connect` mode, run in a proxy pod: one connection to a
//! unix socket on the node, copied to and from the exec session's stdin and
//! stdout. The runner's side (`dra-e2e-cluster`'s `proxy::connect`) waits
//! for the [`CONNECTED_PREFIX`] line on stderr before it uses the stream.
use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::UnixStream;

/// Each copy's buffer: gRPC messages are larger than tokio's default.
const COPY_BUF: usize = 64 * 1024;

/// First words of the line the agent prints on stderr once connected;
/// followed by `unix=<socket path>`.
pub const CONNECTED_PREFIX: &str = "proxy-agent connected";

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connecting to unix socket {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How a relay ended: the direction that ended first and how.
#[derive(Debug)]
pub struct RelayEnd {
    pub direction: &'static str,
    pub result: std::io::Result<u64>,
}

/// The agent's `--connect` mode: connects to the unix socket `socket`, calls
/// `connected`, then copies `input` to the socket and the socket to `output`
/// until either direction ends (EOF or error). Nothing is written to
/// `output` before the connection stands. Only a failed connect is an
/// error: the end of either side is the normal end of a connection.
pub async fn relay<I, O>(
    socket: &Path,
    input: I,
    output: O,
    connected: impl FnOnce(),
) -> Result<RelayEnd, ConnectError>
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| ConnectError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    connected();
    let (mut from_socket, mut to_socket) = stream.into_split();
    let mut input = input;
    let mut output = output;
    Ok(tokio::select! {
        r = tokio::io::copy(&mut input, &mut to_socket) => RelayEnd {
            direction: "stdin->socket",
            result: r,
        },
        r = copy_flushed(&mut from_socket, &mut output) => RelayEnd {
            direction: "socket->stdout",
            result: r,
        },
    })
}

/// Copies until EOF, flushing after every chunk: stdout may buffer, and a
/// request's answer must not wait for more output that never comes.
async fn copy_flushed<R, W>(from: &mut R, to: &mut W) -> std::io::Result<u64>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; COPY_BUF];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            to.flush().await?;
            return Ok(total);
        }
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
        total += n as u64;
    }
}
