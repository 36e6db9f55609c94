//! The LTE uplink, handover and residual-loss models against what they
//! promise: each stored fit's traces land near the drive trace it was
//! fitted to on every seed, a handover leaves exactly its gap, and the
//! loss chain's long-run rate and burst length are its parameters.

use convoy_models::handover::HandoverTracker;
use convoy_models::lte_fit::{self, model_stats, MEAN_TOLERANCE};
use convoy_models::lte_loss::{LossGen, LossParams};
use convoy_models::lte_uplink::{schedule, UplinkFit, UplinkGen, UplinkParams};
use convoy_models::trace_stats::TraceStats;
use convoy_models::Rng;
use proptest::prelude::*;

/// The shared traces' statistics (`convoy trace uplink-fit
/// ../shared/traces/*.up`, docs/MODELS.md): mean Mbit/s, share of time
/// in outages of 100 ms or more, 99th percentile gap in ms.
fn trace_figures(f: UplinkFit) -> (f64, f64, f64) {
    match f {
        UplinkFit::Att => (1.91, 0.214, 79.0),
        UplinkFit::Tmobile => (13.32, 0.007, 12.0),
        UplinkFit::Verizon => (5.95, 0.031, 17.0),
    }
}

#[test]
fn every_fit_stays_near_its_trace_on_every_seed() {
    for fit in UplinkFit::ALL {
        let (mean, outage, gap99) = trace_figures(fit);
        let (mut means, mut gaps) = (Vec::new(), Vec::new());
        for seed in 1..=5 {
            let mut g = UplinkGen::new(fit.params(), 100 + seed).unwrap();
            let ms = schedule(&mut g, 140_000, &[], &mut HandoverTracker::new(0));
            let s = TraceStats::of(&ms, 140_000).unwrap();
            // One 140 s run swings with its slow fading: within a factor 1.6.
            assert!(
                s.mean_mbps > mean / 1.6 && s.mean_mbps < mean * 1.6,
                "{fit:?} seed {seed}: {s:?}"
            );
            // TMobile's fading lasts 32 s: a 140 s run holds a few fades,
            // and its gaps follow the one it sits in.
            assert!(
                s.gap_p99_ms > gap99 / 3.0 && s.gap_p99_ms < gap99 * 3.0,
                "{fit:?} seed {seed}: {s:?}"
            );
            means.push(s.mean_mbps);
            gaps.push(s.gap_p99_ms);
        }
        let g = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!(
            g > gap99 / 2.0 && g < gap99 * 2.0,
            "{fit:?}: {g} vs {gap99}"
        );
        // Over the seeds the mean is within the fit's 15 %.
        let m = means.iter().sum::<f64>() / means.len() as f64;
        assert!((m / mean - 1.0).abs() < 0.15, "{fit:?}: {m} vs {mean}");
        let s = model_stats(fit.params(), 140_000, 4).unwrap();
        assert!(
            (s.outage_share - outage).abs() < 0.5 * outage + 0.01,
            "{fit:?}: outage {} vs {outage}",
            s.outage_share
        );
    }
}

/// A model run as a stand-in trace: 30 s, two seeds.
fn short_stats(p: UplinkParams) -> TraceStats {
    model_stats(p, 30_000, 2).unwrap()
}

#[test]
fn holding_the_mean_moves_the_sinr_alone_to_the_traces_mean() {
    let p = UplinkFit::Verizon.params();
    let target = short_stats(UplinkParams {
        sinr_db: p.sinr_db + 3.0,
        ..p
    });
    for start in [
        p,
        UplinkParams {
            sinr_db: p.sinr_db + 7.0,
            ..p
        },
    ] {
        let m = lte_fit::match_mean(start, short_stats(start), &target, 2).unwrap();
        assert!(
            (m.model.mean_mbps / target.mean_mbps - 1.0).abs() <= MEAN_TOLERANCE,
            "{m:?} against {}",
            target.mean_mbps
        );
        // The same seeds: it finds the SINR the stand-in was made with.
        assert!((m.params.sinr_db - (p.sinr_db + 3.0)).abs() < 0.5, "{m:?}");
        assert_eq!(
            UplinkParams {
                sinr_db: p.sinr_db,
                ..m.params
            },
            p
        );
        assert!(m.evaluations <= 12);
    }
}

#[test]
fn a_mean_out_of_reach_gives_the_closest_found() {
    // 1 Gbit/s: beyond any SINR on 75 PRBs (the efficiency cap).
    let p = UplinkFit::Verizon.params();
    let mut target = short_stats(p);
    target.mean_mbps = 1000.0;
    let start = short_stats(p);
    let m = lte_fit::match_mean(p, start, &target, 2).unwrap();
    assert!(m.model.mean_mbps > start.mean_mbps, "{m:?}");
    assert!(m.evaluations <= 12);
}

#[test]
fn a_search_holds_the_traces_mean() {
    let target = short_stats(UplinkFit::Att.params());
    let f = lte_fit::fit(&target, lte_fit::START, 2, 60).unwrap();
    assert!(
        (f.model.mean_mbps / target.mean_mbps - 1.0).abs() <= MEAN_TOLERANCE,
        "{f:?} against {}",
        target.mean_mbps
    );
    assert!(
        f.mean_held && f.distance.is_finite() && f.evaluations >= 60,
        "{f:?}"
    );
}

#[test]
fn a_weak_signal_uplink_is_slower_than_a_strong_one() {
    let fit = UplinkFit::Verizon.params();
    let rate = |csq| {
        let s = model_stats(fit.at_csq(csq), 60_000, 3).unwrap();
        s.mean_mbps
    };
    let (weak, mid, strong) = (rate(8), rate(16), rate(28));
    assert!(weak < mid && mid < strong, "{weak} {mid} {strong}");
}

/// Opportunities every millisecond (granted every TTI, no fading, no
/// block errors), so any gap is the handover's.
fn steady() -> UplinkParams {
    UplinkParams {
        prbs: 50,
        sinr_db: 20.0,
        shadow_sd_db: 0.0,
        coherence_s: 1.0,
        grant_share: 1.0,
        bler: 0.0,
    }
}

#[test]
fn a_handover_leaves_a_gap_of_its_length_at_each_cell_change() {
    let mut g = UplinkGen::new(steady(), 1).unwrap();
    let cells = [(0, 7), (2000, 7), (3000, 8), (6500, 7)];
    let mut tracker = HandoverTracker::new(45);
    let ms = schedule(&mut g, 10_000, &cells, &mut tracker);
    assert_eq!(tracker.handovers(), 2);
    let mut busy = ms.clone();
    busy.dedup();
    let gaps: Vec<(u64, u64)> = busy
        .windows(2)
        .filter(|w| w[1] - w[0] > 1)
        .map(|w| (w[0], w[1]))
        .collect();
    // Last opportunity the ms before the change, next one when it ends.
    assert_eq!(gaps, vec![(2999, 3045), (6499, 6545)]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever the model and wherever the handover, nothing is delivered
    /// during the interruption.
    #[test]
    fn nothing_is_delivered_during_an_interruption(
        at in 1u64..5000, len in 1u64..200, seed in 0u64..1000,
        sinr in -5.0f64..25.0, q in 0.05f64..1.0,
    ) {
        let p = UplinkParams { sinr_db: sinr, grant_share: q, ..UplinkFit::Tmobile.params() };
        let mut g = UplinkGen::new(p, seed).unwrap();
        let ms = schedule(&mut g, 6000, &[(0, 1), (at, 2)], &mut HandoverTracker::new(len));
        prop_assert!(ms.iter().all(|t| !(at..at + len).contains(t)));
    }
}

#[test]
fn the_loss_chain_has_its_long_run_rate_and_burst_length() {
    for p in [
        LossParams::TYPICAL,
        LossParams {
            rate: 0.01,
            burst_rows: 5.0,
            bad_loss: 0.2,
        },
    ] {
        let mut rng = Rng::new(9);
        let mut g = LossGen::new(p, &mut rng).unwrap();
        let n = 2_000_000;
        let rows: Vec<f64> = (0..n).map(|_| g.next_row(&mut rng)).collect();
        let mean = rows.iter().sum::<f64>() / n as f64;
        assert!((mean / p.rate - 1.0).abs() < 0.05, "{p:?}: {mean}");
        assert!(rows.iter().all(|&l| l == 0.0 || l == p.bad_loss));
        // Bad spells: mean run length of lossy rows.
        let spells = rows
            .windows(2)
            .filter(|w| w[0] == 0.0 && w[1] > 0.0)
            .count();
        let bad = rows.iter().filter(|&&l| l > 0.0).count();
        let run = bad as f64 / spells as f64;
        assert!((run / p.burst_rows - 1.0).abs() < 0.05, "{p:?}: {run}");
    }
}

#[test]
fn a_handover_starts_a_bad_spell() {
    let mut rng = Rng::new(3);
    let p = LossParams {
        rate: 0.0,
        ..LossParams::TYPICAL
    };
    let mut g = LossGen::new(p, &mut rng).unwrap();
    assert_eq!(g.next_row(&mut rng), 0.0, "no loss at rate 0");
    g.handover();
    assert_eq!(g.next_row(&mut rng), p.bad_loss);
}
