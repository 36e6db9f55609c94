//! DYMO's state: routes (to RSUs, and reverse routes to originators while a
//! reply travels back), the duplicate cache of route requests, and the one
//! discovery a node may have running.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::NodeId;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Route {
    pub next_hop: NodeId,
    pub hops: u8,
    pub expires: Duration,
}

#[derive(Clone, Debug, Default)]
pub struct Routes {
    map: BTreeMap<NodeId, Route>,
    seen: BTreeMap<(NodeId, u32), Duration>,
}

impl Routes {
    /// Installs or refreshes a route if it is new, expired or shorter.
    pub fn learn(
        &mut self,
        now: Duration,
        dest: NodeId,
        next_hop: NodeId,
        hops: u8,
        life: Duration,
    ) {
        let fresh = Route {
            next_hop,
            hops,
            expires: now + life,
        };
        match self.map.get(&dest) {
            Some(r) if r.expires > now && r.hops < hops => {}
            _ => {
                self.map.insert(dest, fresh);
            }
        }
    }

    pub fn get(&self, now: Duration, dest: NodeId) -> Option<Route> {
        self.map.get(&dest).copied().filter(|r| r.expires > now)
    }

    /// The shortest live route to any of `targets` (anycast): (rsu, route).
    pub fn best_to(
        &self,
        now: Duration,
        is_target: impl Fn(NodeId) -> bool,
    ) -> Option<(NodeId, Route)> {
        self.map
            .iter()
            .filter(|(d, r)| is_target(**d) && r.expires > now)
            .min_by_key(|(d, r)| (r.hops, **d))
            .map(|(d, r)| (*d, *r))
    }

    /// Using a route keeps it alive (DYMO's active route timeout).
    pub fn touch(&mut self, now: Duration, dest: NodeId, life: Duration) {
        if let Some(r) = self.map.get_mut(&dest) {
            r.expires = r.expires.max(now + life);
        }
    }

    /// A broken link: every route through it is gone.
    pub fn break_link(&mut self, next_hop: NodeId) {
        self.map.retain(|_, r| r.next_hop != next_hop);
    }

    /// Records a request; false if it was seen before.
    pub fn first_sight(&mut self, now: Duration, origin: NodeId, id: u32, keep: Duration) -> bool {
        if self.seen.contains_key(&(origin, id)) {
            return false;
        }
        self.seen.insert((origin, id), now + keep);
        true
    }

    pub fn expire(&mut self, now: Duration) {
        self.map.retain(|_, r| r.expires > now);
        self.seen.retain(|_, t| *t > now);
    }
}

/// A route discovery this node started.
#[derive(Clone, Copy, Debug)]
pub struct Discovery {
    pub rreq_id: u32,
    pub deadline: Duration,
    pub tries: u8,
}
