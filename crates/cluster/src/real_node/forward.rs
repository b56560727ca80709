//! The API server as a real node sees it: a TCP relay from the host end of
//! the node's link to the API server's loopback port.
//!
//! The local API server listens on 127.0.0.1 only, which inside a node's
//! network namespace is the node's own loopback. Relaying the bytes keeps TLS
//! end to end between kubelet and API server.
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running relay; stops when dropped.
pub struct ApiRelay {
    task: JoinHandle<()>,
    pub addr: SocketAddr,
}

impl ApiRelay {
    /// Listens on `listen` and relays every connection to `target`.
    pub async fn start(listen: SocketAddr, target: SocketAddr) -> std::io::Result<ApiRelay> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        // The API server away (restarted by a scenario) refuses the
        // kubelets' connections for seconds, which they try again: worth
        // a warning only when it goes on (dra_e2e_conn::persisting).
        let failing = std::sync::Arc::new(std::sync::Mutex::new(
            dra_e2e_conn::persisting::Persisting::default(),
        ));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let failing = failing.clone();
                tokio::spawn(async move {
                    let connected = TcpStream::connect(target).await;
                    let warn = {
                        let mut failing = failing.lock().unwrap_or_else(|e| e.into_inner());
                        match &connected {
                            Ok(_) => {
                                failing.ended();
                                false
                            }
                            Err(_) => failing.worth_a_warning(std::time::Instant::now()),
                        }
                    };
                    match connected {
                        Ok(mut outbound) => {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                        Err(e) if warn => {
                            tracing::warn!(%target, error = %e, "relaying a node's connection to the API server keeps failing");
                        }
                        Err(e) => {
                            tracing::debug!(%target, error = %e, "relaying a node's connection to the API server");
                        }
                    }
                });
            }
        });
        Ok(ApiRelay { task, addr })
    }
}

impl Drop for ApiRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn relays_bytes_both_ways() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = server.local_addr().unwrap();
        let echo = tokio::spawn(async move {
            let (mut s, _) = server.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let relay = ApiRelay::start("127.0.0.1:0".parse().unwrap(), target)
            .await
            .unwrap();
        let mut c = TcpStream::connect(relay.addr).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut back = [0u8; 5];
        c.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello");
        echo.await.unwrap();
    }
}
