//! An ideal bottleneck for exercising a rate controller alone: one
//! full-sized packet at a time through a FIFO of fixed rate and drop-tail
//! capacity, a fixed propagation RTT, one acknowledgment per packet, and
//! losses reported one RTT after the drop. Controller unit tests here and
//! in the simulator's reference controllers use it; transfers with the
//! whole protocol run in convoy-sim instead.

use std::collections::VecDeque;
use std::time::Duration;

use super::{transmit_time, AckEvent, PeerReceive, RateController};
use crate::recovery::SentPacket;
use crate::rtt::RttEstimator;

#[derive(Clone, Debug)]
pub struct Bottleneck {
    /// Service rate, bytes/s.
    pub rate: u64,
    /// Propagation round trip.
    pub rtt: Duration,
    /// Drop-tail limit, bytes queued (excluding the packet in service).
    pub queue: u64,
    /// Drop every n-th packet after the queue (random loss, made regular).
    pub lose_every: Option<u64>,
    pub packet: u64,
}

impl Bottleneck {
    pub fn new(rate: u64, rtt: Duration) -> Bottleneck {
        Bottleneck {
            rate,
            rtt,
            queue: u64::MAX,
            lose_every: None,
            packet: 1472,
        }
    }
}

/// What the bottleneck saw.
#[derive(Clone, Debug, Default)]
pub struct BottleneckLog {
    /// (time acknowledged, bytes) per delivered packet.
    pub acked: Vec<(Duration, u64)>,
    /// Queueing delay each delivered packet saw.
    pub queue_delay: Vec<Duration>,
    pub dropped: u64,
}

impl BottleneckLog {
    /// Bytes acknowledged in `[from, to)`, as bytes/s.
    pub fn rate_between(&self, from: Duration, to: Duration) -> f64 {
        let bytes: u64 = self
            .acked
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, b)| b)
            .sum();
        bytes as f64 / (to - from).as_secs_f64()
    }
}

/// Runs `cc` against `link` until `until`, sending whenever pacing and the
/// window allow (an always-backlogged sender).
pub fn drive(cc: &mut dyn RateController, link: &Bottleneck, until: Duration) -> BottleneckLog {
    let mss = link.packet;
    let mut log = BottleneckLog::default();
    let mut now = Duration::ZERO;
    let mut pn = 0u64;
    let mut link_free = Duration::ZERO;
    // (feedback time, packet, delivered?) in order of feedback.
    let mut pipe: VecDeque<(Duration, SentPacket, bool)> = VecDeque::new();
    let mut in_flight = 0u64;
    let rtt = RttEstimator::default();
    let window_allows =
        |cc: &dyn RateController, in_flight: u64| cc.window().is_none_or(|w| in_flight + mss <= w);
    while now < until {
        while cc.next_send_time().is_none_or(|t| t <= now) && window_allows(cc, in_flight) {
            let p = SentPacket::on_one_path(pn, now, mss as u32);
            let queued = link_free.saturating_sub(now);
            let queued_bytes = (queued.as_secs_f64() * link.rate as f64) as u64;
            let lost_on_air = link.lose_every.is_some_and(|n| pn % n == n - 1);
            let delivered = if queued_bytes > link.queue {
                log.dropped += 1;
                false
            } else {
                link_free = link_free.max(now) + transmit_time(mss, link.rate);
                if !lost_on_air {
                    log.queue_delay.push(queued);
                }
                !lost_on_air
            };
            let feedback = link_free.max(now) + link.rtt;
            let at = pipe.partition_point(|x| x.0 <= feedback);
            pipe.insert(at, (feedback, p, delivered));
            in_flight += mss;
            cc.on_sent(now, pn, mss as usize, in_flight);
            pn += 1;
        }
        let next_feedback = pipe.front().map(|x| x.0);
        let next_send = cc.next_send_time().filter(|_| window_allows(cc, in_flight));
        now = [next_feedback, next_send]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(until)
            .max(now + Duration::from_micros(1));
        while pipe.front().is_some_and(|x| x.0 <= now) {
            let (feedback, p, delivered) = pipe.pop_front().unwrap();
            in_flight -= mss;
            if delivered {
                cc.on_ack(&AckEvent {
                    now,
                    acked: &[p],
                    rtt: &rtt,
                    bytes_in_flight: in_flight,
                    // Half the propagation each way: arrival at the far end.
                    peer_receive: Some(PeerReceive {
                        pn: p.pn,
                        sent: p.time,
                        received: feedback - link.rtt / 2,
                    }),
                });
                log.acked.push((now, mss));
            } else {
                cc.on_loss(now, &[p]);
            }
        }
    }
    log
}
