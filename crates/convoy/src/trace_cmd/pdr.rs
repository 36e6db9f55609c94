//! `convoy trace pdr`: the 802.11p delivery curve and its landmarks.

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

use super::{DsrcArgs, ModelName};
use crate::table::Table;

#[derive(Args)]
pub struct PdrArgs {
    /// Radio model.
    #[arg(long, value_enum, default_value = "80211p")]
    model: ModelName,
    #[command(flatten)]
    channel: DsrcArgs,
    /// Last distance of the curve, metres.
    #[arg(long, value_name = "M", default_value_t = 1500.0)]
    max_distance: f64,
    /// Spacing of the curve, metres.
    #[arg(long, value_name = "M", default_value_t = 50.0)]
    step: f64,
    /// Extra distances to print, e.g. --at 100,1400.
    #[arg(long, value_name = "M,...", value_delimiter = ',', default_values_t = [100.0, 1400.0])]
    at: Vec<f64>,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Point {
    distance_m: f64,
    mean_rx_dbm: f64,
    pdr: f64,
}

#[derive(Serialize)]
struct Report {
    model: &'static str,
    m: f64,
    alpha: f64,
    tx_power_dbm: f64,
    frequency_hz: f64,
    noise_floor_dbm: f64,
    threshold_dbm: f64,
    range_90_m: f64,
    range_50_m: f64,
    range_5_m: f64,
    at: Vec<Point>,
    curve: Vec<Point>,
}

pub fn run(a: &PdrArgs) -> Result<()> {
    let ModelName::Dsrc = a.model;
    let ch = a.channel.channel()?;
    let positive = |v: f64| v > 0.0 && v.is_finite();
    if !(positive(a.step) && positive(a.max_distance)) {
        bail!(
            "--step and --max-distance must be positive, got {} and {}",
            a.step,
            a.max_distance
        );
    }
    if let Some(d) = a.at.iter().find(|d| !(d.is_finite() && **d > 0.0)) {
        bail!("--at distances must be positive metres, got {d}");
    }
    let point = |d: f64| Point {
        distance_m: d,
        mean_rx_dbm: ch.mean_rx_power_dbm(d, 0.0),
        pdr: ch.pdr(d),
    };
    let n = (a.max_distance / a.step).floor() as usize;
    let mut curve = vec![point(1.0)];
    curve.extend((1..=n).map(|i| point(i as f64 * a.step)));
    let report = Report {
        model: "80211p",
        m: ch.m,
        alpha: ch.alpha,
        tx_power_dbm: ch.tx_power_dbm,
        frequency_hz: ch.frequency_hz,
        noise_floor_dbm: ch.noise_floor_dbm,
        threshold_dbm: ch.threshold_dbm(),
        range_90_m: ch.range_at(0.9),
        range_50_m: ch.range_at(0.5),
        range_5_m: ch.range_at(0.05),
        at: a.at.iter().map(|&d| point(d)).collect(),
        curve,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "802.11p PDR vs distance: modified free space α = {}, Nakagami m = {}\n\
         Pt = {} dBm, 0 dBi, {:.2} GHz, noise floor {} dBm, threshold {} dBm (SNR ≥ {} dB)\n",
        ch.alpha,
        ch.m,
        ch.tx_power_dbm,
        ch.frequency_hz / 1e9,
        ch.noise_floor_dbm,
        ch.threshold_dbm(),
        ch.min_snr_db
    );
    println!(
        "PDR ≥ 90 % up to {:.0} m, ≥ 50 % up to {:.0} m, ≥ 5 % up to {:.0} m",
        report.range_90_m, report.range_50_m, report.range_5_m
    );
    for p in &report.at {
        println!("PDR at {:.0} m: {:.2} %", p.distance_m, 100.0 * p.pdr);
    }
    println!();
    let mut t = Table::new(&["distance m", "mean rx dBm", "PDR %"]);
    for p in &report.curve {
        t.row(vec![
            format!("{:.0}", p.distance_m),
            format!("{:.1}", p.mean_rx_dbm),
            format!("{:.2}", 100.0 * p.pdr),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}
