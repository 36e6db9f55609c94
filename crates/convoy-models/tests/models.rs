//! Property tests of the channel models, and sample moments of the LTE
//! model against the paper's formulas.

use convoy_models::dsrc::{Dsrc, DsrcPreset};
use convoy_models::geom::Point;
use convoy_models::lte::{self, RttModel};
use convoy_models::shadowing::{Building, Buildings, ShadowingParams};
use convoy_models::Rng;
use proptest::prelude::*;

fn moments(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, v.sqrt())
}

#[test]
fn bandwidth_sample_moments_match_the_truncated_gaussian() {
    let mut rng = Rng::new(11);
    for csq in [2.0, 5.0, 10.0, 19.0, 31.0] {
        let xs: Vec<f64> = (0..100_000)
            .map(|_| lte::sample_bandwidth_mbps(csq, &mut rng).unwrap())
            .collect();
        assert!(xs.iter().all(|&x| x >= 0.0));
        let (m, s) = moments(&xs);
        let (em, es) = lte::bandwidth_moments_mbps(csq);
        // Standard error of the mean is s/√n ≈ 0.3 % of s; allow 5 of them.
        assert!(
            (m - em).abs() < 5.0 * es / 316.0 + 1e-9,
            "csq {csq}: mean {m} vs {em}"
        );
        assert!(
            (s - es).abs() < 0.02 * es + 1e-9,
            "csq {csq}: sd {s} vs {es}"
        );
        // From CSQ 10 up μ is 2–3 σ above zero: truncation lifts the mean
        // by under 4 % and narrows the spread by under 15 % against the
        // paper's untruncated μ and σ.
        if csq >= 10.0 {
            let (mu, sigma) = lte::bandwidth_params_mbps(csq);
            assert!(m >= mu && m - mu < 0.04 * mu, "csq {csq}: {m} vs fit {mu}");
            assert!(
                s <= sigma * 1.01 && s > 0.85 * sigma,
                "csq {csq}: {s} vs fit {sigma}"
            );
        }
    }
}

#[test]
fn rtt_sample_moments_match_the_fits() {
    let mut rng = Rng::new(5);
    for csq in [10.0, 15.0, 19.0, 24.0, 28.0, 31.0] {
        let model = RttModel::new(csq, lte::DEFAULT_BASE_RTT_MS).unwrap();
        let xs: Vec<f64> = (0..200_000).map(|_| model.sample(&mut rng)).collect();
        assert!(xs.iter().all(|&x| x > 0.0));
        let (m, s) = moments(&xs);
        assert!(
            (m - model.mean_ms()).abs() < 0.01 * model.mean_ms(),
            "csq {csq}: {m}"
        );
        assert!(
            (s - model.sd_ms()).abs() < 0.03 * model.sd_ms() + 0.05,
            "csq {csq}: {s}"
        );
        if csq <= 24.0 {
            // Where the tail exists it carries the paper's quadratic mean and linear sd.
            assert!(
                (m - lte::rtt_mean_fit_ms(csq)).abs() < 0.01 * m,
                "csq {csq}"
            );
            assert!((s - lte::rtt_sd_fit_ms(csq)).abs() < 0.03 * s, "csq {csq}");
        }
        // Every sample from a HARQ peak sits within 0.5 ms of one.
        let near_peak = xs
            .iter()
            .filter(|&&x| model.peaks.iter().any(|p| (x - p.mean_ms).abs() < 0.5))
            .count() as f64
            / xs.len() as f64;
        let peak_weight: f64 = model.peaks.iter().map(|p| p.weight).sum();
        assert!(
            near_peak >= peak_weight - 0.01,
            "csq {csq}: {near_peak} < {peak_weight}"
        );
    }
}

#[test]
fn series_is_reproducible_from_its_seed() {
    let csq = [31u8, 25, 19, 12, 12, 5];
    let a = lte::sample_series(&csq, 35.0, &mut Rng::new(3)).unwrap();
    let b = lte::sample_series(&csq, 35.0, &mut Rng::new(3)).unwrap();
    assert_eq!(a, b);
}

fn square(x0: f64, y0: f64, side: f64) -> Building {
    Building::new(
        "b",
        vec![
            Point::new(x0, y0),
            Point::new(x0 + side, y0),
            Point::new(x0 + side, y0 + side),
            Point::new(x0, y0 + side),
        ],
    )
}

proptest! {
    #[test]
    fn pdr_is_a_probability_falling_with_distance(
        m in 0.3f64..5.0, alpha in 1.8f64..4.0, d in 1.0f64..5000.0, step in 0.0f64..1000.0,
    ) {
        let ch = Dsrc::new(m, alpha).unwrap();
        let (near, far) = (ch.pdr(d), ch.pdr(d + step));
        prop_assert!((0.0..=1.0).contains(&near));
        prop_assert!(far <= near + 1e-12);
    }

    #[test]
    fn shadowing_only_removes_power(d in 1.0f64..3000.0, extra in 0.0f64..80.0) {
        let ch = Dsrc::preset(DsrcPreset::VehiclesAsObstacles);
        prop_assert!(ch.pdr_shadowed(d, extra) <= ch.pdr(d) + 1e-12);
    }

    #[test]
    fn shadow_is_symmetric_and_bounded(
        ax in -100.0f64..300.0, ay in -100.0f64..300.0,
        bx in -100.0f64..300.0, by in -100.0f64..300.0,
    ) {
        let b = Buildings::new(
            vec![square(0.0, 0.0, 50.0), square(120.0, 40.0, 30.0), square(60.0, 150.0, 80.0)],
            ShadowingParams::default(),
        );
        let (a, c) = (Point::new(ax, ay), Point::new(bx, by));
        let s1 = b.shadow(a, c);
        let s2 = b.shadow(c, a);
        prop_assert_eq!(s1.walls, s2.walls);
        prop_assert!((s1.metres_inside - s2.metres_inside).abs() < 1e-6);
        prop_assert!(s1.metres_inside <= a.dist(c) + 1e-9);
        prop_assert!(s1.db >= 0.0);
    }

    #[test]
    fn csq_falls_with_distance(d in 1.0f64..20_000.0, step in 0.0f64..5000.0) {
        let m = lte::CsqMapping::default();
        prop_assert!(m.csq(d + step, 0.0) <= m.csq(d, 0.0));
    }
}
