//! IEEE 802.11p: "modified free space" path loss with exponent α plus
//! Nakagami-m fading, giving the probability that a frame is received at a
//! distance (baguena-2017 ch. 5, SPEC S5).
//!
//! Mean received power, in dBm, at distance d metres (reference 1 m):
//!
//! ```text
//! P̄r(d) = Pt + Gt + Gr − 20·log10(4π/λ) − 10·α·log10(d) − shadowing
//! ```
//!
//! α = 2 is Friis free space; larger α steepens the decay. Nakagami-m fading
//! makes the instantaneous received *power* Gamma-distributed with shape m
//! and mean P̄r (m = 1 is Rayleigh, m < 1 is harsher than Rayleigh). A frame
//! is received when its power reaches the receive threshold P_th, so
//!
//! ```text
//! PDR(d) = Pr[X ≥ P_th] = Q(m, m·P_th/P̄r(d))      (linear milliwatts)
//! ```
//!
//! where Q is the regularised upper incomplete gamma function. The
//! threshold is the noise floor plus the SNR the 6 Mbit/s mode (QPSK 1/2,
//! 802.11p's default broadcast rate) needs: docs/MODELS.md explains each
//! constant.

use crate::error::ModelError;
use crate::math::gamma_q;

/// Speed of light in m/s.
const C: f64 = 299_792_458.0;

/// One parameterisation of the 802.11p channel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dsrc {
    /// Nakagami shape m (> 0).
    pub m: f64,
    /// Path-loss exponent α (> 0).
    pub alpha: f64,
    /// Transmit power, dBm.
    pub tx_power_dbm: f64,
    /// Sum of transmit and receive antenna gains, dBi.
    pub antenna_gain_dbi: f64,
    /// Carrier frequency, Hz.
    pub frequency_hz: f64,
    /// Thermal noise over the channel plus the receiver's noise figure, dBm.
    pub noise_floor_dbm: f64,
    /// SNR a frame needs to be decoded, dB; threshold = noise floor + this.
    pub min_snr_db: f64,
}

/// The two fits of baguena-2017 §5.2.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsrcPreset {
    /// Urban traffic where other vehicles partly block the signal (Meireles
    /// et al.'s obstructed measurements): m = 0.7, α = 2.3.
    VehiclesAsObstacles,
    /// Clear line of sight: m = 1 (the paper finds 1–1.1 equally good), α = 2.2.
    LineOfSight,
}

impl DsrcPreset {
    pub fn name(self) -> &'static str {
        match self {
            DsrcPreset::VehiclesAsObstacles => "vehicles-as-obstacles",
            DsrcPreset::LineOfSight => "los",
        }
    }
}

impl Dsrc {
    /// 100 mW (20 dBm) through 0 dBi antennas on channel 178 (5.89 GHz,
    /// 10 MHz), noise floor −98 dBm, 9 dB SNR for 6 Mbit/s: threshold −89 dBm.
    pub const DEFAULT_TX_POWER_DBM: f64 = 20.0;
    pub const DEFAULT_FREQUENCY_HZ: f64 = 5.89e9;
    /// −174 dBm/Hz thermal noise + 10·log10(10 MHz) + 6 dB noise figure.
    pub const DEFAULT_NOISE_FLOOR_DBM: f64 = -174.0 + 70.0 + 6.0;
    pub const DEFAULT_MIN_SNR_DB: f64 = 9.0;

    /// A channel with the documented radio constants and the given fading
    /// and path-loss parameters.
    pub fn new(m: f64, alpha: f64) -> Result<Dsrc, ModelError> {
        Dsrc {
            m,
            alpha,
            tx_power_dbm: Self::DEFAULT_TX_POWER_DBM,
            antenna_gain_dbi: 0.0,
            frequency_hz: Self::DEFAULT_FREQUENCY_HZ,
            noise_floor_dbm: Self::DEFAULT_NOISE_FLOOR_DBM,
            min_snr_db: Self::DEFAULT_MIN_SNR_DB,
        }
        .validated()
    }

    pub fn preset(p: DsrcPreset) -> Dsrc {
        let (m, alpha) = match p {
            DsrcPreset::VehiclesAsObstacles => (0.7, 2.3),
            DsrcPreset::LineOfSight => (1.0, 2.2),
        };
        Dsrc::new(m, alpha).expect("preset parameters are valid")
    }

    /// Checks every field; use after changing fields by hand.
    pub fn validated(self) -> Result<Dsrc, ModelError> {
        let positive = |what: &'static str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(ModelError::NotPositive { what, value: v })
            }
        };
        positive("Nakagami m", self.m)?;
        positive("path-loss exponent alpha", self.alpha)?;
        positive("frequency", self.frequency_hz)?;
        for (what, v) in [
            ("transmit power", self.tx_power_dbm),
            ("antenna gain", self.antenna_gain_dbi),
            ("noise floor", self.noise_floor_dbm),
            ("minimum SNR", self.min_snr_db),
        ] {
            if !v.is_finite() {
                return Err(ModelError::NotFinite { what, value: v });
            }
        }
        Ok(self)
    }

    /// Receive threshold P_th in dBm.
    pub fn threshold_dbm(&self) -> f64 {
        self.noise_floor_dbm + self.min_snr_db
    }

    /// Path loss in dB at `distance_m`. Distances under 1 m are taken as
    /// 1 m: the model's reference distance, below which it would predict gain.
    pub fn path_loss_db(&self, distance_m: f64) -> f64 {
        let lambda = C / self.frequency_hz;
        let d = distance_m.max(1.0);
        20.0 * (4.0 * std::f64::consts::PI / lambda).log10() + 10.0 * self.alpha * d.log10()
    }

    /// Mean received power in dBm, with `extra_loss_db` of shadowing.
    pub fn mean_rx_power_dbm(&self, distance_m: f64, extra_loss_db: f64) -> f64 {
        self.tx_power_dbm + self.antenna_gain_dbi - self.path_loss_db(distance_m) - extra_loss_db
    }

    /// Probability that a frame sent over `distance_m` is received.
    pub fn pdr(&self, distance_m: f64) -> f64 {
        self.pdr_shadowed(distance_m, 0.0)
    }

    /// As [`Dsrc::pdr`], with `extra_loss_db` of obstacle shadowing.
    pub fn pdr_shadowed(&self, distance_m: f64, extra_loss_db: f64) -> f64 {
        let margin_db = self.threshold_dbm() - self.mean_rx_power_dbm(distance_m, extra_loss_db);
        let ratio = 10f64.powf(margin_db / 10.0);
        gamma_q(self.m, self.m * ratio)
    }

    /// Largest distance (to 0.1 m) at which the PDR is still at least
    /// `target`, found by bisection: PDR falls monotonically with distance.
    pub fn range_at(&self, target: f64) -> f64 {
        if self.pdr(1.0) < target {
            return 0.0;
        }
        let (mut lo, mut hi) = (1.0, 1.0);
        while self.pdr(hi) >= target && hi < 1e7 {
            lo = hi;
            hi *= 2.0;
        }
        while hi - lo > 0.1 {
            let mid = 0.5 * (lo + hi);
            if self.pdr(mid) >= target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vehicles_as_obstacles_fit_reliable_to_about_100_m() {
        let ch = Dsrc::preset(DsrcPreset::VehiclesAsObstacles);
        assert!(ch.pdr(100.0) >= 0.90, "{}", ch.pdr(100.0));
        let r90 = ch.range_at(0.9);
        assert!((100.0..130.0).contains(&r90), "90 % range {r90}");
    }

    #[test]
    fn line_of_sight_fit_under_5_percent_at_1400_m() {
        let ch = Dsrc::preset(DsrcPreset::LineOfSight);
        assert!(ch.pdr(1400.0) < 0.05, "{}", ch.pdr(1400.0));
        // ... while still reaching well beyond the obstructed channel.
        assert!(ch.range_at(0.9) > Dsrc::preset(DsrcPreset::VehiclesAsObstacles).range_at(0.9));
    }

    #[test]
    fn rayleigh_case_matches_closed_form() {
        // m = 1: PDR = exp(−P_th / P̄r).
        let ch = Dsrc::new(1.0, 2.0).unwrap();
        for d in [10.0, 300.0, 2000.0] {
            let pr = 10f64.powf(ch.mean_rx_power_dbm(d, 0.0) / 10.0);
            let th = 10f64.powf(ch.threshold_dbm() / 10.0);
            assert!((ch.pdr(d) - (-th / pr).exp()).abs() < 1e-12);
        }
    }

    #[test]
    fn free_space_loss_at_100_m() {
        // Friis at 5.89 GHz over 100 m: 20·log10(4π·100/λ) ≈ 87.85 dB.
        let ch = Dsrc::new(1.0, 2.0).unwrap();
        assert!((ch.path_loss_db(100.0) - 87.85).abs() < 0.01);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(Dsrc::new(0.0, 2.0).is_err());
        assert!(Dsrc::new(1.0, f64::NAN).is_err());
    }
}
