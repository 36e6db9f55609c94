//! What a run leaves behind: one CSV per kind of record (pandas reads them
//! as they are) and `summary.json`, with a BLAKE3 hash of the CSVs so two
//! runs can be compared byte for byte. Nothing here depends on the wall
//! clock or on key bytes: times are virtual, sizes are lengths.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::apps::sensing::STRATEGIES;
use crate::events::{Nanos, SEC};
use crate::lte::Lte;
use crate::packet::Server;
use crate::world::{Kind, World};

#[derive(Default)]
pub struct Records {
    cells: String,
    last: Vec<(u64, u64, u64, u64)>,
}

fn secs(t: Nanos) -> String {
    format!("{:.6}", t as f64 / SEC as f64)
}

impl Records {
    /// Once a second: each cell's attached UEs and what it carried since.
    pub fn cells_snapshot(&mut self, now: Nanos, lte: &Lte) {
        if self.last.is_empty() {
            self.last = vec![(0, 0, 0, 0); lte.cells.len()];
            self.cells
                .push_str("t_s,cell,attached,ul_bytes,dl_bytes,handovers_in,dropped\n");
        }
        for (i, c) in lte.cells.iter().enumerate() {
            let l = self.last[i];
            let _ = writeln!(
                self.cells,
                "{},{i},{},{},{},{},{}",
                secs(now),
                c.attached,
                c.ul_bytes - l.0,
                c.dl_bytes - l.1,
                c.handovers_in - l.2,
                c.dropped - l.3
            );
            self.last[i] = (c.ul_bytes, c.dl_bytes, c.handovers_in, c.dropped);
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SensingSummary {
    pub protocol: String,
    pub bundles: usize,
    pub delivered: usize,
    pub delivery_ratio: f64,
    pub mean_delay_s: f64,
    pub median_delay_s: f64,
    pub mean_hops: f64,
    /// Strategy usage ratio: share of hops per strategy (local, reactive, geo, carry).
    pub sur: [f64; 4],
    pub causes: Vec<(String, usize)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct UploadSummary {
    pub started: usize,
    pub completed: usize,
    pub bytes_delivered: u64,
    pub corrupt: usize,
    pub mean_completion_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct EdgeSummary {
    pub requests: usize,
    pub answered: usize,
    pub edge_served: f64,
    pub mean_latency_ms: f64,
    pub p95_latency_ms: f64,
    pub mean_edge_ms: f64,
    pub mean_cloud_ms: f64,
    pub mean_queue_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClusterSummary {
    pub radios: String,
    pub cams: u64,
    pub expected: usize,
    pub delivery_ratio: f64,
    pub mean_delay_ms: f64,
    pub head_lte_bytes: u64,
    pub mean_vehicles_in_zone: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    pub vehicles: usize,
    pub rsus: usize,
    pub enodebs: usize,
    pub events: u64,
    pub wave_frames: u64,
    pub wave_receptions: u64,
    pub wave_collisions: u64,
    pub lte_packets: u64,
    pub sensing: Option<SensingSummary>,
    pub uploads: Option<UploadSummary>,
    pub edge: Option<EdgeSummary>,
    pub clusters: Option<ClusterSummary>,
    pub records_hash: String,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn server_name(s: Server) -> String {
    match s {
        Server::Cloud => "cloud".into(),
        Server::EdgePgw => "edge-pgw".into(),
        Server::EdgeEnb(c) => format!("edge-enb{c}"),
        Server::Relay => "relay".into(),
    }
}

/// The CSV files of a finished run, in a fixed order: (file name, text).
pub fn tables(w: &World) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut nodes = String::from(
        "node,kind,key,wave,lte,wave_tx_bytes,wave_rx_bytes,lte_ul_bytes,lte_dl_bytes,handovers\n",
    );
    for (i, n) in w.nodes.iter().enumerate() {
        let key = if n.kind == Kind::Vehicle {
            w.mob.vehicles()[i].key.clone()
        } else {
            format!("rsu{}", i - w.vehicles)
        };
        let (ul, dl, ho) = w.lte.as_ref().map_or((0, 0, 0), |l| {
            let u = &l.ues[i];
            (u.ul_bytes, u.dl_bytes, u.handovers)
        });
        let kind = if n.kind == Kind::Vehicle {
            "vehicle"
        } else {
            "rsu"
        };
        let _ = writeln!(
            nodes,
            "{i},{kind},{key},{},{},{},{},{ul},{dl},{ho}",
            u8::from(n.wave),
            u8::from(n.lte),
            n.wave_tx,
            n.wave_rx
        );
    }
    out.push(("nodes.csv", nodes));
    if w.lte.is_some() {
        out.push(("cells.csv", w.rec.cells.clone()));
    }
    if let Some(s) = &w.sensing {
        let mut t = String::from("origin,bundle,created_s,delivered,delay_s,hops,path,cause\n");
        for ((o, b), r) in &s.bundles {
            let (del, delay) = match r.delivered {
                Some(at) => (1, secs(at - r.created)),
                None => (0, String::new()),
            };
            let cause = match (r.delivered, r.cause) {
                (Some(_), _) => "",
                (None, Some(c)) => c.name(),
                (None, None) => "in-flight",
            };
            let _ = writeln!(
                t,
                "{o},{b},{},{del},{delay},{},{},{cause}",
                secs(r.created),
                r.hops,
                r.path
            );
        }
        out.push(("bundles.csv", t));
    }
    if let Some(u) = &w.uploads {
        let mut t = String::from("vehicle,index,start_s,connected_s,done_s,bytes_read,corrupt\n");
        for r in &u.recs {
            let opt = |x: Option<Nanos>| x.map(secs).unwrap_or_default();
            let _ = writeln!(
                t,
                "{},{},{},{},{},{},{}",
                r.vehicle,
                r.index,
                secs(r.started),
                opt(r.connected),
                opt(r.done),
                r.bytes_read,
                u8::from(r.corrupt)
            );
        }
        out.push(("uploads.csv", t));
    }
    if let Some(e) = &w.edge {
        let mut t = String::from("client,request,server,sent_s,latency_ms,queue_ms\n");
        for r in &e.recs {
            let lat = r
                .latency
                .map(|l| format!("{:.3}", l as f64 / 1e6))
                .unwrap_or_default();
            let _ = writeln!(
                t,
                "{},{},{},{},{lat},{:.3}",
                r.client,
                r.id,
                server_name(r.server),
                secs(r.sent),
                r.queued as f64 / 1e6
            );
        }
        out.push(("requests.csv", t));
    }
    if let Some(c) = &w.clusters {
        let mut t = String::from("cam,sender,created_s,expected,delivered,mean_delay_ms\n");
        for (i, cam) in c.cams.iter().enumerate() {
            let deadline = (c.spec.deadline_ms * 1e6) as Nanos;
            let ok: Vec<f64> = cam
                .got
                .iter()
                .flatten()
                .filter(|d| **d <= deadline)
                .map(|d| *d as f64 / 1e6)
                .collect();
            let md = if ok.is_empty() {
                String::new()
            } else {
                format!("{:.3}", mean(&ok))
            };
            let _ = writeln!(
                t,
                "{i},{},{},{},{},{md}",
                cam.sender,
                secs(cam.created),
                cam.expected.len(),
                ok.len()
            );
        }
        out.push(("cams.csv", t));
    }
    out
}

pub fn summarize(w: &World, events: u64, tables: &[(&'static str, String)]) -> Summary {
    let mut h = blake3::Hasher::new();
    for (name, text) in tables {
        h.update(name.as_bytes());
        h.update(&(text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    let sensing = w.sensing.as_ref().map(|s| {
        let delivered: Vec<&crate::apps::sensing::BundleRec> = s
            .bundles
            .values()
            .filter(|b| b.delivered.is_some())
            .collect();
        let mut delays: Vec<f64> = delivered
            .iter()
            .map(|b| (b.delivered.unwrap_or(0) - b.created) as f64 / SEC as f64)
            .collect();
        let hops: Vec<f64> = delivered.iter().map(|b| f64::from(b.hops)).collect();
        let total_hops: u64 = s.sur[1..].iter().sum();
        let mut sur = [0.0; 4];
        for (k, st) in STRATEGIES.iter().enumerate() {
            sur[k] = if total_hops == 0 {
                0.0
            } else {
                s.sur[*st as usize] as f64 / total_hops as f64
            };
        }
        let mut causes: std::collections::BTreeMap<&str, usize> = Default::default();
        for b in s.bundles.values().filter(|b| b.delivered.is_none()) {
            *causes
                .entry(b.cause.map_or("in-flight", |c| c.name()))
                .or_default() += 1;
        }
        SensingSummary {
            protocol: s.protocol.name().into(),
            bundles: s.bundles.len(),
            delivered: delivered.len(),
            delivery_ratio: delivered.len() as f64 / s.bundles.len().max(1) as f64,
            mean_delay_s: mean(&delays),
            median_delay_s: quantile(&mut delays, 0.5),
            mean_hops: mean(&hops),
            sur,
            causes: causes
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    });
    let uploads = w.uploads.as_ref().map(|u| {
        let done: Vec<f64> = u
            .recs
            .iter()
            .filter_map(|r| r.done.map(|d| (d - r.started) as f64 / SEC as f64))
            .collect();
        UploadSummary {
            started: u.recs.len(),
            completed: done.len(),
            bytes_delivered: u.recs.iter().map(|r| r.bytes_read).sum(),
            corrupt: u.recs.iter().filter(|r| r.corrupt).count(),
            mean_completion_s: mean(&done),
        }
    });
    let edge = w.edge.as_ref().map(|e| {
        let ans: Vec<&crate::apps::edge::RequestRec> =
            e.recs.iter().filter(|r| r.latency.is_some()).collect();
        let lat = |f: &dyn Fn(&&crate::apps::edge::RequestRec) -> bool| -> Vec<f64> {
            ans.iter()
                .filter(|r| f(r))
                .map(|r| r.latency.unwrap_or(0) as f64 / 1e6)
                .collect()
        };
        let mut all = lat(&|_| true);
        let edge_ms = lat(&|r| r.server != Server::Cloud);
        let cloud_ms = lat(&|r| r.server == Server::Cloud);
        let queue: Vec<f64> = ans
            .iter()
            .filter(|r| r.server != Server::Cloud)
            .map(|r| r.queued as f64 / 1e6)
            .collect();
        EdgeSummary {
            requests: e.recs.len(),
            answered: ans.len(),
            edge_served: edge_ms.len() as f64 / ans.len().max(1) as f64,
            mean_latency_ms: mean(&all),
            p95_latency_ms: quantile(&mut all, 0.95),
            mean_edge_ms: mean(&edge_ms),
            mean_cloud_ms: mean(&cloud_ms),
            mean_queue_ms: mean(&queue),
        }
    });
    let clusters = w.clusters.as_ref().map(|c| {
        let deadline = (c.spec.deadline_ms * 1e6) as Nanos;
        let expected: usize = c.cams.iter().map(|m| m.expected.len()).sum();
        let ok: Vec<f64> = c
            .cams
            .iter()
            .flat_map(|m| m.got.iter().flatten())
            .filter(|d| **d <= deadline)
            .map(|d| *d as f64 / 1e6)
            .collect();
        ClusterSummary {
            radios: c.spec.radios.clone(),
            cams: c.cam_count,
            expected,
            delivery_ratio: ok.len() as f64 / expected.max(1) as f64,
            mean_delay_ms: mean(&ok),
            head_lte_bytes: c.head_lte_bytes,
            mean_vehicles_in_zone: c.zone_samples.0 as f64 / c.zone_samples.1.max(1) as f64,
        }
    });
    Summary {
        scenario: w.sc.name.clone(),
        seed: w.seed,
        duration_s: w.sc.duration_s,
        vehicles: w.vehicles,
        rsus: w.sc.rsu.len(),
        enodebs: w.sc.enodeb.len(),
        events,
        wave_frames: w.medium.frames_sent,
        wave_receptions: w.medium.receptions,
        wave_collisions: w.medium.collisions,
        lte_packets: w.lte_packets,
        sensing,
        uploads,
        edge,
        clusters,
        records_hash: h.finalize().to_hex().to_string(),
    }
}

/// Writes the tables and summary.json into `dir` (created if needed):
/// each file goes to a temporary name first and is renamed into place.
pub fn write(
    dir: &Path,
    tables: &[(&'static str, String)],
    summary: &Summary,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut files: Vec<(String, String)> = tables
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    let json = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    files.push(("summary.json".into(), json + "\n"));
    for (name, text) in files {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    Ok(())
}
