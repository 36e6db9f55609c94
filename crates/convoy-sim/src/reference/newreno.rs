//! NewReno's congestion avoidance: one packet per round trip, halve on loss.

use std::time::Duration;

use super::{Growth, MSS};

#[derive(Clone)]
pub struct NewReno;

impl Growth for NewReno {
    const NAME: &'static str = "newreno";

    fn grow(&mut self, cwnd: u64, acked: u64, _now: Duration, _srtt: Duration) -> u64 {
        // MSS × acked / cwnd per acknowledgment adds one MSS per window.
        cwnd + (MSS * acked / cwnd.max(1)).max(1)
    }

    fn reduce(&mut self, cwnd: u64, _now: Duration) -> u64 {
        cwnd / 2
    }
}
