//! `convoy simulate --path A --path B --duration T`: a timed upload over
//! several links at once in virtual time (`convoy_sim::multipath`), with
//! each stall of the reader and what each link carried beside what it
//! could carry. A drive that takes the emulator five minutes runs here in
//! seconds, so a multipath rule can be judged over many seeds first.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use convoy_emu::LinkSpec;
use convoy_proto::Config;
use convoy_sim::multipath::{MultipathReport, MultipathSpec, PathLink};
use serde::Serialize;

use super::{cpu_seconds, duration_arg, SimulateArgs};
use crate::progress;

#[derive(Serialize)]
struct Summary<'a> {
    mode: &'a str,
    code: &'a str,
    seed: u64,
    cpu_seconds: f64,
    wall_seconds: f64,
    #[serde(flatten)]
    report: MultipathReport,
}

/// `[NAME:]KEYS` as link `i` of the run (NAME defaults to `pathI`). A link
/// whose keys name no seed draws its random processes from --seed plus
/// its position, as the multipath experiments seed `convoy emu`'s links.
fn path_link(text: &str, i: usize, seed: u64, backup: bool) -> Result<PathLink> {
    let named = text.split_once(':').filter(|(name, _)| !name.contains('='));
    let (name, keys) = named.map_or((format!("path{i}"), text), |(n, k)| (n.to_owned(), k));
    let mut keys: Vec<String> = keys
        .split(',')
        .filter(|k| !k.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if !keys.iter().any(|k| k.trim_start().starts_with("seed=")) {
        keys.push(format!("seed={}", seed.wrapping_add(i as u64)));
    }
    let bad = |e: &dyn std::fmt::Display| anyhow::anyhow!("--path {text}: {e}");
    let spec = LinkSpec::parse(&format!("{name}:{}", keys.join(","))).map_err(|e| bad(&e))?;
    let (uplink, downlink) = spec.configs(i).map_err(|e| bad(&e))?;
    Ok(PathLink {
        name,
        uplink,
        downlink,
        iface_down: spec.iface_down,
        backup,
    })
}

pub(super) fn run(
    args: &SimulateArgs,
    client: Config,
    server: Config,
    duration: Duration,
    code: &str,
) -> Result<()> {
    let mut links: Vec<PathLink> = Vec::new();
    let given = args.paths.iter().map(|p| (p, false));
    for (text, backup) in given.chain(args.backup_paths.iter().map(|p| (p, true))) {
        let link = path_link(text, links.len(), args.seed, backup)?;
        if links.iter().any(|l| l.name == link.name) {
            bail!("--path {text}: two links are named {}", link.name);
        }
        links.push(link);
    }
    let bin = duration_arg("--timeline-bin", &args.timeline_bin)?;
    if bin.as_nanos() < 1_000_000 {
        bail!("--timeline-bin {}: at least 1ms", args.timeline_bin);
    }
    let mut spec = MultipathSpec::new(links, client, server, duration);
    spec.timeline_bin = Duration::from_nanos(bin.as_nanos());
    spec.progress = Some(Box::new(|at, done, _| {
        progress::update(&format!(
            "simulating: {:.0} s of virtual time, {:.1} MB delivered",
            at.as_secs_f64(),
            done as f64 / 1e6
        ))
    }));
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let report = convoy_sim::run_multipath(spec).context("simulation failed");
    progress::clear();
    let s = Summary {
        mode: &args.mode,
        code,
        seed: args.seed,
        report: report?,
        cpu_seconds: cpu_seconds() - cpu0,
        wall_seconds: wall0.elapsed().as_secs_f64(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_summary(&s, duration);
    }
    Ok(())
}

fn print_summary(s: &Summary, duration: Duration) {
    let r = &s.report;
    let names: Vec<&str> = r.paths.iter().map(|p| p.name.as_str()).collect();
    println!(
        "convoy simulate: {} ({}) over {} links ({}) for {:.0} s, seed {}",
        s.mode,
        s.code,
        names.len(),
        names.join(", "),
        duration.as_secs_f64(),
        s.seed
    );
    let ratio = if r.capacity_bps > 0.0 {
        r.goodput_bps / r.capacity_bps
    } else {
        0.0
    };
    println!(
        "  goodput            {:>8.3} Mbit/s of {:.3} the links could carry ({ratio:.3})",
        r.goodput_bps / 1e6,
        r.capacity_bps / 1e6
    );
    for p in &r.paths {
        let downs = match p.interface_downs {
            0 => String::new(),
            n => format!("; interface down {n} times"),
        };
        println!(
            "  {:<18} carried {:.3} of {:.3} Mbit/s (IP bytes){downs}; {} state changes",
            p.name,
            p.carried_bps / 1e6,
            p.capacity_bps / 1e6,
            p.states.len()
        );
    }
    let mut lengths: Vec<f64> = r.stalls.iter().map(|x| x.seconds).collect();
    lengths.sort_by(f64::total_cmp);
    let p99 = lengths
        .get(((lengths.len().max(1) - 1) as f64 * 0.99).round() as usize)
        .copied()
        .unwrap_or(0.0);
    let longest = r
        .stalls
        .iter()
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds));
    println!(
        "  reader stalls      {} of 20 ms or more, p99 {:.0} ms{}",
        r.stalls.len(),
        p99 * 1e3,
        longest.map_or(String::new(), |x| format!(
            ", longest {:.2} s at {:.1} s",
            x.seconds, x.at_s
        ))
    );
    println!(
        "  over {:.1} s beside capacity: {}",
        r.stall_limit_s,
        if r.stalls_over_limit.is_empty() {
            "none".to_owned()
        } else {
            r.stalls_over_limit
                .iter()
                .map(|x| {
                    format!(
                        "{:.2} s at {:.1} s ({:.2} s with capacity)",
                        x.seconds, x.at_s, x.with_capacity_s
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        }
    );
    println!(
        "  packets            {} sent, {} lost, {} repair symbols, {} redundant at the receiver",
        r.client.packets_sent,
        r.client.packets_lost,
        r.client.repair_symbols,
        r.server.redundant_received
    );
    if let Some(reason) = &r.client_closed {
        println!("  the connection closed: {reason}");
    }
    let handshake = r.handshake.map_or("no handshake".to_owned(), |h| {
        format!("handshake {:.1} ms", h.as_secs_f64() * 1e3)
    });
    println!(
        "  {handshake}; CPU {:.2} s for {:.1} s of virtual time ({:.2} s wall)",
        s.cpu_seconds, r.to_s, s.wall_seconds
    );
}

#[cfg(test)]
mod tests {
    use super::path_link;

    #[test]
    fn a_path_takes_its_name_and_a_seed_by_position() {
        let l = path_link("wifi:rate=20mbit,delay=5ms", 1, 7, false).unwrap();
        assert_eq!(l.name, "wifi");
        assert_eq!(
            l.uplink.seed,
            path_link("x:rate=20mbit,delay=5ms,seed=8", 1, 0, false)
                .unwrap()
                .uplink
                .seed
        );
        let unnamed = path_link("rate=10mbit", 2, 1, true).unwrap();
        assert_eq!((unnamed.name.as_str(), unnamed.backup), ("path2", true));
        assert!(!unnamed.iface_down);
        let down = path_link("w:rate=1mbit,outage=1s-2s,outage-policy=down", 0, 1, false).unwrap();
        assert!(down.iface_down);
        let err = path_link("w:rate=fast", 0, 1, false)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--path w:rate=fast: "), "{err}");
    }
}
