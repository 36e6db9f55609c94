//! `convoy sim sweep`: the cartesian product of parameter values × seeds,
//! each a `convoy sim fleet` run in its own directory, run by a pool of
//! local threads (each run is single-threaded and a function of scenario
//! and seed, so the pool size cannot change a result). runs.csv is built
//! from the runs' summary.json files in (point, seed) order, so it is
//! byte-identical whatever the number of workers or the engine that ran
//! them: `--list` hands the runs to Ray, Dask or a Slurm array instead,
//! and `--collect` builds runs.csv from what they wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;

use convoy_fleet::Scenario;

#[derive(Args)]
pub struct SweepArgs {
    /// The scenario file every run starts from.
    scenario: PathBuf,
    /// Seeds: a range `1-10`, a list `1,4,9`, or one number.
    #[arg(long, default_value = "1")]
    seeds: String,
    /// A swept key and its values: --param sensing.protocol=ave,dymo,spray
    /// (repeatable; the runs are every combination).
    #[arg(long = "param", value_name = "KEY=V1,V2,...")]
    params: Vec<String>,
    /// A fixed override for every run (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Output directory: runs/p<point>-s<seed>/ and runs.csv.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Runs at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print each run as a JSON line (its `convoy sim fleet` arguments and
    /// output directory) instead of running, for an external engine.
    #[arg(long, conflicts_with = "collect")]
    list: bool,
    /// Only build runs.csv from runs already in OUT.
    #[arg(long)]
    collect: bool,
    /// Print runs.csv's rows as JSON on stdout at the end.
    #[arg(long)]
    json: bool,
}

struct Run {
    point: usize,
    seed: u64,
    sets: Vec<(String, String)>,
    dir: PathBuf,
}

/// The most runs one sweep makes (points × seeds): a mistyped range
/// (`--seeds 1-1000000000`) is refused before its list fills memory.
const MAX_RUNS: usize = 100_000;

fn parse_seeds(s: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let number = |x: &str| -> Result<u64> {
                x.trim().parse().with_context(|| format!("--seeds {s:?}"))
            };
            let (a, b) = (number(a)?, number(b)?);
            if a > b {
                bail!("--seeds {s:?}: {a} is after {b}");
            }
            if b - a >= MAX_RUNS.saturating_sub(out.len()) as u64 {
                bail!("--seeds {s:?}: more than {MAX_RUNS} seeds");
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().with_context(|| format!("--seeds {s:?}"))?);
        }
    }
    if out.is_empty() {
        bail!("--seeds {s:?} names no seed");
    }
    Ok(out)
}

fn runs(a: &SweepArgs) -> Result<(Vec<String>, Vec<Run>)> {
    let seeds = parse_seeds(&a.seeds)?;
    let fixed = super::parse_sets(&a.sets)?;
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for p in &a.params {
        let Some((k, vs)) = p.split_once('=') else {
            bail!("--param {p:?}: expected KEY=V1,V2,...");
        };
        let vs: Vec<String> = vs
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if vs.is_empty() {
            bail!("--param {p:?}: no values");
        }
        axes.push((k.trim().to_string(), vs));
    }
    let combinations = axes
        .iter()
        .try_fold(seeds.len(), |n, (_, vs)| n.checked_mul(vs.len()));
    if combinations.is_none_or(|n| n > MAX_RUNS) {
        bail!("the sweep would make more than {MAX_RUNS} runs (parameter values × seeds)");
    }
    let mut points: Vec<Vec<(String, String)>> = vec![vec![]];
    for (k, vs) in &axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                vs.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((k.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    let mut out = Vec::new();
    for (i, p) in points.iter().enumerate() {
        for &seed in &seeds {
            let mut sets = fixed.clone();
            sets.extend(p.iter().cloned());
            out.push(Run {
                point: i,
                seed,
                sets,
                dir: a.out.join("runs").join(format!("p{i:03}-s{seed}")),
            });
        }
    }
    Ok((axes.into_iter().map(|a| a.0).collect(), out))
}

pub fn run(a: SweepArgs) -> Result<()> {
    let (keys, list) = runs(&a)?;
    // Every point must parse before anything runs.
    for r in &list {
        Scenario::load_with(&a.scenario, &r.sets).with_context(|| {
            let s: Vec<String> = r.sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("point {} ({})", r.point, s.join(" "))
        })?;
    }
    if a.list {
        for r in &list {
            let mut argv = vec![
                "sim".to_string(),
                "fleet".into(),
                a.scenario.display().to_string(),
                "--seed".into(),
                r.seed.to_string(),
                "--out".into(),
                r.dir.display().to_string(),
            ];
            for (k, v) in &r.sets {
                argv.push("--set".into());
                argv.push(format!("{k}={v}"));
            }
            println!(
                "{}",
                serde_json::json!({"point": r.point, "seed": r.seed, "out": r.dir, "argv": argv})
            );
        }
        return Ok(());
    }
    if !a.collect {
        let jobs = a
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        let next = AtomicUsize::new(0);
        let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let done = AtomicUsize::new(0);
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..jobs.min(list.len()) {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    let Some(r) = list.get(k) else { break };
                    let res = Scenario::load_with(&a.scenario, &r.sets)
                        .map_err(anyhow::Error::from)
                        .and_then(|sc| {
                            convoy_fleet::run(sc, r.seed, Some(&r.dir), |_, _| {})
                                .map_err(anyhow::Error::from)
                        });
                    if let Err(e) = res {
                        failures
                            .lock()
                            .expect("lock")
                            .push(format!("{}: {e:#}", r.dir.display()));
                    }
                    let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                    crate::progress::update(&format!(
                        "sweep: {n}/{} runs, {:.0} s",
                        list.len(),
                        started.elapsed().as_secs_f64()
                    ));
                });
            }
        });
        crate::progress::clear();
        let failures = failures.into_inner().expect("lock");
        if !failures.is_empty() {
            bail!(
                "{} of {} runs failed:\n{}",
                failures.len(),
                list.len(),
                failures.join("\n")
            );
        }
        eprintln!(
            "sweep: {} runs on {jobs} workers in {:.1} s",
            list.len(),
            started.elapsed().as_secs_f64()
        );
    }
    let rows = collect(&a.out, &keys, &list)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("{}", a.out.join("runs.csv").display());
    }
    Ok(())
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&key(k), v, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                // [name, value] pairs (loss causes) become columns by name.
                if let Some([Value::String(name), val]) = item.as_array().map(Vec::as_slice) {
                    flatten(&key(name), val, out);
                } else {
                    flatten(&key(&i.to_string()), item, out);
                }
            }
        }
        Value::Null => {
            out.insert(prefix.to_string(), String::new());
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

fn collect(out: &Path, keys: &[String], list: &[Run]) -> Result<Vec<BTreeMap<String, String>>> {
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for r in list {
        let path = r.dir.join("summary.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            missing.push(path.display().to_string());
            continue;
        };
        let v: Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
        let mut row = BTreeMap::new();
        flatten("", &v, &mut row);
        row.insert("point".into(), r.point.to_string());
        row.insert("seed".into(), r.seed.to_string());
        for k in keys {
            let v = r
                .sets
                .iter()
                .rev()
                .find(|(kk, _)| kk == k)
                .map(|x| x.1.clone())
                .unwrap_or_default();
            row.insert(format!("param.{k}"), v);
        }
        rows.push(row);
    }
    if !missing.is_empty() {
        bail!(
            "{} runs have no summary yet: {}",
            missing.len(),
            missing.join(", ")
        );
    }
    let cols: BTreeSet<String> = rows.iter().flat_map(|r| r.keys().cloned()).collect();
    let mut order: Vec<String> = vec!["point".into(), "seed".into()];
    order.extend(keys.iter().map(|k| format!("param.{k}")));
    let rest: Vec<String> = cols.into_iter().filter(|c| !order.contains(c)).collect();
    order.extend(rest);
    let esc = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut csv = order.iter().map(|c| esc(c)).collect::<Vec<_>>().join(",") + "\n";
    for r in &rows {
        let line: Vec<String> = order
            .iter()
            .map(|c| esc(r.get(c).map_or("", String::as_str)))
            .collect();
        csv.push_str(&line.join(","));
        csv.push('\n');
    }
    std::fs::create_dir_all(out)?;
    let tmp = out.join(".runs.csv.tmp");
    std::fs::write(&tmp, csv)?;
    std::fs::rename(&tmp, out.join("runs.csv"))?;
    Ok(rows)
}
