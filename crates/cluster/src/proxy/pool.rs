//! A listener made of connections dialled ahead of time.
//!
//! The agent pairs a kubelet's unix connection with a TCP connection that is
//! already waiting in its accept queue; dialling only once the kubelet shows up
//! would blow the kubelet's 1 s GetInfo deadline on a port-forward. So the pool
//! keeps up to `slots` connections open, each waiting for its peer with no
//! deadline, and refills freed slots on a short tick.
//!
//! A connection is handed to the server only once its peer has sent a first
//! byte. That way the pool itself notices connections that die unused (EOF,
//! port-forward error) and replaces them, and the server never sits on an idle
//! connection that a handshake or header-read timeout could cut.
//!
//! Whoever owns the far end (the agent process) reports its loss through
//! [`PreDialled::far_end`]: the [`Incoming`] then yields an error saying why,
//! so whoever serves the socket learns at once that kubelet connections are
//! lost, instead of seeing nothing arrive.
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, warn};

use super::transport::{DialError, Dialled, Transport};
use dra_e2e_conn::{Conn, Incoming};

/// How the pool dials.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Connections open at once, waiting or in use.
    pub slots: usize,
    /// How often freed slots are refilled.
    pub refill_interval: Duration,
    /// Dials per tick at most; more only churns the agent's queue.
    pub dials_per_tick: usize,
    /// Upper bound for one dial, so a hung upgrade cannot stall the pool.
    pub dial_timeout: Duration,
    /// Pause before asking the transport again after it was not ready.
    pub not_ready_retry: Duration,
    /// Dials in the pool's whole life; `None`, for as long as it runs. A
    /// limit is a pool broken on purpose (`--node-host-fault no-redial`).
    pub max_dials: Option<u64>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            slots: 10,
            refill_interval: Duration::from_millis(100),
            dials_per_tick: 1,
            dial_timeout: Duration::from_secs(30),
            not_ready_retry: Duration::from_secs(1),
            max_dials: None,
        }
    }
}

/// Counters and gauges of one pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Dials that produced a connection.
    pub dialled: u64,
    /// Dials that failed outright.
    pub dial_failures: u64,
    /// Connections that ended before any byte arrived; each one was replaced.
    pub dead_before_use: u64,
    /// Of those, connections the far end's address refused: nothing
    /// listened there (the agent is gone).
    pub refused: u64,
    /// Connections handed to the server.
    pub handed_out: u64,
    /// Open connections still waiting for their peer.
    pub waiting: usize,
    /// Connections handed out and not yet closed.
    pub in_use: usize,
    /// Times the far end was lost (see [`FarEnd::lost`]).
    pub far_end_lost: u64,
    /// Why the far end was lost the last time.
    pub broken: Option<String>,
}

/// Controls a running pool; its connections come out of the [`Incoming`]
/// returned by [`PreDialled::start`].
///
/// Dropping the `Incoming` (the server stopped) or the `PreDialled` stops the
/// pool and closes every connection; [`PreDialled::shutdown`] also waits for it.
#[derive(Debug)]
pub struct PreDialled {
    target: String,
    slots: usize,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    refill: Option<JoinHandle<()>>,
    waiters: TaskTracker,
}

struct Shared {
    semaphore: Arc<Semaphore>,
    ready: Mutex<VecDeque<Conn>>,
    ready_notify: Notify,
    stats: watch::Sender<PoolStats>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("stats", &*self.stats.borrow())
            .finish()
    }
}

/// How long shutdown waits for the server to let go of closed connections.
const RELEASE_GRACE: Duration = Duration::from_secs(5);

impl PreDialled {
    /// Starts dialling through `transport` and returns the pool plus the
    /// connection source to serve from. Must be called inside a tokio runtime.
    pub fn start(transport: Arc<dyn Transport>, config: PoolConfig) -> (PreDialled, Incoming) {
        let slots = config.slots.max(1);
        let target = transport.target();
        let shared = Arc::new(Shared {
            semaphore: Arc::new(Semaphore::new(slots)),
            ready: Mutex::new(VecDeque::new()),
            ready_notify: Notify::new(),
            stats: watch::Sender::new(PoolStats::default()),
        });
        let cancel = CancellationToken::new();
        let waiters = TaskTracker::new();
        let span = tracing::info_span!("pool", target = %target);
        let refill = tokio::spawn(
            refill_loop(
                transport,
                config,
                shared.clone(),
                cancel.clone(),
                waiters.clone(),
            )
            .instrument(span),
        );
        let incoming = incoming(shared.clone(), cancel.clone());
        let pool = PreDialled {
            target,
            slots,
            shared,
            cancel,
            refill: Some(refill),
            waiters,
        };
        (pool, incoming)
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    pub fn stats(&self) -> PoolStats {
        self.shared.stats.borrow().clone()
    }

    /// Why the far end was lost the last time, if it was.
    pub fn broken(&self) -> Option<String> {
        self.shared.stats.borrow().broken.clone()
    }

    /// A handle for the owner of the far end to report its loss.
    pub fn far_end(&self) -> FarEnd {
        FarEnd {
            shared: self.shared.clone(),
        }
    }

    /// A receiver that sees every change of the stats.
    pub fn subscribe(&self) -> watch::Receiver<PoolStats> {
        self.shared.stats.subscribe()
    }

    /// Waits until `cond` holds for the stats, at most `deadline`. On timeout
    /// returns the last stats seen.
    pub async fn wait_for(
        &self,
        cond: impl Fn(&PoolStats) -> bool,
        deadline: Duration,
    ) -> Result<PoolStats, PoolStats> {
        let mut rx = self.subscribe();
        match tokio::time::timeout(deadline, rx.wait_for(|s| cond(s))).await {
            Ok(Ok(s)) => Ok(s.clone()),
            _ => Err(self.stats()),
        }
    }

    /// Stops dialling and closes every connection: waiting ones, queued ones,
    /// and those the server is using.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.refill.take() {
            let _ = task.await;
        }
        self.waiters.close();
        self.waiters.wait().await;
        self.shared
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // Connections in the server's hands let go of their slot on their next
        // poll, which the cancellation wakes.
        let all = u32::try_from(self.slots).unwrap_or(u32::MAX);
        if tokio::time::timeout(RELEASE_GRACE, self.shared.semaphore.acquire_many(all))
            .await
            .is_err()
        {
            warn!(target = %self.target, stats = ?self.stats(), "connections still open after shutdown");
        }
        info!(target = %self.target, stats = ?self.stats(), "pool shut down");
    }
}

impl Drop for PreDialled {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Reports the loss of a pool's far end (see [`PreDialled::far_end`]).
#[derive(Debug, Clone)]
pub struct FarEnd {
    shared: Arc<Shared>,
}

impl FarEnd {
    /// The far end was lost (an agent process exited): the pool's
    /// [`Incoming`] yields an error with `reason`, once per call, after the
    /// connections already handed over. Dialling goes on, so a far end that
    /// comes back at the same address is used again.
    pub fn lost(&self, reason: String) {
        warn!("kubelet connections are lost: {reason}");
        self.shared.stats.send_modify(|s| {
            s.far_end_lost += 1;
            s.broken = Some(reason);
        });
        self.shared.ready_notify.notify_one();
    }
}

fn incoming(shared: Arc<Shared>, cancel: CancellationToken) -> Incoming {
    // Dropping the stream means the server stopped: stop the pool with it.
    let guard = cancel.clone().drop_guard();
    Box::pin(futures::stream::unfold(
        (shared, cancel, guard, 0u64),
        |(shared, cancel, guard, mut reported)| async move {
            let item = loop {
                let notified = shared.ready_notify.notified();
                tokio::pin!(notified);
                // Registered before looking, so a push in between is not missed.
                notified.as_mut().enable();
                let next = shared
                    .ready
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pop_front();
                if let Some(conn) = next {
                    break Ok(conn);
                }
                let (lost, reason) = {
                    let stats = shared.stats.borrow();
                    (stats.far_end_lost, stats.broken.clone())
                };
                if lost > reported {
                    reported = lost;
                    let reason = reason.unwrap_or_else(|| "the far end was lost".to_owned());
                    break Err(io::Error::new(io::ErrorKind::NotConnected, reason));
                }
                tokio::select! {
                    _ = cancel.cancelled() => return None,
                    _ = notified => {}
                }
            };
            Some((item, (shared, cancel, guard, reported)))
        },
    ))
}

async fn refill_loop(
    transport: Arc<dyn Transport>,
    config: PoolConfig,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    waiters: TaskTracker,
) {
    if !wait_ready(&*transport, &config, &cancel).await {
        return;
    }
    let target = transport.target();
    let mut tick = tokio::time::interval(config.refill_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = dra_e2e_conn::persisting::Persisting::default();
    let mut seq: u64 = 0;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        for _ in 0..config.dials_per_tick.max(1) {
            if config.max_dials.is_some_and(|max| seq >= max) {
                break;
            }
            let Ok(permit) = shared.semaphore.clone().try_acquire_owned() else {
                break;
            };
            let dialled = tokio::select! {
                _ = cancel.cancelled() => return,
                r = tokio::time::timeout(config.dial_timeout, transport.dial()) => r,
            };
            let io = match dialled {
                Ok(Ok(io)) => io,
                failed => {
                    let error = match failed {
                        Ok(Err(e)) => e,
                        _ => DialError::Timeout {
                            target: target.clone(),
                            timeout: config.dial_timeout,
                        },
                    };
                    shared.stats.send_modify(|s| s.dial_failures += 1);
                    // A scenario's node operation makes dialling fail for
                    // seconds: shown at -v; a minute of it warns.
                    let first = !failing.is_failing();
                    if failing.worth_a_warning(std::time::Instant::now()) {
                        warn!(%error, "dial keeps failing (for over a minute); retrying every tick");
                    } else if first {
                        info!(%error, "dial failed; retrying every tick");
                    } else {
                        debug!(%error, "dial failed again");
                    }
                    drop(permit);
                    if !wait_ready(&*transport, &config, &cancel).await {
                        return;
                    }
                    break;
                }
            };
            if failing.is_failing() {
                info!("dialling works again");
                failing.ended();
            }
            seq += 1;
            shared.stats.send_modify(|s| {
                s.dialled += 1;
                s.waiting += 1;
            });
            let peer = format!("{target} #{seq}");
            waiters.spawn(
                wait_for_peer(io, peer, permit, shared.clone(), cancel.clone())
                    .instrument(tracing::Span::current()),
            );
        }
    }
}

/// Returns false if the pool was cancelled first.
async fn wait_ready(
    transport: &dyn Transport,
    config: &PoolConfig,
    cancel: &CancellationToken,
) -> bool {
    let mut waiting = dra_e2e_conn::persisting::Persisting::default();
    loop {
        let r = tokio::select! {
            _ = cancel.cancelled() => return false,
            r = transport.ready() => r,
        };
        match r {
            Ok(()) => return true,
            // As dialling: seconds of it are a scenario's doing.
            Err(e) => {
                let first = !waiting.is_failing();
                if waiting.worth_a_warning(std::time::Instant::now()) {
                    warn!(error = %e, "transport still not ready after a minute; waiting");
                } else if first {
                    info!(error = %e, "transport not ready; waiting");
                } else {
                    debug!(error = %e, "transport still not ready");
                }
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = tokio::time::sleep(config.not_ready_retry) => {}
        }
    }
}

const FIRST_READ: usize = 16 * 1024;

async fn wait_for_peer(
    mut io: Dialled,
    peer: String,
    permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let mut buf = BytesMut::zeroed(FIRST_READ);
    let read = tokio::select! {
        _ = cancel.cancelled() => {
            shared.stats.send_modify(|s| s.waiting -= 1);
            return;
        }
        r = io.read(&mut buf) => r,
    };
    match read {
        Ok(n) if n > 0 => {
            buf.truncate(n);
            shared.stats.send_modify(|s| {
                s.waiting -= 1;
                s.handed_out += 1;
                s.in_use += 1;
            });
            debug!(%peer, "peer arrived; handing the connection to the server");
            let slot = Slot {
                _permit: permit,
                shared: shared.clone(),
            };
            let pooled = PooledIo {
                inner: Some((io, slot)),
                first: buf,
                cancelled: Box::pin(cancel.cancelled_owned()),
            };
            shared
                .ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(Conn::new(pooled, peer));
            shared.ready_notify.notify_one();
        }
        other => {
            let refused = matches!(&other, Err(e) if is_refusal(e));
            shared.stats.send_modify(|s| {
                s.waiting -= 1;
                s.dead_before_use += 1;
                s.refused += u64::from(refused);
            });
            match other {
                Err(e) => debug!(%peer, error = %e, "connection failed before use; replacing it"),
                _ => debug!(%peer, "connection ended before use; replacing it"),
            }
        }
    }
}

/// Whether a connection failed because nothing listens at the far end: a
/// refused connect, as a local dial or a port-forward's error channel
/// ("dial tcp [::1]:9001: connect: connection refused") reports it.
fn is_refusal(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionRefused || e.to_string().contains("connection refused")
}

/// A slot taken by a handed-out connection; dropping it frees the slot.
struct Slot {
    _permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.stats.send_modify(|s| s.in_use -= 1);
    }
}

/// A handed-out connection: replays the bytes read while waiting, and closes
/// itself when the pool shuts down.
struct PooledIo {
    inner: Option<(Dialled, Slot)>,
    first: BytesMut,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl PooledIo {
    /// Drops the underlying connection once the pool is cancelled; true if closed.
    fn closed(&mut self, cx: &mut Context<'_>) -> bool {
        if self.inner.is_some() && self.cancelled.as_mut().poll(cx).is_ready() {
            self.inner = None;
        }
        self.inner.is_none()
    }
}

impl AsyncRead for PooledIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.closed(cx) {
            return Poll::Ready(Ok(()));
        }
        if !self.first.is_empty() {
            let n = self.first.len().min(buf.remaining());
            buf.put_slice(&self.first[..n]);
            self.first.advance(n);
            return Poll::Ready(Ok(()));
        }
        match self.inner.as_mut() {
            Some((io, _)) => Pin::new(io).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "pre-dialled pool shut down")
}

impl AsyncWrite for PooledIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.closed(cx) {
            return Poll::Ready(Err(closed_error()));
        }
        match self.inner.as_mut() {
            Some((io, _)) => Pin::new(io).poll_write(cx, buf),
            None => Poll::Ready(Err(closed_error())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.inner.as_mut() {
            Some((io, _)) => Pin::new(io).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.inner.as_mut() {
            Some((io, _)) => Pin::new(io).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}
