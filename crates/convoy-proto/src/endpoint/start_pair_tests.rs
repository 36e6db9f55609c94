//! The start pair (connection/start_pair.rs) between two endpoints in
//! virtual time: the server measures the Initial's copy, the client sizes
//! its first flight by the report, and a lost copy, a late one or a lost
//! report costs at most the wait, never the handshake.

use std::time::Duration;

use super::tests::{addr, client, drain, server, MS};
use super::*;
use crate::config::Mode;
use crate::crypto::Keypair;

/// A client in the default mode (Tide), whose first flight the pair sizes.
fn tide_client() -> Endpoint {
    let mut cfg = Config::for_mode(Keypair::generate(), Mode::Tide);
    cfg.seed = Some(2);
    Endpoint::new(cfg, false).unwrap()
}

/// The uplink: 10 ms one way, and `serialize` per 1,200-byte datagram
/// (126 ms is 76 kbit/s, 0.5 ms is 20 Mbit/s), and `grant_gap` more before
/// the copy (a cellular scheduler's pause between two grants).
struct Uplink {
    serialize: Duration,
    grant_gap: Duration,
}

fn smooth(serialize: Duration) -> Uplink {
    Uplink {
        serialize,
        grant_gap: Duration::ZERO,
    }
}

/// What happened around one start.
struct Start {
    /// Datagrams the client's first send put out.
    initials: Vec<Vec<u8>>,
    /// Server datagrams answering the copy.
    after_copy: Vec<Vec<u8>>,
    /// Full-size datagrams the client sent before the report came.
    data_before_report: usize,
    /// The handshake's round trip as the client saw it.
    rtt: Duration,
    /// When each full-size datagram left, from the reply's arrival.
    data_at: Vec<Duration>,
    /// Full-size datagrams the client sent in the 300 ms after it, no
    /// acknowledgment coming back: its first flight.
    first_flight: usize,
}

const ONE_WAY: Duration = Duration::from_millis(10);

fn is_data(d: &[u8]) -> bool {
    d.len() >= 1000
}

/// Runs the handshake by hand. `copy`: whether it arrives; `reports`:
/// which of the server's datagrams answering it arrive.
fn start(link: Uplink, copy: bool, reports: [bool; 2]) -> Start {
    let (mut s, kp) = server(64, 100);
    let mut c = tide_client();
    let h = c
        .connect(Duration::ZERO, addr(0), Some(&kp.public))
        .unwrap();
    let initials: Vec<Vec<u8>> = drain(&mut c, Duration::ZERO)
        .into_iter()
        .map(|(_, d)| d)
        .collect();
    // Each Initial reaches the server once serialized behind the one before.
    let first_at = ONE_WAY + link.serialize;
    s.handle(first_at, addr(1), &initials[0]);
    let replies = drain(&mut s, first_at);
    let copy_at = first_at + link.serialize + link.grant_gap;
    let mut after_copy = Vec::new();
    if copy && initials.len() > 1 {
        s.handle(copy_at, addr(1), &initials[1]);
        after_copy = drain(&mut s, copy_at).into_iter().map(|(_, d)| d).collect();
    }
    let reply_at = first_at + ONE_WAY;
    for (_, d) in &replies {
        c.handle(reply_at, addr(0), d);
    }
    let conn = c.connection(h).unwrap();
    let id = conn.open_stream().unwrap();
    conn.write(id, &[7u8; 200_000]).unwrap();
    let report_at = copy_at + ONE_WAY;
    let mut now = reply_at;
    let mut data_at = Vec::new();
    let data_before_report = step(&mut c, &mut now, report_at, &mut data_at);
    for (d, _) in after_copy
        .iter()
        .zip(reports)
        .filter(|(_, arrives)| *arrives)
    {
        c.handle(report_at, addr(0), d);
    }
    let first_flight = step(&mut c, &mut now, report_at + 300 * MS, &mut data_at);
    Start {
        initials,
        after_copy,
        data_before_report,
        first_flight,
        rtt: reply_at,
        data_at: data_at.iter().map(|t| *t - reply_at).collect(),
    }
}

/// Runs the client as a driver does, waking at its `poll_timeout`, until
/// `until`, nothing coming back: the full-size datagrams it sent (their
/// times go to `at`).
fn step(c: &mut Endpoint, now: &mut Duration, until: Duration, at: &mut Vec<Duration>) -> usize {
    let mut sent = 0;
    while *now < until {
        c.handle_timeout(*now);
        let n = drain(c, *now).iter().filter(|(_, d)| is_data(d)).count();
        at.extend(std::iter::repeat_n(*now, n));
        sent += n;
        // Nothing due is no reason to wake: a driver asked to wake at once
        // with nothing to send (data held for the report) spins.
        let next = c.poll_timeout();
        assert!(
            next.is_none_or(|t| t > *now),
            "woken at once with nothing to send"
        );
        *now = next.map_or(until, |t| t.min(until));
    }
    sent
}

const BOTH: [bool; 2] = [true, true];
const NONE: [bool; 2] = [false, false];

const SLOW: Duration = Duration::from_millis(126);
const FAST: Duration = Duration::from_micros(500);

#[test]
fn the_initial_goes_twice_and_the_copy_is_measured_not_answered() {
    let r = start(smooth(SLOW), true, BOTH);
    assert_eq!(r.initials.len(), 2, "the Initial and its copy");
    assert_eq!(r.initials[0], r.initials[1]);
    assert!(r.initials[0].len() >= crate::wire::MIN_INITIAL_SIZE);
    // Two protected packets with the report, not the handshake reply
    // again.
    assert_eq!(r.after_copy.len(), 2);
    for d in &r.after_copy {
        assert!(
            matches!(
                crate::wire::packet::parse(d),
                Ok(crate::wire::Packet::Protected(_))
            ),
            "the report, in a protected packet"
        );
    }
}

#[test]
fn a_slow_link_gets_a_small_first_flight_and_a_fast_one_the_full_window() {
    let slow = start(smooth(SLOW), true, BOTH);
    assert_eq!(slow.data_before_report, 0, "data waits for the report");
    assert!(
        (1..=3).contains(&slow.first_flight),
        "at 76 kbit/s: {} packets",
        slow.first_flight
    );
    let fast = start(smooth(FAST), true, BOTH);
    assert!(
        fast.first_flight >= 30,
        "at 20 Mbit/s: {}",
        fast.first_flight
    );
}

#[test]
fn either_report_alone_sizes_the_first_flight() {
    for reports in [[false, true], [true, false]] {
        let r = start(smooth(SLOW), true, reports);
        assert!(
            r.data_before_report == 0 && (1..=3).contains(&r.first_flight),
            "reports {reports:?}: {} before, {} after",
            r.data_before_report,
            r.first_flight
        );
    }
}

#[test]
fn without_a_report_a_couple_of_packets_go_after_a_round_trip_and_the_configured_flight_after_two()
{
    for (copy, report) in [(false, NONE), (true, NONE)] {
        let r = start(smooth(SLOW), copy, report);
        let by = |t: Duration| r.data_at.iter().filter(|&&s| s < t).count();
        assert_eq!(by(r.rtt), 0, "copy {copy}: data waits a round trip");
        assert!(
            (1..=2).contains(&by(2 * r.rtt)),
            "copy {copy}: the second round trip: {:?}",
            r.data_at
        );
        assert!(
            r.first_flight + r.data_before_report >= 30,
            "copy {copy}, reports {report:?}: {} + {}",
            r.data_before_report,
            r.first_flight
        );
    }
}

#[test]
fn a_report_later_than_the_handshake_round_trip_still_sizes_the_first_flight() {
    // The copy waits 100 ms for the scheduler's next grant: its report
    // comes 226 ms after the reply, the handshake took 146.
    let r = start(
        Uplink {
            serialize: SLOW,
            grant_gap: 100 * MS,
        },
        true,
        BOTH,
    );
    assert!(
        (1..=2).contains(&r.data_before_report),
        "a couple of packets while the report is awaited: {}",
        r.data_before_report
    );
    assert!(
        r.first_flight <= 2,
        "the report keeps the flight small: {} more",
        r.first_flight
    );
}

#[test]
fn a_repeat_long_after_the_initial_is_answered_not_measured() {
    let (mut s, kp) = server(64, 100);
    let mut c = client();
    c.connect(Duration::ZERO, addr(0), Some(&kp.public))
        .unwrap();
    let initial = drain(&mut c, Duration::ZERO).remove(0).1;
    s.handle(ONE_WAY, addr(1), &initial);
    let reply = drain(&mut s, ONE_WAY).remove(0).1;
    // The client's retransmission, 600 ms later: the reply goes again.
    let later = ONE_WAY + 600 * MS;
    s.handle(later, addr(1), &initial);
    let again: Vec<Vec<u8>> = drain(&mut s, later).into_iter().map(|(_, d)| d).collect();
    assert_eq!(again, vec![reply]);
}

#[test]
fn only_an_ik_client_whose_controller_uses_it_sends_a_pair() {
    let (_s, kp) = server(64, 100);
    let mut xx = tide_client();
    xx.connect(Duration::ZERO, addr(0), None).unwrap();
    assert_eq!(drain(&mut xx, Duration::ZERO).len(), 1, "XX");
    let mut rcdp = client();
    rcdp.connect(Duration::ZERO, addr(0), Some(&kp.public))
        .unwrap();
    assert_eq!(drain(&mut rcdp, Duration::ZERO).len(), 1, "RCDP");
}
