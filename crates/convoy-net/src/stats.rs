//! What the driver measures about itself: syscalls, pacing lateness and
//! how far behind the kernel's receive stamps our own clock reads were.

use std::time::Duration;

/// A histogram of durations in 1 µs buckets up to 1 ms (one overflow
/// bucket), enough for percentiles of timer lateness.
#[derive(Clone, Debug)]
pub struct MicrosHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max: Duration,
}

impl Default for MicrosHistogram {
    fn default() -> Self {
        MicrosHistogram {
            buckets: vec![0; 1001],
            count: 0,
            sum_ns: 0,
            max: Duration::ZERO,
        }
    }
}

impl MicrosHistogram {
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as usize).min(1000);
        self.buckets[us] += 1;
        self.count += 1;
        self.sum_ns += d.as_nanos();
        self.max = self.max.max(d);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum_ns / u128::from(self.count)) as u64)
    }

    pub fn max(&self) -> Duration {
        self.max
    }

    /// The upper edge of the bucket holding quantile `q` (so p99 = 3 µs
    /// means 99 % were below 3 µs).
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let target = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target {
                return Duration::from_micros(us as u64 + 1);
            }
        }
        self.max
    }

    /// Adds another histogram's samples.
    pub fn absorb(&mut self, other: &MicrosHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max = self.max.max(other.max);
    }

    /// Fraction of samples at or below `limit`.
    pub fn fraction_within(&self, limit: Duration) -> f64 {
        if self.count == 0 {
            return 1.0;
        }
        let edge = (limit.as_micros() as usize).min(1000);
        let n: u64 = self.buckets[..edge].iter().sum();
        n as f64 / self.count as f64
    }

    pub fn summary(&self) -> LatenessSummary {
        LatenessSummary {
            samples: self.count,
            mean_us: self.mean().as_secs_f64() * 1e6,
            p50_us: self.quantile(0.5).as_secs_f64() * 1e6,
            p99_us: self.quantile(0.99).as_secs_f64() * 1e6,
            p999_us: self.quantile(0.999).as_secs_f64() * 1e6,
            max_us: self.max.as_secs_f64() * 1e6,
            within_50us: self.fraction_within(Duration::from_micros(50)),
        }
    }
}

/// A histogram reduced to the numbers reports print.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct LatenessSummary {
    pub samples: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Fraction of samples ≤ 50 µs late.
    pub within_50us: f64,
}

#[derive(Clone, Debug, Default)]
pub struct DriverStats {
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub send_syscalls: u64,
    pub recv_syscalls: u64,
    /// Sleeps in ppoll (each ends with a datagram, a deadline or a wake-up).
    pub sleeps: u64,
    /// Datagrams dropped because the socket buffer stayed full.
    pub send_drops: u64,
    /// Datagrams the kernel dropped because our receive buffer was full
    /// (SO_RXQ_OVFL; known as of the last datagram read).
    pub receive_drops: u64,
    /// How late the first datagram after a timed wake-up left, against the
    /// deadline the protocol gave (pacing or a timer).
    pub pacing_lateness: MicrosHistogram,
    /// Our clock reading when a datagram was handed to the protocol minus
    /// its kernel receive stamp: the error a driver without timestamps
    /// would feed the rate estimator.
    pub receive_stamp_lag: MicrosHistogram,
    pub kernel_stamps: u64,
    /// Whether sends used UDP GSO (asked for and accepted by the kernel).
    pub gso: bool,
    /// Whether UDP GRO was enabled on the socket.
    pub gro: bool,
}

/// The serialisable report of [`DriverStats`].
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct DriverReport {
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub send_syscalls: u64,
    pub recv_syscalls: u64,
    pub sleeps: u64,
    pub send_drops: u64,
    pub receive_drops: u64,
    pub pacing_lateness: LatenessSummary,
    pub receive_stamp_lag: LatenessSummary,
    pub kernel_stamps: u64,
    pub gso: bool,
    pub gro: bool,
}

impl DriverStats {
    /// Adds another driver's counts (a server's workers).
    pub fn absorb(&mut self, o: &DriverStats) {
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.send_syscalls += o.send_syscalls;
        self.recv_syscalls += o.recv_syscalls;
        self.sleeps += o.sleeps;
        self.send_drops += o.send_drops;
        self.receive_drops += o.receive_drops;
        self.pacing_lateness.absorb(&o.pacing_lateness);
        self.receive_stamp_lag.absorb(&o.receive_stamp_lag);
        self.kernel_stamps += o.kernel_stamps;
    }

    pub fn report(&self) -> DriverReport {
        DriverReport {
            datagrams_sent: self.datagrams_sent,
            datagrams_received: self.datagrams_received,
            send_syscalls: self.send_syscalls,
            recv_syscalls: self.recv_syscalls,
            sleeps: self.sleeps,
            send_drops: self.send_drops,
            receive_drops: self.receive_drops,
            pacing_lateness: self.pacing_lateness.summary(),
            receive_stamp_lag: self.receive_stamp_lag.summary(),
            kernel_stamps: self.kernel_stamps,
            gso: self.gso,
            gro: self.gro,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_upper_edges() {
        let mut h = MicrosHistogram::default();
        for us in 0..100 {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.quantile(0.5), Duration::from_micros(50));
        assert_eq!(h.quantile(1.0), Duration::from_micros(100));
        assert!((h.fraction_within(Duration::from_micros(50)) - 0.5).abs() < 1e-9);
        h.record(Duration::from_millis(5));
        assert_eq!(h.max(), Duration::from_millis(5));
    }
}
