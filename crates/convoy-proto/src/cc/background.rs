//! The background (scavenger) controller: `--priority background`.
//!
//! A bulk upload from a vehicle shares queues it does not control (an AP,
//! the UE's own queue at the eNodeB) with its passengers' calls and games.
//! This controller keeps that queue nearly empty: it aims at a small
//! queueing delay above the path's base round trip and gives way at once
//! when anything else makes the queue grow. It reacts to delay alone:
//! convoy's coding repairs random loss, so a lost packet says nothing about
//! congestion (delay-based scavengers that also back off on loss, LEDBAT
//! and TCP-LP, collapse on lossy radio paths; research notes part B).
//!
//! The model (docs/PROTOCOL.md has the measurements behind each constant):
//!
//! * **Base RTT**: the minimum RTT sample over the last [`BASE_BUCKETS`]
//!   buckets of [`BASE_BUCKET`] (LEDBAT's base history, shortened so a
//!   route change is forgotten in minutes rather than never).
//! * **Queueing delay** q, once per round trip: the smallest one-way delay
//!   of the round (the peer's RECEIVE_TIME of its newest packet, less our
//!   send time) minus the smallest over the base history. Without receive
//!   times (an older peer), the smallest RTT sample of the round minus the
//!   base RTT: a sample is the time from sending to the acknowledgment of
//!   the latest packet an ACK covers (the one the receiver acknowledged
//!   without delay). The round's minimum filters out ACK batching and host
//!   scheduling noise; the one-way delay also leaves out the ACK's own
//!   wait on the return path, which on a cellular downlink is tens of
//!   milliseconds now and then.
//! * **Early cut**: [`EARLY_CUT_SAMPLES`] one-way delays in a row more
//!   than [`EARLY_CUT_QUEUE`] above the base (one alone is a grant gap of
//!   the link, not a queue), at most once per base round trip, cut the
//!   window at once to what the peer received over the last two base
//!   round trips times the base round trip plus the target (and half an
//!   acknowledgment batch), or to the window less the queue's excess at
//!   that rate where that is smaller; at most by half. A cellular uplink
//!   halves its rate within a round trip; the round's minimum sees that a
//!   round late and underrates it, and meanwhile a real-time flow in the
//!   same queue waited behind a window sized for the faster link.
//! * **Window**, once per round trip. While the bottleneck is busy, a
//!   window w over a round trip base + q drains at r = w/(base + q), and
//!   the queue holds q·r of it; the target holds target·r. So the window
//!   moves by the gap in packets, (target − q)·r, times a gain:
//!   - slow start: doubles until q passes ¾ of the target (LEDBAT++'s exit
//!     point), then takes off the excess at once; or sooner, when
//!     [`EARLY_CUT_SAMPLES`] one-way delays in a row are more than
//!     [`SLOW_START_EXIT_TARGETS`] targets above the base, with the early
//!     cut (the round's minimum sees a doubling's queue a round late, when
//!     the window has doubled again);
//!   - q above the target in two rounds in a row (one alone may be a stall
//!     of the host or the radio): shrinks by [`GAIN_DOWN`] × (q − target)·r,
//!     at most by half (LEDBAT++'s bound), down to [`MIN_WINDOW_PACKETS`].
//!     A competing flow that fills a deep queue halves it every round trip
//!     from the second: from 50 packets to 2 in about six;
//!   - q between [`PROBE_BELOW`] × target and the target: grows by
//!     [`GAIN_NEAR`] × (target − q)·r, so it settles on the target without
//!     overshooting it, and by at least (1 − q/target) of a packet, so that
//!     noise in real RTT samples cannot hold an unsaturated link in this
//!     band with vanishing steps;
//!   - q under that two rounds running (no queue: the link may have room
//!     the rate cannot show): grows by [`GAIN_UP`] of itself, at least one
//!     packet. A single such round moves the window as the band's edge
//!     would: a round's minimum reads an empty queue whenever the sender
//!     stalls for a few milliseconds, and an eighth of the window at once
//!     is 7–8 ms of queue at any rate (an eighth of the round trip).
//!
//!   It grows only in rounds where the window was full (a sender with
//!   nothing to send learns nothing about the path).
//! * **Pacing** at [`PACING_GAIN`] × window / base RTT: the window, not the
//!   pacer, sets the rate; pacing only spreads each window over the round
//!   trip so no burst lands in the shared queue.
//! * **Loss** is ignored.

use std::collections::VecDeque;
use std::time::Duration;

use super::{pacing_base, transmit_time, AckEvent, PeerReceive, RateController};
use crate::recovery::SentPacket;

/// Queueing delay the controller aims at (see docs/PROTOCOL.md).
pub const TARGET: Duration = Duration::from_millis(3);
/// Share of the window added per round trip when the queue is empty
/// (below [`PROBE_BELOW`] × target).
pub const GAIN_UP: f64 = 0.125;
pub const PROBE_BELOW: f64 = 0.25;
/// Share of the gap to the target closed per round trip when the queue is
/// below it...
pub const GAIN_NEAR: f64 = 0.5;
/// ...and above it.
pub const GAIN_DOWN: f64 = 1.0;
pub const MIN_WINDOW_PACKETS: u64 = 2;
pub const INITIAL_WINDOW_PACKETS: u64 = 10;
pub const PACING_GAIN: f64 = 1.25;
/// Base RTT history: this many buckets of this length.
pub const BASE_BUCKETS: usize = 4;
pub const BASE_BUCKET: Duration = Duration::from_secs(30);
/// This many one-way delay samples in a row this far above the base cut
/// the window at once.
pub const EARLY_CUT_QUEUE: Duration = Duration::from_millis(12);
pub const EARLY_CUT_SAMPLES: u32 = 3;
/// In slow start, that many samples in a row more than this many targets
/// above the base end it with the same cut.
pub const SLOW_START_EXIT_TARGETS: u32 = 2;

/// Whether a transfer competes normally or yields to everything else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Priority {
    /// The mode's own controller (RCDP or BBR).
    #[default]
    Normal,
    /// This scavenger controller.
    Background,
}

impl Priority {
    pub const NAMES: &'static [&'static str] = &["normal", "background"];

    pub fn name(self) -> &'static str {
        match self {
            Priority::Normal => "normal",
            Priority::Background => "background",
        }
    }

    /// Sets the configuration's rate control for this priority (a normal
    /// priority leaves the mode's choice alone).
    pub fn apply(self, cfg: &mut crate::Config) {
        if self == Priority::Background {
            cfg.rate_control = crate::RateControl::Background(BackgroundConfig::default());
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Priority, String> {
        match s {
            "normal" => Ok(Priority::Normal),
            "background" => Ok(Priority::Background),
            _ => Err(format!(
                "unknown priority {s:?}: valid priorities are {}",
                Priority::NAMES.join(", ")
            )),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct BackgroundConfig {
    /// Bytes per full packet.
    pub mss: u64,
    /// Queueing delay aimed at.
    pub target: Duration,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig {
            mss: 1472,
            target: TARGET,
        }
    }
}

#[derive(Clone)]
pub struct Background {
    cfg: BackgroundConfig,
    cwnd: u64,
    slow_start: bool,
    /// The smallest RTT sample over the base history.
    base: BucketMin<Duration>,
    /// The smallest one-way delay over the same history: the peer's
    /// receive time less our send time, in nanoseconds (the clocks' offset
    /// cancels in the difference from it).
    base_owd: BucketMin<i64>,
    /// The current round began at this time; it ends when a packet sent
    /// at or after it is acknowledged.
    round_start: Duration,
    round_min: Option<Duration>,
    round_min_owd: Option<i64>,
    /// (peer receive time, bytes acknowledged by then) over the last two
    /// base round trips: the rate the peer receives at.
    received: VecDeque<(Duration, u64)>,
    acked_bytes: u64,
    /// Bytes an acknowledgment newly covers, a moving average.
    ack_batch: f64,
    last_early_cut: Option<Duration>,
    /// One-way delay samples in a row over `EARLY_CUT_QUEUE`.
    high_in_row: u32,
    /// Whether the window was full at some point this round.
    round_limited: bool,
    /// The last queueing delay measured (for reports).
    qdelay: Duration,
    /// Whether the last round's queueing delay was above the target.
    above_target: bool,
    /// Whether the last round read no queue (under `PROBE_BELOW` × target).
    empty_before: bool,
    srtt: Duration,
    next_send: Option<Duration>,
}

impl Background {
    pub fn new(cfg: BackgroundConfig) -> Background {
        Background {
            cwnd: INITIAL_WINDOW_PACKETS * cfg.mss,
            ack_batch: cfg.mss as f64,
            cfg,
            slow_start: true,
            base: BucketMin::default(),
            base_owd: BucketMin::default(),
            round_start: Duration::ZERO,
            round_min: None,
            round_min_owd: None,
            received: VecDeque::new(),
            acked_bytes: 0,
            last_early_cut: None,
            high_in_row: 0,
            round_limited: false,
            qdelay: Duration::ZERO,
            above_target: false,
            empty_before: false,
            srtt: Duration::from_millis(100),
            next_send: None,
        }
    }

    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    pub fn queueing_delay(&self) -> Duration {
        self.qdelay
    }

    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// The base RTT: the smallest sample in the history.
    pub fn base_rtt(&self) -> Option<Duration> {
        self.base.min()
    }

    /// One receive time the peer reported. Returns whether it cut the
    /// window early (and so began a new round).
    fn on_receive_time(&mut self, now: Duration, r: PeerReceive, acked: u64) -> bool {
        let owd = r.received.as_nanos() as i64 - r.sent.as_nanos() as i64;
        self.base_owd.note(now, owd);
        self.round_min_owd = Some(self.round_min_owd.map_or(owd, |m| m.min(owd)));
        self.acked_bytes += acked;
        self.received.push_back((r.received, self.acked_bytes));
        let base = self.base_rtt().unwrap_or(self.srtt);
        while self
            .received
            .front()
            .is_some_and(|&(t, _)| t + 2 * base < r.received)
        {
            self.received.pop_front();
        }
        let Some(least) = self.base_owd.min() else {
            return false;
        };
        let queue = Duration::from_nanos((owd - least).max(0) as u64);
        // Slow start ends on the samples, not the round: the round's
        // minimum sees the doubling's queue a round late, when the window
        // has doubled again.
        let limit = if self.slow_start {
            self.cfg.target * SLOW_START_EXIT_TARGETS
        } else {
            EARLY_CUT_QUEUE
        };
        if queue > limit {
            self.high_in_row += 1;
        } else {
            self.high_in_row = 0;
        }
        let due = self.last_early_cut.is_none_or(|t| now >= t + base);
        if self.high_in_row < EARLY_CUT_SAMPLES || !due {
            return false;
        }
        let (Some(&(t0, b0)), Some(&(t1, b1))) = (self.received.front(), self.received.back())
        else {
            return false;
        };
        let span = t1.saturating_sub(t0);
        if span < base / 2 {
            return false;
        }
        let rate = (b1 - b0) as f64 / span.as_secs_f64();
        self.cwnd = early_cut_window(
            self.cwnd,
            rate,
            base + self.cfg.target,
            queue.saturating_sub(self.cfg.target),
            self.ack_batch,
        )
        .max(self.min_window());
        self.last_early_cut = Some(now);
        self.slow_start = false;
        // The cut stands for this round's verdict: a new round begins.
        self.round_start = now;
        self.round_min = None;
        self.round_min_owd = None;
        self.above_target = false;
        self.empty_before = false;
        true
    }

    fn min_window(&self) -> u64 {
        MIN_WINDOW_PACKETS * self.cfg.mss
    }

    /// One round trip's verdict on the window, from the round's queueing
    /// delay `q` over the base round trip `base`.
    fn end_round(&mut self, q: Duration, base: Duration) {
        self.qdelay = q;
        let target = self.cfg.target.as_secs_f64().max(1e-6);
        let q_s = q.as_secs_f64();
        let w = self.cwnd as f64;
        let mss = self.cfg.mss as f64;
        // Packets per second through the bottleneck while it is busy: the
        // window over the round trip it took.
        let per_s = w / (base.as_secs_f64() + q_s).max(1e-4);
        let next = if self.slow_start {
            if q_s > 0.75 * target {
                self.slow_start = false;
                // Samples counted against slow start's limit (twice the
                // target) are no evidence against the early cut's.
                self.high_in_row = 0;
                w - (w / 2.0).min((q_s - target).max(0.0) * per_s)
            } else if self.round_limited {
                2.0 * w
            } else {
                w
            }
        } else if q_s > target {
            // The queue holds (q − target) × rate more than we aim at; one
            // round above the target alone may be a stall of the host or
            // the radio rather than a queue, so the cut waits for a second.
            if self.above_target {
                w - (w / 2.0).min(GAIN_DOWN * (q_s - target) * per_s)
            } else {
                w
            }
        } else if !self.round_limited {
            w
        } else if q_s < PROBE_BELOW * target && self.empty_before {
            // No queue two rounds running: the link may have room we
            // cannot see.
            w + (w * GAIN_UP).max(mss)
        } else {
            // A round's minimum reads an empty queue whenever the sender
            // stalls for a few milliseconds (its host, its ACKs), so one
            // such round moves the window as the band's edge would.
            let q_s = q_s.max(PROBE_BELOW * target);
            // At least (1 − q/target) of a packet per round: real RTT
            // samples carry a millisecond of noise, which would otherwise
            // keep an unsaturated link in this band with tiny steps.
            w + (GAIN_NEAR * (target - q_s) * per_s).max(mss * (1.0 - q_s / target))
        };
        self.above_target = !self.slow_start && q_s > target;
        self.empty_before = !self.slow_start && q_s < PROBE_BELOW * target;
        self.cwnd = (next as u64).max(self.min_window());
    }

    fn pacing_rate(&self) -> u64 {
        let rtt = self.base_rtt().unwrap_or(self.srtt).as_secs_f64().max(1e-4);
        (PACING_GAIN * self.cwnd as f64 / rtt) as u64
    }
}

impl RateController for Background {
    fn name(&self) -> &'static str {
        "background"
    }

    fn boxed_clone(&self) -> Box<dyn RateController> {
        Box::new(self.clone())
    }

    fn next_send_time(&self) -> Option<Duration> {
        self.next_send
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd)
    }

    fn on_sent(&mut self, now: Duration, _pn: u64, bytes: usize, bytes_in_flight: u64) {
        if bytes_in_flight + self.cfg.mss >= self.cwnd {
            self.round_limited = true;
        }
        let gap = transmit_time(bytes as u64, self.pacing_rate());
        self.next_send = Some(pacing_base(self.next_send, now, gap, 1) + gap);
    }

    fn on_handshake_rtt(&mut self, now: Duration, rtt: Duration) {
        self.base.note(now, rtt);
        self.srtt = rtt;
    }

    fn on_ack(&mut self, e: &AckEvent<'_>) {
        if e.rtt.has_samples() {
            self.srtt = e.rtt.smoothed();
        }
        // The latest packet acknowledged waited least for the ACK.
        let Some(latest) = e.acked.iter().map(|p| p.time).max() else {
            return;
        };
        let sample = e.now.saturating_sub(latest);
        self.base.note(e.now, sample);
        self.round_min = Some(self.round_min.map_or(sample, |m| m.min(sample)));
        let acked: u64 = e.acked.iter().map(|p| u64::from(p.bytes)).sum();
        self.ack_batch += (acked as f64 - self.ack_batch) / 8.0;
        if let Some(r) = e.peer_receive {
            if self.on_receive_time(e.now, r, acked) {
                return;
            }
        }
        if latest < self.round_start {
            return;
        }
        // A packet sent in this round came back: the round is over.
        let min = self.round_min.take().unwrap_or(sample);
        let base = self.base_rtt().unwrap_or(min);
        let q = match (self.round_min_owd.take(), self.base_owd.min()) {
            (Some(owd), Some(least)) => Duration::from_nanos((owd - least).max(0) as u64),
            _ => min.saturating_sub(base),
        };
        self.end_round(q, base);
        self.round_start = e.now;
        self.round_limited = false;
    }

    fn on_loss(&mut self, _now: Duration, _lost: &[SentPacket]) {
        // Deliberately nothing: coding repairs loss; only delay is congestion.
    }

    fn rate(&self) -> u64 {
        (self.cwnd as f64 / self.srtt.as_secs_f64().max(1e-6)) as u64
    }
}

/// The window an early cut leaves: the smaller of two estimates of the
/// window that holds the queue at the target, from `window` (bytes), the
/// peer's received `rate` (bytes/s), the base round trip plus the target
/// `aim`, the queue's `excess` over the target and the bytes an
/// acknowledgment covers (`ack_batch`); never more than the window, never
/// less than half of it.
///
/// On a steady link the two agree: the window in flight is the rate over
/// the base round trip plus the queue, and the packets the peer holds for
/// its next acknowledgment (half a batch on average). Without that half
/// batch the rate's estimate undershoots: over an AP the rounds after the
/// cut read an empty queue, grow by ⅛ twice and cross the threshold
/// again, a cycle every 0.3 s. Where a cellular rate just
/// fell, the window is still the faster link's and the rate's estimate
/// binds, draining the queue sooner than the excess alone would.
/// docs/PROTOCOL.md ("The game's tail over the AP") has the runs of each.
fn early_cut_window(
    window: u64,
    rate: f64,
    aim: Duration,
    excess: Duration,
    ack_batch: f64,
) -> u64 {
    let from_rate = rate * aim.as_secs_f64() + ack_batch / 2.0;
    let less_excess = window as f64 - rate * excess.as_secs_f64();
    (from_rate.min(less_excess).max(0.0) as u64)
        .max(window / 2)
        .min(window)
}

/// The minimum of samples over the last [`BASE_BUCKETS`] buckets of
/// [`BASE_BUCKET`] each (LEDBAT's base history).
#[derive(Clone, Debug)]
struct BucketMin<T> {
    /// (bucket start, minimum in it), newest last.
    buckets: VecDeque<(Duration, T)>,
}

impl<T> Default for BucketMin<T> {
    fn default() -> Self {
        BucketMin {
            buckets: VecDeque::new(),
        }
    }
}

impl<T: Ord + Copy> BucketMin<T> {
    fn note(&mut self, now: Duration, sample: T) {
        match self.buckets.back_mut() {
            Some((start, min)) if now < *start + BASE_BUCKET => *min = (*min).min(sample),
            _ => {
                self.buckets.push_back((now, sample));
                while self.buckets.len() > BASE_BUCKETS {
                    self.buckets.pop_front();
                }
            }
        }
    }

    fn min(&self) -> Option<T> {
        self.buckets.iter().map(|&(_, m)| m).min()
    }
}

#[cfg(test)]
mod tests;
