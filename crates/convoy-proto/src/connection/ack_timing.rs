//! When the receiver acknowledges: after `ack_every` ack-eliciting packets,
//! or `max_ack_delay` after the first one not yet acknowledged, but never
//! fewer than [`ACK_BATCH`] packets when the rest of the batch is due
//! within [`BATCH_HOLD_MAX`] of its first.
//!
//! Why batches: below about 10 Mbit/s full packets arrive more than a
//! quarter of `max_ack_delay` (5 ms) apart, so the timer alone
//! acknowledged every packet below 2.5 Mbit/s and every second or third
//! above it, and the feedback packets (about 78 bytes on the air) came to
//! 2-6 % of the payload between 1 and 5 Mbit/s (`convoy simulate --rate
//! R`), where TCP's delayed ACK acknowledges every second segment. On a
//! cellular link the feedback is also the other direction's grants.
//! Holding an acknowledgment until the batch is in cuts that, for a peer
//! that reads receive times (Tide, background; see
//! [`AckTiming::batches`]). The hold is bounded twice: only while the
//! packets' spacing says the next one comes soon (below about 0.9 Mbit/s
//! the spacing is longer and every packet is acknowledged after
//! `max_ack_delay` as before, so a slow link's sender does not wait), and
//! never past [`BATCH_HOLD_MAX`] (the last packet of a burst waits at most
//! that). The sender subtracts the reported delay from its RTT samples,
//! and Tide reads the peer's receive times, which the hold does not move.

use std::time::Duration;

/// The longest an acknowledgment waits for the rest of its batch, from the
/// batch's first packet: the RTT sample's ack-delay adjustment is capped
/// at 4 × `max_ack_delay` (20 ms by default), so a longer hold would
/// inflate RTT samples.
pub(crate) const BATCH_HOLD_MAX: Duration = Duration::from_millis(20);

/// The packets an acknowledgment waits for when they come within
/// [`BATCH_HOLD_MAX`], on a lone path. Two halved the feedback between 0.9
/// and 2.5 Mbit/s; four halves it again there and thins it up to 10
/// Mbit/s, where the 5 ms delay already covers four.
pub(crate) const ACK_BATCH: u32 = 4;

/// The batch on several paths: a pair. The receiver's spacing then mixes
/// the paths' packets, so a slow path's packet waits for the fast path's
/// to make its batch, while its sender allows for the slow path's own
/// spacing; with batches of 4 a 0.8 Mbit/s Wi-Fi at 10 % loss behind a
/// 2.5 s queue turned suspect five times in 10 s beside LTE
/// (`tests/multipath.rs`).
pub(crate) const MULTIPATH_ACK_BATCH: u32 = PAIR;

/// Two packets an acknowledgment: what TCP's delayed ACK does.
const PAIR: u32 = 2;

/// The batch for a connection with `paths` paths.
pub(crate) fn ack_batch(paths: usize) -> u32 {
    if paths > 1 {
        MULTIPATH_ACK_BATCH
    } else {
        ACK_BATCH
    }
}

/// The longest the peer may hold an acknowledgment when our packets leave
/// `spacing` apart: what our probe timeouts must allow for. Without it a
/// 1 Mbit/s transfer's timeouts fired while the first packet of each
/// batch waited for the rest, and Tide went silent for nothing. Twice the
/// hold our spacing implies (the batch's remaining packets and half a
/// spacing more), as the link may space them wider than we pace; allowing
/// the whole 20 ms wherever a hold could happen moved the reader's p95 at
/// 3 Mbit/s and 2 % loss by +16 ms, twice the pair's hold by +8, both
/// within the spread that any change of timing gives it there (at 2
/// Mbit/s this was 7 ms better than no allowance; `convoy simulate`,
/// seeds 1-10). A batch that comes in within the ACK delay is held no
/// longer than a pair, so it is allowed for as a pair: allowing 7
/// spacings at 10 Mbit/s (8.2 ms against 5) lengthened the probe timeouts
/// that find a link again after an outage both ways, and the second
/// after it carried 4.95 Mbit/s of 10 (`tests/stall.rs`, bound 5).
pub(crate) fn peer_ack_delay(spacing: Duration, max_ack_delay: Duration, batch: u32) -> Duration {
    let batch_in = spacing * (2 * batch - 1) / 2;
    let held = if batch_in <= max_ack_delay {
        PAIR
    } else {
        batch
    };
    (spacing * (2 * held - 1)).clamp(max_ack_delay, BATCH_HOLD_MAX.max(max_ack_delay))
}

/// Gaps longer than this between ack-eliciting packets are pauses (the
/// sender had nothing to send), not the link's spacing.
const GAP_CEILING: Duration = Duration::from_millis(200);

#[derive(Clone, Debug, Default)]
pub(crate) struct AckTiming {
    /// Whether an acknowledgment may wait for its batch: only for a peer
    /// that reads receive times (Tide, background). RLNC+BBR's sender takes
    /// its delivery rate from when ACKs arrive, and with pairs it paced a
    /// 2 Mbit/s link at 1.79 (`convoy-sim` `rlnc_bbr`, bound 1.8).
    pub(crate) batches: bool,
    /// How many packets a batch holds ([`ack_batch`]).
    pub(crate) batch: u32,
    /// Ack-eliciting packets received since the last ACK written.
    pending: u32,
    /// When the first of them arrived.
    first_at: Option<Duration>,
    /// When the newest ack-eliciting packet arrived.
    last_at: Option<Duration>,
    /// Their smoothed spacing (7/8 old, 1/8 new), pauses left out; `None`
    /// until two arrived less than a pause apart.
    gap: Option<Duration>,
}

impl AckTiming {
    pub(crate) fn on_eliciting(&mut self, now: Duration) {
        if let Some(last) = self.last_at {
            let sample = now.saturating_sub(last);
            if sample <= GAP_CEILING {
                self.gap = Some(self.gap.map_or(sample, |g| (g * 7 + sample) / 8));
            }
        }
        self.last_at = Some(now);
        if self.pending == 0 {
            self.first_at = Some(now);
        }
        self.pending += 1;
    }

    /// Ack-eliciting packets not yet acknowledged.
    #[cfg(test)]
    fn pending(&self) -> u32 {
        self.pending
    }

    /// When the pending packets must be acknowledged at the latest.
    pub(crate) fn deadline(&self, max_ack_delay: Duration) -> Option<Duration> {
        let first = self.first_at.filter(|_| self.pending > 0)?;
        let last = self.last_at.unwrap_or(first);
        let hold = match self.gap {
            // The batch's next packet is expected within the hold: wait for
            // it, a little past its expected time (its arrival makes the
            // ACK due at once if the usual delay has passed and the batch
            // is in, or if the one after it is not expected in time).
            Some(gap) if self.batches && self.pending < self.batch => {
                let next = last.saturating_sub(first) + gap * 3 / 2;
                if next <= BATCH_HOLD_MAX {
                    next.max(max_ack_delay)
                } else {
                    max_ack_delay
                }
            }
            _ => max_ack_delay,
        };
        Some(first + hold)
    }

    /// Whether an ACK is due now.
    pub(crate) fn due(&self, now: Duration, ack_every: u32, max_ack_delay: Duration) -> bool {
        self.pending > 0
            && (self.pending >= ack_every || self.deadline(max_ack_delay).is_some_and(|d| now >= d))
    }

    /// An ACK was written: nothing is pending.
    pub(crate) fn on_ack_written(&mut self) {
        self.pending = 0;
        self.first_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(5);

    fn batched() -> AckTiming {
        AckTiming {
            batches: true,
            batch: ACK_BATCH,
            ..Default::default()
        }
    }

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// Packets `spacing` apart, each ACK taken the moment it is due;
    /// returns how many packets each ACK covered.
    fn packets_per_ack(spacing: Duration, packets: u32) -> Vec<u32> {
        packets_per_ack_of(batched(), spacing, packets)
    }

    fn packets_per_ack_of(mut t: AckTiming, spacing: Duration, packets: u32) -> Vec<u32> {
        let mut covered = Vec::new();
        let mut now = Duration::ZERO;
        for _ in 0..packets {
            // ACKs whose deadline passes before the next arrival.
            if let Some(d) = t.deadline(DELAY).filter(|&d| d < now) {
                assert!(t.due(d, 16, DELAY));
                covered.push(t.pending());
                t.on_ack_written();
            }
            t.on_eliciting(now);
            if t.due(now, 16, DELAY) {
                covered.push(t.pending());
                t.on_ack_written();
            }
            now += spacing;
        }
        covered
    }

    #[test]
    fn fast_packets_are_acknowledged_in_batches_of_the_delay() {
        // 1 ms apart: the 5 ms timer covers 5 or 6 at a time.
        let acks = packets_per_ack(ms(1), 100);
        assert!(
            acks.iter().skip(1).all(|&n| (5..=6).contains(&n)),
            "{acks:?}"
        );
    }

    #[test]
    fn packets_10_ms_apart_are_acknowledged_in_pairs() {
        // A third would come after the hold's ceiling.
        let acks = packets_per_ack(ms(10), 40);
        // The first has no spacing to go by yet.
        assert!(acks.iter().skip(2).all(|&n| n == 2), "{acks:?}");
    }

    #[test]
    fn packets_4_ms_apart_are_acknowledged_in_batches() {
        // 3 Mbit/s: the timer alone would take two at a time.
        let acks = packets_per_ack(ms(4), 80);
        assert!(acks.iter().skip(2).all(|&n| n == ACK_BATCH), "{acks:?}");
    }

    #[test]
    fn on_several_paths_packets_4_ms_apart_are_acknowledged_in_pairs() {
        let t = AckTiming {
            batch: ack_batch(2),
            ..batched()
        };
        let acks = packets_per_ack_of(t, ms(4), 80);
        assert!(acks.iter().skip(2).all(|&n| n == 2), "{acks:?}");
        assert_eq!(peer_ack_delay(ms(4), DELAY, ack_batch(2)), ms(12));
    }

    #[test]
    fn packets_7_ms_apart_are_acknowledged_in_threes() {
        // The fourth would come 21 ms after the first: past the ceiling.
        let acks = packets_per_ack(ms(7), 60);
        assert!(acks.iter().skip(2).all(|&n| n == 3), "{acks:?}");
    }

    #[test]
    fn sparse_packets_are_acknowledged_alone_after_the_usual_delay() {
        let mut t = batched();
        t.on_eliciting(ms(0));
        t.on_ack_written();
        t.on_eliciting(ms(50));
        assert_eq!(t.deadline(DELAY), Some(ms(55)));
        t.on_ack_written();
        t.on_eliciting(ms(100));
        assert_eq!(t.deadline(DELAY), Some(ms(105)), "50 ms apart: no hold");
    }

    #[test]
    fn the_hold_never_passes_its_ceiling() {
        let mut t = batched();
        for i in 0..20 {
            t.on_eliciting(ms(13 * i));
            if i < 19 {
                t.on_ack_written();
            }
        }
        let d = t.deadline(DELAY).unwrap() - ms(13 * 19);
        assert!(d <= BATCH_HOLD_MAX && d >= DELAY, "{d:?}");
        // Spacing of 14 ms asks for 21 ms: over the ceiling, no hold.
        let mut t = batched();
        for i in 0..20 {
            t.on_eliciting(ms(14 * i));
            if i < 19 {
                t.on_ack_written();
            }
        }
        assert_eq!(t.deadline(DELAY), Some(ms(14 * 19) + DELAY));
    }

    #[test]
    fn a_pause_does_not_count_as_the_spacing() {
        let mut t = batched();
        t.on_eliciting(ms(0));
        t.on_eliciting(ms(10));
        t.on_ack_written();
        t.on_eliciting(ms(5_000));
        // The 5 s pause is not a spacing sample: 10 ms still is.
        assert_eq!(t.deadline(DELAY), Some(ms(5_015)));
    }

    #[test]
    fn the_sender_allows_for_the_hold_where_packets_leave_apart() {
        // 20 Mbit/s: 0.6 ms apart, acknowledged in batches of the delay.
        assert_eq!(
            peer_ack_delay(Duration::from_micros(600), DELAY, ACK_BATCH),
            DELAY
        );
        // 10 Mbit/s: 1.2 ms apart, a batch in 4.2 ms, within the delay:
        // held as long as a pair.
        assert_eq!(
            peer_ack_delay(Duration::from_micros(1_200), DELAY, ACK_BATCH),
            DELAY
        );
        // 5 Mbit/s: 2.4 ms apart, a batch in 8.4 ms, twice that allowed.
        assert_eq!(
            peer_ack_delay(Duration::from_micros(2_400), DELAY, ACK_BATCH),
            Duration::from_micros(16_800)
        );
        // 3 Mbit/s: 4 ms apart, a batch's first may wait up to the cap.
        assert_eq!(peer_ack_delay(ms(4), DELAY, ACK_BATCH), BATCH_HOLD_MAX);
        // 1 Mbit/s: 12 ms apart, a pair's first may wait up to the cap.
        assert_eq!(peer_ack_delay(ms(12), DELAY, ACK_BATCH), BATCH_HOLD_MAX);
        // 0.1 Mbit/s: no hold, but the bound stays conservative.
        assert_eq!(peer_ack_delay(ms(120), DELAY, ACK_BATCH), BATCH_HOLD_MAX);
    }

    #[test]
    fn without_batches_every_packet_is_acknowledged_after_the_delay() {
        let mut t = AckTiming::default();
        t.on_eliciting(ms(0));
        t.on_ack_written();
        t.on_eliciting(ms(10));
        assert_eq!(t.deadline(DELAY), Some(ms(15)));
    }

    #[test]
    fn ack_every_makes_it_due_at_once() {
        let mut t = batched();
        for i in 0..16 {
            t.on_eliciting(Duration::from_micros(10 * i));
        }
        assert!(t.due(Duration::from_micros(150), 16, DELAY));
        assert!(!batched().due(ms(100), 16, DELAY));
    }
}
