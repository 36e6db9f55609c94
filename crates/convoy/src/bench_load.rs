//! `convoy bench load`: one `convoy serve` and a fleet of connections to
//! it on this machine, with the targets of issue 20 checked.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use convoy_net::loadgen::{self, LoadOptions};

use crate::bench_server::{load_avg, proc_status_kib, RssSampler, SpawnedServer};
use crate::net_common::{parse_size, TransferOpts};

#[derive(Args)]
pub struct LoadArgs {
    /// Concurrent vehicle connections.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub connections: u32,
    /// Telemetry per connection, bits per second (e.g. 100kbit).
    #[arg(long, default_value = "100kbit", value_parser = parse_rate)]
    pub telemetry: u64,
    /// How many of the connections upload a bulk file instead.
    #[arg(long, default_value_t = 20)]
    pub bulk: u32,
    /// Size of each bulk upload.
    #[arg(long, default_value = "2MB", value_parser = parse_size)]
    pub bulk_size: u64,
    /// Seconds of telemetry per connection.
    #[arg(long, default_value_t = 20.0)]
    pub time: f64,
    /// Seconds over which the connections are started.
    #[arg(long, default_value_t = 2.0)]
    pub ramp: f64,
    /// Server worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    pub workers: u16,
    /// Client threads (each one socket) of the load generator.
    #[arg(long, default_value_t = 4)]
    pub client_threads: u16,
    /// Instead of uploading, keep every connection open and idle this many
    /// seconds, and print the CPU an idle connection costs each side.
    #[arg(long, value_name = "SECONDS")]
    pub idle: Option<f64>,
    /// Registered vehicles speaking the agent's upload protocol to a
    /// `convoy serve --fleet` (registry, indexer), a telemetry segment each
    /// every --every seconds, instead of raw uploads: segments confirmed,
    /// stored and indexed once, confirmation latency, the indexer's lag,
    /// and the server's memory and CPU per vehicle.
    #[arg(long)]
    pub fleet: bool,
    /// With --fleet: seconds between a vehicle's segments (each holds a
    /// position fix per second).
    #[arg(long, default_value_t = 1.0, requires = "fleet")]
    pub every: f64,
    /// With --fleet: niceness of the client threads (e.g. 10), so the
    /// server under test gets the cores first on a small machine.
    #[arg(long, default_value_t = 0, requires = "fleet", value_parser = clap::value_parser!(i32).range(0..=19))]
    pub client_nice: i32,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub transfer: TransferOpts,
}

fn parse_rate(s: &str) -> Result<u64, String> {
    let bps = convoy_units::parse_rate_bps(s).map_err(|e| e.to_string())?;
    if bps > 10_000_000_000 {
        return Err(format!("{s:?}: must be between 1 bit/s and 10 Gbit/s"));
    }
    Ok(bps)
}

pub fn run(args: LoadArgs) -> Result<()> {
    if args.fleet {
        return crate::bench_fleet_load::run(&args);
    }
    if !(args.time > 0.0 && args.time <= 3600.0 && (0.0..=600.0).contains(&args.ramp)) {
        bail!("--time must be in (0, 3600] and --ramp in [0, 600] seconds");
    }
    let workers = args.workers.to_string();
    let server = SpawnedServer::start(&[
        "--workers".into(),
        workers,
        "--mode".into(),
        args.transfer.mode.name().into(),
    ])?;
    let opts = LoadOptions {
        server: server.addr,
        server_key: server.public_key,
        mode: args.transfer.mode,
        connections: args.connections as usize,
        telemetry_bps: args.telemetry,
        bulk: (args.bulk as usize).min(args.connections as usize),
        bulk_bytes: args.bulk_size,
        duration: Duration::from_secs_f64(args.time),
        ramp: Duration::from_secs_f64(args.ramp),
        threads: usize::from(args.client_threads.max(1)),
        handshake_timeout: Duration::from_secs(10),
        driver: args.transfer.driver(),
        idle: args.idle.map(Duration::from_secs_f64),
    };
    if let Some(idle) = args.idle {
        if !(10.0..=3600.0).contains(&idle) {
            bail!("--idle must be in [10, 3600] seconds");
        }
        return idle_run(&args, &opts, server, idle);
    }
    if !args.json {
        eprintln!(
            "convoy bench load: {} connections ({} bulk of {} bytes) to {} for {} s ...",
            opts.connections, opts.bulk, opts.bulk_bytes, server.addr, args.time
        );
    }
    let sampler = RssSampler::start(server.pid());
    let report = loadgen::run(&opts);
    let peak_rss_sampled = sampler.finish();
    let load = load_avg();
    let outcome = server.stop()?;
    let report = report?;
    let driver = &outcome.summary["driver"];
    let drops = driver["receive_drops"].as_u64().unwrap_or(0);
    let per_conn_kib = outcome.peak_rss_kib as f64 / opts.connections as f64;
    let all_up = report.established == opts.connections && report.failed == 0;
    let delivered = report.telemetry_bytes_confirmed == report.telemetry_bytes_sent
        && report.bulk_stored == opts.bulk;
    let targets = [
        (
            "every connection up and finished",
            all_up,
            format!(
                "{} of {}",
                report.established - report.failed.min(report.established),
                opts.connections
            ),
        ),
        (
            "every telemetry byte and bulk upload confirmed",
            delivered,
            format!(
                "{} of {} B, {} of {} uploads",
                report.telemetry_bytes_confirmed,
                report.telemetry_bytes_sent,
                report.bulk_stored,
                opts.bulk
            ),
        ),
        (
            "no receive-buffer drops at the server",
            drops == 0,
            drops.to_string(),
        ),
        (
            "handshake p99 < 2 s",
            report.handshake_p99_ms < 2000.0,
            format!("{:.0} ms", report.handshake_p99_ms),
        ),
        (
            "server memory <= 1 MB per connection",
            per_conn_kib <= 1024.0,
            format!("{:.0} KiB", per_conn_kib),
        ),
    ];
    if args.json {
        let v = serde_json::json!({
            "client": report, "server": outcome.summary,
            "server_cpu_seconds": outcome.cpu_seconds,
            "server_peak_rss_kib": outcome.peak_rss_kib,
            "server_peak_rss_sampled_kib": peak_rss_sampled,
            "server_rss_per_connection_kib": per_conn_kib,
            "load_average": load,
            "targets": targets.iter().map(|(n, ok, v)| serde_json::json!({"target": n, "met": ok, "value": v})).collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        println!(
            "convoy bench load: {} connections, {} workers, mode {}",
            opts.connections,
            outcome.summary["workers"],
            opts.mode.name()
        );
        println!(
            "  established {} failed {} in {:.1} s",
            report.established, report.failed, report.seconds
        );
        println!(
            "  handshake p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            report.handshake_p50_ms, report.handshake_p99_ms, report.handshake_max_ms
        );
        println!("  telemetry {} B sent, {} B confirmed by the server ({} streams); bulk {} of {} stored", report.telemetry_bytes_sent, report.telemetry_bytes_confirmed, report.telemetry_streams_confirmed, report.bulk_stored, opts.bulk);
        println!("  server: CPU {:.2} s, peak RSS {} KiB ({:.0} KiB per connection), receive drops {}, datagrams in {} / out {}", outcome.cpu_seconds, outcome.peak_rss_kib, per_conn_kib, drops, driver["datagrams_received"], driver["datagrams_sent"]);
        println!("  server refused: {}", outcome.summary["endpoint"]);
        println!("  client receive drops {}", report.client_receive_drops);
        for e in &report.errors {
            println!("  error: {e}");
        }
        println!("targets (load average {load})");
        for (name, ok, value) in &targets {
            println!(
                "  {} {name}: {value}",
                if *ok { "met   " } else { "MISSED" }
            );
        }
    }
    if !all_up || !delivered {
        bail!("the load test lost connections or data");
    }
    Ok(())
}

/// CPU seconds (user + system) of a process, from /proc/PID/stat.
fn process_cpu(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    // After the command: state is field 3, utime 14 and stime 15.
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(14) + ticks(15)) / hz.max(1.0)
}

/// Issue 35's memory target: a server holds 10,000 mostly idle vehicles
/// in at most 1 GB.
const IDLE_TARGET_CONNECTIONS: f64 = 10_000.0;
const IDLE_TARGET_KIB: f64 = 1024.0 * 1024.0;

/// Every connection up, then idle: the CPU both sides spend on them,
/// measured over the idle window after the handshakes, and the server's
/// resident memory at the window's end (all of them held) and at its peak.
fn idle_run(args: &LoadArgs, opts: &LoadOptions, server: SpawnedServer, idle: f64) -> Result<()> {
    let pid = server.pid();
    // What the server holds before any connection: the part of its memory
    // that does not grow with the fleet.
    let base_kib = proc_status_kib(pid, "VmRSS").unwrap_or(0);
    let me = std::process::id();
    let settle = opts.ramp + Duration::from_secs(3);
    let window = Duration::from_secs_f64(idle) - Duration::from_secs(4);
    let measure = std::thread::spawn(move || {
        std::thread::sleep(settle);
        let (s0, c0) = (process_cpu(pid), process_cpu(me));
        std::thread::sleep(window);
        let (s1, c1) = (process_cpu(pid), process_cpu(me));
        let rss_kib = proc_status_kib(pid, "VmRSS").unwrap_or(0);
        (s1 - s0, c1 - c0, rss_kib)
    });
    let report = loadgen::run(opts);
    let (server_cpu, client_cpu, rss_kib) = measure.join().unwrap_or((f64::NAN, f64::NAN, 0));
    let load = load_avg();
    let outcome = server.stop()?;
    let report = report?;
    let secs = window.as_secs_f64();
    let n = opts.connections as f64;
    let per_conn = |cpu: f64| cpu / secs / n * 100.0;
    let cpu_met = per_conn(server_cpu).max(per_conn(client_cpu)) <= 0.1;
    // Each connection's share of what the server grew by, and the server
    // that share makes at the target's 10,000 connections.
    let kib_per_conn = outcome.peak_rss_kib.saturating_sub(base_kib) as f64 / n;
    let at_target_kib = base_kib as f64 + kib_per_conn * IDLE_TARGET_CONNECTIONS;
    let memory_met = outcome.peak_rss_kib > 0 && at_target_kib <= IDLE_TARGET_KIB;
    let target = cpu_met && memory_met;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "connections": opts.connections, "established": report.established, "window_s": secs,
                "server_cpu_s": server_cpu, "client_cpu_s": client_cpu,
                "server_core_percent_per_connection": per_conn(server_cpu),
                "client_core_percent_per_connection": per_conn(client_cpu),
                "server_base_rss_kib": base_kib,
                "server_rss_kib": rss_kib, "server_peak_rss_kib": outcome.peak_rss_kib,
                "server_kib_per_connection": kib_per_conn,
                "server_kib_at_10000_connections": at_target_kib,
                "cpu_target_met": cpu_met, "memory_target_met": memory_met,
                "server": outcome.summary, "load_average": load, "target_met": target,
            })
        );
    } else {
        println!(
            "convoy bench load --idle: {} connections up ({} failed), idle for {secs:.0} s",
            report.established, report.failed
        );
        println!(
            "  server: {server_cpu:.3} s CPU = {:.4} % of a core per connection",
            per_conn(server_cpu)
        );
        println!(
            "  clients (this process): {client_cpu:.3} s CPU = {:.4} % of a core per connection",
            per_conn(client_cpu)
        );
        println!(
            "  server memory: {:.1} MB before, {:.1} MB with every connection up, peak {:.1} MB: {kib_per_conn:.1} KiB per connection, {:.0} MB at 10,000",
            base_kib as f64 / 1024.0,
            rss_kib as f64 / 1024.0,
            outcome.peak_rss_kib as f64 / 1024.0,
            at_target_kib / 1024.0
        );
        let mark = |met: bool| if met { "met   " } else { "MISSED" };
        println!("targets (load average {load})");
        println!(
            "  {} an idle connection <= 0.1 % of a core per side",
            mark(cpu_met)
        );
        println!(
            "  {} the server holds 10,000 idle connections in <= 1 GB",
            mark(memory_met)
        );
    }
    if report.established != opts.connections {
        bail!("not every connection came up");
    }
    Ok(())
}
