//! Plugin discovery and registration, as the kubelet's plugin manager does it:
//! sockets appearing in `plugins_registry` are registered (GetInfo, version
//! choice, DRA connection, NotifyRegistrationStatus), failures are retried
//! with backoff, removed sockets are deregistered, re-created ones are
//! registered again.
use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, warn};

use super::backoff::Backoff;
use super::dra_api::choose_service;
use super::error::NodeSimError;
use super::journal::{Journal, NodeEventKind};
use super::plugins::{AddPluginError, PluginStore};
use super::uds::{self, ConnCount, DialError};
use dra_e2e_conn::authority::KubeletSocket;
use dra_e2e_proto::dra::NodeApi;
use dra_e2e_proto::health::HealthApi;
use dra_e2e_proto::pluginregistration::registration_client::RegistrationClient;
use dra_e2e_proto::pluginregistration::{InfoRequest, RegistrationStatus};
use dra_e2e_proto::service;

/// Limits and switches of plugin registration.
#[derive(Debug, Clone)]
pub struct RegistrationConfig {
    pub registry_dir: PathBuf,
    /// Accept plugins that only offer `v1alpha3.NodeService` (pre-1.34).
    pub allow_v1alpha4: bool,
    /// Stream device health from plugins that offer it.
    pub resource_health: bool,
    /// Blocking dial of the registration socket (kubelet: 10 s); the DRA
    /// endpoint is connected on demand, as the kubelet's gRPC client does.
    pub dial_timeout: Duration,
    /// `GetInfo` deadline (kubelet: 1 s).
    pub get_info_timeout: Duration,
    /// `NotifyRegistrationStatus` deadline (kubelet: 5 s).
    pub notify_timeout: Duration,
    /// Delays between attempts for a socket that failed to register.
    pub retry: Backoff,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error("GetInfo: {0}")]
    GetInfo(String),
    #[error("no handler registered for plugin type: {ty}")]
    UnsupportedType { ty: String },
    #[error("plugin did not report a driver name")]
    NoDriverName,
    #[error(
        "none of the versions supported by the plugin ({versions:?}) are supported by this node"
    )]
    NoSupportedVersion { versions: Vec<String> },
    #[error(transparent)]
    Duplicate(#[from] AddPluginError),
    #[error("NotifyRegistrationStatus: {0}")]
    Notify(String),
}

/// Starts watching the registry directory; discovery and registration then
/// run in tasks of `tracker` until `cancel`.
pub(crate) fn spawn(
    cfg: RegistrationConfig,
    store: Arc<PluginStore>,
    journal: Journal,
    tracker: TaskTracker,
    cancel: CancellationToken,
) -> Result<(), NodeSimError> {
    let dir = cfg.registry_dir.clone();
    std::fs::create_dir_all(&dir).map_err(|source| NodeSimError::Io {
        node: store.node().to_owned(),
        action: "create plugin registry directory",
        path: dir.clone(),
        source,
    })?;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |ev| {
        // The receiver is gone only when the node stops.
        let _ = tx.send(ev);
    })
    .map_err(|source| NodeSimError::Watch {
        node: store.node().to_owned(),
        path: dir.clone(),
        source,
    })?;
    watcher
        .watch(&dir, RecursiveMode::Recursive)
        .map_err(|source| NodeSimError::Watch {
            node: store.node().to_owned(),
            path: dir.clone(),
            source,
        })?;
    let reconciler = Reconciler {
        cfg: Arc::new(cfg),
        store,
        journal,
        tracker: tracker.clone(),
        cancel: cancel.clone(),
        sockets: HashMap::new(),
    };
    let span = tracing::info_span!("plugin_watcher", dir = %dir.display());
    tracker.spawn(reconciler.run(watcher, rx).instrument(span));
    Ok(())
}

/// What identifies one incarnation of a socket file: a re-created socket gets
/// a new inode or change time even at the same path.
type Identity = (u64, u64, i64, i64);

struct Tracked {
    identity: Identity,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

struct Reconciler {
    cfg: Arc<RegistrationConfig>,
    store: Arc<PluginStore>,
    journal: Journal,
    tracker: TaskTracker,
    cancel: CancellationToken,
    sockets: HashMap<PathBuf, Tracked>,
}

impl Reconciler {
    async fn run(
        mut self,
        watcher: notify::RecommendedWatcher,
        mut rx: mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
    ) {
        // The watch is in place before this scan, so a socket created in
        // between is seen by both; identities make the second sighting a no-op.
        self.rescan().await;
        loop {
            let ev = tokio::select! {
                _ = self.cancel.cancelled() => break,
                ev = rx.recv() => ev,
            };
            match ev {
                Some(Ok(ev)) => self.handle(ev).await,
                Some(Err(e)) => {
                    warn!(error = %e, "watching plugin registry failed, rescanning");
                    self.rescan().await;
                }
                None => break,
            }
        }
        drop(watcher);
        for (_, t) in self.sockets.drain() {
            t.cancel.cancel();
        }
    }

    async fn handle(&mut self, ev: notify::Event) {
        if ev.need_rescan() {
            self.rescan().await;
            return;
        }
        match ev.kind {
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                for p in ev.paths {
                    self.removed(&p).await;
                }
            }
            EventKind::Create(_)
            | EventKind::Modify(ModifyKind::Name(RenameMode::To))
            | EventKind::Modify(ModifyKind::Name(RenameMode::Any))
            | EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                for p in ev.paths {
                    self.appeared(&p).await;
                }
            }
            _ => {}
        }
    }

    fn ignored(&self, path: &Path) -> bool {
        let rel = path.strip_prefix(&self.cfg.registry_dir).unwrap_or(path);
        rel.components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    }

    async fn appeared(&mut self, path: &Path) {
        if self.ignored(path) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            // Already gone again: treat like a removal.
            self.removed(path).await;
            return;
        };
        if meta.is_dir() {
            // Sockets created before the recursive watch covered the new
            // directory would go unseen otherwise.
            for p in walk_sockets(path) {
                Box::pin(self.appeared(&p)).await;
            }
            return;
        }
        if !meta.file_type().is_socket() {
            return;
        }
        let identity = (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec());
        if self
            .sockets
            .get(path)
            .is_some_and(|t| t.identity == identity)
        {
            return;
        }
        self.forget(path).await;
        debug!(socket = %path.display(), "plugin socket found");
        let cancel = self.cancel.child_token();
        let span = tracing::info_span!("registration", socket = %path.display());
        let task = self.tracker.spawn(
            register_until_done(
                self.cfg.clone(),
                self.store.clone(),
                self.journal.clone(),
                path.to_owned(),
                cancel.clone(),
            )
            .instrument(span),
        );
        self.sockets.insert(
            path.to_owned(),
            Tracked {
                identity,
                cancel,
                task,
            },
        );
    }

    async fn removed(&mut self, path: &Path) {
        // A socket re-created before this event was handled is still there:
        // its own create event follows and re-registers it.
        if std::fs::symlink_metadata(path).is_ok() {
            return;
        }
        // A removed directory takes its sockets with it.
        let below: Vec<PathBuf> = self
            .sockets
            .keys()
            .filter(|p| p.starts_with(path))
            .cloned()
            .collect();
        for p in below {
            debug!(socket = %p.display(), "plugin socket removed");
            self.forget(&p).await;
        }
    }

    /// Stops registering `path` and deregisters what it registered.
    async fn forget(&mut self, path: &Path) {
        if let Some(t) = self.sockets.remove(path) {
            t.cancel.cancel();
            // Waiting makes sure the attempt cannot add the plugin after the
            // removal below.
            let _ = t.task.await;
            self.store.remove_by_socket(path);
        }
    }

    async fn rescan(&mut self) {
        let found = walk_sockets(&self.cfg.registry_dir);
        let gone: Vec<PathBuf> = self
            .sockets
            .keys()
            .filter(|p| !found.contains(p))
            .cloned()
            .collect();
        for p in gone {
            self.forget(&p).await;
        }
        for p in found {
            self.appeared(&p).await;
        }
    }
}

/// Sockets under `dir`, skipping dot-entries.
fn walk_sockets(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_socket() => out.push(e.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

async fn register_until_done(
    cfg: Arc<RegistrationConfig>,
    store: Arc<PluginStore>,
    journal: Journal,
    socket: PathBuf,
    cancel: CancellationToken,
) {
    let mut delays = cfg.retry.delays();
    let mut failures = 0u32;
    let mut failing = dra_e2e_conn::persisting::Persisting::default();
    loop {
        let result = tokio::select! {
            _ = cancel.cancelled() => return,
            r = register_once(&cfg, &store, &socket) => r,
        };
        let Err(e) = result else {
            return;
        };
        failures += 1;
        if failing.worth_a_warning(std::time::Instant::now()) {
            warn!(error = %e, failures, "plugin registration keeps failing, will retry");
        } else {
            debug!(error = %e, failures, "plugin registration failed, will retry");
        }
        journal.record(NodeEventKind::PluginRejected {
            socket: socket.display().to_string(),
            error: e.to_string(),
        });
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delays.next_delay()) => {}
        }
    }
}

async fn register_once(
    cfg: &RegistrationConfig,
    store: &Arc<PluginStore>,
    socket: &Path,
) -> Result<(), RegistrationError> {
    // By bare path, as the kubelet's plugin manager dials: its grpc-go client
    // then sends the percent-encoded socket path as `:authority`.
    let ch = uds::dial_as(
        KubeletSocket::Registration,
        socket,
        cfg.dial_timeout,
        ConnCount::default(),
    )
    .await?;
    let mut client = RegistrationClient::new(ch);
    let info =
        match tokio::time::timeout(cfg.get_info_timeout, client.get_info(InfoRequest {})).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(s)) => return Err(RegistrationError::GetInfo(s.message().to_owned())),
            Err(_) => {
                return Err(RegistrationError::GetInfo(format!(
                    "no answer within {:?}",
                    cfg.get_info_timeout
                )));
            }
        };
    debug!(name = %info.name, r#type = %info.r#type, endpoint = %info.endpoint,
        versions = ?info.supported_versions, "GetInfo answered");
    match accept(cfg, store, socket, info).await {
        Ok((driver, endpoint, service)) => {
            if let Err(e) = notify(cfg, &mut client, true, String::new()).await {
                // Without the plugin's acknowledgement the registration does
                // not count; the next attempt starts from scratch.
                store.remove_by_socket(socket);
                return Err(e);
            }
            info!(driver, endpoint = %endpoint.display(), service = service.registration_string(), "registration complete");
            Ok(())
        }
        Err(e) => {
            if let Err(ne) = notify(cfg, &mut client, false, e.to_string()).await {
                debug!(error = %ne, "plugin answered the rejection with an error");
            }
            Err(e)
        }
    }
}

/// Validates the plugin's info and connects its DRA endpoint.
async fn accept(
    cfg: &RegistrationConfig,
    store: &Arc<PluginStore>,
    socket: &Path,
    info: dra_e2e_proto::pluginregistration::PluginInfo,
) -> Result<(String, PathBuf, NodeApi), RegistrationError> {
    if info.r#type != service::DRA_PLUGIN_TYPE {
        return Err(RegistrationError::UnsupportedType { ty: info.r#type });
    }
    if info.name.is_empty() {
        return Err(RegistrationError::NoDriverName);
    }
    let service =
        choose_service(&info.supported_versions, cfg.allow_v1alpha4).ok_or_else(|| {
            RegistrationError::NoSupportedVersion {
                versions: info.supported_versions.clone(),
            }
        })?;
    // Health is an extra service next to the chosen DRA API, not a version
    // of it; only streamed when the node's `ResourceHealthStatus` gate is on.
    let health = cfg
        .resource_health
        .then(|| HealthApi::preferred(&info.supported_versions))
        .flatten();
    let endpoint = if info.endpoint.is_empty() {
        socket.to_owned()
    } else {
        PathBuf::from(&info.endpoint)
    };
    let conns = ConnCount::default();
    // As `unix:<endpoint>`, as the kubelet's DRA manager dials (`localhost`).
    // The kubelet makes its client at registration and connects on demand
    // (grpc.NewClient, then Connect): a DRA service that does not listen
    // yet is no reason to refuse the plugin. The plugin's monitor dials it
    // again until it answers; until then the driver is not usable.
    let channel = match uds::dial_once(&endpoint, conns.clone()).await {
        Ok(channel) => channel,
        Err(e) => {
            debug!(driver = %info.name, error = %e, "DRA endpoint not reachable yet; registering anyway");
            uds::dial_lazy(&endpoint, conns.clone())
        }
    };
    store.add(
        &info.name, &endpoint, socket, service, health, channel, conns,
    )?;
    Ok((info.name, endpoint, service))
}

async fn notify(
    cfg: &RegistrationConfig,
    client: &mut RegistrationClient<tonic::transport::Channel>,
    registered: bool,
    error: String,
) -> Result<(), RegistrationError> {
    let req = RegistrationStatus {
        plugin_registered: registered,
        error,
    };
    match tokio::time::timeout(cfg.notify_timeout, client.notify_registration_status(req)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(s)) => Err(RegistrationError::Notify(s.message().to_owned())),
        Err(_) => Err(RegistrationError::Notify(format!(
            "no answer within {:?}",
            cfg.notify_timeout
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::{PluginView, UsabilityChange};
    use crate::test_plugin::TestPlugin;
    use dra_e2e_proto::dra::ClaimRef;

    struct Harness {
        dir: tempfile::TempDir,
        store: Arc<PluginStore>,
        changes: mpsc::UnboundedReceiver<UsabilityChange>,
        /// The last change `next_change` returned.
        last: Option<UsabilityChange>,
        journal: Journal,
        tracker: TaskTracker,
        cancel: CancellationToken,
    }

    impl Harness {
        fn registry(&self) -> PathBuf {
            self.dir.path().join("plugins_registry")
        }

        fn plugins(&self) -> PathBuf {
            self.dir.path().join("plugins")
        }

        fn start_plugin(&self, driver: &str, versions: &[&str]) -> TestPlugin {
            TestPlugin::start(&self.registry(), &self.plugins(), driver, versions)
        }

        async fn wait_views(&self, what: &str, f: impl Fn(&[PluginView]) -> bool) {
            let mut rx = self.store.subscribe();
            let r = tokio::time::timeout(Duration::from_secs(20), async {
                while !f(&self.store.views()) {
                    rx.changed().await.unwrap();
                }
            })
            .await;
            assert!(
                r.is_ok(),
                "timed out waiting for {what}; plugins: {:?}; journal: {:?}",
                self.store.views(),
                self.journal.entries()
            );
        }

        /// The next transition: the store reports a driver's usability at
        /// every re-evaluation, also when it stayed the same.
        async fn next_change(&mut self) -> UsabilityChange {
            loop {
                let c = tokio::time::timeout(Duration::from_secs(20), self.changes.recv())
                    .await
                    .expect("usability change")
                    .expect("channel open");
                if self.last.as_ref() != Some(&c) {
                    self.last = Some(c.clone());
                    return c;
                }
            }
        }

        async fn stop(self) {
            self.cancel.cancel();
            self.tracker.close();
            self.tracker.wait().await;
        }
    }

    /// A plugin store over a fresh registry dir; `spawn_watcher` starts
    /// discovery, so tests can create sockets before or after it.
    async fn harness() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("plugins_registry")).unwrap();
        let journal = Journal::default();
        let tracker = TaskTracker::new();
        let cancel = CancellationToken::new();
        let health = Arc::new(crate::health::HealthStore::new(
            journal.clone(),
            Duration::from_secs(5),
        ));
        let (store, changes) = PluginStore::new(
            "node-a",
            journal.clone(),
            health,
            tracker.clone(),
            cancel.clone(),
        );
        Harness {
            dir,
            store,
            changes,
            last: None,
            journal,
            tracker,
            cancel,
        }
    }

    fn spawn_watcher(h: &Harness, allow_v1alpha4: bool) {
        let cfg = RegistrationConfig {
            registry_dir: h.registry(),
            allow_v1alpha4,
            resource_health: true,
            dial_timeout: Duration::from_secs(10),
            get_info_timeout: Duration::from_secs(1),
            notify_timeout: Duration::from_secs(5),
            retry: Backoff::new(Duration::from_millis(50), Duration::from_millis(200)),
        };
        spawn(
            cfg,
            h.store.clone(),
            h.journal.clone(),
            h.tracker.clone(),
            h.cancel.clone(),
        )
        .unwrap();
    }

    fn claim(uid: &str) -> ClaimRef {
        ClaimRef {
            namespace: "ns".into(),
            name: format!("c-{uid}"),
            uid: uid.into(),
        }
    }

    #[tokio::test]
    async fn registers_deregisters_and_reregisters() {
        let mut h = harness().await;
        spawn_watcher(&h, false);
        let plugin = h.start_plugin("a.example.com", &["v1.DRAPlugin", "v1beta1.DRAPlugin"]);
        h.wait_views("registration", |v| v.len() == 1 && v[0].connected)
            .await;
        let v = h.store.views();
        assert_eq!(v[0].driver, "a.example.com");
        assert_eq!(v[0].health, None);
        assert_eq!(v[0].service, NodeApi::V1);
        assert_eq!(v[0].endpoint, plugin.dra_socket);
        // The node adds the plugin before it acknowledges the registration.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while plugin.record().statuses.is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no NotifyRegistrationStatus"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(plugin.record().statuses, vec![(true, String::new())]);
        assert_eq!(
            h.next_change().await,
            UsabilityChange {
                driver: "a.example.com".into(),
                usable: true
            }
        );

        // Calls reach the plugin's v1 service through the node's connection.
        let client = h.store.client("a.example.com").unwrap();
        let resp = client
            .prepare(&[claim("u1")], Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            resp["u1"].devices[0].cdi_device_ids,
            vec!["a.example.com/test=claim-u1"]
        );
        assert_eq!(
            plugin.record().calls,
            vec![(
                dra_e2e_proto::method::V1_PREPARE.to_string(),
                vec!["u1".to_string()]
            )]
        );

        plugin.stop().await;
        h.wait_views("deregistration", |v| v.is_empty()).await;
        assert!(!h.store.is_registered("a.example.com"));
        assert!(!h.next_change().await.usable);

        // A new plugin instance at the same paths registers again.
        let plugin = h.start_plugin("a.example.com", &["v1.DRAPlugin"]);
        h.wait_views("re-registration", |v| v.len() == 1 && v[0].connected)
            .await;
        assert!(h.next_change().await.usable);
        let registrations = h
            .journal
            .entries()
            .iter()
            .filter(|e| matches!(e.kind, NodeEventKind::PluginRegistered { .. }))
            .count();
        assert_eq!(registrations, 2);
        plugin.stop().await;
        h.stop().await;
    }

    #[tokio::test]
    async fn chooses_the_plugins_first_supported_version() {
        let h = harness().await;
        // Present before the node starts: found by the initial scan.
        let plugin = h.start_plugin(
            "b.example.com",
            &[
                "v1alpha1.DRAResourceHealth",
                "v1beta1.DRAPlugin",
                "v1.DRAPlugin",
            ],
        );
        spawn_watcher(&h, false);
        h.wait_views("registration", |v| v.len() == 1 && v[0].connected)
            .await;
        assert_eq!(h.store.views()[0].service, NodeApi::V1beta1);
        // The health entry is no DRA version, but remembered.
        assert_eq!(h.store.views()[0].health, Some(HealthApi::V1alpha1));
        let client = h.store.client("b.example.com").unwrap();
        client
            .prepare(&[claim("u2")], Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            plugin.record().calls[0].0,
            dra_e2e_proto::method::V1BETA1_PREPARE
        );
        plugin.stop().await;
        h.stop().await;
    }

    #[tokio::test]
    async fn rejects_unsupported_plugins_and_ignores_dot_files() {
        let h = harness().await;
        spawn_watcher(&h, false);
        // A dot-file socket and a regular file are not plugins.
        let hidden = TestPlugin::start(
            &h.registry().join(".hidden"),
            &h.plugins(),
            "h.example.com",
            &["v1.DRAPlugin"],
        );
        std::fs::write(h.registry().join("not-a-socket"), b"").unwrap();
        let old = h.start_plugin("old.example.com", &["v1alpha3.NodeService"]);
        let good = h.start_plugin("good.example.com", &["v1.DRAPlugin"]);
        h.wait_views("good plugin", |v| {
            v.iter().any(|p| p.driver == "good.example.com")
        })
        .await;

        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while old.record().statuses.len() < 2 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no retried rejection"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (registered, error) = old.record().statuses[0].clone();
        assert!(!registered);
        assert!(error.contains("none of the versions"), "{error}");
        assert!(!h.store.is_registered("old.example.com"));
        assert_eq!(hidden.record().get_info_calls, 0);
        for p in [hidden, old, good] {
            p.stop().await;
        }
        h.stop().await;
    }

    #[tokio::test]
    async fn v1alpha4_only_when_enabled_and_get_info_failures_are_retried() {
        let h = harness().await;
        let plugin = h.start_plugin("c.example.com", &["v1alpha3.NodeService"]);
        *plugin.shared.fail_get_info.lock().unwrap() = true;
        spawn_watcher(&h, true);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while plugin.record().get_info_calls < 2 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "GetInfo not retried"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(plugin.record().statuses.is_empty());
        *plugin.shared.fail_get_info.lock().unwrap() = false;
        h.wait_views("registration", |v| v.len() == 1).await;
        assert_eq!(h.store.views()[0].service, NodeApi::V1alpha4);
        plugin.stop().await;
        h.stop().await;
    }

    #[tokio::test]
    async fn lost_dra_connection_makes_the_driver_unusable_until_it_returns() {
        let mut h = harness().await;
        spawn_watcher(&h, false);
        let mut plugin = h.start_plugin("d.example.com", &["v1.DRAPlugin"]);
        h.wait_views("registration", |v| v.len() == 1 && v[0].connected)
            .await;
        assert!(h.next_change().await.usable);

        // The registration socket stays: the plugin is still registered, but
        // not connected, which is what makes the kubelet schedule a wipe.
        plugin.stop_dra().await;
        h.wait_views("disconnect", |v| v.len() == 1 && !v[0].connected)
            .await;
        assert_eq!(
            h.next_change().await,
            UsabilityChange {
                driver: "d.example.com".into(),
                usable: false
            }
        );
        assert!(h.store.is_registered("d.example.com"));

        plugin.restart_dra();
        h.wait_views("reconnect", |v| v.len() == 1 && v[0].connected)
            .await;
        assert!(h.next_change().await.usable);
        h.store
            .client("d.example.com")
            .unwrap()
            .prepare(&[claim("u3")], Duration::from_secs(5))
            .await
            .unwrap();
        plugin.stop().await;
        h.stop().await;
    }
}
