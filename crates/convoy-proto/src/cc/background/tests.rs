use super::*;
use crate::cc::PeerReceive;
use crate::rtt::RttEstimator;

const MSS: u64 = 1472;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn sent(pn: u64, at: Duration) -> SentPacket {
    SentPacket::on_one_path(pn, at, MSS as u32)
}

/// Drives `rounds` round trips of a window-limited sender over a path of
/// base RTT `base` whose queue adds `q(round)`; returns the windows. The
/// sender's clock and packet numbers live in the controller's test state.
fn drive(b: &mut Background, base: u64, rounds: u64, q: impl Fn(u64) -> u64) -> Vec<u64> {
    let rtt = RttEstimator::default();
    let (mut now, mut pn) = CLOCK.with(|c| c.get());
    let mut out = Vec::new();
    for r in 0..rounds {
        let packets = (b.cwnd() / MSS).max(1);
        let start = now;
        for _ in 0..packets {
            b.on_sent(now, pn, MSS as usize, b.cwnd());
            pn += 1;
        }
        let ack_at = start + ms(base + q(r));
        let acked: Vec<SentPacket> = (pn - packets..pn).map(|p| sent(p, start)).collect();
        b.on_ack(&AckEvent {
            now: ack_at,
            acked: &acked,
            rtt: &rtt,
            bytes_in_flight: 0,
            peer_receive: None,
        });
        now = ack_at;
        out.push(b.cwnd());
    }
    CLOCK.with(|c| c.set((now, pn)));
    out
}

thread_local! {
    static CLOCK: std::cell::Cell<(Duration, u64)> = const { std::cell::Cell::new((Duration::from_secs(1), 0)) };
}

#[test]
fn slow_start_doubles_then_stops_at_three_quarters_of_the_target() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    let w = drive(&mut b, 60, 4, |_| 0);
    assert_eq!(w[1], 2 * w[0]);
    assert_eq!(w[2], 2 * w[1]);
    assert!(b.in_slow_start());
    // 2 ms of queue is under ¾ of the 3 ms target: still doubling. 3 ms
    // is past it: slow start ends, and with no excess the window is held.
    drive(&mut b, 60, 1, |_| 2);
    assert!(b.in_slow_start());
    let before = b.cwnd();
    drive(&mut b, 60, 1, |_| 3);
    assert!(!b.in_slow_start());
    assert_eq!(b.cwnd(), before);
}

#[test]
fn grows_below_target_and_shrinks_above_it() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    // Leave slow start; then an empty queue two rounds running: + 1/8 of
    // the window.
    drive(&mut b, 60, 3, |_| 3);
    drive(&mut b, 60, 1, |_| 0);
    let w0 = b.cwnd();
    let w = drive(&mut b, 60, 1, |_| 0);
    assert_eq!(w[0], w0 + w0 / 8);
    // 2 ms, under the 3 ms target: half the 1 ms gap's packets, or a third
    // of a packet if that is more (a small window: it is here).
    let w1 = b.cwnd() as f64;
    let w = drive(&mut b, 60, 1, |_| 2);
    let step = (0.5 * 0.001 * w1 / 0.062).max(MSS as f64 / 3.0);
    assert!((w[0] as f64 - (w1 + step)).abs() <= 2.0, "{w1} → {}", w[0]);
    // 13 ms: 10 ms too much, taken off once a second round confirms it
    // (one round alone may be a stall).
    let w2 = b.cwnd() as f64;
    assert_eq!(drive(&mut b, 60, 1, |_| 13)[0] as f64, w2);
    let w = drive(&mut b, 60, 1, |_| 13);
    let excess = 0.010 * w2 / 0.073;
    assert!(
        (w[0] as f64 - (w2 - excess)).abs() <= 2.0,
        "{w2} → {}",
        w[0]
    );
    // A competitor filling a 250-packet queue (300 ms): halves each round
    // trip, to the minimum within a few.
    let w = drive(&mut b, 60, 8, |_| 300);
    assert_eq!(*w.last().unwrap(), MIN_WINDOW_PACKETS * MSS);
    assert!(
        w.iter()
            .position(|&x| x == MIN_WINDOW_PACKETS * MSS)
            .unwrap()
            <= 6
    );
}

#[test]
fn one_empty_round_is_not_yet_room_to_probe() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    drive(&mut b, 60, 5, |_| 0); // slow start
    drive(&mut b, 60, 1, |_| 3); // leave it
    drive(&mut b, 60, 2, |_| 2); // in the band

    // A stall of the sender empties the queue for one round's minimum:
    // the window moves as at the band's edge (¼ of the target), half of
    // the ¾ target's packets, not by an eighth of itself.
    let w0 = b.cwnd() as f64;
    let w1 = drive(&mut b, 60, 1, |_| 0)[0] as f64;
    let edge = 0.5 * 0.00225 * w0 / 0.060;
    assert!((w1 - (w0 + edge)).abs() <= 2.0, "{w0} → {w1}");
    assert!(w1 < w0 * 1.05, "{w0} → {w1}");
    // A second empty round in a row is room the rate cannot show.
    let w2 = drive(&mut b, 60, 1, |_| 0)[0];
    assert_eq!(w2, b.cwnd());
    assert_eq!(w2, w1 as u64 + w1 as u64 / 8);
    // A queue in between starts the count again.
    drive(&mut b, 60, 1, |_| 2);
    let w3 = b.cwnd() as f64;
    let w4 = drive(&mut b, 60, 1, |_| 0)[0] as f64;
    assert!(w4 < w3 * 1.05, "{w3} → {w4}");
}

#[test]
fn loss_changes_nothing() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    drive(&mut b, 60, 3, |_| 0);
    let w = b.cwnd();
    let lost: Vec<SentPacket> = (0..20).map(|p| sent(p, ms(1000))).collect();
    b.on_loss(ms(2000), &lost);
    assert_eq!(b.cwnd(), w);
}

#[test]
fn an_unused_window_does_not_grow() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    let rtt = RttEstimator::default();
    let w = b.cwnd();
    // One packet per round, far below the window: app-limited.
    for r in 0..10u64 {
        let t = ms(1000 + r * 60);
        b.on_sent(t, r, MSS as usize, MSS);
        b.on_ack(&AckEvent {
            now: t + ms(60),
            acked: &[sent(r, t)],
            rtt: &rtt,
            bytes_in_flight: 0,
            peer_receive: None,
        });
    }
    assert_eq!(b.cwnd(), w);
}

#[test]
fn base_rtt_is_forgotten_after_its_history() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(20));
    assert_eq!(b.base_rtt(), Some(ms(20)));
    // The route changes: 80 ms from now on.
    let rtt = RttEstimator::default();
    let mut t = ms(1000);
    let horizon = BASE_BUCKET * (BASE_BUCKETS as u32 + 1);
    while t < horizon {
        b.on_ack(&AckEvent {
            now: t + ms(80),
            acked: &[sent(0, t)],
            rtt: &rtt,
            bytes_in_flight: 0,
            peer_receive: None,
        });
        t += ms(500);
    }
    assert_eq!(b.base_rtt(), Some(ms(80)));
}

#[test]
fn priority_names() {
    assert_eq!("background".parse::<Priority>(), Ok(Priority::Background));
    assert!("low"
        .parse::<Priority>()
        .unwrap_err()
        .contains("normal, background"));
    let mut cfg = crate::Config::new(crate::Keypair::generate());
    Priority::Background.apply(&mut cfg);
    assert_eq!(cfg.rate_control.build().name(), "background");
}

/// Packets sent 3 ms apart, each received 30 ms later (the peer's clock
/// 5 s ahead) plus `extra(i)` of queue, each acknowledged 30 ms after
/// that; returns the window after each acknowledgment.
fn drive_one_way(b: &mut Background, from: u64, n: u64, extra: impl Fn(u64) -> u64) -> Vec<u64> {
    let rtt = RttEstimator::default();
    let mut out = Vec::new();
    for i in 0..n {
        let (pn, at) = (from + i, ms(10_000 + 3 * (from + i)));
        let received = at + ms(30 + extra(i));
        b.on_sent(at, pn, MSS as usize, b.cwnd());
        b.on_ack(&AckEvent {
            now: received + ms(30),
            acked: &[sent(pn, at)],
            rtt: &rtt,
            bytes_in_flight: 0,
            peer_receive: Some(PeerReceive {
                pn,
                sent: at,
                received: received + Duration::from_secs(5),
            }),
        });
        out.push(b.cwnd());
    }
    out
}

#[test]
fn one_way_delays_far_above_the_base_cut_at_once_to_what_arrives() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    drive(&mut b, 60, 1, |_| 0);
    drive(&mut b, 60, 1, |_| 3); // out of slow start at 20 packets
    drive_one_way(&mut b, 1000, 60, |_| 0);
    // The link stops for 25 ms (a rate fall the round's minimum would
    // show a round late): the third acknowledgment in a row that carries
    // it cuts the window to what the peer received over the last two base
    // RTTs times the base RTT plus the target, at most by half...
    let w = drive_one_way(&mut b, 1060, 18, |i| if i < 10 { 0 } else { 25 });
    let before = w[9];
    assert_eq!(w[10..12], [before, before], "{w:?}");
    // Over the 120 ms of receive times before it, 95 ms of packets 3 ms
    // apart, then the stop.
    let received = (95.0 / 3.0) * MSS as f64 / 0.120;
    let fits = received * 0.063;
    assert!(((before / 2) as f64) < fits && fits < before as f64);
    assert!((w[12] as f64 - fits).abs() < 0.07 * fits, "{fits} {w:?}");
    // ...and at most once per base RTT.
    assert!(w[13..].iter().all(|&x| x == w[12]), "{w:?}");
}

#[test]
fn slow_start_ends_on_three_samples_over_twice_the_target() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    drive_one_way(&mut b, 0, 40, |_| 0);
    assert!(b.in_slow_start());
    // Samples 5 ms above the base (under twice the 3 ms target) and two
    // at 7 ms do not end it...
    let w = drive_one_way(&mut b, 40, 6, |i| if i < 4 { 5 } else { 7 });
    assert!(b.in_slow_start(), "{w:?}");
    let before = b.cwnd();
    // ...a third at 7 ms in a row does, with the early cut, at once (the
    // round's minimum would still read the base).
    let w = drive_one_way(&mut b, 46, 1, |_| 7);
    assert!(!b.in_slow_start());
    assert!(w[0] < before && w[0] >= before / 2, "{before} → {w:?}");
}

#[test]
fn a_couple_of_one_way_delay_spikes_wait_for_the_round() {
    let mut b = Background::new(BackgroundConfig::default());
    b.on_handshake_rtt(ms(0), ms(60));
    drive(&mut b, 60, 5, |_| 3);
    drive_one_way(&mut b, 1000, 60, |_| 0);
    let before = b.cwnd();
    // 15 ms spikes on two packets in a row (grant gaps): over
    // `EARLY_CUT_QUEUE`, but not `EARLY_CUT_SAMPLES` in a row, and the
    // round's minimum is still the base.
    let w = drive_one_way(&mut b, 1060, 6, |i| if i == 2 || i == 3 { 15 } else { 0 });
    assert!(w.iter().all(|&x| x >= before), "{before} → {w:?}");
}

#[test]
fn an_early_cut_on_a_steady_link_keeps_the_window_that_holds_the_target() {
    // 10 Mbit/s, 50 ms base, the queue at 15 ms: the window in flight is
    // the rate over 65 ms plus the packets the peer holds for its next
    // acknowledgment, half a batch of 4 on average. Holding 3 ms needs
    // the window less 12 ms of rate, which the rate over 53 ms plus half
    // a batch also gives.
    let rate = 1.25e6;
    let batch = 4.0 * MSS as f64;
    let window = (rate * 0.065 + batch / 2.0) as u64;
    let cut = early_cut_window(window, rate, ms(53), ms(12), batch);
    assert!(cut.abs_diff(window - (rate * 0.012) as u64) <= 1, "{cut}");
    // The rate over the base round trip plus the target alone would leave
    // out the half batch, and the next rounds would read an empty queue.
    assert!((rate * 0.053) as u64 + MSS <= cut);
}

#[test]
fn an_early_cut_after_the_rate_fell_takes_the_received_rate() {
    // The window was sized for 10 Mbit/s at an empty queue; the link now
    // carries 5 and the queue reads 15 ms.
    let window = (1.25e6 * 0.050) as u64;
    let rate = 0.625e6;
    let cut = early_cut_window(window, rate, ms(53), ms(12), MSS as f64);
    assert_eq!(cut, (rate * 0.053 + MSS as f64 / 2.0) as u64);
    // ...never by more than half.
    assert_eq!(
        early_cut_window(window, 0.1e6, ms(53), ms(12), MSS as f64),
        window / 2
    );
}

#[test]
fn samples_high_for_slow_start_do_not_count_toward_an_early_cut_after_it() {
    // Pairs at 4 ms one-way (over ¾ of the target: the round law ends
    // slow start at the round's end) and pairs at 7 ms (over twice the
    // target, never three in a row). Where the round ends depends on the
    // phase: take the phase where slow start ends right after two at 7 ms.
    let pattern = [4, 4, 7, 7];
    let ended = (0..4).find_map(|phase| {
        let mut b = Background::new(BackgroundConfig::default());
        b.on_handshake_rtt(ms(0), ms(60));
        drive_one_way(&mut b, 0, 40, |_| 0);
        let mut pn = 40;
        let mut last = Vec::new();
        while b.in_slow_start() && pn < 200 {
            let extra = pattern[(pn as usize + phase) % 4];
            drive_one_way(&mut b, pn, 1, |_| extra);
            last.push(extra);
            pn += 1;
        }
        last.ends_with(&[7, 7]).then_some((b, pn))
    });
    let (mut b, pn) = ended.expect("no phase ends slow start after two samples at 7 ms");
    assert!(
        b.last_early_cut.is_none(),
        "slow start ended by the round, not a cut"
    );
    // One sample over the early cut's 12 ms is one, not a third in a row.
    let before = b.cwnd();
    let w = drive_one_way(&mut b, pn, 1, |_| 13);
    assert_eq!(w[0], before);
}
