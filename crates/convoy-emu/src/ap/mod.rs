//! The smart access point (SPEC S4, Palazzi et al.): the AP limits each TCP
//! flow it forwards by rewriting the receive window advertised in the ACKs
//! that flow's receiver sends back through it. No end host changes; the
//! sender simply never has more than the AP's window in flight, so no queue
//! builds at the AP and real-time UDP flows beside it keep low delay.
//!
//! Three laws choose the window of a flow whose data crosses direction `d`
//! (capacity C_d, UDP traffic U_d measured over the last 500 ms, n active
//! TCP flows, each with its base round trip RTT_i measured at the AP):
//!
//! * **SAP-LAW** (T-CE 2006): maxTCPrate = (C − U)/n and window = rate ×
//!   RTT, one window for every flow. With unequal RTTs "the" RTT is
//!   ambiguous; we give every flow the window W with Σ W/RTT_j = C − U, so
//!   the flows together fill what UDP leaves and no queue builds; with equal
//!   RTTs this is exactly (C − U)·RTT/n. Short-RTT flows then get more
//!   (Palazzi's reason for the RTT-fair variant).
//! * **RTT-fair SAP-LAW** (ICUMT 2009): W_i = (C − U)/n × RTT_i, so each
//!   flow gets the same rate whatever its RTT. The slide's normalisation
//!   Σ_j RTT_j / avgRTT_min is ambiguous; this reading gives equal rates
//!   and reduces to SAP-LAW with equal RTTs (research notes, part B).
//! * **VoAP** (T-CSVT 2015): no capacity or UDP measurement. A Vegas-like
//!   loop on the AP's queueing delay q (the minimum sojourn over the last
//!   round trip): q < α grows the flows' aggregate rate by one MSS per RTT
//!   per flow, α ≤ q ≤ β holds it, q > β shrinks it by as much. Each flow's
//!   window is its RTT-fair share of that rate, so flows share fairly.
//!   β = 10 ms (the paper's); α is not given: α = β/2. Until q first
//!   reaches α the rate doubles each round trip (Vegas' slow start), so a
//!   flow reaches the path's rate in a few round trips.
//!
//! Common rules: a window is only ever lowered (never above what the
//! receiver offered), never below [`MIN_WINDOW_MSS`] segments, and carries
//! [`HEADROOM_MSS`] segments beyond rate × RTT for ACK clocking; it is
//! written in the receiver's window scale (learned from both SYNs; a flow
//! whose SYNs the AP did not see is left alone) with the TCP checksum
//! updated. SYN segments are never touched (their window is unscaled).

pub mod flows;

use std::collections::HashMap;

use convoy_link::{Dur, Time};

use crate::packet::{self, FiveTuple, Parsed, PROTO_TCP, SYN};
use flows::{other, Conn, Dir, RateMeter};

/// Payload bytes per full-sized segment (1500 − 20 IP − 32 TCP with
/// timestamps): windows count payload, the link's rate counts IP bytes.
pub const MSS: f64 = 1448.0;
const PAYLOAD_SHARE: f64 = MSS / 1500.0;
/// Segments beyond rate × RTT in every window, so that delayed ACKs and
/// scheduling noise do not leave the link idle: at 10 Mbit/s two segments
/// are 2.4 ms of queue.
pub const HEADROOM_MSS: f64 = 2.0;
pub const MIN_WINDOW_MSS: f64 = 2.0;
/// UDP traffic is measured over this window.
pub const UDP_WINDOW: Dur = Dur::from_millis(500);
/// VoAP's ceiling follows the TCP rate measured over this window (short,
/// so that it keeps up with slow start).
pub const TCP_WINDOW: Dur = Dur::from_millis(200);
/// VoAP's first rate per flow: ten segments per round trip (TCP's IW10).
const VOAP_INITIAL_MSS: f64 = 10.0;

/// Which law the AP applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ApPolicy {
    SapLaw,
    SapLawRtt,
    Voap { alpha: Dur, beta: Dur },
}

impl ApPolicy {
    pub const NAMES: &'static str = "sap-law, sap-law-rtt or voap";

    pub fn voap_default() -> ApPolicy {
        ApPolicy::Voap {
            alpha: Dur::from_millis(5),
            beta: Dur::from_millis(10),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            ApPolicy::SapLaw => "sap-law",
            ApPolicy::SapLawRtt => "sap-law-rtt",
            ApPolicy::Voap { .. } => "voap",
        }
    }

    /// Whether the law needs the link's capacity.
    pub fn needs_capacity(&self) -> bool {
        !matches!(self, ApPolicy::Voap { .. })
    }
}

/// VoAP's loop for one direction.
#[derive(Debug, Default)]
struct Voap {
    /// Aggregate payload rate of the direction's TCP flows, bytes/s.
    rate: f64,
    slow_start: bool,
    last_update: Option<Time>,
    /// Smallest sojourn reported since the last update.
    q_min: Option<Dur>,
}

/// Counters for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApStats {
    pub tcp_segments: u64,
    pub windows_rewritten: u64,
    pub udp_packets: u64,
}

/// The access point's state, shared by the two directions of one link.
#[derive(Debug)]
pub struct SmartAp {
    policy: ApPolicy,
    /// Link rate per direction, bit/s (IP bytes), where known.
    capacity: [Option<f64>; 2],
    conns: HashMap<FiveTuple, Conn>,
    udp: [RateMeter; 2],
    tcp: [RateMeter; 2],
    sojourn: [Dur; 2],
    voap: [Voap; 2],
    stats: ApStats,
    last_sweep: Time,
}

impl SmartAp {
    /// `capacity`: bit/s of the up and down directions (required by the
    /// SAP-LAW variants; the caller checks).
    pub fn new(policy: ApPolicy, capacity: [Option<u64>; 2]) -> SmartAp {
        SmartAp {
            policy,
            capacity: capacity.map(|c| c.map(|v| v as f64)),
            conns: HashMap::new(),
            udp: [RateMeter::new(UDP_WINDOW), RateMeter::new(UDP_WINDOW)],
            tcp: [RateMeter::new(TCP_WINDOW), RateMeter::new(TCP_WINDOW)],
            sojourn: [Dur::ZERO; 2],
            voap: Default::default(),
            stats: ApStats::default(),
            last_sweep: Time::ZERO,
        }
    }

    pub fn policy(&self) -> ApPolicy {
        self.policy
    }

    pub fn stats(&self) -> ApStats {
        self.stats
    }

    /// The queueing delay the AP currently sees in direction `d`: the
    /// sojourn of the packet its queue sent last (zero when empty).
    pub fn note_queue(&mut self, d: Dir, sojourn: Dur) {
        self.sojourn[d] = sojourn;
        let v = &mut self.voap[d];
        v.q_min = Some(v.q_min.map_or(sojourn, |q| q.min(sojourn)));
    }

    /// Takes in one packet entering direction `d` at `now`, and rewrites
    /// the window of a TCP ACK if the policy says so. Returns whether the
    /// packet was changed.
    pub fn on_packet(&mut self, d: Dir, now: Time, p: &mut [u8], parsed: Option<&Parsed>) -> bool {
        self.sweep(now);
        let Some(parsed) = parsed else {
            return false;
        };
        if parsed.tuple.proto != PROTO_TCP {
            self.stats.udp_packets += 1;
            self.udp[d].add(now, parsed.len);
            return false;
        }
        let Some(tcp) = parsed.tcp else {
            return false;
        };
        self.stats.tcp_segments += 1;
        self.tcp[d].add(now, parsed.len);
        let key = if d == 0 {
            parsed.tuple
        } else {
            parsed.tuple.reversed()
        };
        self.conns.entry(key).or_default().observe(d, now, &tcp);
        // This segment's window limits the data travelling the other way.
        let data = other(d);
        if tcp.has(SYN) || !tcp.has(packet::ACK) {
            return false;
        }
        let conn = &self.conns[&key];
        let (Some(shift), Some(rtt)) = (conn.scale_of_sender(d), conn.rtt()) else {
            return false;
        };
        if !conn.active(data, now) {
            return false;
        }
        let Some(window) = self.window(data, now, rtt) else {
            return false;
        };
        let offered = u64::from(tcp.window) << shift;
        if window >= offered {
            return false;
        }
        // Round up to the scale's unit so the sender gets at least `window`.
        let unit = 1u64 << shift;
        let field = window.div_ceil(unit).min(u64::from(u16::MAX)) as u16;
        if field >= tcp.window {
            return false;
        }
        packet::set_window(p, tcp.offset, field);
        self.stats.windows_rewritten += 1;
        true
    }

    /// The window (payload bytes) for a flow of base round trip `rtt` whose
    /// data crosses direction `d`.
    fn window(&mut self, d: Dir, now: Time, rtt: Dur) -> Option<u64> {
        let rtts: Vec<f64> = self
            .conns
            .values()
            .filter(|c| c.active(d, now))
            .filter_map(|c| c.rtt())
            .map(|r| r.as_secs_f64().max(1e-4))
            .collect();
        let n = rtts.len().max(1) as f64;
        let rtt = rtt.as_secs_f64().max(1e-4);
        let mean_rtt = rtts.iter().sum::<f64>() / n;
        let min_window = MIN_WINDOW_MSS * MSS;
        let bytes = match self.policy {
            ApPolicy::SapLaw | ApPolicy::SapLawRtt => {
                let c = self.capacity[d]?;
                let free = (c - self.udp[d].bps(now)).max(0.0) / 8.0 * PAYLOAD_SHARE;
                if self.policy == ApPolicy::SapLaw {
                    let inverse: f64 = rtts.iter().map(|r| 1.0 / r).sum::<f64>().max(1.0 / rtt);
                    free / inverse
                } else {
                    free / n * rtt
                }
            }
            ApPolicy::Voap { alpha, beta } => {
                let rate = self.voap_rate(d, now, n, mean_rtt, alpha, beta);
                rate / n * rtt
            }
        };
        Some((bytes + HEADROOM_MSS * MSS).max(min_window) as u64)
    }

    /// Runs VoAP's loop for direction `d` once per mean round trip.
    fn voap_rate(&mut self, d: Dir, now: Time, n: f64, rtt: f64, alpha: Dur, beta: Dur) -> f64 {
        let tcp_bps = self.tcp[d].bps(now);
        let cap = self.capacity[d];
        let v = &mut self.voap[d];
        let step = n * MSS / rtt;
        let Some(last) = v.last_update else {
            v.rate = n * VOAP_INITIAL_MSS * MSS / rtt;
            v.slow_start = true;
            v.last_update = Some(now);
            v.q_min = None;
            return v.rate;
        };
        if now.saturating_since(last).as_secs_f64() < rtt {
            return v.rate;
        }
        let q = v.q_min.take().unwrap_or(self.sojourn[d]);
        if q < alpha {
            v.rate = if v.slow_start {
                v.rate * 2.0
            } else {
                v.rate + step
            };
        } else {
            v.slow_start = false;
            if q > beta {
                v.rate -= step;
            }
        }
        // The flows may use less than their share (their own window, an
        // application that pauses): growing far past what they send would
        // only store up a burst. Nor can they use more than the link.
        let used = tcp_bps / 8.0 * PAYLOAD_SHARE;
        let headroom = if v.slow_start { 4.0 } else { 2.0 };
        let mut ceiling = (headroom * used).max(n * VOAP_INITIAL_MSS * MSS / rtt);
        if let Some(c) = cap {
            ceiling = ceiling.min(c / 8.0 * PAYLOAD_SHARE);
        }
        v.rate = v.rate.min(ceiling).max(n * MIN_WINDOW_MSS * MSS / rtt);
        v.last_update = Some(now);
        v.rate
    }

    /// Forgets finished connections, once a second.
    fn sweep(&mut self, now: Time) {
        if now.saturating_since(self.last_sweep) < Dur::from_secs(1) {
            return;
        }
        self.last_sweep = now;
        self.conns.retain(|_, c| !c.is_dead(now));
    }

    /// Active TCP flows per direction (for tests and reports).
    pub fn active_flows(&self, d: Dir, now: Time) -> usize {
        self.conns.values().filter(|c| c.active(d, now)).count()
    }
}

#[cfg(test)]
mod tests;
