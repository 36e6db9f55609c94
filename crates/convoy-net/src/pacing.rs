//! When the driver spins instead of sleeping.
//!
//! A `ppoll` with the thread's timer slack at 1 ns (the default is 50 µs)
//! wakes a few to a few tens of microseconds late on a VM. That matters
//! only when send times are dense: at 1 Gbit/s a 1472-byte datagram is due
//! every 12 µs, at 20 Mbit/s every 590 µs, where 20 µs is noise. So the
//! driver spins only the last [`Spin::margin_for`] before a deadline that
//! follows a send by less than `dense_gap`, and the margin is what ppoll
//! has recently overslept, not a fixed 200 µs. Everything else sleeps
//! (docs/NET.md has the measurements behind both numbers).

use std::time::Duration;

/// The lateness assumed before any ppoll has been measured.
const INITIAL_OVERSLEEP: Duration = Duration::from_micros(20);

#[derive(Clone, Debug)]
pub struct Spin {
    /// The longest spin (0: never spin).
    max: Duration,
    /// Spin only for deadlines this close after the last send.
    dense_gap: Duration,
    /// Moving average (1/8) of how late timed-out ppolls returned.
    oversleep: Duration,
}

impl Spin {
    pub fn new(max: Duration, dense_gap: Duration) -> Spin {
        Spin {
            max,
            dense_gap,
            oversleep: INITIAL_OVERSLEEP,
        }
    }

    /// How much of the wait for `deadline` to spin, given when the driver
    /// last sent something.
    pub fn margin_for(&self, deadline: Duration, last_send: Option<Duration>) -> Duration {
        match last_send {
            Some(t) if deadline.saturating_sub(t) <= self.dense_gap => {
                (self.oversleep + self.oversleep / 2).min(self.max)
            }
            _ => Duration::ZERO,
        }
    }

    /// Records how late a timed-out ppoll returned.
    pub fn observe_oversleep(&mut self, late: Duration) {
        // A descheduled thread (hundreds of µs) says nothing about ppoll.
        let late = late.min(Duration::from_micros(200));
        self.oversleep = (self.oversleep * 7 + late) / 8;
    }

    pub fn oversleep(&self) -> Duration {
        self.oversleep
    }
}

/// Asks the kernel to end this thread's timed sleeps on time: the default
/// timer slack lets it add up to 50 µs to coalesce wake-ups.
pub fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer; no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn spins_only_inside_dense_schedules_and_never_past_the_cap() {
        let mut s = Spin::new(50 * US, 1000 * US);
        assert_eq!(s.margin_for(5000 * US, None), Duration::ZERO);
        assert_eq!(s.margin_for(5000 * US, Some(1000 * US)), Duration::ZERO);
        assert_eq!(s.margin_for(1500 * US, Some(1000 * US)), 30 * US);
        for _ in 0..100 {
            s.observe_oversleep(4 * US);
        }
        assert!(s.margin_for(1500 * US, Some(1000 * US)) <= 7 * US);
        for _ in 0..100 {
            s.observe_oversleep(10_000 * US);
        }
        assert_eq!(s.margin_for(1500 * US, Some(1000 * US)), 50 * US);
        assert_eq!(
            Spin::new(Duration::ZERO, 1000 * US).margin_for(1500 * US, Some(1000 * US)),
            Duration::ZERO
        );
    }
}
