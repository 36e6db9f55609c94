//! `convoy trace scale`: a slower or faster twin of a link trace with its
//! time structure kept, so the evaluation can run the same drives at the
//! rates of 3G uplinks or 5G downlinks without new captures.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_link::{MahimahiTrace, SeriesTrace};

#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// Capacity multiplier: 0.25 makes a quarter-rate twin, 2 a double-rate
    /// one. Bursts, gaps and outages stay where they were.
    #[arg(long, value_name = "F")]
    factor: f64,
    /// A Mahimahi trace (one millisecond timestamp per line), or a convoy
    /// time-series trace (a `.csv` file with a rate column).
    input: PathBuf,
    /// Where to write the twin, in the input's format (written whole or
    /// not at all).
    output: PathBuf,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

/// The most delivery opportunities a scaled Mahimahi trace may hold: 20
/// million lines, about 160 MB of text, 1.7 Gbit/s on average over a
/// 140 s drive. A mistyped factor (1e9) asked for 10^14 lines and the
/// process died allocating them.
const MAX_OPPORTUNITIES: f64 = 20e6;
/// The fewest a twin may hold. A Mahimahi trace cannot be slower than one
/// packet per period, so a twin of a handful of lines is not the factor's
/// rate: `--factor 1e-7` wrote one line, 86 bit/s where 1.3 were asked.
/// From 100 lines the rounding is within 1 %.
const MIN_OPPORTUNITIES: f64 = 100.0;

pub fn run(a: &ScaleArgs) -> Result<()> {
    if !(a.factor.is_finite() && a.factor > 0.0) {
        bail!("--factor must be a positive number, not {}", a.factor);
    }
    let series = a
        .input
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let (text, before, after, kind) = if series {
        let t = SeriesTrace::from_file(&a.input)?;
        let Some(s) = t.scaled(a.factor) else {
            bail!(
                "{}: a series trace needs a rate column to be scaled",
                a.input.display()
            );
        };
        (
            s.to_csv(),
            mean_series_bps(&t),
            mean_series_bps(&s),
            "series",
        )
    } else {
        let t = MahimahiTrace::from_file(&a.input)?;
        let lines = t.len() as f64 * a.factor;
        if lines > MAX_OPPORTUNITIES {
            bail!(
                "--factor {}: the twin of {} would hold {lines:.3e} delivery opportunities, \
                 more than {MAX_OPPORTUNITIES:.0e}; the largest factor for this trace is {:.0}",
                a.factor,
                a.input.display(),
                (MAX_OPPORTUNITIES / t.len().max(1) as f64).floor()
            );
        }
        if lines < MIN_OPPORTUNITIES {
            bail!(
                "--factor {}: the twin of {} would hold {lines:.1} delivery opportunities, \
                 too few to keep the rate (at least {MIN_OPPORTUNITIES:.0}); the smallest \
                 factor for this trace is {:.2e}",
                a.factor,
                a.input.display(),
                MIN_OPPORTUNITIES / t.len().max(1) as f64
            );
        }
        let s = t
            .scaled(a.factor)
            .context("internal error: factor checked above")?;
        (
            s.to_text(),
            t.mean_rate_bps(),
            s.mean_rate_bps(),
            "mahimahi",
        )
    };
    write_whole(&a.output, &text)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "input": a.input, "output": a.output, "format": kind, "factor": a.factor,
                "mean_rate_bps_before": before, "mean_rate_bps_after": after,
            })
        );
    } else {
        println!(
            "{} -> {}: {kind} trace, mean capacity {:.3} -> {:.3} Mbit/s (x{})",
            a.input.display(),
            a.output.display(),
            before / 1e6,
            after / 1e6,
            a.factor
        );
    }
    Ok(())
}

/// Time-weighted mean rate over the rows (the last row counts as long as
/// the trace's repeat, or not at all when it holds for ever).
fn mean_series_bps(t: &SeriesTrace) -> f64 {
    let rows = t.rows();
    let end = t
        .repeat()
        .map(|p| p.as_nanos())
        .unwrap_or_else(|| rows.last().map_or(0, |r| r.start.as_nanos()));
    let (mut bits, mut span) = (0.0, 0.0);
    for (i, r) in rows.iter().enumerate() {
        let until = rows.get(i + 1).map_or(end, |n| n.start.as_nanos());
        let d = until.saturating_sub(r.start.as_nanos()) as f64 / 1e9;
        bits += r.rate_bps as f64 * d * f64::from(u8::from(r.up));
        span += d;
    }
    if span > 0.0 {
        bits / span
    } else {
        rows.first().map_or(0.0, |r| r.rate_bps as f64)
    }
}

/// Writes `text` to a temporary file beside `path`, then renames it over
/// `path`: a reader never sees half a trace.
fn write_whole(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        bail!("cannot write {}: {e}", path.display());
    }
    Ok(())
}
