//! Loss-based reference controllers, NewReno (RFC 5681/6582) and Cubic
//! (RFC 9438), on convoy's rate-controller trait.
//!
//! They exist so simulations can put convoy's controllers beside the
//! behaviour TCP is known for (filling a deep buffer, halving on random
//! loss) with everything else equal. They never stand in for kernel TCP in
//! comparisons: those run the real kernel in the emulator.
//!
//! Both share the window machinery here: slow start until the first loss,
//! one window reduction per loss episode (a loss of a packet sent before
//! the episode began is part of it), and unpaced sending, as TCP without
//! fq pacing does. Only the congestion-avoidance growth and the reduction
//! differ, behind [`Growth`].

mod cubic;
mod newreno;
pub mod oracle;

use std::time::Duration;

use convoy_proto::cc::{AckEvent, RateController};
use convoy_proto::recovery::SentPacket;
use convoy_proto::RateControl;

pub use cubic::Cubic;
pub use newreno::NewReno;
pub use oracle::{oracle, Oracle};

/// Full-sized packet, bytes (the proto's default maximum datagram).
pub const MSS: u64 = 1472;
const INITIAL_WINDOW: u64 = 10 * MSS;
const MIN_WINDOW: u64 = 2 * MSS;

/// How a loss-based controller grows in congestion avoidance and backs off.
pub trait Growth: Send + Clone + 'static {
    const NAME: &'static str;
    /// The window after `acked` bytes were acknowledged at `now`.
    fn grow(&mut self, cwnd: u64, acked: u64, now: Duration, srtt: Duration) -> u64;
    /// The window (and slow-start threshold) after a loss episode starts.
    fn reduce(&mut self, cwnd: u64, now: Duration) -> u64;
}

/// A window-based, loss-driven controller.
#[derive(Clone)]
pub struct LossWindow<G: Growth> {
    growth: G,
    cwnd: u64,
    ssthresh: u64,
    /// Packets sent before this time belong to the current loss episode.
    episode_start: Option<Duration>,
    srtt: Duration,
}

impl<G: Growth> LossWindow<G> {
    pub fn with_growth(growth: G) -> Self {
        LossWindow {
            growth,
            cwnd: INITIAL_WINDOW,
            ssthresh: u64::MAX,
            episode_start: None,
            srtt: Duration::from_millis(100),
        }
    }

    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }
}

impl<G: Growth> RateController for LossWindow<G> {
    fn name(&self) -> &'static str {
        G::NAME
    }

    fn boxed_clone(&self) -> Box<dyn RateController> {
        Box::new(self.clone())
    }

    fn next_send_time(&self) -> Option<Duration> {
        None
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd)
    }

    fn on_sent(&mut self, _now: Duration, _pn: u64, _bytes: usize, _in_flight: u64) {}

    fn on_ack(&mut self, e: &AckEvent<'_>) {
        if e.rtt.has_samples() {
            self.srtt = e.rtt.smoothed();
        }
        let acked: u64 = e.acked.iter().map(|p| u64::from(p.bytes)).sum();
        if acked == 0 {
            return;
        }
        // The episode ends once a packet sent after it began is acknowledged.
        if let Some(start) = self.episode_start {
            if e.acked.iter().any(|p| p.time >= start) {
                self.episode_start = None;
            } else {
                return;
            }
        }
        self.cwnd = if self.cwnd < self.ssthresh {
            (self.cwnd + acked).min(self.ssthresh.max(self.cwnd))
        } else {
            self.growth.grow(self.cwnd, acked, e.now, self.srtt)
        }
        .max(MIN_WINDOW);
    }

    fn on_loss(&mut self, now: Duration, lost: &[SentPacket]) {
        let in_episode = |p: &SentPacket| self.episode_start.is_some_and(|s| p.time < s);
        if lost.iter().all(in_episode) {
            return;
        }
        self.episode_start = Some(now);
        self.cwnd = self.growth.reduce(self.cwnd, now).max(MIN_WINDOW);
        self.ssthresh = self.cwnd;
    }

    fn rate(&self) -> u64 {
        (self.cwnd as f64 / self.srtt.as_secs_f64().max(1e-6)) as u64
    }
}

/// NewReno as a [`RateControl`] for a simulated endpoint.
pub fn newreno() -> RateControl {
    RateControl::Custom {
        name: NewReno::NAME,
        factory: std::sync::Arc::new(|| Box::new(LossWindow::with_growth(NewReno))),
    }
}

/// Cubic as a [`RateControl`] for a simulated endpoint.
pub fn cubic() -> RateControl {
    RateControl::Custom {
        name: Cubic::NAME,
        factory: std::sync::Arc::new(|| Box::new(LossWindow::with_growth(Cubic::default()))),
    }
}

#[cfg(test)]
mod tests;
