//! Mahimahi packet-delivery traces, read the way mm-link reads them.
//!
//! One non-negative integer per line: a millisecond offset at which one
//! 1500-byte delivery opportunity occurs (a repeated value is several
//! opportunities in that millisecond). Values must not decrease; the last
//! value is the period after which the schedule repeats, so it must not be 0.
//! An empty line anywhere is an error, as in mm-link; a final newline and
//! Windows line ends are accepted.

use std::path::Path;

use crate::error::{ParseErrorKind, TraceError};
use crate::time::{Dur, Time};
use crate::trace::numbered_lines;

/// Bytes one Mahimahi delivery opportunity can carry.
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// Largest accepted timestamp: far beyond any real trace (about 73 years),
/// and small enough that cycle arithmetic in nanoseconds cannot overflow.
const MAX_MS: u64 = u64::MAX / 1_000_000 / 4;

/// A parsed packet-delivery trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MahimahiTrace {
    ms: Box<[u64]>,
    /// The repeat period: the last timestamp of a parsed trace (mm-link's
    /// rule); a trace started at an offset keeps its source's period.
    period_ms: u64,
    source: String,
}

impl MahimahiTrace {
    /// Reads and validates a trace file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<MahimahiTrace, TraceError> {
        let path = path.as_ref();
        let text = super::read_to_string(path)?;
        MahimahiTrace::parse(&text, &path.display().to_string())
    }

    /// Parses trace text; `source_name` is used in error messages.
    pub fn parse(text: &str, source_name: &str) -> Result<MahimahiTrace, TraceError> {
        let err = |line, kind| TraceError::parse(source_name, line, kind);
        let mut ms: Vec<u64> = Vec::with_capacity(text.len() / 6);
        let mut last_line = 1;
        for (line_no, line) in numbered_lines(text) {
            last_line = line_no;
            if line.is_empty() {
                return Err(err(line_no, ParseErrorKind::EmptyLine));
            }
            let value = parse_ms(line).ok_or_else(|| {
                err(
                    line_no,
                    ParseErrorKind::NotAnInteger {
                        found: line.to_owned(),
                    },
                )
            })?;
            if value > MAX_MS {
                return Err(err(
                    line_no,
                    ParseErrorKind::TooLarge {
                        max: MAX_MS,
                        found: value,
                    },
                ));
            }
            if let Some(&previous) = ms.last() {
                if value < previous {
                    return Err(err(
                        line_no,
                        ParseErrorKind::Decreasing {
                            previous,
                            found: value,
                        },
                    ));
                }
            }
            ms.push(value);
        }
        match ms.last() {
            None => Err(err(1, ParseErrorKind::NoTimestamps)),
            Some(0) => Err(err(last_line, ParseErrorKind::ZeroPeriod)),
            Some(&period_ms) => Ok(MahimahiTrace {
                ms: ms.into_boxed_slice(),
                period_ms,
                source: source_name.to_owned(),
            }),
        }
    }

    /// Builds a trace from millisecond offsets, with the same checks as a
    /// file (errors name line `index + 1`).
    pub fn from_millis(ms: &[u64], source_name: &str) -> Result<MahimahiTrace, TraceError> {
        let mut text = String::with_capacity(ms.len() * 6);
        for v in ms {
            text.push_str(&v.to_string());
            text.push('\n');
        }
        MahimahiTrace::parse(&text, source_name)
    }

    /// The opportunity offsets in milliseconds, non-decreasing.
    pub fn opportunities_ms(&self) -> &[u64] {
        &self.ms
    }

    /// Number of opportunities in one period.
    pub fn len(&self) -> usize {
        self.ms.len()
    }

    /// Always false: a valid trace has at least one opportunity.
    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// The repeat period: the last timestamp, as in mm-link.
    pub fn period(&self) -> Dur {
        Dur::from_millis(self.period_ms())
    }

    pub(crate) fn period_ms(&self) -> u64 {
        self.period_ms
    }

    /// The same schedule replayed from `offset` into it: what a replay of
    /// this trace shows from `offset` on, shifted to start at time 0 and
    /// repeating with the same period. Whole milliseconds (the trace's
    /// resolution); an offset beyond the period wraps around.
    pub fn starting_at(&self, offset: Dur) -> MahimahiTrace {
        let period = self.period_ms;
        let off = offset.as_nanos() / 1_000_000 % period;
        if off == 0 {
            return self.clone();
        }
        // An opportunity at `m` happens at m, m + P, m + 2P, ...; from the
        // offset on, the first of those at or after `off` is m - off (for
        // m >= off) or m + P - off (for m < off), which keeps every
        // opportunity of one period exactly once, within [0, P).
        let mut ms: Vec<u64> = self
            .ms
            .iter()
            .map(|&m| if m >= off { m - off } else { m + period - off })
            .collect();
        ms.sort_unstable();
        MahimahiTrace {
            ms: ms.into_boxed_slice(),
            period_ms: period,
            source: format!("{} from {} ms", self.source, off),
        }
    }

    /// The same link at `factor` times its capacity, with its time
    /// structure kept: every burst, gap and outage stays where it was, and
    /// each stretch carries `factor` times the opportunities it had. Below
    /// 1 the schedule is thinned evenly (an opportunity is kept each time
    /// the running sum of `factor` crosses a whole number), above 1 each
    /// opportunity is repeated. The period's last opportunity is always
    /// kept, so the twin repeats with the same period. `None` if `factor`
    /// is not a positive finite number.
    pub fn scaled(&self, factor: f64) -> Option<MahimahiTrace> {
        if !(factor.is_finite() && factor > 0.0) {
            return None;
        }
        // Walked from the end with the sum starting one short of a whole
        // number, so the last opportunity (the period) is the first kept.
        let mut sum = (1.0 - factor).max(0.0);
        let mut kept = 0u64;
        let mut ms = Vec::with_capacity((self.ms.len() as f64 * factor) as usize + 1);
        for &m in self.ms.iter().rev() {
            sum += factor;
            let now = sum.floor() as u64;
            for _ in kept..now {
                ms.push(m);
            }
            kept = now;
        }
        ms.reverse();
        Some(MahimahiTrace {
            ms: ms.into_boxed_slice(),
            period_ms: self.period_ms,
            source: format!("{} scaled by {factor}", self.source),
        })
    }

    /// The trace in Mahimahi's text format (parsing it back gives the same
    /// schedule).
    pub fn to_text(&self) -> String {
        let mut out = String::with_capacity(self.ms.len() * 7);
        for m in self.ms.iter() {
            out.push_str(&m.to_string());
            out.push('\n');
        }
        out
    }

    /// Where the trace came from (path or caller-given name).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Mean capacity over one period, bits per second.
    pub fn mean_rate_bps(&self) -> f64 {
        self.ms.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0
            / (self.period_ms() as f64 / 1000.0)
    }

    /// Opportunities whose time is at or before `t`, counting from time 0
    /// and repeating with the period, exactly as a replay would meet them.
    pub fn opportunities_until(&self, t: Time) -> u64 {
        let t_ms = t.as_nanos() / 1_000_000;
        let period = self.period_ms();
        let cycles = t_ms / period;
        let rest = t_ms % period;
        let in_last = self.ms.partition_point(|&m| m <= rest) as u64;
        cycles * self.ms.len() as u64 + in_last
    }
}

/// Strict on purpose (mm-link's own parser may be more lenient): digits
/// only, no sign, no spaces.
fn parse_ms(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MahimahiTrace, TraceError> {
        MahimahiTrace::parse(text, "t.trace")
    }

    #[test]
    fn parses_repeats_and_period() {
        let t = parse("0\n1\n1\n5\n").unwrap();
        assert_eq!(t.opportunities_ms(), &[0, 1, 1, 5]);
        assert_eq!(t.period(), Dur::from_millis(5));
        assert!(parse("3\r\n4").is_ok());
    }

    #[test]
    fn opportunities_until_matches_enumeration() {
        let t = parse("0\n1\n1\n5\n").unwrap();
        // Brute force: cycle c contributes c*5 + each offset.
        for end_ms in 0..40u64 {
            let mut n = 0;
            for c in 0..10 {
                for &m in t.opportunities_ms() {
                    if c * 5 + m <= end_ms {
                        n += 1;
                    }
                }
            }
            assert_eq!(
                t.opportunities_until(Time::from_millis(end_ms)),
                n,
                "{end_ms}"
            );
        }
    }

    #[test]
    fn a_trace_started_at_an_offset_replays_the_same_schedule_shifted() {
        let t = parse("0\n1\n1\n3\n5\n").unwrap();
        let until = |t: &MahimahiTrace, ms| t.opportunities_until(Time::from_millis(ms));
        for off in [1u64, 2, 3, 4, 7] {
            let s = t.starting_at(Dur::from_millis(off));
            assert_eq!((s.period(), s.len()), (t.period(), t.len()));
            // Opportunities in (off, off + x] of the original are those in
            // (0, x] of the shifted trace, for any x, across cycles; the
            // shifted trace's time 0 is the original's `off`.
            for x in 0..30u64 {
                let original = until(&t, off + x) - until(&t, off);
                let shifted = until(&s, x) - until(&s, 0);
                assert_eq!(original, shifted, "offset {off}, window {x}");
            }
        }
        assert_eq!(t.starting_at(Dur::from_millis(10)), t, "a whole period");
    }

    #[test]
    fn a_scaled_twin_keeps_the_time_structure_and_the_period() {
        // Bursts of 8 opportunities every 100 ms, a 300 ms gap, 2 s period.
        let mut ms = Vec::new();
        for burst in 0..17u64 {
            let at = if burst < 10 {
                burst * 100
            } else {
                burst * 100 + 300
            };
            ms.extend(std::iter::repeat_n(at, 8));
        }
        ms.push(2000);
        let t = MahimahiTrace::from_millis(&ms, "bursts").unwrap();
        for factor in [0.05, 0.25, 0.5, 1.0, 2.0, 3.7] {
            let s = t.scaled(factor).unwrap();
            assert_eq!(s.period(), t.period(), "{factor}");
            assert_eq!(*s.opportunities_ms().last().unwrap(), 2000);
            let want = t.len() as f64 * factor;
            assert!(
                (s.len() as f64 - want).abs() <= 1.0,
                "{factor}: {} vs {want}",
                s.len()
            );
            // Nothing moves into the gap, and every kept time was a time
            // of the original.
            for m in s.opportunities_ms() {
                assert!(t.opportunities_ms().contains(m), "{factor}: {m}");
            }
            // Over any 500 ms window the share is the factor's, within one
            // opportunity.
            for start in (0..1500).step_by(100) {
                let count = |tr: &MahimahiTrace| {
                    tr.opportunities_ms()
                        .iter()
                        .filter(|&&m| m >= start && m < start + 500)
                        .count() as f64
                };
                assert!(
                    (count(&s) - factor * count(&t)).abs() <= 1.0 + 1e-9,
                    "{factor} at {start}"
                );
            }
            let text = s.to_text();
            assert_eq!(
                MahimahiTrace::parse(&text, "again")
                    .unwrap()
                    .opportunities_ms(),
                s.opportunities_ms()
            );
        }
        assert_eq!(
            t.scaled(1.0).unwrap().opportunities_ms(),
            t.opportunities_ms()
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(t.scaled(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn errors_name_line_and_expectation() {
        let e = parse("").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.trace:1: expected at least one timestamp in milliseconds, found none"
        );
        let e = parse("1\n2\nx3\n").unwrap_err();
        assert_eq!(e.line(), Some(3));
        assert!(
            e.to_string()
                .contains("expected a non-negative integer number of milliseconds, found \"x3\""),
            "{e}"
        );
        let e = parse("1\n5\n4\n").unwrap_err();
        assert_eq!(e.line(), Some(3));
        assert!(matches!(
            e.kind(),
            Some(ParseErrorKind::Decreasing {
                previous: 5,
                found: 4
            })
        ));
        let e = parse("0\n0\n").unwrap_err();
        assert_eq!(e.line(), Some(2));
        assert_eq!(e.kind(), Some(&ParseErrorKind::ZeroPeriod));
        let e = parse("1\n\n2\n").unwrap_err();
        assert_eq!(e.line(), Some(2));
        assert_eq!(e.kind(), Some(&ParseErrorKind::EmptyLine));
        for bad in ["-1", "1.5", " 1", "+1", "1e3", "99999999999999999999999"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.line(), Some(1), "{bad}");
            assert!(
                matches!(e.kind(), Some(ParseErrorKind::NotAnInteger { .. })),
                "{bad}: {e}"
            );
        }
        let e = parse(&format!("{}\n", MAX_MS + 1)).unwrap_err();
        assert!(matches!(e.kind(), Some(ParseErrorKind::TooLarge { .. })));
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let e = MahimahiTrace::from_file("/nonexistent/convoy/trace").unwrap_err();
        assert!(matches!(e, TraceError::Io { .. }));
        assert!(e
            .to_string()
            .starts_with("/nonexistent/convoy/trace: cannot read"));
    }
}
