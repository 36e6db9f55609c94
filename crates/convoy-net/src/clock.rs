//! The driver's one clock, and the conversion of kernel receive timestamps
//! into it.
//!
//! convoy-proto takes time as a `Duration` since an arbitrary epoch. We use
//! `Instant` (CLOCK_MONOTONIC) from the driver's start. The kernel stamps
//! received datagrams (SO_TIMESTAMPNS) with CLOCK_REALTIME, so we keep the
//! offset between the two clocks, re-sampled every second because NTP may
//! slew the real-time clock.

use std::time::{Duration, Instant};

/// How often the real-time/monotonic offset is re-measured.
const RESAMPLE_EVERY: Duration = Duration::from_secs(1);

pub struct Clock {
    epoch: Instant,
    /// CLOCK_REALTIME − (CLOCK_MONOTONIC − epoch), in nanoseconds.
    realtime_offset_ns: i128,
    sampled_at: Duration,
}

fn realtime_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    pub fn new() -> Clock {
        let mut c = Clock {
            epoch: Instant::now(),
            realtime_offset_ns: 0,
            sampled_at: Duration::ZERO,
        };
        c.resample();
        c
    }

    /// Time since the driver started: the `now` every protocol call gets.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Re-measures the offset if a second has passed. The real-time clock is
    /// read between two monotonic reads and the midpoint kept, so the error
    /// is at most half the (sub-microsecond) read time.
    pub fn maybe_resample(&mut self, now: Duration) {
        if now >= self.sampled_at + RESAMPLE_EVERY {
            self.resample();
        }
    }

    fn resample(&mut self) {
        let before = self.now();
        let rt = realtime_ns();
        let after = self.now();
        let mid = (before.as_nanos() + after.as_nanos()) / 2;
        self.realtime_offset_ns = rt - mid as i128;
        self.sampled_at = after;
    }

    /// A kernel CLOCK_REALTIME timestamp on our monotonic time line
    /// (`None` if it falls before the epoch).
    pub fn from_realtime(&self, sec: i64, nsec: i64) -> Option<Duration> {
        let rt = i128::from(sec) * 1_000_000_000 + i128::from(nsec);
        let mono = rt - self.realtime_offset_ns;
        u64::try_from(mono).ok().map(Duration::from_nanos)
    }
}
