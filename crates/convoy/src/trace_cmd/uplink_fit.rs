//! `convoy trace uplink-fit`: the LTE uplink model against Mahimahi traces.
//! For each trace, its statistics (mean, per-second percentiles, lag-1 s
//! autocorrelation, busy milliseconds, gaps, outages) beside the model's
//! over several seeds, with the stored fit (`--fit NAME`, or the fit named
//! after the trace file) or a fresh pattern search (`--search`), which
//! prints the parameters it found (docs/MODELS.md, "LTE uplink").

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use convoy_link::MahimahiTrace;
use convoy_models::lte_fit;
use convoy_models::lte_uplink::{UplinkFit, UplinkParams};
use convoy_models::trace_stats::TraceStats;
use serde_json::json;

use crate::table::Table;

#[derive(Args)]
pub struct UplinkFitArgs {
    /// Mahimahi uplink traces (e.g. ../shared/traces/*.up).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Compare with this stored fit (att, tmobile, verizon) instead of the
    /// one named after each trace file.
    #[arg(long, value_name = "NAME", conflicts_with = "search")]
    fit: Option<String>,
    /// Search the parameters afresh (from the same start for every trace)
    /// and print what was found.
    #[arg(long)]
    search: bool,
    /// Model runs, each as long as the trace, averaged per candidate.
    #[arg(long, default_value_t = 4)]
    seeds: u64,
    /// Most model evaluations a search may spend per start (three starts
    /// per trace).
    #[arg(long, default_value_t = 400)]
    max_evaluations: usize,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

fn params_text(p: &UplinkParams) -> String {
    format!(
        "prbs={} sinr={:.4}dB sd={:.4}dB tau={:.4}s q={:.4} bler={}",
        p.prbs, p.sinr_db, p.shadow_sd_db, p.coherence_s, p.grant_share, p.bler
    )
}

fn stats_json(s: &TraceStats) -> serde_json::Value {
    json!({
        "mean_mbps": s.mean_mbps, "sd_mbps": s.sd_mbps, "p10_mbps": s.p10_mbps,
        "p50_mbps": s.p50_mbps, "p90_mbps": s.p90_mbps, "acf1": s.acf1,
        "busy_share": s.busy_share, "gap_p50_ms": s.gap_p50_ms, "gap_p90_ms": s.gap_p90_ms,
        "gap_p99_ms": s.gap_p99_ms, "outage_share": s.outage_share,
        "outages_per_min": s.outages_per_min, "longest_gap_ms": s.longest_gap_ms,
    })
}

fn stats_row(name: String, s: &TraceStats) -> Vec<String> {
    vec![
        name,
        format!("{:.2}", s.mean_mbps),
        format!("{:.2} / {:.2} / {:.2}", s.p10_mbps, s.p50_mbps, s.p90_mbps),
        format!("{:.2}", s.sd_mbps),
        format!("{:.2}", s.acf1),
        format!("{:.3}", s.busy_share),
        format!(
            "{:.0} / {:.0} / {:.0}",
            s.gap_p50_ms, s.gap_p90_ms, s.gap_p99_ms
        ),
        format!("{:.3}", s.outage_share),
        format!("{:.1}", s.outages_per_min),
        s.longest_gap_ms.to_string(),
    ]
}

pub fn run(a: &UplinkFitArgs) -> Result<()> {
    if a.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let named = match &a.fit {
        Some(n) => Some(UplinkFit::from_name(n).ok_or_else(|| {
            anyhow::anyhow!("--fit: expected att, tmobile or verizon, found {n:?}")
        })?),
        None => None,
    };
    let mut t = Table::new(&[
        "trace / model",
        "mean Mbit/s",
        "1 s p10/p50/p90",
        "1 s sd",
        "acf 1 s",
        "busy ms",
        "gap p50/p90/p99 ms",
        "outage",
        "outages/min",
        "longest ms",
    ]);
    let mut docs = Vec::new();
    let mut fits = Vec::new();
    for path in &a.traces {
        let trace = MahimahiTrace::from_file(path)?;
        let ts = TraceStats::of_mahimahi(trace.opportunities_ms())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        let stored = named.or_else(|| {
            UplinkFit::ALL
                .into_iter()
                .find(|f| file.as_deref() == Some(f.trace_file()))
        });
        let (label, params, model, extra) = if a.search {
            let f = lte_fit::fit_multi(&ts, a.seeds, a.max_evaluations)?;
            let extra = json!({"distance": f.distance, "evaluations": f.evaluations, "mean_held": f.mean_held});
            ("fitted".to_string(), f.params, f.model, extra)
        } else {
            let Some(fit) = stored else {
                bail!(
                    "{}: no stored fit is named after this file; give --fit NAME or --search",
                    path.display()
                );
            };
            let m = lte_fit::model_stats(fit.params(), lte_fit::run_ms(&ts), a.seeds)?;
            let extra = json!({"distance": lte_fit::distance(&m, &ts)});
            (format!("model {}", fit.name()), fit.params(), m, extra)
        };
        let name = file.unwrap_or_else(|| path.display().to_string());
        t.row(stats_row(name.clone(), &ts));
        t.row(stats_row(format!("  {label} ({} seeds)", a.seeds), &model));
        fits.push(format!("{name}: {label} {}", params_text(&params)));
        docs.push(json!({
            "trace": path, "stats": stats_json(&ts), "model": stats_json(&model),
            "params": {
                "prbs": params.prbs, "sinr_db": params.sinr_db, "shadow_sd_db": params.shadow_sd_db,
                "coherence_s": params.coherence_s, "grant_share": params.grant_share, "bler": params.bler,
            },
            "fit": extra,
        }));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&docs)?);
        return Ok(());
    }
    print!("{}", t.render());
    println!(
        "(outage: share of time in gaps of {} ms or more)",
        convoy_models::trace_stats::LONG_GAP_MS
    );
    for f in fits {
        println!("{f}");
    }
    Ok(())
}
