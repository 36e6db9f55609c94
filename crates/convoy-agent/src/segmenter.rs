//! Turns samples into bounded segments: lines go to an open file per
//! class (`SPOOL/open-CLASS.jsonl`, appended as they come, so a killed
//! agent loses none that reached the page cache), and every
//! `max_seconds` or `max_bytes` the open file is compressed into a zstd
//! segment, fsynced, admitted by the quota rule and queued. At start-up a
//! leftover open file becomes a segment first.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_telemetry::{Sample, SegmentWriter};

use crate::log;
use crate::policy::Class;
use crate::spool::Spool;
use crate::status::Shared;

pub struct Segmenter {
    class: Class,
    spool: Arc<Mutex<Spool>>,
    status: Arc<Shared>,
    open_path: PathBuf,
    open: Option<File>,
    raw: u64,
    lines: u64,
    opened: Option<Instant>,
    first_t: Option<i64>,
    max_age: Duration,
    max_bytes: u64,
    line: Vec<u8>,
}

impl Segmenter {
    pub fn new(
        class: Class,
        spool: Arc<Mutex<Spool>>,
        status: Arc<Shared>,
        max_age: Duration,
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
            raw: 0,
            lines: 0,
            opened: None,
            first_t: None,
            max_age,
            max_bytes,
            line: Vec::with_capacity(160),
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
            log(&format!(
                "recovered {n} {} samples written before a restart",
                self.class.as_str()
            ));
            self.lines = n;
            self.raw = raw;
            self.first_t = first;
            self.close_segment();
        } else {
            let _ = std::fs::remove_file(&self.open_path);
        }
    }

    /// Deadline of the open segment, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.opened.map(|t| t + self.max_age)
    }

    pub fn push(&mut self, s: &Sample) {
        self.line.clear();
        if serde_json::to_writer(&mut self.line, s).is_err() {
            return;
        }
        self.line.push(b'\n');
        if self.open.is_none() {
            match OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.open_path)
            {
                Ok(f) => {
                    self.open = Some(f);
                    self.opened = Some(Instant::now());
                }
                Err(e) => {
                    self.status
                        .note_error(&format!("cannot write the spool: {e}"));
                    return;
                }
            }
        }
        let f = self.open.as_mut().expect("opened");
        if let Err(e) = f.write_all(&self.line) {
            // A full disk: make room by the overflow rule and try once more.
            self.status.note_error(&format!(
                "spool write failed ({e}); applying the overflow rule"
            ));
            self.spool.lock().expect("spool lock").shed_one(self.class);
            if f.write_all(&self.line).is_err() {
                self.status.count_lost(1);
                return;
            }
        }
        self.first_t.get_or_insert(s.t_ns);
        self.lines += 1;
        self.raw += self.line.len() as u64;
        self.status.count_sample();
        if self.raw >= self.max_bytes {
            self.close_segment();
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
            }
            Err(e) => {
                // Keep the open file: the next close tries again.
                self.status
                    .note_error(&format!("closing a segment failed: {e}"));
                self.opened = Some(Instant::now());
                return;
            }
        }
        self.lines = 0;
        self.raw = 0;
        self.first_t = None;
    }

    fn compress(&mut self) -> Result<(), String> {
        let mut spool = self.spool.lock().map_err(|_| "spool lock")?;
        let seq = spool.next_seq().map_err(|e| e.to_string())?;
        let t0 = self.first_t.unwrap_or_else(convoy_telemetry::now_ns);
        let name = format!(
            "{}/{}/{:010}.jsonl.zst",
            crate::utc_date(t0),
            self.class.as_str(),
            seq
        );
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
                spool.shed_one(self.class);
                return Err(e.to_string());
            }
        };
        match spool.make_room(self.class, bytes) {
            Ok(dropped) => {
                for (n, c, b) in dropped {
                    log(&format!(
                        "spool quota: dropped {} segment {n} ({b} bytes, oldest of the lowest class)",
                        c.as_str()
                    ));
                }
            }
            Err(r) => {
                let _ = std::fs::remove_file(&tmp);
                self.status.count_lost(self.lines);
                log(&format!(
                    "spool quota: refused a {} segment of {} samples ({} bytes; {} of {} used by segments of higher priority)",
                    self.class.as_str(),
                    self.lines,
                    r.needed,
                    r.used,
                    r.quota
                ));
                return Ok(());
            }
        }
        spool.add(&tmp, &name, self.class, bytes)?;
        drop(spool);
        self.status.wake_uploaders();
        Ok(())
    }
}
