//! `convoy simulate`: one transfer in virtual time over the link model, with
//! the same protocol code the real sockets run. Links are described with
//! `convoy emu`'s key=value syntax, so a scenario moves between the two
//! unchanged.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_emu::LinkSpec;
use convoy_link::{Capacity, LinkConfig, LossSource};
use convoy_proto::cc::Priority;
use convoy_proto::{CodeKind, Config, Keypair, Mode};
use convoy_sim::{run, TransferReport, TransferSpec};
use serde::Serialize;

use crate::progress;

mod multipath;

/// Transport modes: rate controller and default code.

#[derive(Args)]
pub struct SimulateArgs {
    /// Transport mode. tide (the default): RLNC blocks of about 25 ms on
    /// the air, Tide rate control from receive times. rcdp: RaptorQ blocks,
    /// RCDP packet trains. rlnc-bbr: RLNC generations, BBR (ScalaNC's
    /// combination).
    #[arg(long, default_value = "tide")]
    mode: String,
    /// Erasure code, instead of the mode's: raptorq or rlnc.
    #[arg(long)]
    code: Option<String>,
    /// Bytes of data per symbol (one symbol per packet), instead of the
    /// code's default.
    #[arg(long, value_name = "BYTES")]
    symbol_size: Option<u16>,
    /// Source symbols per block or generation (RLNC's g), instead of the
    /// code's default.
    #[arg(long, value_name = "SYMBOLS")]
    block: Option<u32>,
    /// Proactive redundancy margin, in standard deviations of the binomial
    /// arrivals (negative: fewer up front, more repaired on feedback).
    #[arg(long, value_name = "Z", allow_hyphen_values = true)]
    margin: Option<f64>,
    /// Margin blocks are topped up to when the sender would otherwise be
    /// idle (end of transfer, waiting for data or credit).
    #[arg(long, value_name = "Z", allow_hyphen_values = true)]
    idle_margin: Option<f64>,
    /// Size each block to about this much time on the air at the sending
    /// rate (the tide mode's is 25ms; the paper modes use fixed blocks).
    #[arg(long, value_name = "TIME")]
    block_airtime: Option<String>,
    /// The rate controller instead of the mode's: the simulator's loss-based
    /// references cubic-reference or newreno-reference (RFC 9438 / 5681 on
    /// convoy's transport; kernel TCP stays the real baseline, in the emulator),
    /// or oracle: a sender that knows the link's delivery schedule but acts
    /// on it one round trip late, the frontier no real scheme can cross.
    #[arg(long, value_name = "NAME")]
    controller: Option<String>,
    /// `background`: the transfer yields to every other flow on the path
    /// (the scavenger `convoy send --priority background` runs: a queue
    /// within a few ms, random loss ignored; docs/PROTOCOL.md); `normal`:
    /// the mode's own rate control.
    #[arg(long, default_value = "normal", conflicts_with = "controller")]
    priority: String,
    /// The whole link in `convoy emu`'s KEY=VALUE syntax (docs/EMU.md), e.g.
    /// up=ATT.up,down=ATT.down,delay=20ms,queue=200,offset=30s, instead of
    /// --rate, --trace, --delay, --loss and --queue.
    #[arg(long, value_name = "KEYS", conflicts_with_all = ["rate", "delay", "loss", "trace", "queue"])]
    link: Option<String>,
    /// One of the client's interfaces and the link behind it, in `convoy
    /// emu`'s --link syntax ([NAME:]KEYS), for a multipath run (with
    /// --duration): the first carries the handshake, a path opens on each
    /// other once connected, and a link with outage-policy=down takes its
    /// path down and up at its outages, as a car's OS reports them. E.g.
    /// --path wifi:rate=car.80211p.csv,queue=100,outage-policy=down --path
    /// lte:up=Verizon-LTE-short.up,down=Verizon-LTE-short.down,delay=30ms.
    #[arg(long = "path", value_name = "[NAME:]KEYS", conflicts_with_all = ["link", "rate", "delay", "loss", "trace", "queue", "both_ways", "controller"])]
    paths: Vec<String>,
    /// A path that stands by while the others work (a backup), in the same
    /// syntax as --path.
    #[arg(long = "backup-path", value_name = "[NAME:]KEYS", requires = "paths")]
    backup_paths: Vec<String>,
    /// Link rate (both directions), e.g. 20mbit [default: 20mbit].
    #[arg(long)]
    rate: Option<String>,
    /// One-way delay of each direction, e.g. 25ms [default: 25ms].
    #[arg(long)]
    delay: Option<String>,
    /// Loss of each direction: 10%, 0.1, or ge:P_GB/P_BG[/LOSS_GOOD/LOSS_BAD]
    /// [default: 0].
    #[arg(long)]
    loss: Option<String>,
    /// Bytes to send, e.g. 10MB, 512KiB, 1000000.
    #[arg(long, default_value = "10MB", conflicts_with = "duration")]
    size: String,
    /// A timed run instead of a size: the sender never runs dry, and goodput
    /// is what was read in this much virtual time after the handshake,
    /// beside what the link could carry in the same span.
    #[arg(long, value_name = "TIME")]
    duration: Option<String>,
    /// Capacity of the direction carrying the data from a trace instead of
    /// --rate: a Mahimahi file or a convoy time-series .csv.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Send --size in both directions at once (full duplex).
    #[arg(long)]
    both_ways: bool,
    /// Queue limit of each direction, in packets [default: 300].
    #[arg(long)]
    queue: Option<u64>,
    /// Seeds the link's random processes and the endpoints.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this much virtual time.
    #[arg(long, default_value = "600s")]
    time_limit: String,
    /// Width of the timelines' bins in --json (bytes read, sent and
    /// delivered, pacing rate, queueing per bin).
    #[arg(long, value_name = "TIME", default_value = "100ms")]
    timeline_bin: String,
    /// Print one JSON document instead of the summary.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Summary {
    mode: String,
    code: String,
    bytes: u64,
    delivered: u64,
    complete: bool,
    goodput_bps: f64,
    capacity_bps: f64,
    loss_rate: f64,
    ideal_bps: f64,
    ratio: f64,
    delay_p50_ms: f64,
    delay_p95_ms: f64,
    queue_delay_p50_ms: f64,
    queue_delay_p95_ms: f64,
    latency_p50_ms: f64,
    latency_p95_ms: f64,
    latency_p99_ms: f64,
    packets_sent: u64,
    packets_lost: u64,
    repair_symbols: u64,
    redundant_received: u64,
    /// Bytes both directions offered their links (IP and UDP headers,
    /// feedback, repairs and drops included) per byte delivered upward.
    air_per_payload: f64,
    blocks: u64,
    second_round_blocks: u64,
    handshake_ms: f64,
    cpu_seconds: f64,
    wall_seconds: f64,
    report: TransferReport,
}

/// `10MB`, `1.5MiB`, `500kB`, `1000` (`convoy_units`' grammar), from 1 byte
/// to 1 TB.
fn parse_size(text: &str) -> Result<u64> {
    let bytes = convoy_units::parse_bytes(text).map_err(|e| anyhow::anyhow!("--size {e}"))?;
    if !(1..=1_000_000_000_000).contains(&bytes) {
        bail!("--size {text:?}: must be between 1 byte and 1 TB");
    }
    Ok(bytes)
}

/// Processor time this process used, user + system.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we hand it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Mean capacity of a direction, bit/s, and its long-run loss rate.
/// The uplink's delivery schedule for the oracle: bytes it can deliver in
/// any span of link time.
fn oracle_schedule(up: &LinkConfig) -> Result<convoy_sim::reference::oracle::Schedule> {
    use convoy_link::Time;
    Ok(match &up.capacity {
        Capacity::Constant { bps } => {
            let bytes_per_s = *bps as f64 / 8.0;
            std::sync::Arc::new(move |from: Duration, to: Duration| {
                (to.saturating_sub(from).as_secs_f64() * bytes_per_s) as u64
            })
        }
        Capacity::Mahimahi(t) => {
            let t = t.clone();
            let at = |d: Duration| Time::from_nanos(d.as_nanos() as u64);
            std::sync::Arc::new(move |from: Duration, to: Duration| {
                let n = t.opportunities_until(at(to)) - t.opportunities_until(at(from));
                n * u64::from(convoy_link::OPPORTUNITY_BYTES)
            })
        }
        Capacity::Series => bail!("--controller oracle needs a constant rate or a Mahimahi trace"),
    })
}

/// A direction's one-way delay, if fixed (the oracle's round trip).
fn fixed_delay(cfg: &LinkConfig) -> Result<Duration> {
    match cfg.delay.base {
        convoy_link::DelaySource::Fixed(d) => Ok(Duration::from_nanos(d.as_nanos())),
        convoy_link::DelaySource::Series => {
            bail!("--controller oracle needs a fixed delay, not one from a series trace")
        }
    }
}

fn capacity_and_loss(cfg: &LinkConfig) -> (f64, f64) {
    let capacity = match &cfg.capacity {
        Capacity::Constant { bps } => *bps as f64,
        Capacity::Mahimahi(t) => t.mean_rate_bps(),
        Capacity::Series => cfg.series.as_ref().map_or(0.0, |s| {
            let rows = s.rows();
            rows.iter().map(|r| r.rate_bps as f64).sum::<f64>() / rows.len().max(1) as f64
        }),
    };
    let loss = match &cfg.loss {
        LossSource::Model(m) => m.theoretical_loss_rate().unwrap_or(0.0),
        LossSource::Series => 0.0,
    };
    // With 802.11 retries the rate is the PHY's and the loss each
    // attempt's: compare with what the MAC leaves of both.
    let (share, loss) = cfg.mac_share_and_loss(capacity, loss);
    (capacity * share, loss)
}

pub fn run_simulate(args: SimulateArgs) -> Result<()> {
    let mode: Mode = args
        .mode
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{e}"))?;
    let priority: Priority = args
        .priority
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{e}"))?;
    let code = match args.code.as_deref() {
        None => mode.default_code(),
        Some(name) => name
            .parse()
            .map_err(|_| anyhow::anyhow!("unknown code {name:?}: valid codes are raptorq, rlnc"))?,
    };
    let duration = args
        .duration
        .as_deref()
        .map(|d| positive_duration("--duration", d))
        .transpose()?;
    let size = match duration {
        Some(_) => u64::MAX,
        None => parse_size(&args.size)?,
    };
    let limit = positive_duration("--time-limit", &args.time_limit)?;
    if !args.paths.is_empty() {
        let Some(duration) = duration else {
            bail!("--path needs --duration: a multipath run is timed (its sender never runs dry)");
        };
        let (client, server) = endpoint_configs(&args, mode, code, priority)?;
        let duration = Duration::from_nanos(duration.as_nanos());
        return multipath::run(&args, client, server, duration, code.name());
    }
    let keys = match &args.link {
        Some(keys) => format!("{keys},seed={}", args.seed),
        None => {
            let rate = args.rate.as_deref().unwrap_or("20mbit");
            let rates = match &args.trace {
                Some(trace) => {
                    if !trace.is_file() {
                        bail!("--trace {}: no such file", trace.display());
                    }
                    format!("up={},down={rate}", trace.display())
                }
                None => format!("rate={rate}"),
            };
            format!(
                "{rates},delay={},loss={},queue={},seed={}",
                args.delay.as_deref().unwrap_or("25ms"),
                args.loss.as_deref().unwrap_or("0"),
                args.queue.unwrap_or(300),
                args.seed
            )
        }
    };
    let spec = LinkSpec::parse(&format!("sim:{keys}")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (up, down) = spec.configs(0).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (capacity, loss) = capacity_and_loss(&up);

    let (mut client, mut server) = endpoint_configs(&args, mode, code, priority)?;
    if let Some(name) = &args.controller {
        let rc = match name.as_str() {
            "cubic-reference" => convoy_sim::reference::cubic(),
            "newreno-reference" => convoy_sim::reference::newreno(),
            "oracle" => {
                let (one_way, back) = (fixed_delay(&up)?, fixed_delay(&down)?);
                convoy_sim::reference::oracle(oracle_schedule(&up)?, one_way, one_way + back)
            }
            other => bail!(
                "unknown controller {other:?}: valid controllers are cubic-reference, newreno-reference, oracle"
            ),
        };
        client.rate_control = rc.clone();
        server.rate_control = rc;
    }
    let mut t = TransferSpec::new(up, down, client, server);
    t.upload = size;
    t.download = if args.both_ways { size } else { 0 };
    t.time_limit = Duration::from_nanos(limit.as_nanos());
    t.duration = duration.map(|d| Duration::from_nanos(d.as_nanos()));
    let bin = duration_arg("--timeline-bin", &args.timeline_bin)?;
    if bin.as_nanos() < 1_000_000 {
        bail!("--timeline-bin {}: at least 1ms", args.timeline_bin);
    }
    t.timeline_bin = Duration::from_nanos(bin.as_nanos());
    t.progress = Some(Box::new(|at, done, total| {
        progress::update(&if total >= u64::MAX / 2 {
            format!(
                "simulating: {:.0} s of virtual time, {:.1} MB delivered",
                at.as_secs_f64(),
                done as f64 / 1e6
            )
        } else {
            format!(
                "simulating: {:.0} s of virtual time, {:.1} of {:.1} MB delivered",
                at.as_secs_f64(),
                done as f64 / 1e6,
                total as f64 / 1e6
            )
        })
    }));

    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let report = run(t).context("simulation failed");
    progress::clear();
    let report = report?;
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let up = &report.upload;
    // A timed run compares with what the link carried in the same span;
    // a sized one with the link's long-run mean.
    let capacity = if duration.is_some() {
        up.capacity_bps
    } else {
        capacity
    };
    let ideal = capacity * (1.0 - loss);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let s = Summary {
        mode: args.mode.clone(),
        code: code.name().into(),
        bytes: if duration.is_some() { 0 } else { size },
        delivered: up.delivered,
        complete: duration.is_some() || up.completion.is_some(),
        goodput_bps: up.goodput_bps,
        capacity_bps: capacity,
        loss_rate: loss,
        ideal_bps: ideal,
        ratio: if ideal > 0.0 {
            up.goodput_bps / ideal
        } else {
            0.0
        },
        delay_p50_ms: ms(up.delay_p50),
        delay_p95_ms: ms(up.delay_p95),
        queue_delay_p50_ms: ms(up.queue_delay_p50),
        queue_delay_p95_ms: ms(up.queue_delay_p95),
        latency_p50_ms: ms(up.latency_p50),
        latency_p95_ms: ms(up.latency_p95),
        latency_p99_ms: ms(up.latency_p99),
        packets_sent: report.client.packets_sent,
        packets_lost: report.client.packets_lost,
        repair_symbols: report.client.repair_symbols,
        redundant_received: report.server.redundant_received,
        air_per_payload: (report.uplink_sent.iter().sum::<u64>() + report.downlink_sent_bytes)
            as f64
            / up.delivered.max(1) as f64,
        blocks: report.client.blocks_done,
        second_round_blocks: report.client.second_round_blocks,
        handshake_ms: report.handshake.map_or(f64::NAN, |h| h.as_secs_f64() * 1e3),
        cpu_seconds: cpu,
        wall_seconds: wall,
        report,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_summary(&s, &args);
    }
    if !s.complete {
        bail!(
            "the transfer did not finish: {} of {} bytes in {}",
            s.delivered,
            s.bytes,
            args.time_limit
        );
    }
    Ok(())
}

/// Both endpoints' configurations from the mode, the code, the coding
/// flags and the priority, seeded from --seed.
fn endpoint_configs(
    args: &SimulateArgs,
    mode: Mode,
    code: CodeKind,
    priority: Priority,
) -> Result<(Config, Config)> {
    let mut client = Config::for_mode(Keypair::generate(), mode).with_code(code);
    let mut server = Config::for_mode(Keypair::generate(), mode).with_code(code);
    let airtime = args
        .block_airtime
        .as_deref()
        .map(|d| duration_arg("--block-airtime", d))
        .transpose()?;
    for cfg in [&mut client, &mut server] {
        let coding = &mut cfg.coding;
        if let Some(a) = airtime {
            coding.block_airtime = Some(Duration::from_nanos(a.as_nanos()));
        }
        coding.symbol_size = args.symbol_size.unwrap_or(coding.symbol_size);
        coding.block_symbols = args.block.unwrap_or(coding.block_symbols);
        coding.margin_z = args.margin.unwrap_or(coding.margin_z);
        coding.idle_margin_z = args.idle_margin.unwrap_or(coding.idle_margin_z);
        // Both ends take the blocks asked for, however large.
        cfg.max_block_symbols = cfg.max_block_symbols.max(cfg.coding.block_symbols);
        priority.apply(cfg);
        cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    client.seed = Some(args.seed);
    server.seed = Some(args.seed.wrapping_add(1));
    Ok((client, server))
}

/// A duration flag in `convoy emu`'s syntax (20ms, 1.5s).
fn duration_arg(flag: &str, text: &str) -> Result<convoy_link::Dur> {
    convoy_emu::parse_duration(flag, text).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A duration flag that must be longer than zero.
fn positive_duration(flag: &str, text: &str) -> Result<convoy_link::Dur> {
    let d = duration_arg(flag, text)?;
    if d.as_nanos() == 0 {
        bail!("{flag}: must be longer than 0 s");
    }
    Ok(d)
}

fn print_summary(s: &Summary, args: &SimulateArgs) {
    let link = match (&args.link, &args.trace) {
        (Some(keys), _) => keys.clone(),
        (None, Some(t)) => format!(
            "trace {}, {} one way, loss {}",
            t.display(),
            args.delay.as_deref().unwrap_or("25ms"),
            args.loss.as_deref().unwrap_or("0")
        ),
        (None, None) => format!(
            "{}, {} one way, loss {}",
            args.rate.as_deref().unwrap_or("20mbit"),
            args.delay.as_deref().unwrap_or("25ms"),
            args.loss.as_deref().unwrap_or("0")
        ),
    };
    let what = match &args.duration {
        Some(d) => format!("for {d}"),
        None => format!("{} bytes", s.bytes),
    };
    println!(
        "convoy simulate: {} ({}) over {link}, {what}{}",
        s.mode,
        s.code,
        if args.both_ways { " each way" } else { "" }
    );
    println!("  goodput            {:>10.3} Mbit/s", s.goodput_bps / 1e6);
    println!(
        "  ideal C x (1 - p)  {:>10.3} Mbit/s   ({:.3} Mbit/s x (1 - {:.3}))",
        s.ideal_bps / 1e6,
        s.capacity_bps / 1e6,
        s.loss_rate
    );
    println!("  ratio              {:>10.3}", s.ratio);
    println!(
        "  one-way delay      p50 {:.1} ms, p95 {:.1} ms (queueing p50 {:.1} ms, p95 {:.1} ms)",
        s.delay_p50_ms, s.delay_p95_ms, s.queue_delay_p50_ms, s.queue_delay_p95_ms
    );
    println!(
        "  write to read      p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms",
        s.latency_p50_ms, s.latency_p95_ms, s.latency_p99_ms
    );
    println!(
        "  packets            {} sent, {} lost, {} repair symbols, {} redundant at the receiver",
        s.packets_sent, s.packets_lost, s.repair_symbols, s.redundant_received
    );
    println!(
        "  on the air         {:.4} bytes per byte delivered (both ways: headers, feedback, repairs, drops)",
        s.air_per_payload
    );
    println!(
        "  blocks             {} done, {} ({:.0} %) needed more than planned up front",
        s.blocks,
        s.second_round_blocks,
        100.0 * s.second_round_blocks as f64 / s.blocks.max(1) as f64
    );
    if args.both_ways {
        println!(
            "  reverse goodput    {:>10.3} Mbit/s",
            s.report.download.goodput_bps / 1e6
        );
    }
    let handshake = if s.handshake_ms.is_finite() {
        format!("handshake {:.1} ms", s.handshake_ms)
    } else {
        "no handshake".to_string()
    };
    println!(
        "  {handshake}; CPU {:.2} s for {:.2} s of virtual time ({:.2} s wall)",
        s.cpu_seconds,
        s.report.elapsed.as_secs_f64(),
        s.wall_seconds
    );
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("1KiB").unwrap(), 1024);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert!(parse_size("10 parsecs").is_err());
        assert!(parse_size("0").is_err());
    }
}
