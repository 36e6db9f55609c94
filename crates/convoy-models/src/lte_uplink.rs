//! An LTE uplink capacity model from first principles, with a handful of
//! parameters fitted to the shared drive traces (docs/MODELS.md, "LTE
//! uplink"). The uplink differs from the downlink the Dublin model covers in
//! two ways that shape what a vehicle can upload: the UE's transmit power
//! is capped (23 dBm, power class 3) so the SINR falls with path loss and
//! with the bandwidth it is given, and the eNodeB grants the UE TTIs one
//! millisecond at a time, with synchronous HARQ retransmissions 8 ms later.
//!
//! Per 1 ms TTI:
//!
//! 1. **Slow fading.** SINR(t) = S̄ + X(t), X a Gauss–Markov process (AR(1))
//!    with standard deviation σ and correlation time τ (Gudmundson's
//!    shadowing, seen from a moving car): X ← ρX + √(1−ρ²)·σ·N(0,1),
//!    ρ = exp(−1 ms / τ). S̄ is fitted, or follows from the path loss:
//!    S̄ = 23 dBm − PL − (−174 dBm/Hz + 10·log10(M·180 kHz) + NF 5 dB + IoT 3 dB).
//! 2. **Link adaptation.** The rate of a granted TTI over M PRBs is TR
//!    36.942's attenuated Shannon bound for the uplink: M·180 kHz ·
//!    min(0.4·log2(1 + SINR), 2.0 bit/s/Hz), and 0 below −10 dB (no MCS
//!    closes the link: an outage).
//! 3. **Scheduling.** Each of the 8 HARQ processes owns every 8th TTI. An
//!    idle process is granted its TTI with probability q (the UE's share
//!    of the cell: other UEs, scheduling-request and buffer-report cycles);
//!    a transport block fails its first and later attempts with the BLER
//!    target (10 %) and is retransmitted in its process's next TTI, up to 4
//!    transmissions (maxHARQ-Tx), after which its bytes are lost to the
//!    capacity (RLC resends them as new data).
//! 4. **Opportunities.** Decoded bytes accumulate; every 1500 bytes is one
//!    Mahimahi delivery opportunity at that millisecond.
//!
//! A handover interrupts: no grant and no retransmission, and the HARQ
//! buffers are flushed (a MAC reset), for the interruption's length.
//! The generator is a sans-IO state machine: `tick` advances one TTI.

use std::ops::Range;

use crate::error::ModelError;
use crate::rng::Rng;

/// UE power class 3 (TS 36.101): the most a handset or telematics unit sends.
pub const UE_MAX_POWER_DBM: f64 = 23.0;
/// eNodeB receiver noise figure (TR 36.942's macro value).
pub const ENB_NOISE_FIGURE_DB: f64 = 5.0;
/// Interference over thermal from the neighbouring cells' UEs.
pub const INTERFERENCE_MARGIN_DB: f64 = 3.0;
/// Bandwidth of one physical resource block.
pub const PRB_HZ: f64 = 180e3;
/// TR 36.942 Annex A's uplink link-adaptation curve: attenuation, lowest
/// usable SINR and highest spectral efficiency (16QAM, reached at 15 dB).
pub const SHANNON_ATTENUATION: f64 = 0.4;
pub const SINR_MIN_DB: f64 = -10.0;
pub const MAX_EFFICIENCY: f64 = 2.0;
/// Uplink HARQ in FDD: 8 processes, a retransmission 8 TTIs after the
/// failed attempt, at most 4 transmissions (maxHARQ-Tx's usual setting).
pub const HARQ_PROCESSES: usize = 8;
pub const MAX_HARQ_TX: u8 = 4;
/// The first-transmission block error rate link adaptation aims at.
pub const BLER_TARGET: f64 = 0.1;
/// Transmit power of the eNodeB the CSQ mapping assumes (lte::CsqMapping).
const ENB_POWER_DBM: f64 = 46.0;
/// Bytes of one Mahimahi delivery opportunity.
const OPPORTUNITY_BYTES: f64 = 1500.0;

/// Spectral efficiency of a granted TTI at `sinr_db`, bit/s/Hz.
pub fn spectral_efficiency(sinr_db: f64) -> f64 {
    if sinr_db < SINR_MIN_DB {
        return 0.0;
    }
    let sinr = 10f64.powf(sinr_db / 10.0);
    (SHANNON_ATTENUATION * (1.0 + sinr).log2()).min(MAX_EFFICIENCY)
}

/// The SINR at the eNodeB of a UE at full power spread over `prbs` PRBs
/// across a path loss of `path_loss_db`.
pub fn sinr_from_path_loss(path_loss_db: f64, prbs: u32) -> f64 {
    let noise_dbm = -174.0
        + 10.0 * (f64::from(prbs.max(1)) * PRB_HZ).log10()
        + ENB_NOISE_FIGURE_DB
        + INTERFERENCE_MARGIN_DB;
    UE_MAX_POWER_DBM - path_loss_db - noise_dbm
}

/// The path loss a downlink CSQ stands for: the eNodeB's 46 dBm less the
/// middle of the CSQ's 2 dB step (lte::CsqMapping in reverse).
pub fn path_loss_from_csq(csq: u8) -> f64 {
    ENB_POWER_DBM - (crate::lte::dbm_from_csq(csq) + 1.0)
}

/// The model's parameters: the five fitted per trace (M, S̄, σ, τ, q) and
/// the BLER target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UplinkParams {
    /// PRBs of a grant (50: a 10 MHz carrier's uplink, less PUCCH edges).
    pub prbs: u32,
    /// Median SINR over the grant, dB.
    pub sinr_db: f64,
    /// Slow fading's standard deviation σ, dB.
    pub shadow_sd_db: f64,
    /// Slow fading's correlation time τ, s.
    pub coherence_s: f64,
    /// q: the chance an idle HARQ process is granted its TTI.
    pub grant_share: f64,
    /// First-attempt block error rate of a transport block.
    pub bler: f64,
}

impl UplinkParams {
    /// The same model at the SINR a downlink CSQ's path loss gives.
    pub fn at_csq(self, csq: u8) -> UplinkParams {
        UplinkParams {
            sinr_db: sinr_from_path_loss(path_loss_from_csq(csq), self.prbs),
            ..self
        }
    }

    pub fn validated(self) -> Result<UplinkParams, ModelError> {
        let pos = |what, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(ModelError::NotPositive { what, value: v })
            }
        };
        if !(1..=110).contains(&self.prbs) {
            return Err(ModelError::NotPositive {
                what: "PRBs (1 to 110)",
                value: f64::from(self.prbs),
            });
        }
        if !self.sinr_db.is_finite() {
            return Err(ModelError::NotFinite {
                what: "SINR",
                value: self.sinr_db,
            });
        }
        if !(self.shadow_sd_db.is_finite() && self.shadow_sd_db >= 0.0) {
            return Err(ModelError::NotFinite {
                what: "shadowing sd (≥ 0 dB)",
                value: self.shadow_sd_db,
            });
        }
        pos("correlation time", self.coherence_s)?;
        pos("grant share", self.grant_share)?;
        if self.grant_share > 1.0 || !(0.0..1.0).contains(&self.bler) {
            return Err(ModelError::NotFinite {
                what: "a probability (grant share in (0, 1], BLER in [0, 1))",
                value: if self.grant_share > 1.0 {
                    self.grant_share
                } else {
                    self.bler
                },
            });
        }
        Ok(self)
    }

    /// Rate of a granted TTI at `sinr_db`, bit/s.
    pub fn granted_rate_bps(&self, sinr_db: f64) -> f64 {
        f64::from(self.prbs) * PRB_HZ * spectral_efficiency(sinr_db)
    }

    /// Long-run rate at a fixed SINR (no fading), bit/s: per HARQ process a
    /// renewal cycle is 1/q TTIs waiting for a grant plus the expected
    /// retransmissions, and it delivers a block unless every attempt fails.
    pub fn mean_rate_bps(&self, sinr_db: f64) -> f64 {
        let b = self.bler;
        let retx: f64 = (1..i32::from(MAX_HARQ_TX)).map(|k| b.powi(k)).sum();
        let delivered = 1.0 - b.powi(i32::from(MAX_HARQ_TX));
        self.granted_rate_bps(sinr_db) * delivered / (1.0 / self.grant_share + retx)
    }

    /// Long-run rate at `sinr_db` over the grant's PRBs for a UE the
    /// scheduler may give fewer PRBs, bit/s. Below the lowest usable SINR
    /// the UE's fixed power over m < M PRBs raises its SINR by
    /// 10·log10(M/m): it takes the most PRBs on which the link closes,
    /// m = ⌊M·10^((S − S_min)/10)⌋, so a far UE still sends a little (a
    /// request, a fix) rather than nothing, down to the SINR one PRB
    /// closes at. At or above S_min it is `mean_rate_bps`: more PRBs at
    /// the same power always carry more.
    pub fn power_limited_rate_bps(&self, sinr_db: f64) -> f64 {
        if sinr_db >= SINR_MIN_DB {
            return self.mean_rate_bps(sinr_db);
        }
        let share = 10f64.powf((sinr_db - SINR_MIN_DB) / 10.0);
        let prbs = (f64::from(self.prbs) * share).floor() as u32;
        if prbs == 0 {
            return 0.0;
        }
        let narrow = UplinkParams { prbs, ..*self };
        narrow.mean_rate_bps(sinr_db + 10.0 * (f64::from(self.prbs) / f64::from(prbs)).log10())
    }
}

/// The three shared uplink traces the model is fitted to
/// (`convoy trace uplink-fit`, docs/MODELS.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UplinkFit {
    /// ATT-LTE-driving-2016.up: 1.9 Mbit/s, long outages.
    Att,
    /// TMobile-LTE-short.up: 13 Mbit/s, slowly varying.
    Tmobile,
    /// Verizon-LTE-short.up: 6 Mbit/s.
    Verizon,
}

impl UplinkFit {
    pub const ALL: [UplinkFit; 3] = [UplinkFit::Att, UplinkFit::Tmobile, UplinkFit::Verizon];

    pub fn name(self) -> &'static str {
        match self {
            UplinkFit::Att => "att",
            UplinkFit::Tmobile => "tmobile",
            UplinkFit::Verizon => "verizon",
        }
    }

    pub fn from_name(s: &str) -> Option<UplinkFit> {
        UplinkFit::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The trace file each fit comes from.
    pub fn trace_file(self) -> &'static str {
        match self {
            UplinkFit::Att => "ATT-LTE-driving-2016.up",
            UplinkFit::Tmobile => "TMobile-LTE-short.up",
            UplinkFit::Verizon => "Verizon-LTE-short.up",
        }
    }

    /// The fitted parameters, as `convoy trace uplink-fit --search
    /// ../shared/traces/*.up` prints them (4 seeds, 400 evaluations from
    /// each of the nine starts; the mean SINR solved to the trace's mean).
    pub fn params(self) -> UplinkParams {
        let (prbs, sinr_db, shadow_sd_db, coherence_s, grant_share) = match self {
            UplinkFit::Att => (75, -2.184, 10.0, 0.3242, 0.2947),
            UplinkFit::Tmobile => (100, 8.3535, 10.0, 8.0, 0.6787),
            // τ: the 2 s start divided by √2, the search's finest step.
            UplinkFit::Verizon => (75, 4.7558, 8.5, std::f64::consts::SQRT_2, 0.506),
        };
        UplinkParams {
            prbs,
            sinr_db,
            shadow_sd_db,
            coherence_s,
            grant_share,
            bler: BLER_TARGET,
        }
    }
}

/// The default model where no fit is named: Verizon's, whose rate lies
/// between the other two.
pub fn default_params() -> UplinkParams {
    UplinkFit::Verizon.params()
}

/// The uplink as a sans-IO state machine, one TTI per `tick`.
#[derive(Clone, Debug)]
pub struct UplinkGen {
    p: UplinkParams,
    rng: Rng,
    now_ms: u64,
    shadow_db: f64,
    rho: f64,
    innovation_sd: f64,
    /// Decoded bytes not yet a whole opportunity.
    credit: f64,
    /// Per HARQ process: (bytes, transmissions so far) awaiting a retry.
    harq: [Option<(f64, u8)>; HARQ_PROCESSES],
    blocked: Range<u64>,
    lost_bytes: f64,
}

impl UplinkGen {
    pub fn new(p: UplinkParams, seed: u64) -> Result<UplinkGen, ModelError> {
        let p = p.validated()?;
        let mut rng = Rng::new(seed);
        let rho = (-0.001 / p.coherence_s).exp();
        // Start in the stationary distribution, not at the median.
        let shadow_db = rng.normal(0.0, p.shadow_sd_db);
        Ok(UplinkGen {
            p,
            rng,
            now_ms: 0,
            shadow_db,
            rho,
            innovation_sd: p.shadow_sd_db * (1.0 - rho * rho).sqrt(),
            credit: 0.0,
            harq: [None; HARQ_PROCESSES],
            blocked: 0..0,
            lost_bytes: 0.0,
        })
    }

    /// Follows mobility: a new median SINR (e.g. from the CSQ each second).
    pub fn set_sinr_db(&mut self, sinr_db: f64) {
        if sinr_db.is_finite() {
            self.p.sinr_db = sinr_db;
        }
    }

    /// A handover: nothing is sent during `during` (absolute ms), and the
    /// HARQ buffers are flushed now (their bytes are lost to the capacity).
    pub fn interrupt(&mut self, during: Range<u64>) {
        for slot in &mut self.harq {
            if let Some((bytes, _)) = slot.take() {
                self.lost_bytes += bytes;
            }
        }
        self.blocked = during;
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Bytes given up after the last HARQ attempt or flushed at a handover.
    pub fn lost_bytes(&self) -> f64 {
        self.lost_bytes
    }

    /// The SINR this TTI sees, dB.
    pub fn sinr_db(&self) -> f64 {
        self.p.sinr_db + self.shadow_db
    }

    /// Runs the current TTI and moves to the next: the number of 1500-byte
    /// opportunities in it.
    pub fn tick(&mut self) -> u32 {
        let t = self.now_ms;
        self.now_ms += 1;
        self.shadow_db =
            self.rho * self.shadow_db + self.innovation_sd * self.rng.standard_normal();
        if self.blocked.contains(&t) {
            return 0;
        }
        let process = (t % HARQ_PROCESSES as u64) as usize;
        let sinr = self.sinr_db();
        let attempt = match self.harq[process].take() {
            // A synchronous, non-adaptive retransmission: same block, whatever
            // the channel now; it occupies the process's TTI.
            Some((bytes, tx)) => Some((bytes, tx)),
            None if self.rng.uniform() < self.p.grant_share => {
                let bytes = self.p.granted_rate_bps(sinr) / 8.0 / 1000.0;
                (bytes > 0.0).then_some((bytes, 0))
            }
            None => None,
        };
        if let Some((bytes, tx)) = attempt {
            if self.rng.uniform() >= self.p.bler {
                self.credit += bytes;
            } else if tx + 1 < MAX_HARQ_TX {
                self.harq[process] = Some((bytes, tx + 1));
            } else {
                self.lost_bytes += bytes;
            }
        }
        let n = (self.credit / OPPORTUNITY_BYTES).floor();
        self.credit -= n * OPPORTUNITY_BYTES;
        n as u32
    }
}

/// A Mahimahi schedule of `ms` milliseconds from a generator: one entry
/// per opportunity, repeated within a millisecond. A handover is applied
/// at each `(at_ms, cell)` of `cells` (sorted) through `tracker`.
pub fn schedule(
    generator: &mut UplinkGen,
    ms: u64,
    cells: &[(u64, u32)],
    tracker: &mut crate::handover::HandoverTracker,
) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next_cell = cells.iter().peekable();
    for t in generator.now_ms()..generator.now_ms() + ms {
        while let Some(&&(at, cell)) = next_cell.peek() {
            if at > t {
                break;
            }
            if let Some(gap) = tracker.serve(at, cell) {
                generator.interrupt(gap);
            }
            next_cell.next();
        }
        for _ in 0..generator.tick() {
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_budget_and_rate_curve() {
        // 120 dB over 50 PRBs: 23 − 120 − (−174 + 69.5 + 5 + 3) = −0.5 dB.
        assert!((sinr_from_path_loss(120.0, 50) + 0.54).abs() < 0.01);
        assert_eq!(spectral_efficiency(-10.5), 0.0);
        assert!((spectral_efficiency(15.0) - 2.0).abs() < 0.01);
        assert_eq!(spectral_efficiency(30.0), MAX_EFFICIENCY);
        // CSQ 31 ↔ −51 dBm: 96 dB of path loss.
        assert_eq!(path_loss_from_csq(31), 96.0);
        let p = default_params().at_csq(5);
        assert!(p.sinr_db < SINR_MIN_DB, "a far UE cannot close the uplink");
    }

    #[test]
    fn mean_rate_formula_matches_the_generator_without_fading() {
        for (q, bler) in [(1.0, 0.1), (0.3, 0.1), (0.5, 0.3)] {
            let p = UplinkParams {
                prbs: 50,
                sinr_db: 5.0,
                shadow_sd_db: 0.0,
                coherence_s: 1.0,
                grant_share: q,
                bler,
            };
            let mut g = UplinkGen::new(p, 3).unwrap();
            let n: u64 = (0..200_000).map(|_| u64::from(g.tick())).sum();
            let got = n as f64 * 12_000.0 / 200.0;
            let want = p.mean_rate_bps(5.0);
            assert!((got / want - 1.0).abs() < 0.02, "q {q}: {got} vs {want}");
        }
    }

    #[test]
    fn a_power_limited_ue_takes_fewer_prbs_rather_than_none() {
        // Verizon's fit: 75 PRBs. Where the grant closes, nothing changes.
        let p = UplinkFit::Verizon.params();
        for s in [-10.0, -3.0, 5.0, 20.0] {
            assert_eq!(p.power_limited_rate_bps(s), p.mean_rate_bps(s));
        }
        // 6 dB under: a quarter of the PRBs (18) at -10 dB or a little over.
        let r = p.power_limited_rate_bps(-16.0);
        let quarter = UplinkParams { prbs: 18, ..p };
        assert!(r >= quarter.mean_rate_bps(-10.0) && r > 0.0, "{r}");
        assert_eq!(p.mean_rate_bps(-16.0), 0.0);
        // It falls with the SINR, to nothing past one PRB's reach
        // (10·log10(75) = 18.75 dB under the limit).
        let rates: Vec<f64> = (0..40)
            .map(|k| p.power_limited_rate_bps(-10.0 - 0.5 * f64::from(k)))
            .collect();
        assert!(rates.windows(2).all(|w| w[1] <= w[0]), "{rates:?}");
        assert!(p.power_limited_rate_bps(-28.5) > 0.0);
        assert_eq!(p.power_limited_rate_bps(-29.0), 0.0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let p = default_params();
        assert!(UplinkGen::new(
            UplinkParams {
                grant_share: 0.0,
                ..p
            },
            1
        )
        .is_err());
        assert!(UplinkGen::new(
            UplinkParams {
                grant_share: 1.5,
                ..p
            },
            1
        )
        .is_err());
        assert!(UplinkGen::new(UplinkParams { bler: 1.0, ..p }, 1).is_err());
        assert!(UplinkGen::new(UplinkParams { prbs: 0, ..p }, 1).is_err());
        assert!(UplinkGen::new(
            UplinkParams {
                coherence_s: 0.0,
                ..p
            },
            1
        )
        .is_err());
    }
}
