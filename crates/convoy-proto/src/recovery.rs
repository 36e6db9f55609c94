//! What happened to each packet we sent: acknowledged, lost, or still in
//! flight (RFC 9002's loss detection, without retransmission: a lost symbol
//! is replaced by a fresh one chosen by the coding scheduler, and lost state
//! frames are simply sent again in their newest form).
//!
//! Packet numbers are one space for the whole connection (so a packet
//! number never repeats, whatever path it took: the AEAD nonce stays
//! unique), but loss is judged per path: a packet is lost once three later
//! packets *of its own path* are acknowledged, or a little over its path's
//! RTT after one of them was. Across paths with different delays, packets of
//! the fast path overtake those of the slow one; counting them would declare
//! every in-flight packet of the slow path lost.

use std::collections::VecDeque;
use std::time::Duration;

use crate::rtt::RttEstimator;
use crate::wire::Ack;

/// The time threshold of a path with this RTT: a packet is lost once this
/// long has passed since it was sent and a later one of its path was
/// acknowledged.
pub fn loss_delay(rtt: &RttEstimator) -> Duration {
    (rtt.smoothed().max(rtt.latest()) * 9 / 8).max(Duration::from_millis(1))
}

/// A packet is lost once this many later packets are acknowledged.
pub(crate) const PACKET_THRESHOLD: u64 = 3;
/// Packets declared lost are remembered this far below the largest
/// acknowledged, so that a late acknowledgment is noticed (and measured).
const LOST_MEMORY: u64 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentPacket {
    pub pn: u64,
    pub time: Duration,
    pub bytes: u32,
    pub path: u8,
    /// Its place among the packets sent on its path (set by
    /// [`Recovery::on_sent`]).
    pub seq: u64,
    /// The block whose symbol it carried, and the symbol's id.
    pub block: Option<u32>,
    pub esi: u32,
    /// Whether the peer acknowledges it (data and pings; not pure feedback).
    pub ack_eliciting: bool,
}

impl SentPacket {
    /// An ack-eliciting packet without a symbol on path 0, its `seq` its
    /// number: what a rate controller's tests and the ideal bottleneck
    /// (`cc::bottleneck`) send.
    pub fn on_one_path(pn: u64, time: Duration, bytes: u32) -> SentPacket {
        SentPacket {
            pn,
            time,
            bytes,
            path: 0,
            seq: pn,
            block: None,
            esi: 0,
            ack_eliciting: true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    InFlight,
    Acked,
    Lost,
}

/// The outcome of one ACK frame or timer.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub acked: Vec<SentPacket>,
    pub lost: Vec<SentPacket>,
    /// A sample for the RTT estimator: the largest newly acknowledged
    /// packet's.
    pub rtt_sample: Option<RttSample>,
    /// The other paths' samples: (path, sample) of each path's largest
    /// newly acknowledged packet, when it is the largest of its path so
    /// far (no ACK delay: the peer reports the largest's). On several
    /// paths the ACK's largest is nearly always a packet of the fastest,
    /// and the others would go without samples for seconds.
    pub path_rtt_samples: Vec<(u8, RttSample)>,
    /// Paths of packets declared lost and acknowledged now, late: their
    /// path works after all.
    pub late_paths: Vec<u8>,
    /// Those packets: their symbols arrived after all.
    pub late: Vec<SentPacket>,
}

impl Outcome {
    pub fn is_empty(&self) -> bool {
        self.acked.is_empty() && self.lost.is_empty()
    }
}

/// Sent packets by number. Numbers are consecutive, so the packet numbered
/// `pn` is at index `pn - first_pn`; resolved packets leave from the front.
#[derive(Clone, Debug, Default)]
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
    paths: Vec<PathFlight>,
}

/// One path's share of the packets in flight.
#[derive(Clone, Debug, Default)]
struct PathFlight {
    id: u8,
    next_seq: u64,
    /// (packet number, seq) of the path's largest acknowledged packet.
    largest_acked: Option<(u64, u64)>,
    bytes_in_flight: u64,
}

/// One round trip an acknowledgment measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttSample {
    pub rtt: Duration,
    /// The ACK delay the peer reported.
    pub ack_delay: Duration,
    /// When the packet measured was sent.
    pub sent: Duration,
}

/// The sample of a packet sent at `sent` and acknowledged as the largest
/// of `ack` at `now`.
fn rtt_sample(now: Duration, sent: Duration, ack: &Ack<'_>) -> RttSample {
    RttSample {
        rtt: now.saturating_sub(sent),
        ack_delay: Duration::from_micros(ack.delay_us.min(1 << 32)),
        sent,
    }
}

impl Recovery {
    fn flight(&mut self, path: u8) -> &mut PathFlight {
        let i = match self.paths.iter().position(|f| f.id == path) {
            Some(i) => i,
            None => {
                self.paths.push(PathFlight {
                    id: path,
                    ..Default::default()
                });
                self.paths.len() - 1
            }
        };
        &mut self.paths[i]
    }

    fn flight_ref(&self, path: u8) -> Option<&PathFlight> {
        self.paths.iter().find(|f| f.id == path)
    }

    pub fn on_sent(&mut self, mut p: SentPacket) {
        let f = self.flight(p.path);
        p.seq = f.next_seq;
        f.next_seq += 1;
        if p.ack_eliciting {
            f.bytes_in_flight += u64::from(p.bytes);
        }
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

    /// The same, of one path.
    pub fn path_bytes_in_flight(&self, path: u8) -> u64 {
        self.flight_ref(path).map_or(0, |f| f.bytes_in_flight)
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
        let p = *p;
        if p.ack_eliciting {
            self.bytes_in_flight -= u64::from(p.bytes);
            self.flight(p.path).bytes_in_flight -= u64::from(p.bytes);
        }
        if to == Fate::Lost {
            self.recently_lost.push_back((p, false));
        }
        Some(p)
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
            out.late.push(*p);
            if !out.late_paths.contains(&p.path) {
                out.late_paths.push(p.path);
            }
            if out.rtt_sample.is_none() && p.pn == ack.largest && p.ack_eliciting {
                out.rtt_sample = Some(rtt_sample(now, p.time, ack));
            }
        }
    }

    /// Processes an ACK frame received at `now`. Acknowledgments of packets
    /// never sent are ignored.
    /// `loss_delay` gives each path's time threshold ([`loss_delay`]).
    pub fn on_ack(
        &mut self,
        now: Duration,
        ack: &Ack<'_>,
        loss_delay: &dyn Fn(u8) -> Duration,
    ) -> Outcome {
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
        let largest_path = out.rtt_sample.and(out.acked.first().map(|p| p.path));
        for i in 0..out.acked.len() {
            // Highest first: each path's first is its largest.
            let p = out.acked[i];
            let f = self.flight(p.path);
            if f.largest_acked.is_none_or(|(l, _)| p.pn > l) {
                f.largest_acked = Some((p.pn, p.seq));
                if p.ack_eliciting && Some(p.path) != largest_path {
                    out.path_rtt_samples.push((
                        p.path,
                        RttSample {
                            rtt: now.saturating_sub(p.time),
                            ack_delay: Duration::ZERO,
                            sent: p.time,
                        },
                    ));
                }
            }
        }
        out.acked.reverse();
        out.lost = self.detect_lost(now, loss_delay);
        self.trim();
        out
    }

    /// Whether a packet is proven lost by a later acknowledgment of its
    /// path (three later packets, or `delay` after one).
    fn proven_lost(&self, p: &SentPacket, now: Duration, delay: Duration) -> bool {
        self.flight_ref(p.path)
            .and_then(|f| f.largest_acked)
            .is_some_and(|(pn, seq)| {
                p.pn < pn && (seq - p.seq >= PACKET_THRESHOLD || p.time + delay <= now)
            })
    }

    /// Declares lost what later acknowledgments or elapsed time prove lost.
    pub fn detect_lost(
        &mut self,
        now: Duration,
        loss_delay: &dyn Fn(u8) -> Duration,
    ) -> Vec<SentPacket> {
        let Some(largest) = self.largest_acked else {
            return Vec::new();
        };
        let mut lost = Vec::new();
        for i in 0..self.sent.len() {
            let (p, fate) = self.sent[i];
            if p.pn >= largest {
                break;
            }
            if fate == Fate::InFlight && self.proven_lost(&p, now, loss_delay(p.path)) {
                lost.extend(self.resolve(i, Fate::Lost));
            }
        }
        self.trim();
        lost
    }

    /// When the time threshold will next declare a packet lost.
    pub fn loss_time(&self, loss_delay: &dyn Fn(u8) -> Duration) -> Option<Duration> {
        let largest = self.largest_acked?;
        let mut earliest: Option<Duration> = None;
        let mut seen: Vec<u8> = Vec::new();
        for (p, fate) in self.sent.iter().take_while(|(p, _)| p.pn < largest) {
            if *fate != Fate::InFlight || seen.contains(&p.path) {
                continue;
            }
            // The oldest in-flight packet of each path below its largest
            // acknowledged is the first its time threshold reaches.
            let below = self
                .flight_ref(p.path)
                .and_then(|f| f.largest_acked)
                .is_some_and(|(pn, _)| p.pn < pn);
            if below {
                seen.push(p.path);
                let t = p.time + loss_delay(p.path);
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
                if seen.len() == self.paths.len() {
                    break;
                }
            }
        }
        earliest
    }

    /// The oldest ack-eliciting packet still in flight (on `path`, or on
    /// any), for the probe timer.
    pub fn oldest_in_flight(&self, path: Option<u8>) -> Option<Duration> {
        if path.is_some_and(|id| self.path_bytes_in_flight(id) == 0) {
            return None;
        }
        self.sent
            .iter()
            .find(|(p, f)| {
                *f == Fate::InFlight && p.ack_eliciting && path.is_none_or(|id| p.path == id)
            })
            .map(|(p, _)| p.time)
    }

    /// The probe timeout of `path` fired: nothing of it was acknowledged for
    /// too long, so every ack-eliciting packet it carried before `cutoff` is
    /// presumed lost (its symbols get replaced), and its unacknowledged
    /// feedback is forgotten.
    pub fn on_probe_timeout(&mut self, path: u8, cutoff: Duration) -> Vec<SentPacket> {
        let mut lost = Vec::new();
        for i in 0..self.sent.len() {
            let (p, fate) = self.sent[i];
            if p.time > cutoff {
                break;
            }
            if fate == Fate::InFlight && p.path == path {
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
        send_on(r, 0, pn, t);
    }

    fn send_on(r: &mut Recovery, path: u8, pn: u64, t: u64) {
        r.on_sent(SentPacket {
            pn,
            time: ms(t),
            bytes: 1000,
            path,
            seq: 0,
            block: Some(0),
            esi: 0,
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
        let out = with_ack(&bytes, |a| r.on_ack(ms(50), a, &|_| loss_delay(&rtt)));
        assert_eq!(
            out.acked.iter().map(|p| p.pn).collect::<Vec<_>>(),
            vec![0, 1, 5, 6, 7, 8, 9]
        );
        assert_eq!(
            out.lost.iter().map(|p| p.pn).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        let sample = out.rtt_sample.unwrap();
        assert_eq!((sample.rtt, sample.ack_delay), (ms(41), Duration::ZERO));
        assert_eq!(r.bytes_in_flight(), 0);
        // A duplicate ACK changes nothing.
        let out = with_ack(&bytes, |a| r.on_ack(ms(60), a, &|_| loss_delay(&rtt)));
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
        let out = with_ack(&bytes, |a| r.on_ack(ms(100), a, &|_| loss_delay(&rtt)));
        assert!(
            out.lost.is_empty(),
            "1 and 0 are within the packet threshold"
        );
        assert_eq!(
            r.loss_time(&|_| loss_delay(&rtt)),
            Some(ms(112) + Duration::from_micros(500))
        );
        assert_eq!(r.detect_lost(ms(113), &|_| loss_delay(&rtt)).len(), 2);
        send(&mut r, 3, 200);
        assert_eq!(r.oldest_in_flight(None), Some(ms(200)));
        assert_eq!(r.on_probe_timeout(0, ms(250)).len(), 1);
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
        let out = with_ack(&ack_bytes(&[2..=2]), |a| {
            r.on_ack(ms(60), a, &|_| loss_delay(&rtt))
        });
        assert_eq!(out.lost.len(), 2);
        // ...but their acknowledgment arrives, late, and measures the real RTT.
        let out = with_ack(&ack_bytes(&[0..=1]), |a| {
            r.on_ack(ms(2000), a, &|_| loss_delay(&rtt))
        });
        assert_eq!(out.rtt_sample.map(|s| s.rtt), Some(ms(2000)));
        assert!(out.acked.is_empty(), "already resolved as lost");
        assert_eq!(r.spurious_losses(), 2);
        let late: Vec<u64> = out.late.iter().map(|p| p.pn).collect();
        assert_eq!(late, [0, 1], "reported late, once");
        let again = with_ack(&ack_bytes(&[0..=2]), |a| {
            r.on_ack(ms(2010), a, &|_| loss_delay(&rtt))
        });
        assert!(again.late.is_empty());
    }

    #[test]
    fn a_fast_path_does_not_declare_the_slow_path_lost() {
        let mut r = Recovery::default();
        // Even numbers on path 0 (fast), odd on path 1 (slow).
        for pn in 0..20 {
            send_on(&mut r, (pn % 2) as u8, pn, pn);
        }
        let mut fast = RttEstimator::default();
        fast.update(ms(10), Duration::ZERO);
        let mut slow = RttEstimator::default();
        slow.update(ms(60), Duration::ZERO);
        let delay = |p: u8| loss_delay(if p == 0 { &fast } else { &slow });
        // All of path 0 acknowledged at 30 ms, none of path 1 yet.
        let evens: Vec<_> = (0..10).rev().map(|i| 2 * i..=2 * i).collect();
        let out = with_ack(&ack_bytes(&evens), |a| r.on_ack(ms(30), a, &delay));
        assert_eq!(out.acked.len(), 10);
        assert!(
            out.lost.is_empty(),
            "the slow path's packets are not overtaken losses"
        );
        assert_eq!(r.path_bytes_in_flight(1), 10_000);
        assert_eq!(r.path_bytes_in_flight(0), 0);
        assert_eq!(r.oldest_in_flight(Some(1)), Some(ms(1)));
        assert_eq!(r.oldest_in_flight(Some(0)), None);
        // Path 1 acknowledges 7 and 9: three or more later packets of its
        // own path make 1 and 3 lost, not 5.
        let out = with_ack(&ack_bytes(&[9..=9, 7..=7]), |a| r.on_ack(ms(70), a, &delay));
        let lost: Vec<_> = out.lost.iter().map(|p| p.pn).collect();
        assert_eq!(lost, vec![1, 3], "5 is within the packet threshold");
        // A probe timeout of path 1 takes only path 1's packets.
        let gone = r.on_probe_timeout(1, ms(100));
        assert!(gone.iter().all(|p| p.path == 1));
        assert_eq!(r.path_bytes_in_flight(1), 0);
    }
}
