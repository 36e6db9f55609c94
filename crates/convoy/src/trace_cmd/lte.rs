//! `convoy trace lte`: the empirical LTE model as a downlink trace (with
//! handovers and residual loss), the uplink model as a Mahimahi trace
//! (lte_up.rs), or the downlink model's moments.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use convoy_models::handover::HandoverTracker;
use convoy_models::lte::{self, RttModel};
use convoy_models::lte_loss::{LossGen, LossParams};
use convoy_models::Rng;
use serde::Serialize;

use super::read_text;
use crate::table::Table;

/// Which way the trace runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Direction {
    /// eNodeB → vehicle: the empirical Dublin model, a convoy time-series
    /// trace (rate, delay, loss, up) with one row per second.
    Down,
    /// Vehicle → eNodeB: the uplink model (power-limited SINR, TTI grants,
    /// HARQ), a Mahimahi trace (one line per 1500-byte opportunity).
    Up,
}

#[derive(Args)]
pub struct LteArgs {
    /// A constant CSQ (0 = −113 dBm … 31 = −51 dBm) for --seconds seconds.
    #[arg(long, value_name = "0..31", conflicts_with = "csq_file")]
    csq: Option<u8>,
    /// A CSQ time series: one `CSQ` or `CSQ,CELL` per line, one line per
    /// second (# comments); a change of CELL is a handover.
    #[arg(long, value_name = "FILE")]
    csq_file: Option<PathBuf>,
    /// Length of the trace with --csq (or, upwards, with neither).
    #[arg(long, default_value_t = 60)]
    seconds: u32,
    /// `down` (the Dublin model, a time-series trace) or `up` (the uplink
    /// model, a Mahimahi trace).
    #[arg(long, value_enum, default_value = "down")]
    direction: Direction,
    /// Upwards: the fitted uplink to start from (att, tmobile, verizon;
    /// `convoy trace uplink-fit`); with a CSQ its SINR follows the CSQ's
    /// path loss instead of the fit's.
    #[arg(long, value_name = "NAME", default_value = "verizon")]
    uplink_fit: String,
    /// A handover every this many seconds (to the other of two cells), on
    /// top of any in the CSQ file.
    #[arg(long, value_name = "S")]
    handover_every: Option<u32>,
    /// A handover takes the link down for this long, ms (X2 handovers are
    /// measured at 30–60 ms).
    #[arg(long, value_name = "MS", default_value_t = convoy_models::handover::DEFAULT_INTERRUPTION_MS)]
    handover_interruption_ms: u64,
    /// Residual loss after HARQ/RLC, in bursts: `none`, `typical`
    /// (rate=0.001,burst=2,bad=0.05) or `rate=P[,burst=ROWS][,bad=P]`;
    /// a handover starts a bad spell. Downwards only (a Mahimahi trace
    /// carries capacity only).
    #[arg(long, value_name = "SPEC", default_value = "none")]
    loss: String,
    /// Position of the first RTT peak, ms (measured 32.5–37.5).
    #[arg(long, value_name = "MS", default_value_t = lte::DEFAULT_BASE_RTT_MS)]
    base_rtt_ms: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the trace here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print, per CSQ, the paper's fitted RTT and bandwidth moments beside
    /// the model's (clipped, normalised weights; tail) instead of a trace.
    #[arg(long, conflicts_with_all = ["csq", "csq_file", "output"])]
    table: bool,
    /// With --table: one JSON document.
    #[arg(long, requires = "table")]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    csq: u8,
    rtt_mean_fit_ms: f64,
    rtt_sd_fit_ms: f64,
    rtt_mean_model_ms: f64,
    rtt_sd_model_ms: f64,
    tail_weight: f64,
    bw_mu_fit_mbps: f64,
    bw_sigma_fit_mbps: f64,
    bw_mean_model_mbps: f64,
    bw_sd_model_mbps: f64,
}

impl LteArgs {
    pub fn uplink_fit(&self) -> &str {
        &self.uplink_fit
    }
    pub fn seconds(&self) -> u32 {
        self.seconds
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn handover_every(&self) -> Option<u32> {
        self.handover_every
    }
    pub fn handover_interruption_ms(&self) -> u64 {
        self.handover_interruption_ms
    }
    /// A CSQ was given (the SINR follows it).
    pub fn has_csq(&self) -> bool {
        self.csq.is_some() || self.csq_file.is_some()
    }
}

/// One second of the CSQ series: its CSQ and serving cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Second {
    pub csq: u8,
    pub cell: u32,
}

/// `CSQ` or `CSQ,CELL` per line.
fn read_csq_file(path: &std::path::Path) -> Result<Vec<Second>> {
    let mut v = Vec::new();
    for (i, line) in read_text(path)?.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (c, cell) = line.split_once(',').unwrap_or((line, "0"));
        let csq = c.trim().parse::<u8>().ok().filter(|c| *c <= 31);
        let cell = cell.trim().parse::<u32>().ok();
        match (csq, cell) {
            (Some(csq), Some(cell)) => v.push(Second { csq, cell }),
            _ => bail!(
                "{}:{}: expected CSQ (0 to 31) or CSQ,CELL, found {line:?}",
                path.display(),
                i + 1
            ),
        }
    }
    if v.is_empty() {
        bail!("{}: expected one CSQ per line, found none", path.display());
    }
    Ok(v)
}

/// `none`, `typical` or `rate=P[,burst=ROWS][,bad=P]`.
pub fn parse_loss(text: &str) -> Result<Option<LossParams>> {
    match text {
        "none" => return Ok(None),
        "typical" => return Ok(Some(LossParams::TYPICAL)),
        _ => {}
    }
    let mut p = LossParams::TYPICAL;
    let mut rate = None;
    for kv in text.split(',') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let x = v.parse::<f64>().ok().filter(|x| x.is_finite());
        match (k, x) {
            ("rate", Some(x)) => rate = Some(x),
            ("burst", Some(x)) => p.burst_rows = x,
            ("bad", Some(x)) => p.bad_loss = x,
            _ => {
                bail!("--loss: expected none, typical or rate=P[,burst=ROWS][,bad=P], found {kv:?}")
            }
        }
    }
    let Some(rate) = rate else {
        bail!("--loss: rate=P is required, found {text:?}");
    };
    p.rate = rate;
    Ok(Some(
        p.validated().map_err(|e| anyhow::anyhow!("--loss: {e}"))?,
    ))
}

/// The longest trace made: a day. The uplink's Mahimahi trace holds a
/// line per delivery opportunity, hundreds a second, and `--seconds
/// 100000000` ran on, filling memory, until it was killed.
const MAX_SECONDS: u32 = 86_400;

/// The CSQ series the arguments give (None upwards without a CSQ: the
/// fit's own SINR).
fn seconds_of(a: &LteArgs) -> Result<Option<Vec<Second>>> {
    if a.seconds > MAX_SECONDS {
        bail!(
            "--seconds must be at most {MAX_SECONDS} (a day), not {}",
            a.seconds
        );
    }
    let mut v = match (&a.csq, &a.csq_file) {
        (Some(c), None) => Some(vec![Second { csq: *c, cell: 0 }; a.seconds as usize]),
        (None, Some(path)) => Some(read_csq_file(path)?),
        (None, None) if a.direction == Direction::Up => None,
        _ => bail!("give --csq N or --csq-file FILE (or --table)"),
    };
    if a.seconds == 0 && a.csq_file.is_none() {
        bail!("--seconds must be at least 1");
    }
    if let (Some(every), Some(v)) = (a.handover_every, v.as_mut()) {
        if every == 0 {
            bail!("--handover-every must be at least 1 s");
        }
        // Alternate between two cells on top of the file's own changes.
        for (i, s) in v.iter_mut().enumerate() {
            s.cell = s.cell * 2 + (i as u32 / every) % 2;
        }
    }
    Ok(v)
}

pub fn run(a: &LteArgs) -> Result<()> {
    if a.table {
        return table(a.json);
    }
    if a.handover_interruption_ms >= 1000 {
        bail!(
            "--handover-interruption-ms must be under 1000 (a row is 1 s), got {}",
            a.handover_interruption_ms
        );
    }
    let loss = parse_loss(&a.loss)?;
    let series = seconds_of(a)?;
    let text = match a.direction {
        Direction::Up => {
            if loss.is_some() {
                bail!(
                    "--loss applies downwards only: a Mahimahi uplink trace carries capacity only"
                );
            }
            super::lte_up::mahimahi(a, series.as_deref())?
        }
        Direction::Down => {
            let Some(series) = series else {
                bail!("give --csq N or --csq-file FILE (or --table)");
            };
            down_series(a, &series, loss)?
        }
    };
    match &a.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// The downlink time-series trace (docs/TRACES.md): capacity, one-way
/// delay = RTT / 2, the loss model's loss, down while CSQ is 0 and for the
/// interruption at each change of cell.
fn down_series(a: &LteArgs, series: &[Second], loss: Option<LossParams>) -> Result<String> {
    let mut rng = Rng::new(a.seed);
    let csq: Vec<u8> = series.iter().map(|s| s.csq).collect();
    let samples = lte::sample_series(&csq, a.base_rtt_ms, &mut rng)?;
    // The loss chain has its own stream, so turning it on leaves the
    // capacity and RTT samples as they were.
    let mut loss_rng = Rng::fork(a.seed, "lte-loss");
    let mut loss_gen = loss.map(|p| LossGen::new(p, &mut loss_rng)).transpose()?;
    let mut tracker = HandoverTracker::new(a.handover_interruption_ms);
    let mut out = format!(
        "# convoy trace lte: empirical LTE model (baguena-2017 ch. 9), seed {}, base RTT {} ms, loss {}, handover interruption {} ms\n",
        a.seed, a.base_rtt_ms, a.loss, a.handover_interruption_ms
    );
    out.push_str("start_ms,rate_kbps,delay_ms,loss_p,up\n");
    for (i, (s, sec)) in samples.iter().zip(series).enumerate() {
        let mut at_ms = i as u64 * 1000;
        let before = tracker.handovers();
        if let Some(gap) = tracker.serve(at_ms, sec.cell) {
            out.push_str(&format!("{at_ms},0,0,0,0\n"));
            at_ms = gap.end;
        }
        if let (Some(g), true) = (loss_gen.as_mut(), tracker.handovers() > before) {
            g.handover();
        }
        let loss_p = loss_gen.as_mut().map_or(0.0, |g| g.next_row(&mut loss_rng));
        out.push_str(&format!(
            "{at_ms},{},{:.3},{loss_p},{}\n",
            (s.downlink_mbps * 1000.0).round() as u64,
            s.rtt_ms / 2.0,
            u8::from(s.csq > 0)
        ));
    }
    convoy_link::SeriesTrace::parse(&out, "generated LTE trace")
        .context("internal error: generated trace does not parse")?;
    Ok(out)
}

fn table(json: bool) -> Result<()> {
    let mut rows = Vec::new();
    for c in 0..=31u8 {
        let csq = f64::from(c);
        let m = RttModel::new(csq, lte::DEFAULT_BASE_RTT_MS)?;
        let (mu, sigma) = lte::bandwidth_params_mbps(csq);
        let (bm, bs) = lte::bandwidth_moments_mbps(csq);
        rows.push(Row {
            csq: c,
            rtt_mean_fit_ms: lte::rtt_mean_fit_ms(csq),
            rtt_sd_fit_ms: lte::rtt_sd_fit_ms(csq),
            rtt_mean_model_ms: m.mean_ms(),
            rtt_sd_model_ms: m.sd_ms(),
            tail_weight: m.tail.map_or(0.0, |t| t.weight),
            bw_mu_fit_mbps: mu,
            bw_sigma_fit_mbps: sigma,
            bw_mean_model_mbps: bm,
            bw_sd_model_mbps: bs,
        });
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut t = Table::new(&[
        "CSQ",
        "dBm",
        "RTT fit μ/σ ms",
        "model μ/σ ms",
        "tail w",
        "BW fit μ/σ Mbit/s",
        "model μ/σ",
    ]);
    for r in &rows {
        t.row(vec![
            r.csq.to_string(),
            format!("{:.0}", lte::dbm_from_csq(r.csq)),
            format!("{:.1} / {:.1}", r.rtt_mean_fit_ms, r.rtt_sd_fit_ms),
            format!("{:.1} / {:.1}", r.rtt_mean_model_ms, r.rtt_sd_model_ms),
            format!("{:.3}", r.tail_weight),
            format!("{:.2} / {:.2}", r.bw_mu_fit_mbps, r.bw_sigma_fit_mbps),
            format!("{:.2} / {:.2}", r.bw_mean_model_mbps, r.bw_sd_model_mbps),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}
