//! The API server's front door: the address every client of the local
//! cluster is given, relaying to the API server's own port, and holding
//! new connections while the API server is not ready.
//!
//! Why: a restarted API server accepts connections as soon as it listens,
//! before its authorizer has loaded the RBAC objects: for a second or so a
//! client that is not a cluster admin (a driver's service account, a
//! kubelet) is refused with 403 Forbidden although it is allowed, and a
//! 403 is rightly not retried. A cluster whose API server restarts under
//! its clients (an upgrade) has it behind a load balancer that sends
//! connections only to an API server whose `/readyz` says so; this is that
//! load balancer. While the door is closed (from the stop of a restart to
//! the new process's `/readyz`) a new connection is accepted and waits;
//! once open, it is relayed. TLS stays end to end: the bytes are relayed,
//! not read.
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The running front door; stops, with every connection it relays, when
/// dropped.
pub struct FrontDoor {
    open: watch::Sender<bool>,
    stop: CancellationToken,
    addr: SocketAddr,
}

/// Opens and closes a [`FrontDoor`].
#[derive(Clone)]
pub struct Door(watch::Sender<bool>);

impl Door {
    /// New connections wait until [`Door::open`].
    pub fn close(&self) {
        self.0.send_replace(false);
    }

    /// New and waiting connections are relayed.
    pub fn open(&self) {
        self.0.send_replace(true);
    }
}

impl FrontDoor {
    /// Listens on `listen`, closed, relaying to `target` once opened.
    pub async fn start(listen: SocketAddr, target: SocketAddr) -> std::io::Result<FrontDoor> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (open, _) = watch::channel(false);
        let stop = CancellationToken::new();
        let door = open.clone();
        let stopped = stop.clone();
        tokio::spawn(async move {
            loop {
                let inbound = tokio::select! {
                    _ = stopped.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((inbound, _)) => inbound,
                        Err(e) => {
                            tracing::debug!(error = %e, "the API server's front door: accept");
                            continue;
                        }
                    },
                };
                let mut opened = door.subscribe();
                let stopped = stopped.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stopped.cancelled() => {}
                        _ = relay(inbound, &mut opened, target) => {}
                    }
                });
            }
        });
        Ok(FrontDoor { open, stop, addr })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What opens and closes it.
    pub fn door(&self) -> Door {
        Door(self.open.clone())
    }
}

impl Drop for FrontDoor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn relay(mut inbound: TcpStream, opened: &mut watch::Receiver<bool>, target: SocketAddr) {
    if opened.wait_for(|open| *open).await.is_err() {
        return;
    }
    match TcpStream::connect(target).await {
        Ok(mut outbound) => {
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
        }
        // Dropping the inbound connection tells the client, which tries
        // again as it would on a refused connection.
        Err(e) => tracing::debug!(%target, error = %e, "the API server's front door: connect"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn a_closed_door_holds_connections_until_it_opens() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = server.local_addr().unwrap();
        let front = FrontDoor::start("127.0.0.1:0".parse().unwrap(), target)
            .await
            .unwrap();
        let door = front.door();
        let mut client = TcpStream::connect(front.addr()).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        // Closed: nothing reaches the server.
        let held = tokio::time::timeout(Duration::from_millis(200), server.accept()).await;
        assert!(held.is_err(), "a connection went through a closed door");
        door.open();
        let (mut behind, _) = server.accept().await.unwrap();
        let mut got = [0u8; 4];
        behind.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        behind.write_all(b"pong").await.unwrap();
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        // Closed again: a new connection waits, the old one goes on.
        door.close();
        let mut second = TcpStream::connect(front.addr()).await.unwrap();
        second.write_all(b"next").await.unwrap();
        let held = tokio::time::timeout(Duration::from_millis(200), server.accept()).await;
        assert!(held.is_err(), "a new connection went through a closed door");
        client.write_all(b"more").await.unwrap();
        behind.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"more");
        // Dropped: the relayed connection ends.
        drop(front);
        let mut rest = Vec::new();
        let ended =
            tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest)).await;
        assert!(ended.is_ok(), "the relayed connection outlived the door");
    }
}
