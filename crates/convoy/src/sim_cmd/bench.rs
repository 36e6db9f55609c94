//! `convoy sim fleet --bench`: the benchmark city at each fleet size, on
//! this one core, with events/s, packets/s, simulated seconds per wall
//! second and peak memory (per vehicle too), beside the targets.

use std::time::Instant;

use anyhow::Result;
use serde::Serialize;

#[derive(Serialize)]
struct Row {
    vehicles: u32,
    simulated_s: f64,
    wall_s: f64,
    cpu_s: f64,
    sim_per_wall: f64,
    sim_per_cpu: f64,
    events_per_s: f64,
    packets_per_s: f64,
    peak_mb: f64,
    kb_per_vehicle: f64,
    upload_mode: String,
    uploads_active_at_end: usize,
    uploads_completed: usize,
    upload_mb_read: f64,
    target_sim_per_wall: f64,
}

/// Resident set size and its peak, in bytes (Linux /proc).
fn rss() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU seconds this process has used (user + system).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we hand it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub fn run(
    sizes: &[u32],
    duration: f64,
    seed: u64,
    sets: &[(String, String)],
    json: bool,
) -> Result<()> {
    let mut rows = Vec::new();
    for &n in sizes {
        // Reset the peak so each size is measured on its own.
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let (base, _) = rss();
        crate::progress::update(&format!("bench: {n} vehicles"));
        let sc = convoy_fleet::bench::scenario_with(n, duration, sets)?;
        let upload_mode = sc.upload.as_ref().map_or(String::new(), |u| u.mode.clone());
        let started = Instant::now();
        let cpu0 = cpu_seconds();
        let mut w = convoy_fleet::build(sc, seed)?;
        let events = w
            .run(|now, end| {
                crate::progress::update(&format!(
                    "bench: {n} vehicles, {:.0}/{:.0} s",
                    now as f64 / 1e9,
                    end as f64 / 1e9
                ))
            })
            .map_err(anyhow::Error::msg)?;
        let wall = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        let (_, peak) = rss();
        let packets = w.medium.frames_sent + w.lte_packets;
        let mem = peak.saturating_sub(base) as f64;
        rows.push(Row {
            vehicles: n,
            simulated_s: duration,
            wall_s: wall,
            cpu_s: cpu,
            sim_per_wall: duration / wall,
            sim_per_cpu: duration / cpu,
            events_per_s: events as f64 / wall,
            packets_per_s: packets as f64 / wall,
            peak_mb: peak as f64 / 1e6,
            kb_per_vehicle: mem / f64::from(n) / 1e3,
            upload_mode,
            uploads_active_at_end: w.uploads.as_ref().map_or(0, |u| u.active()),
            uploads_completed: w
                .uploads
                .as_ref()
                .map_or(0, |u| u.recs.iter().filter(|r| r.done.is_some()).count()),
            upload_mb_read: w.uploads.as_ref().map_or(0.0, |u| {
                u.recs.iter().map(|r| r.bytes_read as f64).sum::<f64>() / 1e6
            }),
            target_sim_per_wall: if n >= 10_000 { 0.5 } else { 5.0 },
        });
        drop(w);
    }
    crate::progress::clear();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "load_average": load(), "runs": rows })
            )?
        );
        return Ok(());
    }
    println!("convoy sim fleet --bench: grid city at 41 vehicles/km², all beaconing (AVE), 10 % uploading (convoy-proto over LTE); load average {}", load());
    println!();
    println!("vehicles  sim s  wall s  CPU s  sim/wall  sim/CPU  target  events/s  packets/s  peak MB  KB/vehicle  upload mode  uploads done  upload MB");
    for r in &rows {
        println!(
            "{:>8}  {:>5.0}  {:>6.1}  {:>5.1}  {:>8.2}  {:>7.2}  {:>6}  {:>8.0}  {:>9.0}  {:>7.0}  {:>10.0}  {:>11}  {:>12}  {:>9.1}",
            r.vehicles,
            r.simulated_s,
            r.wall_s,
            r.cpu_s,
            r.sim_per_wall,
            r.sim_per_cpu,
            format!("≥ {}", r.target_sim_per_wall),
            r.events_per_s,
            r.packets_per_s,
            r.peak_mb,
            r.kb_per_vehicle,
            r.upload_mode,
            r.uploads_completed,
            r.upload_mb_read
        );
    }
    println!("\nsim/CPU divides by this process's CPU time, which a busy machine does not inflate; events/s and");
    println!("packets/s are per wall second. Memory: peak resident set above the process's before the run, per");
    println!("vehicle; target ≤ 1000 KB per vehicle.");
    Ok(())
}
