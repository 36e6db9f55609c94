//! One simulated application: it writes its stream as fast as the
//! connection takes it, reads and checks the peer's, and keeps what it needs
//! to tell how long each byte took from `write` to `read`.

use std::time::Duration;

use convoy_proto::{ConnectionHandle, Endpoint, StreamError, StreamId};

use crate::payload::{pattern_check, pattern_fill};
use crate::transfer::SimError;

/// Bytes between two latency samples: about one packet's worth, so a
/// percentile is over bytes, not over read calls of whatever size.
const LATENCY_SAMPLE_BYTES: u64 = 1400;

/// When each byte offset of a stream was handed to the connection: a list
/// of (first offset of a write, time), in offset order.
#[derive(Default)]
pub(crate) struct WriteLog {
    writes: Vec<(u64, Duration)>,
}

impl WriteLog {
    fn wrote(&mut self, offset: u64, at: Duration) {
        if self.writes.last().is_none_or(|&(_, t)| t < at) {
            self.writes.push((offset, at));
        }
    }

    /// When the byte at `offset` was written.
    fn written_at(&self, offset: u64) -> Option<Duration> {
        let i = self.writes.partition_point(|&(o, _)| o <= offset);
        i.checked_sub(1).map(|i| self.writes[i].1)
    }
}

pub(crate) struct App {
    dir_out: u8,
    to_send: u64,
    pub(crate) sent: u64,
    out: Option<StreamId>,
    finished: bool,
    pub(crate) read: u64,
    read_limit: u64,
    pub(crate) timeline: Vec<u64>,
    pub(crate) completed_at: Option<Duration>,
    expected_in: u64,
    pub(crate) writes: WriteLog,
    /// Write-to-read latency of the bytes this side read, one sample per
    /// [`LATENCY_SAMPLE_BYTES`].
    pub(crate) latencies: Vec<Duration>,
}

impl App {
    pub(crate) fn new(dir_out: u8, to_send: u64, expected_in: u64, read_limit: u64) -> App {
        App {
            dir_out,
            to_send,
            sent: 0,
            out: None,
            finished: to_send == 0,
            read: 0,
            read_limit,
            timeline: Vec::new(),
            completed_at: None,
            expected_in,
            writes: WriteLog::default(),
            latencies: Vec::new(),
        }
    }

    pub(crate) fn done(&self) -> bool {
        self.finished
            && self.read == self.expected_in
            && (self.expected_in == 0 || self.completed_at.is_some())
    }

    /// Writes what the connection takes, then reads what it has; `peer` is
    /// the other side's application, whose write log dates what we read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn step(
        &mut self,
        ep: &mut Endpoint,
        h: ConnectionHandle,
        now: Duration,
        start: Duration,
        bin: Duration,
        buf: &mut [u8],
        peer_writes: &WriteLog,
    ) -> Result<(), SimError> {
        let Some(c) = ep.connection(h) else {
            return Ok(());
        };
        if !c.is_established() {
            return Ok(());
        }
        if self.out.is_none() && self.to_send > 0 {
            self.out = c.open_stream().ok();
        }
        if let Some(id) = self.out.filter(|_| !self.finished) {
            while self.sent < self.to_send {
                let room = c.write_room(id).min(buf.len());
                if room == 0 {
                    break;
                }
                let n = (self.to_send - self.sent).min(room as u64) as usize;
                pattern_fill(self.dir_out, self.sent, &mut buf[..n]);
                match c.write(id, &buf[..n]) {
                    Ok(w) => {
                        self.writes.wrote(self.sent, now);
                        self.sent += w as u64;
                    }
                    Err(StreamError::Blocked) => break,
                    Err(e) => return Err(SimError::Endpoint(e.to_string())),
                }
            }
            if self.sent == self.to_send {
                c.finish(id)
                    .map_err(|e| SimError::Endpoint(e.to_string()))?;
                self.finished = true;
            }
        }
        while c.accept_stream().is_some() {}
        // The peer's stream has the other parity from ours.
        let peer_stream = StreamId(u64::from(c.role() == convoy_proto::Role::Client));
        while self.read < self.read_limit {
            let room = (self.read_limit - self.read).min(buf.len() as u64) as usize;
            match c.read(peer_stream, &mut buf[..room]) {
                Ok(0) => {
                    if self.completed_at.is_none() {
                        self.completed_at = Some(now.saturating_sub(start));
                    }
                    break;
                }
                Ok(n) => {
                    if let Some(at) = pattern_check(1 - self.dir_out, self.read, &buf[..n]) {
                        return Err(SimError::Corrupted(format!(
                            "byte {} differs",
                            self.read + at as u64
                        )));
                    }
                    self.sample_latency(now, n as u64, peer_writes);
                    self.read += n as u64;
                    let bin = (now.saturating_sub(start).as_nanos() / bin.as_nanos()) as usize;
                    if self.timeline.len() <= bin {
                        self.timeline.resize(bin + 1, 0);
                    }
                    self.timeline[bin] += n as u64;
                }
                Err(StreamError::Blocked) | Err(StreamError::UnknownStream) => break,
                Err(e) => return Err(SimError::Endpoint(e.to_string())),
            }
        }
        Ok(())
    }

    fn sample_latency(&mut self, now: Duration, n: u64, peer_writes: &WriteLog) {
        let first = self.read.div_ceil(LATENCY_SAMPLE_BYTES) * LATENCY_SAMPLE_BYTES;
        let mut offset = first;
        while offset < self.read + n {
            if let Some(at) = peer_writes.written_at(offset) {
                self.latencies.push(now.saturating_sub(at));
            }
            offset += LATENCY_SAMPLE_BYTES;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_log_dates_every_offset_by_the_write_that_carried_it() {
        let mut log = WriteLog::default();
        log.wrote(0, Duration::from_millis(10));
        log.wrote(100, Duration::from_millis(20));
        log.wrote(150, Duration::from_millis(20)); // same instant: one entry
        log.wrote(300, Duration::from_millis(35));
        let at = |o| log.written_at(o).map(|d: Duration| d.as_millis());
        assert_eq!(
            [at(0), at(99), at(100), at(299), at(300), at(10_000)],
            [Some(10), Some(10), Some(20), Some(20), Some(35), Some(35)]
        );
    }
}
