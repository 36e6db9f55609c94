//! What happened to each packet we sent: acknowledged, lost, or still in
//! flight (RFC 9002's loss detection, without retransmission: a lost symbol
//! is replaced by a fresh one chosen by the coding scheduler, and lost state
//! frames are simply sent again in their newest form).

use std::collections::VecDeque;
use std::time::Duration;

use crate::rtt::RttEstimator;
use crate::wire::Ack;

/// A packet is lost once this many later packets are acknowledged.
const PACKET_THRESHOLD: u64 = 3;
/// Packets declared lost are remembered this far below the largest
/// acknowledged, so that a late acknowledgment is noticed (and measured).
const LOST_MEMORY: u64 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentPacket {
    pub pn: u64,
    pub time: Duration,
    pub bytes: u32,
    pub path: u8,
    /// The block whose symbol it carried.
    pub block: Option<u32>,
    /// Whether the peer acknowledges it (data and pings; not pure feedback).
    pub ack_eliciting: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    InFlight,
    Acked,
    Lost,
}

/// The outcome of one ACK frame or timer.
#[derive(Debug, Default)]
pub struct Outcome {
    pub acked: Vec<SentPacket>,
    pub lost: Vec<SentPacket>,
    /// A sample for the RTT estimator: (rtt, ack delay) of the largest
    /// newly acknowledged packet.
    pub rtt_sample: Option<(Duration, Duration)>,
}

impl Outcome {
    pub fn is_empty(&self) -> bool {
        self.acked.is_empty() && self.lost.is_empty()
    }
}

/// Sent packets by number. Numbers are consecutive, so the packet numbered
/// `pn` is at index `pn - first_pn`; resolved packets leave from the front.
#[derive(Debug, Default)]
pub struct Recovery {
    sent: VecDeque<(SentPacket, Fate)>,
    first_pn: u64,
    /// Recently declared lost, by number, and whether an acknowledgment
    /// has since arrived. Kept apart from `sent` so that remembering them
    /// does not make every ACK walk a thousand resolved packets.
    recently_lost: VecDeque<(SentPacket, bool)>,
    largest_acked: Option<u64>,
    bytes_in_flight: u64,
    spurious: u64,
}

/// (RTT, reported ACK delay) for a packet sent at `sent` and acknowledged
/// as the largest of `ack` at `now`.
fn rtt_sample(now: Duration, sent: Duration, ack: &Ack<'_>) -> (Duration, Duration) {
    (
        now.saturating_sub(sent),
        Duration::from_micros(ack.delay_us.min(1 << 32)),
    )
}

impl Recovery {
    pub fn on_sent(&mut self, p: SentPacket) {
        self.trim_front();
        if self.sent.is_empty() {
            self.first_pn = p.pn;
        }
        debug_assert_eq!(
            p.pn,
            self.first_pn + self.sent.len() as u64,
            "packet numbers are consecutive"
        );
        if p.ack_eliciting {
            self.bytes_in_flight += u64::from(p.bytes);
        }
        self.sent.push_back((p, Fate::InFlight));
    }

    /// Ack-eliciting bytes neither acknowledged nor lost.
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    /// Packets declared lost that were acknowledged later: the loss
    /// detector's false alarms.
    pub fn spurious_losses(&self) -> u64 {
        self.spurious
    }

    fn resolve(&mut self, idx: usize, to: Fate) -> Option<SentPacket> {
        let (p, fate) = self.sent.get_mut(idx)?;
        if *fate != Fate::InFlight {
            return None;
        }
        *fate = to;
        if p.ack_eliciting {
            self.bytes_in_flight -= u64::from(p.bytes);
        }
        if to == Fate::Lost {
            self.recently_lost.push_back((*p, false));
        }
        Some(*p)
    }

    /// Drops resolved packets from the front, and packets that elicit no
    /// acknowledgment once everything older is resolved: nothing waits for
    /// them (they carry no symbol, count for no window or timer), and a
    /// receiver of data only sends those, so kept until the peer happened to
    /// acknowledge them they piled up by thousands and every timer query
    /// walked them.
    fn trim_front(&mut self) {
        while let Some((p, fate)) = self.sent.front() {
            if *fate == Fate::InFlight && p.ack_eliciting {
                break;
            }
            self.first_pn = p.pn + 1;
            self.sent.pop_front();
        }
    }

    fn trim(&mut self) {
        self.trim_front();
        let floor = self.largest_acked.unwrap_or(0).saturating_sub(LOST_MEMORY);
        while self
            .recently_lost
            .front()
            .is_some_and(|(p, _)| p.pn < floor)
        {
            self.recently_lost.pop_front();
        }
    }

    /// Acknowledgments of packets already declared lost: counted as
    /// spurious, and the largest still gives an RTT sample. Without that
    /// sample a growing queue would make every packet look lost, and the
    /// loss threshold would never catch up.
    fn ack_lost(
        &mut self,
        now: Duration,
        ack: &Ack<'_>,
        range: &std::ops::RangeInclusive<u64>,
        out: &mut Outcome,
    ) {
        let start = self
            .recently_lost
            .partition_point(|(p, _)| p.pn < *range.start());
        for (p, acked) in self.recently_lost.iter_mut().skip(start) {
            if p.pn > *range.end() {
                break;
            }
            if *acked {
                continue;
            }
            *acked = true;
            self.spurious += 1;
            if out.rtt_sample.is_none() && p.pn == ack.largest && p.ack_eliciting {
                out.rtt_sample = Some(rtt_sample(now, p.time, ack));
            }
        }
    }

    /// Processes an ACK frame received at `now`. Acknowledgments of packets
    /// never sent are ignored.
    pub fn on_ack(&mut self, now: Duration, ack: &Ack<'_>, rtt: &RttEstimator) -> Outcome {
        let mut out = Outcome::default();
        for range in ack.ranges() {
            self.ack_lost(now, ack, &range, &mut out);
            let lo = (*range.start()).max(self.first_pn);
            let hi = (*range.end()).min(self.first_pn + self.sent.len() as u64);
            for pn in (lo..=hi).rev() {
                if let Some(p) = self.resolve((pn - self.first_pn) as usize, Fate::Acked) {
                    if out.rtt_sample.is_none() && pn == ack.largest && p.ack_eliciting {
                        out.rtt_sample = Some(rtt_sample(now, p.time, ack));
                    }
                    out.acked.push(p);
                }
            }
        }
        if let Some(p) = out.acked.first() {
            if self.largest_acked.is_none_or(|l| p.pn > l) {
                self.largest_acked = Some(p.pn);
            }
        }
        out.acked.reverse();
        out.lost = self.detect_lost(now, rtt);
        self.trim();
        out
    }

    fn loss_delay(rtt: &RttEstimator) -> Duration {
        (rtt.smoothed().max(rtt.latest()) * 9 / 8).max(Duration::from_millis(1))
    }

    /// Declares lost what later acknowledgments or elapsed time prove lost.
    pub fn detect_lost(&mut self, now: Duration, rtt: &RttEstimator) -> Vec<SentPacket> {
        let Some(largest) = self.largest_acked else {
            return Vec::new();
        };
        let delay = Self::loss_delay(rtt);
        let mut lost = Vec::new();
        for i in 0..self.sent.len() {
            let (p, fate) = self.sent[i];
            if p.pn >= largest {
                break;
            }
            if fate == Fate::InFlight
                && (largest - p.pn >= PACKET_THRESHOLD || p.time + delay <= now)
            {
                lost.extend(self.resolve(i, Fate::Lost));
            }
        }
        self.trim();
        lost
    }

    /// When the time threshold will next declare a packet lost.
    pub fn loss_time(&self, rtt: &RttEstimator) -> Option<Duration> {
        let largest = self.largest_acked?;
        self.sent
            .iter()
            .take_while(|(p, _)| p.pn < largest)
            .find(|(_, f)| *f == Fate::InFlight)
            .map(|(p, _)| p.time + Self::loss_delay(rtt))
    }

    /// The oldest ack-eliciting packet still in flight, for the probe timer.
    pub fn oldest_in_flight(&self) -> Option<Duration> {
        self.sent
            .iter()
            .find(|(p, f)| *f == Fate::InFlight && p.ack_eliciting)
            .map(|(p, _)| p.time)
    }

    /// The probe timeout fired: nothing was acknowledged for too long, so
    /// every ack-eliciting packet sent before `cutoff` is presumed lost (its
    /// symbols get replaced), and unacknowledged feedback is forgotten.
    pub fn on_probe_timeout(&mut self, cutoff: Duration) -> Vec<SentPacket> {
        let mut lost = Vec::new();
        for i in 0..self.sent.len() {
            let (p, fate) = self.sent[i];
            if p.time > cutoff {
                break;
            }
            if fate == Fate::InFlight {
                if let Some(p) = self.resolve(i, Fate::Lost) {
                    if p.ack_eliciting {
                        lost.push(p);
                    }
                }
            }
        }
        self.trim();
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::cursor::Writer;
    use crate::wire::frame::write_ack;
    use crate::wire::{Frame, Frames};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn send(r: &mut Recovery, pn: u64, t: u64) {
        r.on_sent(SentPacket {
            pn,
            time: ms(t),
            bytes: 1000,
            path: 0,
            block: Some(0),
            ack_eliciting: true,
        });
    }

    fn ack_bytes(ranges: &[std::ops::RangeInclusive<u64>]) -> Vec<u8> {
        let mut buf = vec![0u8; 256];
        let mut w = Writer::new(&mut buf);
        write_ack(&mut w, ranges, 0).unwrap();
        let n = w.len();
        buf.truncate(n);
        buf
    }

    fn with_ack<T>(bytes: &[u8], f: impl FnOnce(&Ack<'_>) -> T) -> T {
        let Frame::Ack(a) = Frames::new(bytes).next().unwrap().unwrap() else {
            panic!()
        };
        f(&a)
    }

    #[test]
    fn acks_gaps_and_packet_threshold() {
        let mut r = Recovery::default();
        for pn in 0..10 {
            send(&mut r, pn, pn);
        }
        assert_eq!(r.bytes_in_flight(), 10_000);
        let rtt = RttEstimator::default();
        let bytes = ack_bytes(&[5..=9, 0..=1]);
        let out = with_ack(&bytes, |a| r.on_ack(ms(50), a, &rtt));
        assert_eq!(
            out.acked.iter().map(|p| p.pn).collect::<Vec<_>>(),
            vec![0, 1, 5, 6, 7, 8, 9]
        );
        assert_eq!(
            out.lost.iter().map(|p| p.pn).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        assert_eq!(out.rtt_sample, Some((ms(41), Duration::ZERO)));
        assert_eq!(r.bytes_in_flight(), 0);
        // A duplicate ACK changes nothing.
        let out = with_ack(&bytes, |a| r.on_ack(ms(60), a, &rtt));
        assert!(out.is_empty());
    }

    #[test]
    fn time_threshold_and_probe_timeout() {
        let mut r = Recovery::default();
        for pn in 0..3 {
            send(&mut r, pn, 0);
        }
        let mut rtt = RttEstimator::default();
        rtt.update(ms(100), Duration::ZERO);
        let bytes = ack_bytes(&[2..=2]);
        let out = with_ack(&bytes, |a| r.on_ack(ms(100), a, &rtt));
        assert!(
            out.lost.is_empty(),
            "1 and 0 are within the packet threshold"
        );
        assert_eq!(
            r.loss_time(&rtt),
            Some(ms(112) + Duration::from_micros(500))
        );
        assert_eq!(r.detect_lost(ms(113), &rtt).len(), 2);
        send(&mut r, 3, 200);
        assert_eq!(r.oldest_in_flight(), Some(ms(200)));
        assert_eq!(r.on_probe_timeout(ms(250)).len(), 1);
        assert_eq!(r.bytes_in_flight(), 0);
    }

    #[test]
    fn a_late_ack_of_a_packet_declared_lost_still_samples_the_rtt() {
        let mut r = Recovery::default();
        send(&mut r, 0, 0);
        send(&mut r, 1, 0);
        send(&mut r, 2, 10);
        let mut rtt = RttEstimator::default();
        rtt.update(ms(50), Duration::ZERO);
        // A queue built up: 0 and 1 pass the time threshold and are declared lost...
        let out = with_ack(&ack_bytes(&[2..=2]), |a| r.on_ack(ms(60), a, &rtt));
        assert_eq!(out.lost.len(), 2);
        // ...but their acknowledgment arrives, late, and measures the real RTT.
        let out = with_ack(&ack_bytes(&[0..=1]), |a| r.on_ack(ms(2000), a, &rtt));
        assert_eq!(out.rtt_sample, Some((ms(2000), Duration::ZERO)));
        assert!(out.acked.is_empty(), "already resolved as lost");
        assert_eq!(r.spurious_losses(), 2);
    }
}
