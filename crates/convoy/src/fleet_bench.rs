//! `convoy fleet bench`: the data service's server-side targets measured
//! in one process: telemetry indexed per second on one core (segment
//! decode, last state, track, Parquet), and the map's queries through the
//! real HTTP API on a catalog of 1,000 vehicles with a 24 h track.
//! Upload throughput, freshness, budgets and crashes are measured with
//! real processes by `python -m convoy_lab.fleet bench`.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use convoy_catalog::{Catalog, IndexOutcome, LastState, NewSegment, TrackPoint, TRACK_BUCKET_NS};
use convoy_telemetry::segment::SegmentReader;
use convoy_telemetry::{Sample, SegmentWriter, Value};

#[derive(Args)]
pub struct BenchArgs {
    /// Samples in the indexing run.
    #[arg(long, default_value_t = 2_000_000)]
    pub samples: usize,
    /// Vehicles in the catalog for the query run.
    #[arg(long, default_value_t = 1000)]
    pub vehicles: usize,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Then load the web view for this many seconds: `oha` drives
    /// `/api/positions` with --connections keep-alive clients while uploads
    /// and last-state writes run beside it; also times `/metrics` and holds
    /// --subscribers live-feed subscriptions (issue 34's targets).
    #[arg(long, value_name = "SECS")]
    pub http_load: Option<u64>,
    /// Concurrent keep-alive clients of the load.
    #[arg(long, default_value_t = 100)]
    pub connections: usize,
    /// Live-feed (Server-Sent Events) subscribers held open.
    #[arg(long, default_value_t = 1000)]
    pub subscribers: usize,
    /// Aggregate rate of the uploads beside the load (`convoy send` to a
    /// `convoy serve`), in Mbit/s; 0: none.
    #[arg(long, default_value_t = 50.0)]
    pub upload_mbit: f64,
    /// The `oha` binary (default: $OHA, PATH, then .tools/bin).
    #[arg(long, value_name = "PATH")]
    pub oha: Option<std::path::PathBuf>,
}

fn segment(n: usize, t0: i64) -> Vec<u8> {
    let mut w = SegmentWriter::new(Vec::new()).expect("encoder");
    let paths = [
        convoy_telemetry::LATITUDE,
        convoy_telemetry::LONGITUDE,
        convoy_telemetry::SPEED,
        "Vehicle.Powertrain.CombustionEngine.Speed",
        "Vehicle.Exterior.AirTemperature",
    ];
    for i in 0..n {
        let s = Sample {
            t_ns: t0 + (i / paths.len()) as i64 * 100_000_000,
            path: paths[i % paths.len()].into(),
            value: Value::Number(45.0 + (i % 977) as f64 * 1e-5),
        };
        w.push(&s).expect("push");
    }
    w.finish().expect("finish")
}

/// A stored telemetry segment of `vehicle`, as the catalog queues it (the
/// benches index it without reading a file).
pub(crate) fn telemetry_segment<'a>(vehicle: &'a str, name: &'a str, now: i64) -> NewSegment<'a> {
    NewSegment {
        vehicle,
        name,
        kind: "telemetry",
        bytes: 1,
        blake3: "00",
        stored_ns: now,
        object: "x",
    }
}

/// What indexing one fix of `vehicle` at `lat` records: its last state
/// and `track`.
pub(crate) fn position_outcome(
    vehicle: &str,
    now: i64,
    lat: f64,
    track: Vec<TrackPoint>,
) -> IndexOutcome {
    IndexOutcome {
        samples: 1,
        last: Some(LastState {
            vehicle: vehicle.to_owned(),
            t_ns: now,
            lat,
            lon: 7.6,
            speed: Some(12.0),
            values: r#"{"Vehicle.Speed":12.0}"#.into(),
        }),
        track,
        object: "x".into(),
        ..IndexOutcome::default()
    }
}

/// One GET on a fresh connection: its time and the response's bytes.
pub(crate) fn http_get(
    addr: std::net::SocketAddr,
    path: &str,
    token: &str,
) -> Result<(Duration, usize)> {
    let start = Instant::now();
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    anyhow::ensure!(
        body.starts_with(b"HTTP/1.1 200"),
        "GET {path}: {}",
        String::from_utf8_lossy(&body[..body.len().min(200)])
    );
    Ok((start.elapsed(), body.len()))
}

pub(crate) fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

pub fn run(a: BenchArgs) -> Result<()> {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // 1. Indexing on one core: the indexer's own code on one segment file
    //    of a1.samples samples (1/10 s per fix, 5 signals).
    let t0 = convoy_telemetry::now_ns() - 86_400_000_000_000;
    let seg = segment(a.samples, t0);
    let start = Instant::now();
    let reader = SegmentReader::from_bytes(&seg, 1 << 32)?;
    let ex = convoy_ingest::extract::extract("bench", &reader)?;
    let n = ex.columns.t_ns.len();
    let pq = convoy_ingest::parquet_out::to_parquet(ex.columns)?;
    let index_s = start.elapsed().as_secs_f64();
    let per_s = n as f64 / index_s;

    // 2. The map's queries through the HTTP API, on a SQLite catalog.
    let dir = tempfile_dir()?;
    let db = dir.join("catalog.db");
    let mut c = convoy_catalog::SqliteCatalog::open(&db)?;
    let now = convoy_telemetry::now_ns();
    for v in 0..a.vehicles {
        let name = format!("v{v:04}");
        c.add_vehicle(&name, &format!("{v:064x}"), "vehicle", now)?;
        c.queue_segment(&telemetry_segment(&name, "s", now))?;
    }
    c.add_vehicle("ops", &format!("{:064x}", u64::MAX), "operator", now)?;
    let claimed = c.claim_pending(a.vehicles, now)?;
    for (i, row) in claimed.iter().enumerate() {
        // Vehicle 0 gets a full day of track; the others a last state.
        let track: Vec<TrackPoint> = if i == 0 {
            (0..86_400 / (TRACK_BUCKET_NS / 1_000_000_000))
                .map(|k| TrackPoint {
                    t_ns: now - 86_400_000_000_000 + k * TRACK_BUCKET_NS,
                    lat: 45.0 + k as f64 * 1e-5,
                    lon: 7.6,
                    speed: Some(30.0),
                })
                .collect()
        } else {
            Vec::new()
        };
        let outcome = position_outcome(&row.vehicle, now, 45.0 + i as f64 * 1e-3, track);
        c.finish_indexed(row.id, &outcome, now)?;
    }
    let key = [42u8; 32];
    let store = Arc::new(convoy_ingest::Store::open(None, &dir)?);
    let web = convoy_web::Web::start(convoy_web::WebConfig {
        listen: "127.0.0.1:0".parse()?,
        catalog_url: db.to_string_lossy().into_owned(),
        store,
        server_private: key,
        overlay: None,
        tls: None,
        extra_metrics: None,
        on_request: None,
        changes: None,
    })
    .map_err(anyhow::Error::msg)?;
    let token = convoy_web::token::issue(
        &key,
        &convoy_web::token::Claims {
            name: "ops".into(),
            expires: (convoy_telemetry::now_ns() / 1_000_000_000) as u64 + 3600,
            vehicle: None,
        },
    );
    let mut fleet = Vec::new();
    let mut track = Vec::new();
    let mut fleet_bytes = 0;
    let mut track_bytes = 0;
    for _ in 0..30 {
        let (d, b) = http_get(web.addr(), "/api/vehicles", &token)?;
        fleet.push(d.as_secs_f64() * 1e3);
        fleet_bytes = b;
        let (d, b) = http_get(web.addr(), "/api/track?vehicle=v0000", &token)?;
        track.push(d.as_secs_f64() * 1e3);
        track_bytes = b;
    }
    let load_result = a.http_load.map(|seconds| {
        crate::fleet_bench_http::run(
            &crate::fleet_bench_http::Target {
                web: web.addr(),
                token: &token,
                catalog: &db,
                vehicles: a.vehicles,
                scratch: &dir,
            },
            &crate::fleet_bench_http::LoadPlan {
                seconds,
                connections: a.connections,
                subscribers: a.subscribers,
                upload_bytes_per_s: (a.upload_mbit * 1e6 / 8.0) as u64,
                oha: a.oha.clone(),
            },
        )
    });
    drop(web);
    let _ = std::fs::remove_dir_all(&dir);
    let http_load = load_result.transpose()?;
    let mut doc = serde_json::json!({
        "load_average": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        "index": {"samples": n, "seconds": index_s, "samples_per_s": per_s, "parquet_bytes": pq.len(),
                  "segment_bytes": seg.len(), "raw_bytes": reader.raw_len(), "target_samples_per_s": 250_000},
        "fleet_query_ms": {"vehicles": a.vehicles, "p50": pct(fleet.clone(), 0.5), "p99": pct(fleet, 0.99), "bytes": fleet_bytes, "target_ms": 100},
        "track_query_ms": {"points": 86_400 / (TRACK_BUCKET_NS / 1_000_000_000), "p50": pct(track.clone(), 0.5), "p99": pct(track, 0.99), "bytes": track_bytes, "target_ms": 200},
    });
    if let Some(h) = &http_load {
        doc["http_load"] = h.clone();
    }
    if a.json {
        println!("{doc}");
    } else {
        println!(
            "load average: {}",
            doc["load_average"].as_str().unwrap_or("")
        );
        println!(
            "indexing, one core: {n} samples in {index_s:.2} s = {:.0} samples/s (target >= 250000); segment {} bytes zstd, {} raw, Parquet {} bytes",
            per_s,
            seg.len(),
            reader.raw_len(),
            pq.len()
        );
        println!(
            "fleet last positions, {} vehicles, HTTP: p50 {:.1} ms, p99 {:.1} ms (target < 100 ms)",
            a.vehicles,
            doc["fleet_query_ms"]["p50"].as_f64().unwrap_or(0.0),
            doc["fleet_query_ms"]["p99"].as_f64().unwrap_or(0.0)
        );
        println!(
            "one vehicle's 24 h track ({} points), HTTP: p50 {:.1} ms, p99 {:.1} ms (target < 200 ms)",
            doc["track_query_ms"]["points"],
            doc["track_query_ms"]["p50"].as_f64().unwrap_or(0.0),
            doc["track_query_ms"]["p99"].as_f64().unwrap_or(0.0)
        );
        if let Some(h) = &http_load {
            print_load(h);
        }
    }
    Ok(())
}

fn print_load(h: &serde_json::Value) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let p = &h["positions"];
    println!(
        "/api/positions under oha, {} vehicles, {} keep-alive clients, {} s: {:.0} requests/s, p50 {:.1} ms, p99 {:.1} ms, {} of {} answered 200 (target >= 2000 requests/s, p99 <= 100 ms)",
        p["vehicles"], p["connections"], p["seconds"], f(&p["requests_per_s"]), f(&p["p50_ms"]),
        f(&p["p99_ms"]), p["responses_200"], p["responses"]
    );
    let b = &h["beside"];
    println!(
        "  beside it: uploads {:.1} Mbit/s (asked {:.1}), {:.0} last states written/s",
        f(&b["uploaded_bytes_per_s"]) * 8e-6,
        f(&b["uploads_target_bytes_per_s"]) * 8e-6,
        f(&b["last_states_written_per_s"])
    );
    let m = &h["metrics_scrape_ms"];
    println!(
        "/metrics scrape: p50 {:.1} ms, p99 {:.1} ms, {} bytes (target <= 10 ms)",
        f(&m["p50"]),
        f(&m["p99"]),
        m["bytes"]
    );
    let l = &h["live_feed"];
    println!(
        "live feed: {} subscribers held, resident memory +{:.1} MB (target <= 50 MB)",
        l["subscribers"],
        f(&l["rss_growth_mb"])
    );
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("convoy-fleet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
