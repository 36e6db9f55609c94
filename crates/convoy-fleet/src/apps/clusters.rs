//! Clustered heterogeneous VANET at an intersection (SPEC S9, mena-2017
//! ch. 3). Vehicles within `zone_m` of the intersection belong to the leg
//! (road) they are on; on each leg the vehicle nearest the intersection is
//! head, and vehicles within the head's Wi-Fi range form its platoon
//! (farther ones start the next platoon). Membership is recomputed every
//! second from positions, which stands in for the head's beacons and the
//! members' time-outs. Each vehicle sends an awareness message (CAM) every
//! `cam_interval_s`; a CAM of a vehicle approaching the intersection is
//! meant for every vehicle on the *other* legs, and counts as delivered to
//! one if it arrives within the deadline. The three set-ups:
//!
//! * `wifi`: one shared channel; every vehicle broadcasts its CAMs, heads
//!   rebroadcast what their members sent (one aggregate per 100 ms).
//! * `lte`: every CAM goes up to a relay at the PGW, which sends it down
//!   to every other vehicle in the zone.
//! * `both`: members send CAMs to their head on their leg's Wi-Fi channel,
//!   acknowledged and retried (legs use channels `gap` apart, gap =
//!   channels / (legs − 1)); heads aggregate,
//!   drop CAMs of vehicles leaving the intersection (irrelevant outside the
//!   platoon), send the aggregate over LTE to the relay, which forwards it
//!   to the other heads, who broadcast it to their members over Wi-Fi.

use std::collections::BTreeMap;

use convoy_ave::Vec2;

use crate::events::{Nanos, MS, SEC};
use crate::packet::{Body, Packet, Server};
use crate::scenario::ClusterSpec;
use crate::wave::{OutFrame, Owner};
use crate::world::{Ev, World};

pub const TICK: Nanos = 100 * MS;
/// Most CAMs in one Wi-Fi aggregate frame (2304-byte MSDU).
const PER_FRAME: usize = 10;

#[derive(Clone, Debug, Default)]
pub struct CamRec {
    pub sender: u32,
    pub created: Nanos,
    /// Receivers it is meant for, sorted, and when each got it.
    pub expected: Vec<u32>,
    pub got: Vec<Option<Nanos>>,
}

pub struct Clusters {
    pub spec: ClusterSpec,
    center: Vec2,
    /// Per vehicle: leg (0–3) if in the zone, head it reports to, approaching.
    pub leg: Vec<Option<u8>>,
    pub head_of: Vec<Option<u32>>,
    approaching: Vec<bool>,
    /// Per head: CAM ids collected since the last tick.
    pending: BTreeMap<u32, Vec<u32>>,
    pub cams: Vec<CamRec>,
    range: f64,
    pub head_lte_bytes: u64,
    pub cam_count: u64,
    /// Vehicles in the zone summed over steps, and the number of steps.
    pub zone_samples: (u64, u64),
}

impl Clusters {
    pub fn new(w: &World) -> Clusters {
        let spec = w.sc.clusters.clone().expect("clusters");
        Clusters {
            center: Vec2::new(spec.intersection.x, spec.intersection.y),
            leg: vec![None; w.vehicles],
            head_of: vec![None; w.vehicles],
            approaching: vec![false; w.vehicles],
            pending: BTreeMap::new(),
            cams: Vec::new(),
            range: w.medium.dsrc.range_at(0.9),
            head_lte_bytes: 0,
            cam_count: 0,
            zone_samples: (0, 0),
            spec,
        }
    }

    fn channel(&self, leg: u8) -> u8 {
        match self.spec.radios.as_str() {
            "both" => {
                let gap = (self.spec.channels / 3).max(1);
                (leg * gap) % self.spec.channels
            }
            _ => 0,
        }
    }

    fn is_head(&self, v: u32) -> bool {
        self.head_of[v as usize] == Some(v)
    }
}

/// The leg a vehicle at `pos` is on (0 east, 1 north, 2 west, 3 south)
/// and its distance from the intersection at `center`; `None` outside the
/// zone or off the two roads through the intersection.
fn leg_at(center: Vec2, spec: &ClusterSpec, pos: Vec2) -> Option<(u8, f64)> {
    let d = pos.dist(center);
    if d > spec.zone_m {
        return None;
    }
    let (dx, dy) = (pos.x - center.x, pos.y - center.y);
    let along_x = dy.abs() <= spec.leg_width_m;
    let along_y = dx.abs() <= spec.leg_width_m;
    // Inside the junction both hold; the larger offset says which leg.
    let leg = match (along_x, along_y) {
        (true, true) if dx.abs() >= dy.abs() => u8::from(dx < 0.0) * 2,
        (true, false) => u8::from(dx < 0.0) * 2,
        (_, true) => 1 + u8::from(dy < 0.0) * 2,
        (false, false) => return None,
    };
    Some((leg, d))
}

/// Encodes CAM ids as a frame: the ids, padded to the CAMs' size.
fn frame_of(ids: &[u32], cam_bytes: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(ids.len() * usize::from(cam_bytes).max(4));
    for id in ids {
        let mut c = id.to_be_bytes().to_vec();
        c.resize(usize::from(cam_bytes).max(4), 0);
        b.extend_from_slice(&c);
    }
    b
}

fn ids_of(bytes: &[u8], cam_bytes: u16) -> Vec<u32> {
    bytes
        .chunks(usize::from(cam_bytes).max(4))
        .filter(|c| c.len() >= 4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl World {
    pub(crate) fn cluster_arrive(&mut self, i: u32) {
        let now = self.now;
        let c = self.clusters.as_ref().expect("clusters");
        let period = (c.spec.cam_interval_s * SEC as f64) as Nanos;
        // Spread the vehicles' CAM phases over the period.
        let phase = (u64::from(i).wrapping_mul(0x9E37_79B9) % 1000) * period / 1000;
        self.q.push(now + phase, Ev::Cam(i));
    }

    /// Legs, heads and channels from this step's positions.
    pub(crate) fn clusters_on_step(&mut self) {
        let c = self.clusters.as_mut().expect("clusters");
        let mut legs: [Vec<(f64, u32)>; 4] = Default::default();
        for i in 0..self.vehicles {
            c.leg[i] = None;
            c.head_of[i] = None;
            let n = &self.nodes[i];
            let leg = if n.present {
                leg_at(c.center, &c.spec, n.pos)
            } else {
                None
            };
            let Some((leg, d)) = leg else {
                self.nodes[i].chan = 0;
                continue;
            };
            c.leg[i] = Some(leg);
            // Approaching: moving toward the centre.
            let (dx, dy) = (n.pos.x - c.center.x, n.pos.y - c.center.y);
            c.approaching[i] = n.vel.x * -dx + n.vel.y * -dy > 0.0;
            legs[leg as usize].push((d, i as u32));
        }
        c.zone_samples.0 += legs.iter().map(|l| l.len() as u64).sum::<u64>();
        c.zone_samples.1 += 1;
        for (leg, v) in legs.iter_mut().enumerate() {
            v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut head: Option<(u32, Vec2)> = None;
            for &(_, i) in v.iter() {
                let p = self.nodes[i as usize].pos;
                match head {
                    Some((h, hp)) if hp.dist(p) <= c.range => c.head_of[i as usize] = Some(h),
                    _ => {
                        head = Some((i, p));
                        c.head_of[i as usize] = Some(i);
                    }
                }
                let ch = c.channel(leg as u8);
                self.nodes[i as usize].chan = ch;
            }
        }
    }

    pub(crate) fn on_cam(&mut self, i: u32) {
        let now = self.now;
        if !self.nodes[i as usize].present {
            return;
        }
        let c = self.clusters.as_mut().expect("clusters");
        let period = (c.spec.cam_interval_s * SEC as f64) as Nanos;
        self.q.push(now + period, Ev::Cam(i));
        let Some(leg) = c.leg[i as usize] else { return };
        let id = c.cams.len() as u32;
        let mut expected = Vec::new();
        if c.approaching[i as usize] {
            for (j, l) in c.leg.iter().enumerate() {
                if l.is_some_and(|l| l != leg) {
                    expected.push(j as u32);
                }
            }
        }
        let n = expected.len();
        c.cams.push(CamRec {
            sender: i,
            created: now,
            expected,
            got: vec![None; n],
        });
        c.cam_count += 1;
        let bytes = c.spec.cam_bytes;
        match c.spec.radios.as_str() {
            "lte" => {
                let body = Body::Cams {
                    from: i,
                    cams: vec![(i, id, now)],
                };
                self.lte_up(i, Packet::up(Server::Relay, usize::from(bytes), body));
            }
            _ => {
                if c.is_head(i) {
                    c.pending.entry(i).or_default().push(id);
                }
                // With LTE beside it, a member's CAM is for its head, which
                // acknowledges it (802.11 retries); on one shared channel
                // it is for everyone in range, a broadcast.
                let to = if c.spec.radios == "both" {
                    c.head_of[i as usize].filter(|&h| h != i)
                } else {
                    None
                };
                let f = frame_of(&[id], bytes);
                self.wave_send(
                    i,
                    OutFrame {
                        to,
                        bytes: f,
                        token: 0,
                        owner: Owner::Cluster,
                    },
                );
            }
        }
    }

    fn cam_received(&mut self, r: u32, ids: &[u32]) {
        let now = self.now;
        let c = self.clusters.as_mut().expect("clusters");
        for &id in ids {
            let Some(cam) = c.cams.get_mut(id as usize) else {
                continue;
            };
            if let Ok(k) = cam.expected.binary_search(&r) {
                if cam.got[k].is_none() {
                    cam.got[k] = Some(now - cam.created);
                }
            }
        }
    }

    pub(crate) fn cluster_receive(&mut self, r: u32, from: u32, bytes: &[u8]) {
        let c = self.clusters.as_ref().expect("clusters");
        let ids = ids_of(bytes, c.spec.cam_bytes);
        let is_head = c.is_head(r);
        let from_member = c.head_of[from as usize] == Some(r);
        self.cam_received(r, &ids);
        // A head collects its members' own CAMs (not others' aggregates).
        if is_head && from_member && ids.len() == 1 {
            let c = self.clusters.as_mut().expect("clusters");
            if c.cams
                .get(ids[0] as usize)
                .is_some_and(|cam| cam.sender == from)
            {
                c.pending.entry(r).or_default().push(ids[0]);
            }
        }
    }

    pub(crate) fn on_cluster_tick(&mut self) {
        let now = self.now;
        if now + TICK < self.end {
            self.q.push(now + TICK, Ev::ClusterTick);
        }
        let c = self.clusters.as_mut().expect("clusters");
        let pending = std::mem::take(&mut c.pending);
        let radios = c.spec.radios.clone();
        let bytes = c.spec.cam_bytes;
        for (head, ids) in pending {
            if !self.nodes[head as usize].present {
                continue;
            }
            let c = self.clusters.as_ref().expect("clusters");
            // Drop what matters only inside the platoon: CAMs of vehicles
            // leaving the intersection.
            let ids: Vec<u32> = ids
                .into_iter()
                .filter(|id| {
                    c.cams
                        .get(*id as usize)
                        .is_some_and(|cam| !cam.expected.is_empty())
                })
                .collect();
            if ids.is_empty() {
                continue;
            }
            match radios.as_str() {
                "both" => {
                    let cams: Vec<(u32, u32, u64)> =
                        ids.iter().map(|&id| (head, id, now)).collect();
                    let len = ids.len() * usize::from(bytes);
                    let c = self.clusters.as_mut().expect("clusters");
                    c.head_lte_bytes += len as u64;
                    self.lte_up(
                        head,
                        Packet::up(Server::Relay, len, Body::Cams { from: head, cams }),
                    );
                }
                _ => {
                    for chunk in ids.chunks(PER_FRAME) {
                        let f = frame_of(chunk, bytes);
                        self.wave_send(
                            head,
                            OutFrame {
                                to: None,
                                bytes: f,
                                token: 0,
                                owner: Owner::Cluster,
                            },
                        );
                    }
                }
            }
        }
    }

    /// The relay at the PGW: LTE-only CAMs go to every other vehicle in the
    /// zone; hybrid aggregates go to the heads of the other legs.
    pub(crate) fn relay_receive(&mut self, p: Packet) {
        let Body::Cams { from, cams } = p.body else {
            return;
        };
        let c = self.clusters.as_ref().expect("clusters");
        let from_leg = c.leg[from as usize];
        let targets: Vec<u32> = (0..self.vehicles as u32)
            .filter(|&j| j != from && c.leg[j as usize].is_some())
            .filter(|&j| c.spec.radios == "lte" || (c.is_head(j) && c.leg[j as usize] != from_leg))
            .collect();
        let len = p.wire_len - crate::packet::IP_UDP;
        for j in targets {
            let body = Body::Cams {
                from,
                cams: cams.clone(),
            };
            self.lte_down(Server::Relay, Packet::down(j, len, body));
        }
    }

    pub(crate) fn cluster_lte_receive(&mut self, node: u32, p: Packet) {
        let Body::Cams { cams, .. } = p.body else {
            return;
        };
        let ids: Vec<u32> = cams.iter().map(|c| c.1).collect();
        self.cam_received(node, &ids);
        let c = self.clusters.as_ref().expect("clusters");
        if c.spec.radios == "both" && c.is_head(node) {
            let bytes = c.spec.cam_bytes;
            for chunk in ids.chunks(PER_FRAME) {
                let f = frame_of(chunk, bytes);
                self.wave_send(
                    node,
                    OutFrame {
                        to: None,
                        bytes: f,
                        token: 0,
                        owner: Owner::Cluster,
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Site;

    fn spec() -> ClusterSpec {
        ClusterSpec {
            radios: "both".into(),
            cam_interval_s: 0.5,
            cam_bytes: 200,
            deadline_ms: 500.0,
            intersection: Site { x: 400.0, y: 400.0 },
            zone_m: 300.0,
            leg_width_m: 10.0,
            channels: 13,
        }
    }

    #[test]
    fn a_vehicle_is_on_the_leg_of_the_road_it_drives() {
        let c = Vec2::new(400.0, 400.0);
        let s = spec();
        let leg = |x, y| leg_at(c, &s, Vec2::new(x, y)).map(|l| l.0);
        assert_eq!(leg(550.0, 400.0), Some(0));
        assert_eq!(leg(400.0, 650.0), Some(1));
        assert_eq!(leg(120.0, 403.0), Some(2));
        assert_eq!(leg(395.0, 200.0), Some(3));
        // In the junction the larger offset decides.
        assert_eq!(leg(405.0, 402.0), Some(0));
        assert_eq!(leg(401.0, 396.0), Some(3));
    }

    #[test]
    fn parallel_streets_and_the_far_road_take_no_part() {
        let c = Vec2::new(400.0, 400.0);
        let s = spec();
        // 224 m from the intersection, but on the street at y = 200.
        assert_eq!(leg_at(c, &s, Vec2::new(500.0, 200.0)), None);
        assert_eq!(leg_at(c, &s, Vec2::new(200.0, 550.0)), None);
        // On a leg's road, beyond the zone.
        assert_eq!(leg_at(c, &s, Vec2::new(400.0, 720.0)), None);
        let (_, d) = leg_at(c, &s, Vec2::new(400.0, 700.0)).unwrap();
        assert!((d - 300.0).abs() < 1e-9);
    }
}
