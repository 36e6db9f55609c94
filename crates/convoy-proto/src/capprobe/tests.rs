use super::*;
use proptest::prelude::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

fn pair(at: Duration, bytes: u32, dispersion: Duration, delay_sum: Duration) -> PairSample {
    PairSample {
        at,
        bytes,
        dispersion,
        delay_sum,
    }
}

fn estimator() -> Estimator {
    Estimator::new(Duration::ZERO, Config::default()).unwrap()
}

fn close(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= b / 1000 + 1
}

#[test]
fn capacity_from_pairs_of_known_dispersion() {
    let mut e = estimator();
    assert_eq!(e.capacity_bps(), None);
    // 1250 bytes in 1 ms is 10 Mbit/s.
    for i in 0..20 {
        e.on_pair(pair(ms(i * 100), 1250, ms(1), ms(40)));
    }
    assert!(close(e.capacity_bps().unwrap(), 10_000_000));
    // Half-size packets at half the gap are the same path: mixing sizes
    // leaves C′ where it was.
    for i in 20..40 {
        e.on_pair(pair(ms(i * 100), 625, us(500), ms(40)));
    }
    assert!(close(e.capacity_bps().unwrap(), 10_000_000));
    assert!((e.delta().unwrap() - 1.0).abs() < 1e-9);
}

#[test]
fn dispersion_is_smoothed_with_alpha_one_eighth() {
    let mut e = estimator();
    e.on_pair(pair(ms(0), 1250, ms(1), ms(40)));
    e.on_pair(pair(ms(10), 1250, ms(9), ms(50)));
    // 1 ms + (9 − 1) ms / 8 = 2 ms: 1250 bytes in 2 ms is 5 Mbit/s.
    assert!(close(e.capacity_bps().unwrap(), 5_000_000));
}

#[test]
fn cross_traffic_raises_delta_against_the_clean_baseline() {
    let mut e = estimator();
    for i in 0..5 {
        e.on_pair(pair(ms(i * 100), 1250, ms(1), ms(40)));
    }
    // Cross traffic squeezes in between the two packets of every pair: the
    // gaps grow 200-fold and the pairs wait in the queue (larger delay sums).
    for i in 5..60 {
        e.on_pair(pair(ms(i * 100), 1250, ms(200), ms(400)));
    }
    let delta = e.delta().unwrap();
    assert!(delta > 100.0 && delta <= 200.0, "δ = {delta}");
    // The baseline is still the clean pairs' 10 Mbit/s.
    assert!(close(e.baseline_capacity_bps().unwrap(), 10_000_000));
}

#[test]
fn minimum_delay_sum_picks_the_uncontaminated_pair() {
    let mut e = estimator();
    // Compressed: the first packet waited behind cross traffic and the
    // second caught up, so the gap is too small (an over-estimate).
    e.on_pair(pair(ms(0), 1250, us(200), ms(50)));
    assert!(close(e.baseline_capacity_bps().unwrap(), 50_000_000));
    // Spread: queued between the two, too large a gap.
    e.on_pair(pair(ms(100), 1250, ms(5), ms(60)));
    // Clean: the smallest delay sum. Its gap is the baseline although it is
    // larger than the compressed pair's.
    e.on_pair(pair(ms(200), 1250, ms(1), ms(40)));
    assert!(close(e.baseline_capacity_bps().unwrap(), 10_000_000));
    // More compressed pairs with larger delay sums do not move it.
    for i in 3..20 {
        e.on_pair(pair(ms(i * 100), 1250, us(200), ms(41)));
    }
    assert!(close(e.baseline_capacity_bps().unwrap(), 10_000_000));
    // A pair with the same minimum delay sum and a smaller gap refines it.
    e.on_pair(pair(ms(2000), 1250, us(800), ms(40)));
    assert!(close(e.baseline_capacity_bps().unwrap(), 12_500_000));
    // Forgetting the baseline starts over from the next pair.
    e.reset_baseline();
    assert_eq!(e.delta(), None);
    e.on_pair(pair(ms(2100), 1250, ms(2), ms(90)));
    assert!(close(e.baseline_capacity_bps().unwrap(), 5_000_000));
}

/// Puts an estimator into a state where exactly the asked-for metrics vote
/// bad, and grades it at 1 s.
fn graded_with(low_capacity: bool, high_delta: bool, high_srtt: bool) -> Grade {
    let mut e = estimator();
    let (baseline, spread) = match (low_capacity, high_delta) {
        // 10 Mbit/s, steady.
        (false, false) => (ms(1), ms(1)),
        // 50 Mbit/s against a 10 Gbit/s baseline: δ = 200.
        (false, true) => (us(1), us(200)),
        // 0.1 Mbit/s, steady: a slow but uncongested path.
        (true, false) => (ms(100), ms(100)),
        // 0.05 Mbit/s against 10 Mbit/s: δ = 200.
        (true, true) => (ms(1), ms(200)),
    };
    e.on_pair(pair(ms(10), 1250, baseline, ms(40)));
    for i in 0..100 {
        e.on_pair(pair(ms(20 + i * 9), 1250, spread, ms(80)));
    }
    let rtt = if high_srtt { ms(2500) } else { ms(60) };
    for i in 0..10 {
        e.on_rtt(ms(100 + i * 90), rtt);
    }
    let grade = e.grade(ms(1000)).unwrap();
    assert_eq!(grade.reasons.low_capacity, low_capacity);
    assert_eq!(grade.reasons.high_delta, high_delta);
    assert_eq!(grade.reasons.high_srtt, high_srtt);
    grade
}

#[test]
fn any_two_of_three_make_a_bad_grade() {
    // Table 7.1: one metric alone is an "isolated" indication, two are bad.
    for (c, d, s) in [
        (false, false, false),
        (false, false, true),
        (false, true, false),
        (true, false, false),
        (false, true, true),
        (true, false, true),
        (true, true, false),
        (true, true, true),
    ] {
        let grade = graded_with(c, d, s);
        let votes = u32::from(c) + u32::from(d) + u32::from(s);
        assert_eq!(grade.bad, votes >= 2, "C′ {c} δ {d} SRTT {s}: {grade:?}");
        assert_eq!(grade.consecutive_bad, u32::from(votes >= 2));
    }
}

/// One second of a bad path (0.5 Mbit/s behind a deep queue), or of a
/// good one, then a grade at `second`.
fn run_second(e: &mut Estimator, second: u64, bad: bool) -> Option<Grade> {
    for i in 0..10 {
        let at = ms(second * 1000 - 1000 + i * 100 + 50);
        if bad {
            e.on_pair(pair(at, 1250, ms(20), ms(600)));
            e.on_rtt(at, ms(2600));
        } else {
            e.on_pair(pair(at, 1250, ms(1), ms(40)));
            e.on_rtt(at, ms(40));
        }
    }
    e.grade(ms(second * 1000))
}

#[test]
fn flagged_after_n_consecutive_bad_grades_and_not_before() {
    let mut e = estimator();
    // Not before γ.
    assert_eq!(e.grade(ms(999)), None);
    for s in 1..=3 {
        assert!(!run_second(&mut e, s, false).unwrap().bad);
    }
    for (n, s) in (4..=8).enumerate() {
        let grade = run_second(&mut e, s, true).unwrap();
        assert!(grade.bad);
        assert!(grade.reasons.low_capacity && grade.reasons.high_srtt);
        assert_eq!(grade.consecutive_bad, n as u32 + 1);
        assert_eq!(e.is_bad(), n + 1 >= 5, "after {} bad grades", n + 1);
        // At most one grade per γ.
        assert_eq!(e.grade(ms(s * 1000 + 999)), None);
    }
    assert_eq!(e.stats().bad_grades, 5);
}

#[test]
fn a_good_grade_resets_the_count() {
    let mut e = estimator();
    for s in 1..=6 {
        run_second(&mut e, s, true);
    }
    assert!(e.is_bad());
    // The path recovers: C′ climbs back over 1 Mbit/s within the second,
    // the RTT window holds only fresh samples.
    let grade = run_second(&mut e, 7, false).unwrap();
    assert!(!grade.bad, "{grade:?}");
    assert_eq!(grade.consecutive_bad, 0);
    assert!(!e.is_bad());
    // Four bad grades after that are not enough again.
    for s in 8..=11 {
        run_second(&mut e, s, true);
    }
    assert_eq!(e.consecutive_bad(), 4);
    assert!(!e.is_bad());
}

/// A narrow path that does not queue (0.5 Mbit/s, a short RTT): only C′
/// votes, so never bad by Algorithm 1, but persistently low after N
/// grades, and no longer once a good grade comes.
#[test]
fn capacity_alone_is_persistently_low_after_n_grades() {
    let mut e = estimator();
    for s in 1..=7 {
        for i in 0..10 {
            let at = ms(s * 1000 - 1000 + i * 100 + 50);
            e.on_pair(pair(at, 1250, ms(20), ms(60)));
            e.on_rtt(at, ms(60));
        }
        let grade = e.grade(ms(s * 1000)).unwrap();
        assert!(grade.reasons.low_capacity && !grade.bad, "{grade:?}");
        assert_eq!(grade.consecutive_low_capacity, s as u32);
        assert_eq!(e.persistently_low_capacity(), s >= 5, "after {s} grades");
    }
    assert!(!e.is_bad());
    // Good pairs lift C′ back over the threshold within the second.
    let grade = run_second(&mut e, 8, false).unwrap();
    assert_eq!(grade.consecutive_low_capacity, 0, "{grade:?}");
    assert!(!e.persistently_low_capacity());
}

#[test]
fn a_period_without_pairs_votes_low_capacity() {
    let mut e = estimator();
    run_second(&mut e, 1, false);
    // Acks still come back quickly but no pair arrives: one vote only.
    e.on_rtt(ms(1500), ms(40));
    let grade = e.grade(ms(2000)).unwrap();
    assert!(grade.reasons.no_pairs && grade.reasons.low_capacity);
    assert!(!grade.bad);
    assert_eq!(grade.capacity_bps, Some(10_000_000));
    // Then nothing at all for 2.5 s: no pairs, and an answer that has not
    // come for longer than SRTT_THR. Two votes.
    let grade = e.grade(ms(4000)).unwrap();
    assert!(grade.reasons.rtt_silent && grade.reasons.high_srtt);
    assert_eq!(grade.srtt, ms(2500));
    assert!(grade.bad);
}

#[test]
fn a_path_that_never_answered_is_graded_on_its_silence() {
    let mut e = Estimator::new(ms(5000), Config::default()).unwrap();
    let grade = e.grade(ms(6000)).unwrap();
    assert_eq!((grade.capacity_bps, grade.delta), (None, None));
    assert_eq!(grade.srtt, ms(1000));
    assert!(!grade.bad);
    let grade = e.grade(ms(7500)).unwrap();
    assert!(grade.bad, "{grade:?}");
}

#[test]
fn srtt_is_averaged_over_its_window_only() {
    let mut e = estimator();
    e.on_rtt(ms(100), ms(3000));
    e.on_rtt(ms(1500), ms(40));
    e.on_rtt(ms(1900), ms(60));
    e.on_pair(pair(ms(1900), 1250, ms(1), ms(40)));
    assert_eq!(e.grade(ms(500)), None);
    let grade = e.grade(ms(2000)).unwrap();
    assert_eq!(grade.rtt_samples, 2);
    assert_eq!(grade.srtt, ms(50));
    assert!(!grade.reasons.high_srtt);
}

#[test]
fn unresolvable_and_empty_pairs() {
    let mut e = estimator();
    // Both packets inside one clock tick: proof of life, no estimate.
    e.on_pair(pair(ms(10), 1250, Duration::ZERO, ms(40)));
    // Zero bytes is bad input.
    e.on_pair(pair(ms(20), 0, ms(1), ms(40)));
    e.on_rtt(ms(30), ms(40));
    assert_eq!(e.capacity_bps(), None);
    let grade = e.grade(ms(1000)).unwrap();
    assert_eq!(grade.pairs, 1);
    assert!(!grade.reasons.no_pairs);
    let stats = e.stats();
    assert_eq!(
        (stats.pairs, stats.unresolved_pairs, stats.rejected_pairs),
        (1, 1, 1)
    );
}

#[test]
fn config_is_checked_and_honoured() {
    let bad = [
        (
            Config {
                alpha: 0.0,
                ..Config::default()
            },
            ConfigError::Alpha(0.0),
        ),
        (
            Config {
                alpha: 1.5,
                ..Config::default()
            },
            ConfigError::Alpha(1.5),
        ),
        (
            Config {
                delta_threshold: f64::NAN,
                ..Config::default()
            },
            ConfigError::DeltaThreshold(f64::NAN),
        ),
        (
            Config {
                grade_interval: Duration::ZERO,
                ..Config::default()
            },
            ConfigError::GradeInterval,
        ),
        (
            Config {
                srtt_window: Duration::ZERO,
                ..Config::default()
            },
            ConfigError::SrttWindow,
        ),
        (
            Config {
                bad_grades_to_flag: 0,
                ..Config::default()
            },
            ConfigError::BadGrades,
        ),
    ];
    for (config, want) in bad {
        let err = Estimator::new(Duration::ZERO, config).unwrap_err();
        // NaN ≠ NaN: compare the messages.
        assert_eq!(err.to_string(), want.to_string());
    }
    let config = Config {
        grade_interval: ms(500),
        bad_grades_to_flag: 2,
        ..Config::default()
    };
    let mut e = Estimator::new(Duration::ZERO, config).unwrap();
    e.on_pair(pair(ms(100), 1250, ms(100), ms(40)));
    e.on_rtt(ms(100), ms(2500));
    assert!(e.grade(ms(500)).unwrap().bad);
    assert!(!e.is_bad());
    e.on_pair(pair(ms(600), 1250, ms(100), ms(40)));
    e.on_rtt(ms(600), ms(2500));
    assert!(e.grade(ms(1000)).unwrap().bad);
    assert!(e.is_bad());
}

/// The brief's scenario: 20 Mbit/s with a 50 ms RTT until t = 10 s, then
/// 0.5 Mbit/s and an SRTT of 2.5 s. Pairs every 100 ms (one in five
/// disturbed by cross traffic), RTT samples every 20 ms, graded whenever due.
#[test]
fn replay_capacity_collapse_is_flagged_after_n_grades() {
    let config = Config::default();
    let mut e = Estimator::new(Duration::ZERO, config).unwrap();
    let drop_at = ms(10_000);
    let mut flagged_at = None;
    let mut last_grade = None;
    for tick in 0..=30_000u64 / 10 {
        let now = ms(tick * 10);
        let after = now >= drop_at;
        let capacity = if after { 500_000.0 } else { 20_000_000.0 };
        if tick % 10 == 0 {
            let n = tick / 10;
            let clean = 1200.0 * 8.0 / capacity;
            let (dispersion, extra) = if n % 5 == 0 {
                (clean * 3.0, ms(10))
            } else {
                (clean, Duration::ZERO)
            };
            // The queue behind the slow link adds to both packets' delays.
            let queue = if after { ms(1200) } else { Duration::ZERO };
            e.on_pair(pair(
                now,
                1200,
                Duration::from_secs_f64(dispersion),
                ms(50) + queue * 2 + extra,
            ));
        }
        if tick % 2 == 0 {
            e.on_rtt(now, if after { ms(2500) } else { ms(50) });
        }
        if let Some(grade) = e.grade(now) {
            assert!(after || !grade.bad, "bad before the drop: {grade:?}");
            last_grade = Some(grade);
        }
        if e.is_bad() && flagged_at.is_none() {
            flagged_at = Some(now);
        }
    }
    let flagged_at = flagged_at.expect("never flagged");
    let earliest = drop_at + config.grade_interval * config.bad_grades_to_flag;
    assert!(flagged_at >= earliest, "flagged at {flagged_at:?}");
    assert!(
        flagged_at <= earliest + config.grade_interval * 2,
        "flagged at {flagged_at:?}"
    );
    let last = last_grade.unwrap();
    assert!(last.reasons.low_capacity && last.reasons.high_srtt);
    assert!(last.capacity_bps.unwrap() < 1_000_000);
}

#[derive(Clone, Debug)]
enum Op {
    Pair(u64, u32, u64, u64),
    Rtt(u64, u64),
    Grade(u64),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    // Small and huge values alike: nanoseconds up to u64::MAX (584 years).
    let nanos = prop_oneof![0..10_000_000_000u64, any::<u64>()];
    prop_oneof![
        (nanos.clone(), any::<u32>(), nanos.clone(), nanos.clone())
            .prop_map(|(a, b, d, s)| Op::Pair(a, b, d, s)),
        (nanos.clone(), nanos.clone()).prop_map(|(a, r)| Op::Rtt(a, r)),
        nanos.prop_map(Op::Grade),
        Just(Op::Reset),
    ]
}

proptest! {
    #[test]
    fn no_input_panics_or_yields_nan(
        ops in prop::collection::vec(op(), 0..200),
        start in any::<u64>(),
        alpha in 0.001f64..=1.0,
        interval in 1u64..5_000_000_000,
        window in 1u64..5_000_000_000,
    ) {
        let config = Config {
            alpha,
            grade_interval: Duration::from_nanos(interval),
            srtt_window: Duration::from_nanos(window),
            ..Config::default()
        };
        let mut e = Estimator::new(Duration::from_nanos(start), config).unwrap();
        for op in ops {
            match op {
                Op::Pair(at, bytes, d, s) => e.on_pair(pair(
                    Duration::from_nanos(at), bytes, Duration::from_nanos(d), Duration::from_nanos(s),
                )),
                Op::Rtt(at, rtt) => e.on_rtt(Duration::from_nanos(at), Duration::from_nanos(rtt)),
                Op::Grade(at) => {
                    if let Some(grade) = e.grade(Duration::from_nanos(at)) {
                        if let Some(d) = grade.delta {
                            prop_assert!(d.is_finite() && d > 0.0, "δ = {}", d);
                        }
                        prop_assert_eq!(grade.bad, grade.reasons.votes() >= 2);
                        prop_assert_eq!(e.is_bad(), grade.consecutive_bad >= 5);
                    }
                }
                Op::Reset => e.reset_baseline(),
            }
            if let Some(d) = e.delta() {
                prop_assert!(d.is_finite() && d > 0.0, "δ = {}", d);
            }
        }
    }
}

#[test]
fn recent_pairs_show_a_recovery_the_ewma_still_hides() {
    let mut e = estimator();
    // A long poor spell: 1500-byte pairs 120 ms apart (0.1 Mbit/s).
    for i in 0..40 {
        e.on_pair(pair(ms(100 * i), 1500, ms(120), ms(300)));
    }
    // Back at 30 Mbit/s: 0.4 ms apart.
    for i in 40..45 {
        e.on_pair(pair(ms(100 * i), 1500, us(400), ms(20)));
    }
    assert!(e.capacity_bps().unwrap() < 1_000_000, "the EWMA remembers");
    assert!(e.recent_capacity_bps(5).unwrap() > 20_000_000);
    assert!(
        e.recent_capacity_bps(6).unwrap() < 1_000_000,
        "one slow pair in six"
    );
    assert_eq!(e.recent_capacity_bps(9), None);
    e.recovered(5);
    assert!(close(e.capacity_bps().unwrap(), 30_000_000));
}
