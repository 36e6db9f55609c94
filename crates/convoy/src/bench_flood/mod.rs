//! `convoy bench flood`: a `convoy serve` under a handshake flood from
//! forged source addresses, garbage, forged packets for a live connection
//! and replays of its real packets, while real clients keep connecting
//! and uploading. Everything goes to 127.0.0.1 only, for a bounded time
//! at bounded rates. Needs root (raw sockets).
//!
//! Printed against issue 20's targets: the server's peak memory, the real
//! clients' handshake p99, every flood datagram accounted for in the
//! server's counters, and the bytes the server sent to the forged sources
//! against the bytes they "sent" (the 3x anti-amplification limit).

mod raw;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_net::loadgen::{self, LoadOptions};
use convoy_proto::{Config, Endpoint, Keypair};

use crate::bench_server::{load_avg, RssSampler, SpawnedServer};
use crate::net_common::TransferOpts;
use raw::{Forged, RawSender, Sniffer};

#[derive(Args)]
pub struct FloodArgs {
    /// Seconds of flood (at most 60).
    #[arg(long, default_value_t = 10.0)]
    pub time: f64,
    /// Forged-source Initials per second (valid Noise messages, replayed
    /// with fresh connection ids).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(0..=200_000))]
    pub initials: u32,
    /// Garbage datagrams per second (random bytes; half of them shaped as
    /// short headers, some for the live connection's id).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u32).range(0..=200_000))]
    pub garbage: u32,
    /// Replays per second of packets recorded from a live connection.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(0..=200_000))]
    pub replays: u32,
    /// Real clients that connect (evenly over the flood) and upload.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=5_000))]
    pub legit: u32,
    /// Server worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    pub workers: u16,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub transfer: TransferOpts,
}

/// What the flood sent and saw.
#[derive(Default, Debug, serde::Serialize)]
struct FloodCounts {
    initials: u64,
    garbage: u64,
    forged: u64,
    replays: u64,
    /// Bytes sent from forged sources, and bytes the server sent to them.
    bytes_to_server: u64,
    bytes_back: u64,
    /// The highest (bytes back / bytes sent) of any one forged source.
    worst_source_ratio: f64,
}

/// A forged source: 127.a.b.c with a ≥ 1 (never the server's 127.0.0.1).
fn forged_source(rng: &mut u64) -> SocketAddrV4 {
    let r = convoy_link::splitmix64(rng);
    let ip = Ipv4Addr::new(
        127,
        1 + (r % 250) as u8,
        (r >> 8) as u8,
        (r >> 16) as u8 | 1,
    );
    SocketAddrV4::new(ip, 1024 + ((r >> 24) % 60_000) as u16)
}

/// Valid IK Initials for the server's key, built by real client endpoints.
fn initial_pool(server: SocketAddr, key: &[u8; 32], n: usize) -> Result<Vec<Vec<u8>>> {
    let mut pool = Vec::new();
    let mut buf = vec![0u8; 2048];
    for _ in 0..n {
        let mut ep = Endpoint::new(Config::new(Keypair::generate()), false)?;
        ep.connect(Duration::ZERO, server, Some(key))?;
        let t = ep
            .poll_transmit(Duration::ZERO, &mut buf)
            .context("a client endpoint sends its Initial")?;
        pool.push(buf[..t.len].to_vec());
    }
    Ok(pool)
}

struct Shared {
    stop: AtomicBool,
    /// Short-header packets of real clients, recorded for replay.
    recorded: Mutex<Vec<Vec<u8>>>,
    /// Bytes the server sent to each forged source.
    back: Mutex<HashMap<SocketAddrV4, u64>>,
}

fn sniff(mut sniffer: Sniffer, server: SocketAddrV4, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(seen) = sniffer.next() else { continue };
        if seen.dst == server && *seen.src.ip() == Ipv4Addr::LOCALHOST {
            // A real client's packet (the flood's sources are never 127.0.0.1).
            // One datagram (a GSO send is seen here as one big payload).
            if seen.payload.len() <= 1472 && seen.payload.first().is_some_and(|b| b & 0xc0 == 0x40)
            {
                let mut r = shared.recorded.lock().expect("lock");
                if r.len() < 512 {
                    r.push(seen.payload.to_vec());
                }
            }
        } else if seen.src == server && *seen.dst.ip() != Ipv4Addr::LOCALHOST {
            *shared
                .back
                .lock()
                .expect("lock")
                .entry(seen.dst)
                .or_default() += seen.payload.len() as u64;
        }
    }
}

fn flood(
    args: &FloodArgs,
    server: SocketAddrV4,
    pool: &[Vec<u8>],
    shared: &Shared,
) -> Result<(FloodCounts, HashMap<SocketAddrV4, u64>)> {
    let mut tx = RawSender::new()?;
    let mut counts = FloodCounts::default();
    let mut sent_by: HashMap<SocketAddrV4, u64> = HashMap::new();
    let mut rng = 0x5eed_u64;
    let start = Instant::now();
    let time = Duration::from_secs_f64(args.time);
    let mut buf = vec![0u8; 1500];
    while start.elapsed() < time && !shared.stop.load(Ordering::Relaxed) {
        let t = start.elapsed().as_secs_f64();
        let due = |rate: u32, done: u64| ((rate as f64 * t) as u64).saturating_sub(done).min(2_000);
        let recorded = shared.recorded.lock().expect("lock").clone();
        let mut send = |payload: &[u8], counts: &mut FloodCounts, rng: &mut u64| {
            let src = forged_source(rng);
            if tx
                .send(&Forged {
                    src,
                    dst: server,
                    payload,
                })
                .is_ok()
            {
                counts.bytes_to_server += payload.len() as u64;
                *sent_by.entry(src).or_default() += payload.len() as u64;
            }
        };
        for _ in 0..due(args.initials, counts.initials) {
            let r = convoy_link::splitmix64(&mut rng);
            let mut d = pool[(r % pool.len() as u64) as usize].clone();
            // A fresh destination id (cleartext): a new "client" each time.
            d[5..13].copy_from_slice(&r.to_be_bytes());
            send(&d, &mut counts, &mut rng);
            counts.initials += 1;
        }
        for _ in 0..due(args.garbage, counts.garbage + counts.forged) {
            let r = convoy_link::splitmix64(&mut rng);
            let len = 20 + (r % 1300) as usize;
            for b in buf[..len].iter_mut() {
                *b = convoy_link::splitmix64(&mut rng) as u8;
            }
            if r.is_multiple_of(3) && !recorded.is_empty() {
                // A forged packet for a live connection: its real header
                // (connection id) with a new packet number and junk.
                let real = &recorded[(r >> 8) as usize % recorded.len()];
                // (A 4-byte packet number: the type byte's low 2 bits.)
                let n = real.len().min(13);
                buf[..n].copy_from_slice(&real[..n]);
                buf[0] |= 0x03;
                buf[9..13].copy_from_slice(&((r >> 16) as u32 | 0x4000_0000).to_be_bytes());
                counts.forged += 1;
            } else {
                if r % 3 == 1 {
                    buf[0] = 0x40; // a short header for no connection
                } else if buf[0] & 0xc0 != 0 {
                    buf[0] = 0x07; // an unknown packet type
                }
                counts.garbage += 1;
            }
            send(&buf[..len], &mut counts, &mut rng);
        }
        if !recorded.is_empty() {
            for _ in 0..due(args.replays, counts.replays) {
                let r = convoy_link::splitmix64(&mut rng);
                let d = recorded[(r % recorded.len() as u64) as usize].clone();
                send(&d, &mut counts, &mut rng);
                counts.replays += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok((counts, sent_by))
}

pub fn run(args: FloodArgs) -> Result<()> {
    if !(args.time > 0.0 && args.time <= 60.0) {
        bail!("--time must be in (0, 60] seconds");
    }
    // Fail before starting anything if we cannot forge or watch.
    drop(RawSender::new()?);
    let sniffer = Sniffer::new()?;
    let server = SpawnedServer::start(&["--workers".into(), args.workers.to_string()])?;
    let SocketAddr::V4(server_v4) = server.addr else {
        bail!("the server is not on IPv4 loopback");
    };
    let pool = initial_pool(server.addr, &server.public_key, 64)?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        recorded: Mutex::new(Vec::new()),
        back: Mutex::new(HashMap::new()),
    });
    let sniff_thread = {
        let shared = shared.clone();
        std::thread::spawn(move || sniff(sniffer, server_v4, shared))
    };
    let sampler = RssSampler::start(server.pid());
    let time = Duration::from_secs_f64(args.time);
    // The real clients send without GSO, so the sniffer sees (and can
    // replay) single datagrams.
    let mut driver = args.transfer.driver();
    driver.gso = false;
    let legit = LoadOptions {
        server: server.addr,
        server_key: server.public_key,
        mode: args.transfer.mode,
        connections: args.legit as usize,
        telemetry_bps: 100_000,
        bulk: 0,
        bulk_bytes: 0,
        duration: time,
        ramp: time,
        threads: 2,
        handshake_timeout: Duration::from_secs(10),
        driver,
        idle: None,
    };
    if !args.json {
        eprintln!(
            "convoy bench flood: {} s of {} Initials/s, {} garbage/s, {} replays/s from forged sources to {}, {} real clients ...",
            args.time, args.initials, args.garbage, args.replays, server.addr, args.legit
        );
    }
    let flood_result = std::thread::scope(|s| {
        let f = s.spawn(|| flood(&args, server_v4, &pool, &shared));
        let report = loadgen::run(&legit);
        let f = f.join().expect("flood thread");
        (report, f)
    });
    shared.stop.store(true, Ordering::Relaxed);
    let _ = sniff_thread.join();
    let peak_sampled = sampler.finish();
    let load = load_avg();
    let outcome = server.stop()?;
    let (report, flood_out) = flood_result;
    let report = report?;
    let (mut counts, sent_by) = flood_out?;
    let back = shared.back.lock().expect("lock");
    counts.bytes_back = back.values().sum();
    counts.worst_source_ratio = back
        .iter()
        .map(|(a, &b)| b as f64 / sent_by.get(a).copied().unwrap_or(1).max(1) as f64)
        .fold(0.0, f64::max);
    let e = &outcome.summary["endpoint"];
    let n = |k: &str| e[k].as_u64().unwrap_or(0);
    let drops = outcome.summary["driver"]["receive_drops"]
        .as_u64()
        .unwrap_or(0);
    let peak_mb = outcome.peak_rss_kib.max(peak_sampled) as f64 / 1024.0;
    let refused = n("malformed") + n("unknown_connection") + n("auth_failures");
    let targets = [
        (
            "server memory <= 64 MB",
            peak_mb <= 64.0,
            format!("{peak_mb:.1} MB"),
        ),
        (
            "every real client connected and uploaded",
            report.failed == 0 && report.telemetry_streams_confirmed == args.legit as usize,
            format!("{} of {}", report.telemetry_streams_confirmed, args.legit),
        ),
        (
            "real clients' handshake p99 < 1 s",
            report.handshake_p99_ms < 1000.0,
            format!("{:.0} ms", report.handshake_p99_ms),
        ),
        (
            "forged Initials answered with Retry, not state",
            n("accepted") <= args.legit as u64 + 64 + (args.time as u64 + 1) * 500
                && n("retries_sent") + n("retries_dropped") > 0,
            format!("{} Retries, {} accepted", n("retries_sent"), n("accepted")),
        ),
        (
            "replays counted",
            counts.replays == 0 || n("replays") + drops >= counts.replays * 9 / 10,
            format!("{} of {} sent", n("replays"), counts.replays),
        ),
        (
            "garbage and forged packets counted",
            refused + drops >= (counts.garbage + counts.forged) * 9 / 10,
            format!("{refused} of {}", counts.garbage + counts.forged),
        ),
        (
            "no forged source got more than 3x its bytes",
            counts.worst_source_ratio <= 3.0,
            format!(
                "worst {:.3}, overall {:.4}",
                counts.worst_source_ratio,
                counts.bytes_back as f64 / counts.bytes_to_server.max(1) as f64
            ),
        ),
    ];
    if args.json {
        let v = serde_json::json!({
            "flood": counts, "legit": report, "server": outcome.summary,
            "server_cpu_seconds": outcome.cpu_seconds, "server_peak_rss_mb": peak_mb,
            "load_average": load,
            "targets": targets.iter().map(|(t, ok, v)| serde_json::json!({"target": t, "met": ok, "value": v})).collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        println!(
            "convoy bench flood: {} s, server {} workers",
            args.time, outcome.summary["workers"]
        );
        println!("  sent from forged sources: {} Initials, {} garbage, {} forged for a live connection, {} replays ({} bytes)", counts.initials, counts.garbage, counts.forged, counts.replays, counts.bytes_to_server);
        println!("  server counted: {e}");
        println!(
            "  server: CPU {:.2} s, peak RSS {peak_mb:.1} MB, receive drops {drops}",
            outcome.cpu_seconds
        );
        println!("  real clients: {} connected, {} failed, handshake p50 {:.0} ms p99 {:.0} ms max {:.0} ms", report.established, report.failed, report.handshake_p50_ms, report.handshake_p99_ms, report.handshake_max_ms);
        println!(
            "  bytes back to forged sources {} of {} sent to the server",
            counts.bytes_back, counts.bytes_to_server
        );
        for err in &report.errors {
            println!("  error: {err}");
        }
        println!("targets (load average {load})");
        for (t, ok, v) in &targets {
            println!("  {} {t}: {v}", if *ok { "met   " } else { "MISSED" });
        }
    }
    if targets.iter().any(|(_, ok, _)| !ok) {
        bail!("the server did not hold up under the flood");
    }
    Ok(())
}
