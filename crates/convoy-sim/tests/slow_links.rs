//! Links far below a megabit: Tide's windows scale with the packet time,
//! and a reading far below what the link carries must not size them past
//! what the arrival log can ever hold.

mod support;

use std::time::Duration;

use convoy_link::{Dur, MahimahiTrace};
use convoy_proto::{Config, Keypair, Mode};
use convoy_sim::{run, TransferSpec};

/// The Verizon drive trace scaled to 5 % of its rate (0.32 Mbit/s up over
/// this minute), from 70 s in: the uplink starts in a deep fade, one
/// opportunity a second.
fn verizon_at_5_percent() -> Option<(MahimahiTrace, MahimahiTrace)> {
    let (up, down) = support::shared_drive("Verizon-LTE-short")?;
    let at = |t: MahimahiTrace| {
        t.scaled(0.05)
            .expect("a scaled trace")
            .starting_at(Dur::from_millis(70_000))
    };
    Some((at(up), at(down)))
}

/// Tide uploading without end over the cellular experiment's link on
/// `up` and `down` for `time`, its timelines in 1 s bins.
fn timed_upload(
    up: &MahimahiTrace,
    down: &MahimahiTrace,
    time: Duration,
) -> convoy_sim::TransferReport {
    let mut c = Config::for_mode(Keypair::generate(), Mode::Tide);
    let mut s = Config::for_mode(Keypair::generate(), Mode::Tide);
    c.seed = Some(1);
    s.seed = Some(2);
    let mut spec = TransferSpec::new(
        support::cellular_link(up),
        support::cellular_link(down),
        c,
        s,
    );
    spec.upload = u64::MAX;
    spec.duration = Some(time);
    spec.timeline_bin = Duration::from_secs(1);
    run(spec).expect("simulation runs")
}

/// A start-up burst into the fade read 52 B/s; the windows sized by it
/// (4 packets' time: 113 s) were longer than the arrival log, so no
/// reading came again, and the sender stayed at its floor of a packet a
/// second for the whole minute (0.056 of the capacity: the cellular
/// grid's worst point at x0.05).
#[test]
fn a_start_in_a_deep_fade_does_not_pin_the_sender_to_its_floor() {
    let Some((up, down)) = verizon_at_5_percent() else {
        return;
    };
    let r = timed_upload(&up, &down, Duration::from_secs(60));
    let share = r.upload.goodput_bps / r.upload.capacity_bps;
    eprintln!(
        "goodput {:.0} kbit/s of {:.0}: {share:.3}; p95 queueing {:?}",
        r.upload.goodput_bps / 1e3,
        r.upload.capacity_bps / 1e3,
        r.upload.queue_delay_p95
    );
    assert!(share > 0.7, "{share:.3} of the capacity");
}

/// The first flight sized by the start pair (connection/start_pair.rs):
/// at 100 kbit/s a fixed 32-packet flight is 3.6 s of queue before any
/// acknowledgment can say so; the pair of Initials measures the link
/// first. At 20 Mbit/s the pair reads the link fast and changes nothing.
#[test]
fn the_start_pair_keeps_a_slow_links_first_flight_out_of_the_queue() {
    for (rate, upload, bound) in [
        (100_000, 200_000, Duration::from_millis(600)),
        (1_000_000, 200_000, Duration::from_millis(150)),
        (20_000_000, 2_000_000, Duration::from_millis(60)),
    ] {
        let link = || {
            convoy_link::LinkConfig::constant(rate)
                .with_delay(Dur::from_millis(20))
                .with_queue(convoy_link::QueueLimit::Packets(200))
        };
        let mut c = Config::for_mode(Keypair::generate(), Mode::Tide);
        let mut s = Config::for_mode(Keypair::generate(), Mode::Tide);
        c.seed = Some(1);
        s.seed = Some(2);
        let mut spec = TransferSpec::new(link(), link(), c, s);
        spec.upload = upload;
        let r = run(spec).expect("simulation runs");
        assert_eq!(r.upload.delivered, upload);
        eprintln!(
            "{} kbit/s: p95 queueing {:?}, goodput {:.0} kbit/s",
            rate / 1000,
            r.upload.queue_delay_p95,
            r.upload.goodput_bps / 1e3
        );
        assert!(
            r.upload.queue_delay_p95 < bound,
            "{} kbit/s: p95 queueing {:?}",
            rate / 1000,
            r.upload.queue_delay_p95
        );
        assert!(r.upload.goodput_bps > 0.85 * rate as f64);
    }
}

/// A link at 1 Mbit/s for 10 s that fades to one packet every 500 ms for
/// 10 s, then comes back. Each arrival in the fade ends a gap longer than
/// the outage gap, so the fade read as a string of outages, and the rate
/// from before it stood: the sender went on at half of it into a link
/// carrying a fortieth, seconds of queue a second. Two such gaps in a row
/// with a delivery between them are a trickle, whose rate is what
/// trickles through (`PathEstimate::fall_to_trickle`); and once the link
/// is back, its rate is read over a few packets, not over the windows the
/// trickle sized.
#[test]
fn a_link_fallen_to_a_trickle_is_not_fed_at_its_rate_from_before() {
    let mut up = Vec::new();
    let mut t = 0.0f64;
    while t < 40_000.0 {
        up.push(t as u64);
        let fade = (10_000.0..20_000.0).contains(&t);
        t += if fade { 500.0 } else { 12.0 };
    }
    let up = MahimahiTrace::from_millis(&up, "fade").expect("a trace");
    let every_ms: Vec<u64> = (0..1000).collect();
    let down = MahimahiTrace::from_millis(&every_ms, "fast").expect("a trace");
    let r = timed_upload(&up, &down, Duration::from_secs(40));
    let kb = |v: &[u64], from: usize, to: usize| v[from..to].iter().sum::<u64>() / 1000;
    // From two seconds into the fade to its end the link carries 2
    // packets a second, 3 kB; before, the sender offered 60 kB a second.
    let offered = kb(&r.uplink_sent, 12, 20);
    // Back at 1 Mbit/s (125 kB a second), the link is full again within
    // a second.
    let carried = kb(&r.uplink_delivered, 20, 26);
    eprintln!("offered in the fade {offered} kB; carried in the 6 s after it {carried} kB");
    assert!(offered < 60, "{offered} kB offered into a fade carrying 24");
    assert!(carried > 600, "{carried} kB carried of 750 after the fade");
}

/// The AT&T drive's downlink at half its rate, its uplink (at half rate
/// too) carrying the feedback, from 0 s and from 41.7 s: the feedback's
/// direction falls silent for about a second just as the data's direction
/// falls from a burst of 8-9 Mbit/s to 1-2 Mbit/s. The sender coasts
/// through the silence; at 3/4 of its rate estimate, which had read the
/// burst, it queued what the link could not carry, and 3.3 % and 2.7 % of
/// its packets died at the 200-packet queue. Coasting at the link's rate
/// over its last second of busy time: 0.8 % and none.
#[test]
fn coasting_through_a_feedback_gap_does_not_overrun_a_falling_link() {
    let Some((up, down)) = support::shared_drive("ATT-LTE-driving-2016") else {
        return;
    };
    for offset_ms in [0, 41_700] {
        let half = |t: &MahimahiTrace| {
            t.scaled(0.5)
                .expect("a scaled trace")
                .starting_at(Dur::from_millis(offset_ms))
        };
        let r = timed_upload(&half(&down), &half(&up), Duration::from_secs(60));
        let u = &r.upload;
        let dropped = u.datagrams_dropped as f64 / u.datagrams_offered.max(1) as f64;
        let share = u.goodput_bps / u.capacity_bps;
        eprintln!(
            "from {offset_ms} ms: {} of {} packets dropped at the queue, {share:.3} of the capacity",
            u.datagrams_dropped, u.datagrams_offered
        );
        assert!(
            dropped < 0.01,
            "from {offset_ms} ms: {:.1} % dropped",
            100.0 * dropped
        );
        assert!(
            share > 0.8,
            "from {offset_ms} ms: {share:.3} of the capacity"
        );
    }
}
