//! What the receiver's arrival times say about the forward path: the rate
//! the bottleneck delivers at, the base one-way delay, and how much of our
//! data stands in the bottleneck's queue.

use std::collections::VecDeque;
use std::time::Duration;

use crate::cc::PeerReceive;

/// The base one-way delay is the minimum over this long.
pub(super) const BASE_WINDOW: Duration = Duration::from_secs(30);
/// Arrivals this far apart while our data waited in the queue mean the
/// link delivered nothing: an outage (or a fade as deep), whose length
/// says nothing of the link's rate when it carries. Cellular links pause
/// for tens of milliseconds between scheduling bursts all the time; these
/// count (they are part of the rate). On a slow link the gap is at least
/// a few packets' time (`Tide::outage_gap`): at 0.1 Mbit/s one packet
/// takes 118 ms, and a 3G scheduler's pauses are longer still.
pub(super) const MIN_OUTAGE_GAP: Duration = Duration::from_millis(200);
/// A queue of at least this much behind a packet kept the link busy.
const BUSY_QUEUE_BYTES: u64 = 1000;

/// Minimum over a sliding time window (monotone deque).
#[derive(Clone, Debug, Default)]
struct WindowMin {
    samples: VecDeque<(Duration, i64)>,
}

impl WindowMin {
    fn update(&mut self, now: Duration, value: i64, window: Duration) {
        while self.samples.back().is_some_and(|&(_, v)| v >= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, value));
        while self.samples.front().is_some_and(|&(t, _)| t + window < now) {
            self.samples.pop_front();
        }
    }

    fn get(&self) -> Option<i64> {
        self.samples.front().map(|&(_, v)| v)
    }
}

/// One arrival report: when (on the peer's clock), bytes delivered by
/// then, and whether the link was busy since the report before: our data
/// stood in its queue, so every transmission opportunity was ours and the
/// bytes delivered over the interval measure the link, not our sending.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at: Duration,
    delivered: u64,
    /// Busy time and bytes delivered in it, summed over every interval
    /// up to this report (so a window's busy rate is two lookups, not a
    /// walk over the log on every acknowledgment).
    busy_time: Duration,
    busy_bytes: u64,
}

/// Delivery rate over the newest `window` of busy time (intervals when the
/// link was not busy, an outage, or us sending less than it carries, say
/// nothing about what it can carry). `None` with less than half a window
/// of busy time in the log.
fn busy_rate(log: &VecDeque<Arrival>, window: Duration) -> Option<u64> {
    let new = log.back()?;
    // The newest report at least `window` of busy time back, else the oldest.
    let i = log.partition_point(|a| new.busy_time.saturating_sub(a.busy_time) >= window);
    let old = log[i.saturating_sub(1)];
    let time = new.busy_time - old.busy_time;
    let bytes = new.busy_bytes - old.busy_bytes;
    (time >= window / 2 && !time.is_zero()).then(|| (bytes as f64 / time.as_secs_f64()) as u64)
}

/// Bytes delivered from report `old` to report `new` over the time
/// between their arrivals; `None` if they arrived at once.
fn delivered_rate(old: &Arrival, new: &Arrival) -> Option<u64> {
    let span = new.at.saturating_sub(old.at);
    (!span.is_zero()).then(|| ((new.delivered - old.delivered) as f64 / span.as_secs_f64()) as u64)
}

/// Delivery rate over the newest `window` of arrival time, busy or not:
/// what arrives now, whoever limits it.
fn arrival_rate(log: &VecDeque<Arrival>, window: Duration) -> Option<u64> {
    arrival_rate_spanning(log, window, window / 2)
}

/// Delivery rate over the newest `window` of arrival time, or over the
/// whole log if it is shorter, as long as that spans `min_span`.
fn arrival_rate_spanning(
    log: &VecDeque<Arrival>,
    window: Duration,
    min_span: Duration,
) -> Option<u64> {
    let new = log.back()?;
    let i = log.partition_point(|a| a.at + window < new.at);
    let old = log.get(i.saturating_sub(1))?;
    let rate = delivered_rate(old, new)?;
    (new.at.saturating_sub(old.at) >= min_span).then_some(rate)
}

/// Delivery rate over the newest `bytes` of arrivals, spanning at least
/// `min_span`: the short window sized by what the link carries now, not by
/// the estimate of it (`Windows::short_bytes`).
fn rate_over_bytes(log: &VecDeque<Arrival>, bytes: u64, min_span: Duration) -> Option<u64> {
    let new = log.back()?;
    let by_bytes = log.partition_point(|a| new.delivered - a.delivered >= bytes);
    let by_span = log.partition_point(|a| a.at + min_span <= new.at);
    let old = log.get(by_bytes.min(by_span).checked_sub(1)?)?;
    delivered_rate(old, new)
}

#[derive(Clone, Debug, Default)]
pub(super) struct PathEstimate {
    /// Bytes acknowledged so far.
    delivered: u64,
    /// Bytes sent so far, and (send time, bytes sent by then) per packet
    /// still of interest.
    sent_bytes: u64,
    sends: VecDeque<(Duration, u64)>,
    arrivals: VecDeque<Arrival>,
    /// How long arrival reports are kept (peer time).
    keep: Duration,
    /// One-way delay (peer arrival − our send, ns, any clock offset).
    base_owd: WindowMin,
    /// (our time, busy rate over the short window) of the recent samples.
    recent_short_busy: VecDeque<(Duration, u64)>,
    /// (our time, queue bytes) of the recent samples.
    recent_queue: VecDeque<(Duration, u64)>,
    /// The latest packet's queueing delay, and the bytes queued behind it.
    pub queue_delay: Duration,
    pub queue_bytes: u64,
    /// What arrives now (bytes/s over the short window), and the link's
    /// rate while it was busy (over the averaging window of busy time).
    pub rate_short: Option<u64>,
    pub rate_busy: Option<u64>,
    /// The link's rate while busy over the short window (None if it was
    /// not busy for half of it).
    pub rate_short_busy: Option<u64>,
    /// What arrived over the averaging window, busy or not: the link
    /// carries at least this.
    pub rate_arrived: Option<u64>,
    /// The link's rate while busy over the newest `Windows::coast` of busy
    /// time (or, with less busy time logged, what arrived over that long
    /// or since the log began, if that spans `Windows::short`).
    pub rate_coast: Option<u64>,
    /// What arrived over the newest `Windows::short_bytes`.
    pub rate_recent: Option<u64>,
    /// Arrival time of the newest report, and of the newest one that added
    /// busy time (peer clock).
    newest_at: Duration,
    busy_at: Duration,
    /// When our first data packet left: arrivals of packets sent before
    /// it are not logged.
    counted_from: Duration,
    /// The next send restarts the log as the first one does.
    recount: bool,
    /// Outage gaps in a row, each ended by an arrival (reset by a gap that
    /// measured busy time).
    silences: u32,
}

/// The spans the rates are read over, which the controller scales with
/// the link's packet time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Windows {
    /// What arrives now.
    pub short: Duration,
    /// The averaging window of busy time.
    pub avg: Duration,
    /// An arrival gap longer than this, with our data queued, is an outage.
    pub outage_gap: Duration,
    /// Two outage gaps in a row, with a delivery between them, mean the
    /// link fell to a trickle: its rate is what trickles through.
    pub trickle: bool,
    /// What arrives is also read over this many bytes (and at least
    /// `short_floor`), `PathEstimate::rate_recent`, which only sizes the
    /// windows: `short` is sized from the estimate, and after a slow spell
    /// it spans seconds, so a link back at its rate was read as slow until
    /// those seconds had passed. Zero: not read.
    pub short_bytes: u64,
    pub short_floor: Duration,
    /// The link's rate over this much busy time predicts what it carries
    /// while the sender is blind (coasting).
    pub coast: Duration,
}

impl PathEstimate {
    pub fn on_sent(&mut self, now: Duration, bytes: usize) {
        let recount = std::mem::take(&mut self.recount);
        if self.sent_bytes == 0 || recount {
            // The rates are read from our data's arrivals only. The
            // handshake's last packets are acknowledged too, and came
            // before a pause (the start pair's wait for its report, an
            // application that writes a while after connecting): the
            // first reading spanned it, 10 kB over 56 ms, 1.5 Mbit/s on a
            // 20 Mbit/s link, which start-up took rounds to grow out of
            // (at 10 % loss, where the report was lost one time in four,
            // 0.3 % of the 10 MB transfer's goodput on average).
            self.arrivals.clear();
            self.counted_from = now;
        }
        self.sent_bytes += bytes as u64;
        self.sends.push_back((now, self.sent_bytes));
    }

    /// Reads the rates from the next send's arrivals on, as from the
    /// first: what was sent before came ahead of a pause the sender chose
    /// (a provisional first flight, then the wait for the start pair's
    /// report), which is not the link's.
    pub fn count_from_next_send(&mut self) {
        self.recount = true;
    }

    /// Forgets the rates, not the base delay: the next send's arrivals
    /// are read as the first flight's (`Tide::restart_after_idle`).
    pub fn forget_rates(&mut self) {
        self.recount = true;
        self.rate_short = None;
        self.rate_busy = None;
        self.rate_short_busy = None;
        self.rate_arrived = None;
        self.rate_coast = None;
        self.rate_recent = None;
        self.recent_short_busy.clear();
        self.silences = 0;
    }

    pub fn on_acked(&mut self, bytes: u64) {
        self.delivered += bytes;
    }

    /// Bytes sent by time `t` (of packets still in the log).
    fn sent_by(&self, t: Duration) -> Option<u64> {
        let i = self.sends.partition_point(|&(s, _)| s <= t);
        i.checked_sub(1).map(|i| self.sends[i].1)
    }

    /// One arrival time from the peer.
    pub fn on_peer_receive(&mut self, now: Duration, r: PeerReceive, w: Windows) {
        if r.sent >= self.counted_from {
            self.log_arrival(now, r, w);
        }
        let owd = r.received.as_nanos() as i64 - r.sent.as_nanos() as i64;
        self.base_owd.update(now, owd, BASE_WINDOW);
        let base = self.base_owd.get().unwrap_or(owd);
        self.queue_delay = Duration::from_nanos((owd - base).max(0) as u64);
        // The packet waited `queue_delay` beyond the base: what we sent in
        // that time had reached the bottleneck and stood behind it when it
        // left. Sends before it are of no more use.
        let at = self.sent_by(r.sent).unwrap_or(self.sent_bytes);
        let behind = self.sent_by(r.sent + self.queue_delay).unwrap_or(at);
        self.queue_bytes = behind.saturating_sub(at);
        let first = self.sends.partition_point(|&(s, _)| s < r.sent);
        self.sends.drain(..first.saturating_sub(1));
        self.recent_queue.push_back((now, self.queue_bytes));
    }

    /// One arrival in the log the rates are read from.
    fn log_arrival(&mut self, now: Duration, r: PeerReceive, w: Windows) {
        let Windows {
            short,
            avg,
            outage_gap,
            trickle,
            short_bytes,
            short_floor,
            coast,
        } = w;
        // Busy since the last report if a queue stood behind the packet of
        // that report (the queue had not run dry when it left).
        let busy = self.queue_bytes >= BUSY_QUEUE_BYTES;
        let (mut busy_time, mut busy_bytes) = (Duration::ZERO, 0);
        if let Some(prev) = self.arrivals.back() {
            let gap = r.received.saturating_sub(prev.at);
            (busy_time, busy_bytes) = (prev.busy_time, prev.busy_bytes);
            // A silence of the link while our data waited is an outage, not
            // its capacity: after it, the link carries what it did before.
            if busy && gap <= outage_gap {
                busy_time += gap;
                busy_bytes += self.delivered - prev.delivered;
                self.busy_at = r.received;
                self.silences = 0;
            } else if busy {
                self.silences += 1;
            } else {
                self.silences = 0;
            }
        }
        self.newest_at = r.received;
        self.arrivals.push_back(Arrival {
            at: r.received,
            delivered: self.delivered,
            busy_time,
            busy_bytes,
        });
        // Busy time may be spread thin: keep several windows of reports.
        self.keep = (4 * avg).max(short).max(coast).max(Duration::from_secs(1));
        while self
            .arrivals
            .get(1)
            .is_some_and(|a| a.at + self.keep <= r.received)
        {
            self.arrivals.pop_front();
        }
        self.rate_recent = (short_bytes > 0)
            .then(|| rate_over_bytes(&self.arrivals, short_bytes, short_floor))
            .flatten();
        self.rate_short = arrival_rate(&self.arrivals, short).or(self.rate_short);
        self.rate_busy = busy_rate(&self.arrivals, avg).or(self.rate_busy);
        self.rate_arrived = arrival_rate(&self.arrivals, avg).or(self.rate_arrived);
        self.rate_coast = busy_rate(&self.arrivals, coast)
            .or_else(|| arrival_rate_spanning(&self.arrivals, coast, short));
        self.rate_short_busy = busy_rate(&self.arrivals, short);
        // Only a report that measured busy time says what the link
        // sustains now: the newest busy window may lie a second back, and
        // repeated on every report of a link fallen to a trickle it held
        // the rate of before the fall: in the multipath grid, a Wi-Fi
        // fallen to 1/300 of its 30 Mbit/s was paced at 14-58 Mbit/s for
        // 400 ms after, and the reader waited 1.1 s for what it queued.
        if let (Some(r), true) = (self.rate_short_busy, self.busy_at == r.received) {
            self.recent_short_busy.push_back((now, r));
        }
        if trickle && self.silences >= 2 {
            self.fall_to_trickle();
        }
    }

    /// The link delivered a packet between two outage gaps, and nothing
    /// busy since: it has not paused, it carries a packet now and then (a
    /// deep fade). Every such gap reads as an outage, so the busy rate
    /// from before the fall would stand, and the sender went on at half of
    /// it into a link carrying a twentieth: seconds of queue (a drive
    /// scaled to 0.2 Mbit/s fell to a packet or two a second for ten
    /// seconds, and its p95 queueing reached 6 s). Its rate is what
    /// arrived over the two gaps, and the log starts again from here, so
    /// that no window reaches back into the fast spell.
    fn fall_to_trickle(&mut self) {
        let n = self.arrivals.len();
        let (Some(old), Some(&new)) = (
            n.checked_sub(3).map(|i| self.arrivals[i]),
            self.arrivals.back(),
        ) else {
            return;
        };
        let Some(rate) = delivered_rate(&old, &new) else {
            return;
        };
        self.arrivals.clear();
        self.arrivals.push_back(new);
        self.rate_short = Some(rate);
        self.rate_busy = Some(rate);
        self.rate_arrived = Some(rate);
        self.rate_coast = Some(rate);
        self.rate_short_busy = None;
        self.recent_short_busy.clear();
        self.busy_at = new.at;
        self.silences = 0;
    }

    /// How long data has been arriving with no busy interval measured (a
    /// trickle whose packets arrive over `OUTAGE_GAP` apart reads as
    /// nothing but outages).
    pub fn busy_rate_age(&self) -> Duration {
        self.newest_at.saturating_sub(self.busy_at)
    }

    /// The lowest short-window busy rate over the last `span`: what the
    /// link has sustained for that long (a burst of a few milliseconds does
    /// not last a round trip; a capacity rise does).
    pub fn rate_sustained(&mut self, now: Duration, span: Duration) -> Option<u64> {
        while self
            .recent_short_busy
            .front()
            .is_some_and(|&(t, _)| t + span < now)
        {
            self.recent_short_busy.pop_front();
        }
        self.recent_short_busy.iter().map(|&(_, r)| r).min()
    }

    /// How far the link's service ran ahead of `rate` within any stretch
    /// of at most `horizon` of busy time in the log, bytes: the backlog a
    /// sender pacing at `rate` must keep queued for the link never to find
    /// the queue empty at a transmission opportunity in that stretch.
    ///
    /// A cellular scheduler serves in grants: a few packets in one
    /// millisecond, then nothing for several. Paced at the mean rate with
    /// a queue shorter than a grant, part of every grant goes unused. The
    /// excess is measured on busy intervals only (when our data stood in
    /// the queue, so every opportunity was ours), as the largest rise of
    /// `bytes − rate · time` over a window no longer than `horizon`
    /// (beyond it the controller has seen the change and moved its rate).
    pub fn service_excess(&self, rate: u64, horizon: Duration) -> u64 {
        let rate = rate as f64;
        let x = |a: &Arrival| a.busy_bytes as f64 - rate * a.busy_time.as_secs_f64();
        // Sliding-window minimum of x over the last `horizon` of busy time.
        let mut lows: VecDeque<(Duration, f64)> = VecDeque::new();
        let mut excess = 0.0f64;
        for a in &self.arrivals {
            let v = x(a);
            while lows
                .front()
                .is_some_and(|&(t, _)| t + horizon < a.busy_time)
            {
                lows.pop_front();
            }
            if let Some(&(_, low)) = lows.front() {
                excess = excess.max(v - low);
            }
            while lows.back().is_some_and(|&(_, w)| w >= v) {
                lows.pop_back();
            }
            lows.push_back((a.busy_time, v));
        }
        excess as u64
    }

    /// Forgets queue samples older than `span`.
    pub fn trim_queue(&mut self, now: Duration, span: Duration) {
        while self
            .recent_queue
            .front()
            .is_some_and(|&(t, _)| t + span < now)
        {
            self.recent_queue.pop_front();
        }
    }

    /// The bytes standing in the buffer now: the latest packet's wait at
    /// what the link delivers now (`fallback` before a short rate is
    /// measured). Not `queue_bytes`: what we sent during that wait counts
    /// drops too, and overstates a full buffer.
    pub fn standing_queue(&self, fallback: u64) -> u64 {
        let rate = self.rate_short_busy.or(self.rate_short).unwrap_or(fallback);
        (self.queue_delay.as_secs_f64() * rate as f64) as u64
    }

    /// The mean and the largest queue over the recent samples, bytes.
    pub fn queue_mean_max(&self) -> (u64, u64) {
        let n = self.recent_queue.len() as u64;
        if n == 0 {
            return (self.queue_bytes, self.queue_bytes);
        }
        let sum: u64 = self.recent_queue.iter().map(|&(_, q)| q).sum();
        let max = self.recent_queue.iter().map(|&(_, q)| q).max().unwrap_or(0);
        (sum / n, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const W: Windows = Windows {
        short: Duration::from_millis(40),
        avg: Duration::from_millis(200),
        outage_gap: MIN_OUTAGE_GAP,
        trickle: true,
        short_bytes: 0,
        short_floor: Duration::from_millis(40),
        coast: Duration::from_secs(1),
    };

    #[test]
    fn queue_bytes_are_what_was_sent_while_the_packet_waited() {
        let mut e = PathEstimate::default();
        // A packet of 1000 bytes every 10 ms from t = 0.
        for i in 0..20u64 {
            e.on_sent(ms(10 * i), 1000);
        }
        // Packet 0 sees the base delay (50 ms); packet 5 (sent at 50 ms)
        // arrives 30 ms late: packets sent at 60, 70 and 80 ms were queued.
        let recv = |pn: u64, extra: u64| PeerReceive {
            pn,
            sent: ms(10 * pn),
            received: ms(10 * pn + 50 + extra),
        };
        e.on_acked(1000);
        e.on_peer_receive(ms(100), recv(0, 0), W);
        assert_eq!((e.queue_delay, e.queue_bytes), (Duration::ZERO, 0));
        e.on_acked(5000);
        e.on_peer_receive(ms(200), recv(5, 30), W);
        assert_eq!(e.queue_delay, ms(30));
        assert_eq!(e.queue_bytes, 3000);
        // 5000 bytes delivered over 80 ms of arrivals, the link not busy
        // (nothing stood behind packet 0).
        assert_eq!(e.rate_short, Some(62_500));
        assert_eq!(e.rate_busy, None);
    }

    #[test]
    fn a_link_fallen_to_a_trickle_sustains_no_rate_from_before_its_fall() {
        let mut e = PathEstimate::default();
        for _ in 0..200 {
            e.on_sent(Duration::ZERO, 1000);
        }
        let report = |e: &mut PathEstimate, pn: u64, at: Duration, busy: bool| {
            e.queue_bytes = if busy { 10_000 } else { 0 };
            e.delivered += 1000;
            let r = PeerReceive {
                pn,
                sent: Duration::ZERO,
                received: at,
            };
            e.on_peer_receive(at, r, W);
        };
        // 100 ms busy at 1000 bytes a millisecond...
        for pn in 0..100 {
            report(&mut e, pn, ms(100 + pn), true);
        }
        assert_eq!(e.rate_sustained(ms(199), ms(50)), Some(1_000_000));
        // ...then a packet every 100 ms with nothing queued behind it.
        for k in 1..=5 {
            report(&mut e, 99 + k, ms(199 + 100 * k), false);
        }
        assert!(
            e.rate_short_busy.is_some(),
            "the busy window from before stays in the log"
        );
        assert_eq!(e.rate_sustained(ms(699), ms(50)), None);
    }

    /// Reports of 1000 bytes each, our data queued behind every one.
    fn queued_report(e: &mut PathEstimate, pn: u64, at: Duration, w: Windows) {
        e.queue_bytes = 10_000;
        e.on_acked(1000);
        let r = PeerReceive {
            pn,
            sent: Duration::ZERO,
            received: at,
        };
        e.on_peer_receive(at, r, w);
    }

    /// Coasting's rate: the link's over its last second of busy time. A
    /// peak of a few tens of milliseconds moves it little (the rate
    /// estimate follows such a peak at once), and a pause of a few hundred
    /// milliseconds not at all, where what merely arrived over the last
    /// second reads the pause as the link's rate. (After a pause longer
    /// than half a second the log holds too little busy time, and what
    /// arrived is read: holding the last busy reading instead measured
    /// worse, docs/PROTOCOL.md "Constants".)
    #[test]
    fn the_coasting_rate_is_the_last_busy_seconds_not_a_peak_or_a_pause() {
        let w = Windows {
            trickle: false,
            ..W
        };
        let mut e = PathEstimate::default();
        for _ in 0..400 {
            e.on_sent(Duration::ZERO, 1000);
        }
        let us = Duration::from_micros;
        // A second at 500 bytes a millisecond...
        for pn in 0..500 {
            queued_report(&mut e, pn, ms(100 + 2 * pn), w);
        }
        let before = e.rate_coast.unwrap();
        assert!((480_000..=520_000).contains(&before), "{before}");
        // ...then 40 ms at four times that...
        for k in 1..=80 {
            queued_report(&mut e, 499 + k, ms(1098) + us(500 * k), w);
        }
        let peak = e.rate_coast.unwrap();
        assert!(peak < 700_000, "a 40 ms peak moved it to {peak}");
        // ...then a 300 ms pause, and the link back at 500 bytes a
        // millisecond.
        for k in 1..=10 {
            queued_report(&mut e, 579 + k, ms(1438 + 2 * k), w);
        }
        let after = e.rate_coast.unwrap();
        assert!(
            after > 450_000,
            "the pause read as the link's rate: {after}"
        );
        let arrived = arrival_rate(&e.arrivals, w.coast).unwrap();
        assert!(
            arrived * 10 < after * 8,
            "what arrived {arrived}, busy {after}"
        );
    }

    #[test]
    fn two_outage_gaps_in_a_row_are_a_trickle_read_at_its_own_rate() {
        for trickle in [true, false] {
            let w = Windows { trickle, ..W };
            let mut e = PathEstimate::default();
            for _ in 0..400 {
                e.on_sent(Duration::ZERO, 1000);
            }
            // A second at 1000 bytes a millisecond...
            for pn in 0..1000 {
                queued_report(&mut e, pn, ms(100 + pn), w);
            }
            assert_eq!(e.rate_busy, Some(1_000_000));
            // ...then a packet every 250 ms: each gap an outage.
            for k in 1..=2 {
                queued_report(&mut e, 999 + k, ms(1099 + 250 * k), w);
            }
            if trickle {
                // 2000 bytes over the two gaps, and nothing from the fast
                // spell sustains.
                assert_eq!(e.rate_busy, Some(4_000));
                assert_eq!(e.rate_short, Some(4_000));
                assert_eq!(e.rate_sustained(ms(1599), ms(2000)), None);
            }
            // A packet 100 ms later, our data still queued: busy time, whose
            // window reaches back into the fast spell unless the log started
            // again at the fall.
            queued_report(&mut e, 1002, ms(1699), w);
            let busy = e.rate_busy.unwrap();
            if trickle {
                assert_eq!(busy, 10_000);
            } else {
                // Beside other paths the fast spell stays in the busy rate
                // (the controller reads the trickle from its age instead).
                assert!(busy > 100_000, "{busy}");
            }
        }
    }

    #[test]
    fn the_rate_over_a_few_packets_spans_the_bytes_and_the_floor() {
        let mut e = PathEstimate::default();
        for _ in 0..400 {
            e.on_sent(Duration::ZERO, 1000);
        }
        let w = Windows {
            short_bytes: 4000,
            ..W
        };
        // Arrivals 30 ms apart, then two 5 ms apart: the newest 40 ms hold
        // three packets, the newest 4000 bytes span 70 ms, and the rate is
        // read over the longer of the two.
        for (pn, at) in [0, 30, 60, 90, 120, 125, 130].into_iter().enumerate() {
            queued_report(&mut e, pn as u64, ms(at), w);
        }
        assert_eq!(e.rate_recent, Some(4000 * 1000 / 70));
    }

    #[test]
    fn a_link_back_from_a_trickle_is_read_over_a_few_packets() {
        // The windows a trickle of a packet every 500 ms sizes: 2 s short.
        let slow = Windows {
            short: ms(2000),
            avg: ms(8000),
            outage_gap: ms(2000),
            trickle: true,
            short_bytes: 4000,
            short_floor: ms(40),
            coast: ms(1000),
        };
        let mut e = PathEstimate::default();
        for _ in 0..400 {
            e.on_sent(Duration::ZERO, 1000);
        }
        for pn in 0..8 {
            queued_report(&mut e, pn, ms(500 * pn), slow);
        }
        assert_eq!(e.rate_short, Some(2_000));
        // The link is back at 1000 bytes a millisecond: 50 ms of it.
        for k in 1..=50 {
            queued_report(&mut e, 7 + k, ms(3500 + k), slow);
        }
        // Over the 2 s window, what arrives still reads slow; over the
        // newest 4 packets (and 40 ms), it reads the link.
        assert!(e.rate_short.unwrap() < 100_000, "{:?}", e.rate_short);
        assert_eq!(e.rate_recent, Some(1_000_000));
    }

    #[test]
    fn service_excess_is_the_backlog_a_grant_schedule_needs() {
        // A link that serves a grant of 4 packets of 1000 bytes every 8 ms
        // (0.5 MB/s), the 4 arriving 0.1 ms apart, each reported, with our
        // queue standing throughout.
        let mut e = PathEstimate::default();
        for _ in 0..400 {
            e.on_sent(Duration::ZERO, 1000);
        }
        for g in 0..50u64 {
            for k in 0..4u64 {
                e.queue_bytes = 10_000;
                e.on_acked(1000);
                let at = ms(100 + 8 * g) + Duration::from_micros(100 * k);
                let r = PeerReceive {
                    pn: 4 * g + k,
                    sent: Duration::ZERO,
                    received: at,
                };
                e.on_peer_receive(at, r, W);
            }
        }
        // Paced at the mean (500 kB/s), the last three packets of a grant
        // come 0.3 ms after its first: the service runs about three
        // packets ahead of the pace, and no further however long the
        // stretch.
        let at_mean = e.service_excess(500_000, ms(100));
        assert!((2_800..=3_000).contains(&at_mean), "{at_mean}");
        assert_eq!(e.service_excess(500_000, ms(1000)), at_mean);
        // Paced at half the link's rate, the excess grows with the horizon.
        let (short, long) = (
            e.service_excess(250_000, ms(16)),
            e.service_excess(250_000, ms(100)),
        );
        assert!(short < long && long > 20_000, "{short} {long}");
        // Nothing measured, nothing needed.
        assert_eq!(PathEstimate::default().service_excess(500_000, ms(100)), 0);
    }
}
