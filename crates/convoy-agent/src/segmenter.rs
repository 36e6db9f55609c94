//! Turns samples into bounded segments: lines go to an open file per
//! class (`SPOOL/open-CLASS.jsonl`, appended as they come, so a killed
//! agent loses none that reached the page cache), and every
//! `max_seconds` or `max_bytes` the open file is compressed into a zstd
//! segment, fsynced, admitted by the quota rule and queued. At start-up a
//! leftover open file becomes a segment first.
//!
//! A full disk applies the overflow rule: a write that fails for want of
//! space drops the oldest waiting segment of the lowest class (never an
//! event) and tries once more; a sample that still finds no room is
//! counted as lost. [`FullDisk`] keeps the log to a line when the disk
//! fills, a summary a minute while it stays full, and a line when it has
//! room again.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_telemetry::{Sample, SegmentWriter};

use crate::policy::Class;
use crate::spool::{is_full_db, is_full_io, AddError, Spool};
use crate::status::Shared;

/// How long writes must succeed before a full disk counts as having room
/// again (while it is full, shedding a segment makes every other write
/// succeed, which is not recovery).
const ROOM_AGAIN_AFTER: Duration = Duration::from_secs(10);
/// How often a disk that stays full is reported.
const STILL_FULL_EVERY: Duration = Duration::from_secs(60);

/// Samples that reach the segmenter within this long of each other came
/// together (the lines of one fix, one read of a source): one arrival.
const SAME_ARRIVAL: Duration = Duration::from_millis(10);
/// An open segment that its source's cadence says will get no further
/// sample before its deadline closes this long after its last arrival
/// (the rest of that arrival's lines).
const SETTLE: Duration = Duration::from_millis(10);
/// Arrival gaps remembered: the shortest of them is the cadence.
const CADENCE_GAPS: usize = 8;
/// The next arrival counts as missing a segment if it would come within a
/// quarter of a gap before the deadline or later: a source as periodic as
/// the segments (1 Hz fixes, segments of 1 s) lands on the deadline give
/// or take its jitter, and a fix a millisecond early must not hold every
/// segment open for the whole second.
const CADENCE_SLACK: f64 = 1.25;

/// When a class's samples arrive, as a sans-IO record: the gaps between
/// arrivals, so that a segment the next arrival would miss anyway need
/// not wait out its deadline. A 1 Hz position feed with segments of 1 s
/// had each fix wait a whole second in the open file before its upload
/// began (`fleet scale`: freshness in the store p50 1.03 s, nearly all
/// of it that wait). Closed once the fix is in, each fix is a segment of
/// its own: before, a fix that came a moment before its predecessor's
/// deadline joined it, so a third fewer segments were made, at a second's
/// wait for every first fix (docs/SERVICE.md, "Segments and the spool").
#[derive(Debug, Default)]
pub struct Cadence {
    last: Option<Instant>,
    gaps: std::collections::VecDeque<Duration>,
}

impl Cadence {
    /// A sample arrived at `now`.
    pub fn arrived(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let gap = now.saturating_duration_since(last);
            if gap >= SAME_ARRIVAL {
                if self.gaps.len() == CADENCE_GAPS {
                    self.gaps.pop_front();
                }
                self.gaps.push_back(gap);
            }
        }
        self.last = Some(now);
    }

    /// When a segment due at `deadline` may close: at once after the
    /// last arrival settles if the next one, at the shortest gap seen
    /// lately, would come at or after the deadline (`CADENCE_SLACK`);
    /// else at the deadline. Until two arrivals have been seen, the
    /// deadline.
    pub fn close_at(&self, deadline: Instant) -> Instant {
        let (Some(last), Some(&gap)) = (self.last, self.gaps.iter().min()) else {
            return deadline;
        };
        if last + gap.mul_f64(CADENCE_SLACK) >= deadline {
            (last + SETTLE).min(deadline)
        } else {
            deadline
        }
    }
}

/// How often (in bytes appended to the open file) the free space is checked.
const ROOM_CHECK_EVERY: u64 = 64 << 10;

/// An open file of `open_len` bytes of JSON lines must be compressed now
/// when less than half its size is free: its segment is rarely more than
/// a fifth of it, but the margin is for the catalog and other writers.
pub fn needs_room_now(open_len: u64, free: u64) -> bool {
    free < open_len / 2
}

/// What the log says about a spool disk that is full (sans-IO: the
/// segmenter reports what happened and when, and logs what this returns).
#[derive(Debug, Default)]
pub struct FullDisk {
    since: Option<Instant>,
    last_failure: Option<Instant>,
    last_report: Option<Instant>,
    dropped: u64,
    dropped_bytes: u64,
    lost: u64,
}

impl FullDisk {
    /// A write failed for want of space.
    pub fn failed(&mut self, now: Instant, class: Class, error: &str) -> Option<String> {
        self.last_failure = Some(now);
        if self.since.is_none() {
            self.since = Some(now);
            self.last_report = Some(now);
            return Some(format!(
                "spool disk full ({error}) writing {}: dropping the oldest waiting segments \
                 of the lowest class to make room (events are kept); samples that find no \
                 room are counted as lost",
                class.as_str()
            ));
        }
        self.summary(now, "spool disk still full")
    }

    /// The overflow rule dropped a segment of `bytes` to make room.
    pub fn dropped(&mut self, bytes: u64) {
        self.dropped += 1;
        self.dropped_bytes += bytes;
    }

    /// `n` samples found no room.
    pub fn lost(&mut self, n: u64) {
        self.lost += n;
    }

    /// A write succeeded.
    pub fn wrote(&mut self, now: Instant) -> Option<String> {
        let since = self.since?;
        if now.duration_since(self.last_failure.unwrap_or(since)) < ROOM_AGAIN_AFTER {
            return None;
        }
        let line = format!(
            "spool disk has room again after {:.0} s full: {} segments ({} bytes) dropped, \
             {} samples lost",
            self.last_failure
                .unwrap_or(since)
                .duration_since(since)
                .as_secs_f64(),
            self.dropped,
            self.dropped_bytes,
            self.lost
        );
        *self = FullDisk::default();
        Some(line)
    }

    fn summary(&mut self, now: Instant, what: &str) -> Option<String> {
        let last = self.last_report?;
        if now.duration_since(last) < STILL_FULL_EVERY {
            return None;
        }
        self.last_report = Some(now);
        Some(format!(
            "{what}: {} segments ({} bytes) dropped, {} samples lost so far",
            self.dropped, self.dropped_bytes, self.lost
        ))
    }
}

/// A segment's upload name: the UTC date of its first sample, its class
/// and its spool sequence number (`2026-11-30/telemetry/0000000042.jsonl.zst`).
/// The server files it under the vehicle's name; the load generator
/// (`convoy bench load --fleet`) names its segments with it too.
pub fn segment_name(t0_ns: i64, class: Class, seq: i64) -> String {
    format!(
        "{}/{}/{:010}.jsonl.zst",
        crate::utc_date(t0_ns),
        class.as_str(),
        seq
    )
}

pub struct Segmenter {
    class: Class,
    spool: Arc<Mutex<Spool>>,
    status: Arc<Shared>,
    open_path: PathBuf,
    open: Option<File>,
    /// Length of the open file up to its last whole line: a write that
    /// fails midway is cut back to it, so no torn line swallows the next.
    open_len: u64,
    /// `open_len` at which to check the free space next.
    next_room_check: u64,
    full: FullDisk,
    /// The last close failed: retry at the deadline, not at every sample.
    close_failed: bool,
    raw: u64,
    lines: u64,
    opened: Option<Instant>,
    first_t: Option<i64>,
    max_age: Duration,
    /// `max_age` while the uploaders find the server unreachable.
    offline_age: Duration,
    max_bytes: u64,
    line: Vec<u8>,
    cadence: Cadence,
}

impl Segmenter {
    pub fn new(
        class: Class,
        spool: Arc<Mutex<Spool>>,
        status: Arc<Shared>,
        max_age: Duration,
        offline_age: Duration,
        max_bytes: u64,
    ) -> Segmenter {
        let open_path = spool
            .lock()
            .expect("spool lock")
            .dir()
            .join(format!("open-{}.jsonl", class.as_str()));
        let mut s = Segmenter {
            class,
            spool,
            status,
            open_path,
            open: None,
            open_len: 0,
            next_room_check: ROOM_CHECK_EVERY,
            full: FullDisk::default(),
            close_failed: false,
            raw: 0,
            lines: 0,
            opened: None,
            first_t: None,
            max_age,
            offline_age,
            max_bytes,
            line: Vec::with_capacity(160),
            cadence: Cadence::default(),
        };
        s.recover();
        s
    }

    /// A leftover open file (the agent was killed) becomes a segment.
    fn recover(&mut self) {
        let Ok(f) = File::open(&self.open_path) else {
            return;
        };
        let mut first = None;
        let mut n = 0u64;
        let mut raw = 0u64;
        for line in BufReader::new(f).lines().map_while(Result::ok) {
            // Only whole lines count; a torn last line is dropped.
            if let Ok(s) = serde_json::from_str::<Sample>(&line) {
                first.get_or_insert(s.t_ns);
                n += 1;
                raw += line.len() as u64 + 1;
            }
        }
        if n > 0 {
            tracing::info!(
                target: "convoy::agent",
                class = self.class.as_str(), samples = n,
                "recovered samples written before a restart"
            );
            self.lines = n;
            self.raw = raw;
            self.first_t = first;
            self.close_segment();
        } else {
            let _ = std::fs::remove_file(&self.open_path);
        }
    }

    /// Deadline of the open segment, if any: `max_age` after it opened,
    /// or `offline_age` while the server is out of reach (when it comes
    /// back, an open segment older than `max_age` is due at once). Online,
    /// sooner if the samples' cadence says none will come before it
    /// (`Cadence`), unless the last close failed: that one is retried at
    /// the deadline, not every 10 ms after each arrival.
    pub fn deadline(&self) -> Option<Instant> {
        let opened = self.opened?;
        if self.status.is_offline() {
            return Some(opened + self.offline_age.max(self.max_age));
        }
        let due = opened + self.max_age;
        if self.close_failed {
            return Some(due);
        }
        Some(self.cadence.close_at(due))
    }

    pub fn push(&mut self, s: &Sample) {
        self.line.clear();
        if serde_json::to_writer(&mut self.line, s).is_err() {
            return;
        }
        self.line.push(b'\n');
        let mut written = self.append();
        if let Err(e) = &written {
            if is_full_io(e) {
                // A full disk: make room by the overflow rule (or, with
                // nothing left to drop, by compressing the open file into
                // a segment) and try once more.
                self.note_full(&e.to_string());
                if self.shed() || self.close_early() {
                    written = self.append();
                }
            }
        }
        if let Err(e) = written {
            self.status.count_lost(1);
            if is_full_io(&e) {
                self.full.lost(1);
            } else {
                self.status
                    .note_error(&format!("cannot write the spool: {e}"));
            }
            return;
        }
        let now = Instant::now();
        if let Some(line) = self.full.wrote(now) {
            tracing::warn!(target: "convoy::agent", "{line}");
        }
        self.cadence.arrived(now);
        self.first_t.get_or_insert(s.t_ns);
        self.lines += 1;
        self.raw += self.line.len() as u64;
        self.status.count_sample();
        if (self.raw >= self.max_bytes || self.short_of_room()) && !self.close_failed {
            self.close_segment();
        }
    }

    /// Whether the open file should become a segment now, before the disk
    /// has too little room left to hold its compressed copy: a full disk
    /// with nothing but one big open file in it could never be compressed
    /// (checked every [`ROOM_CHECK_EVERY`] bytes written).
    fn short_of_room(&mut self) -> bool {
        if self.open_len < self.next_room_check {
            return false;
        }
        self.next_room_check = self.open_len + ROOM_CHECK_EVERY;
        let free = crate::spool::free_bytes(self.spool_dir()).unwrap_or(u64::MAX);
        needs_room_now(self.open_len, free)
    }

    fn spool_dir(&self) -> &std::path::Path {
        self.open_path.parent().unwrap_or(std::path::Path::new("."))
    }

    /// Closes the open segment ahead of time; true if it closed.
    fn close_early(&mut self) -> bool {
        if self.lines == 0 {
            return false;
        }
        self.close_segment();
        self.lines == 0
    }

    /// Appends `self.line` to the open file, opening it if need be; on a
    /// failure the file is cut back to its last whole line.
    fn append(&mut self) -> std::io::Result<()> {
        if self.open.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.open_path)?;
            self.open_len = f.metadata()?.len();
            self.next_room_check = self.open_len + ROOM_CHECK_EVERY;
            self.open = Some(f);
            self.opened.get_or_insert_with(Instant::now);
        }
        let f = self.open.as_mut().expect("opened");
        if let Err(e) = f.write_all(&self.line) {
            let _ = f.set_len(self.open_len);
            return Err(e);
        }
        self.open_len += self.line.len() as u64;
        Ok(())
    }

    fn note_full(&mut self, error: &str) {
        if let Some(line) = self.full.failed(Instant::now(), self.class, error) {
            self.status.note_error(&line);
        }
    }

    /// Drops one waiting segment by the overflow rule; false if none may go.
    fn shed(&mut self) -> bool {
        let dropped = self.spool.lock().expect("spool lock").shed_one(self.class);
        match dropped {
            Some((_, _, bytes)) => {
                self.full.dropped(bytes);
                true
            }
            None => false,
        }
    }

    /// Closes the open segment if it is due.
    pub fn tick(&mut self) {
        if self.deadline().is_some_and(|d| Instant::now() >= d) {
            self.close_segment();
        }
    }

    pub fn close_segment(&mut self) {
        self.open = None;
        self.opened = None;
        if self.lines == 0 {
            let _ = std::fs::remove_file(&self.open_path);
            return;
        }
        match self.compress() {
            Ok(()) => {
                let _ = std::fs::remove_file(&self.open_path);
                self.close_failed = false;
            }
            Err(e) => {
                // Keep the open file: the next close tries again, at its
                // deadline rather than at every sample past `max_bytes`.
                if !e.disk_full {
                    self.status
                        .note_error(&format!("closing a segment failed: {}", e.message));
                }
                self.opened = Some(Instant::now());
                self.close_failed = true;
                return;
            }
        }
        self.lines = 0;
        self.raw = 0;
        self.first_t = None;
    }

    /// Compresses the open file into a queued segment; on a full disk,
    /// drops waiting segments by the overflow rule until it fits or none
    /// may go.
    fn compress(&mut self) -> Result<(), AddError> {
        loop {
            match self.compress_once() {
                Err(e) if e.disk_full => {
                    self.note_full(&e.message);
                    if !self.shed() {
                        return Err(e);
                    }
                }
                r => return r,
            }
        }
    }

    fn compress_once(&mut self) -> Result<(), AddError> {
        let other = |message: String| AddError {
            disk_full: false,
            message,
        };
        let mut spool = self.spool.lock().map_err(|_| other("spool lock".into()))?;
        let seq = spool.next_seq().map_err(|e| AddError {
            disk_full: is_full_db(&e),
            message: format!("spool catalog: {e}"),
        })?;
        let t0 = self.first_t.unwrap_or_else(convoy_telemetry::now_ns);
        let name = segment_name(t0, self.class, seq);
        let tmp = spool.tmp_path(&format!("seg-{seq}"));
        let write = || -> std::io::Result<u64> {
            let input = BufReader::new(File::open(&self.open_path)?);
            let out = File::create(&tmp)?;
            let mut w = SegmentWriter::new(out)?;
            for line in input.lines() {
                let mut l = line?.into_bytes();
                if serde_json::from_slice::<Sample>(&l).is_err() {
                    continue;
                }
                l.push(b'\n');
                w.push_line(&l)?;
            }
            let f = w.finish()?;
            f.sync_all()?;
            Ok(f.metadata()?.len())
        };
        let bytes = match write() {
            Ok(b) => b,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(AddError {
                    disk_full: is_full_io(&e),
                    message: e.to_string(),
                });
            }
        };
        match spool.make_room(self.class, bytes) {
            Ok(dropped) => {
                for (n, c, b) in dropped {
                    tracing::warn!(
                        target: "convoy::agent",
                        class = c.as_str(), segment = n, bytes = b,
                        "spool quota: dropped the oldest segment of the lowest class"
                    );
                }
            }
            Err(r) => {
                let _ = std::fs::remove_file(&tmp);
                self.status.count_lost(self.lines);
                tracing::warn!(
                    target: "convoy::agent",
                    class = self.class.as_str(), samples = self.lines, bytes = r.needed,
                    used = r.used, quota = r.quota,
                    "spool quota: refused a segment (the quota is used by higher priority)"
                );
                return Ok(());
            }
        }
        if let Err(e) = spool.add(&tmp, &name, self.class, bytes) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        drop(spool);
        self.status.wake_uploaders();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_one_line_then_a_summary_a_minute_then_one_line_when_it_has_room() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut d = FullDisk::default();
        assert_eq!(d.wrote(at(0.0)), None, "nothing to say while all is well");
        let first = d
            .failed(at(1.0), Class::Telemetry, "No space left on device")
            .unwrap();
        assert!(first.starts_with("spool disk full (No space left on device) writing telemetry"));
        d.dropped(1000);
        for s in [1.1, 2.0, 30.0] {
            assert_eq!(d.failed(at(s), Class::Telemetry, "x"), None);
            // Shedding made this write succeed: the disk is still full.
            assert_eq!(d.wrote(at(s + 0.01)), None);
        }
        d.lost(3);
        let still = d.failed(at(61.5), Class::Telemetry, "x").unwrap();
        assert_eq!(
            still,
            "spool disk still full: 1 segments (1000 bytes) dropped, 3 samples lost so far"
        );
        assert_eq!(d.wrote(at(71.0)), None, "under 10 s since the last failure");
        let room = d.wrote(at(71.6)).unwrap();
        assert_eq!(
            room,
            "spool disk has room again after 60 s full: 1 segments (1000 bytes) dropped, 3 samples lost"
        );
        assert_eq!(d.wrote(at(80.0)), None);
        assert!(d
            .failed(at(90.0), Class::Events, "y")
            .unwrap()
            .contains("writing events"));
    }

    #[test]
    fn segments_are_cut_less_often_while_the_server_is_out_of_reach() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Arc::new(Mutex::new(Spool::open(dir.path(), 1 << 20).unwrap()));
        let status = Arc::new(Shared::default());
        let (one, sixty) = (Duration::from_secs(1), Duration::from_secs(60));
        let mut seg = Segmenter::new(Class::Telemetry, spool, status.clone(), one, sixty, 1 << 20);
        assert_eq!(seg.deadline(), None, "nothing open");
        seg.push(&Sample {
            t_ns: 1,
            path: "Vehicle.Speed".into(),
            value: convoy_telemetry::Value::Number(1.0),
        });
        let opened = seg.opened.unwrap();
        assert_eq!(seg.deadline(), Some(opened + one));
        status.set_offline(true);
        assert_eq!(seg.deadline(), Some(opened + sixty));
        status.set_offline(false);
        assert_eq!(seg.deadline(), Some(opened + one));
    }

    #[test]
    fn a_segment_closes_once_its_sources_next_sample_would_miss_it() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let settle = SETTLE;
        // Nothing known: the deadline.
        let mut c = Cadence::default();
        assert_eq!(c.close_at(at(1.0)), at(1.0));
        c.arrived(at(0.0));
        assert_eq!(c.close_at(at(1.0)), at(1.0), "one arrival is no cadence");
        // A 1 Hz feed whose fixes come as three lines: each segment of 1 s
        // closes as its fix settles, not a second later.
        for k in 1..4 {
            for line in 0..3 {
                c.arrived(at(k as f64) + Duration::from_micros(line * 50));
            }
        }
        let last = at(3.0) + Duration::from_micros(100);
        assert_eq!(c.close_at(at(4.0)), last + settle);
        // The same feed a few milliseconds early now and then.
        c.arrived(at(3.995));
        assert_eq!(c.close_at(at(4.995)), at(3.995) + settle);
        // 10 Hz: the segment waits for the samples that still fit, and
        // closes after the last of them.
        let mut c = Cadence::default();
        for k in 0..=5 {
            c.arrived(at(0.1 * k as f64));
        }
        assert_eq!(
            c.close_at(at(1.0)),
            at(1.0),
            "at 0.5 s the next comes at 0.6"
        );
        for k in 6..=8 {
            c.arrived(at(0.1 * k as f64));
        }
        assert_eq!(
            c.close_at(at(1.0)),
            at(1.0),
            "at 0.8 s the next comes at 0.9"
        );
        c.arrived(at(0.9));
        assert_eq!(c.close_at(at(1.0)), at(0.9) + settle);
        // Never later than the deadline, and one short gap among the
        // recent ones keeps a segment open.
        assert_eq!(c.close_at(at(0.905)), at(0.905));
        let mut c = Cadence::default();
        for t in [0.0, 1.0, 2.0, 2.2, 3.2] {
            c.arrived(at(t));
        }
        assert_eq!(c.close_at(at(4.0)), at(4.0));
    }

    #[test]
    fn offline_or_after_a_failed_close_a_segment_keeps_its_deadline_whatever_the_cadence() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Arc::new(Mutex::new(Spool::open(dir.path(), 1 << 20).unwrap()));
        let status = Arc::new(Shared::default());
        let (one, sixty) = (Duration::from_secs(1), Duration::from_secs(60));
        let mut seg = Segmenter::new(Class::Telemetry, spool, status.clone(), one, sixty, 1 << 20);
        let sample = Sample {
            t_ns: 1,
            path: "Vehicle.Speed".into(),
            value: convoy_telemetry::Value::Number(1.0),
        };
        seg.push(&sample);
        let opened = seg.opened.unwrap();
        // A source that sent its last sample 2 s ago and its one before
        // that 2 s earlier: the next would miss the segment.
        seg.cadence = Cadence::default();
        let before = opened - Duration::from_secs(2);
        seg.cadence.arrived(before - Duration::from_secs(2));
        seg.cadence.arrived(before);
        seg.cadence.arrived(opened);
        assert_eq!(seg.deadline(), Some(opened + SETTLE));
        status.set_offline(true);
        assert_eq!(seg.deadline(), Some(opened + sixty));
        status.set_offline(false);
        seg.close_failed = true;
        assert_eq!(seg.deadline(), Some(opened + one), "a failed close waits");
    }

    #[test]
    fn the_open_file_closes_early_when_its_segment_might_not_fit() {
        assert!(!needs_room_now(1 << 20, 1 << 30));
        assert!(!needs_room_now(1 << 20, 512 << 10));
        assert!(needs_room_now(1 << 20, (512 << 10) - 1));
    }
}
