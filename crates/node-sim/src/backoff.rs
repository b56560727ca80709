//! Exponential retry delays.
use std::time::Duration;

/// Doubling delays from `initial` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max }
    }

    /// A fresh sequence of delays.
    pub fn delays(self) -> Delays {
        Delays {
            next: self.initial,
            max: self.max,
        }
    }
}

/// The delays of one retry sequence.
#[derive(Debug, Clone)]
pub struct Delays {
    next: Duration,
    max: Duration,
}

impl Delays {
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next.min(self.max);
        self.next = (self.next * 2).min(self.max);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_max() {
        let mut d = Backoff::new(Duration::from_millis(100), Duration::from_millis(350)).delays();
        let got: Vec<_> = (0..4).map(|_| d.next_delay().as_millis()).collect();
        assert_eq!(got, vec![100, 200, 350, 350]);
    }
}
