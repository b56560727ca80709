//! Watching the pods bound to a node and handing each to its worker; a
//! reconcile loop unprepares claims of pods that vanished unseen.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, warn};

use super::pod_worker::{NodeCtx, PodWorker};

struct Worker {
    tx: watch::Sender<Option<Arc<Pod>>>,
    task: JoinHandle<()>,
}

struct Dispatcher {
    ctx: Arc<NodeCtx>,
    tracker: TaskTracker,
    cancel: CancellationToken,
    workers: HashMap<String, Worker>,
    /// UIDs listed since the last watch restart.
    listing: Option<HashSet<String>>,
}

impl Dispatcher {
    fn apply(&mut self, pod: Pod) {
        let Some(uid) = pod.uid() else { return };
        if let Some(seen) = &mut self.listing {
            seen.insert(uid.clone());
        }
        let pod = Arc::new(pod);
        if let Some(w) = self.workers.get(&uid)
            && !w.task.is_finished()
        {
            w.tx.send_replace(Some(pod));
            return;
        }
        let (tx, rx) = watch::channel(Some(pod.clone()));
        let worker = PodWorker::new(self.ctx.clone(), &pod, rx, self.cancel.child_token());
        let span = tracing::info_span!("pod", pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()));
        let task = self.tracker.spawn(worker.run().instrument(span));
        self.workers.insert(uid, Worker { tx, task });
    }

    fn gone(&mut self, uid: &str) {
        if let Some(w) = self.workers.get(uid) {
            w.tx.send_replace(None);
        }
    }

    fn relisted(&mut self) {
        let Some(seen) = self.listing.take() else {
            return;
        };
        // Pods deleted while the watch was down show up only as missing here.
        let missing: Vec<String> = self
            .workers
            .keys()
            .filter(|uid| !seen.contains(*uid))
            .cloned()
            .collect();
        for uid in missing {
            self.gone(&uid);
        }
    }

    /// Forgets finished workers and unprepares for pods no worker owns.
    async fn reconcile(&mut self) {
        self.workers.retain(|_, w| !w.task.is_finished());
        for uid in self.ctx.dra.pods_with_claims() {
            if self.workers.contains_key(&uid) {
                continue;
            }
            debug!(pod_uid = %uid, "unpreparing claims of a vanished pod");
            let result = tokio::select! {
                _ = self.cancel.cancelled() => return,
                r = self.ctx.dra.unprepare_pod(&uid) => r,
            };
            if let Err(e) = result {
                warn!(pod_uid = %uid, error = %e, "unprepare for vanished pod failed, will retry");
            }
        }
    }
}

/// Runs until `cancel`: watches pods with `spec.nodeName=<node>`.
pub async fn run(
    ctx: Arc<NodeCtx>,
    tracker: TaskTracker,
    cancel: CancellationToken,
    reconcile_period: Duration,
) {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.node));
    let mut events = watcher(api, cfg).default_backoff().boxed();
    let mut d = Dispatcher {
        ctx,
        tracker,
        cancel: cancel.clone(),
        workers: HashMap::new(),
        listing: None,
    };
    let mut tick = tokio::time::interval(reconcile_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The watch breaks when the API server restarts (its stream ends, or
    // its resource version expired: 410 Gone), and the watcher lists
    // again: worth a warning only when it goes on.
    let mut failing = dra_e2e_conn::persisting::Persisting::default();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => d.reconcile().await,
            ev = events.next() => match ev {
                Some(Err(e)) => {
                    if failing.worth_a_warning(std::time::Instant::now()) {
                        warn!(error = %e, "watching pods keeps failing, retrying");
                    } else {
                        tracing::debug!(error = %e, "watching pods failed, retrying");
                    }
                }
                Some(Ok(ev)) => {
                    failing.ended();
                    d.event(ev);
                }
                None => break,
            }
        }
    }
}

impl Dispatcher {
    fn event(&mut self, ev: watcher::Event<Pod>) {
        match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => self.apply(p),
            watcher::Event::Delete(p) => {
                if let Some(uid) = p.uid() {
                    self.gone(&uid);
                }
            }
            watcher::Event::Init => self.listing = Some(HashSet::new()),
            watcher::Event::InitDone => self.relisted(),
        }
    }
}
