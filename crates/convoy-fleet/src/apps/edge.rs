//! Edge-assisted requests over LTE (SPEC S8, baguena-2017 ch. 8): each
//! client has one request outstanding at a time (closed loop); a request
//! goes to the edge with probability `edge_share`, else to the cloud. The
//! edge serves `capacity` requests at once and queues the rest in order;
//! the cloud has no limit. Think time, processing time and sizes come from
//! the thesis's Table 8.1. With the edge at the eNodeBs, the capacity is
//! split evenly between them (the same total as one edge at the PGW), and a
//! request goes to the edge of the cell the client is in when it sends.

use std::collections::{BTreeMap, VecDeque};

use convoy_models::Rng;

use super::between;
use crate::events::{Nanos, MS, SEC};
use crate::packet::{Body, Packet, Server};
use crate::scenario::EdgeSpec;
use crate::world::{Ev, World};

/// Table 8.1: (think ms, processing ms, response bytes); requests are 20–30 B.
pub fn workload(name: &str) -> ((f64, f64), (f64, f64), (f64, f64)) {
    match name {
        "ar" => ((50.0, 100.0), (50.0, 100.0), (700.0, 900.0)),
        "game" => ((200.0, 250.0), (200.0, 250.0), (100.0, 200.0)),
        _ => ((100.0, 150.0), (100.0, 150.0), (400.0, 600.0)),
    }
}

#[derive(Clone, Debug)]
pub struct RequestRec {
    pub client: u32,
    pub id: u64,
    pub server: Server,
    pub sent: Nanos,
    pub queued: Nanos,
    pub latency: Option<Nanos>,
}

struct Site {
    busy: u32,
    capacity: u32,
    queue: VecDeque<(u32, u64, Nanos)>,
}

pub struct EdgeApp {
    spec: EdgeSpec,
    think: (f64, f64),
    proc_ms: (f64, f64),
    resp: (f64, f64),
    rngs: Vec<Option<Rng>>,
    next_id: Vec<u64>,
    sites: Vec<Site>,
    open: BTreeMap<(u32, u64), usize>,
    pub recs: Vec<RequestRec>,
    server_rng: Rng,
}

pub const CLOUD_SITE: u16 = u16::MAX;
/// A request unanswered this long counts as lost; the client thinks and
/// sends the next one.
const REQUEST_TIMEOUT: Nanos = 5 * SEC;

impl EdgeApp {
    pub fn new(w: &World) -> EdgeApp {
        let spec = w.sc.edge.clone().expect("edge");
        let (think, proc_ms, resp) = workload(&spec.workload);
        let cells = w.sc.enodeb.len().max(1) as u32;
        let sites = if spec.placement == "pgw" {
            vec![spec.capacity]
        } else {
            (0..cells).map(|_| spec.capacity.div_ceil(cells)).collect()
        };
        EdgeApp {
            think,
            proc_ms,
            resp,
            rngs: vec![None; w.vehicles],
            next_id: vec![0; w.vehicles],
            sites: sites
                .into_iter()
                .map(|capacity| Site {
                    busy: 0,
                    capacity,
                    queue: VecDeque::new(),
                })
                .collect(),
            open: BTreeMap::new(),
            recs: Vec::new(),
            server_rng: Rng::fork(w.seed, "edge-servers"),
            spec,
        }
    }
}

fn ms(rng: &mut Rng, r: (f64, f64)) -> Nanos {
    (between(rng, r.0, r.1) * MS as f64) as Nanos
}

impl World {
    pub(crate) fn edge_arrive(&mut self, i: u32) {
        let now = self.now;
        let key = self.mob.vehicles()[i as usize].key.clone();
        let e = self.edge.as_mut().expect("edge");
        if e.rngs[i as usize].is_some() {
            return;
        }
        let mut rng = Rng::fork(self.seed, &format!("edge/{key}"));
        if rng.uniform() < e.spec.share {
            let at = now + ms(&mut rng, e.think);
            e.rngs[i as usize] = Some(rng);
            self.q.push(at, Ev::EdgeThink(i));
        }
    }

    pub(crate) fn on_edge_think(&mut self, c: u32) {
        let now = self.now;
        if !self.nodes[c as usize].present {
            return;
        }
        let cell = self.lte.as_ref().and_then(|l| l.cell_of(c));
        let e = self.edge.as_mut().expect("edge");
        let Some(rng) = e.rngs[c as usize].as_mut() else {
            return;
        };
        let Some(cell) = cell else {
            // No coverage: try again after another think time.
            self.q.push(now + SEC, Ev::EdgeThink(c));
            return;
        };
        let server = if rng.uniform() < e.spec.edge_share {
            if e.spec.placement == "pgw" {
                Server::EdgePgw
            } else {
                Server::EdgeEnb(cell)
            }
        } else {
            Server::Cloud
        };
        let size = between(rng, 20.0, 30.0) as usize;
        let id = e.next_id[c as usize];
        e.next_id[c as usize] += 1;
        e.open.insert((c, id), e.recs.len());
        e.recs.push(RequestRec {
            client: c,
            id,
            server,
            sent: now,
            queued: 0,
            latency: None,
        });
        // A request lost on the way (a full queue, a client leaving
        // coverage) must not stall its client: give up after a while.
        self.q.push(now + REQUEST_TIMEOUT, Ev::EdgeTimeout(c, id));
        self.lte_up(
            c,
            Packet::up(
                server,
                size,
                Body::Request {
                    client: c,
                    id,
                    server,
                },
            ),
        );
    }

    pub(crate) fn edge_request_arrives(&mut self, server: Server, p: Packet) {
        let Body::Request { client, id, .. } = p.body else {
            return;
        };
        let now = self.now;
        let e = self.edge.as_mut().expect("edge");
        let site = match server {
            Server::Cloud => CLOUD_SITE,
            Server::EdgePgw => 0,
            Server::EdgeEnb(c) => c,
            Server::Relay => return,
        };
        if site == CLOUD_SITE {
            let t = now + ms(&mut e.server_rng, e.proc_ms);
            self.q.push(t, Ev::EdgeDone(client, id, site));
            return;
        }
        let s = &mut e.sites[site as usize];
        if s.busy < s.capacity {
            s.busy += 1;
            let t = now + ms(&mut e.server_rng, e.proc_ms);
            self.q.push(t, Ev::EdgeDone(client, id, site));
        } else {
            s.queue.push_back((client, id, now));
        }
    }

    pub(crate) fn on_edge_done(&mut self, client: u32, id: u64, site: u16) {
        let now = self.now;
        let placement_pgw = self
            .edge
            .as_ref()
            .is_some_and(|e| e.spec.placement == "pgw");
        let e = self.edge.as_mut().expect("edge");
        let server = if site == CLOUD_SITE {
            Server::Cloud
        } else {
            let s = &mut e.sites[site as usize];
            s.busy -= 1;
            if let Some((c2, id2, since)) = s.queue.pop_front() {
                s.busy += 1;
                if let Some(&r) = e.open.get(&(c2, id2)) {
                    e.recs[r].queued = now - since;
                }
                let t = now + ms(&mut e.server_rng, e.proc_ms);
                self.q.push(t, Ev::EdgeDone(c2, id2, site));
            }
            if placement_pgw {
                Server::EdgePgw
            } else {
                Server::EdgeEnb(site)
            }
        };
        let e = self.edge.as_mut().expect("edge");
        let size = between(&mut e.server_rng, e.resp.0, e.resp.1) as usize;
        self.lte_down(
            server,
            Packet::down(client, size, Body::Response { client, id }),
        );
    }

    pub(crate) fn edge_response_arrives(&mut self, p: Packet) {
        let Body::Response { client, id } = p.body else {
            return;
        };
        let now = self.now;
        let e = self.edge.as_mut().expect("edge");
        let Some(r) = e.open.remove(&(client, id)) else {
            return;
        };
        e.recs[r].latency = Some(now - e.recs[r].sent);
        if let Some(rng) = e.rngs[client as usize].as_mut() {
            let at = now + ms(rng, e.think);
            self.q.push(at, Ev::EdgeThink(client));
        }
    }

    pub(crate) fn on_edge_timeout(&mut self, client: u32, id: u64) {
        let now = self.now;
        let e = self.edge.as_mut().expect("edge");
        if e.open.remove(&(client, id)).is_none() {
            return; // answered in time
        }
        if let Some(rng) = e.rngs[client as usize].as_mut() {
            let at = now + ms(rng, e.think);
            self.q.push(at, Ev::EdgeThink(client));
        }
    }
}
