//! `convoy bench hostile`: issue 31's attacks on a real `convoy serve`.
//!
//! Each attack gets a fresh fleet server (a registry with honest vehicles
//! and one rogue vehicle) on loopback. Honest vehicles upload alone (the
//! baseline: a warm-up, then `--rounds` times) and `--rounds` times while a
//! crafted client, built on convoy-proto with `Connection::hostile_packet`,
//! attacks from many connections; the medians are compared, so one noisy
//! round on a shared machine decides neither side. The
//! server's resident memory is read from /proc (VmRSS sampled, VmHWM at
//! the end), and each attacking connection's fate (closed by the server,
//! and with which code) is counted. The server runs under an address-space
//! limit (`--server-memory-limit`), so an attack that would take the
//! machine's memory ends the server instead.
//!
//! Traffic stays on loopback (honest vehicles on 127.0.0.1, the attacker
//! on 127.0.0.2); every attack is bounded in time and
//! count, and the server and its directory are removed on every exit path.

mod attack;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use convoy_net::{Client, ClientOptions};
use convoy_proto::{Keypair, Mode};

use attack::attack_run;

use crate::bench_server::{proc_cpu_seconds, proc_status_kib, RssSampler};

/// Every attack, in the order they run.
pub const ATTACKS: &[&str] = &["blocks", "preauth", "streams", "pieces", "reset", "held"];

#[derive(clap::Args, Debug)]
pub struct HostileArgs {
    /// The short form (the one `make test` runs): 10 attacking
    /// connections, 2 honest vehicles of 2 MB, 3 s per attack.
    #[arg(long)]
    pub short: bool,
    /// Attacking connections per attack (100; 10 with --short).
    #[arg(long)]
    pub connections: Option<usize>,
    /// Honest vehicles uploading during each attack (10; 2 with --short).
    #[arg(long)]
    pub honest: Option<usize>,
    /// Bytes each honest vehicle uploads (8 MB; 2 MB with --short).
    #[arg(long)]
    pub honest_bytes: Option<u64>,
    /// Seconds each attack lasts at least (10; 3 with --short); it goes on
    /// until the honest rounds under it are done.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Honest upload rounds alone and under each attack, compared by their
    /// medians (3; 1 with --short).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Only these attacks, comma-separated: blocks, preauth, streams,
    /// pieces, reset, held.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// The convoy binary that serves (this one by default): an older build
    /// gives the figures before a fix.
    #[arg(long, value_name = "FILE")]
    pub server_bin: Option<PathBuf>,
    /// Address-space limit of the server process, MB (RLIMIT_AS), so an
    /// attack that succeeds ends the server, not the machine.
    #[arg(long, default_value_t = 4096)]
    pub server_memory_limit: u64,
    /// One JSON object per attack on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Targets of issue 31.
const RSS_TARGET_MB: f64 = 256.0;
const GOODPUT_TARGET: f64 = 0.8;

struct Plan {
    connections: usize,
    honest: usize,
    honest_bytes: u64,
    seconds: f64,
    rounds: usize,
}

pub fn run(args: HostileArgs) -> Result<()> {
    let plan = Plan {
        connections: args
            .connections
            .unwrap_or(if args.short { 10 } else { 100 }),
        honest: args.honest.unwrap_or(if args.short { 2 } else { 10 }),
        honest_bytes: args
            .honest_bytes
            .unwrap_or(if args.short { 2 << 20 } else { 8 << 20 }),
        seconds: args.seconds.unwrap_or(if args.short { 3.0 } else { 10.0 }),
        rounds: args.rounds.unwrap_or(if args.short { 1 } else { 3 }),
    };
    if plan.connections == 0 || plan.connections > 1000 || plan.honest > 100 {
        bail!("--connections must be 1 to 1000 and --honest at most 100");
    }
    if !(1..=20).contains(&plan.rounds) {
        bail!("--rounds must be 1 to 20");
    }
    for a in &args.only {
        if !ATTACKS.contains(&a.as_str()) {
            bail!(
                "unknown attack {a:?}: valid attacks are {}",
                ATTACKS.join(", ")
            );
        }
    }
    let bin = match &args.server_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("own executable")?,
    };
    let mut failed = Vec::new();
    for &attack in ATTACKS {
        if !args.only.is_empty() && !args.only.iter().any(|a| a == attack) {
            continue;
        }
        let r = run_attack(attack, &plan, &bin, args.server_memory_limit)?;
        let pass = r.server_alive
            && r.peak_rss_mb <= RSS_TARGET_MB
            && r.honest_ok
            && r.goodput_ratio >= GOODPUT_TARGET;
        if !pass {
            failed.push(attack);
        }
        if args.json {
            println!("{}", r.json(pass));
        } else {
            println!("{}", r.line(pass));
        }
    }
    if !failed.is_empty() {
        bail!(
            "targets missed (RSS <= {RSS_TARGET_MB} MB, honest uploads whole at >= {GOODPUT_TARGET} of their goodput alone) under: {}",
            failed.join(", ")
        );
    }
    Ok(())
}

struct AttackReport {
    attack: &'static str,
    connections: usize,
    rss_before_mb: f64,
    peak_rss_mb: f64,
    server_alive: bool,
    established: usize,
    opened: usize,
    closed_by_server: BTreeMap<u64, usize>,
    first_reason: Option<String>,
    packets_sent: u64,
    honest_ok: bool,
    goodput_alone_mbit: f64,
    goodput_attacked_mbit: f64,
    goodput_ratio: f64,
    /// Server CPU seconds over the honest rounds alone, over the attack
    /// (its honest rounds included), and the attacking thread's own.
    server_cpu_alone_s: f64,
    server_cpu_attacked_s: f64,
    attacker_cpu_s: f64,
}

impl AttackReport {
    fn json(&self, pass: bool) -> serde_json::Value {
        serde_json::json!({
            "attack": self.attack,
            "connections": self.connections,
            "server_rss_before_mb": round1(self.rss_before_mb),
            "server_peak_rss_mb": round1(self.peak_rss_mb),
            "server_alive": self.server_alive,
            "attackers_established": self.established,
            "attacker_connections_opened": self.opened,
            "attackers_closed_by_server": self.closed_by_server.iter()
                .map(|(c, n)| (format!("{c:#x}"), *n)).collect::<BTreeMap<_, _>>(),
            "first_close_reason": self.first_reason,
            "attack_packets": self.packets_sent,
            "honest_ok": self.honest_ok,
            "honest_goodput_alone_mbit_s": round1(self.goodput_alone_mbit),
            "honest_goodput_attacked_mbit_s": round1(self.goodput_attacked_mbit),
            "goodput_ratio": (self.goodput_ratio * 100.0).round() / 100.0,
            "server_cpu_alone_s": round1(self.server_cpu_alone_s),
            "server_cpu_attacked_s": round1(self.server_cpu_attacked_s),
            "attacker_cpu_s": round1(self.attacker_cpu_s),
            "pass": pass,
        })
    }

    fn line(&self, pass: bool) -> String {
        let closed: usize = self.closed_by_server.values().sum();
        let codes: Vec<String> = self
            .closed_by_server
            .iter()
            .map(|(c, n)| format!("{n}x{c:#x}"))
            .collect();
        format!(
            "{:<8} {} conns: server RSS {:.0} -> peak {:.0} MB{}; {}/{} attackers established, {} of {} closed by the server [{}]{}; honest {} at {:.1} Mbit/s vs {:.1} alone ({:.2}x, medians); server CPU {:.1} s alone, {:.1} s attacked; attacker {:.1} s -> {}",
            self.attack,
            self.connections,
            self.rss_before_mb,
            self.peak_rss_mb,
            if self.server_alive { "" } else { ", SERVER DIED" },
            self.established,
            self.connections,
            closed,
            self.opened,
            codes.join(" "),
            self.first_reason
                .as_deref()
                .map(|r| format!(" (\"{r}\")"))
                .unwrap_or_default(),
            if self.honest_ok { "whole" } else { "FAILED" },
            self.goodput_attacked_mbit,
            self.goodput_alone_mbit,
            self.goodput_ratio,
            self.server_cpu_alone_s,
            self.server_cpu_attacked_s,
            self.attacker_cpu_s,
            if pass { "pass" } else { "FAIL" },
        )
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// A fleet server in a temporary directory: honest vehicles `honest-N`
/// and `rogue` registered. Killed and removed on drop.
struct FleetServer {
    child: Option<Child>,
    dir: PathBuf,
    addr: SocketAddr,
    public: [u8; 32],
    honest: Vec<Keypair>,
    rogue: Keypair,
}

impl FleetServer {
    fn start(bin: &Path, honest: usize, memory_limit_mb: u64) -> Result<FleetServer> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("convoy-hostile-{}-{nanos}", std::process::id()));
        let store = dir.join("store");
        std::fs::create_dir_all(&store).context("temporary directory")?;
        let mut s = FleetServer {
            child: None,
            dir: dir.clone(),
            addr: "127.0.0.1:0".parse().expect("valid"),
            public: [0; 32],
            honest: Vec::new(),
            rogue: Keypair::generate(),
        };
        let server = Keypair::generate();
        s.public = server.public;
        let key = dir.join("server.key");
        convoy_net::write_keypair(&key, &server)?;
        let mut vehicles: Vec<(String, Keypair)> = (0..honest)
            .map(|i| (format!("honest-{i}"), Keypair::generate()))
            .collect();
        vehicles.push(("rogue".into(), s.rogue.clone()));
        for (name, kp) in &vehicles {
            let file = dir.join(format!("{name}.key"));
            convoy_net::write_keypair(&file, kp)?;
            let out = Command::new(bin)
                .args(["fleet", "add", name])
                .arg(convoy_net::keys::public_path(&file))
                .arg("--dir")
                .arg(&store)
                .stdin(Stdio::null())
                .output()
                .context("convoy fleet add")?;
            if !out.status.success() {
                bail!(
                    "convoy fleet add {name}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        s.honest = vehicles.into_iter().take(honest).map(|(_, k)| k).collect();
        let mut cmd = Command::new(bin);
        cmd.args([
            "serve",
            "--fleet",
            "--listen",
            "127.0.0.1:0",
            "--json",
            "--dir",
        ])
        .arg(&store)
        .arg("--key")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        let limit = memory_limit_mb << 20;
        // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                libc::setrlimit(libc::RLIMIT_AS, &r);
                Ok(())
            });
        }
        let mut child = cmd.spawn().context("starting convoy serve")?;
        let stdout = child.stdout.take().expect("piped");
        s.child = Some(child);
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .context("convoy serve did not say it was listening")?;
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v["event"] == "listening" {
                s.addr = v["addr"]
                    .as_str()
                    .and_then(|a| a.parse().ok())
                    .context("serve did not say its address")?;
                break;
            }
        }
        // Keep reading its events so its stdout never fills (shown with
        // CONVOY_HOSTILE_LOG=1, to see what the server made of an attack).
        let show = std::env::var_os("CONVOY_HOSTILE_LOG").is_some();
        std::thread::spawn(move || {
            while let Ok(line) = lines.recv() {
                if show {
                    eprintln!("server: {line}");
                }
            }
        });
        Ok(s)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    fn status_kib(&self, field: &str) -> u64 {
        proc_status_kib(self.pid(), field).unwrap_or(0)
    }
}

impl Drop for FleetServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Uploads one file per honest vehicle, all at once; their summed goodput
/// in Mbit/s, or an error if any upload failed or stored other bytes.
fn honest_uploads(server: &FleetServer, bytes: u64, tag: &str) -> Result<f64> {
    let mut files = Vec::new();
    for i in 0..server.honest.len() {
        let path = server.dir.join(format!("{tag}-{i}.bin"));
        let mut data = vec![0u8; bytes as usize];
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ nanos_now();
        for b in data.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        std::fs::write(&path, &data).context("honest upload file")?;
        files.push((path, data));
    }
    let started = Instant::now();
    let threads: Vec<_> = server
        .honest
        .iter()
        .zip(&files)
        .map(|(kp, (path, _))| {
            let mut opts = ClientOptions::new(server.addr, server.public);
            opts.keypair = Some(kp.clone());
            opts.mode = Mode::Tide;
            opts.idle_timeout = Duration::from_secs(20);
            let path = path.clone();
            std::thread::spawn(move || -> Result<f64> {
                let mut c = Client::connect(opts)?;
                c.upload(&path, None, None)?;
                let took = started.elapsed().as_secs_f64();
                // Closed as a vehicle closes it: a connection dropped
                // silently lingers on the server until its idle timeout
                // and counts toward the identity's 8, so rounds in quick
                // succession would lock an honest vehicle out.
                c.close();
                Ok(took)
            })
        })
        .collect();
    let mut last = 0f64;
    for (i, t) in threads.into_iter().enumerate() {
        let took = t
            .join()
            .map_err(|_| anyhow::anyhow!("an honest upload panicked"))??;
        last = last.max(took);
        // Byte-exact: what the server stored is what was sent.
        let (path, data) = &files[i];
        let name = path.file_name().expect("named").to_string_lossy();
        let stored = server
            .dir
            .join("store")
            .join(format!("honest-{i}"))
            .join(&*name);
        let got =
            std::fs::read(&stored).with_context(|| format!("reading back {}", stored.display()))?;
        if &got != data {
            bail!("{} was stored with other bytes", stored.display());
        }
    }
    Ok((bytes * server.honest.len() as u64 * 8) as f64 / last.max(1e-3) / 1e6)
}

fn nanos_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn run_attack(
    attack: &'static str,
    plan: &Plan,
    bin: &Path,
    memory_limit_mb: u64,
) -> Result<AttackReport> {
    let mut server = FleetServer::start(bin, plan.honest, memory_limit_mb)?;
    // A warm-up round first (the server's registry, the page cache), not
    // counted: it came out slower than the rest.
    // The server's CPU over the rounds alone and over the attack: whether
    // an attack's cost lands on the server, or on the machine the bench
    // shares with it (the attacker runs here too).
    let server_cpu = || proc_cpu_seconds(server.pid(), None).unwrap_or(0.0);
    let mut cpu_alone = 0.0;
    let alone = if plan.honest > 0 {
        honest_uploads(&server, plan.honest_bytes, "warm-up")?;
        cpu_alone = server_cpu();
        let mut rounds = Vec::new();
        for r in 0..plan.rounds {
            rounds.push(honest_uploads(
                &server,
                plan.honest_bytes,
                &format!("alone-{r}"),
            )?);
        }
        median(rounds)
    } else {
        0.0
    };
    cpu_alone = server_cpu() - cpu_alone;
    let cpu_attack_start = server_cpu();
    let rss_before_mb = server.status_kib("VmRSS") as f64 / 1024.0;
    let sampler = RssSampler::start(server.pid());
    let (target, public) = (server.addr, server.public);
    let rogue = server.rogue.clone();
    let (connections, seconds) = (plan.connections, plan.seconds);
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // SAFETY: plain syscall.
            let tid = unsafe { libc::gettid() } as u32;
            let out = attack_run(attack, target, public, rogue, connections, seconds, stop);
            let cpu = proc_cpu_seconds(std::process::id(), Some(tid)).unwrap_or(0.0);
            out.map(|o| (o, cpu))
        })
    };
    let honest = if plan.honest > 0 {
        // Once the attack is under way.
        std::thread::sleep(Duration::from_millis(500));
        (0..plan.rounds)
            .map(|r| honest_uploads(&server, plan.honest_bytes, &format!("attacked-{r}")))
            .collect::<Result<Vec<f64>>>()
            .map(median)
    } else {
        Ok(0.0)
    };
    stop.store(true, Ordering::SeqCst);
    let cpu_attacked = server_cpu() - cpu_attack_start;
    let (outcome, attacker_cpu) = attacker
        .join()
        .map_err(|_| anyhow::anyhow!("the attacker panicked"))??;
    let peak_kib = sampler.finish().max(server.status_kib("VmHWM"));
    let server_alive = server.alive();
    let (honest_ok, attacked) = match honest {
        Ok(g) => (true, g),
        Err(e) => {
            eprintln!("convoy: bench hostile: {attack}: honest upload failed: {e:#}");
            (false, 0.0)
        }
    };
    Ok(AttackReport {
        attack,
        connections,
        rss_before_mb,
        peak_rss_mb: peak_kib as f64 / 1024.0,
        server_alive,
        established: outcome.established,
        opened: outcome.opened,
        closed_by_server: outcome.closed,
        first_reason: outcome.first_reason,
        packets_sent: outcome.packets,
        honest_ok: honest_ok || plan.honest == 0,
        goodput_alone_mbit: alone,
        goodput_attacked_mbit: attacked,
        goodput_ratio: if alone > 0.0 { attacked / alone } else { 1.0 },
        server_cpu_alone_s: cpu_alone,
        server_cpu_attacked_s: cpu_attacked,
        attacker_cpu_s: attacker_cpu,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
