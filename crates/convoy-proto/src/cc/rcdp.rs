//! RCDP's receiver-driven rate control (SPEC S1): packets leave in trains of
//! N; the receiver measures each train's dispersion and reports a capacity
//! C_i; the sender takes the median of the last k reports, targets
//! R = β·C, sends each train at Ω = R/α and waits so that a train's period is
//! 8·N·P/R.
//!
//! Two choices the paper leaves open, and one addition:
//!
//! * **Start-up.** Until the first report, trains go out at `probe_rate`
//!   (100 Mbit/s): a train is its own capacity probe, so one round trip
//!   after the first train the sender knows C (or, if the link is faster
//!   than the probe, that C is at least the probe rate). While reports come
//!   back undispersed (≥ 85 % of the rate the train was sent at) the link is
//!   faster than we probed, so the sender keeps raising R to β times the
//!   report, without the median's lag; the first dispersed report ends
//!   start-up.
//! * **Initial rate** 8 Mbit/s: it only spaces the probe trains until the
//!   first report (a 32-packet train every 46 ms), and a report replaces it
//!   at once, including the gap already scheduled.
//! * **Defaults.** α = 0.5 as in the paper. β = 0.99 rather than 0.9: with
//!   exact dispersion measurements, 0.9 leaves a tenth of the link idle; the
//!   median of 5 removes the overestimates the paper's margin guarded
//!   against, and the queue drain below undoes the queue a residual
//!   overestimate builds. N = 32 packets: long enough that the dispersion of a
//!   train spans many packet times at 1 Gbit/s (32 × 12 µs), short enough
//!   for several reports per round trip at 20 Mbit/s.
//! * **Queue drain** (not in the paper). RCDP measures capacity, not queue,
//!   so after a capacity drop it keeps the queue it built while the median
//!   caught up, and at R = β·C only (1 − β)·C drains it. The sender tracks
//!   the smallest RTT of the last few trains against the path's minimum and,
//!   while a standing queue is seen, scales R down (at most to half) to drain
//!   it in about four minimum RTTs. Each sample first loses the wait its
//!   packet spent behind its own train, which leaves at Ω > C by design:
//!   counted as standing, that wait held R near C/2 on slow links.

use std::collections::VecDeque;
use std::time::Duration;

use super::{pacing_base, transmit_time, AckEvent, RateController};
use crate::rtt::RttEstimator;
use crate::wire::TrainTag;

#[derive(Clone, Debug, PartialEq)]
pub struct RcdpConfig {
    /// Train rate Ω = R/α.
    pub alpha: f64,
    /// Target rate R = β·C.
    pub beta: f64,
    /// Packets per train (N).
    pub train_len: u32,
    /// Reports in the median filter (k).
    pub median_k: usize,
    /// Rate that spaces the trains before the first report, bytes/s.
    pub initial_rate: u64,
    /// Rate a train is sent at during start-up, bytes/s.
    pub probe_rate: u64,
    pub min_rate: u64,
    pub max_rate: u64,
    /// Scale the rate down while a standing queue is seen.
    pub drain_queue: bool,
}

impl Default for RcdpConfig {
    fn default() -> Self {
        RcdpConfig {
            alpha: 0.5,
            beta: 0.99,
            train_len: 32,
            median_k: 5,
            initial_rate: 8_000_000 / 8,
            probe_rate: 100_000_000 / 8,
            min_rate: 100_000 / 8,
            max_rate: 40_000_000_000 / 8,
            drain_queue: true,
        }
    }
}

impl RcdpConfig {
    /// Checks the parameters, naming the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(format!("alpha must be in (0, 1], got {}", self.alpha));
        }
        if !(self.beta > 0.0 && self.beta <= 1.0) {
            return Err(format!("beta must be in (0, 1], got {}", self.beta));
        }
        if self.train_len < 2 {
            return Err("a train needs at least 2 packets".into());
        }
        if self.median_k == 0 {
            return Err("the median filter needs k >= 1".into());
        }
        if self.min_rate == 0
            || self.min_rate > self.max_rate
            || self.initial_rate == 0
            || self.probe_rate == 0
        {
            return Err("rates must be positive and min_rate <= max_rate".into());
        }
        Ok(())
    }
}

/// How one train actually left.
#[derive(Clone, Copy, Debug)]
struct SentTrain {
    id: u64,
    /// The rate it was meant to leave at (Ω).
    omega: u64,
    first: Duration,
    last: Duration,
    /// Bytes of its packets after the first.
    bytes_after_first: u64,
}

impl SentTrain {
    /// Whether a report of `bytes_per_sec` measures the sender rather than
    /// the path: the train left well below Ω (the sender was descheduled or
    /// busy mid-train; in virtual time this never happens) and arrived as
    /// fast as it left, so the path did not disperse it. The paper's sender
    /// emits each train at exactly Ω; a real one does not always, and on a
    /// fast path (loopback, 1 Gbit/s) such a report read as a dispersed
    /// train cut the median to a few per cent of the capacity.
    fn sender_stalled(&self, bytes_per_sec: u64) -> bool {
        let span = self.last.saturating_sub(self.first);
        if span.is_zero() || self.bytes_after_first == 0 {
            return false;
        }
        let emitted = self.bytes_after_first as f64 / span.as_secs_f64();
        emitted < 0.85 * self.omega as f64 && bytes_per_sec as f64 >= 0.85 * emitted
    }
}

#[derive(Clone)]
pub struct Rcdp {
    cfg: RcdpConfig,
    reports: VecDeque<u64>,
    last_report_train: Option<u64>,
    /// Filtered capacity, bytes/s.
    capacity: Option<u64>,
    rate: u64,
    startup: bool,
    train_id: u64,
    index: u32,
    train_start: Duration,
    train_bytes: u64,
    next_send: Option<Duration>,
    /// How each recent train was sent, to tell dispersed reports.
    sent_trains: VecDeque<SentTrain>,
    /// Recent RTT samples, for the standing-queue estimate.
    rtt_samples: VecDeque<(Duration, Duration)>,
}

impl Rcdp {
    pub fn new(cfg: RcdpConfig) -> Rcdp {
        let rate = cfg.initial_rate.clamp(cfg.min_rate, cfg.max_rate);
        Rcdp {
            cfg,
            reports: VecDeque::new(),
            last_report_train: None,
            capacity: None,
            rate,
            startup: true,
            train_id: 0,
            index: 0,
            train_start: Duration::ZERO,
            train_bytes: 0,
            next_send: None,
            sent_trains: VecDeque::new(),
            rtt_samples: VecDeque::new(),
        }
    }

    /// The filtered capacity estimate, bytes/s, once a report arrived.
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    pub fn in_startup(&self) -> bool {
        self.startup
    }

    fn train_rate(&self) -> u64 {
        let omega = (self.rate as f64 / self.cfg.alpha) as u64;
        if self.startup {
            omega.max(self.cfg.probe_rate)
        } else {
            omega
        }
    }

    fn end_train(&mut self) {
        self.next_send = Some(self.train_start + transmit_time(self.train_bytes, self.rate));
        self.index = 0;
        self.train_id += 1;
    }

    /// Changes R; a gap already scheduled at the old rate is recomputed,
    /// so the first report after start-up takes effect at once rather than
    /// after a gap sized for the initial rate.
    fn set_rate(&mut self, rate: u64) {
        self.rate = rate;
        if self.index == 0 && self.train_bytes > 0 {
            let due = self.train_start + transmit_time(self.train_bytes, self.rate);
            self.next_send = Some(self.next_send.map_or(due, |t| t.min(due)));
        }
    }

    fn median(&self) -> u64 {
        let mut v: Vec<u64> = self.reports.iter().copied().collect();
        v.sort_unstable();
        v[v.len() / 2]
    }

    /// How long a packet sent at `sent` waited behind the earlier packets
    /// of its own train: they left at Ω and the link carries C, so after
    /// `sent − first` of sending the train had put (Ω/C − 1)·(sent − first)
    /// of work ahead of it. Zero before a capacity is known.
    fn own_train_wait(&self, sent: Duration) -> Duration {
        let (Some(c), Some(train)) = (
            self.capacity,
            self.sent_trains
                .iter()
                .rev()
                .find(|t| t.first <= sent && sent <= t.last),
        ) else {
            return Duration::ZERO;
        };
        let excess = train.omega as f64 / c.max(1) as f64 - 1.0;
        if excess <= 0.0 {
            return Duration::ZERO;
        }
        sent.saturating_sub(train.first).mul_f64(excess)
    }

    /// Scale in (0.5, 1] that drains a standing queue.
    fn drain_factor(&self, rtt: &RttEstimator) -> f64 {
        if !self.cfg.drain_queue || !rtt.has_samples() {
            return 1.0;
        }
        let Some(standing) = self.rtt_samples.iter().map(|&(_, r)| r).min() else {
            return 1.0;
        };
        let min = rtt.min();
        let queue = standing.saturating_sub(min);
        if queue <= (min / 8).max(Duration::from_millis(2)) {
            return 1.0;
        }
        (1.0 - queue.as_secs_f64() / (4.0 * min.as_secs_f64())).max(0.5)
    }
}

impl RateController for Rcdp {
    fn name(&self) -> &'static str {
        "rcdp"
    }

    fn boxed_clone(&self) -> Box<dyn RateController> {
        Box::new(self.clone())
    }

    fn next_send_time(&self) -> Option<Duration> {
        self.next_send
    }

    fn train_tag(&self) -> Option<TrainTag> {
        Some(TrainTag {
            train_id: self.train_id,
            index: self.index,
            len: self.cfg.train_len,
        })
    }

    fn on_sent(&mut self, now: Duration, _pn: u64, bytes: usize, _in_flight: u64) {
        let omega = self.train_rate();
        if self.index == 0 {
            self.train_start = now;
            self.train_bytes = 0;
            self.sent_trains.push_back(SentTrain {
                id: self.train_id,
                omega,
                first: now,
                last: now,
                bytes_after_first: 0,
            });
            if self.sent_trains.len() > 64 {
                self.sent_trains.pop_front();
            }
        } else if let Some(t) = self.sent_trains.back_mut() {
            t.last = now;
            t.bytes_after_first += bytes as u64;
        }
        self.train_bytes += bytes as u64;
        self.index += 1;
        if self.index >= self.cfg.train_len {
            self.end_train();
            return;
        }
        let gap = transmit_time(bytes as u64, omega);
        // Keep to the schedule when the driver is slightly late, but do not
        // burst to catch up after a long stall.
        self.next_send = Some(pacing_base(self.next_send, now, gap, 2) + gap);
    }

    fn on_app_limited(&mut self, now: Duration) {
        // A train with a pause inside would measure the pause, not the link.
        if self.index > 0 {
            self.end_train();
            if self.next_send.is_some_and(|t| t < now) {
                self.next_send = Some(now);
            }
        }
    }

    fn on_ack(&mut self, e: &AckEvent<'_>) {
        if let Some(latest) = e.acked.last() {
            let sample = e.now.saturating_sub(latest.time);
            // A train leaves at Ω = R/α, twice the link's rate at α = ½, so
            // its later packets wait behind its earlier ones by design. That
            // wait is not a standing queue: counted as one, it held R at half
            // the capacity on slow links (2 Mbit/s: a 32-packet train's last
            // packet waits 90 ms, over three minimum RTTs).
            let own = self.own_train_wait(latest.time);
            self.rtt_samples
                .push_back((e.now, sample.saturating_sub(own)));
        }
        // Keep about two train periods (at least two minimum RTTs).
        let horizon =
            (transmit_time(self.train_bytes.max(1500) * 2, self.rate)).max(e.rtt.min() * 2);
        while let Some(&(t, _)) = self.rtt_samples.front() {
            if t + horizon < e.now || self.rtt_samples.len() > 256 {
                self.rtt_samples.pop_front();
            } else {
                break;
            }
        }
    }

    fn on_rate_report(
        &mut self,
        _now: Duration,
        train_id: u64,
        bytes_per_sec: u64,
        rtt: &RttEstimator,
    ) {
        if self.last_report_train.is_some_and(|last| train_id <= last) || bytes_per_sec == 0 {
            return;
        }
        self.last_report_train = Some(train_id);
        let sent = self.sent_trains.iter().find(|t| t.id == train_id).copied();
        if sent.is_some_and(|t| t.sender_stalled(bytes_per_sec)) {
            return;
        }
        if self.startup {
            let sent_at = sent.map(|t| t.omega);
            let undispersed = sent_at.is_some_and(|r| bytes_per_sec as f64 >= 0.85 * r as f64);
            if undispersed {
                // The link carried the train as fast as we sent it: C is at
                // least this; keep growing.
                self.set_rate(
                    ((self.cfg.beta * bytes_per_sec as f64) as u64)
                        .clamp(self.cfg.min_rate, self.cfg.max_rate),
                );
                self.capacity = Some(bytes_per_sec);
                return;
            }
            self.startup = false;
            self.reports.clear();
        }
        self.reports.push_back(bytes_per_sec);
        while self.reports.len() > self.cfg.median_k {
            self.reports.pop_front();
        }
        let c = self.median();
        self.capacity = Some(c);
        let r = self.cfg.beta * c as f64 * self.drain_factor(rtt);
        self.set_rate((r as u64).clamp(self.cfg.min_rate, self.cfg.max_rate));
    }

    fn rate(&self) -> u64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::SentPacket;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn trains_are_paced_at_omega_with_period_from_r() {
        let cfg = RcdpConfig {
            train_len: 4,
            ..RcdpConfig::default()
        };
        let mut c = Rcdp::new(cfg);
        let rtt = RttEstimator::default();
        // Leave start-up with a dispersed report of 1 MB/s.
        c.on_sent(ms(0), 0, 1000, 0);
        c.on_rate_report(ms(1), 0, 1_000_000, &rtt);
        assert!(!c.in_startup());
        assert_eq!(c.rate(), 990_000);
        // Finish train 0, then look at train 1.
        while c.train_tag().unwrap().train_id == 0 {
            c.on_sent(c.next_send_time().unwrap(), 0, 1000, 0);
        }
        let start = c.next_send_time().unwrap();
        let mut times = vec![];
        for _ in 0..4 {
            let t = c.next_send_time().unwrap();
            times.push(t);
            c.on_sent(t, 0, 1000, 0);
        }
        let gap = times[1] - times[0];
        assert_eq!(gap, transmit_time(1000, 1_980_000), "Ω = R/α");
        let period = c.next_send_time().unwrap() - start;
        assert_eq!(period, transmit_time(4000, 990_000), "period = N·P/R");
    }

    #[test]
    fn median_of_five_ignores_two_outliers() {
        let mut c = Rcdp::new(RcdpConfig::default());
        let rtt = RttEstimator::default();
        c.on_sent(ms(0), 0, 1000, 0);
        for (i, r) in [1_000_000, 9_000_000, 1_000_000, 50, 1_000_000]
            .into_iter()
            .enumerate()
        {
            c.on_rate_report(ms(i as u64), i as u64, r, &rtt);
        }
        assert_eq!(c.capacity(), Some(1_000_000));
        // A stale report (older train) is ignored.
        c.on_rate_report(ms(9), 2, 10, &rtt);
        assert_eq!(c.capacity(), Some(1_000_000));
    }

    #[test]
    fn startup_grows_while_reports_are_undispersed() {
        let mut c = Rcdp::new(RcdpConfig::default());
        let rtt = RttEstimator::default();
        c.on_sent(ms(0), 0, 1000, 0);
        // Train 0 went at the 12.5 MB/s probe rate and came back undispersed.
        c.on_rate_report(ms(10), 0, 12_400_000, &rtt);
        assert!(c.in_startup());
        assert_eq!(c.rate(), (0.99 * 12_400_000.0) as u64);
        assert!(
            c.train_rate() > 24_000_000,
            "next trains probe twice as fast"
        );
    }

    #[test]
    fn a_train_the_sender_stalled_in_does_not_lower_the_estimate() {
        // No median: every report counted would set the capacity.
        let cfg = RcdpConfig {
            train_len: 4,
            median_k: 1,
            ..RcdpConfig::default()
        };
        let mut c = Rcdp::new(cfg);
        let rtt = RttEstimator::default();
        c.on_sent(ms(0), 0, 1000, 0);
        c.on_rate_report(ms(1), 0, 1_000_000, &rtt);
        assert_eq!(c.capacity(), Some(1_000_000));
        // Train 1 should leave at Ω = 2 MB/s (1.5 ms) but the sender
        // stalls: 3000 bytes after the first packet take 30 ms (100 kB/s),
        // and the receiver sees them arrive that slowly.
        while c.train_tag().unwrap().train_id == 0 {
            c.on_sent(c.next_send_time().unwrap(), 0, 1000, 0);
        }
        let start = c.next_send_time().unwrap();
        for i in 0..4 {
            c.on_sent(start + ms(10 * i), 0, 1000, 0);
        }
        c.on_rate_report(start + ms(40), 1, 100_000, &rtt);
        assert_eq!(c.capacity(), Some(1_000_000), "the stall is not the path's");
        // Trains that left on time and came back dispersed do count.
        for train in 2..4 {
            for _ in 0..4 {
                c.on_sent(c.next_send_time().unwrap(), 0, 1000, 0);
            }
            c.on_rate_report(c.next_send_time().unwrap(), train, 100_000, &rtt);
        }
        assert_eq!(
            c.capacity(),
            Some(100_000),
            "median of 1 MB/s and twice 100 kB/s"
        );
    }

    /// 250 kB/s (2 Mbit/s), 26 ms minimum RTT, 32-packet trains of 1450 B
    /// at Ω = 2R, `standing` of queue ahead of every train. The receiver
    /// acknowledges each train at its end, so every sample comes from a
    /// packet that also waited behind its own train. Returns the lowest R.
    fn lowest_rate_over_trains(standing: Duration) -> u64 {
        let c_link = 250_000u64;
        let mut c = Rcdp::new(RcdpConfig::default());
        let mut rtt = RttEstimator::default();
        let base = ms(26);
        rtt.update(base, Duration::ZERO);
        c.on_sent(ms(0), 0, 1450, 0);
        c.on_rate_report(ms(1), 0, c_link, &rtt);
        assert_eq!(c.rate(), 247_500);
        let mut pn = 0;
        let mut lowest = u64::MAX;
        for train in 1..20u64 {
            while c.train_tag().unwrap().train_id < train {
                c.on_sent(c.next_send_time().unwrap(), pn, 1450, 0);
                pn += 1;
            }
            let mut link_free = c.next_send_time().unwrap();
            let mut last = None;
            for _ in 0..32 {
                let t = c.next_send_time().unwrap();
                c.on_sent(t, pn, 1450, 0);
                link_free = link_free.max(t) + transmit_time(1450, c_link);
                last = Some(SentPacket::on_one_path(pn, t, 1450));
                pn += 1;
            }
            let arrival = link_free + standing + base - transmit_time(1450, c_link);
            let acked = [last.unwrap()];
            c.on_ack(&AckEvent {
                now: arrival,
                acked: &acked,
                rtt: &rtt,
                bytes_in_flight: 0,
                peer_receive: None,
            });
            c.on_rate_report(arrival, train, c_link, &rtt);
            lowest = lowest.min(c.rate());
        }
        lowest
    }

    #[test]
    fn a_train_s_own_queue_is_not_a_standing_one() {
        // Counted as a standing queue, the last packet's 89 ms behind its
        // own train halved R after every train that left at full rate.
        assert_eq!(
            lowest_rate_over_trains(Duration::ZERO),
            247_500,
            "R stays β·C"
        );
    }

    #[test]
    fn a_standing_queue_is_still_drained() {
        // 52 ms (two minimum RTTs) ahead of every train: R scaled by
        // 1 − 52/104 = ½.
        assert_eq!(lowest_rate_over_trains(ms(52)), 123_750);
    }

    #[test]
    fn bad_configs_are_named() {
        let bad = RcdpConfig {
            alpha: 0.0,
            ..RcdpConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("alpha"));
        assert!(RcdpConfig::default().validate().is_ok());
    }
}
