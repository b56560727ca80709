//! When a retried failure is worth a warning. The runner's reconnecting
//! parts (the simulated kubelet's plugin registration, the real nodes'
//! proxy dialling) fail on purpose within scenarios: a plugin stopped,
//! GetInfo made to fail, a socket blocked, a kubelet or container runtime
//! restarted under them, each ended by the scenario's own steps within
//! seconds. Those retries are shown at `-v` only; a failure still going on
//! after a minute is one nothing ends, and warns, once a minute. A count of
//! failures would not do: fast first retries reach any small count within a
//! scenario.
use std::time::{Duration, Instant};

/// How long a failure may go on before it is worth a warning.
pub const QUIET_FOR: Duration = Duration::from_secs(60);

/// One run of failures: when it began and how many warnings it gave.
#[derive(Debug, Default)]
pub struct Persisting {
    since: Option<Instant>,
    warned: u32,
}

impl Persisting {
    /// Whether the failure at `now` is shown as a warning: once the run
    /// has lasted [`QUIET_FOR`], then once per further [`QUIET_FOR`], so a
    /// failure that never ends is seen without one line per retry.
    pub fn worth_a_warning(&mut self, now: Instant) -> bool {
        let since = *self.since.get_or_insert(now);
        let due = QUIET_FOR * (self.warned + 1);
        if now.duration_since(since) >= due {
            self.warned += 1;
            true
        } else {
            false
        }
    }

    /// Whether a run of failures is going on.
    pub fn is_failing(&self) -> bool {
        self.since.is_some()
    }

    /// The failure ended: the next one starts a new run.
    pub fn ended(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_a_scenario_causes_are_quiet_and_one_that_never_ends_warns() {
        let start = Instant::now();
        let mut failing = Persisting::default();
        // A kubelet's retries: fast at first, then every few seconds, for
        // four minutes.
        let warned: Vec<u64> = (0..=240u64)
            .filter(|s| *s < 10 || s % 7 == 0)
            .filter(|s| failing.worth_a_warning(start + Duration::from_secs(*s)))
            .collect();
        assert_eq!(
            warned,
            vec![63, 126, 182],
            "a warning a minute, none before"
        );
        // A scenario's deliberate failures, over within a minute: quiet.
        let mut brief = Persisting::default();
        assert!((0..50u64).all(|s| !brief.worth_a_warning(start + Duration::from_secs(s))));
        // Ended and failing again: a new minute of quiet.
        failing.ended();
        assert!(!failing.is_failing());
        assert!(!failing.worth_a_warning(start + Duration::from_secs(300)));
        assert!(failing.is_failing());
    }
}
