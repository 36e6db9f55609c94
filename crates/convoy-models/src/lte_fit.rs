//! Fitting the uplink model (lte_uplink) to a delivery trace: a pattern
//! search over its parameters that brings the model's statistics
//! (trace_stats) close to the trace's. The model is stochastic, so each
//! candidate is judged on several seeds with the same seeds for every
//! candidate (common random numbers: two candidates differ by their
//! parameters, not by their luck), each run as long as the trace.
//!
//! The distance weighs what a transfer sees: the mean (four times: it is
//! what a bulk upload gets) and the per-second percentiles (relative to
//! the trace's mean), the lag-1 s autocorrelation,
//! the share of busy milliseconds and the 90th/99th gap percentiles (log
//! ratios: scheduling granularity), and the share of time in outages.
//!
//! The mean is held, not weighed: each candidate's mean SINR is solved so
//! that its mean is the trace's ([`match_mean`]), and the search shapes
//! the rest. Weighed, the search trades some of the mean for shape, and
//! the mean is what a bulk upload gets.

use crate::error::ModelError;
use crate::handover::HandoverTracker;
use crate::lte_uplink::{schedule, UplinkGen, UplinkParams};
use crate::trace_stats::TraceStats;

/// PRB counts a fit may choose: 5, 10, 15 and 20 MHz carriers.
pub const PRB_CHOICES: [u32; 4] = [25, 50, 75, 100];

/// Runs the model `seeds` times for `ms` each and averages the statistics
/// (longest gap: the largest).
pub fn model_stats(p: UplinkParams, ms: u64, seeds: u64) -> Result<TraceStats, ModelError> {
    let mut acc = TraceStats::default();
    for seed in 1..=seeds {
        let mut g = UplinkGen::new(p, seed)?;
        let sched = schedule(&mut g, ms, &[], &mut HandoverTracker::new(0));
        let s = TraceStats::of(&sched, ms)?;
        acc.seconds += s.seconds;
        acc.mean_mbps += s.mean_mbps;
        acc.sd_mbps += s.sd_mbps;
        acc.p10_mbps += s.p10_mbps;
        acc.p50_mbps += s.p50_mbps;
        acc.p90_mbps += s.p90_mbps;
        acc.acf1 += s.acf1;
        acc.busy_share += s.busy_share;
        acc.gap_p50_ms += s.gap_p50_ms;
        acc.gap_p90_ms += s.gap_p90_ms;
        acc.gap_p99_ms += s.gap_p99_ms;
        acc.outage_share += s.outage_share;
        acc.outages_per_min += s.outages_per_min;
        acc.longest_gap_ms = acc.longest_gap_ms.max(s.longest_gap_ms);
    }
    let n = seeds as f64;
    for v in [
        &mut acc.mean_mbps,
        &mut acc.sd_mbps,
        &mut acc.p10_mbps,
        &mut acc.p50_mbps,
        &mut acc.p90_mbps,
        &mut acc.acf1,
        &mut acc.busy_share,
        &mut acc.gap_p50_ms,
        &mut acc.gap_p90_ms,
        &mut acc.gap_p99_ms,
        &mut acc.outage_share,
        &mut acc.outages_per_min,
    ] {
        *v /= n;
    }
    acc.seconds /= seeds as usize;
    Ok(acc)
}

/// How far a model's statistics are from a trace's (0 = identical).
pub fn distance(model: &TraceStats, trace: &TraceStats) -> f64 {
    let scale = trace.mean_mbps.max(1e-6);
    let rel = |m: f64, t: f64| ((m - t) / scale).powi(2);
    let log = |m: f64, t: f64, floor: f64| ((m + floor) / (t + floor)).ln().powi(2);
    4.0 * log(model.mean_mbps, trace.mean_mbps, 1e-3)
        + rel(model.p10_mbps, trace.p10_mbps)
        + rel(model.p50_mbps, trace.p50_mbps)
        + rel(model.p90_mbps, trace.p90_mbps)
        + (model.acf1 - trace.acf1).powi(2)
        + log(model.busy_share, trace.busy_share, 1e-3)
        + 0.5 * log(model.gap_p90_ms, trace.gap_p90_ms, 1.0)
        + 0.5 * log(model.gap_p99_ms, trace.gap_p99_ms, 1.0)
        + log(model.outage_share, trace.outage_share, 0.01)
}

/// Where a search starts, whatever the trace: a 10 MHz grant at 5 dB (the
/// SINR is then solved for the trace's mean), 6 dB of shadowing with a 2 s
/// correlation time, half the TTIs granted. `fit_multi` starts from every
/// pair of [`START_COHERENCE_S`] and [`START_GRANT_SHARE`] (the search's
/// steps are local: a slow-fading time or a grant share found on the wrong
/// side of the trace's settles there). The stored fits
/// (lte_uplink::UplinkFit) are what `fit_multi` finds from these, so
/// `convoy trace uplink-fit --search` reproduces them.
pub const START: UplinkParams = UplinkParams {
    prbs: 50,
    sinr_db: 5.0,
    shadow_sd_db: 6.0,
    coherence_s: 2.0,
    grant_share: 0.5,
    bler: crate::lte_uplink::BLER_TARGET,
};

/// The result of a fit.
#[derive(Clone, Copy, Debug)]
pub struct Fit {
    pub params: UplinkParams,
    pub model: TraceStats,
    pub distance: f64,
    pub evaluations: usize,
    /// Whether the model's mean is the trace's within [`MEAN_TOLERANCE`].
    pub mean_held: bool,
}

impl Fit {
    /// How fits compare: one whose mean is held before any whose is not
    /// (the mean is a constraint, not a term), then by distance.
    fn rank(&self) -> (bool, f64) {
        (!self.mean_held, self.distance)
    }
}

/// Correlation times `fit_multi` starts from, s.
pub const START_COHERENCE_S: [f64; 3] = [0.5, 2.0, 8.0];
/// Grant shares `fit_multi` starts from. With the mean held, a high grant
/// share can be traded for a lower SINR a long way before the busy share
/// says otherwise: from ½ alone the Verizon drive's search stopped at
/// q = 0.8 with three times the distance it reaches from ¼.
pub const START_GRANT_SHARE: [f64; 3] = [0.25, 0.5, 0.8];

/// The best of `fit` from `START` with every start of
/// [`START_COHERENCE_S`] × [`START_GRANT_SHARE`].
pub fn fit_multi(
    trace: &TraceStats,
    seeds: u64,
    max_evaluations: usize,
) -> Result<Fit, ModelError> {
    let mut best: Option<Fit> = None;
    for tau in START_COHERENCE_S {
        for q in START_GRANT_SHARE {
            let start = UplinkParams {
                coherence_s: tau,
                grant_share: q,
                ..START
            };
            let f = fit(trace, start, seeds, max_evaluations)?;
            let evaluations = f.evaluations + best.as_ref().map_or(0, |b| b.evaluations);
            if best.as_ref().is_none_or(|b| f.rank() < b.rank()) {
                best = Some(Fit { evaluations, ..f });
            } else if let Some(b) = best.as_mut() {
                b.evaluations = evaluations;
            }
        }
    }
    Ok(best.expect("nine starts"))
}

/// Pattern search from `start` with the mean held to the trace's: each
/// candidate's mean SINR is solved for ([`match_mean`]), and the search
/// tries the other parameters a step up and down, keeps any improvement,
/// halves the steps when none helps, and stops when the steps are small or
/// after `max_evaluations` runs of the model (the SINR's solving counted).
pub fn fit(
    trace: &TraceStats,
    start: UplinkParams,
    seeds: u64,
    max_evaluations: usize,
) -> Result<Fit, ModelError> {
    let ms = run_ms(trace);
    let evals = std::cell::Cell::new(0usize);
    // A candidate at the trace's mean (its SINR solved), as a fit.
    let eval = |p: UplinkParams| -> Result<Fit, ModelError> {
        let m = model_stats(p, ms, seeds)?;
        let matched = match_mean(p, m, trace, seeds)?;
        evals.set(evals.get() + 1 + matched.evaluations);
        Ok(Fit {
            params: matched.params,
            model: matched.model,
            distance: distance(&matched.model, trace),
            evaluations: 0,
            mean_held: mean_held(&matched.model, trace),
        })
    };
    let mut best = eval(start.validated()?)?;
    // Steps: σ in dB, τ and q as factors; the PRB count one choice along.
    let mut steps = [2.0, 2.0, 1.6];
    let mut halvings = 0;
    while halvings < 4 && evals.get() < max_evaluations {
        let mut improved = false;
        for k in 0..4 {
            for dir in [1.0, -1.0] {
                let mut c = best.params;
                match k {
                    0 => c.shadow_sd_db = (c.shadow_sd_db + dir * steps[0]).max(0.0),
                    1 => c.coherence_s = (c.coherence_s * steps[1].powf(dir)).clamp(0.05, 120.0),
                    2 => c.grant_share = (c.grant_share * steps[2].powf(dir)).clamp(0.01, 1.0),
                    _ => {
                        let i = PRB_CHOICES.iter().position(|&p| p == c.prbs).unwrap_or(1);
                        let j = if dir > 0.0 { i + 1 } else { i.wrapping_sub(1) };
                        match PRB_CHOICES.get(j) {
                            Some(&p) => c.prbs = p,
                            None => continue,
                        }
                    }
                }
                if c == best.params {
                    continue;
                }
                let f = eval(c)?;
                if f.rank() < best.rank() {
                    best = f;
                    improved = true;
                }
            }
        }
        if !improved {
            halvings += 1;
            steps[0] /= 2.0;
            steps[1] = steps[1].sqrt();
            steps[2] = steps[2].sqrt();
        }
    }
    Ok(Fit {
        evaluations: evals.get(),
        ..best
    })
}

/// How close [`match_mean`] brings the model's mean to the trace's.
pub const MEAN_TOLERANCE: f64 = 0.01;

/// Whether `model`'s mean is `trace`'s within [`MEAN_TOLERANCE`].
pub fn mean_held(model: &TraceStats, trace: &TraceStats) -> bool {
    (model.mean_mbps / trace.mean_mbps.max(1e-6) - 1.0).abs() <= MEAN_TOLERANCE
}

/// How long each model run lasts for `trace`: as long as the trace.
pub fn run_ms(trace: &TraceStats) -> u64 {
    (trace.seconds as u64).max(2) * 1000
}

/// Most model evaluations [`match_mean`] spends.
const MEAN_EVALUATIONS: usize = 12;

/// A fit moved to the trace's mean (`distance` left to the caller).
#[derive(Clone, Copy, Debug)]
pub struct Matched {
    pub params: UplinkParams,
    pub model: TraceStats,
    pub evaluations: usize,
}

/// Moves `p`'s mean SINR, and nothing else, until the model's mean is the
/// trace's within [`MEAN_TOLERANCE`]: secant steps on the log of the mean,
/// which rises with the SINR (more bits per granted TTI, fewer TTIs below
/// the link's floor). `model` is `p`'s statistics. The same seeds as the
/// search, so the mean is a deterministic function of the SINR. Gives the closest
/// it found if [`MEAN_EVALUATIONS`] runs do not get there (a mean the
/// efficiency cap keeps out of reach).
pub fn match_mean(
    p: UplinkParams,
    model: TraceStats,
    trace: &TraceStats,
    seeds: u64,
) -> Result<Matched, ModelError> {
    let ms = run_ms(trace);
    let off = |m: &TraceStats| (m.mean_mbps.max(1e-6) / trace.mean_mbps.max(1e-6)).ln();
    let mut best = Matched {
        params: p,
        model,
        evaluations: 0,
    };
    let (mut x0, mut f0) = (p.sinr_db, off(&model));
    // The first step's direction from the sign; 1 dB is a few percent of
    // the mean at the fitted SINRs.
    let mut x1 = x0 - f0.signum();
    let mut evaluations = 0;
    while !mean_held(&best.model, trace) && evaluations < MEAN_EVALUATIONS {
        let c = UplinkParams { sinr_db: x1, ..p }.validated()?;
        let m = model_stats(c, ms, seeds)?;
        evaluations += 1;
        let f1 = off(&m);
        if f1.abs() < off(&best.model).abs() {
            best = Matched {
                params: c,
                model: m,
                evaluations: 0,
            };
        }
        if mean_held(&m, trace) || f1 == f0 {
            break;
        }
        // Secant, each step at most 6 dB.
        let step = (-f1 * (x1 - x0) / (f1 - f0)).clamp(-6.0, 6.0);
        (x0, f0, x1) = (x1, f1, x1 + step);
    }
    Ok(Matched {
        evaluations,
        ..best
    })
}
