//! Availability: when the link is up, and what happens to packets while it
//! is down (coverage gaps, handovers).

use std::sync::Arc;

use crate::config::LinkConfig;
use crate::error::ConfigError;
use crate::time::Time;
use crate::trace::series::SeriesTrace;

/// Where the up/down schedule comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Availability {
    /// Never down.
    #[default]
    AlwaysUp,
    /// Down during each `[start, end)`; any order, overlaps merge.
    Down(Vec<(Time, Time)>),
    /// The `up` column of the link's time-series trace.
    Series,
}

/// What a down link does with packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutagePolicy {
    /// Packets wait in the queue (subject to its limit) and transmission
    /// resumes when the link comes back, as a radio bearer that buffers
    /// through a handover.
    #[default]
    Hold,
    /// Packets arriving while down are dropped, and when the link goes down
    /// everything queued or being transmitted is dropped, as when a bearer
    /// is torn down.
    Drop,
}

/// The schedule in a form quick to query.
#[derive(Clone, Debug)]
pub(crate) enum Schedule {
    Up,
    Intervals(Box<[(Time, Time)]>),
    Series(Arc<SeriesTrace>),
}

impl Schedule {
    pub(crate) fn new(
        availability: &Availability,
        series: Option<&Arc<SeriesTrace>>,
    ) -> Result<Schedule, ConfigError> {
        Ok(match availability {
            Availability::AlwaysUp => Schedule::Up,
            Availability::Down(list) => {
                let mut list = list.clone();
                if let Some(&(s, e)) = list.iter().find(|(s, e)| e <= s) {
                    return Err(ConfigError::EmptyDownInterval {
                        start_ns: s.as_nanos(),
                        end_ns: e.as_nanos(),
                    });
                }
                list.sort_unstable();
                let mut merged: Vec<(Time, Time)> = Vec::with_capacity(list.len());
                for (s, e) in list {
                    match merged.last_mut() {
                        Some(last) if s <= last.1 => last.1 = last.1.max(e),
                        _ => merged.push((s, e)),
                    }
                }
                if merged.is_empty() {
                    Schedule::Up
                } else {
                    Schedule::Intervals(merged.into_boxed_slice())
                }
            }
            Availability::Series => {
                Schedule::Series(series.cloned().ok_or(ConfigError::NoSeries {
                    what: "availability",
                })?)
            }
        })
    }

    pub(crate) fn is_always_up(&self) -> bool {
        matches!(self, Schedule::Up)
    }

    /// Whether the link is up at `t`, and until when that row or interval
    /// holds (the state may be the same after it).
    #[inline]
    pub(crate) fn state_at(&self, t: Time, hint: &mut usize) -> (bool, Time) {
        match self {
            Schedule::Up => (true, Time::MAX),
            Schedule::Intervals(list) => {
                // First interval not yet over at t.
                let i = if *hint < list.len()
                    && list[*hint].1 > t
                    && (*hint == 0 || list[*hint - 1].1 <= t)
                {
                    *hint
                } else {
                    list.partition_point(|iv| iv.1 <= t)
                };
                *hint = i;
                match list.get(i) {
                    None => (true, Time::MAX),
                    Some(&(s, e)) if s <= t => (false, e),
                    Some(&(s, _)) => (true, s),
                }
            }
            Schedule::Series(trace) => {
                let (i, end) = trace.locate(t, hint);
                (trace.rows()[i].up, end)
            }
        }
    }

    #[inline]
    pub(crate) fn is_up(&self, t: Time, hint: &mut usize) -> bool {
        self.state_at(t, hint).0
    }

    /// The first time after `t` at which the link goes down, if the link is
    /// up at `t`; `None` if it never goes down again (or is down at `t`).
    pub(crate) fn next_down(&self, t: Time, hint: &mut usize) -> Option<Time> {
        match self.next_change(t, hint) {
            (true, next) => next,
            (false, _) => None,
        }
    }

    /// Whether the link is up at `t`, and the first time after `t` at which
    /// that changes (`None`: never).
    pub(crate) fn next_change(&self, t: Time, hint: &mut usize) -> (bool, Option<Time>) {
        let (up, mut until) = self.state_at(t, hint);
        // A series may have many rows in the same state in a row; one period
        // at most needs walking, after which the pattern repeats (or holds
        // forever). Merged intervals alternate, so one step is enough there.
        let limit = match self {
            Schedule::Series(trace) => trace.rows().len() + 1,
            _ => 1,
        };
        for _ in 0..limit {
            if until == Time::MAX {
                return (up, None);
            }
            let (now_up, next) = self.state_at(until, hint);
            if now_up != up {
                return (up, Some(until));
            }
            until = next;
        }
        (up, None)
    }
}

/// A direction's up/down schedule as a driver sees it, for acting at the
/// edges of its outages (the emulator takes an interface down for the
/// length of each one). Queries are cheapest moving forward in time.
#[derive(Clone, Debug)]
pub struct AvailabilityTimeline {
    schedule: Schedule,
    hint: usize,
}

impl AvailabilityTimeline {
    /// The schedule `config` gives its direction: its `outage=` intervals,
    /// or the `up` column of its time-series trace.
    pub fn new(config: &LinkConfig) -> Result<AvailabilityTimeline, ConfigError> {
        Ok(AvailabilityTimeline {
            schedule: Schedule::new(&config.availability, config.series.as_ref())?,
            hint: 0,
        })
    }

    /// Never down.
    pub fn is_always_up(&self) -> bool {
        self.schedule.is_always_up()
    }

    /// Whether the link is up at `t`.
    pub fn is_up(&mut self, t: Time) -> bool {
        self.schedule.is_up(t, &mut self.hint)
    }

    /// Whether the link is up at `t`, and the first time after `t` at which
    /// it is not in that state any more (`None`: it stays so forever).
    pub fn next_change(&mut self, t: Time) -> (bool, Option<Time>) {
        self.schedule.next_change(t, &mut self.hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Dur;

    fn ms(v: u64) -> Time {
        Time::from_millis(v)
    }

    #[test]
    fn intervals_merge_and_query() {
        let s = Schedule::new(
            &Availability::Down(vec![(ms(50), ms(60)), (ms(10), ms(20)), (ms(15), ms(30))]),
            None,
        )
        .unwrap();
        let mut h = 0;
        assert_eq!(s.state_at(ms(0), &mut h), (true, ms(10)));
        assert_eq!(s.state_at(ms(10), &mut h), (false, ms(30)));
        assert_eq!(s.state_at(ms(30), &mut h), (true, ms(50)));
        assert_eq!(s.state_at(ms(59), &mut h), (false, ms(60)));
        assert_eq!(s.state_at(ms(5), &mut h), (true, ms(10)));
        assert_eq!(s.state_at(ms(60), &mut h), (true, Time::MAX));
        assert_eq!(s.next_down(ms(31), &mut h), Some(ms(50)));
        assert_eq!(s.next_down(ms(61), &mut h), None);
        assert!(Schedule::new(&Availability::Down(vec![(ms(5), ms(5))]), None).is_err());
        assert!(Schedule::new(&Availability::Series, None).is_err());
    }

    #[test]
    fn series_next_down_skips_up_rows() {
        let t = SeriesTrace::parse("start_ms,up\n0,1\n10,1\n20,0\n30,1\n", "s").unwrap();
        let t = Arc::new(t.with_repeat(Dur::from_millis(40)).unwrap());
        let s = Schedule::new(&Availability::Series, Some(&t)).unwrap();
        let mut h = 0;
        assert_eq!(s.next_down(ms(0), &mut h), Some(ms(20)));
        assert_eq!(s.next_down(ms(35), &mut h), Some(ms(60)));
        assert_eq!(s.next_down(ms(25), &mut h), None);
        let always = Arc::new(SeriesTrace::parse("start_ms,up\n0,1\n10,1\n", "s").unwrap());
        let s = Schedule::new(&Availability::Series, Some(&always)).unwrap();
        assert_eq!(s.next_down(ms(3), &mut h), None);
    }

    #[test]
    fn timeline_reports_every_edge() {
        let c = LinkConfig::constant(1_000_000)
            .with_outages(vec![(ms(10), ms(20)), (ms(15), ms(30))], OutagePolicy::Drop);
        let mut tl = AvailabilityTimeline::new(&c).unwrap();
        assert!(!tl.is_always_up());
        assert_eq!(tl.next_change(ms(0)), (true, Some(ms(10))));
        assert_eq!(tl.next_change(ms(10)), (false, Some(ms(30))));
        assert_eq!(tl.next_change(ms(29)), (false, Some(ms(30))));
        assert_eq!(tl.next_change(ms(30)), (true, None));
        // Backwards after forwards still answers right (the hint is only a
        // hint).
        assert!(!tl.is_up(ms(12)));
        assert!(tl.is_up(ms(9)));

        // A series: runs of rows in the same state are one state, and a
        // repeating trace's edges come round every period.
        let t = SeriesTrace::parse("start_ms,up\n0,1\n10,1\n20,0\n25,0\n30,1\n", "s").unwrap();
        let t = Arc::new(t.with_repeat(Dur::from_millis(40)).unwrap());
        let mut tl = AvailabilityTimeline::new(&LinkConfig::series(t)).unwrap();
        assert_eq!(tl.next_change(ms(0)), (true, Some(ms(20))));
        assert_eq!(tl.next_change(ms(20)), (false, Some(ms(30))));
        assert_eq!(tl.next_change(ms(30)), (true, Some(ms(60))));
        assert_eq!(tl.next_change(ms(61)), (false, Some(ms(70))));

        // A trace that is up throughout, and a link without outages.
        let up = Arc::new(SeriesTrace::parse("start_ms,up\n0,1\n10,1\n", "s").unwrap());
        let mut tl = AvailabilityTimeline::new(&LinkConfig::series(up)).unwrap();
        assert_eq!(tl.next_change(ms(3)), (true, None));
        let mut tl = AvailabilityTimeline::new(&LinkConfig::constant(1)).unwrap();
        assert!(tl.is_always_up());
        assert_eq!(tl.next_change(ms(3)), (true, None));
    }
}
