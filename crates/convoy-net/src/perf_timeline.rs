//! When a perf server's application got its data: every gap of 20 ms or
//! more between two reads (a stall, as a handover causes) and the bytes
//! read per 100 ms, from the first byte on. The lab compares these with
//! the emulated links' outages.

use std::time::Duration;

/// A gap between two reads at least this long is a stall.
pub const STALL: Duration = Duration::from_millis(20);
/// The timeline's bin.
pub const BIN: Duration = Duration::from_millis(100);
/// Most bins kept (a day at 100 ms); later reads count in the last one.
const MAX_BINS: usize = 864_000;

#[derive(Clone, Debug, Default)]
pub struct ReadTimeline {
    first: Option<Duration>,
    last: Duration,
    /// (start, length) of each stall, from the first byte.
    stalls: Vec<(Duration, Duration)>,
    /// Bytes read in each 100 ms from the first byte.
    bins: Vec<u64>,
}

impl ReadTimeline {
    /// The application read `bytes` at `now`.
    pub fn read(&mut self, now: Duration, bytes: u64) {
        let first = *self.first.get_or_insert(now);
        let now = now.max(self.last).max(first);
        if now - self.last.max(first) >= STALL && self.last >= first {
            self.stalls.push((self.last - first, now - self.last));
        }
        self.last = now;
        let bin = (((now - first).as_nanos() / BIN.as_nanos()) as usize).min(MAX_BINS - 1);
        if self.bins.len() <= bin {
            self.bins.resize(bin + 1, 0);
        }
        self.bins[bin] += bytes;
    }

    /// Stalls as `[start_ms, length_ms]` from the first byte.
    pub fn stalls_ms(&self) -> Vec<[f64; 2]> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        self.stalls.iter().map(|&(s, l)| [ms(s), ms(l)]).collect()
    }

    /// Bytes read per 100 ms bin from the first byte.
    pub fn timeline(&self) -> &[u64] {
        &self.bins
    }

    /// From the first read to the last.
    pub fn span(&self) -> Duration {
        self.first
            .map_or(Duration::ZERO, |f| self.last.saturating_sub(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn gaps_of_20_ms_or_more_are_stalls_and_bins_count_bytes() {
        let mut t = ReadTimeline::default();
        assert!(t.stalls_ms().is_empty() && t.timeline().is_empty());
        t.read(1000 * MS, 10); // the first byte: time zero
        t.read(1019 * MS, 10); // 19 ms: not a stall
        t.read(1039 * MS, 10); // 20 ms: a stall
        t.read(1250 * MS, 5); // 211 ms
        t.read(1250 * MS, 5); // same instant
        assert_eq!(t.stalls_ms(), vec![[19.0, 20.0], [39.0, 211.0]]);
        assert_eq!(t.timeline(), &[30, 0, 10]);
        assert_eq!(t.span(), 250 * MS);
        // A clock that steps back counts as no time passing.
        t.read(1200 * MS, 1);
        assert_eq!(t.timeline(), &[30, 0, 11]);
        assert_eq!(t.stalls_ms().len(), 2);
    }
}
