//! CapProbe path grading (SPEC S3; Mena 2017 ch. 7): is a path that is alive
//! also *bad*, bad enough to hand its traffic to the backup path?
//!
//! Three metrics, recomputed at every grade (every γ):
//! - **C′**, a fast, deliberately sub-optimal capacity estimate: packet-pair
//!   dispersions of *every* pair, queueing included, smoothed with an EWMA
//!   (α = 1/8, as Linux smooths the RTT), and C′ = L / smoothed dispersion.
//!   Queueing spreads pairs and lowers C′: on a congested path that is what
//!   we want to see, not noise to filter out.
//! - **δ**, the dispersion ratio: smoothed dispersion over the dispersion of
//!   the pair with the smallest delay sum seen so far (CapProbe's minimum
//!   delay sum condition: that pair queued least, so its dispersion is the
//!   best this path can do). δ says how far the path is from its own ideal.
//! - **SRTT**, averaged over a window.
//!
//! A grade is bad when any two of C′ < 1 Mbit/s, δ > 100, SRTT > 2 s hold
//! (Algorithm 1); the path is flagged after N = 5 consecutive bad grades
//! (Algorithm 2). Thresholds and periods are [`Config`] fields.
//!
//! Like the rest of convoy-proto this is a sans-IO state machine: no clock,
//! no socket. The caller hands in samples and the time; it decides what a
//! flagged path means (see docs/PROTOCOL.md, "CapProbe path grading").
//!
//! Our two choices the thesis leaves open, and why:
//! - Dispersion is smoothed *per byte* (seconds per byte) so that pairs of
//!   different sizes can be mixed: convoy measures pairs on its own data
//!   packets, whose sizes vary. With a fixed probe size L this is exactly the
//!   thesis's C′ = L / sdisp.
//! - The SRTT window is one grade period by default (`srtt_window = γ`): each
//!   grade judges its own period, and the N-consecutive rule is the only
//!   smoothing across periods. A window longer than γ would let one slow
//!   period count against the path in several grades in a row, which is the
//!   oscillation N is there to prevent, counted twice.

use std::collections::VecDeque;
use std::time::Duration;

/// The thesis's values (Mena 2017 §7.5): α = 1/8, C_THR = 1 Mbit/s,
/// D_THR = 100, SRTT_THR = 2000 ms, γ = 1 s, N = 5.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// EWMA gain on each new dispersion sample, in (0, 1].
    pub alpha: f64,
    /// C′ below this (bit/s) is a vote for bad.
    pub capacity_threshold_bps: u64,
    /// δ above this is a vote for bad. 100 leaves room for Wi-Fi's bursts.
    pub delta_threshold: f64,
    /// Window-averaged SRTT above this is a vote for bad.
    pub srtt_threshold: Duration,
    /// γ: a grade at most this often.
    pub grade_interval: Duration,
    /// N: this many bad grades in a row flag the path.
    pub bad_grades_to_flag: u32,
    /// The window the SRTT is averaged over (see the module doc for why γ).
    pub srtt_window: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            alpha: 1.0 / 8.0,
            capacity_threshold_bps: 1_000_000,
            delta_threshold: 100.0,
            srtt_threshold: Duration::from_millis(2000),
            grade_interval: Duration::from_secs(1),
            bad_grades_to_flag: 5,
            srtt_window: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("capprobe: alpha must be in (0, 1], got {0}")]
    Alpha(f64),
    #[error("capprobe: delta threshold must be a finite number ≥ 1, got {0}")]
    DeltaThreshold(f64),
    #[error("capprobe: the grade interval γ must be longer than zero")]
    GradeInterval,
    #[error("capprobe: the SRTT window must be longer than zero")]
    SrttWindow,
    #[error("capprobe: N (bad grades to flag) must be at least 1")]
    BadGrades,
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(ConfigError::Alpha(self.alpha));
        }
        if !(self.delta_threshold.is_finite() && self.delta_threshold >= 1.0) {
            return Err(ConfigError::DeltaThreshold(self.delta_threshold));
        }
        if self.grade_interval.is_zero() {
            return Err(ConfigError::GradeInterval);
        }
        if self.srtt_window.is_zero() {
            return Err(ConfigError::SrttWindow);
        }
        if self.bad_grades_to_flag == 0 {
            return Err(ConfigError::BadGrades);
        }
        Ok(())
    }
}

/// One packet pair as the receiver saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairSample {
    /// When the second packet arrived.
    pub at: Duration,
    /// Size of the second packet (the one whose transmission the gap
    /// measures). Wire size is best; UDP payload size only biases C′ by the
    /// headers' few percent.
    pub bytes: u32,
    /// Arrival of the second packet minus arrival of the first.
    pub dispersion: Duration,
    /// The two packets' delays added (one-way or round-trip). Only compared
    /// between samples, so a constant clock offset between the hosts is fine.
    pub delay_sum: Duration,
}

/// Which of the rules held at a grade.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reasons {
    /// C′ < threshold, or no pair arrived in the period (see `no_pairs`).
    pub low_capacity: bool,
    /// δ > threshold.
    pub high_delta: bool,
    /// Window-averaged SRTT > threshold, or nothing came back for longer.
    pub high_srtt: bool,
    /// No pair arrived during the period; counted as low capacity, because
    /// the caller grades only a path it is sending pairs on.
    pub no_pairs: bool,
    /// No RTT sample in the window: the SRTT is the time since the last one.
    pub rtt_silent: bool,
}

impl Reasons {
    /// How many of the three metrics voted bad.
    pub fn votes(&self) -> u32 {
        u32::from(self.low_capacity) + u32::from(self.high_delta) + u32::from(self.high_srtt)
    }
}

/// One grade: the metrics as they stood and the verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grade {
    pub at: Duration,
    /// C′ in bit/s; None before the first resolvable pair.
    pub capacity_bps: Option<u64>,
    /// δ; None before the first resolvable pair.
    pub delta: Option<f64>,
    /// The SRTT the rule used: the window average, or, with no sample in
    /// the window, the longer of the last average and the silence since the
    /// last sample (an answer that has not come is at least that late).
    pub srtt: Duration,
    /// Pairs (resolvable or not) since the previous grade.
    pub pairs: u32,
    /// RTT samples in the SRTT window.
    pub rtt_samples: u32,
    pub reasons: Reasons,
    /// Two or more votes.
    pub bad: bool,
    /// Bad grades in a row, this one included.
    pub consecutive_bad: u32,
    /// Grades in a row, this one included, whose C′ was under the
    /// threshold or that had no pair: one vote alone, which a caller with
    /// a second witness of its own may act on (see
    /// [`Estimator::persistently_low_capacity`]).
    pub consecutive_low_capacity: u32,
}

/// Counts of what was handed in, for diagnostics and the experiments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub pairs: u64,
    /// Pairs with zero dispersion: both packets inside one clock tick. They
    /// say the path is fast but not how fast, so they keep the path from
    /// looking silent and change neither C′ nor δ (a zero would make δ's
    /// denominator zero).
    pub unresolved_pairs: u64,
    /// Pairs with zero bytes: bad input, ignored.
    pub rejected_pairs: u64,
    pub rtt_samples: u64,
    pub grades: u64,
    pub bad_grades: u64,
}

/// The grader for one path.
#[derive(Clone, Debug)]
pub struct Estimator {
    config: Config,
    /// The EWMA of dispersion per byte, in seconds per byte.
    smoothed_per_byte: Option<f64>,
    /// (minimum delay sum, smallest per-byte dispersion among the pairs with
    /// that delay sum): CapProbe's uncontaminated sample.
    baseline: Option<(Duration, f64)>,
    rtt: RttWindow,
    /// Graded on what it has since here when no RTT sample ever came.
    started: Duration,
    next_grade_at: Duration,
    pairs_in_period: u32,
    consecutive_bad: u32,
    consecutive_low_capacity: u32,
    last_grade: Option<Grade>,
    /// Per-byte dispersions of the newest pairs (zero for a pair inside
    /// one clock tick), newest last: what the path shows now, whatever the
    /// EWMA still remembers.
    recent: std::collections::VecDeque<f64>,
    stats: Stats,
}

/// Pairs kept in [`Estimator::recent_capacity_bps`]'s memory.
const RECENT_PAIRS: usize = 8;

impl Estimator {
    /// A grader for a path that starts being graded at `now` (validated,
    /// and carrying pairs from now on). The first grade is due at now + γ.
    pub fn new(now: Duration, config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Estimator {
            config,
            smoothed_per_byte: None,
            baseline: None,
            rtt: RttWindow::new(config.srtt_window),
            started: now,
            next_grade_at: now.saturating_add(config.grade_interval),
            pairs_in_period: 0,
            consecutive_bad: 0,
            consecutive_low_capacity: 0,
            last_grade: None,
            recent: std::collections::VecDeque::with_capacity(RECENT_PAIRS),
            stats: Stats::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One packet pair's dispersion and delay sum.
    pub fn on_pair(&mut self, sample: PairSample) {
        if sample.bytes == 0 {
            self.stats.rejected_pairs += 1;
            return;
        }
        self.stats.pairs += 1;
        self.pairs_in_period = self.pairs_in_period.saturating_add(1);
        if self.recent.len() == RECENT_PAIRS {
            self.recent.pop_front();
        }
        self.recent
            .push_back(sample.dispersion.as_secs_f64() / f64::from(sample.bytes));
        if sample.dispersion.is_zero() {
            self.stats.unresolved_pairs += 1;
            return;
        }
        let per_byte = sample.dispersion.as_secs_f64() / f64::from(sample.bytes);
        self.smoothed_per_byte = Some(match self.smoothed_per_byte {
            // The first sample seeds the average, as the first RTT seeds SRTT.
            None => per_byte,
            Some(s) => s + self.config.alpha * (per_byte - s),
        });
        self.baseline = Some(match self.baseline {
            Some((min_sum, min_disp)) if sample.delay_sum > min_sum => (min_sum, min_disp),
            Some((min_sum, min_disp)) if sample.delay_sum == min_sum => {
                (min_sum, min_disp.min(per_byte))
            }
            // A smaller delay sum queued less: its dispersion replaces the
            // baseline even when larger, since a smaller one from a pair that
            // queued more was compressed by the queue, not a faster path.
            _ => (sample.delay_sum, per_byte),
        });
    }

    /// One RTT sample of this path (per acknowledgment, or the path's SRTT
    /// whenever it changes: either works, the window averages them).
    pub fn on_rtt(&mut self, at: Duration, rtt: Duration) {
        self.stats.rtt_samples += 1;
        self.rtt.add(at, rtt);
    }

    /// Forget the minimum-delay-sum baseline, for when the path's delays
    /// changed for a reason other than queueing: a new remote address, or a
    /// one-way clock that was stepped. The smoothed dispersion is kept.
    pub fn reset_baseline(&mut self) {
        self.baseline = None;
    }

    /// C′ now, in bit/s.
    pub fn capacity_bps(&self) -> Option<u64> {
        // Saturating float-to-int: a tiny dispersion means "very fast".
        self.smoothed_per_byte.map(|s| (8.0 / s) as u64)
    }

    /// The capacity the newest `n` pairs all showed (the slowest of them),
    /// in bit/s; `None` until `n` pairs arrived (`n` at most 8).
    pub fn recent_capacity_bps(&self, n: usize) -> Option<u64> {
        if n == 0 || self.recent.len() < n {
            return None;
        }
        let slowest = self
            .recent
            .iter()
            .rev()
            .take(n)
            .copied()
            .fold(0.0, f64::max);
        Some(if slowest > 0.0 {
            (8.0 / slowest) as u64
        } else {
            u64::MAX
        })
    }

    /// The path recovered: the smoothed dispersion starts again from the
    /// newest `n` pairs, and the run of bad grades is cleared. Without
    /// this the EWMA (α = 1/8) still holds the poor spell for about 20
    /// more pairs, so the next grades would read it as bad again.
    pub fn recovered(&mut self, n: usize) {
        let newest: Vec<f64> = self.recent.iter().rev().take(n.max(1)).copied().collect();
        if !newest.is_empty() {
            let mean = newest.iter().sum::<f64>() / newest.len() as f64;
            if mean > 0.0 {
                self.smoothed_per_byte = Some(mean);
            }
        }
        self.consecutive_bad = 0;
        self.consecutive_low_capacity = 0;
    }

    /// CapProbe's own estimate, from the pair with the minimum delay sum:
    /// the capacity this path shows when nothing queues, in bit/s.
    pub fn baseline_capacity_bps(&self) -> Option<u64> {
        self.baseline.map(|(_, min)| (8.0 / min) as u64)
    }

    /// δ now.
    pub fn delta(&self) -> Option<f64> {
        match (self.smoothed_per_byte, self.baseline) {
            (Some(s), Some((_, min))) => Some(s / min),
            _ => None,
        }
    }

    /// When the next grade is due.
    pub fn next_grade_at(&self) -> Duration {
        self.next_grade_at
    }

    /// Grades the path if a grade is due (at most once per γ; a late call
    /// makes one grade, not one per missed period). Call it only while the
    /// path is meant to carry pairs: an idle path has nothing to be graded on.
    pub fn grade(&mut self, now: Duration) -> Option<Grade> {
        if now < self.next_grade_at {
            return None;
        }
        let mut reasons = Reasons::default();
        let capacity_bps = self.capacity_bps();
        let delta = self.delta();
        let pairs = std::mem::take(&mut self.pairs_in_period);
        reasons.no_pairs = pairs == 0;
        reasons.low_capacity = reasons.no_pairs
            || capacity_bps.is_some_and(|c| c < self.config.capacity_threshold_bps);
        reasons.high_delta = delta.is_some_and(|d| d > self.config.delta_threshold);

        let (rtt_samples, average) = self.rtt.average(now);
        let srtt = if rtt_samples > 0 {
            average
        } else {
            reasons.rtt_silent = true;
            let silent_since = self.rtt.newest_at().unwrap_or(self.started);
            average.max(now.saturating_sub(silent_since))
        };
        reasons.high_srtt = srtt > self.config.srtt_threshold;

        let bad = reasons.votes() >= 2;
        self.consecutive_bad = if bad {
            self.consecutive_bad.saturating_add(1)
        } else {
            0
        };
        self.consecutive_low_capacity = if reasons.low_capacity {
            self.consecutive_low_capacity.saturating_add(1)
        } else {
            0
        };
        self.stats.grades += 1;
        self.stats.bad_grades += u64::from(bad);
        self.next_grade_at = now.saturating_add(self.config.grade_interval);
        let grade = Grade {
            at: now,
            capacity_bps,
            delta,
            srtt,
            pairs,
            rtt_samples,
            reasons,
            bad,
            consecutive_bad: self.consecutive_bad,
            consecutive_low_capacity: self.consecutive_low_capacity,
        };
        self.last_grade = Some(grade);
        Some(grade)
    }

    /// N bad grades in a row: hand the path's role to the backup. One good
    /// grade clears it.
    pub fn is_bad(&self) -> bool {
        self.consecutive_bad >= self.config.bad_grades_to_flag
    }

    pub fn consecutive_bad(&self) -> u32 {
        self.consecutive_bad
    }

    /// Whether C′ is under the threshold now and the capacity vote has
    /// held for N grades in a row: Algorithm 1 wants a second vote, and
    /// this is for a caller that has a second witness the thesis's
    /// metrics lack (a backup measured better, under a sender that keeps
    /// its queue short so that δ and SRTT cannot vote).
    pub fn persistently_low_capacity(&self) -> bool {
        self.consecutive_low_capacity >= self.config.bad_grades_to_flag
            && self
                .capacity_bps()
                .is_some_and(|c| c < self.config.capacity_threshold_bps)
    }

    pub fn last_grade(&self) -> Option<&Grade> {
        self.last_grade.as_ref()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }
}

/// RTT samples averaged over a sliding window, kept as sixteen buckets per
/// window so memory stays bounded however many acknowledgments arrive.
#[derive(Clone, Debug)]
struct RttWindow {
    window: Duration,
    bucket_width: Duration,
    buckets: VecDeque<RttBucket>,
    newest_at: Option<Duration>,
    /// The last non-empty window's average, kept for silent periods.
    last_average: Duration,
}

#[derive(Clone, Copy, Debug)]
struct RttBucket {
    start: Duration,
    sum_secs: f64,
    count: u32,
}

const BUCKETS_PER_WINDOW: u32 = 16;

impl RttWindow {
    fn new(window: Duration) -> Self {
        RttWindow {
            window,
            bucket_width: (window / BUCKETS_PER_WINDOW).max(Duration::from_nanos(1)),
            buckets: VecDeque::new(),
            newest_at: None,
            last_average: Duration::ZERO,
        }
    }

    fn add(&mut self, at: Duration, rtt: Duration) {
        let width = self.bucket_width.as_nanos();
        let start_nanos = at.as_nanos() - at.as_nanos() % width;
        // Fits: it is at most `at`, itself a Duration.
        let start = Duration::new(
            (start_nanos / 1_000_000_000) as u64,
            (start_nanos % 1_000_000_000) as u32,
        );
        match self.buckets.back_mut() {
            // A sample older than the newest bucket (reordered input) joins
            // the newest bucket rather than reopening an old one.
            Some(last) if start <= last.start => {
                last.sum_secs += rtt.as_secs_f64();
                last.count = last.count.saturating_add(1);
            }
            _ => self.buckets.push_back(RttBucket {
                start,
                sum_secs: rtt.as_secs_f64(),
                count: 1,
            }),
        }
        self.newest_at = Some(self.newest_at.map_or(at, |n| n.max(at)));
        // Bound memory even if nobody grades: drop what no window can need.
        while self.buckets.len() > BUCKETS_PER_WINDOW as usize + 1 {
            self.buckets.pop_front();
        }
    }

    /// (samples, mean RTT) over the buckets that overlap (now − window, now].
    fn average(&mut self, now: Duration) -> (u32, Duration) {
        let from = now.saturating_sub(self.window);
        while self
            .buckets
            .front()
            .is_some_and(|b| b.start.saturating_add(self.bucket_width) <= from)
        {
            self.buckets.pop_front();
        }
        let (sum, count) = self
            .buckets
            .iter()
            .filter(|b| b.start <= now)
            .fold((0.0, 0u32), |(s, c), b| {
                (s + b.sum_secs, c.saturating_add(b.count))
            });
        if count > 0 {
            let mean = sum / f64::from(count);
            self.last_average = Duration::try_from_secs_f64(mean).unwrap_or(Duration::MAX);
        }
        (count, self.last_average)
    }

    fn newest_at(&self) -> Option<Duration> {
        self.newest_at
    }
}

#[cfg(test)]
mod tests;
