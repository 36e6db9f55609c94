//! Propagation: one-way delay, jitter, and the packets in flight.
//!
//! The delay is taken when a packet leaves the bottleneck (for a time-series
//! trace: the row in force at that instant). Jitter is uniform in
//! `[0, max]` and integer-only, so it replays identically everywhere. By
//! default a packet never overtakes the one sent before it (it waits behind
//! it, as on a FIFO radio bearer); reordering happens only when asked.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::error::ConfigError;
use crate::queue::PacketMeta;
use crate::rng::{Rng, STREAM_JITTER};
use crate::time::{Dur, Time};
use crate::trace::series::SeriesTrace;

/// Where the base one-way delay comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DelaySource {
    Fixed(Dur),
    /// The `delay_<unit>` column of the link's time-series trace.
    Series,
}

impl Default for DelaySource {
    fn default() -> DelaySource {
        DelaySource::Fixed(Dur::ZERO)
    }
}

/// Delay settings of one direction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayConfig {
    pub base: DelaySource,
    /// Largest extra delay; each packet gets a uniform draw in `[0, jitter]`.
    /// Without `reorder`, a packet never leaves before the one ahead of it,
    /// so when packets are spaced closer than the jitter the delays they see
    /// bunch toward the top of the range (each is the running maximum), as
    /// on a real link whose jitter comes from a FIFO below the IP layer.
    pub jitter: Dur,
    /// Let packets overtake each other when their delays allow it.
    pub reorder: bool,
}

pub(crate) struct Delayer {
    fixed: Dur,
    series: Option<Arc<SeriesTrace>>,
    hint: usize,
    jitter: u64,
    rng: Rng,
    reorder: bool,
    last_at: Time,
}

impl Delayer {
    pub(crate) fn new(
        config: &DelayConfig,
        series: Option<&Arc<SeriesTrace>>,
        seed: u64,
    ) -> Result<Delayer, ConfigError> {
        let (fixed, series) = match config.base {
            DelaySource::Fixed(d) => (d, None),
            DelaySource::Series => (
                Dur::ZERO,
                Some(
                    series
                        .cloned()
                        .ok_or(ConfigError::NoSeries { what: "delay" })?,
                ),
            ),
        };
        Ok(Delayer {
            fixed,
            series,
            hint: 0,
            jitter: config.jitter.as_nanos(),
            rng: Rng::new(seed, STREAM_JITTER),
            reorder: config.reorder,
            last_at: Time::ZERO,
        })
    }

    pub(crate) fn reorders(&self) -> bool {
        self.reorder
    }

    /// When a packet that left the bottleneck at `departed` arrives.
    #[inline]
    pub(crate) fn arrival(&mut self, departed: Time) -> Time {
        let base = match &self.series {
            None => self.fixed,
            Some(trace) => trace.rows()[trace.locate(departed, &mut self.hint).0].delay,
        };
        let mut at = departed + base;
        if self.jitter > 0 {
            at += Dur::from_nanos(self.rng.uniform_inclusive(self.jitter));
        }
        if !self.reorder {
            // A shorter delay (less jitter, or a series row with a smaller
            // delay) must not let a packet pass the one ahead of it.
            at = at.max(self.last_at);
            self.last_at = at;
        }
        at
    }
}

/// A packet between the bottleneck and the far end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct InFlight {
    pub(crate) at: Time,
    /// Departure order: breaks ties so equal arrival times keep send order.
    pub(crate) seq: u64,
    pub(crate) departed: Time,
    pub(crate) meta: MetaOrd,
}

/// `PacketMeta` with a total order (by id), only so `InFlight` can derive
/// `Ord`; `at` and `seq` decide first and are unique together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MetaOrd(pub(crate) PacketMeta);

impl PartialOrd for MetaOrd {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for MetaOrd {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.id.cmp(&other.0.id)
    }
}

/// Packets in flight: a FIFO when order is kept (arrival times are then
/// non-decreasing), a min-heap when reordering is allowed.
pub(crate) enum Pipe {
    Fifo(VecDeque<InFlight>),
    Heap(BinaryHeap<Reverse<InFlight>>),
}

impl Pipe {
    pub(crate) fn new(reorder: bool) -> Pipe {
        if reorder {
            Pipe::Heap(BinaryHeap::new())
        } else {
            Pipe::Fifo(VecDeque::new())
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, p: InFlight) {
        match self {
            Pipe::Fifo(q) => q.push_back(p),
            Pipe::Heap(h) => h.push(Reverse(p)),
        }
    }

    #[inline]
    pub(crate) fn next_at(&self) -> Option<Time> {
        match self {
            Pipe::Fifo(q) => q.front().map(|p| p.at),
            Pipe::Heap(h) => h.peek().map(|p| p.0.at),
        }
    }

    #[inline]
    pub(crate) fn pop_due(&mut self, now: Time) -> Option<InFlight> {
        match self {
            Pipe::Fifo(q) => {
                if q.front()?.at <= now {
                    q.pop_front()
                } else {
                    None
                }
            }
            Pipe::Heap(h) => {
                if h.peek()?.0.at <= now {
                    h.pop().map(|r| r.0)
                } else {
                    None
                }
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Pipe::Fifo(q) => q.len(),
            Pipe::Heap(h) => h.len(),
        }
    }
}
