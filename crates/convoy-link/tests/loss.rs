//! Loss processes against theory, and the link applying them unaltered.

use convoy_link::{
    DropReason, Dur, LinkConfig, LinkDirection, LossModel, LossPosition, LossProcess, RecordKind,
    Time,
};

/// Long-run loss rate and mean burst (run of consecutive losses) length.
fn measure(model: &LossModel, seed: u64, n: u64) -> (f64, f64) {
    let mut p = LossProcess::new(model, seed).unwrap();
    let (mut lost, mut bursts, mut prev) = (0u64, 0u64, false);
    for _ in 0..n {
        let l = p.lose();
        if l {
            lost += 1;
            if !prev {
                bursts += 1;
            }
        }
        prev = l;
    }
    (lost as f64 / n as f64, lost as f64 / bursts as f64)
}

fn within(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want
}

#[test]
fn simple_gilbert_matches_theory_within_2_percent() {
    // Good is lossless (k = 1), Bad loses everything (h = 0): loss rate is
    // pi_B = p_gb / (p_gb + p_bg) and bursts are Bad sojourns, mean 1/p_bg.
    for (p_gb, p_bg, seed) in [(0.02, 0.25, 1u64), (0.01, 0.4, 2), (0.1, 0.1, 3)] {
        let model = LossModel::gilbert(p_gb, p_bg);
        let (rate, burst) = measure(&model, seed, 10_000_000);
        let want_rate = p_gb / (p_gb + p_bg);
        let want_burst = 1.0 / p_bg;
        assert!((model.theoretical_loss_rate().unwrap() - want_rate).abs() < 1e-12);
        assert!((model.theoretical_mean_burst().unwrap() - want_burst).abs() < 1e-12);
        assert!(
            within(rate, want_rate, 0.02),
            "{p_gb}/{p_bg}: loss {rate} vs {want_rate}"
        );
        assert!(
            within(burst, want_burst, 0.02),
            "{p_gb}/{p_bg}: burst {burst} vs {want_burst}"
        );
    }
}

#[test]
fn four_parameter_gilbert_elliott_matches_theory_within_2_percent() {
    // pi_B = 0.05 / 0.35; loss = pi_G (1-k) + pi_B (1-h).
    let model = LossModel::GilbertElliott {
        p_gb: 0.05,
        p_bg: 0.3,
        loss_good: 0.01,
        loss_bad: 0.6,
    };
    let pi_b = 0.05 / 0.35;
    let want_rate = (1.0 - pi_b) * 0.01 + pi_b * 0.6;
    assert!((model.theoretical_loss_rate().unwrap() - want_rate).abs() < 1e-12);
    let want_burst = model.theoretical_mean_burst().unwrap();
    let (rate, burst) = measure(&model, 11, 10_000_000);
    assert!(within(rate, want_rate, 0.02), "loss {rate} vs {want_rate}");
    assert!(
        within(burst, want_burst, 0.02),
        "burst {burst} vs {want_burst}"
    );
}

#[test]
fn bernoulli_matches_theory_within_2_percent() {
    let model = LossModel::Bernoulli { p: 0.03 };
    let (rate, burst) = measure(&model, 5, 10_000_000);
    assert!(within(rate, 0.03, 0.02), "{rate}");
    assert!(within(burst, 1.0 / 0.97, 0.02), "{burst}");
}

/// The link's loss decisions, in departure order.
fn link_losses(config: LinkConfig, n: u64) -> Vec<bool> {
    let mut l: LinkDirection = LinkDirection::new(config.with_records(true)).unwrap();
    for id in 0..n {
        l.enqueue(Time::from_micros(id), 100, id);
    }
    while l.poll_delivery(Time::from_secs(10)).is_some() {}
    let mut lost = vec![false; n as usize];
    let mut finished = 0;
    for r in l.take_records() {
        match r.kind {
            RecordKind::Drop(DropReason::Loss) => {
                lost[r.id as usize] = true;
                finished += 1;
            }
            RecordKind::Deliver { .. } => finished += 1,
            _ => {}
        }
    }
    assert_eq!(finished, n);
    lost
}

#[test]
fn link_applies_the_loss_process_unaltered() {
    let model = LossModel::GilbertElliott {
        p_gb: 0.05,
        p_bg: 0.3,
        loss_good: 0.01,
        loss_bad: 0.6,
    };
    let n = 20_000;
    let mut reference = LossProcess::new(&model, 99).unwrap();
    let want: Vec<bool> = (0..n).map(|_| reference.lose()).collect();
    for position in [LossPosition::AfterQueue, LossPosition::BeforeQueue] {
        let config = LinkConfig::constant(1_000_000_000)
            .with_loss(model.clone())
            .with_loss_position(position)
            .with_seed(99);
        assert_eq!(link_losses(config, n), want, "{position:?}");
    }
    // Jitter draws from its own stream: the loss pattern does not move.
    let config = LinkConfig::constant(1_000_000_000)
        .with_loss(model)
        .with_jitter(Dur::from_millis(3), false)
        .with_seed(99);
    assert_eq!(link_losses(config, n), want);
}

#[test]
fn deterministic_patterns_through_the_link() {
    let every = link_losses(
        LinkConfig::constant(1_000_000_000).with_loss(LossModel::EveryNth { n: 4 }),
        12,
    );
    assert_eq!(
        every,
        [false, false, false, true, false, false, false, true, false, false, false, true]
    );
    let listed = link_losses(
        LinkConfig::constant(1_000_000_000).with_loss(LossModel::Positions(vec![0, 5, 6])),
        8,
    );
    assert_eq!(
        listed,
        [true, false, false, false, false, true, true, false]
    );
}

#[test]
fn loss_after_the_queue_uses_capacity_loss_before_does_not() {
    // 8 Mbit/s: 1000 bytes take 1 ms. Every other packet is lost.
    let run = |position| {
        let mut l: LinkDirection = LinkDirection::new(
            LinkConfig::constant(8_000_000)
                .with_loss(LossModel::EveryNth { n: 2 })
                .with_loss_position(position),
        )
        .unwrap();
        for id in 0..4 {
            l.enqueue(Time::ZERO, 1000, id);
        }
        std::iter::from_fn(|| l.poll_delivery(Time::from_secs(1)))
            .map(|d| (d.id, d.departed_at.as_nanos() / 1_000_000))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(LossPosition::AfterQueue), [(0, 1), (2, 3)]);
    assert_eq!(run(LossPosition::BeforeQueue), [(0, 1), (2, 2)]);
}
