//! `convoy fleet bench --http-load SECS`: the web view under a real load
//! generator, with the service's other work running beside it on the same
//! machine. Three figures, each against issue 34's target:
//!
//! - `/api/positions` (1,000 vehicles) driven by `oha` with 100 concurrent
//!   keep-alive clients: requests per second and p99 latency. Meanwhile a
//!   `convoy serve` child takes uploads from `convoy send` children at a
//!   fixed aggregate rate, and a writer thread records a new last state
//!   for every vehicle once a second (what the indexer writes when 1,000
//!   vehicles send telemetry at 1 Hz), so the queries contend for the CPU
//!   and the catalog as they would in service.
//! - `/metrics`, scraped sequentially with those 1,000 vehicles registered.
//! - `/api/events` (the live feed, Server-Sent Events): 1,000 subscribers
//!   held open, and the resident memory they cost.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use convoy_catalog::Catalog;

use crate::fleet_bench::{position_outcome, telemetry_segment};
use serde_json::{json, Value};

use crate::bench_server::{proc_status_kib, SpawnedServer};

/// What the load phase is given by the query bench that seeded the catalog.
pub struct Target<'a> {
    pub web: SocketAddr,
    pub token: &'a str,
    pub catalog: &'a Path,
    pub vehicles: usize,
    pub scratch: &'a Path,
}

/// The load phase's knobs.
pub struct LoadPlan {
    pub seconds: u64,
    pub connections: usize,
    pub subscribers: usize,
    /// Aggregate rate of the uploads beside the queries, bytes/s.
    pub upload_bytes_per_s: u64,
    pub oha: Option<PathBuf>,
}

/// Where `oha` is: `--oha`, `$OHA`, `PATH`, or `.tools/bin` (where `make
/// oha` installs it).
fn find_oha(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("OHA") {
        return Ok(PathBuf::from(p));
    }
    let mut places: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    places.push(PathBuf::from(".tools/bin"));
    places
        .into_iter()
        .map(|d| d.join("oha"))
        .find(|p| p.is_file())
        .context("oha (the HTTP load generator) is not installed: `make oha` installs it into .tools/bin, or give --oha PATH")
}

pub fn run(t: &Target<'_>, plan: &LoadPlan) -> Result<Value> {
    let oha = find_oha(plan.oha.as_deref())?;
    let metrics = scrape_metrics(t.web, t.token, 200)?;
    let sse = hold_subscribers(t.web, t.token, plan.subscribers)?;

    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, writes) = (stop.clone(), writes.clone());
        let db = t.catalog.to_path_buf();
        let n = t.vehicles;
        std::thread::spawn(move || last_state_writer(&db, n, &stop, &writes))
    };
    let uploads = Uploads::start(t.scratch, plan.upload_bytes_per_s, stop.clone())?;
    let started = Instant::now();
    let out = Command::new(&oha)
        .args(["--no-tui", "--output-format", "json", "-c"])
        .arg(plan.connections.to_string())
        .arg("-z")
        .arg(format!("{}s", plan.seconds))
        .args(["-H", &format!("Authorization: Bearer {}", t.token)])
        .arg(format!("http://{}/api/positions", t.web))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", oha.display()));
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let writer_result = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))?;
    let uploaded = uploads.finish()?;
    // Over the writer's own run, which starts before the load's clock.
    let writer_seconds = writer_result?;
    let out = out?;
    if !out.status.success() {
        bail!(
            "oha failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        );
    }
    let doc: Value = serde_json::from_slice(&out.stdout).context("oha's JSON")?;
    let summary = &doc["summary"];
    let percentile = |p: &str| doc["latencyPercentiles"][p].as_f64().unwrap_or(f64::NAN) * 1e3;
    let ok = doc["statusCodeDistribution"]["200"].as_u64().unwrap_or(0);
    let total: u64 = doc["statusCodeDistribution"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    Ok(json!({
        "positions": {
            "vehicles": t.vehicles,
            "connections": plan.connections,
            "seconds": plan.seconds,
            "requests_per_s": summary["requestsPerSec"].as_f64().unwrap_or(f64::NAN),
            "p50_ms": percentile("p50"),
            "p99_ms": percentile("p99"),
            "responses": total,
            "responses_200": ok,
            "errors": doc["errorDistribution"],
            "target": {"requests_per_s": 2000, "p99_ms": 100},
        },
        "beside": {
            "last_states_written_per_s": writes.load(Ordering::Relaxed) as f64 / writer_seconds,
            "uploaded_bytes_per_s": uploaded as f64 / elapsed,
            "uploads_target_bytes_per_s": plan.upload_bytes_per_s,
        },
        "metrics_scrape_ms": metrics,
        "live_feed": sse,
    }))
}

/// One new last state per vehicle per second, through the catalog calls
/// the server makes, in ticks of 50 vehicles: the tick's segments queued
/// (one transaction, as uploads that arrived together), claimed, and
/// recorded indexed in one transaction, as the indexer's group commit
/// does (`convoy_ingest::Indexer`). Before that commit grouping, each
/// segment was queued and indexed in a transaction of its own.
fn last_state_writer(
    db: &Path,
    vehicles: usize,
    stop: &AtomicBool,
    writes: &AtomicU64,
) -> Result<f64> {
    let mut c = convoy_catalog::SqliteCatalog::open(db)?;
    let batch = 50.min(vehicles.max(1));
    let mut next = 0usize;
    let mut seq = 0u64;
    // Every vehicle once a second, against a fixed schedule: a tick that
    // ran late is made up at once instead of pushing every later one back
    // (sleeping the rest of each tick undercounted a loaded machine).
    let period = Duration::from_secs_f64(batch as f64 / vehicles.max(1) as f64);
    let began = Instant::now();
    let mut due = began;
    while !stop.load(Ordering::Relaxed) {
        let now = convoy_telemetry::now_ns();
        let names: Vec<(String, String)> = (0..batch)
            .map(|_| {
                let name = format!("v{:04}", next % vehicles);
                next += 1;
                seq += 1;
                (name, format!("load-{seq}"))
            })
            .collect();
        let segs: Vec<_> = names
            .iter()
            .map(|(v, seg)| telemetry_segment(v, seg, now))
            .collect();
        c.queue_segments(&segs)?;
        let done: Vec<_> = c
            .claim_pending(batch, now)?
            .into_iter()
            .map(|row| {
                let lat = 45.0 + (seq % 1000) as f64 * 1e-4;
                let out = position_outcome(&row.vehicle, now, lat, Vec::new());
                (row.id, convoy_catalog::Finished::Indexed(out))
            })
            .collect();
        c.finish_batch(&done, now)?;
        writes.fetch_add(done.len() as u64, Ordering::Relaxed);
        due += period;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(began.elapsed().as_secs_f64())
}

/// `convoy send` children uploading 1 MB files to a `convoy serve` child,
/// one at a time, spaced so the aggregate is the plan's rate.
struct Uploads {
    server: Option<SpawnedServer>,
    thread: Option<std::thread::JoinHandle<Result<u64>>>,
}

impl Uploads {
    fn start(scratch: &Path, bytes_per_s: u64, stop: Arc<AtomicBool>) -> Result<Uploads> {
        if bytes_per_s == 0 {
            return Ok(Uploads {
                server: None,
                thread: None,
            });
        }
        let server = SpawnedServer::start(&[])?;
        let file = scratch.join("upload.bin");
        let size = 1u64 << 20;
        std::fs::write(
            &file,
            (0..size).map(|i| (i * 7 % 251) as u8).collect::<Vec<_>>(),
        )?;
        let exe = std::env::current_exe()?;
        let addr = server.addr.to_string();
        let key = convoy_proto::crypto::hex(&server.public_key);
        let thread = std::thread::spawn(move || -> Result<u64> {
            let mut sent = 0u64;
            let spacing = Duration::from_secs_f64(size as f64 / bytes_per_s as f64);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let began = Instant::now();
                let st = Command::new(&exe)
                    .args(["send", "--single-path", "--prefix"])
                    .arg(format!("u{i}"))
                    .arg(&file)
                    .arg(&addr)
                    .args(["--server-key", &key])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()?;
                anyhow::ensure!(st.success(), "convoy send failed during the load");
                sent += size;
                i += 1;
                std::thread::sleep(spacing.saturating_sub(began.elapsed()));
            }
            Ok(sent)
        });
        Ok(Uploads {
            server: Some(server),
            thread: Some(thread),
        })
    }

    fn finish(mut self) -> Result<u64> {
        let sent = match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("uploader panicked"))??,
            None => 0,
        };
        if let Some(s) = self.server.take() {
            s.stop()?;
        }
        Ok(sent)
    }
}

/// `/metrics` fetched `n` times in a row, each on a fresh connection (the
/// token is ignored there).
fn scrape_metrics(web: SocketAddr, token: &str, n: usize) -> Result<Value> {
    let mut took = Vec::with_capacity(n);
    let mut bytes = 0;
    for _ in 0..n {
        let (d, b) = crate::fleet_bench::http_get(web, "/metrics", token)?;
        took.push(d.as_secs_f64() * 1e3);
        bytes = b;
    }
    Ok(json!({
        "scrapes": n,
        "p50": crate::fleet_bench::pct(took.clone(), 0.5),
        "p99": crate::fleet_bench::pct(took, 0.99),
        "bytes": bytes,
        "target_ms": 10,
    }))
}

/// Opens `n` live-feed subscriptions, holds them for two seconds, and
/// reports the resident memory this process grew by (the web view runs in
/// it; the subscribers' socket buffers are kernel memory, not counted).
fn hold_subscribers(web: SocketAddr, token: &str, n: usize) -> Result<Value> {
    let rss = || proc_status_kib(std::process::id(), "VmRSS").unwrap_or(0);
    let before = rss();
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let mut s = TcpStream::connect(web).with_context(|| format!("subscriber {i}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        )?;
        let mut r = BufReader::new(s);
        let mut status = String::new();
        r.read_line(&mut status)?;
        anyhow::ensure!(
            status.starts_with("HTTP/1.1 200"),
            "subscriber {i}: {status}"
        );
        held.push(r);
    }
    std::thread::sleep(Duration::from_secs(2));
    let after = rss();
    let open = held.len();
    // Held until here; the subscriptions close when dropped.
    drop(held);
    Ok(json!({
        "subscribers": open,
        "rss_growth_mb": (after.saturating_sub(before)) as f64 / 1024.0,
        "target_mb": 50,
    }))
}
