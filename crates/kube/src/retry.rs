//! The one retry policy of the house: what is tried again, how long, and
//! with which pauses.
//!
//! Two kinds of failure are tried again, and nothing else:
//!
//! - **conflicts** (409) of a read-modify-write, which another writer
//!   caused between the read and the write: read again and write again
//!   ([`Retry::CONFLICTS`], through [`Retry::run`]; the updates of
//!   [`crate::dynamic`], a node's taint);
//! - **transient failures of the API server**: a connection that could not
//!   be made or broke, 429 Too Many Requests (after its `Retry-After`),
//!   500, 502, 503 and 504 ([`Retry::TRANSIENT`]). Every request of every
//!   client the runner builds for scenarios goes through them, in
//!   [`crate::client`]: the API server restarting (and, on the local
//!   cluster, the scheduler or controller-manager with it) costs the
//!   scenarios in flight a few seconds, not their result. Which request is
//!   tried again on which failure is [`crate::client::Failure`]'s to say;
//!   a watch that breaks is started again by kube-runtime's watcher, with
//!   its own backoff, inside the wait's deadline ([`crate::wait::list`]).
//!
//! - **a kubelet that does not know a pod yet**: exec into a pod the API
//!   server has bound to a node whose kubelet has just started answers 404
//!   `pod does not exist` from the kubelet until it has seen the pod again
//!   ([`is_pod_unknown_to_kubelet`], with [`Retry::TRANSIENT`]'s deadline).
//!   The API server's own 404 for a pod (`pods "x" not found`) is final.
//!
//! Any other answer (a 422, a 403, a 404) is final at once: it is what
//! Kubernetes decided, and trying again would only hide it.
//!
//! One shape for both: a **deadline**, not a number of tries, with pauses
//! that start short and double up to a limit. How many tries a failure
//! takes depends on the other side (a controller writing a status in
//! bursts, an API server that takes 5 s or 20 s to start), not on this one;
//! a count of tries is used up in milliseconds while the other side is
//! busy, and bounds nothing when each try is slow. A deadline bounds the
//! time, as every wait here is bounded. The pauses start short because most
//! failures are one moment's (a write that came first, a connection
//! refused while the server binds its port); they double so that a busy
//! server is not hammered, and are capped so that the first try after the
//! server is back comes soon. Transient pauses get client-go's jitter (a
//! random part added, `wait.Jitter`), so that the many requests a restart
//! breaks at once do not all come back in the same instant; conflict
//! pauses have none, each update retries its own object.
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How a failure that may go away is tried again: pauses from
/// `first_pause`, doubling up to `longest_pause`, each with up to `jitter`
/// of itself added at random; no try starts after `within`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retry {
    /// No try starts after this much time since the first one.
    pub within: Duration,
    /// The pause after the first failure; it doubles after each one.
    pub first_pause: Duration,
    /// The longest pause (before jitter).
    pub longest_pause: Duration,
    /// Up to this fraction of each pause is added at random (client-go's
    /// `wait.Backoff.Jitter`); 0 for none.
    pub jitter: f64,
}

impl Retry {
    /// Conflicts of updates: 30 s (upstream's default `Eventually`, and
    /// well inside a step's timeout), pauses from 50 ms to 1 s.
    pub const CONFLICTS: Retry = Retry {
        within: Duration::from_secs(30),
        first_pause: Duration::from_millis(50),
        longest_pause: Duration::from_secs(1),
        jitter: 0.0,
    };

    /// Transient failures of the API server: 60 s, as long as a restarted
    /// API server takes to serve again with room to spare (5 to 10 s on the
    /// local cluster, more on a loaded machine) and still inside a step's
    /// timeout; pauses from 250 ms to 4 s with 20 % jitter (client-go
    /// starts its reflector's at 800 ms with a factor of 2 and a jitter of
    /// 1.0; a request waits less long, there being a step behind it).
    pub const TRANSIENT: Retry = Retry {
        within: Duration::from_secs(60),
        first_pause: Duration::from_millis(250),
        longest_pause: Duration::from_secs(4),
        jitter: 0.2,
    };

    /// The pauses of one operation, from now.
    pub fn pauses(&self) -> Pauses {
        Pauses {
            policy: *self,
            deadline: Instant::now() + self.within,
            next: self.first_pause,
        }
    }

    /// Runs `attempt` until it returns anything but an error that
    /// `retried` says is to be tried again, or until no pause fits before
    /// the deadline; then returns the last error.
    pub async fn run<T, E, F, Fut>(
        &self,
        retried: impl Fn(&E) -> bool,
        mut attempt: F,
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut pauses = self.pauses();
        loop {
            match attempt().await {
                Err(e) if retried(&e) => match pauses.next(None) {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => return Err(e),
                },
                other => return other,
            }
        }
    }
}

/// The pauses between the tries of one operation, and its deadline.
#[derive(Debug, Clone)]
pub struct Pauses {
    policy: Retry,
    deadline: Instant,
    next: Duration,
}

impl Pauses {
    /// The pause before the next try, or `None` when the try would start
    /// after the deadline. `asked` is a pause the server asked for (a
    /// `Retry-After`): it is taken instead of the policy's own.
    pub fn next(&mut self, asked: Option<Duration>) -> Option<Duration> {
        let own = self.next;
        self.next = (self.next * 2).min(self.policy.longest_pause);
        let pause = match asked {
            Some(asked) => asked,
            None if self.policy.jitter > 0.0 => {
                use tower::util::rng::{HasherRng, Rng as _};
                own.mul_f64(1.0 + self.policy.jitter * HasherRng::new().next_f64())
            }
            None => own,
        };
        let at = Instant::now().checked_add(pause)?;
        (at <= self.deadline).then_some(pause)
    }

    /// How long the operation may take in all.
    pub fn within(&self) -> Duration {
        self.policy.within
    }
}

/// Whether an exec or attach was refused by the node's kubelet because it
/// does not know the pod (yet): a 404 whose message is the kubelet's, not
/// the API server's `pods "<name>" not found`.
pub fn is_pod_unknown_to_kubelet(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 && s.message == "pod does not exist")
}

/// Whether the API refused a write as a conflict (409).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    fn api_error(code: u16) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(
            json!({"code": code, "message": "the object has been modified", "reason": "Conflict"}),
        )
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    fn conflict() -> kube::Error {
        api_error(409)
    }

    const POLICY: Retry = Retry {
        within: Duration::from_secs(1),
        first_pause: Duration::from_millis(50),
        longest_pause: Duration::from_millis(200),
        jitter: 0.0,
    };

    #[test]
    fn only_the_kubelets_404_for_a_pod_is_the_kubelet_catching_up() {
        let answer = |code: u16, message: &str| {
            let status: kube::core::Status =
                serde_json::from_value(json!({"code": code, "message": message})).unwrap();
            kube::Error::Api(Box::new(status))
        };
        assert!(is_pod_unknown_to_kubelet(&answer(
            404,
            "pod does not exist"
        )));
        assert!(!is_pod_unknown_to_kubelet(&answer(
            404,
            "pods \"tester-1\" not found"
        )));
        assert!(!is_pod_unknown_to_kubelet(&answer(
            500,
            "pod does not exist"
        )));
        assert!(!is_pod_unknown_to_kubelet(&conflict()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflict_is_tried_again_after_a_pause() {
        let tries = Cell::new(0);
        let start = Instant::now();
        let r: Result<u32, kube::Error> = POLICY
            .run(is_conflict, || async {
                tries.set(tries.get() + 1);
                if tries.get() < 3 {
                    Err(conflict())
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(tries.get(), 3);
        // Paused 50 ms, then 100 ms (the clock is tokio's paused one).
        assert_eq!(start.elapsed(), Duration::from_millis(150));
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_that_go_on_end_at_the_deadline_with_the_last_one() {
        let tries = Cell::new(0);
        let start = Instant::now();
        let r: Result<(), kube::Error> = POLICY
            .run(is_conflict, || async {
                tries.set(tries.get() + 1);
                Err(conflict())
            })
            .await;
        assert!(is_conflict(&r.unwrap_err()));
        // Pauses of 50, 100, 200, 200, 200, 200 ms: the next would pass 1 s.
        assert_eq!(tries.get(), 7);
        assert_eq!(start.elapsed(), Duration::from_millis(950));
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_are_not_tried_again() {
        let tries = Cell::new(0);
        let r: Result<(), kube::Error> = POLICY
            .run(is_conflict, || async {
                tries.set(tries.get() + 1);
                Err(api_error(500))
            })
            .await;
        assert!(!is_conflict(&r.unwrap_err()));
        assert_eq!(tries.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_adds_at_most_its_fraction_and_the_cap_holds() {
        let mut pauses = Retry::TRANSIENT.pauses();
        let mut total = Duration::ZERO;
        let mut own = Retry::TRANSIENT.first_pause;
        while let Some(p) = pauses.next(None) {
            assert!(p >= own && p <= own.mul_f64(1.2), "{p:?} for {own:?}");
            own = (own * 2).min(Retry::TRANSIENT.longest_pause);
            total += p;
            tokio::time::advance(p).await;
        }
        // Pauses stop once the next would start after 60 s.
        assert!(total <= Duration::from_secs(60), "{total:?}");
        assert!(total > Duration::from_secs(50), "{total:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_the_server_asks_for_is_taken_unless_it_passes_the_deadline() {
        let mut pauses = POLICY.pauses();
        assert_eq!(
            pauses.next(Some(Duration::from_millis(700))),
            Some(Duration::from_millis(700))
        );
        tokio::time::advance(Duration::from_millis(700)).await;
        assert_eq!(pauses.next(Some(Duration::from_millis(400))), None);
        assert_eq!(pauses.next(Some(Duration::MAX)), None);
    }
}
