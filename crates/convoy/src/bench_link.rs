//! `convoy bench link`: packets per second through one link direction on one
//! core, the figure that bounds the emulator and the simulator.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Result};
use convoy_link::workload::Workload;
use convoy_link::{DropReason, MahimahiTrace};
use serde::Serialize;

use crate::progress;
use crate::table::Table;

pub struct Options {
    pub json: bool,
    pub packets: u64,
    pub trace: Option<PathBuf>,
}

/// Packets per second the link model must sustain (issue 3).
const TARGET_PPS: f64 = 5e6;

#[derive(Serialize)]
struct Row {
    workload: &'static str,
    description: &'static str,
    packets: u64,
    seconds: f64,
    mpkt_per_s: f64,
    delivered: u64,
    lost: u64,
    tail_dropped: u64,
}

#[derive(Serialize)]
struct Report {
    method: &'static str,
    rows: Vec<Row>,
    target_mpkt_per_s: f64,
    met: bool,
}

pub fn run(opts: &Options) -> Result<()> {
    ensure!(opts.packets > 0, "--packets must be at least 1");
    let mut workloads = vec![Workload::constant_gbit()];
    if let Some(path) = &opts.trace {
        workloads.push(Workload::mahimahi(Arc::new(MahimahiTrace::from_file(
            path,
        )?)));
    }
    let mut rows = Vec::new();
    for w in workloads {
        progress::update(&format!("measuring {}", w.id));
        let mut link = w.link()?;
        let start = Instant::now();
        let delivered = w.run(&mut link, opts.packets);
        let seconds = start.elapsed().as_secs_f64();
        let stats = link.stats();
        rows.push(Row {
            workload: w.id,
            description: w.description,
            packets: opts.packets,
            seconds,
            mpkt_per_s: opts.packets as f64 / seconds / 1e6,
            delivered,
            lost: stats.dropped(DropReason::Loss),
            tail_dropped: stats.dropped(DropReason::QueueFull),
        });
    }
    progress::clear();
    let met = rows.iter().all(|r| r.mpkt_per_s * 1e6 >= TARGET_PPS);
    let report = Report {
        method: "one core, virtual time: each packet is enqueued and every due delivery \
                 polled; Mpkt/s counts offered packets",
        rows,
        target_mpkt_per_s: TARGET_PPS / 1e6,
        met,
    };
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut table = Table::new(&[
        "workload",
        "packets",
        "Mpkt/s",
        "delivered",
        "lost",
        "tail-dropped",
    ]);
    for r in &report.rows {
        table.row(vec![
            r.workload.into(),
            r.packets.to_string(),
            format!("{:.1}", r.mpkt_per_s),
            r.delivered.to_string(),
            r.lost.to_string(),
            r.tail_dropped.to_string(),
        ]);
    }
    print!("convoy bench link\n\n{}", table.render());
    for r in &report.rows {
        println!("  {}: {}", r.workload, r.description);
    }
    if opts.trace.is_none() {
        println!("  (pass --trace FILE to also replay a Mahimahi trace)");
    }
    println!(
        "\ntarget: {} {:.0} Mpkt/s per link direction\n{}",
        if report.met { "met" } else { "MISS" },
        report.target_mpkt_per_s,
        report.method
    );
    Ok(())
}
