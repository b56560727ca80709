//! Simulated kubelet nodes for the local cluster.
//!
//! The local cluster has no container runtime, so each [`SimNode`] plays the
//! kubelet's part where DRA is concerned. It reaches plugins **only through
//! their unix sockets**, like a kubelet, so it works with any DRA kubelet
//! plugin:
//!
//! * **Node**: creates the Node object (hostname/os/arch labels, capacity,
//!   node info, addresses), reports it Ready and keeps its Lease in
//!   `kube-node-lease` fresh. Its kubelet root dir holds `plugins_registry/`,
//!   `plugins/` and `cdi/`.
//! * **Plugin registration**: watches `plugins_registry/` (inotify plus an
//!   initial scan; dot-files and non-sockets are ignored), dials with a 10 s
//!   limit, calls `GetInfo` with a 1 s deadline, requires type `DRAPlugin`,
//!   takes the first entry of the plugin's `supported_versions` the node
//!   supports (`v1.DRAPlugin`, `v1beta1.DRAPlugin`, and `v1alpha3.NodeService`
//!   when [`SimNodeConfig::allow_v1alpha4`] is set), connects to the DRA
//!   endpoint and answers `NotifyRegistrationStatus` (false with the reason on
//!   rejection). Failed registrations are retried with backoff; a removed
//!   socket deregisters the plugin, a re-created one registers it again.
//!   Several plugins per driver are allowed: calls go to the most recently
//!   registered connected one.
//! * **Pods** bound to the node: claims are resolved, checked (reserved for
//!   the pod, drivers registered, no stale claim of the same name) and
//!   prepared with one `NodePrepareResources` per driver before any container
//!   starts. Failures produce `FailedPrepareDynamicResources` events worded
//!   as the kubelet words them and are retried with backoff. Containers get
//!   their literal spec env plus the CDI `containerEdits.env` of the devices
//!   mapped to them, read from the spec files in the node's `cdi/` directory
//!   when the pod's containers are planned (after prepare) and again for
//!   every restart. A CDI device no spec defines keeps its container waiting
//!   in `CreateContainerError` ("failed to create containerd container: CDI
//!   device injection failed: unresolvable CDI devices ...", as containerd
//!   reports it) with a `Failed` warning event, retried with backoff.
//! * **Teardown**: when a pod is deleted or finishes, its claims that no
//!   other pod on the node uses are unprepared (batched per driver) before
//!   the final status is written or the deletion is finished (grace period 0,
//!   UID precondition). Unprepare errors keep the pod terminating and are
//!   retried; a reconcile loop also unprepares for pods that vanished.
//! * **Optional node operations** (the kubelet's `DRAOptionalNodeOperations`
//!   gate, [`SimNodeConfig::optional_node_operations`]): the Node declares
//!   the feature; a driver all of whose devices in a claim skip
//!   `NodePrepareResources` (or `*`) is neither looked up nor called for it,
//!   likewise for `NodeUnprepareResources`. With the gate off such a claim
//!   fails to prepare ("DRAOptionalNodeOperations feature gate is disabled
//!   on kubelet").
//! * **Device health** (the kubelet's `ResourceHealthStatus` gate, on unless
//!   [`SimNodeConfig::resource_health`] is cleared): plugins advertising
//!   `v1alpha1.DRAResourceHealth` get a `NodeWatchResources` stream for as
//!   long as they are registered, reopened [`SimNodeConfig::health_retry`]
//!   after it fails or ends. Each report replaces what the node knows about
//!   the driver's devices; messages are cut to 1024 bytes. Once a pod's
//!   claims are prepared, each regular container's status carries
//!   `allocatedResourcesStatus` as the kubelet builds it: per entry of the
//!   container's `resources.claims`, `claim:<pod claim>` (or
//!   `claim:<pod claim>/<request>`) listing every device prepared for that
//!   claim as `{resourceID, health, message}`, the resource ID being the
//!   device's first CDI device ID (else `<driver>/<pool>/<device>`);
//!   unreported devices are `Unknown`. A health change rewrites the status
//!   of running pods at once; a finished pod's final status keeps the last
//!   value.
//! * **Slice wiping**: all ResourceSlices with `spec.nodeName=<node>` are
//!   deleted at start; a driver's node slices are deleted
//!   [`SimNodeConfig::wipe_delay`] after its last connected plugin went away,
//!   unless one comes back in time. Slices without `nodeName` are never
//!   touched.
//!
//! # What the API server sees
//!
//! Pod status and events follow what a kubelet v1.37 with containerd
//! reports for the same pod (`tests/real/differential.rs` runs the same pods on a
//! simulated and a real node and compares them field by field):
//!
//! * conditions `PodReadyToStartContainers`, `Initialized`, `Ready`,
//!   `ContainersReady` in that order, each with the pod's generation as
//!   `observedGeneration` (so are the scheduler's conditions, and
//!   `status.observedGeneration`), and with the kubelet's reasons and
//!   messages (`PodSandboxNotReady`, `ContainersNotInitialized`,
//!   `ContainersNotReady` "containers with unready status: [...]",
//!   `PodCompleted`, `PodFailed`) written as a whole, so none outlives its
//!   state. A pod without init containers is `Initialized` from the start;
//!   the sandbox (and the pod IP) exists once the claims are prepared.
//! * container statuses with `volumeMounts` from the spec; once a container
//!   was created, its `user.linux` (the security context's user and group,
//!   else root) and its `resources.claims`; a completed init container is
//!   `ready`; a crash-looping one waits in `CrashLoopBackOff` with the
//!   kubelet's message and keeps its last instance's ID.
//! * events on the pod's containers (`involvedObject.fieldPath`): `Pulled`
//!   (the image is always "already present on machine"), `Created`,
//!   `Started`, `BackOff`, `Failed`, and `Killing` when the pod is deleted
//!   while they run; a repeated event bumps its count.
//!
//! # What containers do
//!
//! A container runs until its pod is deleted, except when its command line
//! (`command` followed by `args`) is one of these scripts, directly or as
//! `sh -c "<script>"` (also `bash`/`ash`/`dash`, `-ec`-style flags); see
//! [`container_behaviour`]:
//!
//! | script | effect |
//! |---|---|
//! | `true`, `:` / `false` | status 0 / 1 at once |
//! | `exit N`, `exit` | the container exits with N (the last status) |
//! | `sleep N` | status 0 after N seconds (fractions, `s`/`m`/`h`/`d` suffixes) |
//! | `env` | status 0 (its output is not simulated) |
//! | `env \| grep [-qsxF] [-e] PATTERN` | status 0 if a line of the container's env (spec env plus CDI env) matches, else 1 |
//! | `trap exit TERM; while true; do sleep 1; done` | runs until deleted (the pod builder's default) |
//!
//! These may be chained with `;`, newlines, `&&` and `||` with shell meaning;
//! words may be single- or double-quoted (without expansions). A script that
//! ends without `exit` exits with the last status. Anything else (variables,
//! redirections, loops, other programs, an image's own entrypoint) runs
//! until deletion. An exited container is restarted by the pod's
//! `restartPolicy` (`Always`, `OnFailure`): the first time at once, then
//! after a doubling delay ([`SimNodeConfig::restart_backoff`]) spent in
//! `CrashLoopBackOff`, with `restartCount` incremented per new instance;
//! `Never`: the pod ends `Succeeded` or `Failed`. [`SimNode::end_container`]
//! ends a running regular container with status 0, as the pod builder's
//! default command ends on SIGTERM; it is created again from the CDI specs
//! as they are then. Init containers run one
//! after the other before the regular ones; init containers with
//! `restartPolicy: Always` are sidecars that keep running.
mod backoff;
mod cdi;
mod claims;
mod command;
mod containers;
mod dra_api;
mod dra_manager;
mod error;
mod health;
mod journal;
pub mod link;
mod node_object;
mod plugins;
mod pod_groups;
mod pod_worker;
mod pods;
mod registration;
#[cfg(test)]
mod test_plugin;
mod uds;
mod wipe;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, warn};

pub use backoff::Backoff;
pub use cdi::{CdiError, CdiSpecs};
pub use claims::PreparedClaim;
pub use command::{Behaviour, behaviour as container_behaviour};
pub use dra_manager::DraError;
pub use error::NodeSimError;
pub use health::ReportedHealth;
pub use journal::{NodeEvent, NodeEventKind};
pub use plugins::PluginView;

/// Settings of one simulated node. [`SimNodeConfig::new`] gives defaults that
/// suit tests on the local cluster.
#[derive(Debug, Clone)]
pub struct SimNodeConfig {
    pub name: String,
    /// The node's kubelet root: `plugins_registry/`, `plugins/`, `cdi/`.
    pub root_dir: PathBuf,
    /// How long after a driver lost its last connected plugin its node
    /// slices are deleted. The kubelet waits 30 s, long enough for a plugin
    /// container restart; a local plugin restarts in well under a second, so
    /// the default is 3 s, which keeps slice-removal checks at scenario
    /// teardown short while still covering a quick plugin restart.
    pub wipe_delay: Duration,
    /// Delete the Node and its Lease on [`SimNode::stop`].
    pub delete_node_on_stop: bool,
    /// Accept plugins offering only the pre-1.34 `v1alpha3.NodeService`.
    pub allow_v1alpha4: bool,
    /// The kubelet's `ResourceHealthStatus` gate (beta, on by default in
    /// 1.37): stream device health from plugins and report it in pod status.
    pub resource_health: bool,
    /// The kubelet's `DRAWorkloadResourceClaims` gate (beta, off by default
    /// in 1.37): a claim owned by or reserved for the pod's PodGroup is the
    /// pod's to use.
    pub pod_group_claims: bool,
    /// The kubelet's `DRAOptionalNodeOperations` gate (alpha in 1.37): the
    /// Node declares the feature (the scheduler allocates devices whose
    /// slices skip node operations only on nodes that do), and prepare and
    /// unprepare calls the allocation says to skip are not made. Off, a
    /// claim asking to skip one fails to prepare, as on the kubelet.
    pub optional_node_operations: bool,
    /// Pause before a failed or ended health stream is opened again
    /// (kubelet: 5 s).
    pub health_retry: Duration,
    /// Labels besides `kubernetes.io/hostname`, `kubernetes.io/os` and
    /// `kubernetes.io/arch`.
    pub labels: BTreeMap<String, String>,
    /// The node's InternalIP and the pods' hostIP. Loopback by default, so
    /// anything that tries to reach the "kubelet" stays on this machine.
    pub address: IpAddr,
    /// Pod IPs are handed out from this /24 (they are only ever written into
    /// pod status, never used for traffic).
    pub pod_ip_base: Ipv4Addr,
    pub cpu: String,
    pub memory: String,
    pub max_pods: String,
    pub kubelet_version: String,
    pub lease_renew_interval: Duration,
    pub lease_duration: Duration,
    /// Blocking dial limit of plugin sockets (kubelet: 10 s).
    pub dial_timeout: Duration,
    /// `GetInfo` deadline (kubelet: 1 s).
    pub get_info_timeout: Duration,
    /// `NotifyRegistrationStatus` deadline (kubelet: 5 s).
    pub notify_timeout: Duration,
    /// Retries of failed plugin registrations.
    pub registration_retry: Backoff,
    /// Deadline of `NodePrepareResources`/`NodeUnprepareResources` (kubelet: 45 s).
    pub call_timeout: Duration,
    /// Retries of failed prepares, unprepares and pod deletions.
    pub retry: Backoff,
    /// Delay before an exited container restarts (after the first restart,
    /// which comes at once), doubling per restart; it also spaces out
    /// attempts to create containers the runtime could not create.
    pub restart_backoff: Backoff,
    /// How often claims of vanished pods are looked for.
    pub reconcile_period: Duration,
}

impl SimNodeConfig {
    pub fn new(name: impl Into<String>, root_dir: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            root_dir: root_dir.into(),
            wipe_delay: Duration::from_secs(3),
            delete_node_on_stop: true,
            allow_v1alpha4: false,
            resource_health: true,
            pod_group_claims: false,
            optional_node_operations: false,
            health_retry: Duration::from_secs(5),
            labels: BTreeMap::new(),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            pod_ip_base: Ipv4Addr::new(10, 244, 0, 0),
            cpu: "32".into(),
            memory: "256Gi".into(),
            max_pods: "110".into(),
            kubelet_version: "v1.37.2".into(),
            lease_renew_interval: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            dial_timeout: Duration::from_secs(10),
            get_info_timeout: Duration::from_secs(1),
            notify_timeout: Duration::from_secs(5),
            registration_retry: Backoff::new(Duration::from_millis(500), Duration::from_secs(10)),
            call_timeout: Duration::from_secs(45),
            retry: Backoff::new(Duration::from_millis(500), Duration::from_secs(8)),
            restart_backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(5)),
            reconcile_period: Duration::from_secs(5),
        }
    }
}

/// A running simulated kubelet node.
pub struct SimNode {
    name: String,
    root_dir: PathBuf,
    client: kube::Client,
    delete_node_on_stop: bool,
    cancel: CancellationToken,
    tracker: TaskTracker,
    plugins: Arc<plugins::PluginStore>,
    ctx: Arc<pod_worker::NodeCtx>,
    journal: journal::Journal,
    /// Its network link to the API server ([`link`]).
    link: link::Link,
    stopped: bool,
}

impl std::fmt::Debug for SimNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimNode")
            .field("name", &self.name)
            .field("root_dir", &self.root_dir)
            .finish_non_exhaustive()
    }
}

// The kubelet's directories under its root dir, free functions because
// starting a node creates them before there is a `SimNode` to ask.

fn registry_dir(root: &Path) -> PathBuf {
    root.join("plugins_registry")
}

fn plugins_dir(root: &Path) -> PathBuf {
    root.join("plugins")
}

fn cdi_dir(root: &Path) -> PathBuf {
    root.join("cdi")
}

fn is_dns_label_ish(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.'])
}

impl SimNode {
    /// Registers the node, wipes its old slices and starts watching plugins
    /// and pods. Everything runs in tasks that [`SimNode::stop`] ends.
    pub async fn start(client: kube::Client, cfg: SimNodeConfig) -> Result<Self, NodeSimError> {
        let span = tracing::info_span!("sim_node", node = %cfg.name);
        Self::start_inner(client, cfg).instrument(span).await
    }

    async fn start_inner(client: kube::Client, cfg: SimNodeConfig) -> Result<Self, NodeSimError> {
        let name = cfg.name.clone();
        if !is_dns_label_ish(&name) {
            return Err(NodeSimError::Config {
                node: name,
                message: "node name must be a lowercase DNS subdomain".into(),
            });
        }
        for dir in [
            registry_dir(&cfg.root_dir),
            plugins_dir(&cfg.root_dir),
            cdi_dir(&cfg.root_dir),
        ] {
            std::fs::create_dir_all(&dir).map_err(|source| NodeSimError::Io {
                node: name.clone(),
                action: "create kubelet directory",
                path: dir.clone(),
                source,
            })?;
        }
        let mut labels = cfg.labels.clone();
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert("kubernetes.io/os".into(), "linux".into());
        labels.insert("kubernetes.io/arch".into(), node_object::kube_arch().into());
        let shape = node_object::NodeShape {
            name: name.clone(),
            labels,
            address: cfg.address,
            pod_cidr: Some(format!("{}/24", cfg.pod_ip_base)),
            cpu: cfg.cpu.clone(),
            memory: cfg.memory.clone(),
            pods: cfg.max_pods.clone(),
            kubelet_version: cfg.kubelet_version.clone(),
            declared_features: if cfg.optional_node_operations {
                vec![node_object::OPTIONAL_NODE_OPERATIONS.to_owned()]
            } else {
                Vec::new()
            },
        };
        // Everything the node says to the API server goes through its link.
        let link = link::Link::new();
        let client = link.client(client);
        let node = node_object::register(&client, &shape).await?;
        info!("node registered and ready");

        let journal = journal::Journal::default();
        wipe_all_with_retry(&client, &name).await?;
        journal.record(NodeEventKind::SlicesWiped { driver: None });

        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let started = Self::spawn_all(
            client.clone(),
            &cfg,
            node,
            journal.clone(),
            &tracker,
            &cancel,
        );
        let (plugins, ctx) = match started {
            Ok(v) => v,
            Err(e) => {
                cancel.cancel();
                tracker.close();
                tracker.wait().await;
                return Err(e);
            }
        };
        Ok(Self {
            name,
            root_dir: cfg.root_dir,
            client,
            delete_node_on_stop: cfg.delete_node_on_stop,
            cancel,
            tracker,
            plugins,
            ctx,
            journal,
            link,
            stopped: false,
        })
    }

    fn spawn_all(
        client: kube::Client,
        cfg: &SimNodeConfig,
        node: k8s_openapi::api::core::v1::Node,
        journal: journal::Journal,
        tracker: &TaskTracker,
        cancel: &CancellationToken,
    ) -> Result<(Arc<plugins::PluginStore>, Arc<pod_worker::NodeCtx>), NodeSimError> {
        let name = cfg.name.clone();
        tracker.spawn(
            node_object::keep_lease(
                client.clone(),
                node,
                cfg.lease_renew_interval,
                cfg.lease_duration,
                cancel.clone(),
            )
            .in_current_span(),
        );

        let health = Arc::new(health::HealthStore::new(journal.clone(), cfg.health_retry));
        let (store, changes) = plugins::PluginStore::new(
            &name,
            journal.clone(),
            health.clone(),
            tracker.clone(),
            cancel.clone(),
        );
        let wiper = wipe::Wiper::new(
            client.clone(),
            &name,
            cfg.wipe_delay,
            journal.clone(),
            tracker.clone(),
            cancel.clone(),
        );
        tracker.spawn(wiper.run(changes).in_current_span());
        registration::spawn(
            registration::RegistrationConfig {
                registry_dir: registry_dir(&cfg.root_dir),
                allow_v1alpha4: cfg.allow_v1alpha4,
                resource_health: cfg.resource_health,
                dial_timeout: cfg.dial_timeout,
                get_info_timeout: cfg.get_info_timeout,
                notify_timeout: cfg.notify_timeout,
                retry: cfg.registration_retry,
            },
            store.clone(),
            journal.clone(),
            tracker.clone(),
            cancel.clone(),
        )?;

        let dra = Arc::new(
            dra_manager::DraManager::new(
                client.clone(),
                store.clone(),
                journal.clone(),
                cfg.call_timeout,
            )
            .with_pod_group_claims(cfg.pod_group_claims)
            .with_optional_node_operations(cfg.optional_node_operations),
        );
        let ctx = Arc::new(pod_worker::NodeCtx {
            client,
            node: name,
            host_ip: cfg.address.to_string(),
            cdi_dir: cdi_dir(&cfg.root_dir),
            dra,
            health: cfg.resource_health.then_some(health),
            journal,
            envs: Default::default(),
            enders: Default::default(),
            ips: pod_worker::IpPool::new(cfg.pod_ip_base),
            retry: cfg.retry,
            restart_delay: cfg.restart_backoff,
        });
        tracker.spawn(
            pods::run(
                ctx.clone(),
                tracker.clone(),
                cancel.clone(),
                cfg.reconcile_period,
            )
            .in_current_span(),
        );
        Ok((store, ctx))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn root_dir(&self) -> &Path {
        &self.root_dir
    }

    /// Where plugins put their registration sockets.
    pub fn registry_dir(&self) -> PathBuf {
        registry_dir(&self.root_dir)
    }

    /// Where plugins put their DRA sockets (`plugins/<driver>/`).
    pub fn plugins_dir(&self) -> PathBuf {
        plugins_dir(&self.root_dir)
    }

    /// Where plugins write CDI spec files.
    pub fn cdi_dir(&self) -> PathBuf {
        cdi_dir(&self.root_dir)
    }

    /// The environment of a container that has started, as its process
    /// sees it: spec env, then CDI env.
    pub fn container_env(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Option<Vec<(String, String)>> {
        self.ctx
            .envs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(namespace.to_owned(), pod.to_owned()))
            .and_then(|(_, by_container)| by_container.get(container).cloned())
    }

    /// Ends a running regular container of a pod on this node with status
    /// 0, as its process would on SIGTERM; the pod's restart policy says
    /// what follows, and a restart reads the CDI specs again. `None` when
    /// no pod of that name runs here; else the answer, once it ended or
    /// with why it could not.
    pub fn end_container(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Option<tokio::sync::oneshot::Receiver<Result<(), String>>> {
        let enders = self.ctx.enders.lock().unwrap_or_else(|e| e.into_inner());
        let (_, tx) = enders.get(&(namespace.to_owned(), pod.to_owned()))?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        tx.send((container.to_owned(), reply)).ok()?;
        Some(answer)
    }

    /// Claims prepared on this node, one entry per claim and driver.
    pub fn prepared_claims(&self) -> Vec<PreparedClaim> {
        self.ctx.dra.prepared_claims()
    }

    /// Device health the node's plugins reported, by driver, pool, device.
    /// Devices missing here count as `Unknown`.
    pub fn device_health(&self) -> Vec<ReportedHealth> {
        self.ctx
            .health
            .as_ref()
            .map(|h| h.reported())
            .unwrap_or_default()
    }

    /// What the node did, oldest first.
    pub fn events(&self) -> Vec<NodeEvent> {
        self.journal.entries()
    }

    /// Waits up to `timeout` for the node to journal an event matching
    /// `pred` (earlier entries count too); `None` if none came in time.
    pub async fn wait_for_event(
        &self,
        timeout: Duration,
        pred: impl Fn(&NodeEventKind) -> bool,
    ) -> Option<NodeEvent> {
        self.journal.wait_for(timeout, pred).await
    }

    /// Currently registered plugins, in registration order.
    pub fn plugins(&self) -> Vec<PluginView> {
        self.plugins.views()
    }

    /// The node's network link to the API server, which a scenario cuts to
    /// lose the node and restores to bring it back.
    pub fn link(&self) -> &link::Link {
        &self.link
    }

    /// Waits until a plugin of `driver` is registered and connected;
    /// false if `timeout` passed first.
    pub async fn wait_for_plugin(&self, driver: &str, timeout: Duration) -> bool {
        let mut rx = self.plugins.subscribe();
        let ready =
            |s: &plugins::PluginStore| s.views().iter().any(|p| p.driver == driver && p.connected);
        tokio::time::timeout(timeout, async {
            loop {
                if ready(&self.plugins) {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .is_ok()
    }

    /// Ends every task of the node and waits for them; deletes the Node and
    /// its Lease if configured. Prepared claims are left as they are, as a
    /// stopping kubelet leaves them.
    pub async fn stop(mut self) -> Result<(), NodeSimError> {
        self.stopped = true;
        // A node stopped while cut off still deletes its objects.
        self.link.set_cut(false);
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        info!(node = %self.name, "node stopped");
        if self.delete_node_on_stop {
            node_object::delete(&self.client, &self.name).await?;
        }
        Ok(())
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        if !self.stopped {
            // Tasks notice and end soon; only stop() can wait for them.
            self.cancel.cancel();
        }
    }
}

/// Deletes all slices of the node; retried briefly, since a node that
/// cannot do this would offer stale devices.
async fn wipe_all_with_retry(client: &kube::Client, node: &str) -> Result<(), NodeSimError> {
    let mut delays = Backoff::new(Duration::from_millis(200), Duration::from_secs(2)).delays();
    let mut attempts = 0;
    loop {
        match wipe::wipe(client, node, None).await {
            Ok(()) => return Ok(()),
            Err(e) if attempts < 5 => {
                warn!(error = %e, "wiping node slices at start failed, retrying");
                attempts += 1;
                tokio::time::sleep(delays.next_delay()).await;
            }
            Err(source) => {
                return Err(NodeSimError::Kube {
                    node: node.to_owned(),
                    action: "delete the node's ResourceSlices at start".into(),
                    source,
                });
            }
        }
    }
}

/// Several nodes named `<prefix>-0`, `<prefix>-1`, … for the local cluster.
#[derive(Debug)]
pub struct SimNodes {
    nodes: Vec<SimNode>,
}

impl SimNodes {
    /// Starts `count` nodes with roots `<root_dir>/<i>` (short, because the
    /// plugin socket paths under them must fit in 108 bytes), pod IPs from
    /// `10.244.<i>.0/24`; `configure` adjusts each node's config before start.
    /// If one fails, the ones already started are stopped again.
    pub async fn start(
        client: kube::Client,
        prefix: &str,
        count: usize,
        root_dir: &Path,
        mut configure: impl FnMut(&mut SimNodeConfig),
    ) -> Result<Self, NodeSimError> {
        let mut nodes = Vec::with_capacity(count);
        for i in 0..count {
            let name = format!("{prefix}-{i}");
            let mut cfg = SimNodeConfig::new(&name, root_dir.join(i.to_string()));
            cfg.pod_ip_base = Ipv4Addr::new(10, 244, (i % 256) as u8, 0);
            configure(&mut cfg);
            match SimNode::start(client.clone(), cfg).await {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    for n in nodes {
                        if let Err(stop_err) = n.stop().await {
                            warn!(error = %stop_err, "stopping node after failed start");
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(Self { nodes })
    }

    pub fn nodes(&self) -> &[SimNode] {
        &self.nodes
    }

    pub fn get(&self, name: &str) -> Option<&SimNode> {
        self.nodes.iter().find(|n| n.name() == name)
    }

    /// The nodes, for callers that manage them one by one from here on.
    pub fn into_nodes(self) -> Vec<SimNode> {
        self.nodes
    }

    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name().to_owned()).collect()
    }

    /// Stops every node; all are stopped even if one fails, and the first
    /// error is returned.
    pub async fn stop(self) -> Result<(), NodeSimError> {
        let mut first = None;
        for n in self.nodes {
            if let Err(e) = n.stop().await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
