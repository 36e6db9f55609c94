//! The context table: one-hop neighbours learned from beacons, with their
//! position, speed vector, destination and own neighbour lists.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::wire::hello::{Hello, LinkStatus};
use crate::{NodeId, Vec2};

#[derive(Clone, Debug)]
pub struct Neighbor {
    pub pos: Vec2,
    pub vel: Vec2,
    pub dest: Option<Vec2>,
    pub heard: Duration,
    pub is_rsu: bool,
    /// The neighbour's own one-hop neighbours (heard or symmetric).
    pub their: Vec<NodeId>,
    /// Those of them it has a symmetric link with.
    pub their_symmetric: Vec<NodeId>,
    /// It listed us: the link is symmetric.
    pub lists_us: bool,
}

impl Neighbor {
    /// Where it should be now, extrapolated from its last beacon.
    pub fn predicted(&self, now: Duration) -> Vec2 {
        let dt = now.saturating_sub(self.heard).as_secs_f64();
        self.pos.add_scaled(self.vel, dt)
    }
}

/// Neighbours by address; a BTreeMap so every walk is in address order and
/// runs replay exactly.
#[derive(Clone, Debug, Default)]
pub struct Neighbors {
    map: BTreeMap<NodeId, Neighbor>,
}

impl Neighbors {
    /// Takes a beacon; returns true when the sender is new.
    pub fn on_hello(&mut self, now: Duration, me: NodeId, h: &Hello) -> bool {
        let their: Vec<NodeId> = h
            .neighbors
            .iter()
            .filter(|(_, s)| *s != LinkStatus::Lost)
            .map(|(id, _)| *id)
            .collect();
        let lists_us = their.contains(&me);
        let their_symmetric = h
            .neighbors
            .iter()
            .filter(|(_, s)| *s == LinkStatus::Symmetric)
            .map(|(id, _)| *id)
            .collect();
        let n = Neighbor {
            pos: h.position,
            vel: h.velocity,
            dest: h.destination,
            heard: now,
            is_rsu: h.is_rsu,
            their,
            their_symmetric,
            lists_us,
        };
        self.map.insert(h.origin, n).is_none()
    }

    pub fn expire(&mut self, now: Duration, hold: Duration) {
        self.map.retain(|_, n| now.saturating_sub(n.heard) <= hold);
    }

    pub fn remove(&mut self, id: NodeId) {
        self.map.remove(&id);
    }

    pub fn get(&self, id: NodeId) -> Option<&Neighbor> {
        self.map.get(&id)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &Neighbor)> {
        self.map.iter().map(|(k, v)| (*k, v))
    }

    /// An RSU we hear directly.
    pub fn rsu(&self) -> Option<NodeId> {
        self.iter().find(|(_, n)| n.is_rsu).map(|(id, _)| id)
    }

    /// A vehicle neighbour, other than `except`, with a symmetric link to us
    /// and to an RSU: (via, rsu). A link heard only one way is a fluke of
    /// fading, not a path.
    pub fn rsu_two_hops(
        &self,
        is_rsu: impl Fn(NodeId) -> bool,
        except: Option<NodeId>,
    ) -> Option<(NodeId, NodeId)> {
        self.iter()
            .filter(|(id, n)| !n.is_rsu && n.lists_us && Some(*id) != except)
            .find_map(|(id, n)| {
                n.their_symmetric
                    .iter()
                    .find(|r| is_rsu(**r))
                    .map(|r| (id, *r))
            })
    }

    /// What our beacon lists: every neighbour, symmetric if it listed us.
    pub fn beacon_list(&self) -> Vec<(NodeId, LinkStatus)> {
        self.iter()
            .map(|(id, n)| {
                let s = if n.lists_us {
                    LinkStatus::Symmetric
                } else {
                    LinkStatus::Heard
                };
                (id, s)
            })
            .collect()
    }
}
