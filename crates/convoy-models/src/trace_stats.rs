//! Statistics of a packet-delivery schedule (Mahimahi: one 1500-byte
//! opportunity per millisecond timestamp), the ones the LTE uplink model is
//! fitted on and judged by (docs/MODELS.md, "LTE uplink"):
//!
//! * the mean rate and the per-second rate's spread and percentiles (what a
//!   bulk transfer sees);
//! * the lag-1 s autocorrelation of the per-second rate (how long a good or
//!   bad spell lasts, what a congestion controller has to track);
//! * the share of milliseconds with an opportunity and the gaps between
//!   them (the scheduling granularity: what a real-time flow's jitter sees);
//! * long gaps: the share of time inside gaps of 100 ms or more, their rate
//!   and the longest (outages: what a timeout or a handover logic sees).
//!
//! Plain arithmetic over timestamps: no I/O, shared by `convoy trace
//! uplink-fit` and the tests.

use crate::error::ModelError;

/// Bits one opportunity carries (Mahimahi's 1500-byte packet).
pub const OPPORTUNITY_BITS: f64 = 1500.0 * 8.0;

/// A gap at least this long counts as an outage (a TCP-like sender's
/// minimum RTO is 200 ms; 100 ms already stalls a 10 Hz sensor stream).
pub const LONG_GAP_MS: u64 = 100;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TraceStats {
    /// Whole seconds covered (the last partial second is dropped from the
    /// per-second figures, kept in the mean).
    pub seconds: usize,
    pub mean_mbps: f64,
    /// Per-second rate: standard deviation and 10th/50th/90th percentiles.
    pub sd_mbps: f64,
    pub p10_mbps: f64,
    pub p50_mbps: f64,
    pub p90_mbps: f64,
    /// Lag-1 s autocorrelation of the per-second rate.
    pub acf1: f64,
    /// Share of milliseconds with at least one opportunity.
    pub busy_share: f64,
    /// Gaps between successive busy milliseconds, ms (1 = back to back).
    pub gap_p50_ms: f64,
    pub gap_p90_ms: f64,
    pub gap_p99_ms: f64,
    /// Share of the time inside gaps of `LONG_GAP_MS` or more.
    pub outage_share: f64,
    /// Gaps of `LONG_GAP_MS` or more per minute.
    pub outages_per_min: f64,
    pub longest_gap_ms: u64,
}

/// The p-th percentile (nearest rank) of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1]
}

/// Lag-`lag` autocorrelation (the biased estimator every textbook uses, so
/// trace and model are judged alike); 0 for a constant series.
pub fn autocorrelation(xs: &[f64], lag: usize) -> f64 {
    if xs.len() <= lag {
        return 0.0;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let var: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    // Rounding leaves a constant series a variance of ~1e-30: not a signal.
    if var <= 1e-12 * xs.iter().map(|x| x * x).sum::<f64>() {
        return 0.0;
    }
    let cov: f64 = xs.windows(lag + 1).map(|w| (w[0] - m) * (w[lag] - m)).sum();
    cov / var
}

impl TraceStats {
    /// Statistics of the opportunities at `ms` (non-decreasing) over
    /// `duration_ms` (at least the last timestamp + 1).
    pub fn of(ms: &[u64], duration_ms: u64) -> Result<TraceStats, ModelError> {
        if ms.windows(2).any(|w| w[1] < w[0]) {
            return Err(ModelError::NotFinite {
                what: "a decreasing timestamp in the schedule",
                value: f64::NAN,
            });
        }
        let duration_ms = duration_ms.max(ms.last().map_or(0, |l| l + 1));
        if duration_ms < 2000 {
            return Err(ModelError::TooFew {
                what: "a schedule's statistics (per-second autocorrelation)",
                min: 2000,
                got: duration_ms as usize,
            });
        }
        let seconds = (duration_ms / 1000) as usize;
        let mut per_s = vec![0.0; seconds];
        for &t in ms {
            if let Some(s) = per_s.get_mut((t / 1000) as usize) {
                *s += OPPORTUNITY_BITS / 1e6;
            }
        }
        let mean_mbps = ms.len() as f64 * OPPORTUNITY_BITS / (duration_ms as f64 / 1000.0) / 1e6;
        let m = per_s.iter().sum::<f64>() / seconds as f64;
        let sd = (per_s.iter().map(|x| (x - m).powi(2)).sum::<f64>() / seconds as f64).sqrt();
        let acf1 = autocorrelation(&per_s, 1);
        per_s.sort_by(f64::total_cmp);

        let mut busy: Vec<u64> = ms.to_vec();
        busy.dedup();
        let mut gaps: Vec<f64> = busy.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        // The time before the first and after the last opportunity are gaps
        // too: a trace that starts in an outage must show it.
        let lead = busy.first().map_or(duration_ms, |f| *f);
        let tail = busy.last().map_or(0, |l| duration_ms - 1 - l);
        let mut long_ms = 0u64;
        let mut long_n = 0usize;
        let mut longest = 0u64;
        for g in gaps.iter().map(|g| *g as u64).chain([lead, tail]) {
            longest = longest.max(g);
            if g >= LONG_GAP_MS {
                long_ms += g;
                long_n += 1;
            }
        }
        gaps.sort_by(f64::total_cmp);
        Ok(TraceStats {
            seconds,
            mean_mbps,
            sd_mbps: sd,
            p10_mbps: percentile(&per_s, 10.0),
            p50_mbps: percentile(&per_s, 50.0),
            p90_mbps: percentile(&per_s, 90.0),
            acf1,
            busy_share: busy.len() as f64 / duration_ms as f64,
            gap_p50_ms: percentile(&gaps, 50.0),
            gap_p90_ms: percentile(&gaps, 90.0),
            gap_p99_ms: percentile(&gaps, 99.0),
            outage_share: long_ms as f64 / duration_ms as f64,
            outages_per_min: long_n as f64 / (duration_ms as f64 / 60_000.0),
            longest_gap_ms: longest,
        })
    }

    /// The statistics of a Mahimahi trace as replayed: its period is its
    /// last timestamp (mm-link's rule).
    pub fn of_mahimahi(ms: &[u64]) -> Result<TraceStats, ModelError> {
        TraceStats::of(ms, ms.last().map_or(0, |l| *l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_schedule() {
        // One opportunity every 2 ms for 10 s: 6 Mbit/s, no spread, no outage.
        let ms: Vec<u64> = (0..5000).map(|i| i * 2).collect();
        let s = TraceStats::of(&ms, 10_000).unwrap();
        assert!((s.mean_mbps - 6.0).abs() < 1e-9, "{s:?}");
        assert!((s.p10_mbps - 6.0).abs() < 1e-9 && s.sd_mbps < 1e-9);
        assert_eq!(s.gap_p50_ms, 2.0);
        assert_eq!(s.busy_share, 0.5);
        assert_eq!(s.outage_share, 0.0);
        assert_eq!(s.acf1, 0.0);
    }

    #[test]
    fn an_outage_is_counted_with_its_length() {
        // 1 opportunity a ms, except a 2 s hole from 3000 to 5000.
        let ms: Vec<u64> = (0..10_000u64)
            .filter(|t| !(3000..5000).contains(t))
            .collect();
        let s = TraceStats::of(&ms, 10_000).unwrap();
        assert_eq!(s.longest_gap_ms, 2001);
        assert!((s.outage_share - 0.2001).abs() < 1e-9, "{s:?}");
        assert!((s.outages_per_min - 6.0).abs() < 1e-9);
        assert_eq!(s.p10_mbps, 0.0);
        // Two zero seconds in a row among full ones: positive correlation.
        assert!(s.acf1 > 0.3, "{}", s.acf1);
    }

    #[test]
    fn too_short_or_unordered_is_an_error() {
        assert!(TraceStats::of(&[0, 1, 2], 1000).is_err());
        assert!(TraceStats::of(&[5, 3], 5000).is_err());
    }
}
