//! LTE cells: each UE attaches to the eNodeB with the best signal (CSQ from
//! distance, convoy-models' mapping), gets a capacity each second from the
//! empirical CSQ model, and shares its cell by time: every 1 ms TTI each of
//! the n UEs with data gets 1/n of the TTI at its own rate (equal-share
//! round robin, in its fluid form). So a UE alone gets the model's capacity
//! and n busy UEs get 1/n of theirs each. A packet leaves at the first TTI
//! boundary where its UE's accumulated share covers it; the scheduler jumps
//! straight to that boundary instead of visiting every TTI, and settles the
//! shares whenever the set of busy UEs changes, so the result is the same
//! as stepping every millisecond. Air latency is a fixed part plus the HARQ
//! retransmissions of the model's RTT peaks (≈ 9.6 ms each), drawn per
//! packet with the model's weights for the UE's CSQ; delivery stays in
//! order (RLC AM). The uplink capacity comes from the fitted uplink model
//! (convoy-models' lte_uplink: the UE's power-limited SINR at the CSQ's
//! path loss, plus its own slow fading stepped each second, through the
//! model's grant-and-HARQ mean rate), unless `uplink_factor` asks for the
//! old share of the downlink. Handover: a neighbour better by `handover_hysteresis`
//! CSQ steps takes over after an interruption; the UE's downlink queue is
//! forwarded to the new cell.

use std::collections::VecDeque;

use convoy_ave::Vec2;
use convoy_models::lte::{sample_bandwidth_mbps, CsqMapping, RttModel, DEFAULT_BASE_RTT_MS};
use convoy_models::lte_uplink::{UplinkFit, UplinkParams};
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
    /// UEs with data, in the order they became busy.
    backlog: Vec<u32>,
    /// Shares are granted up to this TTI boundary.
    last: Nanos,
    /// The pending TTI event's generation (older events are stale).
    gen: u64,
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
    /// The uplink's slow fading, dB (None until the first update).
    ul_shadow_db: Option<f64>,
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
    uplink: UplinkParams,
    rng: Rng,
}

/// A handover the last update started: (node, from, to, done at).
pub type Handover = (u32, u16, u16, Nanos);

/// A TTI event to schedule: (cell, direction, time, generation).
pub type Tti = (u16, Dir, Nanos, u64);

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
            // validate() accepted the name; an unknown one falls back to
            // the default fit rather than panicking mid-run.
            uplink: UplinkFit::from_name(&spec.uplink_fit)
                .map_or_else(convoy_models::lte_uplink::default_params, |f| f.params()),
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
    /// Returns a handover when one starts, and re-plans of its old cell
    /// (call `replan_all` once every UE is updated).
    pub fn update(&mut self, now: Nanos, node: u32, pos: Vec2) -> (Option<Handover>, Vec<Tti>) {
        let (best, best_csq) = self.best_cell(pos);
        let mut replans = Vec::new();
        let ue = &mut self.ues[node as usize];
        let mut handover = None;
        match ue.cell {
            None => {
                ue.cell = Some(best);
                self.cells[best as usize].attached += 1;
            }
            Some(cur) if cur != best => {
                let cur_csq = self
                    .mapping
                    .csq(self.cells[cur as usize].pos.dist(pos), 0.0);
                if best_csq >= cur_csq.saturating_add(self.spec.handover_hysteresis)
                    && now >= ue.ho_until
                {
                    let done = now + (self.spec.handover_interruption_ms * MS as f64) as Nanos;
                    replans.extend(self.deactivate(now, node, cur));
                    let ue = &mut self.ues[node as usize];
                    ue.cell = Some(best);
                    ue.ho_until = done;
                    ue.handovers += 1;
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
        ue.csq = self
            .mapping
            .csq(self.cells[cell as usize].pos.dist(pos), 0.0);
        let dl = sample_bandwidth_mbps(f64::from(ue.csq), &mut self.rng).expect("CSQ in range");
        ue.dl_bps = dl * 1e6;
        ue.ul_bps = match self.spec.uplink_factor {
            Some(f) => dl * 1e6 * f,
            None => {
                // One step of the AR(1) slow fading per second (the update
                // period), started in its stationary distribution.
                let p = self.uplink;
                let rho = (-1.0 / p.coherence_s).exp();
                let x = match ue.ul_shadow_db {
                    None => self.rng.normal(0.0, p.shadow_sd_db),
                    Some(x) => {
                        rho * x
                            + p.shadow_sd_db * (1.0 - rho * rho).sqrt() * self.rng.standard_normal()
                    }
                };
                ue.ul_shadow_db = Some(x);
                p.power_limited_rate_bps(p.at_csq(ue.csq).sinr_db + x)
            }
        };
        (handover, replans)
    }

    /// The UE leaves the map.
    pub fn detach(&mut self, now: Nanos, node: u32) -> Vec<Tti> {
        let mut replans = Vec::new();
        if let Some(c) = self.ues[node as usize].cell {
            replans = self.deactivate(now, node, c);
            self.cells[c as usize].attached -= 1;
        }
        let ue = &mut self.ues[node as usize];
        ue.cell = None;
        ue.ulq.clear();
        ue.dlq.clear();
        replans
    }

    pub fn is_attached(&self, node: u32) -> bool {
        self.ues[node as usize].cell.is_some()
    }

    pub fn cell_of(&self, node: u32) -> Option<u16> {
        self.ues[node as usize].cell
    }

    /// Queues a packet at the UE (up) or at its eNodeB (down). Returns a
    /// TTI event to schedule when the cell's plan changed.
    pub fn send(&mut self, now: Nanos, node: u32, dir: Dir, p: Packet) -> Option<Tti> {
        let limit = self.spec.queue_packets;
        let ue = &mut self.ues[node as usize];
        let cell = ue.cell?; // no coverage: lost
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

    fn sched(&mut self, cell: u16, dir: Dir) -> &mut Sched {
        let c = &mut self.cells[cell as usize];
        match dir {
            Dir::Up => &mut c.ul,
            Dir::Down => &mut c.dl,
        }
    }

    fn busy_flag(&mut self, node: u32, dir: Dir) -> &mut bool {
        let ue = &mut self.ues[node as usize];
        match dir {
            Dir::Up => &mut ue.in_ul,
            Dir::Down => &mut ue.in_dl,
        }
    }

    /// Bytes one TTI gives a UE when `n` UEs share it.
    fn per_tti(&self, node: u32, dir: Dir, n: usize) -> f64 {
        let ue = &self.ues[node as usize];
        let rate = if dir == Dir::Up { ue.ul_bps } else { ue.dl_bps };
        rate / 8.0 * (MS as f64 / 1e9) / n.max(1) as f64
    }

    /// Grants every busy UE its share of the TTI boundaries up to `now`.
    fn settle(&mut self, now: Nanos, cell: u16, dir: Dir) {
        let s = self.sched(cell, dir);
        let boundary = now / MS * MS;
        let m = (boundary.saturating_sub(s.last) / MS) as f64;
        s.last = s.last.max(boundary);
        if m == 0.0 || s.backlog.is_empty() {
            return;
        }
        let backlog = s.backlog.clone();
        let n = backlog.len();
        for node in backlog {
            let share = self.per_tti(node, dir, n) * m;
            let ue = &mut self.ues[node as usize];
            match dir {
                Dir::Up => ue.ul_credit += share,
                Dir::Down => ue.dl_credit += share,
            }
        }
    }

    /// The next boundary at which some busy UE's head packet is covered.
    fn plan(&mut self, cell: u16, dir: Dir) -> Option<Tti> {
        let (backlog, last) = {
            let s = self.sched(cell, dir);
            (s.backlog.clone(), s.last)
        };
        let n = backlog.len();
        let mut k_min = u64::MAX;
        for &node in &backlog {
            let ue = &self.ues[node as usize];
            let (credit, head) = match dir {
                Dir::Up => (ue.ul_credit, ue.ulq.front()),
                Dir::Down => (ue.dl_credit, ue.dlq.front()),
            };
            let Some(head) = head else { continue };
            let per = self.per_tti(node, dir, n);
            let need = head.len() as f64 - credit;
            let k = if need <= 0.0 {
                1
            } else if per > 0.0 {
                ((need / per).ceil() as u64).max(1)
            } else {
                u64::MAX
            };
            k_min = k_min.min(k);
        }
        let s = self.sched(cell, dir);
        s.gen += 1;
        if k_min == u64::MAX {
            return None; // nobody can send until the next capacity update
        }
        Some((cell, dir, last + k_min.min(10_000) * MS, s.gen))
    }

    fn activate(&mut self, now: Nanos, node: u32, dir: Dir) -> Option<Tti> {
        let ue = &self.ues[node as usize];
        let cell = ue.cell?;
        let empty = match dir {
            Dir::Up => ue.ulq.is_empty(),
            Dir::Down => ue.dlq.is_empty(),
        };
        if now < ue.ho_until || empty || *self.busy_flag(node, dir) {
            return None;
        }
        self.settle(now, cell, dir);
        *self.busy_flag(node, dir) = true;
        self.sched(cell, dir).backlog.push(node);
        self.plan(cell, dir)
    }

    /// Takes a UE off its cell's schedulers (handover, departure); returns
    /// the new plans of that cell.
    fn deactivate(&mut self, now: Nanos, node: u32, cell: u16) -> Vec<Tti> {
        let mut out = Vec::new();
        for dir in [Dir::Up, Dir::Down] {
            if !*self.busy_flag(node, dir) {
                continue;
            }
            self.settle(now, cell, dir);
            *self.busy_flag(node, dir) = false;
            self.sched(cell, dir).backlog.retain(|&u| u != node);
            out.extend(self.plan(cell, dir));
        }
        out
    }

    /// New capacities change every plan: settle and re-plan every cell.
    pub fn replan_all(&mut self, now: Nanos) -> Vec<Tti> {
        let mut out = Vec::new();
        for cell in 0..self.cells.len() as u16 {
            for dir in [Dir::Up, Dir::Down] {
                if self.sched(cell, dir).backlog.is_empty() {
                    continue;
                }
                self.settle(now, cell, dir);
                out.extend(self.plan(cell, dir));
            }
        }
        out
    }

    /// A handover's interruption is over: the UE's queues are served again.
    pub fn handover_done(&mut self, now: Nanos, node: u32) -> Vec<Tti> {
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

    /// The TTI boundary a plan asked for: every busy UE sends what its
    /// share covers. Returns what left (node, packet, arrival at the far end
    /// of the air interface) and the next plan.
    pub fn tti(
        &mut self,
        now: Nanos,
        cell: u16,
        dir: Dir,
        gen: u64,
    ) -> (Vec<(u32, Packet, Nanos)>, Option<Tti>) {
        let mut out = Vec::new();
        if self.sched(cell, dir).gen != gen {
            return (out, None); // superseded by a newer plan
        }
        self.settle(now, cell, dir);
        let backlog = self.sched(cell, dir).backlog.clone();
        let mut still = Vec::with_capacity(backlog.len());
        for node in backlog {
            let ue = &mut self.ues[node as usize];
            let csq = ue.csq;
            let (credit, q) = match dir {
                Dir::Up => (&mut ue.ul_credit, &mut ue.ulq),
                Dir::Down => (&mut ue.dl_credit, &mut ue.dlq),
            };
            let mut sent = Vec::new();
            while let Some(p) = q.front() {
                if (p.len() as f64) > *credit + 1e-9 {
                    break;
                }
                *credit -= p.len() as f64;
                sent.push(q.pop_front().expect("front"));
            }
            if q.is_empty() {
                *credit = 0.0;
                match dir {
                    Dir::Up => ue.in_ul = false,
                    Dir::Down => ue.in_dl = false,
                }
            } else {
                still.push(node);
            }
            let mut bytes = 0;
            for p in sent {
                bytes += p.len() as u64;
                let at = now + self.air_delay(csq);
                let ue = &mut self.ues[node as usize];
                let last = if dir == Dir::Up {
                    &mut ue.last_ul
                } else {
                    &mut ue.last_dl
                };
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
        }
        self.sched(cell, dir).backlog = still;
        let next = self.plan(cell, dir);
        (out, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Body, Packet, Server};

    /// Drives the TTI plans of one cell until every queue is empty;
    /// returns each node's last departure time.
    fn drain(lte: &mut Lte, mut plans: Vec<Tti>) -> Vec<Nanos> {
        let mut last = vec![0; lte.ues.len()];
        while let Some(i) = (0..plans.len()).min_by_key(|&i| plans[i].2) {
            let (c, d, t, g) = plans.remove(i);
            let (out, next) = lte.tti(t, c, d, g);
            for (n, _, _) in out {
                last[n as usize] = t;
            }
            plans.extend(next);
        }
        last
    }

    fn lte_with(rates: &[f64]) -> Lte {
        let mut lte = Lte::new(&LteSpec::default(), &[Vec2::new(0.0, 0.0)], rates.len(), 1);
        for (i, r) in rates.iter().enumerate() {
            lte.update(0, i as u32, Vec2::new(50.0, 0.0));
            lte.ues[i].ul_bps = *r;
        }
        lte
    }

    fn packet() -> Packet {
        Packet::up(
            Server::Cloud,
            1000 - 28,
            Body::Response { client: 0, id: 0 },
        )
    }

    #[test]
    fn a_ue_alone_gets_its_rate_and_two_share_the_cell() {
        // 100 packets of 1000 B at 8 Mbit/s: 100 ms.
        let mut lte = lte_with(&[8e6]);
        let plans: Vec<Tti> = (0..100)
            .filter_map(|_| lte.send(0, 0, Dir::Up, packet()))
            .collect();
        let last = drain(&mut lte, plans);
        assert!(
            (99 * MS..=101 * MS).contains(&last[0]),
            "{}",
            last[0] as f64 / 1e6
        );

        // Two UEs with 100 packets each: 200 ms for both, not 100.
        let mut lte = lte_with(&[8e6, 8e6]);
        let mut plans = Vec::new();
        for _ in 0..100 {
            plans.extend(lte.send(0, 0, Dir::Up, packet()));
            plans.extend(lte.send(0, 1, Dir::Up, packet()));
        }
        let last = drain(&mut lte, plans);
        for t in last {
            assert!((198 * MS..=202 * MS).contains(&t), "{}", t as f64 / 1e6);
        }
        assert_eq!(lte.cells[0].ul_bytes, 200 * 1000);
    }

    #[test]
    fn a_latecomer_gets_half_from_when_it_joins() {
        // UE 0 alone for 50 ms (50 packets), then UE 1 joins with 50 packets:
        // both send at half rate; UE 0's last 50 and UE 1's 50 end together.
        let mut lte = lte_with(&[8e6, 8e6]);
        let mut plans: Vec<Tti> = (0..100)
            .filter_map(|_| lte.send(0, 0, Dir::Up, packet()))
            .collect();
        // Run UE 0 alone up to 50 ms.
        let mut now = 0;
        while let Some(i) = (0..plans.len()).min_by_key(|&i| plans[i].2) {
            if plans[i].2 > 50 * MS {
                break;
            }
            let (c, d, t, g) = plans.remove(i);
            now = t;
            plans.extend(lte.tti(t, c, d, g).1);
        }
        assert_eq!(now, 50 * MS);
        for _ in 0..50 {
            plans.extend(lte.send(now, 1, Dir::Up, packet()));
        }
        let last = drain(&mut lte, plans);
        for t in last {
            assert!((148 * MS..=152 * MS).contains(&t), "{}", t as f64 / 1e6);
        }
    }

    #[test]
    fn the_uplink_follows_the_model_and_falls_with_distance() {
        // Mean over a minute of updates per distance: the model's rate at
        // the CSQ there, with the UE's fading around it.
        let mean_ul = |spec: &LteSpec, d: f64| {
            let mut lte = Lte::new(spec, &[Vec2::new(0.0, 0.0)], 1, 7);
            let n = 600;
            (0..n)
                .map(|s| {
                    lte.update(s * 1_000 * MS, 0, Vec2::new(d, 0.0));
                    lte.ues[0].ul_bps
                })
                .sum::<f64>()
                / n as f64
        };
        let spec = LteSpec::default();
        let (near, far) = (mean_ul(&spec, 100.0), mean_ul(&spec, 1500.0));
        assert!(near > 2.0 * far && far > 0.0, "{near} {far}");
        // Near the mast (CSQ 31, SINR far above the 15 dB cap) it is the
        // fit's capped rate whatever the fading: its PRBs at 2 bit/s/Hz
        // through q and HARQ.
        let p = UplinkFit::Verizon.params();
        let cap = p.mean_rate_bps(40.0);
        assert!(near <= cap * 1.0001 && near > 0.7 * cap, "{near} vs {cap}");
        // The old rule on request: half the downlink draw.
        let old = LteSpec {
            uplink_factor: Some(0.5),
            ..LteSpec::default()
        };
        let mut lte = Lte::new(&old, &[Vec2::new(0.0, 0.0)], 1, 7);
        lte.update(0, 0, Vec2::new(100.0, 0.0));
        assert_eq!(lte.ues[0].ul_bps, lte.ues[0].dl_bps * 0.5);
    }
}
