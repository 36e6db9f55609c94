//! `convoy perf`: memory-to-memory throughput like iperf3, and
//! `--loopback-bench`, which runs a server, a client and iperf3 (TCP) on
//! loopback and prints the comparison.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_net::{load_keypair, parse_server_key, Client, PerfAmount, PerfInterval, ServerOptions};

use crate::net_common::{parse_size, path_bytes, resolve, PathOpts, TransferOpts};

#[derive(Args)]
pub struct PerfArgs {
    /// Server address for the client (HOST[:PORT], port 4433 by default).
    pub addr: Option<String>,
    /// Run the server side: count what clients send, until killed.
    #[arg(long)]
    pub server: bool,
    /// Server: address and port to listen on.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:4433")]
    pub listen: String,
    /// Server: its private key file (from `convoy keygen`).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Server: exit after one client.
    #[arg(long)]
    pub once: bool,
    /// Client: the server's public key, 64 hex digits or a .pub file.
    #[arg(long, value_name = "KEY")]
    pub server_key: Option<String>,
    /// Client: send this many bytes (e.g. 10MB, 1GB).
    #[arg(long, value_parser = parse_size, conflicts_with = "time")]
    pub bytes: Option<u64>,
    /// Client: send for this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub time: Option<f64>,
    /// Client: one JSON document on stdout (per-second lines go to
    /// stderr), with `paths` and `path_events`. Server: one JSON object per
    /// event; each client's `perf_done` has `stalls` (gaps of 20 ms or more
    /// between reads) and `timeline` (bytes per `timeline_bin_s`: 10 ms,
    /// doubled whenever a run outgrows 131,072 bins).
    #[arg(long)]
    pub json: bool,
    /// Start a server and a client on 127.0.0.1, then iperf3 over TCP for
    /// the same time, and print both with their CPU time and the ratio.
    #[arg(long)]
    pub loopback_bench: bool,
    #[command(flatten)]
    pub paths: PathOpts,
    #[command(flatten)]
    pub transfer: TransferOpts,
}

pub fn run(args: PerfArgs) -> Result<()> {
    if args.loopback_bench {
        return loopback_bench(&args);
    }
    if args.server {
        let key = args.key.as_ref().context("--server needs --key FILE")?;
        let mut opts = ServerOptions::new(resolve(&args.listen)?, load_keypair(key)?);
        opts.mode = args.transfer.mode;
        opts.once = args.once;
        opts.idle_timeout = args.transfer.idle()?;
        opts.driver = args.transfer.driver();
        opts.aead = args.transfer.aead;
        // A perf server stores and serves no files (no `dir`): letting any
        // client measure against it exposes nothing.
        opts.open = true;
        crate::logging::LogOpts::default().init(if args.json { "warn" } else { "info" })?;
        return crate::net_cmd::run_server(opts, args.json, None, None);
    }
    let addr = args
        .addr
        .as_deref()
        .context("give the server address (or --server to run one)")?;
    let key = args
        .server_key
        .as_deref()
        .context("the client needs --server-key KEY")?;
    let amount = amount(&args)?;
    let report = client(&args, resolve(addr)?, parse_server_key(key)?, amount)?;
    print_report(&report, args.json)
}

fn amount(args: &PerfArgs) -> Result<PerfAmount> {
    Ok(match (args.bytes, args.time) {
        (Some(b), _) => PerfAmount::Bytes(b),
        (None, Some(t)) if t > 0.0 && t <= 86_400.0 => PerfAmount::Time(Duration::from_secs_f64(t)),
        (None, Some(_)) => bail!("--time must be in (0, 86400] seconds"),
        (None, None) => bail!("say how much to send: --bytes N (e.g. 100MB) or --time SECONDS"),
    })
}

fn client(
    args: &PerfArgs,
    server: std::net::SocketAddr,
    key: [u8; 32],
    amount: PerfAmount,
) -> Result<convoy_net::PerfReport> {
    let mut c = Client::connect(args.transfer.client(server, key, &args.paths)?)?;
    let json = args.json;
    let mut line = |iv: &PerfInterval| {
        eprintln!(
            "{:5.1}-{:5.1} s  {:8.1} Mbit/s  rtt {:7.3} ms  sent {:7}  lost {:5}  rate {:8.1} Mbit/s{}",
            iv.start_s, iv.end_s, iv.goodput_mbps, iv.rtt_ms, iv.packets_sent, iv.packets_lost, iv.rate_mbps,
            path_bytes(&iv.paths)
        );
        let _ = json;
    };
    // The report names the rate control too when the priority replaced it.
    let mode = match args.transfer.priority {
        convoy_proto::cc::Priority::Normal => args.transfer.mode.name().to_owned(),
        p => format!("{}+{}", args.transfer.mode.name(), p.name()),
    };
    let report = c.perf(amount, &mode, &mut line)?;
    c.close();
    Ok(report)
}

fn print_report(r: &convoy_net::PerfReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    let p = &r.driver.pacing_lateness;
    println!(
        "{} bytes in {:.2} s: {:.1} Mbit/s goodput, rtt mean {:.3} ms min {:.3} ms, {} packets sent, {} lost\n\
         write to read: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms ({} samples)\n\
         CPU: client {:.2} s, server {} (packets sealed with {})\n\
         pacing lateness: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs, {:.1} % within 50 µs ({} wake-ups)",
        r.bytes,
        r.seconds,
        r.goodput_mbps,
        r.rtt_ms.mean,
        r.rtt_ms.min,
        r.packets_sent,
        r.packets_lost,
        r.latency_ms.p50,
        r.latency_ms.p95,
        r.latency_ms.p99,
        r.latency_ms.samples,
        r.cpu_seconds,
        r.server_cpu_seconds.map_or("?".into(), |s| format!("{s:.2} s")),
        r.aead,
        p.p50_us,
        p.p99_us,
        p.max_us,
        p.within_50us * 100.0,
        p.samples
    );
    for p in r.paths.iter().filter(|p| p.interface.is_some()) {
        println!(
            "path {} {}{}: {}, sent {:.2} MB, received {:.2} MB, {} packets lost, srtt {:.1} ms, rate {:.1} Mbit/s",
            p.id,
            p.interface.as_deref().unwrap_or("?"),
            if p.backup { " (backup)" } else { "" },
            p.state,
            p.bytes_sent as f64 / 1e6,
            p.bytes_received as f64 / 1e6,
            p.packets_lost,
            p.srtt_ms,
            p.rate_bps as f64 / 1e6
        );
    }
    Ok(())
}

/// Kills and reaps a child when dropped, so no server outlives the bench.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn free_port() -> Result<u16> {
    let s = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let t = std::net::TcpListener::bind(("127.0.0.1", s.local_addr()?.port()));
    let port = s.local_addr()?.port();
    drop(t);
    Ok(port)
}

fn loopback_bench(args: &PerfArgs) -> Result<()> {
    let secs = args.time.unwrap_or(10.0);
    let dir = std::env::temp_dir().join(format!("convoy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("server.key");
    let _ = std::fs::remove_file(&key);
    let _ = std::fs::remove_file(dir.join("server.key.pub"));
    let kp = convoy_proto::Keypair::generate();
    convoy_net::write_keypair(&key, &kp)?;
    let exe = std::env::current_exe()?;
    let port = free_port()?;
    let t = &args.transfer;
    let mut server = Reaped(
        Command::new(&exe)
            .args(["perf", "--server", "--once", "--json", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--key")
            .arg(&key)
            .args(["--mode", t.mode.name(), "--batch"])
            .arg(t.batch.to_string())
            .args(["--gso", on_off(t.gso), "--gro", on_off(t.gro)])
            .args(["--aead", t.aead.name()])
            .arg(format!("--spin-us={}", t.spin_us))
            .args(t.no_kernel_timestamps.then_some("--no-kernel-timestamps"))
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the perf server")?,
    );
    std::thread::sleep(Duration::from_millis(200));
    let amount = match args.bytes {
        Some(b) => PerfAmount::Bytes(b),
        None => PerfAmount::Time(Duration::from_secs_f64(secs)),
    };
    let addr = format!("127.0.0.1:{port}").parse()?;
    let convoy = client(args, addr, kp.public, amount)?;
    let server_driver = server_driver_report(&mut server.0);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let tcp = iperf3(secs)?;
    let ratio = convoy.goodput_mbps / tcp.goodput_mbps.max(1e-9);
    // Issue 20's target: CPU per byte, both ends together, against TCP's.
    let convoy_ns_per_byte = (convoy.cpu_seconds + convoy.server_cpu_seconds.unwrap_or(f64::NAN))
        / convoy.bytes.max(1) as f64
        * 1e9;
    let tcp_ns_per_byte =
        (tcp.client_cpu_seconds + tcp.server_cpu_seconds) / tcp.bytes.max(1.0) * 1e9;
    let cpu_ratio = convoy_ns_per_byte / tcp_ns_per_byte.max(1e-12);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "convoy": convoy,
                "convoy_server_driver": server_driver,
                "iperf3": tcp,
                "ratio": ratio,
                "cpu_per_byte_ratio": cpu_ratio,
                "loadavg": loadavg(),
            })
        );
        return Ok(());
    }
    let pct = |cpu: f64, wall: f64| 100.0 * cpu / wall.max(1e-9);
    let offload = match (convoy.driver.gso, convoy.driver.gro) {
        (true, true) => "GSO+GRO",
        (true, false) => "GSO",
        (false, true) => "GRO",
        (false, false) => "no offload",
    };
    let server_cpu = convoy.server_cpu_seconds.unwrap_or(f64::NAN);
    println!(
        "\n{:<42} {:>14} {:>18} {:>18} {:>14}",
        "loopback, 127.0.0.1", "goodput Mbit/s", "client CPU", "server CPU", "CPU ns/byte"
    );
    println!(
        "{:<42} {:>14.1} {:>9.2} s ({:>3.0} %) {:>9.2} s ({:>3.0} %) {:>6.2} + {:.2}",
        format!("convoy {} ({offload}, {})", convoy.mode, convoy.aead),
        convoy.goodput_mbps,
        convoy.cpu_seconds,
        pct(convoy.cpu_seconds, convoy.seconds),
        server_cpu,
        pct(server_cpu, convoy.seconds),
        convoy.cpu_seconds / convoy.bytes.max(1) as f64 * 1e9,
        server_cpu / convoy.bytes.max(1) as f64 * 1e9,
    );
    println!(
        "{:<42} {:>14.1} {:>9.2} s ({:>3.0} %) {:>9.2} s ({:>3.0} %) {:>6.2} + {:.2}",
        "iperf3 TCP",
        tcp.goodput_mbps,
        tcp.client_cpu_seconds,
        pct(tcp.client_cpu_seconds, tcp.seconds),
        tcp.server_cpu_seconds,
        pct(tcp.server_cpu_seconds, tcp.seconds),
        tcp.client_cpu_seconds / tcp.bytes.max(1.0) * 1e9,
        tcp.server_cpu_seconds / tcp.bytes.max(1.0) * 1e9,
    );
    println!("convoy / iperf3 TCP goodput ratio: {ratio:.3}");
    println!(
        "convoy / iperf3 TCP CPU per byte, both ends: {convoy_ns_per_byte:.2} / {tcp_ns_per_byte:.2} ns = {cpu_ratio:.1}x"
    );
    if let Some(d) = &server_driver {
        println!(
            "convoy server: {} datagrams in {} receive syscalls, {} dropped by its socket (buffer full)",
            d["datagrams_received"], d["recv_syscalls"], d["receive_drops"]
        );
    }
    println!("load average: {}", loadavg());
    print_report(&convoy, false)
}

/// The `driver` event a `--json` perf server prints when it exits.
fn server_driver_report(server: &mut Child) -> Option<serde_json::Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = server.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    std::io::Read::read_to_string(server.stdout.as_mut()?, &mut out).ok()?;
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "driver")
        .map(|v| v["driver"].clone())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// What iperf3 measured.
#[derive(serde::Serialize)]
struct Iperf3 {
    goodput_mbps: f64,
    bytes: f64,
    seconds: f64,
    client_cpu_seconds: f64,
    server_cpu_seconds: f64,
}

/// iperf3 over TCP on loopback for `secs` (rounded up to whole seconds).
fn iperf3(secs: f64) -> Result<Iperf3> {
    let port = free_port()?;
    let _server = Reaped(
        Command::new("iperf3")
            .args(["-s", "-1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run iperf3 (install it: apt-get install iperf3)")?,
    );
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J", "-t"])
        .arg(format!("{}", secs.ceil() as u64))
        .output()
        .context("cannot run iperf3")?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("iperf3 printed no JSON")?;
    let received = &v["end"]["sum_received"];
    let seconds = received["seconds"].as_f64().unwrap_or(f64::NAN);
    // iperf3's CPU figures are user + system time over wall time, in %.
    let cpu = &v["end"]["cpu_utilization_percent"];
    let cpu_s = |k: &str| cpu[k].as_f64().unwrap_or(f64::NAN) / 100.0 * seconds;
    Ok(Iperf3 {
        goodput_mbps: received["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
        bytes: received["bytes"].as_f64().unwrap_or(0.0),
        seconds,
        client_cpu_seconds: cpu_s("host_total"),
        server_cpu_seconds: cpu_s("remote_total"),
    })
}
