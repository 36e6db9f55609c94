//! Write-to-read latency for `convoy perf`: the client writes the wall-clock
//! time into its filler every [`STAMP_EVERY`] bytes of stream offset as it
//! hands the bytes to the connection, and the server, reading them, takes
//! the difference from its own wall clock. Both ends on one host (the
//! emulator, loopback) share the clock; across hosts the figure is off by
//! their clocks' offset, which NTP keeps to milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of stream offset between two stamps (the first at offset 0).
pub const STAMP_EVERY: u64 = 16 * 1024;
const STAMP_LEN: u64 = 8;

/// Nanoseconds since the Unix epoch.
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// How much of `room` bytes to write at `offset` so the write does not
/// end inside a stamp (whose two parts would carry two different times):
/// `room` cut back to the stamp's start, or 0 when even that leaves
/// nothing (wait for more room).
pub fn write_len(offset: u64, room: usize) -> usize {
    let into = (offset + room as u64) % STAMP_EVERY;
    if into == 0 || into >= STAMP_LEN {
        return room;
    }
    room.saturating_sub(into as usize)
}

/// The stamps that fall in `[offset, offset + buf.len())`, written into
/// `buf`. A write must not end inside a stamp ([`write_len`]).
pub fn stamp(buf: &mut [u8], offset: u64, now_ns: u64) {
    let end = offset + buf.len() as u64;
    let bytes = now_ns.to_be_bytes();
    let mut k = offset / STAMP_EVERY;
    while k * STAMP_EVERY < end {
        let at = k * STAMP_EVERY;
        for i in 0..STAMP_LEN {
            let p = at + i;
            if p >= offset && p < end {
                buf[(p - offset) as usize] = bytes[i as usize];
            }
        }
        k += 1;
    }
}

/// Percentiles of write-to-read latency, microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
}

/// Reads the stamps back on the server.
#[derive(Debug, Default)]
pub struct LatencyMeter {
    partial: [u8; 8],
    samples: Vec<u64>,
}

impl LatencyMeter {
    /// `data` starts at stream offset `offset` and was read at `now_ns`.
    pub fn take(&mut self, offset: u64, data: &[u8], now_ns: u64) {
        let end = offset + data.len() as u64;
        let mut k = offset.saturating_sub(STAMP_LEN - 1) / STAMP_EVERY;
        while k * STAMP_EVERY < end {
            let at = k * STAMP_EVERY;
            for i in 0..STAMP_LEN {
                let p = at + i;
                if p >= offset && p < end {
                    self.partial[i as usize] = data[(p - offset) as usize];
                }
            }
            // The stamp's last byte is in this piece: it is whole now.
            let last = at + STAMP_LEN - 1;
            if last >= offset && last < end {
                let sent = u64::from_be_bytes(self.partial);
                self.samples.push(now_ns.saturating_sub(sent) / 1000);
            }
            k += 1;
        }
    }

    pub fn summary(&mut self) -> LatencySummary {
        let v = &mut self.samples;
        if v.is_empty() {
            return LatencySummary::default();
        }
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        LatencySummary {
            samples: v.len() as u64,
            p50_us: at(0.5),
            p95_us: at(0.95),
            p99_us: at(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_back_whatever_the_write_and_read_sizes() {
        for (write, read) in [
            (8usize, 1usize),
            (13, 7),
            (16384, 100),
            (5000, 16387),
            (70_000, 9),
        ] {
            // Bytes written at times 1000, 2000, ... ns per write.
            let total = 100_000usize;
            let mut stream = vec![0u8; total];
            let (mut t, mut off) = (0u64, 0usize);
            while off < total {
                let room = write.min(total - off);
                // A room smaller than a stamp waits until it grows; here,
                // the next write is simply allowed a whole stamp.
                let n = match write_len(off as u64, room) {
                    0 => (STAMP_LEN as usize).min(total - off),
                    n => n,
                };
                t += 1000;
                stamp(&mut stream[off..off + n], off as u64, t);
                off += n;
            }
            let mut m = LatencyMeter::default();
            let mut off = 0;
            for chunk in stream.chunks(read) {
                m.take(off as u64, chunk, t + 5_000_000);
                off += chunk.len();
            }
            let s = m.summary();
            assert_eq!(
                s.samples,
                total.div_ceil(STAMP_EVERY as usize) as u64,
                "{write}/{read}"
            );
            // Every stamp reads back as one of the write times: read at
            // t + 5 ms, they are 5 ms to 5 ms + t old, never garbage.
            assert!(
                s.p99_us <= 5000 + t / 1000 && s.p50_us >= 5000,
                "{write}/{read}: {s:?}"
            );
        }
    }

    #[test]
    fn writes_stop_short_of_a_stamp_they_would_cut() {
        assert_eq!(write_len(0, 100), 100);
        assert_eq!(
            write_len(STAMP_EVERY - 10, 13),
            10,
            "would end 3 bytes into a stamp"
        );
        assert_eq!(write_len(STAMP_EVERY - 10, 18), 18, "ends right after it");
        assert_eq!(
            write_len(STAMP_EVERY, 5),
            0,
            "inside the stamp: wait for room"
        );
        assert_eq!(write_len(STAMP_EVERY, 8), 8);
    }
}
