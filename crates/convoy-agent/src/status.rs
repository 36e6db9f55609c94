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
    /// CAN sources: frames decoded, frames whose id the DBC lacks, and
    /// frames too short for their message (garbage lines count as
    /// `lines_rejected`).
    #[serde(default)]
    pub can_frames_decoded: u64,
    #[serde(default)]
    pub can_frames_unknown: u64,
    #[serde(default)]
    pub can_frames_short: u64,
    /// MQTT sources: messages received, and those whose topic or JSON
    /// matched no mapped field.
    #[serde(default)]
    pub mqtt_messages: u64,
    #[serde(default)]
    pub mqtt_unmapped: u64,
    /// KUKSA sources: subscription responses received.
    #[serde(default)]
    pub kuksa_updates: u64,
    pub live: LaneStatus,
    pub backlog: LaneStatus,
    /// The campaigns running, with their versions and counters.
    #[serde(default)]
    pub campaigns: Vec<crate::campaign::CampaignStatus>,
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
    /// The live lane's driver, which waits on its connection (so its
    /// control stream is read) rather than on the condition variable.
    lane_waker: Mutex<Option<std::sync::Arc<convoy_net::wake::Waker>>>,
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
            tracing::warn!(target: "convoy::agent", rejected = n, input = %what, "rejected input");
        }
        if let Ok(mut s) = self.inner.lock() {
            s.last_rejection = Some(what.to_owned());
        }
    }

    pub fn note_error(&self, e: &str) {
        tracing::error!(target: "convoy::agent", "{e}");
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
        if let Some(w) = self.lane_waker.lock().ok().and_then(|w| w.clone()) {
            w.wake();
        }
    }

    /// Counts [`Shared::wake_uploaders`] calls: a waiter compares it.
    pub fn generation(&self) -> u64 {
        self.wake_lock.lock().map(|g| *g).unwrap_or(0)
    }

    /// The driver to wake with the uploaders.
    pub fn set_lane_waker(&self, w: Option<std::sync::Arc<convoy_net::wake::Waker>>) {
        if let Ok(mut slot) = self.lane_waker.lock() {
            *slot = w;
        }
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
    /// second copy (a full disk), in place. The text is padded with spaces
    /// to whole 4 KiB pages so that the in-place write never truncates the
    /// file nor needs a new block: truncating first would leave an empty
    /// file (the agent "not running") for as long as the disk stays full.
    pub fn write(&self, spool: &Path) {
        let Ok(mut text) = serde_json::to_vec_pretty(&self.snapshot()) else {
            return;
        };
        text.push(b'\n');
        text.resize(text.len().next_multiple_of(STATUS_PAGE), b' ');
        let path = spool.join("status.json");
        let tmp = spool.join("status.json.tmp");
        if std::fs::write(&tmp, &text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
            return;
        }
        let _ = std::fs::remove_file(&tmp);
        let old_len = std::fs::metadata(&path).map_or(0, |m| m.len() as usize);
        if old_len >= text.len() {
            // Spaces over the whole old text: JSON allows trailing ones.
            use std::os::unix::fs::FileExt;
            text.resize(old_len, b' ');
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
                let _ = f.write_all_at(&text, 0);
            }
        } else {
            let _ = std::fs::write(&path, &text);
        }
    }
}

/// The status file is padded to whole pages of this size (see `write`).
const STATUS_PAGE: usize = 4096;

/// The agent's last status. An in-place write (on a full disk) can be
/// caught half-done; such a read is tried again a few times before the
/// agent is taken for absent.
pub fn read(spool: &Path) -> Option<Snapshot> {
    for attempt in 0..5 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let Ok(text) = std::fs::read(spool.join("status.json")) else {
            return None;
        };
        if let Ok(s) = serde_json::from_slice(&text) {
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reads_back_whole_pages() {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared::default();
        shared.write(dir.path());
        let len = std::fs::metadata(dir.path().join("status.json"))
            .unwrap()
            .len();
        assert_eq!(len % STATUS_PAGE as u64, 0);
        assert_eq!(read(dir.path()).unwrap().pid, std::process::id());
    }

    #[test]
    fn without_room_for_a_copy_it_overwrites_in_place_and_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        // A longer old status, two pages of valid JSON.
        let mut old = br#"{"pid": 1}"#.to_vec();
        old.resize(2 * STATUS_PAGE, b' ');
        std::fs::write(dir.path().join("status.json"), &old).unwrap();
        // The copy cannot be written (a directory stands in its name), as
        // on a full disk.
        std::fs::create_dir(dir.path().join("status.json.tmp")).unwrap();
        Shared::default().write(dir.path());
        let meta = std::fs::metadata(dir.path().join("status.json")).unwrap();
        assert_eq!(meta.len(), 2 * STATUS_PAGE as u64, "never truncated");
        assert_eq!(read(dir.path()).unwrap().pid, std::process::id());
    }
}
