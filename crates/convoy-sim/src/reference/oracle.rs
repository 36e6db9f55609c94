//! The oracle sender: the frontier of the throughput–delay plot.
//!
//! It knows the link's future delivery schedule exactly, but acts on it as
//! a sender in the real world could at best: one round trip late. At each
//! send it paces at the capacity the bottleneck had one base round trip
//! before this packet reaches it (averaged over [`SMOOTHING`], which the
//! small queue it keeps absorbs), corrected toward [`TARGET`] by the queue
//! its round trips show (the latest minus the smallest; the return path
//! carries only acknowledgments, so the excess is the forward queue). No estimator noise, no
//! probing, no start-up: what separates a real scheme from it is how well
//! that scheme measures, and what no scheme can know (the next round trip).
//!
//! Only `convoy simulate` uses it (`--controller oracle`); it is not a
//! transport anyone can run.

use std::sync::Arc;
use std::time::Duration;

use convoy_proto::cc::{AckEvent, RateController};
use convoy_proto::RateControl;

/// Bytes the bottleneck can deliver in link time `[from, to)`.
pub type Schedule = Arc<dyn Fn(Duration, Duration) -> u64 + Send + Sync>;

/// The capacity is read as a mean over this much of the schedule.
const SMOOTHING: Duration = Duration::from_millis(20);
/// The queue the oracle holds, as time: enough to carry a grant's burst
/// over the smoothing window without idling the link.
const TARGET: Duration = Duration::from_millis(10);
/// Bounds of the queue correction, as for Tide.
const MAX_UP: f64 = 2.0;
const MAX_DOWN: f64 = 0.5;
const MSS: u64 = 1472;
/// The capacity's mean spans at least this many packets of service...
const ENOUGH_PACKETS: u64 = 8;
/// ...within this much of the schedule.
const LONGEST: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct Oracle {
    schedule: Schedule,
    /// Propagation delay from the sender to the bottleneck's exit, and the
    /// round trip the knowledge lags by.
    one_way: Duration,
    lag: Duration,
    queue_delay: Duration,
    rate: u64,
    next_send: Option<Duration>,
}

impl Oracle {
    pub fn new(schedule: Schedule, one_way: Duration, lag: Duration) -> Oracle {
        Oracle {
            schedule,
            one_way,
            lag,
            queue_delay: Duration::ZERO,
            rate: MSS * 10,
            next_send: None,
        }
    }

    /// The capacity one round trip before a packet sent at `now` reaches
    /// the bottleneck, bytes/s: the mean over the [`SMOOTHING`] before that
    /// moment, or over as long as it takes (up to [`LONGEST`]) to hold
    /// [`ENOUGH_PACKETS`] of service, since a slow link's opportunities
    /// come hundreds of milliseconds apart.
    fn known_capacity(&self, now: Duration) -> u64 {
        let at = (now + self.one_way).saturating_sub(self.lag);
        let mut span = SMOOTHING;
        loop {
            let from = at.saturating_sub(span);
            let bytes = (self.schedule)(from, at);
            let took = (at - from).max(Duration::from_millis(1));
            if bytes >= ENOUGH_PACKETS * MSS || span >= LONGEST || from.is_zero() {
                return (bytes as f64 / took.as_secs_f64()) as u64;
            }
            span *= 2;
        }
    }

    fn update(&mut self, now: Duration) {
        let c = self.known_capacity(now) as f64;
        let want = c * TARGET.as_secs_f64();
        let have = c * self.queue_delay.as_secs_f64();
        let correction = (want - have) / (2.0 * self.lag.max(TARGET).as_secs_f64());
        let r = (c + correction).clamp(MAX_DOWN * c, MAX_UP * c.max(MSS as f64));
        self.rate = (r as u64).max(MSS);
    }
}

impl RateController for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn boxed_clone(&self) -> Box<dyn RateController> {
        Box::new(self.clone())
    }

    fn next_send_time(&self) -> Option<Duration> {
        self.next_send
    }

    fn on_sent(&mut self, now: Duration, _pn: u64, bytes: usize, _in_flight: u64) {
        self.update(now);
        let gap = Duration::from_secs_f64(bytes as f64 / self.rate as f64);
        let base = self.next_send.filter(|&t| t + gap >= now).unwrap_or(now);
        self.next_send = Some(base + gap);
    }

    fn on_ack(&mut self, e: &AckEvent<'_>) {
        if e.rtt.has_samples() {
            self.queue_delay = e.rtt.latest().saturating_sub(e.rtt.min());
        }
        self.update(e.now);
    }

    fn rate(&self) -> u64 {
        self.rate
    }
}

/// A rate-control choice that builds an oracle for each path.
pub fn oracle(schedule: Schedule, one_way: Duration, lag: Duration) -> RateControl {
    RateControl::Custom {
        name: "oracle",
        factory: Arc::new(move || Box::new(Oracle::new(schedule.clone(), one_way, lag))),
    }
}
