//! `convoy trace from-mobility`: SUMO FCD → one convoy time-series trace per
//! vehicle per interface (docs/TRACES.md, docs/MODELS.md).
//!
//! * `<vehicle>.80211p.csv`: the link to the nearest RSU. Each FCD step
//!   becomes a row: 802.11p's data rate, a fixed access delay, and the
//!   loss of a frame at PDR(distance, shadowing); with `--mac` (802.11
//!   retries, on by default) the loss after the retries and the rate left
//!   after their airtime (`mac.rs`). The link is down where the PDR falls
//!   under --min-pdr (out of range).
//! * `<vehicle>.lte.csv`: the downlink from the nearest eNodeB. Distance →
//!   CSQ (TR 36.942 urban macro path loss), then the empirical LTE model
//!   draws that second's capacity and RTT (delay = RTT / 2); down at CSQ 0
//!   and, for --handover-interruption-ms, where the nearest eNodeB changes.
//!
//! Times start at 0 when the vehicle enters the map; `index.csv` says when
//! that was in simulation time. Every file is parsed back with convoy-link's
//! SeriesTrace before it is written, so the emulator and simulator accept it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_models::dsrc::Dsrc;
use convoy_models::handover::HandoverTracker;
use convoy_models::lte::{self, CsqMapping, RttModel};
use convoy_models::shadowing::Buildings;
use convoy_models::sumo::FcdReader;
use convoy_models::{Point, Rng};
use serde::Serialize;

use super::obstacle::ShadowingOpts;
use super::{collect_points, load_buildings, parse_point, DsrcArgs, ModelName};

#[derive(Args)]
pub struct FromMobilityArgs {
    /// SUMO floating-car data (sumo --fcd-output, or
    /// `python -m convoy_lab.mobility run ... --fcd FILE`).
    #[arg(long, value_name = "FILE")]
    fcd: PathBuf,
    /// An RSU at x,y (network metres); repeatable.
    #[arg(long, value_name = "X,Y", value_parser = parse_point, allow_hyphen_values = true)]
    rsu: Vec<Point>,
    /// A file of RSU positions, one `x,y` or `id,x,y` per line.
    #[arg(long, value_name = "FILE")]
    rsus: Option<PathBuf>,
    /// An eNodeB at x,y; repeatable.
    #[arg(long, value_name = "X,Y", value_parser = parse_point, allow_hyphen_values = true)]
    enb: Vec<Point>,
    /// A file of eNodeB positions, one `x,y` or `id,x,y` per line.
    #[arg(long, value_name = "FILE")]
    enbs: Option<PathBuf>,
    /// Radio model of the RSU link.
    #[arg(long, value_enum, default_value = "80211p")]
    model: ModelName,
    #[command(flatten)]
    channel: DsrcArgs,
    /// Buildings (SUMO polygons) shadowing the RSU link, after Sommer et al.
    #[arg(long, value_name = "FILE")]
    poly: Option<PathBuf>,
    #[command(flatten)]
    shadowing: ShadowingOpts,
    /// 802.11p data rate written to the traces, Mbit/s (6: the default
    /// rate of 10 MHz channels; up to 27).
    #[arg(long, value_name = "MBIT/S", default_value_t = 6.0)]
    rate_80211p_mbps: f64,
    /// One-way delay of the 802.11p link, ms (channel access and
    /// propagation; microseconds of flight at these distances).
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    delay_80211p_ms: f64,
    /// 802.11 retries folded into the 802.11p traces' rate and loss:
    /// `80211p[:retries=N]` (ITS-G5 timing, 7 retries by default),
    /// `80211[:retries=N]`, or `none` (one attempt per frame, loss = 1 − PDR).
    #[arg(long, value_name = "MAC", default_value = "80211p:retries=7")]
    mac: String,
    /// Below this PDR the 802.11p link is written as down.
    #[arg(long, value_name = "P", default_value_t = 0.01)]
    min_pdr: f64,
    /// A change of nearest eNodeB (a handover) takes the LTE link down for
    /// this long, ms (the fleet simulator's default; 0: no interruption).
    #[arg(long, value_name = "MS", default_value_t = convoy_models::handover::DEFAULT_INTERRUPTION_MS)]
    handover_interruption_ms: u64,
    /// Skip the LTE traces (no eNodeB needed).
    #[arg(long)]
    no_lte: bool,
    /// Directory for the traces (created if missing).
    #[arg(short, long, value_name = "DIR")]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print a JSON summary instead of the text one.
    #[arg(long)]
    json: bool,
}

struct VehicleTrace {
    first_s: f64,
    last_s: f64,
    dsrc: String,
    lte: String,
    rows: usize,
    rng: Rng,
    base_rtt_ms: f64,
    /// The serving eNodeB (by index), to see handovers.
    cells: HandoverTracker,
    pdr_sum: f64,
    /// Loss written while in range, summed, and the rows in range.
    loss_sum: f64,
    rows_up: usize,
}

#[derive(Serialize, Default)]
struct Summary {
    fcd: String,
    out: String,
    steps: usize,
    first_time_s: f64,
    last_time_s: f64,
    vehicles: usize,
    files: usize,
    rows: usize,
    rsus: usize,
    enbs: usize,
    buildings: usize,
    mean_pdr_80211p: f64,
    /// Mean loss_p of the 802.11p rows in range (after retries with --mac).
    mean_loss_80211p_in_range: f64,
    /// Changes of nearest eNodeB, each written as an interruption.
    lte_handovers: usize,
    rows_80211p_in_range: usize,
    mac: String,
}

fn nearest(points: &[Point], p: Point) -> Point {
    points[nearest_index(points, p)]
}

fn nearest_index(points: &[Point], p: Point) -> usize {
    (0..points.len())
        .min_by(|&a, &b| points[a].dist(p).total_cmp(&points[b].dist(p)))
        .expect("at least one point")
}

fn file_stem(id: &str) -> String {
    // Vehicle ids are free text in SUMO; keep file names portable.
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

struct Ctx<'a> {
    a: &'a FromMobilityArgs,
    ch: Dsrc,
    rsus: Vec<Point>,
    enbs: Vec<Point>,
    buildings: Buildings,
    csq_map: CsqMapping,
    mac: Option<convoy_link::MacConfig>,
}

impl Ctx<'_> {
    fn row(&self, v: &mut VehicleTrace, t: f64, pos: Point) -> Result<()> {
        let rel_ms = ((t - v.first_s) * 1000.0).round() as u64;
        let rsu = nearest(&self.rsus, pos);
        let shadow = if self.buildings.is_empty() {
            0.0
        } else {
            self.buildings.shadow(pos, rsu).db
        };
        let pdr = self.ch.pdr_shadowed(pos.dist(rsu), shadow);
        v.pdr_sum += pdr;
        let up = pdr >= self.a.min_pdr;
        let (rate_bps, loss) = if up {
            super::mac::row(self.mac.as_ref(), self.a.rate_80211p_mbps * 1e6, pdr)
        } else {
            (self.a.rate_80211p_mbps * 1e6, 0.0)
        };
        if up {
            v.loss_sum += loss;
            v.rows_up += 1;
        }
        v.dsrc.push_str(&format!(
            "{rel_ms},{},{},{:.6},{}\n",
            (rate_bps / 1000.0).round() as u64,
            self.a.delay_80211p_ms,
            loss,
            u8::from(up)
        ));
        if !self.a.no_lte {
            let cell = nearest_index(&self.enbs, pos);
            let enb = self.enbs[cell];
            // A handover (the tracker `convoy trace lte` uses too): down
            // from this step for the interruption, then the step's sample
            // (run() keeps the interruption under any FCD step of 0.1 s or
            // more, so rows stay in order).
            let mut at_ms = rel_ms;
            if let Some(gap) = v.cells.serve(rel_ms, cell as u32) {
                v.lte.push_str(&format!("{rel_ms},0,0,0,0\n"));
                at_ms = gap.end;
            }
            let csq = self.csq_map.csq(pos.dist(enb), 0.0);
            let rtt = RttModel::new(f64::from(csq), v.base_rtt_ms)?.sample(&mut v.rng);
            let bw = lte::sample_bandwidth_mbps(f64::from(csq), &mut v.rng)?;
            v.lte.push_str(&format!(
                "{at_ms},{},{:.3},0,{}\n",
                (bw * 1000.0).round() as u64,
                rtt / 2.0,
                u8::from(csq > 0)
            ));
        }
        v.rows += 1;
        Ok(())
    }
}

fn write_trace(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    convoy_link::SeriesTrace::parse(text, &path.display().to_string()).with_context(|| {
        format!(
            "internal error: generated trace {} does not parse",
            path.display()
        )
    })?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn flush(
    ctx: &Ctx<'_>,
    id: &str,
    v: VehicleTrace,
    index: &mut File,
    s: &mut Summary,
) -> Result<()> {
    let stem = file_stem(id);
    let dir = &ctx.a.out;
    for (iface, trace, wanted) in [("80211p", &v.dsrc, true), ("lte", &v.lte, !ctx.a.no_lte)] {
        if !wanted {
            continue;
        }
        let name = format!("{stem}.{iface}.csv");
        write_trace(dir, &name, trace)?;
        writeln!(
            index,
            "{id},{iface},{name},{},{},{}",
            v.first_s, v.last_s, v.rows
        )?;
        s.files += 1;
    }
    s.vehicles += 1;
    s.rows += v.rows;
    s.mean_pdr_80211p += v.pdr_sum;
    s.mean_loss_80211p_in_range += v.loss_sum;
    s.rows_80211p_in_range += v.rows_up;
    s.lte_handovers += v.cells.handovers();
    Ok(())
}

pub fn run(a: &FromMobilityArgs) -> Result<()> {
    let ModelName::Dsrc = a.model;
    let ch = a.channel.channel()?;
    let mac = super::mac::parse_mac(&a.mac)?;
    if a.handover_interruption_ms >= 100 {
        bail!(
            "--handover-interruption-ms must be under 100 (a 0.1 s FCD step), got {}",
            a.handover_interruption_ms
        );
    }
    if !(a.rate_80211p_mbps > 0.0 && a.rate_80211p_mbps.is_finite()) {
        bail!(
            "--rate-80211p-mbps must be positive, got {}",
            a.rate_80211p_mbps
        );
    }
    if !(a.delay_80211p_ms >= 0.0 && a.delay_80211p_ms.is_finite()) {
        bail!(
            "--delay-80211p-ms must be a non-negative number, got {}",
            a.delay_80211p_ms
        );
    }
    if !(0.0..=1.0).contains(&a.min_pdr) {
        bail!(
            "--min-pdr must be a probability in [0, 1], got {}",
            a.min_pdr
        );
    }
    let rsus = collect_points(&a.rsu, a.rsus.as_ref(), "rsu")?;
    let enbs = if a.no_lte {
        Vec::new()
    } else {
        collect_points(&a.enb, a.enbs.as_ref(), "enb")?
    };
    let buildings = match &a.poly {
        Some(p) => load_buildings(p, &a.shadowing.poly_type, a.shadowing.params())?,
        None => Buildings::default(),
    };
    let file = File::open(&a.fcd).with_context(|| format!("cannot read {}", a.fcd.display()))?;
    let mut reader = FcdReader::new(
        BufReader::with_capacity(1 << 20, file),
        a.fcd.display().to_string(),
    );
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut index = File::create(a.out.join("index.csv"))
        .with_context(|| format!("cannot write in {}", a.out.display()))?;
    writeln!(
        index,
        "# convoy trace from-mobility: one row per trace; times in seconds of the FCD"
    )?;
    writeln!(index, "vehicle,interface,file,first_s,last_s,rows")?;
    let ctx = Ctx {
        a,
        ch,
        rsus,
        enbs,
        buildings,
        csq_map: CsqMapping::default(),
        mac,
    };
    let header = "start_ms,rate_kbps,delay_ms,loss_p,up\n";
    let mut live: HashMap<String, VehicleTrace> = HashMap::new();
    let mut s = Summary {
        fcd: a.fcd.display().to_string(),
        out: a.out.display().to_string(),
        rsus: ctx.rsus.len(),
        enbs: ctx.enbs.len(),
        buildings: ctx.buildings.len(),
        mac: a.mac.clone(),
        ..Default::default()
    };
    while let Some(step) = reader.next_step()? {
        if s.steps == 0 {
            s.first_time_s = step.time_s;
        }
        s.steps += 1;
        s.last_time_s = step.time_s;
        if s.steps.is_multiple_of(100) {
            crate::progress::update(&format!(
                "t = {} s, {} vehicles",
                step.time_s,
                step.vehicles.len()
            ));
        }
        let mut seen = std::collections::HashSet::with_capacity(step.vehicles.len());
        for veh in &step.vehicles {
            seen.insert(veh.id.as_str());
            let v = live.entry(veh.id.clone()).or_insert_with(|| {
                let mut rng = Rng::fork(a.seed, &veh.id);
                let (lo, hi) = lte::BASE_RTT_RANGE_MS;
                let base_rtt_ms = rng.uniform_in(lo, hi);
                VehicleTrace {
                    first_s: step.time_s,
                    last_s: step.time_s,
                    dsrc: format!("# {} to the nearest RSU, MAC {}, vehicle {}\n{header}", describe(&ctx.ch), a.mac, veh.id),
                    lte: format!(
                        "# LTE downlink from the nearest eNodeB (empirical model, base RTT {base_rtt_ms:.2} ms), vehicle {}\n{header}",
                        veh.id
                    ),
                    rows: 0,
                    rng,
                    base_rtt_ms,
                    cells: HandoverTracker::new(a.handover_interruption_ms),
                    pdr_sum: 0.0,
                    loss_sum: 0.0,
                    rows_up: 0,
                }
            });
            if v.rows > 0 && step.time_s <= v.last_s {
                continue;
            }
            v.last_s = step.time_s;
            ctx.row(v, step.time_s, veh.pos)?;
        }
        // A vehicle missing from a step has arrived: its trace is complete.
        let gone: Vec<String> = live
            .keys()
            .filter(|k| !seen.contains(k.as_str()))
            .cloned()
            .collect();
        for id in gone {
            let v = live.remove(&id).expect("listed");
            flush(&ctx, &id, v, &mut index, &mut s)?;
        }
    }
    let mut rest: Vec<_> = live.into_iter().collect();
    rest.sort_by(|x, y| x.0.cmp(&y.0));
    for (id, v) in rest {
        flush(&ctx, &id, v, &mut index, &mut s)?;
    }
    crate::progress::clear();
    if s.steps == 0 {
        bail!("{}: the FCD has no <timestep>", a.fcd.display());
    }
    if s.rows > 0 {
        s.mean_pdr_80211p /= s.rows as f64;
    }
    if s.rows_80211p_in_range > 0 {
        s.mean_loss_80211p_in_range /= s.rows_80211p_in_range as f64;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        println!(
            "{}: {} steps ({} – {} s), {} vehicles → {} traces in {} ({} rows each interface); \
             mean 802.11p PDR {:.3} over {} RSUs{}; loss in range {:.4} (MAC {}); {} LTE handovers",
            s.fcd,
            s.steps,
            s.first_time_s,
            s.last_time_s,
            s.vehicles,
            s.files,
            s.out,
            s.rows,
            s.mean_pdr_80211p,
            s.rsus,
            if s.buildings > 0 {
                format!(", {} buildings", s.buildings)
            } else {
                String::new()
            },
            s.mean_loss_80211p_in_range,
            s.mac,
            s.lte_handovers
        );
    }
    Ok(())
}

fn describe(ch: &Dsrc) -> String {
    format!(
        "802.11p (m = {}, alpha = {}, Pt = {} dBm, threshold {} dBm)",
        ch.m,
        ch.alpha,
        ch.tx_power_dbm,
        ch.threshold_dbm()
    )
}
