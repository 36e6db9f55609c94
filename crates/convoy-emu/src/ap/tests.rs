//! The access point's laws on hand-made packets: a download's handshake,
//! data and ACKs as Linux sends them (window scale 7, timestamps).

use super::*;
use crate::packet::tests::{tcp_packet, udp_packet, SYN_OPTS};
use crate::packet::{parse, transport_checksum, ACK};

const CLIENT: [u8; 4] = [10, 7, 0, 1];
const SERVER: [u8; 4] = [10, 7, 0, 2];
const UP: Dir = 0;
const DOWN: Dir = 1;

fn ms(v: u64) -> Time {
    Time::from_millis(v)
}

/// Timestamps option (NOP, NOP, TS) with the given values.
fn ts(val: u32, ecr: u32) -> [u8; 12] {
    let mut o = [1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0];
    o[4..8].copy_from_slice(&val.to_be_bytes());
    o[8..12].copy_from_slice(&ecr.to_be_bytes());
    o
}

/// Feeds a packet through the AP; returns it as it leaves.
fn feed(ap: &mut SmartAp, d: Dir, now: Time, mut p: Vec<u8>) -> Vec<u8> {
    let parsed = parse(&p);
    ap.on_packet(d, now, &mut p, parsed.as_ref());
    p
}

/// A download on client port `port` whose loops are `rtt_ms` in total
/// (all of it on the client side), with data flowing from `start`.
/// Returns the window (bytes) the AP leaves in the client's next ACK.
struct Flow {
    port: u16,
    rtt: u64,
    tsval: u32,
    client_ts: u32,
    window: u64,
}

impl Flow {
    fn open(ap: &mut SmartAp, port: u16, rtt: u64, at: u64) -> Flow {
        let syn = tcp_packet(CLIENT, SERVER, port, 5201, 0, 0, SYN, 64240, &SYN_OPTS, 0);
        feed(ap, UP, ms(at), syn);
        let mut synack_opts = SYN_OPTS;
        synack_opts[16..20].copy_from_slice(&[1, 3, 3, 9]);
        let synack = tcp_packet(
            SERVER,
            CLIENT,
            5201,
            port,
            0,
            1,
            SYN | ACK,
            65160,
            &synack_opts,
            0,
        );
        feed(ap, DOWN, ms(at), synack);
        let ack = tcp_packet(CLIENT, SERVER, port, 5201, 1, 1, ACK, 24576, &ts(4, 1), 0);
        feed(ap, UP, ms(at + rtt), ack);
        Flow {
            port,
            rtt,
            tsval: 1000,
            client_ts: 4,
            window: 14480,
        }
    }

    /// One round: a data segment down at `t`, the client's ACK `rtt` later,
    /// and at once the server's next segment echoing it (the whole round
    /// trip is on the client's side of the AP).
    fn round(&mut self, ap: &mut SmartAp, t: u64) -> u64 {
        self.tsval += 1;
        // The sender fills the window it was last given.
        for _ in 0..self.window.div_ceil(1448).max(1) {
            let data = tcp_packet(
                SERVER,
                CLIENT,
                5201,
                self.port,
                1,
                1,
                ACK,
                500,
                &ts(self.tsval, self.client_ts),
                1448,
            );
            feed(ap, DOWN, ms(t), data);
        }
        self.client_ts += 1;
        // The client offers 3 MB (scale 7: 24576 × 128).
        let ack = tcp_packet(
            CLIENT,
            SERVER,
            self.port,
            5201,
            1,
            1449,
            ACK,
            24576,
            &ts(self.client_ts, self.tsval),
            0,
        );
        let out = feed(ap, UP, ms(t + self.rtt), ack);
        self.tsval += 1;
        let next = tcp_packet(
            SERVER,
            CLIENT,
            5201,
            self.port,
            1449,
            1,
            ACK,
            500,
            &ts(self.tsval, self.client_ts),
            1448,
        );
        feed(ap, DOWN, ms(t + self.rtt), next);
        let after = parse(&out).unwrap().tcp.unwrap();
        assert_eq!(
            Some(u16::from_be_bytes([out[36], out[37]])),
            transport_checksum(&out)
        );
        self.window = u64::from(after.window) << 7;
        self.window
    }
}

#[test]
fn sap_law_window_is_free_capacity_times_rtt() {
    // 10 Mbit/s down, 60 ms round trip: (C − U)·RTT = 75 kB of IP bytes.
    let mut ap = SmartAp::new(ApPolicy::SapLaw, [Some(10_000_000), Some(10_000_000)]);
    let mut f = Flow::open(&mut ap, 40000, 60, 0);
    let mut w = 0;
    for i in 0..20 {
        w = f.round(&mut ap, 100 + i * 60);
    }
    let expected = 10e6 / 8.0 * PAYLOAD_SHARE * 0.060 + HEADROOM_MSS * MSS;
    assert!((w as f64 - expected).abs() <= 128.0, "{w} vs {expected}");
    assert!(ap.stats().windows_rewritten > 0);

    // 4 Mbit/s of UDP down (a movie stream): the TCP flow gets the rest.
    for i in 0..600u64 {
        feed(
            &mut ap,
            DOWN,
            ms(1300 + i),
            udp_packet(SERVER, CLIENT, 7000, 7000, 472),
        );
    }
    let w = f.round(&mut ap, 1840);
    let expected = 6e6 / 8.0 * PAYLOAD_SHARE * 0.060 + HEADROOM_MSS * MSS;
    assert!(
        (w as f64 - expected).abs() < 0.03 * expected,
        "{w} vs {expected}"
    );
}

#[test]
fn sap_law_shares_equally_and_rtt_fair_equalises_rates() {
    for policy in [ApPolicy::SapLaw, ApPolicy::SapLawRtt] {
        let mut ap = SmartAp::new(policy, [Some(12_000_000), Some(12_000_000)]);
        let mut flows: Vec<Flow> = [(40001, 30), (40002, 50), (40003, 100)]
            .into_iter()
            .map(|(port, rtt)| Flow::open(&mut ap, port, rtt, 0))
            .collect();
        let mut windows = [0u64; 3];
        for t in (0..2000).step_by(100) {
            for (i, f) in flows.iter_mut().enumerate() {
                windows[i] = f.round(&mut ap, t);
            }
        }
        let rates: Vec<f64> = windows
            .iter()
            .zip([0.030, 0.050, 0.100])
            .map(|(&w, rtt)| (w as f64 - HEADROOM_MSS * MSS) / rtt)
            .collect();
        let total: f64 = rates.iter().sum();
        let free = 12e6 / 8.0 * PAYLOAD_SHARE;
        assert!((total - free).abs() < 0.01 * free, "{policy:?}: {rates:?}");
        match policy {
            // One window for all: rates inversely proportional to RTT.
            ApPolicy::SapLaw => {
                assert!((windows[0] as i64 - windows[2] as i64).abs() <= 128);
                assert!(rates[0] > 3.0 * rates[2]);
            }
            _ => {
                let spread = (rates[0] - rates[2]).abs() / rates[1];
                assert!(spread < 0.01, "{rates:?}");
            }
        }
    }
}

#[test]
fn never_raises_a_window_and_leaves_unknown_flows_alone() {
    let mut ap = SmartAp::new(ApPolicy::SapLaw, [Some(1_000_000_000), Some(1_000_000_000)]);
    let mut f = Flow::open(&mut ap, 40000, 60, 0);
    // At 1 Gbit/s the AP's window is 7 MB, above the client's 3 MB offer.
    for i in 0..5 {
        assert_eq!(f.round(&mut ap, 100 + i * 60), 24576 << 7);
    }
    assert_eq!(ap.stats().windows_rewritten, 0);
    // A flow whose SYNs the AP never saw: its scale is unknown.
    let mut ap = SmartAp::new(ApPolicy::SapLaw, [Some(1_000_000), Some(1_000_000)]);
    let mut g = Flow {
        port: 40100,
        rtt: 60,
        tsval: 1,
        client_ts: 1,
        window: 1448,
    };
    for i in 0..5 {
        assert_eq!(g.round(&mut ap, 100 + i * 60), 24576 << 7);
    }
}

#[test]
fn voap_holds_the_queue_between_alpha_and_beta() {
    let mut ap = SmartAp::new(ApPolicy::voap_default(), [None, None]);
    let mut f = Flow::open(&mut ap, 40000, 60, 0);
    let mut t = 100;
    let mut round = |ap: &mut SmartAp, q_ms: u64, t: &mut u64| {
        ap.note_queue(DOWN, Dur::from_millis(q_ms));
        *t += 61;
        f.round(ap, *t)
    };
    // Empty queue: slow start doubles the window each round trip.
    let w1 = round(&mut ap, 0, &mut t);
    let w2 = round(&mut ap, 0, &mut t);
    let w3 = round(&mut ap, 0, &mut t);
    assert!(
        w2 > w1 && w3 as f64 > 1.5 * (w2 as f64 - HEADROOM_MSS * MSS),
        "{w1} {w2} {w3}"
    );
    // Between α and β: held.
    let held = round(&mut ap, 7, &mut t);
    assert_eq!(round(&mut ap, 7, &mut t), held);
    // Above β: one segment less per round trip.
    let lower = round(&mut ap, 20, &mut t);
    assert!(
        (held as i64 - lower as i64 - MSS as i64).abs() <= 128,
        "{held} {lower}"
    );
    // Below α again, after slow start: one segment more.
    let higher = round(&mut ap, 1, &mut t);
    assert!(
        (higher as i64 - lower as i64 - MSS as i64).abs() <= 128,
        "{lower} {higher}"
    );
}

#[test]
fn udp_and_garbage_are_counted_or_ignored() {
    let mut ap = SmartAp::new(ApPolicy::SapLaw, [Some(1_000_000), Some(1_000_000)]);
    let mut junk = vec![0x45, 0, 0, 3];
    assert!(!ap.on_packet(UP, ms(0), &mut junk, None));
    feed(&mut ap, UP, ms(1), udp_packet(CLIENT, SERVER, 1, 2, 100));
    assert_eq!(ap.stats().udp_packets, 1);
    assert_eq!(ap.stats().tcp_segments, 0);
}
