//! `convoy trace lte`: the empirical LTE model as a trace, or its moments.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_models::lte::{self, RttModel};
use convoy_models::Rng;
use serde::Serialize;

use super::read_text;
use crate::table::Table;

#[derive(Args)]
pub struct LteArgs {
    /// A constant CSQ (0 = −113 dBm … 31 = −51 dBm) for --seconds seconds.
    #[arg(long, value_name = "0..31", conflicts_with = "csq_file")]
    csq: Option<u8>,
    /// A CSQ time series: one CSQ per line, one line per second (# comments).
    #[arg(long, value_name = "FILE")]
    csq_file: Option<PathBuf>,
    /// Length of the trace with --csq.
    #[arg(long, default_value_t = 60)]
    seconds: u32,
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

/// The convoy time-series trace text (docs/TRACES.md) of LTE samples:
/// downlink capacity, one-way delay = RTT / 2, down while CSQ is 0.
pub fn series_csv(
    samples: &[lte::LteSample],
    start_offsets_s: &[f64],
    header_comment: &str,
) -> String {
    let mut out = String::new();
    for line in header_comment.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    out.push_str("start_ms,rate_kbps,delay_ms,loss_p,up\n");
    for (s, t) in samples.iter().zip(start_offsets_s) {
        out.push_str(&format!(
            "{},{},{:.3},0,{}\n",
            (t * 1000.0).round() as u64,
            (s.downlink_mbps * 1000.0).round() as u64,
            s.rtt_ms / 2.0,
            u8::from(s.csq > 0)
        ));
    }
    out
}

pub fn run(a: &LteArgs) -> Result<()> {
    if a.table {
        return table(a.json);
    }
    let csq: Vec<u8> = match (&a.csq, &a.csq_file) {
        (Some(c), None) => {
            if a.seconds == 0 {
                bail!("--seconds must be at least 1");
            }
            vec![*c; a.seconds as usize]
        }
        (None, Some(path)) => {
            let mut v = Vec::new();
            for (i, line) in read_text(path)?.lines().enumerate() {
                let line = line.split('#').next().unwrap_or("").trim();
                if line.is_empty() {
                    continue;
                }
                v.push(
                    line.parse::<u8>()
                        .ok()
                        .filter(|c| *c <= 31)
                        .with_context(|| {
                            format!(
                                "{}:{}: expected a CSQ from 0 to 31, found {line:?}",
                                path.display(),
                                i + 1
                            )
                        })?,
                );
            }
            if v.is_empty() {
                bail!("{}: expected one CSQ per line, found none", path.display());
            }
            v
        }
        _ => bail!("give --csq N or --csq-file FILE (or --table)"),
    };
    let mut rng = Rng::new(a.seed);
    let samples = lte::sample_series(&csq, a.base_rtt_ms, &mut rng)?;
    let starts: Vec<f64> = (0..samples.len()).map(|i| i as f64).collect();
    let text = series_csv(
        &samples,
        &starts,
        &format!(
            "convoy trace lte: empirical LTE model (baguena-2017 ch. 9), seed {}, base RTT {} ms",
            a.seed, a.base_rtt_ms
        ),
    );
    convoy_link::SeriesTrace::parse(&text, "generated LTE trace")
        .context("internal error: generated trace does not parse")?;
    match &a.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{text}"),
    }
    Ok(())
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
