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

/// Where a search starts, whatever the trace: a 10 MHz grant at 5 dB,
/// 6 dB of shadowing with a 2 s correlation time, half the TTIs granted;
/// `fit_multi` also starts from 0.5 s and 8 s (the search's steps are local,
/// and a slow-fading time found on the wrong side of the trace's settles
/// there). The stored fits (lte_uplink::UplinkFit) are what `fit_multi`
/// finds from these, so `convoy trace uplink-fit --search` reproduces them.
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
}

/// The best of `fit` from `START` with correlation times 0.5, 2 and 8 s.
pub fn fit_multi(
    trace: &TraceStats,
    seeds: u64,
    max_evaluations: usize,
) -> Result<Fit, ModelError> {
    let mut best: Option<Fit> = None;
    for tau in [0.5, 2.0, 8.0] {
        let start = UplinkParams {
            coherence_s: tau,
            ..START
        };
        let f = fit(trace, start, seeds, max_evaluations)?;
        let evaluations = f.evaluations + best.as_ref().map_or(0, |b| b.evaluations);
        if best.as_ref().is_none_or(|b| f.distance < b.distance) {
            best = Some(Fit { evaluations, ..f });
        } else if let Some(b) = best.as_mut() {
            b.evaluations = evaluations;
        }
    }
    Ok(best.expect("three starts"))
}

/// Pattern search from `start`: try each parameter a step up and down,
/// keep any improvement, halve the steps when none helps; stop when the
/// steps are small or after `max_evaluations` runs of the model.
pub fn fit(
    trace: &TraceStats,
    start: UplinkParams,
    seeds: u64,
    max_evaluations: usize,
) -> Result<Fit, ModelError> {
    let ms = (trace.seconds as u64).max(2) * 1000;
    let evals = std::cell::Cell::new(0usize);
    let eval = |p: UplinkParams| -> Result<(f64, TraceStats), ModelError> {
        evals.set(evals.get() + 1);
        let m = model_stats(p, ms, seeds)?;
        Ok((distance(&m, trace), m))
    };
    let mut best = start.validated()?;
    let (mut best_d, mut best_m) = eval(best)?;
    // Steps: SINR and σ in dB, τ and q as factors.
    let mut steps = [3.0, 2.0, 2.0, 1.6];
    while steps[0] > 0.2 && evals.get() < max_evaluations {
        let mut improved = false;
        for k in 0..5 {
            for dir in [1.0, -1.0] {
                let mut c = best;
                match k {
                    0 => c.sinr_db += dir * steps[0],
                    1 => c.shadow_sd_db = (c.shadow_sd_db + dir * steps[1]).max(0.0),
                    2 => c.coherence_s = (c.coherence_s * steps[2].powf(dir)).clamp(0.05, 120.0),
                    3 => c.grant_share = (c.grant_share * steps[3].powf(dir)).clamp(0.01, 1.0),
                    _ => {
                        let i = PRB_CHOICES.iter().position(|&p| p == c.prbs).unwrap_or(1);
                        let j = if dir > 0.0 { i + 1 } else { i.wrapping_sub(1) };
                        match PRB_CHOICES.get(j) {
                            Some(&p) => c.prbs = p,
                            None => continue,
                        }
                    }
                }
                if c == best {
                    continue;
                }
                let (d, m) = eval(c)?;
                if d < best_d {
                    (best, best_d, best_m) = (c, d, m);
                    improved = true;
                }
            }
        }
        if !improved {
            steps[0] /= 2.0;
            steps[1] /= 2.0;
            steps[2] = steps[2].sqrt();
            steps[3] = steps[3].sqrt();
        }
    }
    Ok(Fit {
        params: best,
        model: best_m,
        distance: best_d,
        evaluations: evals.get(),
    })
}
