//! A gate in front of a served socket: open, it lets every connection
//! through; blocked, it closes each new connection as soon as it is accepted
//! and cuts the ones it let through before. The socket file stays where it
//! is, so the peer (a kubelet) still finds it, connects and is dropped, the
//! way a plugin looks whose process hangs or whose socket a node's security
//! policy cuts off. A stopped service, by contrast, takes its socket away.
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use tokio::sync::watch;

use crate::{CutHandle, Incoming};

/// Shared switch of one socket; clones control the same gate.
#[derive(Debug, Clone, Default)]
pub struct SocketGate(Arc<GateState>);

#[derive(Debug, Default)]
struct GateState {
    blocked: watch::Sender<bool>,
    /// Connections let through while open, cut when the gate closes.
    open: Mutex<Vec<CutHandle>>,
    /// Connections closed on arrival while blocked.
    refused: std::sync::atomic::AtomicU64,
}

impl SocketGate {
    /// Blocks the socket: connections already through are cut, new ones
    /// are closed on arrival.
    pub fn block(&self) {
        self.0.blocked.send_replace(true);
        let open = std::mem::take(&mut *self.lock_open());
        for c in open {
            c.cut();
        }
    }

    /// Lets new connections through again.
    pub fn unblock(&self) {
        self.0.blocked.send_replace(false);
    }

    pub fn is_blocked(&self) -> bool {
        *self.0.blocked.borrow()
    }

    /// How many connections were closed on arrival since the gate was made.
    pub fn refused(&self) -> u64 {
        self.0.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `incoming` with this gate in front of it.
    pub fn guard(&self, incoming: Incoming) -> Incoming {
        let gate = self.clone();
        Box::pin(incoming.filter_map(move |item| {
            let item = match item {
                Ok(conn) if gate.is_blocked() => {
                    gate.0
                        .refused
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(peer = conn.peer(), "connection closed: socket blocked");
                    // Dropping it closes it: the peer reads EOF.
                    drop(conn);
                    None
                }
                Ok(conn) => {
                    let mut open = gate.lock_open();
                    open.retain(|c| !c.is_cut());
                    open.push(conn.cut.clone());
                    Some(Ok(conn))
                }
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(item)
        }))
    }

    fn lock_open(&self) -> std::sync::MutexGuard<'_, Vec<CutHandle>> {
        // A poisoned list is still a list of handles.
        self.0.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unix_incoming;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    async fn serve(dir: &std::path::Path, gate: &SocketGate) -> (std::path::PathBuf, Incoming) {
        let path = dir.join("plugin.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        (path, gate.guard(unix_incoming(listener)))
    }

    #[tokio::test]
    async fn an_open_gate_lets_connections_through() {
        let dir = tempfile::tempdir().unwrap();
        let gate = SocketGate::default();
        let (path, mut incoming) = serve(dir.path(), &gate).await;
        let mut client = tokio::net::UnixStream::connect(&path).await.unwrap();
        let mut conn = incoming.next().await.unwrap().unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        assert_eq!(gate.refused(), 0);
    }

    #[tokio::test]
    async fn blocking_cuts_open_connections_and_closes_new_ones_until_unblocked() {
        let dir = tempfile::tempdir().unwrap();
        let gate = SocketGate::default();
        let (path, mut incoming) = serve(dir.path(), &gate).await;
        let _before = tokio::net::UnixStream::connect(&path).await.unwrap();
        let mut through = incoming.next().await.unwrap().unwrap();

        gate.block();
        let mut buf = [0u8; 1];
        let err = through.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionAborted);

        // A connection while blocked reaches the listener, is closed, and
        // the stream yields nothing for it.
        let mut refused = tokio::net::UnixStream::connect(&path).await.unwrap();
        let next = tokio::time::timeout(std::time::Duration::from_millis(300), incoming.next());
        assert!(next.await.is_err(), "a blocked connection was let through");
        assert_eq!(refused.read(&mut buf).await.unwrap(), 0, "not closed");
        assert_eq!(gate.refused(), 1);

        gate.unblock();
        let mut after = tokio::net::UnixStream::connect(&path).await.unwrap();
        let mut conn = incoming.next().await.unwrap().unwrap();
        after.write_all(b"x").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"x");
    }
}
