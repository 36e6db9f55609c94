//! Integer virtual time.
//!
//! The model never reads a clock: drivers hand in [`Time`] values. Nanoseconds
//! in a `u64` cover 584 years, so every computation is exact and replays
//! bit-for-bit; arithmetic saturates instead of panicking because a driver bug
//! must not abort an emulator that carries live traffic.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in virtual time: nanoseconds since the driver's epoch (the instant
/// the link was created, for trace-driven capacity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

/// A length of virtual time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(u64);

const NS_PER_US: u64 = 1_000;
const NS_PER_MS: u64 = 1_000_000;
const NS_PER_S: u64 = 1_000_000_000;

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// The far future; also used as "never".
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(NS_PER_US))
    }
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(NS_PER_MS))
    }
    pub const fn from_secs(s: u64) -> Time {
        Time(s.saturating_mul(NS_PER_S))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the epoch, for reports only (lossy).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Time) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }
    /// `self - d`, clamped at the epoch.
    pub const fn saturating_sub(self, d: Dur) -> Time {
        Time(self.0.saturating_sub(d.0))
    }
}

impl Dur {
    pub const ZERO: Dur = Dur(0);
    pub const MAX: Dur = Dur(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Dur {
        Dur(ns)
    }
    pub const fn from_micros(us: u64) -> Dur {
        Dur(us.saturating_mul(NS_PER_US))
    }
    pub const fn from_millis(ms: u64) -> Dur {
        Dur(ms.saturating_mul(NS_PER_MS))
    }
    pub const fn from_secs(s: u64) -> Dur {
        Dur(s.saturating_mul(NS_PER_S))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds, for reports only (lossy).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        *self = *self + d;
    }
}

impl Sub<Time> for Time {
    type Output = Dur;
    /// Saturating: a later `rhs` gives zero rather than a panic.
    fn sub(self, rhs: Time) -> Dur {
        self.saturating_since(rhs)
    }
}

impl Add for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09} s", self.0 / NS_PER_S, self.0 % NS_PER_S)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09} s", self.0 / NS_PER_S, self.0 % NS_PER_S)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_and_saturation() {
        assert_eq!(Time::from_millis(3).as_nanos(), 3_000_000);
        assert_eq!(Dur::from_secs(2).as_nanos(), 2_000_000_000);
        assert_eq!(Time::MAX + Dur::from_secs(1), Time::MAX);
        assert_eq!(Time::from_secs(1) - Time::from_secs(2), Dur::ZERO);
        assert_eq!(Time::from_micros(1500).to_string(), "0.001500000 s");
        assert_eq!(Time::from_secs(u64::MAX), Time::MAX);
    }
}
