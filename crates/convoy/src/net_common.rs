//! Pieces shared by the networked subcommands: addresses with a default
//! port, sizes, the transfer options every command takes, signals and the
//! terminal progress bar.

use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_net::netlink::{Choice, Selection};
use convoy_net::{ClientOptions, DriverConfig, Progress};
use convoy_proto::cc::Priority;
use convoy_proto::{AeadChoice, Mode};

pub const DEFAULT_PORT: u16 = 4433;

/// Options of every command that moves data.
#[derive(Args, Clone, Debug)]
pub struct TransferOpts {
    /// Code and rate control: `tide` (RLNC + Tide, made for links whose
    /// capacity changes every second: the default), `rcdp` (RaptorQ + RCDP
    /// packet trains, SPEC S1) or `rlnc-bbr` (RLNC + BBR, SPEC S2).
    #[arg(long, default_value = "tide", value_parser = parse_mode)]
    pub mode: Mode,
    /// `background`: what this side sends yields to every other flow on
    /// the path (a scavenger that keeps the queue within a few ms and
    /// ignores random loss; docs/PROTOCOL.md); `normal`: the mode's own
    /// rate control.
    #[arg(long, default_value = "normal", value_parser = parse_priority)]
    pub priority: Priority,
    /// Seconds without hearing from the peer before giving up. A re-run
    /// of the same command resumes where this one stopped.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub idle_timeout: f64,
    /// Datagrams per sendmmsg/recvmmsg syscall (1 = one syscall each).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub batch: u16,
    /// Use our own clock instead of the kernel's receive timestamps.
    #[arg(long)]
    pub no_kernel_timestamps: bool,
    /// The most of a wait for a send time that is spun rather than slept,
    /// in microseconds (0: always sleep). Only deadlines less than
    /// --spin-gap-us after the last send spin, and only for as long as
    /// ppoll has recently overslept.
    #[arg(long, value_name = "MICROS", default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub spin_us: u32,
    /// Send times further apart than this (microseconds) are slept to,
    /// never spun for: a low rate does not need microsecond pacing.
    #[arg(long, value_name = "MICROS", default_value_t = 250, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub spin_gap_us: u32,
    /// UDP GSO: send runs of equal datagrams to one address as one
    /// segmented send (on or off; off if the kernel lacks it).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub gso: bool,
    /// UDP GRO: let the kernel hand over received datagrams coalesced
    /// (on or off).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub gro: bool,
    /// Clients: this vehicle's (or operator's) private key file, from
    /// `convoy keygen`, registered on the server with `convoy fleet add`.
    /// Without it each run uses a fresh key, which a fleet server refuses.
    #[arg(long, value_name = "FILE")]
    pub identity: Option<std::path::PathBuf>,
    /// Packet encryption this side offers: `auto` (AES-256-GCM where this
    /// CPU has AES instructions, else ChaCha20-Poly1305), `chacha20-poly1305`
    /// or `aes-256-gcm`. AES-256-GCM is used only if both sides offer it.
    #[arg(long, value_name = "AEAD", default_value = "auto", value_parser = parse_aead)]
    pub aead: AeadChoice,
}

fn parse_aead(s: &str) -> Result<AeadChoice, String> {
    s.parse()
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{s:?}: expected on or off")),
    }
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_priority(s: &str) -> Result<Priority, String> {
    s.parse()
}

impl TransferOpts {
    pub fn driver(&self) -> DriverConfig {
        DriverConfig {
            batch: usize::from(self.batch),
            kernel_timestamps: !self.no_kernel_timestamps,
            gso: self.gso,
            gro: self.gro,
            spin: Duration::from_micros(u64::from(self.spin_us)),
            spin_gap: Duration::from_micros(u64::from(self.spin_gap_us)),
        }
    }

    pub fn idle(&self) -> Result<Duration> {
        if !(self.idle_timeout > 0.0 && self.idle_timeout <= 3600.0) {
            bail!("--idle-timeout must be in (0, 3600] seconds");
        }
        Ok(Duration::from_secs_f64(self.idle_timeout))
    }

    pub fn client(
        &self,
        server: SocketAddr,
        key: [u8; 32],
        paths: &PathOpts,
    ) -> Result<ClientOptions> {
        let mut o = ClientOptions::new(server, key);
        o.paths = paths.selection();
        o.mode = self.mode;
        o.priority = self.priority;
        o.idle_timeout = self.idle()?;
        o.driver = self.driver();
        o.aead = self.aead;
        if let Some(path) = &self.identity {
            o.keypair = Some(convoy_net::load_keypair(path)?);
        }
        Ok(o)
    }
}

/// Which interfaces a client sends over (send, get and perf).
#[derive(Args, Clone, Debug, Default)]
pub struct PathOpts {
    /// Send over this interface or local IP address (of the server's
    /// family, IPv4 or IPv6); repeat it for several. Without --path the
    /// client uses every interface that is up and reaches the server
    /// through itself (for IPv6, one address per interface), and keeps
    /// following them:
    /// an interface that appears is used within a round trip, one that
    /// goes down is dropped at once. Example, Wi-Fi in use and LTE on
    /// standby: `convoy perf 203.0.113.7 --server-key K --time 10 --path
    /// wlan0 --backup wwan0`.
    #[arg(long = "path", value_name = "IFACE_OR_ADDR", value_parser = parse_choice, conflicts_with = "single_path")]
    pub path: Vec<Choice>,
    /// A standby path (repeatable): it carries data only while no other
    /// path works. Alone, without --path: every usable interface, this
    /// one on standby.
    #[arg(long = "backup", value_name = "IFACE_OR_ADDR", value_parser = parse_choice, conflicts_with = "single_path")]
    pub backup: Vec<Choice>,
    /// One socket routed by the kernel, as before multipath (no netlink,
    /// no second interface).
    #[arg(long)]
    pub single_path: bool,
}

fn parse_choice(s: &str) -> Result<Choice, String> {
    Choice::parse(s)
}

impl PathOpts {
    /// What the client options take.
    pub fn selection(&self) -> Option<Selection> {
        (!self.single_path).then(|| Selection {
            paths: self.path.clone(),
            backups: self.backup.clone(),
        })
    }
}

/// `name 1.2 MB` for every path of an interval, for progress lines
/// (empty with one kernel-routed path).
pub fn path_bytes(paths: &[convoy_net::multipath::PathBytes]) -> String {
    let mut out = String::new();
    for p in paths {
        let Some(name) = &p.interface else { continue };
        let bytes = p.bytes_sent.max(p.bytes_received);
        out.push_str(&format!("  {name} {:.2} MB", bytes as f64 / 1e6));
    }
    out
}

/// A TCP address for `--http`: `HOST:PORT` or `IP:PORT`.
pub fn resolve_tcp(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .with_context(|| format!("cannot resolve {addr:?}"))?
        .next()
        .with_context(|| format!("{addr:?} has no address"))
}

/// `HOST[:PORT]`, `IP:PORT` or `[IPV6]:PORT`, port 4433 when left out
/// (a bare IPv6 address too: its last group is not a port).
pub fn resolve(addr: &str) -> Result<SocketAddr> {
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = addr.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let with_port = if addr
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        addr.to_owned()
    } else {
        format!("{addr}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve address {addr:?}"))?
        .next()
        .with_context(|| format!("no address for {addr:?}"))
}

/// `10MB`, `1.5GiB`, `500kB`, `1000`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bytes = convoy_units::parse_bytes(text).map_err(|e| e.to_string())?;
    if !(1..=10_000_000_000_000).contains(&bytes) {
        return Err(format!("{text:?}: must be between 1 byte and 10 TB"));
    }
    Ok(bytes)
}

/// SIGINT and SIGTERM set the returned flag instead of killing us, so the
/// server closes its connections and exits cleanly.
pub fn stop_on_signals(flag: &Arc<AtomicBool>) -> Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone()).context("cannot install signal handler")?;
    }
    Ok(())
}

/// A one-line progress bar on stderr, drawn only on a terminal, with
/// each path's figures after it; with `--json` it draws nothing and keeps
/// every report for the document's `progress` list instead.
pub struct Bar {
    label: String,
    on: bool,
    json: bool,
    reports: Vec<serde_json::Value>,
}

impl Bar {
    pub fn new(label: &str, json: bool) -> Bar {
        Bar {
            label: label.to_owned(),
            on: !json && std::io::stderr().is_terminal(),
            json,
            reports: Vec::new(),
        }
    }

    pub fn draw(&mut self, p: Progress) {
        if self.json {
            self.reports.push(serde_json::json!({
                "t_s": p.elapsed.as_secs_f64(),
                "done": p.done,
                "total": p.total,
                "paths": p.paths,
            }));
        }
        if !self.on {
            return;
        }
        let frac = if p.total == 0 {
            1.0
        } else {
            p.done as f64 / p.total as f64
        };
        let width = 30;
        let filled = ((frac * width as f64) as usize).min(width);
        let rate = p.done as f64 * 8.0 / p.elapsed.as_secs_f64().max(1e-3) / 1e6;
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r\x1b[2K{} [{}{}] {:5.1}% {:.1}/{:.1} MB {:.0} Mbit/s{}",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled),
            frac * 100.0,
            p.done as f64 / 1e6,
            p.total as f64 / 1e6,
            rate,
            path_figures(&p.paths)
        );
        let _ = err.flush();
    }

    pub fn clear(&mut self) {
        if self.on {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }

    /// Every report drawn, for `--json` (empty without it).
    pub fn reports(&mut self) -> Vec<serde_json::Value> {
        std::mem::take(&mut self.reports)
    }
}

/// `| wifi 18.2 Mbit/s 12 ms 3.1 MB 64%` for every path, for progress
/// lines: interface (or path id), rate, smoothed RTT, bytes sent, share.
/// Empty with one kernel-routed path, which the bar itself describes.
pub fn path_figures(paths: &[convoy_net::multipath::PathProgress]) -> String {
    if paths.len() < 2 && paths.iter().all(|p| p.interface.is_none()) {
        return String::new();
    }
    let mut out = String::new();
    for p in paths {
        let name = p
            .interface
            .clone()
            .unwrap_or_else(|| format!("path {}", p.id));
        out.push_str(&format!(
            " | {name} {:.1} Mbit/s {:.0} ms {:.1} MB {:.0}%",
            p.rate_bps as f64 / 1e6,
            p.srtt_ms,
            p.bytes_sent as f64 / 1e6,
            p.share * 100.0
        ));
    }
    out
}

/// Tells glibc's allocator to keep freed memory instead of returning it to
/// the kernel. Every coded block (~365 KB) is allocated and freed on each
/// side; by default glibc served those with mmap/munmap or trimmed them off
/// the heap, and the page faults and page zeroing that followed were about
/// a quarter of the receiver's CPU at 500 Mbit/s on loopback (perf record).
/// The price is a resident size that stays at its peak.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any
    // thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}
