//! `convoy sim fleet` and `convoy sim sweep`: the fleet simulator
//! (convoy-fleet) from the command line, its benchmark, and sweeps of
//! seeds and parameter points over local cores or an external engine.

mod bench;
mod sweep;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use convoy_fleet::Scenario;

#[derive(Subcommand)]
pub enum SimCommand {
    /// Run one fleet scenario in virtual time: `convoy sim fleet
    /// SCENARIO.toml [--seed N] [--out DIR] [--set KEY=VALUE]...`. Writes
    /// CSV records and summary.json into DIR and prints a summary line.
    /// `convoy sim fleet --bench` measures speed and memory instead.
    Fleet(FleetArgs),
    /// Run seeds × parameter points in parallel: `convoy sim sweep
    /// SCENARIO.toml --seeds 1-10 --param sensing.protocol=ave,dymo
    /// --out DIR [--jobs N]`. Writes DIR/runs.csv, the same whatever N.
    /// `--list` prints the runs for another engine (Ray, Dask, Slurm),
    /// `--collect` builds runs.csv from their outputs.
    Sweep(sweep::SweepArgs),
}

#[derive(Args)]
pub struct FleetArgs {
    /// The scenario file (TOML, docs/SIM.md).
    #[arg(required_unless_present = "bench")]
    scenario: Option<PathBuf>,
    /// Seed of every random draw (default: the scenario's `seed`).
    #[arg(long)]
    seed: Option<u64>,
    /// Directory for the records (CSV and summary.json).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Override a scenario key, e.g. --set sensing.protocol=dymo (repeatable;
    /// with --bench, a key of the benchmark city, e.g. upload.mode=rcdp).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Measure events/s, packets/s, simulated s per wall s and peak memory
    /// on the built-in benchmark city instead of running a scenario.
    #[arg(long)]
    bench: bool,
    /// --bench: fleet sizes to measure.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1000u32, 10000])]
    vehicles: Vec<u32>,
    /// --bench: simulated seconds per fleet size.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
}

pub fn run(cmd: SimCommand) -> Result<()> {
    match cmd {
        SimCommand::Fleet(a) if a.bench => {
            let sets = parse_sets(&a.sets)?;
            bench::run(&a.vehicles, a.duration, a.seed.unwrap_or(1), &sets, a.json)
        }
        SimCommand::Fleet(a) => fleet(a),
        SimCommand::Sweep(a) => sweep::run(a),
    }
}

pub fn parse_sets(sets: &[String]) -> Result<Vec<(String, String)>> {
    sets.iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
            _ => bail!("--set {s:?}: expected KEY=VALUE"),
        })
        .collect()
}

fn fleet(a: FleetArgs) -> Result<()> {
    let path = a.scenario.context("a scenario file is required")?;
    let sets = parse_sets(&a.sets)?;
    let sc = Scenario::load_with(&path, &sets)?;
    let seed = a.seed.unwrap_or(sc.seed);
    let name = sc.name.clone();
    let started = std::time::Instant::now();
    let out = convoy_fleet::run(sc, seed, a.out.as_deref(), |now, end| {
        crate::progress::update(&format!(
            "{name}: {:.0} of {:.0} simulated s",
            now as f64 / 1e9,
            end as f64 / 1e9
        ));
    })?;
    crate::progress::clear();
    let wall = started.elapsed().as_secs_f64();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out.summary)?);
        return Ok(());
    }
    println!("{}", summary_line(&out.summary, wall));
    if let Some(dir) = &a.out {
        eprintln!("records: {}", dir.display());
    }
    Ok(())
}

/// The one-line summary of a run.
pub fn summary_line(s: &convoy_fleet::Summary, wall_s: f64) -> String {
    let mut parts = vec![format!(
        "{} seed {}: {:.0} s simulated in {:.1} s ({:.1}x real time), {} vehicles, {} events",
        s.scenario,
        s.seed,
        s.duration_s,
        wall_s,
        s.duration_s / wall_s.max(1e-9),
        s.vehicles,
        s.events
    )];
    if let Some(x) = &s.sensing {
        parts.push(format!(
            "{}: {}/{} bundles delivered ({:.1} %), mean delay {:.1} s, {:.2} hops",
            x.protocol,
            x.delivered,
            x.bundles,
            100.0 * x.delivery_ratio,
            x.mean_delay_s,
            x.mean_hops
        ));
    }
    if let Some(x) = &s.uploads {
        parts.push(format!(
            "uploads: {} of {} complete, {:.1} MB delivered, {} corrupt",
            x.completed,
            x.started,
            x.bytes_delivered as f64 / 1e6,
            x.corrupt
        ));
    }
    if let Some(x) = &s.edge {
        parts.push(format!(
            "edge: {} requests, mean {:.0} ms, p95 {:.0} ms, {:.0} % at the edge",
            x.answered,
            x.mean_latency_ms,
            x.p95_latency_ms,
            100.0 * x.edge_served
        ));
    }
    if let Some(x) = &s.clusters {
        parts.push(format!(
            "clusters ({}): {:.1} % of CAMs delivered in time, mean {:.0} ms",
            x.radios,
            100.0 * x.delivery_ratio,
            x.mean_delay_ms
        ));
    }
    parts.join("; ")
}
