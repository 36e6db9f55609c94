//! Cubic's congestion avoidance (RFC 9438): after a loss the window follows
//! W(t) = C·(t − K)³ + W_max, a plateau around the window where the loss
//! happened, with the Reno-friendly estimate as a floor.

use std::time::Duration;

use super::{Growth, MSS};

const C: f64 = 0.4;
const BETA: f64 = 0.7;

#[derive(Clone, Default)]
pub struct Cubic {
    /// Window at the last reduction, in MSS.
    w_max: f64,
    /// When congestion avoidance began after it, and the cubic's K there.
    epoch: Option<(Duration, f64)>,
    /// The Reno-friendly window estimate, in MSS.
    w_est: f64,
}

impl Growth for Cubic {
    const NAME: &'static str = "cubic";

    fn grow(&mut self, cwnd: u64, acked: u64, now: Duration, srtt: Duration) -> u64 {
        let w = cwnd as f64 / MSS as f64;
        let (start, k) = *self.epoch.get_or_insert_with(|| {
            // First growth since slow start or a reduction.
            self.w_est = w;
            if self.w_max < w {
                self.w_max = w;
            }
            (now, ((self.w_max - w) / C).cbrt())
        });
        let t = (now.saturating_sub(start) + srtt).as_secs_f64();
        let target = C * (t - k).powi(3) + self.w_max;
        // Reno-friendly region: grows by 3(1 − β)/(1 + β) MSS per window.
        let acked_mss = acked as f64 / MSS as f64;
        self.w_est += 3.0 * (1.0 - BETA) / (1.0 + BETA) * acked_mss / w;
        let next = if target < self.w_est {
            self.w_est
        } else {
            // Approach the target within one RTT, at most 1.5× per window.
            let target = target.min(1.5 * w);
            w + (target - w).max(0.0) * acked_mss / w
        };
        (next * MSS as f64) as u64
    }

    fn reduce(&mut self, cwnd: u64, _now: Duration) -> u64 {
        let w = cwnd as f64 / MSS as f64;
        // Fast convergence: losing below the last maximum means another
        // flow arrived, so give it room.
        self.w_max = if w < self.w_max {
            w * (1.0 + BETA) / 2.0
        } else {
            w
        };
        self.epoch = None;
        (w * BETA * MSS as f64) as u64
    }
}
