//! What the running agent is doing, shared by its threads and written
//! every second to `SPOOL/status.json` for `convoy agent status`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LastUpload {
    pub name: String,
    pub class: String,
    pub bytes: u64,
    pub link: String,
    pub at_ns: i64,
    pub seconds: f64,
    /// Creation of the segment to its acknowledgement.
    pub age_seconds: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LaneStatus {
    pub state: String,
    pub last_upload: Option<LastUpload>,
    pub last_error: Option<String>,
    pub uploads: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub pid: u32,
    pub written_ns: i64,
    pub link: Option<String>,
    /// The last connection attempt or transfer found the server
    /// unreachable (telemetry segments are then cut less often).
    #[serde(default)]
    pub offline: bool,
    pub samples_in: u64,
    pub lines_rejected: u64,
    pub samples_lost: u64,
    pub last_rejection: Option<String>,
    pub last_error: Option<String>,
    pub live: LaneStatus,
    pub backlog: LaneStatus,
}

/// Counters and lane states; a condition variable wakes the uploaders
/// when a segment is queued.
#[derive(Default)]
pub struct Shared {
    samples_in: AtomicU64,
    rejected: AtomicU64,
    lost: AtomicU64,
    offline: AtomicBool,
    inner: Mutex<Snapshot>,
    wake: Condvar,
    wake_lock: Mutex<u64>,
}

impl Shared {
    pub fn count_sample(&self) {
        self.samples_in.fetch_add(1, Ordering::Relaxed);
    }

    /// The uploaders' view of the link: `true` after a connection failed,
    /// `false` once one is made or an upload confirmed.
    pub fn set_offline(&self, offline: bool) {
        self.offline.store(offline, Ordering::Relaxed);
    }

    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Relaxed)
    }

    pub fn count_lost(&self, n: u64) {
        self.lost.fetch_add(n, Ordering::Relaxed);
    }

    /// A bad input line: counted, and logged for the first ten and then
    /// every thousandth, so a broken producer cannot flood the log.
    pub fn reject(&self, what: &str) {
        let n = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 10 || n.is_multiple_of(1000) {
            crate::log(&format!("rejected input ({n} so far): {what}"));
        }
        if let Ok(mut s) = self.inner.lock() {
            s.last_rejection = Some(what.to_owned());
        }
    }

    pub fn note_error(&self, e: &str) {
        crate::log(e);
        if let Ok(mut s) = self.inner.lock() {
            s.last_error = Some(e.to_owned());
        }
    }

    pub fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        if let Ok(mut s) = self.inner.lock() {
            f(&mut s);
        }
    }

    pub fn wake_uploaders(&self) {
        if let Ok(mut g) = self.wake_lock.lock() {
            *g += 1;
        }
        self.wake.notify_all();
    }

    /// Sleeps until a segment is queued or `timeout` passes.
    pub fn wait(&self, timeout: std::time::Duration) {
        if let Ok(g) = self.wake_lock.lock() {
            let start = *g;
            let _ = self.wake.wait_timeout_while(g, timeout, |v| *v == start);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.inner.lock().map(|s| s.clone()).unwrap_or_default();
        s.pid = std::process::id();
        s.written_ns = convoy_telemetry::now_ns();
        s.samples_in = self.samples_in.load(Ordering::Relaxed);
        s.lines_rejected = self.rejected.load(Ordering::Relaxed);
        s.samples_lost = self.lost.load(Ordering::Relaxed);
        s.offline = self.is_offline();
        s
    }

    /// Writes `status.json` atomically, or, when there is no room for a
    /// second copy (a full disk), in place: a reader may then catch it
    /// half-written once, but `convoy agent status` keeps showing the
    /// agent running and why the disk is full.
    pub fn write(&self, spool: &Path) {
        let tmp = spool.join("status.json.tmp");
        if let Ok(text) = serde_json::to_vec_pretty(&self.snapshot()) {
            if std::fs::write(&tmp, &text).is_ok() {
                let _ = std::fs::rename(&tmp, spool.join("status.json"));
            } else {
                let _ = std::fs::remove_file(&tmp);
                let _ = std::fs::write(spool.join("status.json"), &text);
            }
        }
    }
}

pub fn read(spool: &Path) -> Option<Snapshot> {
    let text = std::fs::read(spool.join("status.json")).ok()?;
    serde_json::from_slice(&text).ok()
}
