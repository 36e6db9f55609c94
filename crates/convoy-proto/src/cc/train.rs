//! The receiver's half of RCDP: a capacity estimate from the dispersion of
//! each packet train.
//!
//! For a train whose packets i..j arrived at times t_i and t_j, the estimate
//! is (j − i) · P̄ / (t_j − t_i), with P̄ the mean size of the packets that
//! arrived. Counting by index rather than by arrivals means a packet lost
//! on the air in the middle of the train still counts for the link time it
//! used (convoy-link and radios lose packets after the bottleneck); the
//! paper's "packets received" would read a lossy link as a slower one. A
//! train is reported only when at least half of it arrived.

use std::time::Duration;

use crate::wire::TrainTag;

#[derive(Clone, Copy, Debug)]
struct Observed {
    id: u64,
    len: u32,
    first_index: u32,
    first_at: Duration,
    last_index: u32,
    last_at: Duration,
    count: u32,
    bytes: u64,
    closed: bool,
}

/// A capacity report for one train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainReport {
    pub train_id: u64,
    pub bytes_per_sec: u64,
}

#[derive(Clone, Debug, Default)]
pub struct TrainEstimator {
    current: Option<Observed>,
    latest: Option<TrainReport>,
    reports: u64,
    discarded: u64,
}

impl TrainEstimator {
    /// A train packet of `size` bytes arrived at `at` (a kernel timestamp
    /// when the driver has one). Returns a report when this closes a train.
    pub fn on_packet(&mut self, tag: TrainTag, at: Duration, size: usize) -> Option<TrainReport> {
        let mut report = None;
        match &mut self.current {
            Some(obs) if obs.id == tag.train_id => {
                if obs.closed {
                    return None;
                }
                obs.count += 1;
                obs.bytes += size as u64;
                if tag.index > obs.last_index {
                    obs.last_index = tag.index;
                    obs.last_at = at;
                } else if tag.index < obs.first_index {
                    // Reordered ahead of the first we saw: it starts the train.
                    obs.first_index = tag.index;
                    obs.first_at = obs.first_at.min(at);
                }
            }
            Some(obs) if obs.id > tag.train_id => return None, // a straggler of an older train
            _ => {
                if let Some(prev) = self.current.take().filter(|p| !p.closed) {
                    report = self.close(prev);
                }
                self.current = Some(Observed {
                    id: tag.train_id,
                    len: tag.len,
                    first_index: tag.index,
                    first_at: at,
                    last_index: tag.index,
                    last_at: at,
                    count: 1,
                    bytes: size as u64,
                    closed: false,
                });
            }
        }
        if tag.index + 1 == tag.len {
            let obs = self.current.as_mut().expect("set above");
            if !obs.closed {
                obs.closed = true;
                let obs = *obs;
                report = self.close(obs).or(report);
            }
        }
        report
    }

    fn close(&mut self, obs: Observed) -> Option<TrainReport> {
        let span = obs.last_index.saturating_sub(obs.first_index);
        let elapsed = obs.last_at.saturating_sub(obs.first_at);
        if u64::from(obs.count) * 2 < u64::from(obs.len) || span == 0 || elapsed.is_zero() {
            self.discarded += 1;
            return None;
        }
        let mean = obs.bytes as f64 / f64::from(obs.count);
        let bps = (f64::from(span) * mean / elapsed.as_secs_f64()) as u64;
        let r = TrainReport {
            train_id: obs.id,
            bytes_per_sec: bps,
        };
        self.latest = Some(r);
        self.reports += 1;
        Some(r)
    }

    /// The newest report, repeated in feedback until a newer one replaces it.
    pub fn latest(&self) -> Option<TrainReport> {
        self.latest
    }

    /// (reports made, trains discarded for too few arrivals).
    pub fn counts(&self) -> (u64, u64) {
        (self.reports, self.discarded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(id: u64, index: u32) -> TrainTag {
        TrainTag {
            train_id: id,
            index,
            len: 8,
        }
    }

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn dispersion_gives_the_bottleneck_rate() {
        let mut e = TrainEstimator::default();
        // 1000-byte packets arriving every 800 µs: 1.25 MB/s (10 Mbit/s).
        let mut report = None;
        for i in 0..8 {
            report = e.on_packet(tag(3, i), us(800 * u64::from(i)), 1000);
        }
        assert_eq!(
            report,
            Some(TrainReport {
                train_id: 3,
                bytes_per_sec: 1_250_000
            })
        );
    }

    #[test]
    fn a_lost_middle_packet_still_counts_its_link_time() {
        let mut e = TrainEstimator::default();
        let mut report = None;
        for i in (0..8).filter(|&i| i != 4) {
            report = e.on_packet(tag(1, i), us(800 * u64::from(i)), 1000);
        }
        assert_eq!(report.unwrap().bytes_per_sec, 1_250_000);
    }

    #[test]
    fn reports_only_when_half_arrived_and_closes_on_next_train() {
        let mut e = TrainEstimator::default();
        for i in 0..3 {
            assert!(e
                .on_packet(tag(1, i), us(100 * u64::from(i)), 1000)
                .is_none());
        }
        // Train 2 begins: train 1 had 3 of 8, so no report.
        assert!(e.on_packet(tag(2, 0), us(1000), 1000).is_none());
        for i in 1..5 {
            e.on_packet(tag(2, i), us(1000 + 100 * u64::from(i)), 1000);
        }
        // Train 3 begins: train 2 had 5 of 8 (last lost): report from 0..4.
        let r = e.on_packet(tag(3, 0), us(5000), 1000).unwrap();
        assert_eq!(
            r,
            TrainReport {
                train_id: 2,
                bytes_per_sec: 10_000_000
            }
        );
        assert_eq!(e.counts(), (1, 1));
        // Stragglers of older trains are ignored.
        assert!(e.on_packet(tag(2, 6), us(5100), 1000).is_none());
    }
}
