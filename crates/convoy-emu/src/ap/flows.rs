//! What the access point learns from the packets it forwards: TCP
//! connections with each end's window scale, each connection's round-trip
//! time, whether data flows, and the UDP and TCP rates per direction.
//!
//! Everything is measured where the AP sits, at the entry of each link
//! direction (the moment the emulator reads a packet), so one clock serves
//! both directions.
//!
//! Round-trip time: a TCP timestamp value first seen in one direction at
//! t, echoed by a segment in the other direction at t', measures the loop
//! through the far end: AP → receiver → AP. The two directions' loops add
//! up to the connection's round trip, whichever end sends data. The
//! minimum of each loop over the connection's life is its base RTT
//! (queueing excluded). Without timestamps, the handshake gives it: SYN
//! seen at t0, the ACK that completes the handshake at t2, RTT = t2 − t0.

use std::collections::VecDeque;

use convoy_link::{Dur, Time};

use crate::packet::{TcpInfo, ACK, FIN, RST, SYN};

/// Direction of travel through the AP: 0 = up (client → server), 1 = down.
pub type Dir = usize;

pub fn other(d: Dir) -> Dir {
    1 - d
}

/// A half-connection (data travelling in one direction) counts as active
/// for this long after its last data segment.
pub const ACTIVE: Dur = Dur::from_millis(1000);
/// Timestamp values remembered per direction for matching echoes.
const TS_MEMORY: usize = 4096;
/// ...and for at most this long.
const TS_AGE: Dur = Dur::from_secs(5);

/// One TCP connection, keyed by its tuple as the client side sends it.
#[derive(Debug, Default)]
pub struct Conn {
    /// The window scale shift each end announced in its SYN, by the
    /// direction that end sends in: `Some(None)` means a SYN without the
    /// option. `None`: its SYN was not seen, so the scale is unknown.
    ws: [Option<Option<u8>>; 2],
    /// Distinct timestamp values seen per direction, with when.
    ts_seen: [VecDeque<(u32, Time)>; 2],
    /// Minimum echo loop per direction of the timed packet.
    loop_min: [Option<Dur>; 2],
    syn_at: Option<(Dir, Time)>,
    handshake_rtt: Option<Dur>,
    /// Last data segment per direction of travel, and whether it finished.
    last_data: [Option<Time>; 2],
    finished: [bool; 2],
    pub last_seen: Time,
}

impl Conn {
    /// Takes in one segment travelling in `d` at `now`.
    pub fn observe(&mut self, d: Dir, now: Time, tcp: &TcpInfo) {
        self.last_seen = now;
        if tcp.has(SYN) {
            self.ws[d] = Some(tcp.wscale);
            if !tcp.has(ACK) {
                self.syn_at = Some((d, now));
            }
        } else if let Some((sd, t0)) = self.syn_at {
            if sd == d && tcp.has(ACK) && self.handshake_rtt.is_none() {
                self.handshake_rtt = Some(now.saturating_since(t0));
            }
        }
        if tcp.payload > 0 {
            self.last_data[d] = Some(now);
        }
        if tcp.has(FIN) || tcp.has(RST) {
            self.finished[d] = true;
            if tcp.has(RST) {
                self.finished[other(d)] = true;
            }
        }
        if let Some((val, ecr)) = tcp.timestamps {
            let seen = &mut self.ts_seen[d];
            if seen.back().is_none_or(|&(v, _)| v != val) {
                seen.push_back((val, now));
                while seen.len() > TS_MEMORY
                    || seen
                        .front()
                        .is_some_and(|&(_, t)| now.saturating_since(t) > TS_AGE)
                {
                    seen.pop_front();
                }
            }
            // The echo closes a loop that began in the other direction.
            let o = other(d);
            if ecr != 0 || tcp.has(ACK) {
                if let Some(&(_, t)) = self.ts_seen[o].iter().rev().find(|&&(v, _)| v == ecr) {
                    let sample = now.saturating_since(t);
                    let m = &mut self.loop_min[o];
                    *m = Some(m.map_or(sample, |m| m.min(sample)));
                }
            }
        }
    }

    /// The base round trip, once known: the smaller of the two estimates,
    /// since each can only be too large (an idle sender between handshake
    /// and first data inflates the first loop sample; a slow handshake
    /// answer inflates the other).
    pub fn rtt(&self) -> Option<Dur> {
        let loops = match self.loop_min {
            [Some(a), Some(b)] => Some(a + b),
            _ => None,
        };
        match (loops, self.handshake_rtt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether data is flowing in direction `d`.
    pub fn active(&self, d: Dir, now: Time) -> bool {
        !self.finished[d] && self.last_data[d].is_some_and(|t| now.saturating_since(t) < ACTIVE)
    }

    /// The shift to apply to window fields written by the end that sends
    /// in direction `d`: its announced shift if both ends announced one
    /// (RFC 7323 §2.2), 0 if either did not, `None` if unknown.
    pub fn scale_of_sender(&self, d: Dir) -> Option<u8> {
        match (self.ws[d], self.ws[other(d)]) {
            (Some(Some(mine)), Some(Some(_))) => Some(mine),
            (Some(_), Some(_)) => Some(0),
            _ => None,
        }
    }

    /// Nothing more will come: both halves finished, or silent for long.
    pub fn is_dead(&self, now: Time) -> bool {
        (self.finished[0] && self.finished[1])
            || now.saturating_since(self.last_seen) > Dur::from_secs(60)
    }
}

/// Bytes over a sliding window.
#[derive(Debug)]
pub struct RateMeter {
    window: Dur,
    samples: VecDeque<(Time, u32)>,
    sum: u64,
}

impl RateMeter {
    pub fn new(window: Dur) -> RateMeter {
        RateMeter {
            window,
            samples: VecDeque::new(),
            sum: 0,
        }
    }

    pub fn add(&mut self, now: Time, bytes: u32) {
        self.samples.push_back((now, bytes));
        self.sum += u64::from(bytes);
        self.expire(now);
    }

    fn expire(&mut self, now: Time) {
        while let Some(&(t, b)) = self.samples.front() {
            if now.saturating_since(t) < self.window {
                break;
            }
            self.samples.pop_front();
            self.sum -= u64::from(b);
        }
    }

    /// Bits per second over the window ending at `now`.
    pub fn bps(&mut self, now: Time) -> f64 {
        self.expire(now);
        self.sum as f64 * 8.0 / self.window.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: u8, payload: u32, ts: Option<(u32, u32)>, ws: Option<u8>) -> TcpInfo {
        TcpInfo {
            seq: 0,
            ack: 0,
            flags,
            window: 100,
            wscale: ws,
            timestamps: ts,
            payload,
            offset: 20,
        }
    }

    fn ms(v: u64) -> Time {
        Time::from_millis(v)
    }

    #[test]
    fn rtt_from_timestamp_echoes_in_both_directions() {
        let mut c = Conn::default();
        // Down: data with TSval 100 at 0 ms, echoed by the client at 40 ms
        // (loop through the client: 40 ms). The client's TSval 7 at 40 ms is
        // echoed by the server's next data at 60 ms (loop: 20 ms).
        c.observe(1, ms(0), &seg(ACK, 1448, Some((100, 7)), None));
        c.observe(0, ms(40), &seg(ACK, 0, Some((8, 100)), None));
        c.observe(1, ms(60), &seg(ACK, 1448, Some((160, 8)), None));
        assert_eq!(c.rtt(), Some(Dur::from_millis(60)));
        // A later, slower loop (a queue) does not raise the base.
        c.observe(0, ms(300), &seg(ACK, 0, Some((9, 160)), None));
        assert_eq!(c.rtt(), Some(Dur::from_millis(60)));
    }

    #[test]
    fn handshake_rtt_without_timestamps() {
        let mut c = Conn::default();
        c.observe(0, ms(10), &seg(SYN, 0, None, Some(7)));
        c.observe(1, ms(40), &seg(SYN | ACK, 0, None, Some(9)));
        c.observe(0, ms(70), &seg(ACK, 0, None, None));
        assert_eq!(c.rtt(), Some(Dur::from_millis(60)));
        assert_eq!(c.scale_of_sender(0), Some(7));
        assert_eq!(c.scale_of_sender(1), Some(9));
    }

    #[test]
    fn scale_needs_both_ends() {
        let mut c = Conn::default();
        assert_eq!(c.scale_of_sender(0), None);
        c.observe(0, ms(0), &seg(SYN, 0, None, Some(7)));
        assert_eq!(c.scale_of_sender(0), None);
        c.observe(1, ms(1), &seg(SYN | ACK, 0, None, None));
        assert_eq!(c.scale_of_sender(0), Some(0));
        assert_eq!(c.scale_of_sender(1), Some(0));
    }

    #[test]
    fn activity_and_end() {
        let mut c = Conn::default();
        c.observe(1, ms(0), &seg(ACK, 1000, None, None));
        assert!(c.active(1, ms(500)) && !c.active(0, ms(500)));
        assert!(!c.active(1, ms(1500)));
        c.observe(1, ms(1600), &seg(ACK | FIN, 0, None, None));
        assert!(!c.active(1, ms(1601)));
        c.observe(0, ms(1700), &seg(ACK | FIN, 0, None, None));
        assert!(c.is_dead(ms(1700)));
    }

    #[test]
    fn meter_is_a_sliding_window() {
        let mut m = RateMeter::new(Dur::from_millis(500));
        for i in 0..100 {
            m.add(ms(i * 10), 1250); // 1 Mbit/s
        }
        assert!((m.bps(ms(999)) - 1e6).abs() < 30_000.0);
        assert_eq!(m.bps(ms(5000)), 0.0);
    }
}
