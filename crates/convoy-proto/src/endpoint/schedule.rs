//! Which connections need the endpoint's attention, so a server with
//! thousands of connections does work per event, not per connection.
//!
//! Every connection is either *active* (something may have changed since
//! its deadline was computed: a packet arrived, a timer fired, the
//! application touched it; it is polled for datagrams until it has none)
//! or *parked* with its deadline in a sorted set. A connection's
//! `poll_timeout` depends only on its state, never on the clock, so a
//! parked connection's deadline stays right until something activates it.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub(crate) struct Schedule {
    timers: BTreeSet<(Duration, u64)>,
    active: VecDeque<u64>,
}

/// A connection's place in the schedule, kept beside it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Place {
    deadline: Option<Duration>,
    active: bool,
}

impl Schedule {
    /// Marks `h` active (idempotent).
    pub fn activate(&mut self, h: u64, place: &mut Place) {
        if let Some(d) = place.deadline.take() {
            self.timers.remove(&(d, h));
        }
        if !place.active {
            place.active = true;
            self.active.push_back(h);
        }
    }

    /// Parks `h` until `deadline` (`None`: only events wake it).
    pub fn park(&mut self, h: u64, place: &mut Place, deadline: Option<Duration>) {
        place.active = false;
        if let Some(d) = place.deadline.take() {
            self.timers.remove(&(d, h));
        }
        if let Some(d) = deadline {
            self.timers.insert((d, h));
            place.deadline = Some(d);
        }
    }

    /// Forgets `h` (removed connection). Its entry in the active queue is
    /// skipped when reached.
    pub fn forget(&mut self, h: u64, place: &Place) {
        if let Some(d) = place.deadline {
            self.timers.remove(&(d, h));
        }
    }

    /// The next active connection to poll (it stays listed until parked:
    /// the caller pushes it back with [`Schedule::requeue`]).
    pub fn next_active(&mut self) -> Option<u64> {
        self.active.pop_front()
    }

    /// Puts a polled connection at the back, so the others get a turn.
    pub fn requeue(&mut self, h: u64) {
        self.active.push_back(h);
    }

    pub fn active(&self) -> impl Iterator<Item = &u64> {
        self.active.iter()
    }

    /// The earliest parked deadline.
    pub fn first_deadline(&self) -> Option<Duration> {
        self.timers.first().map(|&(d, _)| d)
    }

    /// Takes the first parked connection due at `now`, if any; the caller
    /// then activates it (its place still names the popped deadline, which
    /// `activate` finds gone, as it should).
    pub fn pop_due(&mut self, now: Duration) -> Option<u64> {
        let &(d, h) = self.timers.first()?;
        if d > now {
            return None;
        }
        self.timers.pop_first();
        Some(h)
    }
}
