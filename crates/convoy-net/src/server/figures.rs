//! What a server measures about its uploads for an operator's metrics
//! (`convoy serve`'s `/metrics`): how many are being received now, and
//! how long making each durable took. Shared by every worker; atomics, so
//! recording costs no lock on the commit threads.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds: from a fast SSD's
/// fsync (about 1 ms) to a disk or database under strain (seconds).
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
];

/// A latency histogram with [`LATENCY_BUCKETS`] (and +Inf).
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// Cumulative counts per bucket (the last is +Inf, the total), and
    /// the sum in seconds: Prometheus' `_bucket`, `_count` and `_sum`.
    pub fn snapshot(&self) -> (Vec<u64>, f64) {
        let mut total = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|c| {
                total += c.load(Ordering::Relaxed);
                total
            })
            .collect();
        (cumulative, self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

/// A server's upload figures.
#[derive(Default)]
pub struct ServerFigures {
    /// Uploads whose data is being received now (partial files held by a
    /// session, over every worker).
    pub(crate) in_progress: Arc<AtomicUsize>,
    /// The file's fsync, the BLAKE3 check, the rename and the directory's
    /// fsync, per stored upload.
    pub fsync: Histogram,
    /// All of that plus the commit hook (the catalog's queue row): from
    /// the complete upload to "stored" being sent.
    pub commit: Histogram,
}

impl ServerFigures {
    pub fn uploads_in_progress(&self) -> usize {
        self.in_progress.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_sum_adds_up() {
        let h = Histogram::default();
        h.record(Duration::from_micros(500));
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(9));
        let (c, sum) = h.snapshot();
        assert_eq!(c.len(), LATENCY_BUCKETS.len() + 1);
        assert_eq!((c[0], c[1], c[2]), (1, 1, 2));
        assert_eq!(*c.last().unwrap(), 3);
        assert_eq!(c[LATENCY_BUCKETS.len() - 1], 2);
        assert!((sum - 9.0035).abs() < 1e-6);
    }
}
