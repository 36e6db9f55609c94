//! BBR (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM
//! Queue 2016; BBRv1): a model of the path, the bottleneck bandwidth
//! (windowed maximum of delivery-rate samples over about 10 round trips)
//! and the round-trip propagation time (minimum RTT over 10 s), drives
//! pacing at gain × bandwidth and a window of cwnd_gain × BDP.
//!
//! States: Startup (gain 2/ln 2 until the bandwidth stops growing by 25 %
//! for three rounds), Drain (the inverse gain until the queue Startup built
//! is gone), ProbeBW (gains cycling 1.25, 0.75, 1, 1, one phase per min
//! RTT, starting at a phase other than 0.75), ProbeRTT (every
//! 10 s without a new minimum: four packets in flight for 200 ms and a
//! round).
//!
//! Deviations from the paper, and why:
//! * Delivery-rate samples come from our ACK ranges; a packet we declared
//!   lost and that is acknowledged later gives no sample (its state is
//!   gone), which can only make the estimate lower.
//! * Losses do not slow BBR down (as in BBRv1), and, unlike BBRv1, a lost
//!   packet counts as delivered in the delivery-rate samples. With random
//!   loss p after the bottleneck, BBRv1's samples measure C·(1 − p), it
//!   paces at that, and with p above 20 % (where the 1.25 probing gain times
//!   1 − p falls below 1) the estimate spirals down to nothing; counting
//!   lost packets measures the rate through the bottleneck instead. Coded
//!   transfers replace lost symbols, so this is the rate that matters. The
//!   window (2 BDP from the minimum RTT) still bounds the queue if losses
//!   are drops at a full queue.
//! * The phase offset at entry to ProbeBW is chosen deterministically from
//!   the round count, so simulations replay exactly.
//! * A standing queue cuts the estimate at once. BBRv1 holds its bandwidth
//!   maximum for 10 rounds, and a round lasts as long as the queue it builds:
//!   after a drop from 20 to 2 Mbit/s it kept pacing at 20 Mbit/s, and a
//!   2-BDP window of the old rate kept 800 ms queued, for over 5 s. When
//!   every RTT sample of a whole ProbeBW round is above min RTT +
//!   max(min RTT / 2, 5 ms), no packet of the round found the queue empty:
//!   the estimate becomes the rate data was acknowledged at over that round
//!   (a backlogged bottleneck's rate), and the cycle moves to its draining
//!   phase. The rate is measured since the last near-minimum sample, or
//!   since the last silence of more than a min RTT (an outage says nothing
//!   about the drain rate). Only queues we build count: if ACKs come back at
//!   80 % or more of the estimate, the queue is not ours.
//! * The gain cycle has 4 phases instead of 8, so a probe comes every 4
//!   min RTTs: vehicular capacity changes faster than BBRv1's 8-RTT cycle
//!   assumes.
//! * A sample within 1/64 (or 200 µs) of the minimum refreshes the min-RTT
//!   stamp: the queue was seen empty, so ProbeRTT need not confirm it.
//! * A probe that finds much more bandwidth restarts Startup. BBRv1 grows
//!   at most 25 % per 8-round cycle, so it took seconds to climb back from
//!   2 to 20 Mbit/s. If the bandwidth after a 1.25 probe is 10 % above the
//!   estimate before it, the pipe is not full, and Startup's doubling finds
//!   the new capacity in a few rounds.

use std::collections::VecDeque;
use std::time::Duration;

use super::{pacing_base, transmit_time, AckEvent, RateController};
use crate::recovery::SentPacket;

const STARTUP_GAIN: f64 = 2.885; // 2 / ln 2
const DRAIN_GAIN: f64 = 1.0 / STARTUP_GAIN;
const CWND_GAIN: f64 = 2.0;
const PROBE_BW_GAINS: [f64; 4] = [1.25, 0.75, 1.0, 1.0];
const BW_WINDOW_ROUNDS: u64 = 10;
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// A sample this close to the minimum (or 1/64 of it) shows an empty queue.
const MIN_RTT_TOLERANCE: Duration = Duration::from_micros(200);
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
/// A probe that raises the estimate this much restarts Startup.
const RESTART_GROWTH: f64 = 1.1;
/// RTT samples above min RTT + max(this, min RTT / 2) found a queue.
const STANDING_QUEUE_SLACK: Duration = Duration::from_millis(5);
/// ...and the queue is ours if acknowledgments come back slower than this
/// share of the estimate we pace at.
const STANDING_QUEUE_RATE: f64 = 0.8;

#[derive(Clone, Debug, PartialEq)]
pub struct BbrConfig {
    /// Bytes per full packet, for the minimum window and initial window.
    pub mss: u64,
    /// Packets in the initial window.
    pub initial_window_packets: u64,
    /// RTT assumed until the first sample, for the initial pacing rate.
    pub initial_rtt: Duration,
    /// The receiver acknowledges every `ack_every` ack-eliciting packets or
    /// `max_ack_delay` after the first: the window keeps room for two such
    /// batches (see `set_cwnd`). Defaults: `Config`'s, which both ends use.
    pub ack_every: u32,
    pub max_ack_delay: Duration,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            mss: 1472,
            initial_window_packets: 32,
            initial_rtt: Duration::from_millis(100),
            ack_every: 16,
            max_ack_delay: Duration::from_millis(5),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

#[derive(Clone, Copy, Debug)]
struct PacketState {
    pn: u64,
    /// Bytes delivered when it was sent, and when that count last moved.
    delivered: u64,
    delivered_time: Duration,
    first_sent_time: Duration,
    sent_time: Duration,
    app_limited: bool,
}

/// Windowed maximum over round counts (Kathleen Nichols' algorithm keeps
/// three samples; we keep the few that can still win, which is as exact).
#[derive(Clone, Debug, Default)]
struct MaxFilter {
    samples: VecDeque<(u64, u64)>,
}

impl MaxFilter {
    fn update(&mut self, round: u64, value: u64, window: u64) {
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((round, value));
        while self
            .samples
            .front()
            .is_some_and(|&(r, _)| r + window <= round)
        {
            self.samples.pop_front();
        }
    }

    fn get(&self) -> u64 {
        self.samples.front().map_or(0, |&(_, v)| v)
    }

    fn reset(&mut self, round: u64, value: u64) {
        self.samples.clear();
        self.samples.push_back((round, value));
    }
}

#[derive(Clone)]
pub struct Bbr {
    cfg: BbrConfig,
    mode: Mode,
    btl_bw: MaxFilter,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Duration,
    delivered: u64,
    delivered_time: Duration,
    first_sent_time: Duration,
    round: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bw: u64,
    full_bw_count: u32,
    filled_pipe: bool,
    cycle_index: usize,
    cycle_stamp: Duration,
    /// The estimate when the current probe (gain 1.25) began.
    bw_before_probe: u64,
    /// The last acknowledgment.
    last_ack_at: Duration,
    /// When a standing queue last cut the estimate.
    cut_at: Duration,
    /// The last RTT sample near the minimum, and the delivered count then.
    low_rtt_at: Duration,
    low_rtt_delivered: u64,
    probe_rtt_done: Option<Duration>,
    probe_rtt_round_done: bool,
    prior_cwnd: u64,
    app_limited_until: u64,
    in_flight: u64,
    packets: VecDeque<PacketState>,
    pacing_rate: u64,
    cwnd: u64,
    next_send: Option<Duration>,
}

impl Bbr {
    pub fn new(cfg: BbrConfig) -> Bbr {
        let cwnd = cfg.mss * cfg.initial_window_packets;
        let pacing_rate = (STARTUP_GAIN * cwnd as f64 / cfg.initial_rtt.as_secs_f64()) as u64;
        Bbr {
            cfg,
            mode: Mode::Startup,
            btl_bw: MaxFilter::default(),
            min_rtt: None,
            min_rtt_stamp: Duration::ZERO,
            delivered: 0,
            delivered_time: Duration::ZERO,
            first_sent_time: Duration::ZERO,
            round: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: 0,
            full_bw_count: 0,
            filled_pipe: false,
            cycle_index: 0,
            cycle_stamp: Duration::ZERO,
            bw_before_probe: 0,
            low_rtt_at: Duration::ZERO,
            cut_at: Duration::ZERO,
            last_ack_at: Duration::ZERO,
            low_rtt_delivered: 0,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0,
            app_limited_until: 0,
            in_flight: 0,
            packets: VecDeque::new(),
            pacing_rate,
            cwnd,
            next_send: None,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Bottleneck bandwidth estimate, bytes/s.
    pub fn bandwidth(&self) -> u64 {
        self.btl_bw.get()
    }

    fn bdp(&self, gain: f64) -> u64 {
        match self.min_rtt {
            Some(rtt) if self.btl_bw.get() > 0 => {
                (gain * self.btl_bw.get() as f64 * rtt.as_secs_f64()) as u64
            }
            _ => self.cfg.mss * self.cfg.initial_window_packets,
        }
    }

    fn min_window(&self) -> u64 {
        4 * self.cfg.mss
    }

    fn pacing_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => STARTUP_GAIN,
            Mode::Drain => DRAIN_GAIN,
            Mode::ProbeBw => PROBE_BW_GAINS[self.cycle_index],
            Mode::ProbeRtt => 1.0,
        }
    }

    fn set_pacing_rate(&mut self) {
        let bw = self.btl_bw.get();
        if bw == 0 {
            return;
        }
        let rate = (self.pacing_gain() * bw as f64) as u64;
        // Until the pipe is filled the rate only grows (a low early sample
        // must not slow Startup).
        if self.filled_pipe || rate > self.pacing_rate {
            self.pacing_rate = rate.max(1);
        }
    }

    fn set_cwnd(&mut self) {
        let gain = if self.mode == Mode::Startup || self.mode == Mode::Drain {
            STARTUP_GAIN
        } else {
            CWND_GAIN
        };
        // Three packets of headroom for delayed and aggregated ACKs.
        let target = self.bdp(gain) + 3 * self.cfg.mss;
        self.cwnd = if self.mode == Mode::ProbeRtt {
            self.min_window()
        } else {
            target.max(self.min_window()).max(self.ack_batches())
        };
    }

    /// Room for four of the receiver's ACK batches. Where one batch is more
    /// than the BDP (tiny RTTs: loopback, a LAN) a window of 2 BDP closed
    /// before the receiver acknowledged, every round waited for its ACK
    /// timer, and the delivery rate that came of it kept the BDP, and so
    /// the window, that small: rlnc-bbr ran at 8 Mbit/s on loopback, and
    /// `convoy simulate --mode rlnc-bbr --rate 1gbit --delay 100us` at 0.9 %
    /// of the link. Two batches are the 2 BDP of a path whose round trip
    /// is one batch; two more cover the receiver's turnaround, which on a
    /// busy host is a scheduling delay rather than the path's RTT (on
    /// loopback, load 5-6 on 2 vCPUs: 650 Mbit/s with two, 1.1 Gbit/s with
    /// four). Where the BDP is larger (the simulated paths of the tests and
    /// the paper's experiments), 2 BDP is the larger and nothing changes.
    fn ack_batches(&self) -> u64 {
        let mss = self.cfg.mss.max(1);
        let in_delay = self.btl_bw.get() as f64 * self.cfg.max_ack_delay.as_secs_f64();
        let batch = (in_delay / mss as f64).ceil() as u64 + 1;
        4 * batch.min(u64::from(self.cfg.ack_every)) * mss
    }

    fn check_full_pipe(&mut self, app_limited: bool) {
        if self.filled_pipe || !self.round_start || app_limited {
            return;
        }
        let bw = self.btl_bw.get();
        if bw as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= FULL_BW_ROUNDS {
            self.filled_pipe = true;
        }
    }

    fn enter_probe_bw(&mut self, now: Duration) {
        self.mode = Mode::ProbeBw;
        // Any phase but the draining one (index 1).
        let start = (self.round % (PROBE_BW_GAINS.len() as u64 - 1)) as usize;
        self.cycle_index = if start >= 1 { start + 1 } else { 0 };
        self.cycle_stamp = now;
        self.bw_before_probe = self.btl_bw.get();
    }

    fn advance_cycle(&mut self, now: Duration) {
        let Some(min_rtt) = self.min_rtt else { return };
        let gain = PROBE_BW_GAINS[self.cycle_index];
        let elapsed = now.saturating_sub(self.cycle_stamp) > min_rtt;
        let bdp = self.bdp(1.0);
        let done = if gain > 1.0 {
            // Probing: stay until the extra data is really in flight.
            elapsed && self.in_flight >= self.bdp(gain)
        } else if gain < 1.0 {
            elapsed || self.in_flight <= bdp
        } else {
            elapsed
        };
        if !done {
            return;
        }
        self.cycle_index = (self.cycle_index + 1) % PROBE_BW_GAINS.len();
        self.cycle_stamp = now;
        if self.cycle_index == 0 {
            self.bw_before_probe = self.btl_bw.get();
        }
    }

    /// Has the last probe found much more bandwidth? Its samples arrive a
    /// round later, in the phases after it.
    fn check_probe_found_more(&mut self) {
        if self.btl_bw.get() as f64 >= RESTART_GROWTH * self.bw_before_probe as f64 {
            self.mode = Mode::Startup;
            self.filled_pipe = false;
            self.full_bw = self.btl_bw.get();
            self.full_bw_count = 0;
        }
    }

    /// Every RTT sample: has every packet for two min RTTs found a queue
    /// while we were sending faster than acknowledgments came back?
    fn check_standing_queue(&mut self, now: Duration, sample: Duration) {
        let Some(min_rtt) = self.min_rtt else { return };
        let slack = (min_rtt / 2).max(STANDING_QUEUE_SLACK);
        // After a silence (an outage, or idle), measure afresh: the silence
        // says nothing about the rate the bottleneck drains at.
        let ack_gap = now.saturating_sub(self.last_ack_at) > min_rtt;
        self.last_ack_at = now;
        if sample <= min_rtt + slack || self.mode != Mode::ProbeBw || ack_gap {
            self.low_rtt_at = now;
            self.low_rtt_delivered = self.delivered;
            return;
        }
        let elapsed = now.saturating_sub(self.low_rtt_at);
        if elapsed < 2 * min_rtt {
            return;
        }
        let acked_rate = (self.delivered - self.low_rtt_delivered) as f64 / elapsed.as_secs_f64();
        self.low_rtt_at = now;
        self.low_rtt_delivered = self.delivered;
        // A queue with acknowledgments arriving as fast as we send is not
        // ours to drain (another flow's, or our ACKs' on a busy return path).
        if acked_rate < STANDING_QUEUE_RATE * self.btl_bw.get() as f64 {
            self.btl_bw.reset(self.round, (acked_rate as u64).max(1));
            // Samples of packets sent before now span the old capacity;
            // later ones that beat the cut by 10 % restart Startup (LTE
            // capacity often comes back as fast as it went).
            self.cut_at = now;
            self.bw_before_probe = self.btl_bw.get();
            self.cycle_index = 1;
            self.cycle_stamp = now;
        }
    }

    fn update_rtt(&mut self, now: Duration, sample: Duration) {
        let expired = now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if self.min_rtt.is_none_or(|m| sample <= m) || expired {
            self.min_rtt = Some(sample);
            self.min_rtt_stamp = now;
        } else if self
            .min_rtt
            .is_some_and(|m| sample <= m + (m / 64).max(MIN_RTT_TOLERANCE))
        {
            // The queue was seen empty: no ProbeRTT needed to confirm it.
            self.min_rtt_stamp = now;
        }
        if expired && self.mode != Mode::ProbeRtt && self.min_rtt.is_some() {
            self.mode = Mode::ProbeRtt;
            self.prior_cwnd = self.cwnd;
            self.probe_rtt_done = None;
            self.probe_rtt_round_done = false;
        }
    }

    fn handle_probe_rtt(&mut self, now: Duration) {
        if self.mode != Mode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done {
            None if self.in_flight <= self.min_window() => {
                self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = self.delivered;
            }
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now >= done {
                    self.min_rtt_stamp = now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    if self.filled_pipe {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
            None => {}
        }
    }

    fn forget(&mut self, pn: u64) -> Option<PacketState> {
        let i = self.packets.binary_search_by_key(&pn, |p| p.pn).ok()?;
        self.packets.remove(i)
    }
}

impl RateController for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
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

    fn on_sent(&mut self, now: Duration, pn: u64, bytes: usize, bytes_in_flight: u64) {
        if self.in_flight == 0 {
            // Restarting from idle: the delivery clock starts now.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        self.in_flight = bytes_in_flight;
        self.packets.push_back(PacketState {
            pn,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            sent_time: now,
            app_limited: self.app_limited_until > self.delivered,
        });
        if self.packets.len() > 100_000 {
            self.packets.pop_front();
        }
        let gap = transmit_time(bytes as u64, self.pacing_rate);
        self.next_send = Some(pacing_base(self.next_send, now, gap, 1) + gap);
    }

    fn on_handshake_rtt(&mut self, now: Duration, rtt: Duration) {
        if self.min_rtt.is_some() {
            return;
        }
        self.min_rtt = Some(rtt);
        self.min_rtt_stamp = now;
        // Startup's first flight: the initial window over the measured RTT
        // (Linux BBR does the same with the SYN's RTT).
        let rate = STARTUP_GAIN * self.cwnd as f64 / rtt.as_secs_f64();
        self.pacing_rate = self.pacing_rate.max(rate as u64);
    }

    fn on_app_limited(&mut self, _now: Duration) {
        self.app_limited_until = self.delivered + self.in_flight.max(1);
    }

    fn on_ack(&mut self, e: &AckEvent<'_>) {
        self.in_flight = e.bytes_in_flight;
        self.round_start = false;
        let mut best: Option<(u64, bool)> = None;
        for p in e.acked {
            let Some(state) = self.forget(p.pn) else {
                continue;
            };
            self.delivered += u64::from(p.bytes);
            self.delivered_time = e.now;
            let sample = e.now.saturating_sub(state.sent_time);
            if state.delivered >= self.next_round_delivered {
                self.next_round_delivered = self.delivered;
                self.round += 1;
                self.round_start = true;
            }
            self.check_standing_queue(e.now, sample);
            self.update_rtt(e.now, sample);
            // Delivery rate: data delivered over the longer of the send and
            // ack intervals (the paper's definition, which does not
            // overestimate when ACKs arrive compressed).
            let send_elapsed = state.sent_time.saturating_sub(state.first_sent_time);
            let ack_elapsed = e.now.saturating_sub(state.delivered_time);
            let interval = send_elapsed.max(ack_elapsed);
            if interval.is_zero() {
                continue;
            }
            self.first_sent_time = state.sent_time;
            if state.sent_time < self.cut_at {
                continue;
            }
            let rate = ((self.delivered - state.delivered) as f64 / interval.as_secs_f64()) as u64;
            if best.is_none_or(|(r, _)| rate > r) {
                best = Some((rate, state.app_limited));
            }
        }
        let app_limited = best.is_some_and(|(_, a)| a);
        if let Some((rate, limited)) = best {
            // App-limited samples only count when they raise the estimate.
            if !limited || rate > self.btl_bw.get() {
                self.btl_bw.update(self.round, rate, BW_WINDOW_ROUNDS);
            }
        }
        self.check_full_pipe(app_limited);
        match self.mode {
            Mode::Startup if self.filled_pipe => self.mode = Mode::Drain,
            Mode::Drain if self.in_flight <= self.bdp(1.0) => self.enter_probe_bw(e.now),
            Mode::ProbeBw => {
                self.check_probe_found_more();
                self.advance_cycle(e.now);
            }
            _ => {}
        }
        if self.mode == Mode::Drain && self.in_flight <= self.bdp(1.0) {
            self.enter_probe_bw(e.now);
        }
        self.handle_probe_rtt(e.now);
        self.set_pacing_rate();
        self.set_cwnd();
    }

    fn on_loss(&mut self, _now: Duration, lost: &[SentPacket]) {
        for p in lost {
            // A lost packet still crossed the bottleneck (radio losses
            // happen after it), so it counts as delivered for the rate
            // model; see the module notes.
            if self.forget(p.pn).is_some() {
                self.delivered += u64::from(p.bytes);
            }
        }
    }

    fn rate(&self) -> u64 {
        self.pacing_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::bottleneck::{drive, Bottleneck};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn finds_the_bottleneck_and_keeps_the_queue_small() {
        let mut bbr = Bbr::new(BbrConfig::default());
        let rate = 2_500_000; // 20 Mbit/s
        drive(
            &mut bbr,
            &Bottleneck::new(rate, ms(40)),
            Duration::from_secs(5),
        );
        assert_eq!(bbr.mode(), Mode::ProbeBw);
        let bw = bbr.bandwidth() as f64;
        assert!((bw / rate as f64 - 1.0).abs() < 0.05, "bandwidth {bw}");
        // cwnd = 2 BDP + headroom.
        let bdp = rate as f64 * 0.040;
        let cwnd = bbr.window().unwrap() as f64;
        assert!(
            cwnd > 1.9 * bdp && cwnd < 2.2 * bdp + 4.0 * 1472.0,
            "cwnd {cwnd}, bdp {bdp}"
        );
    }

    #[test]
    fn the_window_holds_four_ack_batches_when_the_bdp_is_tiny() {
        let mut bbr = Bbr::new(BbrConfig::default());
        // 1 Gbit/s, 50 µs: the BDP (6 kB) is a fraction of one batch of 16.
        drive(
            &mut bbr,
            &Bottleneck::new(125_000_000, Duration::from_micros(50)),
            ms(200),
        );
        assert!(
            bbr.bandwidth() > 100_000_000,
            "bandwidth {}",
            bbr.bandwidth()
        );
        assert!(bbr.window().unwrap() >= 4 * 16 * 1472);
    }

    #[test]
    fn max_filter_forgets_after_the_window() {
        let mut f = MaxFilter::default();
        f.update(0, 100, 10);
        f.update(5, 50, 10);
        assert_eq!(f.get(), 100);
        f.update(10, 40, 10);
        assert_eq!(f.get(), 50);
        f.update(11, 60, 10);
        assert_eq!(f.get(), 60);
    }
}
