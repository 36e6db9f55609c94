use std::time::Duration;

use convoy_proto::cc::bottleneck::{drive, Bottleneck};
use convoy_proto::cc::RateController;

use super::*;

const RATE: u64 = 2_500_000; // 20 Mbit/s
const RTT: Duration = Duration::from_millis(40);
const BDP: u64 = 100_000; // RATE × RTT

fn deep_buffer() -> Bottleneck {
    Bottleneck {
        queue: 4 * BDP,
        ..Bottleneck::new(RATE, RTT)
    }
}

fn utilisation(cc: &mut dyn RateController, link: &Bottleneck) -> (f64, Duration) {
    let log = drive(cc, link, Duration::from_secs(20));
    let rate = log.rate_between(Duration::from_secs(5), Duration::from_secs(20));
    let mut delays = log.queue_delay[log.queue_delay.len() / 4..].to_vec();
    delays.sort();
    (rate / RATE as f64, delays[delays.len() * 95 / 100])
}

#[test]
fn both_fill_a_deep_buffer_and_keep_the_link_busy() {
    for cc in [
        &mut LossWindow::with_growth(NewReno) as &mut dyn RateController,
        &mut LossWindow::with_growth(Cubic::default()),
    ] {
        let name = cc.name();
        let (util, p95) = utilisation(cc, &deep_buffer());
        eprintln!("{name}: utilisation {util:.3}, p95 queueing {p95:?}");
        assert!(util > 0.95, "{name}: utilisation {util:.3}");
        // Loss-based control finds the buffer's end: queues of several RTTs.
        assert!(p95 > 2 * RTT, "{name}: p95 queueing {p95:?}");
    }
}

#[test]
fn random_loss_cuts_reno_far_below_capacity() {
    // One loss in 50 packets (2 %) without congestion: the window halves
    // every ~50 packets, so NewReno cannot reach 20 Mbit/s at 40 ms.
    let link = Bottleneck {
        lose_every: Some(50),
        ..deep_buffer()
    };
    let (util, _) = utilisation(&mut LossWindow::with_growth(NewReno), &link);
    eprintln!("newreno at 2 % random loss: utilisation {util:.3}");
    assert!(util < 0.5, "utilisation {util:.3}");
}

#[test]
fn cubic_backs_off_to_seven_tenths_and_returns_to_the_plateau() {
    let mut g = Cubic::default();
    let w = 100 * MSS;
    let after = g.reduce(w, Duration::ZERO);
    assert_eq!(after, 70 * MSS);
    // K = cbrt(100 × 0.3 / 0.4) ≈ 4.2 s: near W_max again after K.
    let mut cwnd = after;
    let mut now = Duration::ZERO;
    while now < Duration::from_millis(4200) {
        cwnd = g.grow(cwnd, MSS, now, Duration::from_millis(40));
        now += Duration::from_millis(10);
    }
    let ratio = cwnd as f64 / w as f64;
    assert!(
        (0.95..1.05).contains(&ratio),
        "cwnd {ratio:.3} of W_max at K"
    );
}

#[test]
fn one_reduction_per_loss_episode() {
    use convoy_proto::recovery::SentPacket;
    let mut cc = LossWindow::with_growth(NewReno);
    let lost = |pn, ms| SentPacket {
        pn,
        time: Duration::from_millis(ms),
        bytes: MSS as u32,
        path: 0,
        seq: pn,
        block: None,
        esi: 0,
        ack_eliciting: true,
    };
    let before = cc.cwnd();
    cc.on_loss(Duration::from_millis(100), &[lost(1, 50)]);
    cc.on_loss(Duration::from_millis(101), &[lost(2, 51)]);
    assert_eq!(cc.cwnd(), (before / 2).max(2 * MSS));
    // A packet sent after the episode began starts a new one.
    cc.on_loss(Duration::from_millis(300), &[lost(9, 150)]);
    assert_eq!(cc.cwnd(), (before / 4).max(2 * MSS));
}
