//! Capacity processes: how fast the bottleneck drains.
//!
//! Two kinds of transmitter share the link's queue logic:
//!
//! * **Fluid** (constant rate, or the rate column of a time-series trace):
//!   the head packet is transmitted at the rate in force, which may change
//!   (and drop to zero while the link is down) in the middle of a packet.
//!   Work is counted in units of bit·10⁹, so a rate of `r` bit/s does exactly
//!   `r` units per nanosecond and nothing is ever rounded away: a packet
//!   finishes at the first whole nanosecond at which its bits are done, and
//!   the fraction of that nanosecond left over is credited to the packet
//!   that follows back-to-back. N back-to-back packets therefore finish at
//!   `ceil(total bits / rate)`, with no drift however long the run.
//! * **Opportunities** (Mahimahi traces), as mm-link's `LinkQueue`: each
//!   trace line is one chance to send 1500 bytes; bytes are taken from the
//!   head of the queue, a packet leaves when its last byte is sent (possibly
//!   several opportunities after its first), several small packets may share
//!   one opportunity, and whatever the queue cannot fill is wasted.

use std::sync::Arc;

use crate::availability::Schedule;
use crate::error::ConfigError;
use crate::queue::PacketMeta;
use crate::time::{Dur, Time};
use crate::trace::mahimahi::MahimahiTrace;
use crate::trace::series::SeriesTrace;

/// Where a link's capacity comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// A fixed rate in bit/s (must be > 0).
    Constant { bps: u64 },
    /// A Mahimahi packet-delivery trace, replayed from time 0 and repeated.
    Mahimahi(Arc<MahimahiTrace>),
    /// The `rate_<unit>` column of the link's time-series trace.
    Series,
}

const WORK_PER_BIT: u64 = 1_000_000_000;

#[derive(Clone, Debug)]
enum Rate {
    Constant(u64),
    Series(Arc<SeriesTrace>),
}

/// A rate-driven transmitter.
#[derive(Clone, Debug)]
pub(crate) struct Fluid {
    rate: Rate,
    rate_hint: usize,
    avail_hint: usize,
    /// Work done beyond the last departure, usable only by a packet that
    /// starts at that very instant.
    credit: u64,
    /// True when the schedule can never serve another byte (a repeating
    /// series without any up interval that has capacity).
    never: bool,
    /// Fast path: constant rate and never down.
    simple: bool,
    pub(crate) in_service: Option<(PacketMeta, Time)>,
}

impl Fluid {
    pub(crate) fn constant(bps: u64, schedule: &Schedule) -> Result<Fluid, ConfigError> {
        if bps == 0 {
            return Err(ConfigError::ZeroRate);
        }
        let never = match schedule {
            Schedule::Series(t) => t.repeat().is_some() && !t.rows().iter().any(|r| r.up),
            _ => false,
        };
        Ok(Fluid::with(
            Rate::Constant(bps),
            never,
            schedule.is_always_up(),
        ))
    }

    pub(crate) fn series(
        trace: Arc<SeriesTrace>,
        schedule: &Schedule,
    ) -> Result<Fluid, ConfigError> {
        if !trace.has_rate() {
            return Err(ConfigError::SeriesWithoutRate);
        }
        let up_matters = matches!(schedule, Schedule::Series(_));
        let never = trace.repeat().is_some()
            && !trace
                .rows()
                .iter()
                .any(|r| r.rate_bps > 0 && (r.up || !up_matters));
        Ok(Fluid::with(Rate::Series(trace), never, false))
    }

    fn with(rate: Rate, never: bool, simple: bool) -> Fluid {
        Fluid {
            rate,
            rate_hint: 0,
            avail_hint: 0,
            credit: 0,
            never,
            simple,
            in_service: None,
        }
    }

    /// Forgets the credit: the transmitter went idle.
    pub(crate) fn idle(&mut self) {
        self.credit = 0;
    }

    /// When a packet of `len` bytes starting at `start` is fully sent, or
    /// `Time::MAX` if never. `back_to_back`: it starts the instant the
    /// previous packet finished, so that packet's leftover credit applies.
    #[inline]
    pub(crate) fn finish(
        &mut self,
        start: Time,
        len: u32,
        back_to_back: bool,
        schedule: &Schedule,
    ) -> Time {
        let credit = if back_to_back { self.credit } else { 0 };
        self.credit = 0;
        if self.simple {
            if let Rate::Constant(r) = self.rate {
                if let Some(t) = self.finish_constant(start, len, credit, r) {
                    return t;
                }
            }
        }
        self.finish_general(start, len, credit, schedule)
    }

    #[inline]
    fn finish_constant(&mut self, start: Time, len: u32, credit: u64, r: u64) -> Option<Time> {
        let need = u64::from(len)
            .checked_mul(8 * WORK_PER_BIT)?
            .saturating_sub(credit);
        let dt = need.div_ceil(r);
        let done = dt.checked_mul(r)?;
        self.credit = done - need;
        Some(start + Dur::from_nanos(dt))
    }

    fn finish_general(&mut self, start: Time, len: u32, credit: u64, schedule: &Schedule) -> Time {
        if self.never {
            return Time::MAX;
        }
        let mut need =
            (u128::from(len) * u128::from(8 * WORK_PER_BIT)).saturating_sub(u128::from(credit));
        let mut t = start;
        loop {
            let (up, up_end) = schedule.state_at(t, &mut self.avail_hint);
            if !up {
                // Nothing is sent while down, whatever the rate rows say.
                if up_end == Time::MAX {
                    return Time::MAX;
                }
                t = up_end;
                continue;
            }
            let (rate, rate_end) = match &self.rate {
                Rate::Constant(r) => (*r, Time::MAX),
                Rate::Series(trace) => {
                    let (i, end) = trace.locate(t, &mut self.rate_hint);
                    (trace.rows()[i].rate_bps, end)
                }
            };
            let end = up_end.min(rate_end);
            if rate > 0 {
                let r = u128::from(rate);
                let dt = need.div_ceil(r);
                let span = u128::from((end - t).as_nanos());
                if end == Time::MAX || dt <= span {
                    self.credit = (dt * r - need) as u64;
                    return match u64::try_from(dt) {
                        Ok(dt) => t + Dur::from_nanos(dt),
                        Err(_) => Time::MAX,
                    };
                }
                need -= span * r;
            } else if end == Time::MAX {
                return Time::MAX;
            }
            t = end;
        }
    }
}

/// A Mahimahi opportunity-driven transmitter.
#[derive(Clone, Debug)]
pub(crate) struct Opportunities {
    trace: Arc<MahimahiTrace>,
    /// Index of the next opportunity in the trace.
    idx: usize,
    /// Start of the current cycle, in ms since the epoch.
    base_ms: u64,
    /// The packet partly sent and the bytes it still needs.
    pub(crate) in_transit: Option<(PacketMeta, u32)>,
    /// The link is down for good: no opportunity will ever come.
    stalled: bool,
}

impl Opportunities {
    pub(crate) fn new(trace: Arc<MahimahiTrace>) -> Opportunities {
        Opportunities {
            trace,
            idx: 0,
            base_ms: 0,
            in_transit: None,
            stalled: false,
        }
    }

    /// Time of the next opportunity.
    #[inline]
    pub(crate) fn next_time(&self) -> Time {
        if self.stalled {
            return Time::MAX;
        }
        let ms = self.trace.opportunities_ms()[self.idx];
        Time::from_millis(self.base_ms.saturating_add(ms))
    }

    /// Uses up the next opportunity. As in mm-link, passing the last line
    /// starts a new cycle one period (the last timestamp) later.
    #[inline]
    pub(crate) fn consume(&mut self) {
        self.idx += 1;
        if self.idx == self.trace.len() {
            self.idx = 0;
            self.base_ms = self.base_ms.saturating_add(self.trace.period_ms());
        }
    }

    /// No opportunity will ever be usable again.
    pub(crate) fn stall(&mut self) {
        self.stalled = true;
    }

    /// Wastes every opportunity at or before `now`, in O(log n): while the
    /// queue is empty they would be wasted one by one anyway.
    pub(crate) fn skip_through(&mut self, now: Time) {
        if self.next_time() > now {
            return;
        }
        let now_ms = now.as_nanos() / 1_000_000;
        let period = self.trace.period_ms();
        let rel = now_ms.saturating_sub(self.base_ms);
        self.base_ms = self.base_ms.saturating_add(rel / period * period);
        let rel = rel % period;
        self.idx = self.trace.opportunities_ms().partition_point(|&m| m <= rel);
        if self.idx == self.trace.len() {
            self.idx = 0;
            self.base_ms = self.base_ms.saturating_add(period);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::availability::Availability;

    fn meta() -> PacketMeta {
        PacketMeta {
            id: 0,
            len: 0,
            enqueued_at: Time::ZERO,
            tag: 0,
            flow: 0,
        }
    }

    #[test]
    fn constant_rate_has_no_drift() {
        let up = Schedule::Up;
        let mut f = Fluid::constant(3_000_000, &up).unwrap(); // 3 Mbit/s
                                                              // 1000 bytes = 8000 bits = 2.666… ms; a run of 3 is exactly 8 ms.
        let t1 = f.finish(Time::ZERO, 1000, false, &up);
        assert_eq!(t1, Time::from_nanos(2_666_667));
        let t2 = f.finish(t1, 1000, true, &up);
        assert_eq!(t2, Time::from_nanos(5_333_334));
        let t3 = f.finish(t2, 1000, true, &up);
        assert_eq!(t3, Time::from_millis(8));
        // After idling, no credit.
        let t4 = f.finish(Time::from_millis(20), 1000, false, &up);
        assert_eq!(t4, Time::from_nanos(22_666_667));
        let _ = meta();
    }

    #[test]
    fn general_path_pauses_while_down_and_follows_rate_changes() {
        let down = Schedule::new(
            &Availability::Down(vec![(Time::from_millis(1), Time::from_millis(11))]),
            None,
        )
        .unwrap();
        let mut f = Fluid::constant(8_000_000, &down).unwrap(); // 1 byte/us
                                                                // 2000 bytes: 1000 before the outage, 1000 after it.
        assert_eq!(
            f.finish(Time::ZERO, 2000, false, &down),
            Time::from_millis(12)
        );
        let series =
            Arc::new(SeriesTrace::parse("start_ms,rate_kbps\n0,8000\n1,16000\n", "s").unwrap());
        let mut f = Fluid::series(series, &Schedule::Up).unwrap();
        // 1000 bytes in the first ms, 1000 more at 2 bytes/us = 0.5 ms.
        assert_eq!(
            f.finish(Time::ZERO, 2000, false, &Schedule::Up),
            Time::from_nanos(1_500_000)
        );
    }

    #[test]
    fn never_serving_schedule_does_not_loop() {
        let t = SeriesTrace::parse("start_ms,rate_kbps,up\n0,0,1\n5,100,0\n", "s")
            .unwrap()
            .with_repeat(Dur::from_millis(10))
            .unwrap();
        let t = Arc::new(t);
        let sched = Schedule::new(&Availability::Series, Some(&t)).unwrap();
        let mut f = Fluid::series(t, &sched).unwrap();
        assert_eq!(f.finish(Time::ZERO, 100, false, &sched), Time::MAX);
        let hold_zero = Arc::new(SeriesTrace::parse("start_ms,rate_kbps\n0,0\n", "s").unwrap());
        let mut f = Fluid::series(hold_zero, &Schedule::Up).unwrap();
        assert_eq!(f.finish(Time::ZERO, 100, false, &Schedule::Up), Time::MAX);
    }

    #[test]
    fn opportunities_wrap_like_mm_link() {
        let trace = Arc::new(MahimahiTrace::parse("0\n2\n2\n5\n", "t").unwrap());
        let mut o = Opportunities::new(trace);
        let mut times = Vec::new();
        for _ in 0..9 {
            times.push(o.next_time().as_nanos() / 1_000_000);
            o.consume();
        }
        assert_eq!(times, [0, 2, 2, 5, 5, 7, 7, 10, 10]);
        let mut o2 = Opportunities::new(o.trace.clone());
        o2.skip_through(Time::from_nanos(7_500_000));
        assert_eq!(o2.next_time(), Time::from_millis(10));
        o2.skip_through(Time::from_millis(10));
        assert_eq!(o2.next_time(), Time::from_millis(12));
        o2.skip_through(Time::from_millis(1000));
        assert_eq!(o2.next_time(), Time::from_millis(1002));
    }
}
