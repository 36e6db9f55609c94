//! When a server asks a new client to prove its address first (a
//! stateless Retry), and how long an unproven connection may live.
//!
//! A spoofed-source flood of Initials cannot answer a Retry, so behind
//! this gate it costs one keyed MAC and one 62-byte datagram per Initial,
//! and no state. Two triggers, either one enough:
//! * more than `retry_threshold` connections whose client has not yet
//!   proven its address (no authenticated packet yet);
//! * more than `retry_rate` unproven handshakes begun per second (a token
//!   bucket holding one second's worth): a Noise handshake costs
//!   Diffie-Hellman operations, and an IK server connection is keyed at
//!   once, so counting pending ones alone would let a flood of replayed
//!   valid Initials buy a DH each.
//!
//! Unproven connections older than the handshake timeout are closed.

use std::collections::VecDeque;
use std::time::Duration;

use super::ConnectionHandle;

#[derive(Clone, Debug)]
pub(crate) struct Admission {
    threshold: usize,
    rate: f64,
    tokens: f64,
    refilled_at: Duration,
    /// Connections begun without proof, oldest first, with when they expire.
    pub unproven: VecDeque<(Duration, ConnectionHandle)>,
}

impl Admission {
    pub fn new(threshold: usize, rate: u32) -> Admission {
        Admission {
            threshold,
            rate: f64::from(rate),
            tokens: f64::from(rate),
            refilled_at: Duration::ZERO,
            unproven: VecDeque::new(),
        }
    }

    fn refill(&mut self, now: Duration) {
        let dt = now.saturating_sub(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.rate.max(1.0));
        self.refilled_at = self.refilled_at.max(now);
    }

    /// Whether a client without a valid token must be sent a Retry, given
    /// how many unproven connections are still alive.
    pub fn must_retry(&mut self, now: Duration, unproven_alive: usize) -> bool {
        self.refill(now);
        unproven_alive >= self.threshold || self.tokens < 1.0
    }

    /// Records an unproven handshake begun at `now`, expiring at `expires`.
    pub fn begun(&mut self, h: ConnectionHandle, expires: Duration) {
        self.tokens -= 1.0;
        self.unproven.push_back((expires, h));
    }

    /// Spends a token without a connection (a handshake that failed).
    pub fn spend(&mut self) {
        self.tokens -= 1.0;
    }

    /// When the oldest unproven connection expires.
    pub fn next_expiry(&self) -> Option<Duration> {
        self.unproven.front().map(|&(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_rate_and_the_count_each_trigger_retry() {
        let mut a = Admission::new(3, 2);
        assert!(!a.must_retry(S, 0));
        a.begun(ConnectionHandle(0), 10 * S);
        assert!(!a.must_retry(S, 1));
        a.begun(ConnectionHandle(1), 10 * S);
        assert!(a.must_retry(S, 2), "two per second spent");
        assert!(!a.must_retry(2 * S, 2), "refilled");
        assert!(a.must_retry(2 * S, 3), "three unproven alive");
        assert_eq!(a.next_expiry(), Some(10 * S));
    }
}
