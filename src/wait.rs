//! Waits with deadlines. Objects are watched; only things without a watch (a
//! plugin's in-process state) are polled, briefly. On timeout the error says
//! what was awaited and what was last seen.
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("timed out after {after:?} waiting for {what}; last seen: {last_seen}")]
    Timeout {
        what: String,
        after: Duration,
        last_seen: String,
    },
    #[error("{what}: {message}")]
    Failed { what: String, message: String },
    #[error("watching for {what}: {source}")]
    Watch {
        what: String,
        #[source]
        source: watcher::Error,
    },
}

tokio::task_local! {
    /// What the innermost wait of the current task last saw, for a caller
    /// whose own deadline (a step timeout) ends the wait before it can say.
    static PROGRESS: Progress;
}

/// Shared with [`with_progress`]: the latest "waiting for X; last seen: Y".
#[derive(Debug, Clone, Default)]
pub struct Progress(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl Progress {
    /// The last state a wait inside the scope reported, if any.
    pub fn last(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Runs `fut`; waits inside it record what they last saw in `progress`.
pub async fn with_progress<F: Future>(progress: Progress, fut: F) -> F::Output {
    PROGRESS.scope(progress, fut).await
}

fn note(what: &str, seen: &str) {
    let _ = PROGRESS.try_with(|p| {
        *p.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some(format!("waiting for {what}; last seen: {seen}"));
    });
}

/// The outcome of checking an observed state.
pub enum Check<T> {
    /// Done, with a value.
    Done(T),
    /// Not yet; the string describes what is seen now (for the timeout message).
    Pending(String),
    /// Can never succeed any more (for example a pod that must not be scheduled was).
    Fail(String),
}

/// Watches the object `name` until `check` is done, with a deadline. `check`
/// sees `None` while the object does not exist.
pub async fn object<K, T>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    mut check: impl FnMut(Option<&K>) -> Check<T>,
) -> Result<T, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    list(api, config, what, timeout, |items| check(items.first())).await
}

/// Watches objects of a list selection until `check` over the current set is done.
pub async fn list<K, T>(
    api: &Api<K>,
    config: watcher::Config,
    what: &str,
    timeout: Duration,
    mut check: impl FnMut(&[K]) -> Check<T>,
) -> Result<T, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    use kube::runtime::{WatchStreamExt as _, reflector};
    let (reader, writer) = reflector::store();
    // Backoff keeps a failing watch (apiserver restarting) from spinning.
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api.clone(), config).default_backoff(),
    );
    let mut stream = std::pin::pin!(stream);
    let deadline = Instant::now() + timeout;
    let mut last_seen = "nothing yet".to_owned();
    let mut initialized = false;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        match next {
            Err(_) => {
                return Err(WaitError::Timeout {
                    what: what.to_owned(),
                    after: timeout,
                    last_seen,
                });
            }
            Ok(None) => {
                return Err(WaitError::Failed {
                    what: what.to_owned(),
                    message: "watch ended".to_owned(),
                });
            }
            Ok(Some(Err(source))) => {
                // The watcher re-lists by itself after an error.
                tracing::debug!(%what, error = %source, "watch error, retrying");
                last_seen = format!("watch error: {source}");
                continue;
            }
            Ok(Some(Ok(event))) => {
                if matches!(event, watcher::Event::InitDone) {
                    initialized = true;
                }
                if !initialized {
                    continue;
                }
            }
        }
        let items: Vec<K> = reader.state().iter().map(|o| (**o).clone()).collect();
        match check(&items) {
            Check::Done(v) => return Ok(v),
            Check::Pending(seen) => {
                note(what, &seen);
                last_seen = seen;
            }
            Check::Fail(message) => {
                return Err(WaitError::Failed {
                    what: what.to_owned(),
                    message,
                });
            }
        }
    }
}

/// Polls `probe` every `interval` until it is done, with a deadline. For state
/// that has no watch, such as a plugin's call counters.
pub async fn poll<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut probe: F,
) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Check<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last_seen = match probe().await {
            Check::Done(v) => return Ok(v),
            Check::Pending(seen) => {
                note(what, &seen);
                seen
            }
            Check::Fail(message) => {
                return Err(WaitError::Failed {
                    what: what.to_owned(),
                    message,
                });
            }
        };
        if Instant::now() + interval > deadline {
            return Err(WaitError::Timeout {
                what: what.to_owned(),
                after: timeout,
                last_seen,
            });
        }
        tokio::time::sleep(interval).await;
    }
}

/// Checks that `probe` holds for the whole `duration` (upstream's
/// `Consistently`), polling every `interval`. Fails at the first violation.
pub async fn consistently<F, Fut>(
    what: &str,
    duration: Duration,
    interval: Duration,
    mut probe: F,
) -> Result<(), WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let end = Instant::now() + duration;
    loop {
        if let Err(message) = probe().await {
            return Err(WaitError::Failed {
                what: what.to_owned(),
                message,
            });
        }
        if Instant::now() >= end {
            return Ok(());
        }
        tokio::time::sleep(interval.min(end - Instant::now())).await;
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn progress_keeps_what_a_wait_last_saw_after_it_is_cut_off() {
        use super::*;
        let progress = Progress::default();
        let cut = tokio::time::timeout(
            Duration::from_millis(200),
            with_progress(
                progress.clone(),
                poll(
                    "the answer",
                    Duration::from_secs(60),
                    Duration::from_millis(10),
                    || async { Check::<()>::Pending("41".into()) },
                ),
            ),
        )
        .await;
        assert!(cut.is_err());
        assert_eq!(
            progress.last().as_deref(),
            Some("waiting for the answer; last seen: 41")
        );
        // Outside any scope, waits still work and record nothing.
        let r = poll(
            "x",
            Duration::from_millis(1),
            Duration::from_millis(1),
            || async { Check::<()>::Pending("y".into()) },
        )
        .await;
        assert!(r.is_err());
    }

    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn poll_reports_last_seen_on_timeout() {
        let err = poll(
            "the answer",
            Duration::from_secs(1),
            Duration::from_millis(100),
            || async { Check::<()>::Pending("41".into()) },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("waiting for the answer"), "{err}");
        assert!(err.contains("last seen: 41"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn poll_returns_value_once_done() {
        let n = AtomicU32::new(0);
        let v = poll(
            "three",
            Duration::from_secs(5),
            Duration::from_millis(10),
            || {
                let i = n.fetch_add(1, Ordering::SeqCst);
                async move {
                    if i >= 3 {
                        Check::Done(i)
                    } else {
                        Check::Pending(i.to_string())
                    }
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn consistently_fails_on_first_violation() {
        let n = AtomicU32::new(0);
        let err = consistently(
            "stable",
            Duration::from_secs(10),
            Duration::from_millis(100),
            || {
                let i = n.fetch_add(1, Ordering::SeqCst);
                async move {
                    if i < 5 {
                        Ok(())
                    } else {
                        Err(format!("changed at {i}"))
                    }
                }
            },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("changed at 5"), "{err}");
    }
}
