//! Round-trip time estimation per path (RFC 9002 §5): smoothed RTT, its
//! variation, and the minimum seen.

use std::time::Duration;

/// Used until the first sample, as QUIC does.
pub const INITIAL_RTT: Duration = Duration::from_millis(333);

#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    latest: Duration,
    smoothed: Option<Duration>,
    var: Duration,
    min: Duration,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator {
            latest: INITIAL_RTT,
            smoothed: None,
            var: INITIAL_RTT / 2,
            min: Duration::MAX,
        }
    }
}

impl RttEstimator {
    /// Takes one sample: `rtt` measured at the sender, `ack_delay` reported by
    /// the receiver (subtracted only when that keeps the sample above min).
    pub fn update(&mut self, rtt: Duration, ack_delay: Duration) {
        self.min = self.min.min(rtt);
        let adjusted = if rtt >= self.min + ack_delay {
            rtt - ack_delay
        } else {
            rtt
        };
        self.latest = adjusted;
        match self.smoothed {
            None => {
                self.smoothed = Some(adjusted);
                self.var = adjusted / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(adjusted);
                self.var = (self.var * 3 + diff) / 4;
                self.smoothed = Some((s * 7 + adjusted) / 8);
            }
        }
    }

    pub fn smoothed(&self) -> Duration {
        self.smoothed.unwrap_or(INITIAL_RTT)
    }

    pub fn latest(&self) -> Duration {
        self.latest
    }

    pub fn var(&self) -> Duration {
        self.var
    }

    /// The smallest sample, or the initial RTT before any.
    pub fn min(&self) -> Duration {
        if self.min == Duration::MAX {
            INITIAL_RTT
        } else {
            self.min
        }
    }

    pub fn has_samples(&self) -> bool {
        self.smoothed.is_some()
    }

    /// How long to wait for an acknowledgment before probing (RFC 9002 PTO).
    pub fn pto(&self, max_ack_delay: Duration) -> Duration {
        self.smoothed() + (self.var * 4).max(Duration::from_millis(1)) + max_ack_delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_tracks_min() {
        let mut r = RttEstimator::default();
        assert_eq!(r.smoothed(), INITIAL_RTT);
        r.update(Duration::from_millis(50), Duration::ZERO);
        assert_eq!(r.smoothed(), Duration::from_millis(50));
        for _ in 0..50 {
            r.update(Duration::from_millis(60), Duration::from_millis(5));
        }
        assert!(r.smoothed().abs_diff(Duration::from_millis(55)) < Duration::from_millis(1));
        assert_eq!(r.min(), Duration::from_millis(50));
    }
}
