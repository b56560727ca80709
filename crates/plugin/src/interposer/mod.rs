//! The interposer: the harness's counting and fault injection between the
//! kubelet and a real driver's kubelet plugin.
//!
//! Upstream's suite can count, fail and stall kubelet calls only on its own
//! fake driver, which is why a real driver gets none of those tests. Here
//! the driver registers in a private directory instead of the kubelet's; the
//! interposer follows that directory and stands in for every instance of
//! the driver it finds there: each registration socket whose `GetInfo` names
//! the driver is one instance (`<driver>-reg.sock`, the rolling-update
//! `<driver>-<pod UID>-reg.sock`, its hashed forms, any other name). For
//! each, the interposer registers with the kubelet under the same file name,
//! advertising a DRA socket of its own that leads to that instance. The
//! kubelet sees the instances it would have seen, the driver sees a kubelet.
//!
//! The directory is listed again and again ([`NodeHost::sockets`]; no
//! watch reaches into a node through exec), and what changes is passed on as
//! the kubelet would have seen it: a new instance (a surge rollout's second
//! pod) is registered beside the first; an instance whose socket went is
//! deregistered (its socket in `plugins_registry` goes); a socket bound
//! again in place (a restarted driver) is deregistered and registered anew,
//! so that the kubelet validates the new process.
//!
//! Every call passes [`Calls`] (see [`forward`]), so the same steps count,
//! fail, stall, delay or cut it as on the suite's own driver.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, info, info_span, warn};

use super::calls::Calls;
use super::prepared::Prepared;
use super::registration::{RegistrationState, RegistrationStatus};
use super::watch::WaitTimeout;
use dra_e2e_conn::node_host::{NodeHost, SocketFile};
use dra_e2e_proto::pluginregistration::PluginInfo;

pub(crate) mod forward;
pub mod health;
mod instance;
mod planted;
#[cfg(test)]
mod tests;

pub use health::InjectedHealth;
use instance::{Instance, Probe};
pub use planted::Disagreements;

/// How often the private directory is listed again.
const POLL: Duration = Duration::from_millis(500);
/// The longest pause before a socket that did not answer is asked again.
const SILENT_PAUSE_MAX: Duration = Duration::from_secs(30);

/// A broken interposer, to show that the scenarios notice one. Each is the
/// interposer with one of its duties left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterposerFault {
    /// Working as it should.
    #[default]
    None,
    /// GetInfo passes the driver's own endpoint on: the kubelet calls the
    /// driver directly, and nothing is counted or injected.
    Direct,
    /// Only the first instance found on a node is interposed; a second
    /// (a surge rollout's new pod) is never registered with the kubelet.
    FirstInstanceOnly,
    /// An instance's registration stays as it was when its socket goes
    /// and when it is bound again: the kubelet never sees a driver
    /// restart, and never validates the restarted process.
    NoReregister,
}

impl InterposerFault {
    /// Every fault by the name `--interposer-fault` takes.
    pub const ALL: [(&'static str, InterposerFault); 4] = [
        ("none", InterposerFault::None),
        ("direct", InterposerFault::Direct),
        ("first-instance-only", InterposerFault::FirstInstanceOnly),
        ("no-reregister", InterposerFault::NoReregister),
    ];
}

/// One node's interposer for one driver.
#[derive(Debug, Clone)]
pub struct InterposerConfig {
    pub driver: String,
    pub node: String,
    /// Where the driver registers instead of the kubelet's directory (a
    /// host path).
    pub private_dir: PathBuf,
    /// The kubelet's `plugins_registry` (a host path).
    pub registry_dir: PathBuf,
    /// Where the interposer's DRA sockets go (a host path; the driver's
    /// plugin directory).
    pub endpoint_dir: PathBuf,
    pub calls: Calls,
    pub prepared: Prepared,
    /// Device health the scenario reports on the driver's behalf.
    pub health: InjectedHealth,
    /// How long the driver may take to show its first instance.
    pub driver_timeout: Duration,
    pub fault: InterposerFault,
    /// Bugs planted in the driver's answers (none normally).
    pub faults: crate::fault::Faults,
    /// Where asking a call again got another answer.
    pub disagreements: Disagreements,
}

#[derive(Debug, thiserror::Error)]
#[error("interposing between the kubelet and driver {driver} on node {node}: {message}")]
pub struct InterposerError {
    pub driver: String,
    pub node: String,
    pub message: String,
}

/// What the follower of a node's private directory shares with its handle.
#[derive(Default)]
struct Shared {
    /// What the kubelet last said to any instance.
    registration: Arc<RegistrationState>,
    /// The instances interposed now, by socket name.
    infos: std::sync::Mutex<BTreeMap<String, InstanceView>>,
    /// Instances interposed so far (a name for each endpoint).
    started: std::sync::atomic::AtomicU64,
    /// What the follower found of its own in the kubelet's registration
    /// directory after it stopped every instance.
    left: std::sync::Mutex<Vec<String>>,
    /// Looks at the private directory so far.
    looks: std::sync::atomic::AtomicU64,
}

/// One interposed instance of the driver, as the scenarios may see it.
#[derive(Debug, Clone)]
pub struct InstanceView {
    /// Its registration socket's name (in the private directory, and the
    /// interposer's in `plugins_registry`).
    pub socket: String,
    /// Tells it from an earlier instance bound under the same name.
    pub identity: String,
    /// What it said about itself (name, DRA endpoint, versions).
    pub info: PluginInfo,
    /// What the kubelet last said to it.
    pub status: RegistrationStatus,
    registration: Arc<RegistrationState>,
}

/// A running interposer on one node; stop it with [`NodeInterposer::stop`].
pub struct NodeInterposer {
    driver: String,
    node: String,
    shutdown: CancellationToken,
    follower: JoinHandle<()>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for NodeInterposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeInterposer")
            .field("driver", &self.driver)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl NodeInterposer {
    /// Follows the driver's private directory and interposes every
    /// instance found there; returns once the first is interposed (the
    /// kubelet connects to an endpoint as soon as it sees its registration,
    /// so each instance's DRA socket is served before it registers).
    pub async fn start(
        host: Arc<dyn NodeHost>,
        config: InterposerConfig,
    ) -> Result<Self, InterposerError> {
        let err = |message: String| InterposerError {
            driver: config.driver.clone(),
            node: config.node.clone(),
            message,
        };
        let shared = Arc::new(Shared::default());
        let shutdown = CancellationToken::new();
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let span = info_span!("interposer", driver = %config.driver, node = %config.node);
        let follower = tokio::spawn(
            follow(
                host,
                config.clone(),
                shared.clone(),
                shutdown.clone(),
                first_tx,
            )
            .instrument(span),
        );
        let me = NodeInterposer {
            driver: config.driver.clone(),
            node: config.node.clone(),
            shutdown,
            follower,
            shared,
        };
        match first_rx.await {
            Ok(Ok(())) => Ok(me),
            Ok(Err(message)) => {
                me.stop().await;
                Err(err(message))
            }
            Err(_) => {
                me.stop().await;
                Err(err(
                    "the interposer's follower ended unexpectedly".to_owned()
                ))
            }
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The instances interposed now, by socket name, with what the kubelet
    /// last said to each.
    pub fn instances(&self) -> Vec<InstanceView> {
        self.shared
            .infos
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|v| InstanceView {
                status: v.registration.status(),
                ..v.clone()
            })
            .collect()
    }

    /// Waits until the follower has looked at the private directory `n`
    /// more times (so that it has seen what is there now).
    #[cfg(test)]
    async fn looked(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let until = self.shared.looks.load(Relaxed) + n;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.shared.looks.load(Relaxed) < until {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the follower stopped looking"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn registration_status(&self) -> RegistrationStatus {
        self.shared.registration.status()
    }

    /// Waits until the kubelet reported an instance registered.
    pub async fn wait_registered(&self, timeout: Duration) -> Result<(), WaitTimeout> {
        let (driver, node) = (self.driver.clone(), self.node.clone());
        self.shared
            .registration
            .wait_registered(
                || format!("the kubelet to register driver {driver} on {node} (interposed)"),
                timeout,
            )
            .await
    }

    /// Stops following and every instance: their sockets go first (the
    /// kubelet deregisters them), then calls still running end with
    /// UNAVAILABLE. Returns what of the interposer's is still in the
    /// kubelet's registration directory after that (nothing, unless its
    /// sockets could not be removed).
    pub async fn stop(self) -> Vec<String> {
        self.shutdown.cancel();
        let _ = self.follower.await;
        info!(driver = %self.driver, node = %self.node, "interposer stopped");
        std::mem::take(&mut *self.shared.left.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What the follower knows of one socket of the private directory.
enum Seen {
    Interposed(Instance),
    /// Answered, but is not an instance of the driver (another driver, a
    /// plugin of another type); not asked again until it is bound anew.
    Other {
        identity: String,
    },
    /// Left alone on purpose (the `FirstInstanceOnly` fault).
    Ignored {
        identity: String,
    },
    /// Did not answer: a driver still starting, or the socket a killed
    /// driver left behind. Asked again later, less often each time (each
    /// question is an exec on a remote node), and at once if it is bound
    /// anew.
    Silent {
        identity: String,
        next: tokio::time::Instant,
        pause: Duration,
        why: String,
    },
}

impl Seen {
    fn identity(&self) -> &str {
        match self {
            Seen::Interposed(i) => i.identity(),
            Seen::Other { identity }
            | Seen::Ignored { identity }
            | Seen::Silent { identity, .. } => identity,
        }
    }
}

/// Lists the private directory until cancelled, interposing what appears and
/// deregistering what goes. `first` hears once: the first instance is
/// interposed, or none was within the driver's timeout.
async fn follow(
    host: Arc<dyn NodeHost>,
    config: InterposerConfig,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    first: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    let mut first = Some(first);
    let deadline = tokio::time::Instant::now() + config.driver_timeout;
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    // Every name registered with the kubelet, to check at the end.
    let mut registered: std::collections::BTreeSet<String> = Default::default();
    // What the last look found, for the message when nothing turns up.
    let mut last: String;
    let mut listing_error: Option<String> = None;
    loop {
        let listed = host.sockets(&config.node, &config.private_dir).await;
        shared
            .looks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match listed {
            Ok(files) => {
                listing_error = None;
                last = reconcile(&host, &config, &shared, &mut seen, &files).await;
                registered.extend(
                    seen.iter()
                        .filter(|(_, s)| matches!(s, Seen::Interposed(_)))
                        .map(|(name, _)| name.clone()),
                );
            }
            Err(e) => {
                let e = e.to_string();
                if listing_error.as_deref() != Some(e.as_str()) {
                    warn!(error = %e, "listing the driver's private registration directory");
                }
                last = e.clone();
                listing_error = Some(e);
            }
        }
        let interposed = seen.values().any(|s| matches!(s, Seen::Interposed(_)));
        if interposed && let Some(tx) = first.take() {
            let _ = tx.send(Ok(()));
        }
        if first.is_some() && tokio::time::Instant::now() >= deadline {
            if let Some(tx) = first.take() {
                let _ = tx.send(Err(format!(
                    "no instance of the driver registered in {} within {:?} (the profile's \
                     registrationDir, or the DaemonSet's plugins_registry volume, must make the \
                     driver register there); last: {last}",
                    config.private_dir.display(),
                    config.driver_timeout
                )));
            }
            break;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    for (_, s) in std::mem::take(&mut seen) {
        if let Seen::Interposed(i) = s {
            i.stop().await;
        }
    }
    // The kubelet's directory is shared with every other plugin of the
    // node: only names the interposer registered count.
    let ours = std::mem::take(&mut registered);
    if !ours.is_empty() {
        let left = match host.sockets(&config.node, &config.registry_dir).await {
            Ok(files) => files
                .into_iter()
                .filter(|f| ours.contains(&f.name))
                .map(|f| {
                    format!(
                        "the interposer's socket {} is still in the kubelet's registration \
                         directory on node {}",
                        config.registry_dir.join(&f.name).display(),
                        config.node
                    )
                })
                .collect(),
            Err(e) => vec![format!(
                "checking that the interposer left nothing in the kubelet's registration \
                 directory: {e}"
            )],
        };
        *shared.left.lock().unwrap_or_else(|e| e.into_inner()) = left;
    }
    shared
        .infos
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
}

/// Brings the interposed instances in line with one listing of the private
/// directory; returns a description of what it found.
async fn reconcile(
    host: &Arc<dyn NodeHost>,
    config: &InterposerConfig,
    shared: &Arc<Shared>,
    seen: &mut BTreeMap<String, Seen>,
    files: &[SocketFile],
) -> String {
    let now: BTreeMap<&str, &str> = files
        .iter()
        .map(|f| (f.name.as_str(), f.identity.as_str()))
        .collect();
    // Gone, or bound again in place: the kubelet would see the socket go.
    let stale: Vec<String> = seen
        .iter()
        .filter(|(name, s)| now.get(name.as_str()) != Some(&s.identity()))
        .map(|(name, _)| name.clone())
        .collect();
    for name in stale {
        let rebound = now.contains_key(name.as_str());
        if config.fault == InterposerFault::NoReregister
            && let Some(Seen::Interposed(i)) = seen.get_mut(&name)
        {
            // The broken interposer keeps the registration of an instance
            // it has seen, whatever becomes of its socket.
            if let Some(identity) = now.get(name.as_str()) {
                warn!(socket = %name, "--interposer-fault no-reregister: the driver's socket \
                    was bound again; its old registration stays");
                i.set_identity(identity);
                if let Some(v) = shared
                    .infos
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(&name)
                {
                    (*identity).clone_into(&mut v.identity);
                }
            }
            continue;
        }
        if let Some(Seen::Interposed(i)) = seen.remove(&name) {
            info!(socket = %name, rebound, "the driver's instance went; deregistering it");
            i.stop().await;
            shared
                .infos
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&name);
        }
    }
    let mut found = Vec::new();
    let now_instant = tokio::time::Instant::now();
    for file in files {
        // A silent socket's pause grows from one look to half a minute.
        let pause = match seen.get(&file.name) {
            Some(Seen::Silent {
                next, pause, why, ..
            }) => {
                if now_instant < *next {
                    found.push(format!("{}: {why}", file.name));
                    continue;
                }
                (*pause * 2).min(SILENT_PAUSE_MAX)
            }
            Some(_) => continue,
            None => POLL,
        };
        let socket = config.private_dir.join(&file.name);
        match instance::probe(host, config, &socket).await {
            Probe::Driver(info) => {
                let any = seen.values().any(|s| matches!(s, Seen::Interposed(_)));
                if any && config.fault == InterposerFault::FirstInstanceOnly {
                    warn!(socket = %file.name, "--interposer-fault first-instance-only: a \
                        second instance of the driver is left alone");
                    seen.insert(
                        file.name.clone(),
                        Seen::Ignored {
                            identity: file.identity.clone(),
                        },
                    );
                    continue;
                }
                let n = shared
                    .started
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let own = Arc::new(RegistrationState::default());
                match Instance::start(
                    host.clone(),
                    config,
                    file,
                    info.clone(),
                    n,
                    [shared.registration.clone(), own.clone()],
                )
                .await
                {
                    Ok(i) => {
                        info!(socket = %file.name, endpoint = %info.endpoint,
                            versions = ?info.supported_versions,
                            "an instance of the driver answered; interposing it");
                        shared
                            .infos
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(
                                file.name.clone(),
                                InstanceView {
                                    socket: file.name.clone(),
                                    identity: file.identity.clone(),
                                    info,
                                    status: RegistrationStatus::Pending,
                                    registration: own,
                                },
                            );
                        seen.insert(file.name.clone(), Seen::Interposed(i));
                    }
                    Err(e) => found.push(format!("{}: {e}", file.name)),
                }
            }
            Probe::Other(why) => {
                info!(socket = %file.name, "{why}; not an instance of the driver");
                found.push(format!("{}: {why}", file.name));
                seen.insert(
                    file.name.clone(),
                    Seen::Other {
                        identity: file.identity.clone(),
                    },
                );
            }
            Probe::NotYet(why) => {
                found.push(format!("{}: {why}", file.name));
                seen.insert(
                    file.name.clone(),
                    Seen::Silent {
                        identity: file.identity.clone(),
                        next: now_instant + pause,
                        pause,
                        why,
                    },
                );
            }
        }
    }
    if files.is_empty() {
        format!("no socket in {}", config.private_dir.display())
    } else if found.is_empty() {
        format!(
            "sockets {:?}",
            files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>()
        )
    } else {
        found.join("; ")
    }
}

/// The interposer's DRA socket for its `n`th instance on a node.
fn endpoint_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("dra-e2e-interposer-{n}.sock"))
}
