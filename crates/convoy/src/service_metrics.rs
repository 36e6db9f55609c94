//! The fleet server's transport and indexer figures for `/metrics`,
//! counted from the events the server and the indexer already report
//! (the same events that make its log lines), so a figure is never an
//! estimate.

use std::sync::atomic::{AtomicU64, Ordering};

use convoy_ingest::IndexEvent;
use convoy_net::server::figures::{Histogram, ServerFigures, LATENCY_BUCKETS};
use convoy_net::ServerEvent;
use convoy_web::metrics::Exposition;

/// Why a key was refused, in words that carry no vehicle's name.
const REFUSALS: [&str; 3] = ["unknown_key", "revoked", "other"];

#[derive(Default)]
pub struct ServiceCounters {
    /// The server's own figures (uploads in progress, commit latency),
    /// set once it is bound.
    figures: std::sync::OnceLock<std::sync::Arc<ServerFigures>>,
    connections: AtomicU64,
    closed: AtomicU64,
    refused: [AtomicU64; 3],
    stored: AtomicU64,
    bytes_in: AtomicU64,
    failed: AtomicU64,
    sent: AtomicU64,
    bytes_out: AtomicU64,
    indexed: AtomicU64,
    index_failed: AtomicU64,
    index_retries: AtomicU64,
    /// From "stored" to indexed, per indexed segment.
    index_lag: Histogram,
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl ServiceCounters {
    /// The bound server's figures, for every later scrape.
    pub fn set_figures(&self, f: std::sync::Arc<ServerFigures>) {
        let _ = self.figures.set(f);
    }

    pub fn observe(&self, e: &ServerEvent) {
        match e {
            ServerEvent::Connected { .. } => add(&self.connections, 1),
            ServerEvent::Closed { .. } => add(&self.closed, 1),
            ServerEvent::Refused { reason, .. } => {
                // The authorizer's two refusals (convoy-ingest), else other.
                let i = if reason.contains("not in the fleet registry") {
                    0
                } else if reason.ends_with("is revoked") {
                    1
                } else {
                    2
                };
                add(&self.refused[i], 1);
            }
            ServerEvent::Stored {
                bytes,
                resumed_from,
                ..
            } => {
                add(&self.stored, 1);
                // What this connection carried; a resumed upload's first
                // part was counted by the connection that brought it.
                add(&self.bytes_in, bytes.saturating_sub(*resumed_from));
            }
            ServerEvent::Failed { .. } => add(&self.failed, 1),
            ServerEvent::Sent { bytes, .. } => {
                add(&self.sent, 1);
                add(&self.bytes_out, *bytes);
            }
            ServerEvent::PerfDone { .. }
            | ServerEvent::Draining { .. }
            | ServerEvent::Drained { .. } => {}
        }
    }

    pub fn index_event(&self, e: &IndexEvent) {
        match e {
            IndexEvent::Indexed { lag_seconds, .. } => {
                add(&self.indexed, 1);
                self.index_lag
                    .record(std::time::Duration::from_secs_f64(lag_seconds.max(0.0)));
            }
            IndexEvent::IndexFailed { .. } => add(&self.index_failed, 1),
            IndexEvent::IndexRetry { .. } => add(&self.index_retries, 1),
        }
    }

    pub fn write(&self, p: &mut Exposition) {
        let v = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let counters = [
            (
                "convoy_connections_total",
                "Vehicle connections accepted after the handshake and the registry.",
                &self.connections,
            ),
            (
                "convoy_connections_closed_total",
                "Vehicle connections closed.",
                &self.closed,
            ),
            (
                "convoy_uploads_stored_total",
                "Uploads stored durably (fsync, hash check, rename) and acknowledged.",
                &self.stored,
            ),
            (
                "convoy_upload_bytes_total",
                "Bytes of stored uploads carried by the connections that finished them.",
                &self.bytes_in,
            ),
            (
                "convoy_transfers_failed_total",
                "Uploads or downloads that ended in an error.",
                &self.failed,
            ),
            (
                "convoy_downloads_sent_total",
                "Files sent whole to a client over convoy.",
                &self.sent,
            ),
            (
                "convoy_download_bytes_total",
                "Bytes of files sent over convoy.",
                &self.bytes_out,
            ),
            (
                "convoy_segments_indexed_total",
                "Stored uploads the indexer finished.",
                &self.indexed,
            ),
            (
                "convoy_segments_index_failed_total",
                "Stored uploads kept but not indexed (bad content).",
                &self.index_failed,
            ),
            (
                "convoy_index_retries_total",
                "Indexer passes that failed and will be retried (catalog or store errors).",
                &self.index_retries,
            ),
        ];
        for (name, help, a) in counters {
            p.one(name, "counter", help, v(a));
        }
        if let Some(f) = self.figures.get() {
            p.one(
                "convoy_uploads_in_progress",
                "gauge",
                "Uploads whose data is being received now (partial files held by a connection).",
                f.uploads_in_progress(),
            );
            histogram(
                p,
                "convoy_upload_fsync_seconds",
                "Making a complete upload durable: the file's fsync, BLAKE3 check, rename and the directory's fsync.",
                &f.fsync,
            );
            histogram(
                p,
                "convoy_upload_commit_seconds",
                "From a complete upload to \"stored\": the fsync steps and the catalog's queue row.",
                &f.commit,
            );
        }
        histogram(
            p,
            "convoy_index_delay_seconds",
            "From an upload's \"stored\" to its segment indexed (the wait in the queue and the indexing), per indexed segment.",
            &self.index_lag,
        );
        p.family(
            "convoy_handshakes_refused_total",
            "counter",
            "Keys refused by the registry after the handshake, by reason.",
        );
        for (reason, a) in REFUSALS.iter().zip(&self.refused) {
            p.sample(
                "convoy_handshakes_refused_total",
                &format!("{{reason=\"{reason}\"}}"),
                v(a),
            );
        }
    }
}

/// One histogram family in Prometheus' form: cumulative `_bucket`s, the
/// +Inf bucket, `_sum` and `_count`.
fn histogram(p: &mut Exposition, name: &str, help: &str, h: &Histogram) {
    p.family(name, "histogram", help);
    let (cumulative, sum) = h.snapshot();
    let bucket = format!("{name}_bucket");
    for (le, n) in LATENCY_BUCKETS.iter().zip(&cumulative) {
        p.sample(&bucket, &format!("{{le=\"{le}\"}}"), n);
    }
    let total = *cumulative.last().unwrap_or(&0);
    p.sample(&bucket, "{le=\"+Inf\"}", total);
    p.sample(&format!("{name}_sum"), "", sum);
    p.sample(&format!("{name}_count"), "", total);
}
