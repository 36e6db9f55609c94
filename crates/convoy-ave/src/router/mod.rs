//! The router: beacons, the context table, and per-bundle decisions.
//!
//! AVE (thesis Fig. 7.3) tries, for a bundle received with strategy m,
//! the strategies n = 1..4 in order with n ≤ m (the loop rule), except that
//! geographic (3) may fall to carry (4). A bundle entering carry records
//! its distance to the nearest RSU (the *mark*); it may leave carry for
//! reactive or geographic forwarding only once a holder is `d_th` closer
//! than the mark. That is our reading of the thesis's distance threshold:
//! it stops geo ↔ carry ping-pong at a local minimum and stops a carried
//! bundle from flooding a route discovery at every contact.
//!
//! Two choices of ours where the thesis is silent: an AVE node keeps a
//! bundle until the next hop acknowledges it at the link layer, and a hop
//! that fails goes back through the decision without that neighbour; and a
//! bundle that no allowed strategy can move (a local hop whose RSU is gone)
//! is carried rather than dropped. The baselines keep their own rules:
//! DYMO and greedy forwarding drop on a failed hop, spray-and-wait keeps
//! custody until acknowledged.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, Protocol};
use crate::dymo::{Discovery, Routes};
use crate::neighbors::Neighbors;
use crate::rsus::RsuTable;
use crate::wire::frame::{DataHeader, Frame as Wire};
use crate::wire::hello::Hello;
use crate::wire::WireError;
use crate::{NodeId, Vec2};

mod decide;
mod types;

pub use types::{Destination, DropCause, Frame, Role, RouterEvent, Strategy};

#[derive(Clone, Debug)]
struct Held {
    h: DataHeader,
    /// The node it came from (never sent straight back: split horizon).
    from: Option<NodeId>,
    /// A reactive discovery for it failed: skip to geographic.
    reactive_failed: bool,
    /// Waiting for a route reply.
    waiting: bool,
    /// Custody (carry / spray) offered and not yet acknowledged.
    pending: Option<u64>,
    sprayed_to: Vec<NodeId>,
}

#[derive(Clone, Debug)]
struct InFlight {
    h: DataHeader,
    to: NodeId,
    strategy: Strategy,
    /// A custody transfer: the held copy goes only when acknowledged.
    custody: bool,
    copies_given: u8,
}

pub struct Router {
    id: NodeId,
    role: Role,
    cfg: Config,
    rsus: Arc<RsuTable>,
    pos: Vec2,
    vel: Vec2,
    dest: Option<Vec2>,
    pos_at: Duration,
    neighbors: Neighbors,
    routes: Routes,
    discovery: Option<Discovery>,
    next_rreq: u32,
    last_rsu_heard: Option<Duration>,
    held: VecDeque<Held>,
    in_flight: BTreeMap<u64, InFlight>,
    seen_bundles: BTreeMap<(NodeId, u32), Duration>,
    out: VecDeque<Frame>,
    events: VecDeque<RouterEvent>,
    next_beacon: Duration,
    next_check: Duration,
    seq: u16,
    next_token: u64,
    next_bundle: u32,
    rng: u64,
}

const CHECK_EVERY: Duration = Duration::from_secs(1);
/// A bundle that has hopped this often is only delivered directly to an
/// RSU or carried: a guard against any loop the rules above miss.
const MAX_HOPS: u8 = 32;

impl Router {
    /// A router at node `id`; `rsus` are the RSUs' addresses and positions
    /// (AVE assumes they are known a priori); `seed` jitters the beacons.
    pub fn new(
        id: NodeId,
        role: Role,
        cfg: Config,
        rsus: Arc<RsuTable>,
        seed: u64,
    ) -> Result<Router, String> {
        cfg.validate()?;
        let mut r = Router {
            id,
            role,
            cfg,
            rsus,
            pos: Vec2::default(),
            vel: Vec2::default(),
            dest: None,
            pos_at: Duration::ZERO,
            neighbors: Neighbors::default(),
            routes: Routes::default(),
            discovery: None,
            next_rreq: 0,
            last_rsu_heard: None,
            held: VecDeque::new(),
            in_flight: BTreeMap::new(),
            seen_bundles: BTreeMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            next_beacon: Duration::ZERO,
            next_check: Duration::MAX,
            seq: 0,
            next_token: 0,
            next_bundle: 0,
            rng: seed ^ (u64::from(id) << 32) ^ 0x5851_f42d_4c95_7f2d,
        };
        // First beacon at a random point of the first interval, so nodes
        // that start together do not beacon together.
        r.next_beacon = r.cfg.beacon_interval.mul_f64(r.uniform());
        Ok(r)
    }

    fn uniform(&mut self) -> f64 {
        // SplitMix64: small, stable, enough for jitter.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn neighbors(&self) -> &Neighbors {
        &self.neighbors
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Where the node is and where it goes, as of `now`.
    pub fn set_motion(&mut self, now: Duration, pos: Vec2, vel: Vec2, dest: Option<Vec2>) {
        self.pos = pos;
        self.vel = vel;
        self.dest = dest;
        self.pos_at = now;
    }

    fn position(&self, now: Duration) -> Vec2 {
        self.pos
            .add_scaled(self.vel, now.saturating_sub(self.pos_at).as_secs_f64())
    }

    fn is_rsu(&self, id: NodeId) -> bool {
        self.rsus.contains(id)
    }

    fn rsu_distance(&self, p: Vec2) -> f64 {
        self.rsus.nearest_distance(p)
    }

    /// A new bundle of `len` bytes sensed here; returns its number.
    pub fn originate(&mut self, now: Duration, len: u16) -> u32 {
        let bundle = self.next_bundle;
        self.next_bundle += 1;
        let copies = match self.cfg.protocol {
            Protocol::SprayAndWait { copies } => copies,
            _ => 1,
        };
        let h = DataHeader {
            origin: self.id,
            bundle,
            created_ns: now.as_nanos() as u64,
            hops: 0,
            strategy: Strategy::Carry as u8,
            mark_m: None,
            copies,
            rsu: 0,
            len,
        };
        self.seen_bundles
            .insert((self.id, bundle), now + self.cfg.bundle_lifetime);
        self.take(now, Held::new(h));
        bundle
    }

    /// A frame heard from `from` (already filtered by the radio: it was received).
    pub fn handle_frame(
        &mut self,
        now: Duration,
        from: NodeId,
        bytes: &[u8],
    ) -> Result<(), WireError> {
        if bytes.first() == Some(&0) {
            let h = Hello::decode(bytes)?;
            if h.origin != from {
                return Err(WireError::Invalid("beacon sender"));
            }
            // The thesis's filter: a sender beyond the radio's reach is a
            // fluke of fading, not a neighbour to route through.
            if h.position.dist(self.position(now)) > self.cfg.max_range_m {
                return Ok(());
            }
            if h.is_rsu {
                self.last_rsu_heard = Some(now);
            }
            if self.neighbors.on_hello(now, self.id, &h) && !self.held.is_empty() {
                self.next_check = now; // a new contact: look at what we hold
            }
            return Ok(());
        }
        match Wire::decode(bytes)? {
            Wire::Data(h) => self.on_data(now, from, h),
            Wire::Rreq {
                origin,
                rreq_id,
                hops,
                hop_limit,
            } => self.on_rreq(now, from, origin, rreq_id, hops, hop_limit),
            Wire::Rrep {
                origin,
                rreq_id,
                rsu,
                hops,
            } => self.on_rrep(now, from, origin, rreq_id, rsu, hops),
        }
        Ok(())
    }

    fn on_data(&mut self, now: Duration, from: NodeId, mut h: DataHeader) {
        h.hops = h.hops.saturating_add(1);
        if self.role == Role::Rsu {
            let key = (h.origin, h.bundle);
            if !self.seen_bundles.contains_key(&key) {
                self.seen_bundles
                    .insert(key, now + self.cfg.bundle_lifetime);
                self.events.push_back(RouterEvent::Delivered {
                    origin: h.origin,
                    bundle: h.bundle,
                    created: Duration::from_nanos(h.created_ns),
                    hops: h.hops,
                });
            }
            return;
        }
        if matches!(self.cfg.protocol, Protocol::SprayAndWait { .. }) {
            // A copy we already hold or held is not taken twice.
            let key = (h.origin, h.bundle);
            if self.seen_bundles.contains_key(&key) {
                return;
            }
            self.seen_bundles
                .insert(key, now + self.cfg.bundle_lifetime);
        }
        let mut x = Held::new(h);
        x.from = Some(from);
        self.take(now, x);
    }

    fn on_rreq(
        &mut self,
        now: Duration,
        from: NodeId,
        origin: NodeId,
        id: u32,
        hops: u8,
        limit: u8,
    ) {
        if origin == self.id || !self.routes.first_sight(now, origin, id, self.cfg.t_end) {
            return;
        }
        let life = self.cfg.route_timeout;
        self.routes.learn(now, origin, from, hops + 1, life);
        if self.role == Role::Rsu {
            self.send(
                Destination::Node(from),
                &Wire::Rrep {
                    origin,
                    rreq_id: id,
                    rsu: self.id,
                    hops: 0,
                },
            );
        } else if hops + 1 < limit {
            self.send(
                Destination::Broadcast,
                &Wire::Rreq {
                    origin,
                    rreq_id: id,
                    hops: hops + 1,
                    hop_limit: limit,
                },
            );
        }
    }

    fn on_rrep(
        &mut self,
        now: Duration,
        from: NodeId,
        origin: NodeId,
        id: u32,
        rsu: NodeId,
        hops: u8,
    ) {
        if self.role == Role::Rsu {
            return;
        }
        self.routes
            .learn(now, rsu, from, hops + 1, self.cfg.route_timeout);
        if origin == self.id {
            if self.discovery.is_some_and(|d| d.rreq_id == id) {
                self.discovery = None;
            }
            // Everything waiting for a route goes now.
            let waiting: Vec<Held> = self.drain_held(|x| x.waiting);
            for mut x in waiting {
                x.waiting = false;
                self.take(now, x);
            }
        } else if let Some(back) = self.routes.get(now, origin) {
            self.send(
                Destination::Node(back.next_hop),
                &Wire::Rrep {
                    origin,
                    rreq_id: id,
                    rsu,
                    hops: hops + 1,
                },
            );
        }
    }

    fn drain_held(&mut self, pred: impl Fn(&Held) -> bool) -> Vec<Held> {
        let (take, keep): (VecDeque<Held>, VecDeque<Held>) =
            self.held.drain(..).partition(|x| pred(x));
        self.held = keep;
        take.into()
    }

    fn send(&mut self, to: Destination, w: &Wire) -> u64 {
        let mut bytes = Vec::new();
        w.encode(&mut bytes);
        let token = self.next_token;
        self.next_token += 1;
        self.out.push_back(Frame { to, bytes, token });
        token
    }

    fn send_data(
        &mut self,
        h: &DataHeader,
        to: NodeId,
        strategy: Strategy,
        custody: bool,
        copies_given: u8,
    ) -> u64 {
        let mut w = h.clone();
        w.strategy = strategy as u8;
        if copies_given > 0 {
            w.copies = copies_given;
        }
        let token = self.send(Destination::Node(to), &Wire::Data(w.clone()));
        self.in_flight.insert(
            token,
            InFlight {
                h: w,
                to,
                strategy,
                custody,
                copies_given,
            },
        );
        token
    }

    /// The link layer's verdict on a unicast frame.
    pub fn handle_link_result(&mut self, now: Duration, token: u64, acked: bool) {
        let Some(f) = self.in_flight.remove(&token) else {
            return;
        };
        if acked {
            self.events.push_back(RouterEvent::Hop {
                origin: f.h.origin,
                bundle: f.h.bundle,
                strategy: f.strategy,
            });
        } else {
            self.neighbors.remove(f.to);
            self.routes.break_link(f.to);
        }
        if !f.custody {
            if !acked {
                self.drop_bundle(&f.h, DropCause::LinkFailure);
            }
            return;
        }
        let Some(i) = self.held.iter().position(|x| x.pending == Some(token)) else {
            return;
        };
        self.held[i].pending = None;
        if acked {
            if f.copies_given > 0 && self.held[i].h.copies > f.copies_given {
                self.held[i].h.copies -= f.copies_given;
                self.held[i].sprayed_to.push(f.to);
            } else {
                self.held.remove(i);
            }
        } else if self.cfg.protocol == Protocol::Ave && f.strategy != Strategy::Carry {
            // Decide again at once, without the neighbour that failed.
            if let Some(x) = self.held.remove(i) {
                self.take(now, x);
            }
        }
    }

    fn drop_bundle(&mut self, h: &DataHeader, cause: DropCause) {
        self.events.push_back(RouterEvent::Dropped {
            origin: h.origin,
            bundle: h.bundle,
            cause,
        });
    }

    /// The node leaves the map: everything it carries is lost.
    pub fn shutdown(&mut self) {
        for x in std::mem::take(&mut self.held) {
            self.drop_bundle(&x.h, DropCause::CarrierLeft);
        }
        for (_, f) in std::mem::take(&mut self.in_flight) {
            if !f.custody {
                self.drop_bundle(&f.h, DropCause::CarrierLeft);
            }
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Frame> {
        self.out.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<RouterEvent> {
        self.events.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        let mut t = self.next_beacon;
        if !self.held.is_empty() {
            t = t.min(self.next_check);
        }
        if let Some(d) = self.discovery {
            t = t.min(d.deadline);
        }
        Some(t)
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        if now >= self.next_beacon {
            self.beacon(now);
            // RFC 5148 jitter: each interval shortened by up to a quarter.
            let j = self.cfg.beacon_interval.mul_f64(0.25 * self.uniform());
            self.next_beacon = now + self.cfg.beacon_interval - j;
            self.neighbors.expire(now, self.cfg.neighbor_hold);
            self.routes.expire(now);
            self.seen_bundles.retain(|_, t| *t > now);
        }
        if let Some(d) = self.discovery.filter(|d| now >= d.deadline) {
            self.discovery_timeout(now, d);
        }
        if !self.held.is_empty() && now >= self.next_check {
            self.next_check = now + CHECK_EVERY;
            let all: Vec<Held> = self.drain_held(|x| x.pending.is_none() && !x.waiting);
            for x in all {
                if now.saturating_sub(Duration::from_nanos(x.h.created_ns))
                    > self.cfg.bundle_lifetime
                {
                    self.drop_bundle(&x.h, DropCause::Expired);
                } else {
                    self.take(now, x);
                }
            }
        }
    }

    fn beacon(&mut self, now: Duration) {
        let h = Hello {
            origin: self.id,
            seq: self.seq,
            is_rsu: self.role == Role::Rsu,
            interval: self.cfg.beacon_interval,
            validity: self.cfg.neighbor_hold,
            position: self.position(now),
            velocity: self.vel,
            destination: self.dest,
            neighbors: self.neighbors.beacon_list(),
        };
        self.seq = self.seq.wrapping_add(1);
        let mut bytes = Vec::new();
        h.encode(&mut bytes);
        let token = self.next_token;
        self.next_token += 1;
        self.out.push_back(Frame {
            to: Destination::Broadcast,
            bytes,
            token,
        });
    }

    fn start_discovery(&mut self, now: Duration, tries: u8) {
        let id = self.next_rreq;
        self.next_rreq = self.next_rreq.wrapping_add(1);
        let (limit, wait) = match self.cfg.protocol {
            Protocol::Dymo => (
                self.cfg.dymo_rreq_hops,
                self.cfg.dymo_rreq_wait * (1 << tries.min(8)),
            ),
            _ => (self.cfg.ave_rreq_hops, self.cfg.t_end),
        };
        self.routes.first_sight(now, self.id, id, wait);
        self.discovery = Some(Discovery {
            rreq_id: id,
            deadline: now + wait,
            tries: tries + 1,
        });
        self.send(
            Destination::Broadcast,
            &Wire::Rreq {
                origin: self.id,
                rreq_id: id,
                hops: 0,
                hop_limit: limit,
            },
        );
    }

    fn discovery_timeout(&mut self, now: Duration, d: Discovery) {
        self.discovery = None;
        if self.cfg.protocol == Protocol::Dymo && d.tries < self.cfg.dymo_rreq_tries {
            self.start_discovery(now, d.tries);
            return;
        }
        for mut x in self.drain_held(|x| x.waiting) {
            x.waiting = false;
            x.reactive_failed = true;
            if self.cfg.protocol == Protocol::Dymo {
                self.drop_bundle(&x.h, DropCause::NoRoute);
            } else {
                self.take(now, x);
            }
        }
    }
}

impl Held {
    fn new(h: DataHeader) -> Held {
        Held {
            h,
            from: None,
            reactive_failed: false,
            waiting: false,
            pending: None,
            sprayed_to: Vec::new(),
        }
    }
}
