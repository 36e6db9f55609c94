//! The indexer: takes stored uploads from the catalog's queue, writes
//! each telemetry segment's samples as Parquet, applies its last state and
//! track to the catalog, moves the bytes into the object store when that
//! is not the landing directory, and marks the segment indexed, in that
//! order. A crash anywhere leaves the segment claimed; it is indexed again
//! (at start-up, or after the claim timeout on a shared catalog), and
//! every step is idempotent: the Parquet key is the segment's hash, the
//! track keeps one point per bucket, the last state moves only forward.
//!
//! Group commit: one claim takes up to [`BATCH`] queued segments; each is
//! read and its Parquet written (not yet flushed), then one flush of the
//! store makes all the batch's files durable ([`Store::sync`]) and all
//! their catalog rows are recorded in one transaction
//! ([`Catalog::finish_batch`]): two flushes for the batch instead of
//! three per segment. Only after that commit is anything
//! acknowledged: the events logged, the landing copies dropped. A batch
//! whose commit fails is committed again one segment at a time, so one
//! bad row cannot hold back the others.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use convoy_catalog::{Catalog, Finished, IndexOutcome, SegmentRow};
use convoy_telemetry::now_ns;
use convoy_telemetry::segment::SegmentReader;

use crate::extract::{extract, utc_date};
use crate::parquet_out::to_parquet;
use crate::store::Store;

/// Largest telemetry segment indexed (uncompressed): 256 MiB.
pub const MAX_SEGMENT_RAW: u64 = 256 << 20;

/// How many queued segments one claim takes, and so one commit records
/// at most: bounds how long the first of them waits for its commit.
pub const BATCH: usize = 32;

/// What the indexer reports, for the server's log.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum IndexEvent {
    Indexed {
        vehicle: String,
        name: String,
        samples: i64,
        /// Indexing this segment took, up to its batch's commit.
        millis: f64,
        /// From the upload's "stored" (its catalog row) to indexed: the
        /// wait in the queue plus `millis`.
        lag_seconds: f64,
    },
    /// The segment is kept (with this reason in the catalog) but was not
    /// indexed: corrupt, or not telemetry after all.
    IndexFailed {
        vehicle: String,
        name: String,
        error: String,
    },
    /// The store or catalog failed; the segment stays queued.
    IndexRetry { error: String },
}

pub struct Indexer {
    catalog: Box<dyn Catalog>,
    store: Arc<Store>,
    landing: PathBuf,
    on_event: Box<dyn FnMut(&IndexEvent) + Send>,
}

/// Whether a stored name is a telemetry segment.
pub fn is_telemetry(name: &str) -> bool {
    name.ends_with(".jsonl.zst")
}

/// The campaign a stored name is a triggered window of: the agent names
/// windows `DATE/campaign/NAME/vVERSION-TRIGGER-T_NS.jsonl.zst`
/// (convoy-agent's `campaign` module; a prefix before `DATE` is allowed).
/// Anything else is `None`.
pub fn window_campaign(name: &str) -> Option<&str> {
    let parts: Vec<&str> = name.split('/').collect();
    let [.., date, "campaign", campaign, file] = parts[..] else {
        return None;
    };
    let dated = date.len() == 10 && date.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    if !dated {
        return None;
    }
    let version = file.strip_prefix('v')?.split('-').next()?;
    let is_window = file.ends_with(".jsonl.zst")
        && !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit());
    is_window.then_some(campaign)
}

/// The Parquet key of a segment. Ordinary telemetry goes under
/// `.telemetry/`; a campaign's window under `.windows/…/campaign=NAME/`.
/// A window's samples are copies of samples the vehicle also uploads as
/// telemetry, so indexing them beside it would count each twice in a
/// query over `.telemetry/` (docs/SERVICE.md, "Windows in Parquet").
pub fn parquet_key(vehicle: &str, name: &str, t_first: i64, blake3: &str) -> String {
    let hash = &blake3[..blake3.len().min(32)];
    let date = utc_date(t_first);
    match window_campaign(name) {
        Some(c) => format!(".windows/vehicle={vehicle}/campaign={c}/date={date}/{hash}.parquet"),
        None => format!(".telemetry/vehicle={vehicle}/date={date}/{hash}.parquet"),
    }
}

/// A claimed segment whose outcome waits for the batch's commit.
struct Waiting {
    row: SegmentRow,
    started: Instant,
}

enum Failure {
    /// The segment itself is bad: record it, keep its bytes.
    Segment(String),
    /// Infrastructure: try again later.
    Retry(String),
}

impl Indexer {
    pub fn new(
        catalog: Box<dyn Catalog>,
        store: Arc<Store>,
        landing: &Path,
        on_event: impl FnMut(&IndexEvent) + Send + 'static,
    ) -> Indexer {
        Indexer {
            catalog,
            store,
            landing: landing.to_owned(),
            on_event: Box::new(on_event),
        }
    }

    /// Indexes what is queued now, up to [`BATCH`] segments in one
    /// commit; returns how many segments it handled.
    pub fn run_once(&mut self) -> Result<usize, String> {
        let rows = self
            .catalog
            .claim_pending(BATCH, now_ns())
            .map_err(|e| e.to_string())?;
        let n = rows.len();
        let mut waiting = Vec::with_capacity(n);
        let mut done = Vec::with_capacity(n);
        for row in rows {
            let started = Instant::now();
            if let Some(how) = self.prepare(&row) {
                done.push((row.id, how));
                waiting.push(Waiting { row, started });
            }
        }
        self.commit(waiting, done);
        Ok(n)
    }

    /// Does a segment's work outside the catalog (Parquet, the object
    /// store) and says what to record for it; `None`: it stays claimed,
    /// to be tried again (the retry is reported).
    fn prepare(&mut self, row: &SegmentRow) -> Option<Finished> {
        match self.try_index(row) {
            Ok(out) => Some(Finished::Indexed(out)),
            // Keep the bytes where a shared store holds everything.
            Err(Failure::Segment(why)) => match self.move_to_store(row) {
                Ok(()) => Some(Finished::Failed(why)),
                Err(Failure::Retry(e)) | Err(Failure::Segment(e)) => {
                    (self.on_event)(&IndexEvent::IndexRetry { error: e });
                    None
                }
            },
            Err(Failure::Retry(e)) => {
                (self.on_event)(&IndexEvent::IndexRetry { error: e });
                None
            }
        }
    }

    /// Records the batch in one transaction, then acknowledges each; if
    /// that commit fails, one transaction per segment.
    fn commit(&mut self, waiting: Vec<Waiting>, done: Vec<(i64, Finished)>) {
        if done.is_empty() {
            return;
        }
        // The batch's Parquet files reach the disk before the catalog says
        // they exist; if they cannot, the segments stay claimed and are
        // indexed again (each step is idempotent).
        if let Err(e) = self.store.sync() {
            (self.on_event)(&IndexEvent::IndexRetry {
                error: e.to_string(),
            });
            return;
        }
        if self.catalog.finish_batch(&done, now_ns()).is_ok() {
            for (w, (_, how)) in waiting.into_iter().zip(done) {
                self.acknowledge(w, how);
            }
            return;
        }
        for (w, item) in waiting.into_iter().zip(done) {
            match self
                .catalog
                .finish_batch(std::slice::from_ref(&item), now_ns())
            {
                Ok(()) => self.acknowledge(w, item.1),
                Err(e) => (self.on_event)(&IndexEvent::IndexRetry {
                    error: e.to_string(),
                }),
            }
        }
    }

    /// What follows a segment's commit, never before it: its landing copy
    /// goes (the store holds it) and the event is reported.
    fn acknowledge(&mut self, w: Waiting, how: Finished) {
        self.drop_landing_copy(&w.row);
        let event = match how {
            Finished::Indexed(out) => IndexEvent::Indexed {
                samples: out.samples,
                millis: w.started.elapsed().as_secs_f64() * 1e3,
                lag_seconds: (now_ns() - w.row.stored_ns).max(0) as f64 / 1e9,
                vehicle: w.row.vehicle,
                name: w.row.name,
            },
            Finished::Failed(error) => IndexEvent::IndexFailed {
                vehicle: w.row.vehicle,
                name: w.row.name,
                error,
            },
        };
        (self.on_event)(&event);
    }

    /// Indexes until `stop`, woken by `wake` (one message per upload) or
    /// every 500 ms. With `single_server`, claims left by a crash of this
    /// server are taken back at once.
    pub fn run(mut self, stop: Arc<AtomicBool>, wake: Receiver<()>, single_server: bool) {
        if single_server {
            if let Err(e) = self.catalog.release_claims() {
                (self.on_event)(&IndexEvent::IndexRetry {
                    error: e.to_string(),
                });
            }
        }
        while !stop.load(Ordering::Relaxed) {
            match self.run_once() {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => (self.on_event)(&IndexEvent::IndexRetry { error: e }),
            }
            match wake.recv_timeout(Duration::from_millis(500)) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            while wake.try_recv().is_ok() {}
        }
    }

    fn landing_path(&self, row: &SegmentRow) -> PathBuf {
        self.landing.join(&row.object)
    }

    fn read(&self, row: &SegmentRow) -> Result<Vec<u8>, Failure> {
        let local = self.landing_path(row);
        match std::fs::read(&local) {
            Ok(b) => Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.store.is_landing_dir() => {
                self.store
                    .get(&row.object)
                    .map_err(|e| Failure::Retry(e.to_string()))
            }
            Err(e) => Err(Failure::Retry(format!("{}: {e}", local.display()))),
        }
    }

    /// Copies the upload into a store that is not the landing directory.
    fn move_to_store(&self, row: &SegmentRow) -> Result<(), Failure> {
        if self.store.is_landing_dir() {
            return Ok(());
        }
        let local = self.landing_path(row);
        if local.exists() {
            self.store
                .put_file(&row.object, &local)
                .map_err(|e| Failure::Retry(e.to_string()))?;
        }
        Ok(())
    }

    fn drop_landing_copy(&self, row: &SegmentRow) {
        if !self.store.is_landing_dir() {
            let _ = std::fs::remove_file(self.landing_path(row));
        }
    }

    fn try_index(&mut self, row: &SegmentRow) -> Result<IndexOutcome, Failure> {
        let mut out = IndexOutcome {
            object: row.object.clone(),
            ..IndexOutcome::default()
        };
        if row.kind == "telemetry" {
            let bytes = self.read(row)?;
            let seg = SegmentReader::from_bytes(&bytes, MAX_SEGMENT_RAW)
                .map_err(|e| Failure::Segment(format!("corrupt segment: {e}")))?;
            let ex = extract(&row.vehicle, &seg)
                .map_err(|e| Failure::Segment(format!("corrupt segment: {e}")))?;
            out.samples = ex.columns.t_ns.len() as i64;
            out.t_first = ex.t_first;
            out.t_last = ex.t_last;
            out.last = ex.last;
            out.track = ex.track;
            if let Some(t0) = ex.t_first {
                let key = parquet_key(&row.vehicle, &row.name, t0, &row.blake3);
                let pq = to_parquet(ex.columns).map_err(|e| Failure::Retry(e.to_string()))?;
                // Durable with the batch's one flush, before its commit.
                self.store
                    .put_unsynced(&key, pq)
                    .map_err(|e| Failure::Retry(e.to_string()))?;
                out.parquet = Some(key);
            }
        }
        self.move_to_store(row)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_go_to_their_own_parquet_dataset_and_telemetry_stays_alone() {
        let h = "ab".repeat(32);
        let t = 1_764_201_600_000_000_000; // 2025-11-27
        for w in [
            "2025-11-27/campaign/brake/v3-press-1764201600000000000.jsonl.zst",
            "events/2025-11-27/campaign/brake/v3-press-1764201600000000000.jsonl.zst",
        ] {
            assert_eq!(window_campaign(w), Some("brake"));
            assert!(parquet_key("truck-7", w, t, &h)
                .starts_with(".windows/vehicle=truck-7/campaign=brake/date=2025-11-27/"));
        }
        for plain in [
            "telemetry/2025-11-27/telemetry/000042.jsonl.zst",
            // A source that happens to be called "campaign" is telemetry.
            "telemetry/2025-11-27/campaign/000042.jsonl.zst",
            "events/2025-11-27/campaign/brake/notes.jsonl.zst",
            "bulk/campaign/brake/v3-press-1.jsonl.zst",
        ] {
            assert_eq!(window_campaign(plain), None, "{plain}");
            assert!(parquet_key("truck-7", plain, t, &h)
                .starts_with(".telemetry/vehicle=truck-7/date=2025-11-27/"));
        }
    }
}
