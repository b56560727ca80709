//! Change notification for the plugin's observable state, so that waits wake on
//! every change instead of polling.
use std::time::Duration;

use tokio::sync::watch;

/// A wait that ran out of time.
#[derive(Debug, Clone, thiserror::Error)]
#[error("timed out after {timeout:?} waiting for {what}; last seen: {last_seen}")]
pub struct WaitTimeout {
    pub what: String,
    pub timeout: Duration,
    pub last_seen: String,
}

/// A counter bumped on every change of some state.
#[derive(Debug)]
pub(crate) struct Changes {
    tx: watch::Sender<u64>,
}

impl Default for Changes {
    fn default() -> Self {
        Self {
            tx: watch::Sender::new(0),
        }
    }
}

impl Changes {
    pub(crate) fn bump(&self) {
        self.tx.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver that sees every change made after this call.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }

    /// Re-evaluates `check` after every change until it yields a value.
    /// `check` returns `Err(description of what it saw)` while unsatisfied.
    pub(crate) async fn wait_until<T>(
        &self,
        what: impl FnOnce() -> String,
        timeout: Duration,
        mut check: impl FnMut() -> Result<T, String>,
    ) -> Result<T, WaitTimeout> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribing before the first check means no change can slip in
        // between the check and the wait.
        let mut rx = self.tx.subscribe();
        loop {
            let last_seen = match check() {
                Ok(v) => return Ok(v),
                Err(seen) => seen,
            };
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                // The sender lives as long as `self`, so this is unreachable
                // while we borrow it; treat it like a timeout all the same.
                Ok(Err(_)) | Err(_) => {
                    return Err(WaitTimeout {
                        what: what(),
                        timeout,
                        last_seen,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn wakes_on_change_and_reports_last_seen_on_timeout() {
        let changes = Arc::new(Changes::default());
        let value = Arc::new(AtomicU32::new(0));
        let waiter = {
            let (changes, value) = (changes.clone(), value.clone());
            tokio::spawn(async move {
                changes
                    .wait_until(
                        || "value 2".into(),
                        Duration::from_secs(30),
                        || match value.load(Ordering::SeqCst) {
                            2 => Ok(2),
                            v => Err(format!("value {v}")),
                        },
                    )
                    .await
            })
        };
        for v in 1..=2 {
            value.store(v, Ordering::SeqCst);
            changes.bump();
        }
        assert_eq!(waiter.await.unwrap().unwrap(), 2);

        let err = changes
            .wait_until(
                || "value 7".into(),
                Duration::from_millis(1),
                || Err::<(), _>("value 2".into()),
            )
            .await
            .unwrap_err();
        assert_eq!(err.what, "value 7");
        assert_eq!(err.last_seen, "value 2");
    }
}
