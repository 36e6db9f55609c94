//! `convoy bench can`: candump frames per second decoded with a DBC on one
//! thread, the figure issue 36 sets (≥ 1 M frames/s with a 100-message DBC).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, ensure, Result};
use convoy_agent::can::{self, candump, Decoder, SignalMap, Unmapped};
use serde::Serialize;

use crate::progress;
use crate::table::Table;

#[derive(clap::Args, Debug)]
pub struct BenchCanArgs {
    /// The DBC file (default: the 100-message one scripts/can-fixtures.py
    /// wrote with cantools; run from the repository root).
    #[arg(
        long,
        default_value = "crates/convoy-agent/tests/data/can/bench100.dbc"
    )]
    pub dbc: PathBuf,
    /// A candump -L log to decode; without it, `--frames` random frames of
    /// the DBC's messages are written as candump lines in memory first.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Frames made when there is no --log.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: u64,
    /// Passes over the log; the best and the median are printed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub passes: u64,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Frames per second the decoder must sustain (issue 36).
const TARGET_FPS: f64 = 1e6;

#[derive(Serialize)]
struct Row {
    stage: &'static str,
    frames: u64,
    signals: u64,
    best_mframes_per_s: f64,
    median_mframes_per_s: f64,
}

#[derive(Serialize)]
struct Report {
    dbc: String,
    messages: usize,
    log: String,
    lines: usize,
    threads: u32,
    rows: Vec<Row>,
    target_mframes_per_s: f64,
    met: bool,
}

/// Random payloads for the DBC's messages, as candump lines.
fn synthesise(dec: &Decoder, frames: u64) -> String {
    let ids = message_ids(dec);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        // xorshift64*: a fixed stream, so runs compare.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut out = String::with_capacity(frames as usize * 48);
    for i in 0..frames {
        let (id, extended) = ids[(next() % ids.len() as u64) as usize];
        let mut f = can::Frame {
            t_ns: 1_764_000_000_000_000_000 + i as i64 * 100_000,
            iface: "can0",
            id,
            extended,
            fd: false,
            remote: false,
            len: 8,
            data: [0; candump::MAX_DATA],
        };
        f.data[..8].copy_from_slice(&next().to_le_bytes());
        out.push_str(&candump::format_line(&f));
        out.push('\n');
    }
    out
}

/// Each message's (id, extended), found by asking the decoder.
fn message_ids(dec: &Decoder) -> Vec<(u32, bool)> {
    let mut ids = Vec::new();
    for id in 0..=0x7FFu32 {
        if dec.message_index(id, false).is_some() {
            ids.push((id, false));
        }
    }
    ids
}

fn time_passes(passes: u64, mut pass: impl FnMut() -> (u64, u64)) -> (u64, u64, f64, f64) {
    let mut secs = Vec::new();
    let mut counts = (0, 0);
    for _ in 0..passes {
        let start = Instant::now();
        counts = pass();
        secs.push(start.elapsed().as_secs_f64());
    }
    secs.sort_by(f64::total_cmp);
    (counts.0, counts.1, secs[0], secs[secs.len() / 2])
}

pub fn run(args: BenchCanArgs) -> Result<()> {
    let dec = Decoder::load(&args.dbc).map_err(|e| anyhow!(e))?;
    let text = match &args.log {
        Some(p) => std::fs::read_to_string(p).map_err(|e| anyhow!("{}: {e}", p.display()))?,
        None => {
            let ids = message_ids(&dec);
            ensure!(
                !ids.is_empty(),
                "{}: no message with an 11-bit id to make frames of (give --log)",
                args.dbc.display()
            );
            progress::update(&format!("writing {} candump lines", args.frames));
            synthesise(&dec, args.frames)
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let map = SignalMap::new(
        &dec,
        &Default::default(),
        Unmapped::Private,
        &Default::default(),
    )
    .map_err(|e| anyhow!(e))?;
    let mut rows = Vec::new();

    progress::update("timing: parse");
    let (frames, _, best, median) = time_passes(args.passes, || {
        let mut n = 0;
        for l in &lines {
            n += u64::from(candump::parse_line(black_box(l)).is_ok());
        }
        (n, 0)
    });
    rows.push(row(
        "parse candump lines",
        frames,
        0,
        lines.len(),
        best,
        median,
    ));

    progress::update("timing: parse + decode");
    let (frames, signals, best, median) = time_passes(args.passes, || {
        let (mut n, mut sigs, mut sum) = (0, 0, 0.0);
        for l in &lines {
            if let Ok(f) = candump::parse_line(black_box(l)) {
                n += 1;
                dec.decode(&f, |_, v| {
                    sigs += 1;
                    sum += v;
                });
            }
        }
        black_box(sum);
        (n, sigs)
    });
    rows.push(row(
        "parse + decode (DBC)",
        frames,
        signals,
        lines.len(),
        best,
        median,
    ));
    let decode_best = best;

    progress::update("timing: parse + decode + samples");
    let (frames, signals, best, median) = time_passes(args.passes, || {
        let (mut n, mut sigs) = (0, 0);
        let mut batch = Vec::with_capacity(8192);
        for l in &lines {
            if let Ok(f) = candump::parse_line(black_box(l)) {
                n += 1;
                let m = dec.message_index(f.id, f.extended).unwrap_or(0);
                dec.decode(&f, |i, v| {
                    if let Some(path) = map.path(m, i) {
                        sigs += 1;
                        batch.push(convoy_telemetry::Sample {
                            t_ns: f.t_ns,
                            path: path.to_owned(),
                            value: convoy_telemetry::Value::Number(v),
                        });
                    }
                });
                if batch.len() >= 4096 {
                    black_box(&batch);
                    batch.clear();
                }
            }
        }
        (n, sigs)
    });
    rows.push(row(
        "parse + decode + VSS samples",
        frames,
        signals,
        lines.len(),
        best,
        median,
    ));
    progress::clear();

    let best_fps = lines.len() as f64 / decode_best;
    let report = Report {
        dbc: args.dbc.display().to_string(),
        messages: dec.messages().len(),
        log: args.log.as_ref().map_or_else(
            || format!("{} random frames in memory", args.frames),
            |p| p.display().to_string(),
        ),
        lines: lines.len(),
        threads: 1,
        rows,
        target_mframes_per_s: TARGET_FPS / 1e6,
        met: best_fps >= TARGET_FPS,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "CAN decoding on one thread: {} ({} messages), {} ({} lines), best and median of {} passes",
        report.dbc, report.messages, report.log, report.lines, args.passes
    );
    let mut t = Table::new(&[
        "stage",
        "frames",
        "signals",
        "best Mframes/s",
        "median Mframes/s",
    ]);
    for r in &report.rows {
        t.row(vec![
            r.stage.to_string(),
            r.frames.to_string(),
            r.signals.to_string(),
            format!("{:.2}", r.best_mframes_per_s),
            format!("{:.2}", r.median_mframes_per_s),
        ]);
    }
    print!("{}", t.render());
    println!(
        "target: parse + decode ≥ {:.1} M frames/s: {} ({:.2})",
        report.target_mframes_per_s,
        if report.met { "met" } else { "missed" },
        best_fps / 1e6
    );
    Ok(())
}

fn row(
    stage: &'static str,
    frames: u64,
    signals: u64,
    lines: usize,
    best: f64,
    median: f64,
) -> Row {
    Row {
        stage,
        frames,
        signals,
        best_mframes_per_s: lines as f64 / best / 1e6,
        median_mframes_per_s: lines as f64 / median / 1e6,
    }
}
