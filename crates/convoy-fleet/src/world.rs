//! The simulated world and its event loop: nodes, mobility steps, the
//! 802.11p medium, the LTE cells and the wired core, and dispatch to the
//! applications (`apps/`). One thread, one queue ordered by (time,
//! sequence), every random draw from a stream forked from the run's seed:
//! a run is a function of the scenario and the seed.

use std::time::Duration;

use convoy_ave::{Destination, Router, Vec2};

use crate::apps::clusters::Clusters;
use crate::apps::edge::EdgeApp;
use crate::apps::sensing::Sensing;
use crate::apps::upload::Uploads;
use crate::city::City;
use crate::events::{Nanos, Queue, MS, SEC};
use crate::lte::{Dir, Lte};
use crate::mobility::{Mobility, Step};
use crate::packet::{Packet, Server};
use crate::records::Records;
use crate::scenario::Scenario;
use crate::space::SpatialGrid;
use crate::wave::{Ack, Mac, Medium, OutFrame, Owner};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Vehicle,
    Rsu,
}

pub struct Node {
    pub kind: Kind,
    pub present: bool,
    /// Interfaces: 802.11p and LTE.
    pub wave: bool,
    pub lte: bool,
    pub pos: Vec2,
    pub vel: Vec2,
    pub at: Nanos,
    pub dest: Option<Vec2>,
    pub router: Option<Router>,
    pub mac: Mac,
    pub chan: u8,
    pub timer_at: Nanos,
    pub wave_tx: u64,
    pub wave_rx: u64,
}

impl Node {
    pub fn position(&self, now: Nanos) -> Vec2 {
        self.pos
            .add_scaled(self.vel, (now.saturating_sub(self.at)) as f64 / SEC as f64)
    }
}

/// Every kind of event.
#[derive(Debug)]
pub enum Ev {
    Mobility,
    RouterTimer(u32),
    Access(u32),
    TxEnd(u32, u64),
    Tti(u16, Dir, u64),
    HandoverDone(u32),
    /// A packet reaches a server (up) or the UE's eNodeB queue (down).
    Core(Box<Packet>),
    /// A packet leaves the air interface at its far end.
    Air(Box<Packet>, u16),
    Burst(u32, u32),
    UploadStart(u32),
    ProtoTimer(u32),
    EdgeThink(u32),
    EdgeDone(u32, u64, u16),
    EdgeTimeout(u32, u64),
    Cam(u32),
    ClusterTick,
    End,
}

/// Where a packet is in the core: at an eNodeB, the PGW, or the cloud.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Enb(u16),
    Pgw,
    Cloud,
}

pub struct World {
    pub sc: Scenario,
    pub seed: u64,
    pub now: Nanos,
    pub end: Nanos,
    pub q: Queue<Ev>,
    pub nodes: Vec<Node>,
    pub vehicles: usize,
    pub mob: Mobility,
    next_step: Option<Step>,
    pub grid: SpatialGrid,
    pub medium: Medium,
    pub city: City,
    pub lte: Option<Lte>,
    pub sensing: Option<Sensing>,
    pub uploads: Option<Uploads>,
    pub edge: Option<EdgeApp>,
    pub clusters: Option<Clusters>,
    pub rec: Records,
    near: Vec<u32>,
    cands: Vec<(u32, Vec2, u8)>,
    pub lte_packets: u64,
}

impl World {
    pub fn new(sc: Scenario, seed: u64, mob: Mobility, city: City) -> Result<World, String> {
        let medium = Medium::new(&sc.radio, seed)?;
        let vehicles = mob.vehicles().len();
        let rsus: Vec<Vec2> = sc.rsu.iter().map(|s| Vec2::new(s.x, s.y)).collect();
        let mut nodes: Vec<Node> = Vec::with_capacity(vehicles + rsus.len());
        for v in mob.vehicles() {
            let mut n = Node::new(Kind::Vehicle, Vec2::default(), v.destination);
            let mut rng = convoy_models::Rng::fork(seed, &format!("interfaces/{}", v.key));
            n.wave = rng.uniform() < sc.vehicles.wave_share;
            n.lte = rng.uniform() < sc.vehicles.lte_share;
            nodes.push(n);
        }
        for p in &rsus {
            let mut n = Node::new(Kind::Rsu, *p, None);
            n.present = true;
            nodes.push(n);
        }
        let (lo, hi) = mob.bounds();
        let (lo, hi) = rsus.iter().fold((lo, hi), |(lo, hi), p| {
            (
                Vec2::new(lo.x.min(p.x), lo.y.min(p.y)),
                Vec2::new(hi.x.max(p.x), hi.y.max(p.y)),
            )
        });
        let grid = SpatialGrid::new(lo, hi, 250.0);
        let sites: Vec<Vec2> = sc.enodeb.iter().map(|s| Vec2::new(s.x, s.y)).collect();
        let lte = (!sites.is_empty()).then(|| Lte::new(&sc.lte, &sites, nodes.len(), seed));
        let end = (sc.duration_s * SEC as f64).round() as Nanos;
        let mut w = World {
            seed,
            now: 0,
            end,
            q: Queue::default(),
            vehicles,
            mob,
            next_step: None,
            grid,
            medium,
            city,
            lte,
            sensing: None,
            uploads: None,
            edge: None,
            clusters: None,
            rec: Records::default(),
            near: Vec::new(),
            cands: Vec::new(),
            lte_packets: 0,
            nodes,
            sc,
        };
        if w.sc.sensing.is_some() {
            w.sensing = Some(Sensing::new(&w)?);
            w.sensing_init()?;
        }
        if w.sc.upload.is_some() {
            w.uploads = Some(Uploads::new(&w)?);
        }
        if w.sc.edge.is_some() {
            w.edge = Some(EdgeApp::new(&w));
        }
        if w.sc.clusters.is_some() {
            w.clusters = Some(Clusters::new(&w));
            w.q.push(crate::apps::clusters::TICK, Ev::ClusterTick);
        }
        w.next_step = w.mob.next_step()?;
        let first = w.next_step.as_ref().map_or(0, |s| s.t);
        w.q.push(first, Ev::Mobility);
        w.q.push(end, Ev::End);
        Ok(w)
    }

    pub fn rsu_ids(&self) -> Vec<(u32, Vec2)> {
        (self.vehicles..self.nodes.len())
            .map(|i| (i as u32 + 1, self.nodes[i].pos))
            .collect()
    }

    pub fn dur(&self) -> Duration {
        Duration::from_nanos(self.now)
    }

    /// Runs to the end; returns the number of events processed.
    pub fn run(&mut self, mut progress: impl FnMut(Nanos, Nanos)) -> Result<u64, String> {
        let mut next_report = 0;
        while let Some((at, ev)) = self.q.pop() {
            self.now = at;
            if at >= next_report {
                progress(at, self.end);
                next_report = at + 10 * SEC;
            }
            if matches!(ev, Ev::End) {
                break;
            }
            self.dispatch(ev)?;
        }
        Ok(self.q.processed)
    }

    fn dispatch(&mut self, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Mobility => self.on_mobility()?,
            Ev::RouterTimer(n) => self.on_router_timer(n),
            Ev::Access(n) => self.on_access(n),
            Ev::TxEnd(n, id) => self.on_tx_end(n, id),
            Ev::Tti(c, d, g) => self.on_tti(c, d, g),
            Ev::HandoverDone(n) => {
                let now = self.now;
                if let Some(lte) = self.lte.as_mut() {
                    for (c, d, t, g) in lte.handover_done(now, n) {
                        self.q.push(t, Ev::Tti(c, d, g));
                    }
                }
            }
            Ev::Core(p) => self.on_core(*p),
            Ev::Air(p, cell) => self.on_air(*p, cell),
            Ev::Burst(n, left) => self.on_burst(n, left),
            Ev::UploadStart(n) => self.on_upload_start(n),
            Ev::ProtoTimer(u) => self.on_proto_timer(u),
            Ev::EdgeThink(c) => self.on_edge_think(c),
            Ev::EdgeDone(c, id, site) => self.on_edge_done(c, id, site),
            Ev::EdgeTimeout(c, id) => self.on_edge_timeout(c, id),
            Ev::Cam(n) => self.on_cam(n),
            Ev::ClusterTick => self.on_cluster_tick(),
            Ev::End => {}
        }
        Ok(())
    }

    // ---- mobility -----------------------------------------------------

    fn on_mobility(&mut self) -> Result<(), String> {
        let Some(step) = self.next_step.take() else {
            return Ok(());
        };
        let now = self.now;
        let mut seen = vec![false; self.vehicles];
        for &(i, p, v) in &step.moves {
            seen[i as usize] = true;
            let arriving = !self.nodes[i as usize].present;
            let n = &mut self.nodes[i as usize];
            n.pos = p;
            n.vel = v;
            n.at = now;
            n.present = true;
            if arriving {
                self.arrive(i);
            }
            let n = &mut self.nodes[i as usize];
            if let Some(r) = n.router.as_mut() {
                r.set_motion(Duration::from_nanos(now), p, v, n.dest);
            }
        }
        for (i, was) in seen.iter().enumerate() {
            if !was && self.nodes[i].present {
                self.depart(i as u32);
            }
        }
        self.grid.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.present {
                self.grid.insert(i as u32, n.pos);
            }
        }
        // Once a second: LTE signal, capacity and handover for every UE.
        if let Some(lte) = self.lte.as_mut() {
            for &(i, p, _) in &step.moves {
                if !self.nodes[i as usize].lte {
                    continue;
                }
                let (handover, replans) = lte.update(now, i, p);
                if let Some((node, _, _, done)) = handover {
                    self.q.push(done, Ev::HandoverDone(node));
                }
                for (c, d, t, g) in replans {
                    self.q.push(t, Ev::Tti(c, d, g));
                }
            }
            for (c, d, t, g) in lte.replan_all(now) {
                self.q.push(t, Ev::Tti(c, d, g));
            }
            self.rec.cells_snapshot(now, lte);
        }
        if self.clusters.is_some() {
            self.clusters_on_step();
        }
        self.next_step = self.mob.next_step()?;
        if let Some(s) = &self.next_step {
            if s.t <= now {
                return Err(format!(
                    "mobility time does not advance at {} s",
                    s.t as f64 / 1e9
                ));
            }
            self.q.push(s.t, Ev::Mobility);
        }
        Ok(())
    }

    fn arrive(&mut self, i: u32) {
        if self.sensing.is_some() {
            self.sensing_arrive(i);
        }
        if self.uploads.is_some() {
            self.upload_arrive(i);
        }
        if self.edge.is_some() {
            self.edge_arrive(i);
        }
        if self.clusters.is_some() {
            self.cluster_arrive(i);
        }
    }

    fn depart(&mut self, i: u32) {
        let now = Duration::from_nanos(self.now);
        let n = &mut self.nodes[i as usize];
        n.present = false;
        if let Some(r) = n.router.as_mut() {
            r.shutdown();
        }
        self.pump_router(i);
        let n = &mut self.nodes[i as usize];
        n.router = None;
        self.medium.forget(&mut n.mac);
        let now_ns = self.now;
        if let Some(lte) = self.lte.as_mut() {
            for (c, d, t, g) in lte.detach(now_ns, i) {
                self.q.push(t, Ev::Tti(c, d, g));
            }
        }
        if self.uploads.is_some() {
            self.upload_depart(i);
        }
        let _ = now;
    }

    // ---- 802.11p ------------------------------------------------------

    /// Sends what a node's router produced, hands its events to the
    /// sensing records, and re-arms its timer.
    pub fn pump_router(&mut self, i: u32) {
        let now = self.now;
        loop {
            let Some(r) = self.nodes[i as usize].router.as_mut() else {
                return;
            };
            let Some(f) = r.poll_transmit() else { break };
            let to = match f.to {
                Destination::Broadcast => None,
                Destination::Node(id) => Some(id - 1),
            };
            self.wave_send(
                i,
                OutFrame {
                    to,
                    bytes: f.bytes,
                    token: f.token,
                    owner: Owner::Routing,
                },
            );
        }
        while let Some(e) = self.nodes[i as usize]
            .router
            .as_mut()
            .and_then(Router::poll_event)
        {
            if let Some(s) = self.sensing.as_mut() {
                s.on_event(now, e);
            }
        }
        let n = &mut self.nodes[i as usize];
        if let Some(t) = n.router.as_ref().and_then(Router::poll_timeout) {
            let t = (t.as_nanos() as Nanos).max(now);
            if t != n.timer_at || n.timer_at < now {
                n.timer_at = t;
                self.q.push(t, Ev::RouterTimer(i));
            }
        }
    }

    fn on_router_timer(&mut self, i: u32) {
        let now = self.now;
        let n = &mut self.nodes[i as usize];
        if !n.present || n.timer_at != now {
            return;
        }
        n.timer_at = 0;
        if let Some(r) = n.router.as_mut() {
            r.handle_timeout(Duration::from_nanos(now));
        }
        self.pump_router(i);
    }

    pub fn wave_send(&mut self, i: u32, f: OutFrame) {
        let now = self.now;
        let n = &mut self.nodes[i as usize];
        if !n.present || !n.wave {
            return;
        }
        if let Some(t) = self.medium.enqueue(&mut n.mac, now, f) {
            self.q.push(t, Ev::Access(i));
        }
    }

    fn on_access(&mut self, i: u32) {
        let now = self.now;
        let n = &mut self.nodes[i as usize];
        if !n.present {
            return;
        }
        let pos = n.position(now);
        match self.medium.access(&mut n.mac, i, n.chan, pos, now) {
            Some((t, Some(id))) => {
                n.wave_tx += n.mac.queue.front().map_or(0, |f| f.bytes.len() as u64);
                self.q.push(t, Ev::TxEnd(i, id));
            }
            Some((t, None)) => self.q.push(t, Ev::Access(i)),
            None => {}
        }
    }

    fn on_tx_end(&mut self, i: u32, id: u64) {
        let now = self.now;
        if !self.nodes[i as usize].present {
            return;
        }
        let pos = self.nodes[i as usize].position(now);
        // Candidates: everyone in the cells within range (positions of the
        // last step, padded by how far a car moves in a step).
        let mut near = std::mem::take(&mut self.near);
        self.grid
            .near(pos, self.medium.max_range_m + 60.0, &mut near);
        let mut cands = std::mem::take(&mut self.cands);
        cands.clear();
        cands.extend(
            near.iter()
                .filter(|&&j| self.nodes[j as usize].wave)
                .map(|&j| {
                    let m = &self.nodes[j as usize];
                    (j, m.position(now), m.chan)
                }),
        );
        self.near = near;
        let n = &mut self.nodes[i as usize];
        let done = self
            .medium
            .finish(&mut n.mac, i, id, now, &cands, &mut self.city);
        self.cands = cands;
        let Some((next, out)) = done else {
            return;
        };
        if next != Nanos::MAX {
            self.q.push(next, Ev::Access(i));
        }
        let len = out.frame.bytes.len() as u64;
        for &r in &out.received {
            self.nodes[r as usize].wave_rx += len;
            match out.frame.owner {
                Owner::Routing => {
                    if let Some(rt) = self.nodes[r as usize].router.as_mut() {
                        // A malformed frame cannot come from our own routers.
                        let _ = rt.handle_frame(Duration::from_nanos(now), i + 1, &out.frame.bytes);
                    }
                    self.pump_router(r);
                }
                Owner::Cluster if (r as usize) < self.vehicles => {
                    self.cluster_receive(r, i, &out.frame.bytes)
                }
                Owner::Cluster => {}
            }
        }
        if out.frame.owner == Owner::Routing && matches!(out.ack, Ack::Acked | Ack::Failed) {
            if let Some(rt) = self.nodes[i as usize].router.as_mut() {
                rt.handle_link_result(
                    Duration::from_nanos(now),
                    out.frame.token,
                    out.ack == Ack::Acked,
                );
            }
            self.pump_router(i);
        }
    }

    // ---- LTE and the core ---------------------------------------------

    /// A UE sends a packet up its cell.
    pub fn lte_up(&mut self, node: u32, p: Packet) {
        let now = self.now;
        if let Some(lte) = self.lte.as_mut() {
            if let Some((c, d, t, g)) = lte.send(now, node, Dir::Up, p) {
                self.q.push(t, Ev::Tti(c, d, g));
            }
        }
    }

    fn on_tti(&mut self, cell: u16, dir: Dir, gen: u64) {
        let now = self.now;
        let Some(lte) = self.lte.as_mut() else { return };
        let (out, next) = lte.tti(now, cell, dir, gen);
        if let Some((c, d, t, g)) = next {
            self.q.push(t, Ev::Tti(c, d, g));
        }
        for (_, p, at) in out {
            self.lte_packets += 1;
            self.q.push(at, Ev::Air(Box::new(p), cell));
        }
    }

    pub fn place_of(server: Server) -> Place {
        match server {
            Server::Cloud => Place::Cloud,
            Server::EdgePgw | Server::Relay => Place::Pgw,
            Server::EdgeEnb(c) => Place::Enb(c),
        }
    }

    /// One-way wired delay between two places of the core.
    pub fn wired(&self, a: Place, b: Place) -> Nanos {
        let bh = (self.sc.core.backhaul_ms * MS as f64) as Nanos;
        let inet = (self.sc.core.internet_ms * MS as f64) as Nanos;
        let to_pgw = |p: Place| match p {
            Place::Enb(_) => bh,
            Place::Pgw => 0,
            Place::Cloud => inet,
        };
        match (a, b) {
            (Place::Enb(x), Place::Enb(y)) if x == y => 0,
            (Place::Cloud, Place::Cloud) => 0,
            _ => to_pgw(a) + to_pgw(b),
        }
    }

    fn on_air(&mut self, p: Packet, cell: u16) {
        match (p.to_server, p.to_node) {
            (Some(server), _) => {
                let t = self.now + self.wired(Place::Enb(cell), Self::place_of(server));
                self.q.push(t, Ev::Core(Box::new(p)));
            }
            (None, Some(node)) => self.deliver_to_ue(node, p),
            _ => {}
        }
    }

    /// A server sends a packet down to a UE, wherever it is now.
    pub fn lte_down(&mut self, from: Server, p: Packet) {
        let Some(node) = p.to_node else { return };
        let Some(cell) = self.lte.as_ref().and_then(|l| l.cell_of(node)) else {
            return; // out of coverage or gone: lost
        };
        let t = self.now + self.wired(Self::place_of(from), Place::Enb(cell));
        let mut p = p;
        p.to_server = None;
        self.q.push(t, Ev::Core(Box::new(p)));
    }

    fn on_core(&mut self, p: Packet) {
        match (p.to_server, p.to_node) {
            (Some(server), _) => self.server_receive(server, p),
            (None, Some(node)) => {
                let now = self.now;
                if let Some(lte) = self.lte.as_mut() {
                    if let Some((c, d, t, g)) = lte.send(now, node, Dir::Down, p) {
                        self.q.push(t, Ev::Tti(c, d, g));
                    }
                }
            }
            _ => {}
        }
    }

    fn server_receive(&mut self, server: Server, p: Packet) {
        use crate::packet::Body;
        match &p.body {
            Body::Proto { .. } => self.upload_server_receive(p),
            Body::Request { .. } => self.edge_request_arrives(server, p),
            Body::Cams { .. } => self.relay_receive(p),
            Body::Response { .. } => {}
        }
    }

    fn deliver_to_ue(&mut self, node: u32, p: Packet) {
        use crate::packet::Body;
        if !self.nodes[node as usize].present {
            return;
        }
        match &p.body {
            Body::Proto { .. } => self.upload_client_receive(p),
            Body::Response { .. } => self.edge_response_arrives(p),
            Body::Cams { .. } => self.cluster_lte_receive(node, p),
            Body::Request { .. } => {}
        }
    }
}

impl Node {
    fn new(kind: Kind, pos: Vec2, dest: Option<Vec2>) -> Node {
        Node {
            kind,
            present: false,
            wave: true,
            lte: kind == Kind::Vehicle,
            pos,
            vel: Vec2::default(),
            at: 0,
            dest,
            router: None,
            mac: Mac::default(),
            chan: 0,
            timer_at: 0,
            wave_tx: 0,
            wave_rx: 0,
        }
    }
}
