//! The empirical LTE model of baguena-2017 ch. 9 (Dublin measurements,
//! SPEC S5): per-UE queues at the base station, and for each second a
//! downlink capacity and an RTT drawn i.i.d. from distributions set by the
//! signal quality CSQ (0 ↔ −113 dBm, 31 ↔ −51 dBm, 2 dB a step, 3GPP TS 27.007).
//!
//! * **Bandwidth**: N(μ, σ) with μ = 0.55·CSQ + 0.13 Mbit/s and
//!   σ = 0.31·CSQ − 1.17, truncated to be non-negative (σ is clipped at 0
//!   below CSQ ≈ 3.8, where the fit would turn negative).
//! * **RTT**: a mixture of four narrow Gaussians at μ₁, μ₁ + 9.6, μ₁ + 19.4
//!   and μ₁ + 28.5 ms (HARQ retransmissions), σ = 0.02–0.04 ms, with weights
//!   linear in CSQ. The fitted weights go negative at the ends of the range
//!   and do not sum to 1; negative ones are clipped to 0.
//!
//! The paper also fits the RTT's mean, 177.69 − 9.11·CSQ + 0.158·CSQ² ms,
//! and standard deviation, 97.21 − 3.17·CSQ ms. The four peaks alone cannot
//! give those: at CSQ 19 they average about 48 ms against a fitted 61.6 ms,
//! because the measured distributions also had slow samples (peaks at 73 and
//! 82 ms at low CSQ). Where the clipped weights sum to less than 1 (CSQ below
//! about 25), we give the missing weight to a fifth, *tail* component whose
//! mean and variance are solved so that the mixture has exactly the fitted
//! mean and standard deviation; it is log-normal so it never goes negative
//! without a truncation that would move its moments. Where the weights sum
//! to 1 or more they are normalised, as SPEC S5 says, and there is no tail.
//! Both fits are then met exactly from CSQ 6 to 24. Outside that, a tail
//! would need a negative variance (CSQ 0–5 and 25, outside or at the edge
//! of the 10–31 the paper measured): the tail keeps the fitted mean with
//! zero spread and the standard deviation comes out above the fit. From
//! CSQ 26 on the normalised peaks alone give 45–46 ms (fit 46–48 ms) and
//! 4.5–6 ms (fit 0–15 ms). `convoy trace lte --table` prints both side by side.

use crate::error::ModelError;
use crate::rng::Rng;

/// CSQ of a received signal strength in dBm (TS 27.007: −113 dBm or less is
/// 0, −51 dBm or more is 31, 2 dB per step).
pub fn csq_from_dbm(dbm: f64) -> u8 {
    (((dbm + 113.0) / 2.0).floor()).clamp(0.0, 31.0) as u8
}

/// The signal strength a CSQ level stands for (its lower edge).
pub fn dbm_from_csq(csq: u8) -> f64 {
    -113.0 + 2.0 * f64::from(csq.min(31))
}

fn check_csq(csq: f64) -> Result<f64, ModelError> {
    if csq.is_finite() && (0.0..=31.0).contains(&csq) {
        Ok(csq)
    } else {
        Err(ModelError::Csq { value: csq })
    }
}

/// The fitted RTT mean, ms.
pub fn rtt_mean_fit_ms(csq: f64) -> f64 {
    177.69 - 9.11 * csq + 0.158 * csq * csq
}

/// The fitted RTT standard deviation, ms (clipped at 0: negative above CSQ 30.7).
pub fn rtt_sd_fit_ms(csq: f64) -> f64 {
    (97.21 - 3.17 * csq).max(0.0)
}

/// The four HARQ-peak weights as fitted (may be negative, need not sum to 1).
pub fn raw_weights(csq: f64) -> [f64; 4] {
    [
        0.0079 * csq - 0.1285,
        0.0430 * csq - 0.3834,
        -0.0059 * csq + 0.3244,
        -0.0096 * csq + 0.2937,
    ]
}

/// Offsets of the peaks from the first, ms, and their spreads.
const PEAK_OFFSETS_MS: [f64; 4] = [0.0, 9.6, 19.4, 28.5];
const PEAK_SD_MS: [f64; 4] = [0.02, 0.03, 0.04, 0.04];

/// The first peak's position varied between 32.5 and 37.5 ms across data
/// sets, independently of CSQ; 35 ms is the middle.
pub const DEFAULT_BASE_RTT_MS: f64 = 35.0;
pub const BASE_RTT_RANGE_MS: (f64, f64) = (32.5, 37.5);

/// One Gaussian (or, for the tail, log-normal) component.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Component {
    pub weight: f64,
    pub mean_ms: f64,
    pub sd_ms: f64,
}

/// The RTT distribution at one CSQ.
#[derive(Clone, Debug, PartialEq)]
pub struct RttModel {
    pub csq: f64,
    pub peaks: [Component; 4],
    /// Log-normal component carrying the slow samples, if any.
    pub tail: Option<Component>,
}

impl RttModel {
    pub fn new(csq: f64, base_rtt_ms: f64) -> Result<RttModel, ModelError> {
        let csq = check_csq(csq)?;
        if !(base_rtt_ms.is_finite() && base_rtt_ms > 0.0) {
            return Err(ModelError::NotPositive {
                what: "base RTT",
                value: base_rtt_ms,
            });
        }
        let w = raw_weights(csq).map(|w| w.max(0.0));
        let sum: f64 = w.iter().sum();
        let mk = |i: usize, weight: f64| Component {
            weight,
            mean_ms: base_rtt_ms + PEAK_OFFSETS_MS[i],
            sd_ms: PEAK_SD_MS[i],
        };
        let normalised = || std::array::from_fn(|i| mk(i, w[i] / sum));
        if sum >= 1.0 {
            return Ok(RttModel {
                csq,
                peaks: normalised(),
                tail: None,
            });
        }
        let peaks: [Component; 4] = std::array::from_fn(|i| mk(i, w[i]));
        let rest = 1.0 - sum;
        let m1: f64 = peaks.iter().map(|c| c.weight * c.mean_ms).sum();
        let m2: f64 = peaks
            .iter()
            .map(|c| c.weight * (c.sd_ms * c.sd_ms + c.mean_ms * c.mean_ms))
            .sum();
        let (mean, sd) = (rtt_mean_fit_ms(csq), rtt_sd_fit_ms(csq));
        let tail_mean = (mean - m1) / rest;
        let tail_var = (sd * sd + mean * mean - m2) / rest - tail_mean * tail_mean;
        if tail_mean.is_nan() || tail_mean <= 0.0 {
            // The peaks alone already exceed the fitted mean: no room for a tail.
            return Ok(RttModel {
                csq,
                peaks: normalised(),
                tail: None,
            });
        }
        Ok(RttModel {
            csq,
            peaks,
            tail: Some(Component {
                weight: rest,
                mean_ms: tail_mean,
                sd_ms: tail_var.max(0.0).sqrt(),
            }),
        })
    }

    fn components(&self) -> impl Iterator<Item = &Component> {
        self.peaks.iter().chain(self.tail.iter())
    }

    /// Mean of the mixture, ms.
    pub fn mean_ms(&self) -> f64 {
        self.components().map(|c| c.weight * c.mean_ms).sum()
    }

    /// Standard deviation of the mixture, ms.
    pub fn sd_ms(&self) -> f64 {
        let m = self.mean_ms();
        let m2: f64 = self
            .components()
            .map(|c| c.weight * (c.sd_ms * c.sd_ms + c.mean_ms * c.mean_ms))
            .sum();
        (m2 - m * m).max(0.0).sqrt()
    }

    /// One RTT sample, ms.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        let mut u = rng.uniform();
        for c in &self.peaks {
            if u < c.weight {
                // A peak is 0.02–0.04 ms wide around ≥ 32.5 ms: never negative.
                return rng.normal(c.mean_ms, c.sd_ms);
            }
            u -= c.weight;
        }
        match self.tail {
            Some(t) => sample_lognormal(rng, t.mean_ms, t.sd_ms),
            // Rounding left u just above the last weight.
            None => rng.normal(self.peaks[3].mean_ms, self.peaks[3].sd_ms),
        }
    }
}

/// Log-normal with the given mean and standard deviation (not of its log).
fn sample_lognormal(rng: &mut Rng, mean: f64, sd: f64) -> f64 {
    let s2 = (1.0 + (sd / mean).powi(2)).ln();
    let mu = mean.ln() - s2 / 2.0;
    (mu + s2.sqrt() * rng.standard_normal()).exp()
}

/// Parameters of the (untruncated) bandwidth Gaussian at a CSQ, Mbit/s.
pub fn bandwidth_params_mbps(csq: f64) -> (f64, f64) {
    (0.55 * csq + 0.13, (0.31 * csq - 1.17).max(0.0))
}

/// One downlink capacity sample, Mbit/s: the Gaussian truncated at 0, drawn
/// by rejection (μ > 0 for every CSQ, so at most half the draws are rejected).
pub fn sample_bandwidth_mbps(csq: f64, rng: &mut Rng) -> Result<f64, ModelError> {
    let csq = check_csq(csq)?;
    let (mu, sigma) = bandwidth_params_mbps(csq);
    loop {
        let x = rng.normal(mu, sigma);
        if x >= 0.0 {
            return Ok(x);
        }
    }
}

/// Mean and standard deviation of the truncated bandwidth distribution.
pub fn bandwidth_moments_mbps(csq: f64) -> (f64, f64) {
    let (mu, sigma) = bandwidth_params_mbps(csq);
    crate::math::truncated_normal_moments(mu, sigma)
}

/// One second of an LTE link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LteSample {
    pub csq: u8,
    pub downlink_mbps: f64,
    pub rtt_ms: f64,
}

/// Samples one (capacity, RTT) pair per CSQ value of a series, i.i.d. as
/// the model says.
pub fn sample_series(
    csq: &[u8],
    base_rtt_ms: f64,
    rng: &mut Rng,
) -> Result<Vec<LteSample>, ModelError> {
    csq.iter()
        .map(|&c| {
            let model = RttModel::new(f64::from(c), base_rtt_ms)?;
            Ok(LteSample {
                csq: c,
                downlink_mbps: sample_bandwidth_mbps(f64::from(c), rng)?,
                rtt_ms: model.sample(rng),
            })
        })
        .collect()
}

/// From distance to the eNodeB to CSQ: the received downlink power is the
/// eNodeB's transmit power minus the 3GPP TR 36.942 urban macro-cell path
/// loss at 2 GHz, L = 128.1 + 37.6·log10(d / km) dB, minus any extra loss
/// (e.g. building shadowing), and CSQ follows from TS 27.007. With 46 dBm
/// (the usual 20 W macro eNodeB) CSQ is 31 up to about 150 m, 25 at 300 m, 21 at 500 m,
/// 15 at 1 km, 9 at 2 km and 0 beyond about 6.6 km (docs/MODELS.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CsqMapping {
    pub tx_power_dbm: f64,
    /// Path loss at 1 km, dB.
    pub loss_at_1km_db: f64,
    /// dB per decade of distance.
    pub loss_per_decade_db: f64,
    /// The formula holds from 35 m (TR 36.942's minimum coupling distance).
    pub min_distance_m: f64,
}

impl Default for CsqMapping {
    fn default() -> Self {
        CsqMapping {
            tx_power_dbm: 46.0,
            loss_at_1km_db: 128.1,
            loss_per_decade_db: 37.6,
            min_distance_m: 35.0,
        }
    }
}

impl CsqMapping {
    pub fn rx_power_dbm(&self, distance_m: f64, extra_loss_db: f64) -> f64 {
        let d_km = distance_m.max(self.min_distance_m) / 1000.0;
        self.tx_power_dbm
            - (self.loss_at_1km_db + self.loss_per_decade_db * d_km.log10())
            - extra_loss_db
    }

    pub fn csq(&self, distance_m: f64, extra_loss_db: f64) -> u8 {
        csq_from_dbm(self.rx_power_dbm(distance_m, extra_loss_db))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csq_scale_ends() {
        assert_eq!(csq_from_dbm(-113.0), 0);
        assert_eq!(csq_from_dbm(-200.0), 0);
        assert_eq!(csq_from_dbm(-51.0), 31);
        assert_eq!(csq_from_dbm(-40.0), 31);
        assert_eq!(dbm_from_csq(31), -51.0);
        for c in 0..=31u8 {
            assert_eq!(csq_from_dbm(dbm_from_csq(c)), c);
        }
    }

    #[test]
    fn mapping_is_monotone_and_documented() {
        let m = CsqMapping::default();
        assert_eq!(m.csq(140.0, 0.0), 31);
        assert_eq!(m.csq(300.0, 0.0), 25);
        assert_eq!(m.csq(500.0, 0.0), 21);
        assert_eq!(m.csq(1000.0, 0.0), 15);
        assert_eq!(m.csq(2000.0, 0.0), 9);
        assert_eq!(m.csq(7000.0, 0.0), 0);
        let mut last = 31;
        for d in (50..8000).step_by(50) {
            let c = m.csq(f64::from(d), 0.0);
            assert!(c <= last);
            last = c;
        }
    }

    #[test]
    fn weights_clipped_and_summing_to_one() {
        for c in 0..=31 {
            let m = RttModel::new(f64::from(c), DEFAULT_BASE_RTT_MS).unwrap();
            let total: f64 = m.components().map(|c| c.weight).sum();
            assert!((total - 1.0).abs() < 1e-12, "csq {c}: {total}");
            assert!(m.components().all(|c| c.weight >= 0.0));
        }
    }

    #[test]
    fn tail_reproduces_the_fitted_moments_where_feasible() {
        for c in 6..=24 {
            let m = RttModel::new(f64::from(c), DEFAULT_BASE_RTT_MS).unwrap();
            assert!(m.tail.is_some());
            assert!(
                (m.mean_ms() - rtt_mean_fit_ms(f64::from(c))).abs() < 1e-9,
                "csq {c}"
            );
            assert!(
                (m.sd_ms() - rtt_sd_fit_ms(f64::from(c))).abs() < 1e-9,
                "csq {c}"
            );
        }
    }

    #[test]
    fn rejects_out_of_range_csq() {
        assert!(RttModel::new(32.0, 35.0).is_err());
        assert!(RttModel::new(-1.0, 35.0).is_err());
        assert!(sample_bandwidth_mbps(99.0, &mut Rng::new(0)).is_err());
    }
}
