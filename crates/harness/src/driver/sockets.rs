//! A driver's plugin sockets: their file names, and the signal that one of
//! them broke for good. Serving them is the node host's job
//! ([`dra_e2e_conn::node_host`]).
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use tokio::sync::watch;

use dra_e2e_conn::Incoming;

/// Passes a served socket's connections on and hands its errors to
/// `on_failure` instead. A proxied socket's source yields an error only when
/// it can never deliver a connection again (its agent died), so each error
/// means "this socket is broken" and a server must not see it.
pub fn report_failures(
    incoming: Incoming,
    on_failure: impl Fn(std::io::Error) + Send + 'static,
) -> Incoming {
    Box::pin(incoming.filter_map(move |item| {
        let item = match item {
            Ok(conn) => Some(Ok(conn)),
            Err(e) => {
                on_failure(e);
                None
            }
        };
        futures::future::ready(item)
    }))
}

/// The sending side of a [`Broken`] signal; the first reason reported sticks.
#[derive(Debug, Clone)]
pub struct BrokenSender(Arc<watch::Sender<Option<String>>>);

impl Default for BrokenSender {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(None)))
    }
}

impl BrokenSender {
    /// Records `reason` unless an earlier one was; true if it was recorded.
    pub fn report(&self, reason: String) -> bool {
        self.0.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(reason);
            true
        })
    }

    pub fn subscribe(&self) -> Broken {
        Broken(self.0.subscribe())
    }
}

/// Whether (and why) something a scenario relies on broke for good, such as
/// a plugin socket whose proxy agent died. Waits race against it so that a
/// scenario fails at once with the reason instead of running into a timeout.
#[derive(Debug, Clone)]
pub struct Broken(watch::Receiver<Option<String>>);

impl Broken {
    /// The reason, if it broke.
    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Resolves with the reason once it broke; never if it does not.
    pub async fn wait(&self) -> String {
        let mut rx = self.0.clone();
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(r) => r.clone(),
            Err(_) => None,
        };
        match reason {
            Some(r) => r,
            None => futures::future::pending().await,
        }
    }

    /// Both observe the same signal.
    pub fn same(&self, other: &Broken) -> bool {
        self.0.same_channel(&other.0)
    }
}

pub use dra_e2e_conn::node_host::MAX_SOCKET_PATH;

/// Socket file names of one plugin instance, as the kubelet plugin helper
/// chooses them (rolling-update instances get per-instance names).
pub fn socket_paths(
    kubelet_root: &Path,
    driver: &str,
    rolling_uid: Option<&str>,
) -> (PathBuf, PathBuf) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let plugin_dir = kubelet_root.join("plugins").join(driver);
    let registry = kubelet_root.join("plugins_registry");
    let Some(uid) = rolling_uid else {
        return (
            plugin_dir.join("dra.sock"),
            registry.join(format!("{driver}-reg.sock")),
        );
    };
    let dra = plugin_dir.join(format!("dra-{uid}.sock"));
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let full = registry.join(format!("{driver}-{uid}-reg.sock"));
    if full.as_os_str().len() <= MAX_SOCKET_PATH {
        return (dra, full);
    }
    let short_uid = b64.encode(&sha2::Sha256::digest(uid.as_bytes())[..8]);
    let hashed = registry.join(format!("{driver}-{short_uid}-reg.sock"));
    if hashed.as_os_str().len() <= MAX_SOCKET_PATH {
        return (dra, hashed);
    }
    let mut h = sha2::Sha256::new();
    h.update(driver.as_bytes());
    h.update([0u8]);
    h.update(uid.as_bytes());
    let both = b64.encode(&h.finalize()[..16]);
    (dra, registry.join(format!("dra-{both}-reg.sock")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_failure_of_a_socket_breaks_it_and_never_reaches_the_server() {
        use std::io;
        let sender = BrokenSender::default();
        let broken = sender.subscribe();
        assert_eq!(broken.reason(), None);
        let items: Vec<io::Result<dra_e2e_conn::Conn>> = vec![
            Err(io::Error::other("agent for a.sock died")),
            Err(io::Error::other("agent for b.sock died")),
        ];
        let s = sender.clone();
        let incoming = report_failures(Box::pin(futures::stream::iter(items)), move |e| {
            s.report(format!("node n: {e}"));
        });
        let passed: Vec<_> = incoming.collect().await;
        assert!(passed.is_empty(), "errors are not passed on");
        assert_eq!(broken.wait().await, "node n: agent for a.sock died");
        assert!(broken.same(&sender.subscribe()));
        assert!(!broken.same(&BrokenSender::default().subscribe()));
    }

    #[test]
    fn default_and_rolling_names() {
        let root = Path::new("/var/lib/kubelet");
        let (dra, reg) = socket_paths(root, "d.k8s.io", None);
        assert_eq!(dra, Path::new("/var/lib/kubelet/plugins/d.k8s.io/dra.sock"));
        assert_eq!(
            reg,
            Path::new("/var/lib/kubelet/plugins_registry/d.k8s.io-reg.sock")
        );
        let (dra, reg) = socket_paths(root, "d.k8s.io", Some("uid-1"));
        assert_eq!(
            dra,
            Path::new("/var/lib/kubelet/plugins/d.k8s.io/dra-uid-1.sock")
        );
        assert_eq!(
            reg,
            Path::new("/var/lib/kubelet/plugins_registry/d.k8s.io-uid-1-reg.sock")
        );
    }

    #[test]
    fn long_names_fall_back_to_hashes_that_fit() {
        let root = Path::new("/var/lib/kubelet");
        let driver = "dra-1234567890.a-very-long-driver-name-for-testing.k8s.io";
        let uid = "0f0f0f0f-1111-2222-3333-444444444444";
        let (_, reg) = socket_paths(root, driver, Some(uid));
        assert!(reg.as_os_str().len() <= MAX_SOCKET_PATH, "{reg:?}");
        let name = reg.file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with("-reg.sock"), "{name}");
        assert!(!name.contains(uid), "{name}");
    }
}
