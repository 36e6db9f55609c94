//! The bottleneck's buffer, read from where losses happen.
//!
//! Tide holds a queue of D at the delivery rate, or what the link's
//! grants are measured to need. A drop-tail buffer smaller than that
//! (200 packets hold 21 ms at 110 Mbit/s) overflows all the time: on the
//! drive traces at eight times their rate 17 % of the packets died at the
//! queue. Worse, those drops looked like loss on the air (the queue
//! was short against the target) and raised the rate's loss correction,
//! which sent more into the full buffer.
//!
//! Loss on the air does not care how long the queue is; a full buffer
//! drops only when the queue is at its longest. So losses are counted in
//! two bands, by where the queue stood when each packet's fate was learnt:
//! at least `TOP_SHARE` of its peak over the last `PEAK_WINDOW`, or below.
//! The buffer overflows at about the peak when the queue loses at its top
//! and little below it, and either
//! * the top band loses clearly more than the lower one (a queue that
//!   swings, as on a cellular link), or
//! * the peak stands short of the target (a constant link whose buffer is
//!   full all the time has no lower band to compare with).
//!
//! Losses at the top are then drops, not air loss, and the queue target
//! is held to `TARGET_SHARE` of the ceiling until no drop was seen there
//! for `HOLD`. A queue held flat at the target, and a link that loses a
//! lot at any queue length, keep their losses as air loss. Only on a lone
//! path: beside others a path's losses can come without its
//! acknowledgments (a suspect path), and the multipath bounds were tuned
//! without it.

use std::time::Duration;

use super::sliding_max::SlidingMax;

/// The queue's peak is its largest reading over this long.
const PEAK_WINDOW: Duration = Duration::from_secs(1);
/// A queue at least this share of its peak is at the top.
const TOP_SHARE: f64 = 0.6;
/// A queue shorter than this is never at the top: a few packets stand
/// in any buffer, and a start-up's near-empty queue read a "ceiling" of
/// 265 bytes under 30 % random loss.
const MIN_TOP_BYTES: u64 = 8 * 1500;
/// Weight of one packet in each band's loss average.
const BAND_EWMA: f64 = 1.0 / 100.0;
/// The top band's loss rate over the lower one's that reads as overflow:
/// more than `OVERFLOW_FACTOR` times it and this much more.
const OVERFLOW_FACTOR: f64 = 3.0;
const OVERFLOW_EXCESS: f64 = 0.05;
/// The lower band must hold at least this share of packets to compare.
const MIN_LOW_SHARE: f64 = 0.2;
/// ...and lose at most this share: under heavy random loss the bands'
/// averages drift apart by chance (30 % loss read 0.09 below the top and
/// 0.3 at it), and a buffer that overflows shows as losses at the top of
/// a queue that loses little below it.
const MAX_LOW_LOSS: f64 = 0.03;
/// A peak below this share of the target is a queue short of it.
const BELOW_TARGET: f64 = 0.8;
/// The queue target under a known ceiling: room above it for a burst.
const TARGET_SHARE: f64 = 0.5;
/// A ceiling is kept this long after its last drop.
const HOLD: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub(super) struct Ceiling {
    /// The queue's largest reading (bytes) over `PEAK_WINDOW`.
    peaks: SlidingMax,
    /// Whether the latest queue reading was at the top.
    at_top: bool,
    loss_top: f64,
    loss_low: f64,
    /// Share of packets whose fate was learnt below the top: a queue held
    /// flat has no lower band to compare with.
    low_share: f64,
    /// The buffer's size in bytes of queue, and when a drop last showed it.
    known: Option<(u64, Duration)>,
}

impl Default for Ceiling {
    fn default() -> Ceiling {
        Ceiling {
            peaks: SlidingMax::new(PEAK_WINDOW),
            at_top: false,
            loss_top: 0.0,
            loss_low: 0.0,
            low_share: 0.0,
            known: None,
        }
    }
}

impl Ceiling {
    /// The queue's latest reading (bytes): the peak's window moves on.
    pub(super) fn on_queue(&mut self, now: Duration, queue: u64) {
        self.peaks.push(now, queue);
        let peak = self.peak();
        self.at_top = queue >= MIN_TOP_BYTES && queue as f64 >= TOP_SHARE * peak as f64;
        if self.known.is_some_and(|(_, t)| t + HOLD < now) {
            self.known = None;
        }
    }

    fn peak(&self) -> u64 {
        self.peaks.max()
    }

    fn count(&mut self, n: usize) {
        let keep = (1.0 - BAND_EWMA).powi(n as i32);
        let low = if self.at_top { 0.0 } else { 1.0 };
        self.low_share = self.low_share * keep + low * (1.0 - keep);
    }

    /// `n` packets arrived.
    pub(super) fn on_acked(&mut self, n: usize) {
        self.count(n);
        let band = if self.at_top {
            &mut self.loss_top
        } else {
            &mut self.loss_low
        };
        *band *= (1.0 - BAND_EWMA).powi(n as i32);
    }

    /// A packet was lost. Whether it died at a full buffer (then it is not
    /// loss on the air).
    pub(super) fn on_lost(&mut self, now: Duration, target: u64) -> bool {
        self.count(1);
        let band = if self.at_top {
            &mut self.loss_top
        } else {
            &mut self.loss_low
        };
        *band = *band * (1.0 - BAND_EWMA) + BAND_EWMA;
        if !self.at_top {
            return false;
        }
        let peak = self.peak().max(1);
        // A queue that loses at its top while it stands below the target:
        // the law asks for more queue than the buffer holds (a constant
        // link whose buffer is full all the time has no lower band).
        let short_of_target = (peak as f64) < BELOW_TARGET * target as f64;
        let overflow = self.loss_low <= MAX_LOW_LOSS
            && (short_of_target && self.loss_top > OVERFLOW_EXCESS
                || self.low_share >= MIN_LOW_SHARE
                    && self.loss_top > OVERFLOW_FACTOR * self.loss_low + OVERFLOW_EXCESS);
        if overflow {
            // Never lowered while it holds: the peak under the cap is the
            // cap's, not the buffer's.
            let bytes = self.known.map_or(peak, |(b, _)| b.max(peak));
            self.known = Some((bytes, now));
            return true;
        }
        // Under a known ceiling a loss with the queue up at it is another
        // drop there; one at the top of a lower queue (the target holds it
        // at half) is not, or random loss would walk the ceiling down.
        match self.known {
            Some((bytes, _)) if peak as f64 >= TOP_SHARE * bytes as f64 => {
                self.known = Some((bytes.max(peak), now));
                true
            }
            _ => false,
        }
    }

    /// `target` (bytes of queue) held below a known ceiling.
    pub(super) fn cap(&self, target: u64) -> u64 {
        match self.known {
            Some((bytes, _)) => target.min((TARGET_SHARE * bytes as f64) as u64),
            None => target,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// A queue that climbs to 297 kB and loses 5 packets of 100 at the
    /// top of each climb. Returns how many losses read as drops.
    fn sawtooth(c: &mut Ceiling, target: u64) -> usize {
        let mut dropped = 0;
        for i in 0..2000u64 {
            let q = (i % 100) * 3000;
            c.on_queue(ms(i), q);
            if q >= 285_000 {
                dropped += usize::from(c.on_lost(ms(i), target));
            } else {
                c.on_acked(1);
            }
        }
        dropped
    }

    #[test]
    fn losses_only_at_the_top_of_a_swinging_queue_are_a_full_buffer() {
        let mut c = Ceiling::default();
        // The target below the peak: the bands tell it.
        assert!(sawtooth(&mut c, 100_000) > 50);
        assert_eq!(c.cap(1_000_000), 148_500);
        assert_eq!(c.cap(100_000), 100_000);
        // No drop for longer than the hold: no ceiling.
        c.on_queue(ms(2000) + HOLD + ms(1), 0);
        assert_eq!(c.cap(1_000_000), 1_000_000);
    }

    #[test]
    fn a_queue_short_of_the_target_that_loses_at_its_top_is_a_full_buffer() {
        let mut c = Ceiling::default();
        let mut dropped = 0;
        for i in 0..3000u64 {
            // Flat at 90 kB, a third lost there, the law asking for 300 kB.
            c.on_queue(ms(i), 90_000);
            if i % 3 == 0 {
                dropped += usize::from(c.on_lost(ms(i), 300_000));
            } else {
                c.on_acked(1);
            }
        }
        assert!(dropped > 900, "{dropped}");
        assert_eq!(c.cap(300_000), 45_000);
    }

    #[test]
    fn loss_at_any_queue_length_is_not_a_ceiling() {
        for target in [100_000, 1_000_000] {
            let mut c = Ceiling::default();
            for i in 0..5000u64 {
                c.on_queue(ms(i), (i * 7919 % 100) * 3000);
                // A tenth of the packets lost whatever the queue.
                if i % 10 == 3 {
                    assert!(!c.on_lost(ms(i), target), "at {i}");
                } else {
                    c.on_acked(1);
                }
            }
            assert_eq!(c.cap(1_000_000), 1_000_000, "target {target}");
        }
    }

    #[test]
    fn a_queue_held_flat_at_the_target_keeps_its_losses_on_the_air() {
        let mut c = Ceiling::default();
        for i in 0..3000u64 {
            c.on_queue(ms(i), 90_000);
            if i % 3 == 0 {
                assert!(!c.on_lost(ms(i), 90_000));
            } else {
                c.on_acked(1);
            }
        }
        assert_eq!(c.cap(90_000), 90_000);
    }

    #[test]
    fn a_near_empty_queue_is_never_at_the_top() {
        let mut c = Ceiling::default();
        for i in 0..1000u64 {
            c.on_queue(ms(i), 300);
            assert!(!c.on_lost(ms(i), 100_000));
        }
    }

    #[test]
    fn random_loss_under_a_known_ceiling_does_not_lower_it() {
        let mut c = Ceiling::default();
        assert!(sawtooth(&mut c, 1_000_000) > 50);
        assert_eq!(c.cap(1_000_000), 148_500);
        // The law holds the queue flat at half the ceiling, where a tenth
        // of the packets are lost on the air: the peak there is the cap's,
        // not the buffer's.
        for i in 0..3_000u64 {
            c.on_queue(ms(2_000 + i), 148_000);
            if i % 10 == 0 {
                c.on_lost(ms(2_000 + i), 1_000_000);
            } else {
                c.on_acked(1);
            }
            assert_eq!(c.cap(1_000_000), 148_500, "at {i}");
        }
    }
}
