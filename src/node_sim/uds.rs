//! gRPC channels to a plugin's unix socket, with a live-connection count the
//! node watches to tell whether a plugin is still reachable (the kubelet uses
//! a gRPC stats handler for the same purpose).
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint, Uri};

/// Counts the open transport connections of one channel.
#[derive(Debug, Clone)]
pub struct ConnCount(Arc<watch::Sender<usize>>);

impl Default for ConnCount {
    fn default() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }
}

impl ConnCount {
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.0.subscribe()
    }

    pub fn current(&self) -> usize {
        *self.0.borrow()
    }
}

/// A unix stream that keeps [`ConnCount`] up to date for as long as it lives;
/// hyper drops it when the peer closes the connection.
struct CountedStream {
    inner: UnixStream,
    count: ConnCount,
}

impl CountedStream {
    fn new(inner: UnixStream, count: ConnCount) -> Self {
        count.0.send_modify(|n| *n += 1);
        Self { inner, count }
    }
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        self.count.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("dial unix socket {path}: {detail}")]
pub struct DialError {
    pub path: PathBuf,
    pub detail: String,
}

/// Connects a gRPC channel to `path`, retrying refused or missing sockets until
/// `limit` passes (the kubelet's blocking dial). The HTTP/2 authority is
/// `localhost`, as the kubelet sends it.
pub async fn dial(path: &Path, limit: Duration, count: ConnCount) -> Result<Channel, DialError> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut pause = Duration::from_millis(20);
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt = tokio::time::timeout(remaining, connect_once(path, count.clone())).await;
        let detail = match attempt {
            Ok(Ok(ch)) => return Ok(ch),
            Ok(Err(e)) => e,
            Err(_) => format!("no connection within {limit:?}"),
        };
        if tokio::time::Instant::now() + pause >= deadline {
            return Err(DialError {
                path: path.to_owned(),
                detail,
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

async fn connect_once(path: &Path, count: ConnCount) -> Result<Channel, String> {
    let path = path.to_owned();
    let connector = tower::service_fn(move |_: Uri| {
        let path = path.clone();
        let count = count.clone();
        async move {
            let stream = UnixStream::connect(&path).await?;
            Ok::<_, io::Error>(TokioIo::new(CountedStream::new(stream, count)))
        }
    });
    Endpoint::from_static("http://localhost")
        .connect_with_connector(connector)
        .await
        .map_err(|e| {
            // tonic's transport error hides the io error in its source chain.
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg = format!("{msg}: {s}");
                src = s.source();
            }
            msg
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dial_counts_connections_and_gives_up_on_missing_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.sock");
        let err = dial(&path, Duration::from_millis(200), ConnCount::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("x.sock"), "{err}");

        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let count = ConnCount::default();
        let mut rx = count.subscribe();
        let accept = tokio::spawn(async move { listener.accept().await.unwrap().0 });
        let ch = dial(&path, Duration::from_secs(5), count.clone())
            .await
            .unwrap();
        assert_eq!(count.current(), 1);
        // The server closing its end is what a stopping plugin does.
        drop(accept.await.unwrap());
        rx.wait_for(|n| *n == 0).await.unwrap();
        drop(ch);
    }
}
