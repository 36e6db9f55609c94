//! LTE cells: each UE attaches to the eNodeB with the best signal (CSQ from
//! distance, convoy-models' mapping), gets a capacity each second from the
//! empirical CSQ model, and shares its cell by time: every 1 ms TTI the
//! cell serves up to `ues_per_tti` backlogged UEs round robin, each with an
//! equal share of the TTI at its own rate. So a UE alone gets the model's
//! capacity and n busy UEs get 1/n of theirs each, as a round-robin
//! scheduler gives. Air latency is a fixed part plus the HARQ
//! retransmissions of the model's RTT peaks (≈ 9.6 ms each), drawn per
//! packet with the model's weights for the UE's CSQ; delivery stays in
//! order (RLC AM). Handover: a neighbour better by `handover_hysteresis`
//! CSQ steps takes over after an interruption; the UE's downlink queue is
//! forwarded to the new cell.

use std::collections::VecDeque;

use convoy_ave::Vec2;
use convoy_models::lte::{sample_bandwidth_mbps, CsqMapping, RttModel, DEFAULT_BASE_RTT_MS};
use convoy_models::Rng;

use crate::events::{Nanos, MS};
use crate::packet::Packet;
use crate::scenario::LteSpec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Up,
    Down,
}

#[derive(Default)]
struct Sched {
    backlog: VecDeque<u32>,
    tti_pending: bool,
}

pub struct Cell {
    pub pos: Vec2,
    ul: Sched,
    dl: Sched,
    pub attached: u32,
    pub ul_bytes: u64,
    pub dl_bytes: u64,
    pub handovers_in: u64,
    pub dropped: u64,
}

#[derive(Default)]
pub struct Ue {
    pub cell: Option<u16>,
    pub csq: u8,
    ul_bps: f64,
    dl_bps: f64,
    ulq: VecDeque<Packet>,
    dlq: VecDeque<Packet>,
    ul_credit: f64,
    dl_credit: f64,
    in_ul: bool,
    in_dl: bool,
    ho_until: Nanos,
    last_ul: Nanos,
    last_dl: Nanos,
    pub ul_bytes: u64,
    pub dl_bytes: u64,
    pub handovers: u32,
}

/// HARQ extra delays and cumulative weights at one CSQ.
#[derive(Clone, Copy)]
struct Harq {
    cum: [f64; 4],
    extra_ms: [f64; 4],
}

pub struct Lte {
    spec: LteSpec,
    pub cells: Vec<Cell>,
    pub ues: Vec<Ue>,
    mapping: CsqMapping,
    harq: Vec<Harq>,
    rng: Rng,
}

/// A handover the last update started: (node, from, to, done at).
pub type Handover = (u32, u16, u16, Nanos);

impl Lte {
    pub fn new(spec: &LteSpec, sites: &[Vec2], nodes: usize, seed: u64) -> Lte {
        let harq = (0..=31u8)
            .map(|c| {
                let m = RttModel::new(f64::from(c), DEFAULT_BASE_RTT_MS).expect("CSQ in range");
                let w: Vec<f64> = m.peaks.iter().map(|p| p.weight.max(0.0)).collect();
                let total: f64 = w.iter().sum::<f64>().max(1e-12);
                let mut cum = [0.0; 4];
                let mut acc = 0.0;
                for k in 0..4 {
                    acc += w[k] / total;
                    cum[k] = acc;
                }
                let base = m.peaks[0].mean_ms;
                let extra_ms = [0, 1, 2, 3].map(|k| m.peaks[k].mean_ms - base);
                Harq { cum, extra_ms }
            })
            .collect();
        Lte {
            spec: spec.clone(),
            cells: sites
                .iter()
                .map(|&pos| Cell {
                    pos,
                    ul: Sched::default(),
                    dl: Sched::default(),
                    attached: 0,
                    ul_bytes: 0,
                    dl_bytes: 0,
                    handovers_in: 0,
                    dropped: 0,
                })
                .collect(),
            ues: (0..nodes).map(|_| Ue::default()).collect(),
            mapping: CsqMapping::default(),
            harq,
            rng: Rng::fork(seed, "lte"),
        }
    }

    fn best_cell(&self, pos: Vec2) -> (u16, u8) {
        let mut best = (0u16, 0u8, f64::MAX);
        for (i, c) in self.cells.iter().enumerate() {
            let d = c.pos.dist(pos);
            if d < best.2 {
                best = (i as u16, self.mapping.csq(d, 0.0), d);
            }
        }
        (best.0, best.1)
    }

    /// Once a second: signal, capacity and handover for a UE at `pos`.
    /// Returns a handover when one starts.
    pub fn update(&mut self, now: Nanos, node: u32, pos: Vec2) -> Option<Handover> {
        let (best, best_csq) = self.best_cell(pos);
        let ue = &mut self.ues[node as usize];
        let mut handover = None;
        match ue.cell {
            None => {
                ue.cell = Some(best);
                self.cells[best as usize].attached += 1;
            }
            Some(cur) if cur != best => {
                let cur_csq = self.mapping.csq(self.cells[cur as usize].pos.dist(pos), 0.0);
                if best_csq >= cur_csq.saturating_add(self.spec.handover_hysteresis) && now >= ue.ho_until {
                    let done = now + (self.spec.handover_interruption_ms * MS as f64) as Nanos;
                    ue.cell = Some(best);
                    ue.ho_until = done;
                    ue.handovers += 1;
                    ue.in_ul = false;
                    ue.in_dl = false;
                    self.cells[cur as usize].attached -= 1;
                    self.cells[best as usize].attached += 1;
                    self.cells[best as usize].handovers_in += 1;
                    handover = Some((node, cur, best, done));
                }
            }
            _ => {}
        }
        let ue = &mut self.ues[node as usize];
        let cell = ue.cell.expect("attached");
        ue.csq = self.mapping.csq(self.cells[cell as usize].pos.dist(pos), 0.0);
        let dl = sample_bandwidth_mbps(f64::from(ue.csq), &mut self.rng).expect("CSQ in range");
        ue.dl_bps = dl * 1e6;
        ue.ul_bps = dl * 1e6 * self.spec.uplink_factor;
        handover
    }

    /// The UE leaves the map.
    pub fn detach(&mut self, node: u32) {
        let ue = &mut self.ues[node as usize];
        if let Some(c) = ue.cell.take() {
            self.cells[c as usize].attached -= 1;
        }
        ue.ulq.clear();
        ue.dlq.clear();
        ue.in_ul = false;
        ue.in_dl = false;
    }

    pub fn is_attached(&self, node: u32) -> bool {
        self.ues[node as usize].cell.is_some()
    }

    pub fn cell_of(&self, node: u32) -> Option<u16> {
        self.ues[node as usize].cell
    }

    /// Queues a packet at the UE (up) or at its eNodeB (down). Returns the
    /// cell and time of a TTI to schedule, if its scheduler was idle.
    pub fn send(&mut self, now: Nanos, node: u32, dir: Dir, p: Packet) -> Option<(u16, Dir, Nanos)> {
        let limit = self.spec.queue_packets;
        let ue = &mut self.ues[node as usize];
        let Some(cell) = ue.cell else {
            return None; // no coverage: lost
        };
        let q = match dir {
            Dir::Up => &mut ue.ulq,
            Dir::Down => &mut ue.dlq,
        };
        if q.len() >= limit {
            self.cells[cell as usize].dropped += 1;
            return None;
        }
        q.push_back(p);
        self.activate(now, node, dir)
    }

    fn activate(&mut self, now: Nanos, node: u32, dir: Dir) -> Option<(u16, Dir, Nanos)> {
        let ue = &mut self.ues[node as usize];
        let cell = ue.cell?;
        if now < ue.ho_until {
            return None;
        }
        let (flag, empty) = match dir {
            Dir::Up => (&mut ue.in_ul, ue.ulq.is_empty()),
            Dir::Down => (&mut ue.in_dl, ue.dlq.is_empty()),
        };
        if *flag || empty {
            return None;
        }
        *flag = true;
        let c = &mut self.cells[cell as usize];
        let s = match dir {
            Dir::Up => &mut c.ul,
            Dir::Down => &mut c.dl,
        };
        s.backlog.push_back(node);
        if s.tti_pending {
            return None;
        }
        s.tti_pending = true;
        Some((cell, dir, now.div_ceil(MS) * MS + MS))
    }

    /// A handover's interruption is over: the UE's queues are served again.
    pub fn handover_done(&mut self, now: Nanos, node: u32) -> Vec<(u16, Dir, Nanos)> {
        [Dir::Up, Dir::Down]
            .into_iter()
            .filter_map(|d| self.activate(now, node, d))
            .collect()
    }

    fn air_delay(&mut self, csq: u8) -> Nanos {
        let h = self.harq[csq as usize];
        let u = self.rng.uniform();
        let k = h.cum.iter().position(|c| u < *c).unwrap_or(3);
        ((self.spec.air_ms + h.extra_ms[k]) * MS as f64) as Nanos
    }

    /// One TTI of `cell` in `dir`: what it delivered (node, packet, arrival
    /// at the far end of the air interface) and when the next TTI is.
    pub fn tti(&mut self, now: Nanos, cell: u16, dir: Dir) -> (Vec<(u32, Packet, Nanos)>, Option<Nanos>) {
        let mut out = Vec::new();
        let n = {
            let c = &self.cells[cell as usize];
            let s = if dir == Dir::Up { &c.ul } else { &c.dl };
            s.backlog.len().min(self.spec.ues_per_tti)
        };
        for _ in 0..n {
            let node = {
                let c = &mut self.cells[cell as usize];
                let s = if dir == Dir::Up { &mut c.ul } else { &mut c.dl };
                s.backlog.pop_front().expect("counted")
            };
            let ue = &mut self.ues[node as usize];
            if ue.cell != Some(cell) || now < ue.ho_until {
                // A stale entry of a UE that handed over: its new cell
                // serves it once the interruption is over.
                continue;
            }
            let csq = ue.csq;
            let (rate, credit, q) = match dir {
                Dir::Up => (ue.ul_bps, &mut ue.ul_credit, &mut ue.ulq),
                Dir::Down => (ue.dl_bps, &mut ue.dl_credit, &mut ue.dlq),
            };
            *credit += rate / 8.0 * 1e-3 / n as f64;
            let mut sent = Vec::new();
            while let Some(p) = q.front() {
                if (p.len() as f64) > *credit {
                    break;
                }
                *credit -= p.len() as f64;
                sent.push(q.pop_front().expect("front"));
            }
            let more = !q.is_empty();
            if !more {
                *credit = 0.0;
            }
            let mut bytes = 0;
            for p in sent {
                bytes += p.len() as u64;
                let at = now + self.air_delay(csq);
                let ue = &mut self.ues[node as usize];
                let last = if dir == Dir::Up { &mut ue.last_ul } else { &mut ue.last_dl };
                let at = at.max(*last);
                *last = at;
                out.push((node, p, at));
            }
            let ue = &mut self.ues[node as usize];
            let c = &mut self.cells[cell as usize];
            match dir {
                Dir::Up => {
                    ue.ul_bytes += bytes;
                    c.ul_bytes += bytes;
                }
                Dir::Down => {
                    ue.dl_bytes += bytes;
                    c.dl_bytes += bytes;
                }
            }
            let s = if dir == Dir::Up { &mut c.ul } else { &mut c.dl };
            if more {
                s.backlog.push_back(node);
            } else if dir == Dir::Up {
                ue.in_ul = false;
            } else {
                ue.in_dl = false;
            }
        }
        let c = &mut self.cells[cell as usize];
        let s = if dir == Dir::Up { &mut c.ul } else { &mut c.dl };
        if s.backlog.is_empty() {
            s.tti_pending = false;
            (out, None)
        } else {
            (out, Some(now + MS))
        }
    }
}
