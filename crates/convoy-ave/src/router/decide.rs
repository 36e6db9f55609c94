//! Per-bundle decisions: AVE's four strategies with the loop rule, and
//! the DYMO, greedy and spray-and-wait baselines.

use std::time::Duration;

use super::{DropCause, Held, Router, Strategy, CHECK_EVERY, MAX_HOPS};
use crate::config::Protocol;
use crate::NodeId;

impl Router {
    /// Decides what to do with a bundle we now hold.
    pub(super) fn take(&mut self, now: Duration, x: Held) {
        let keep = match self.cfg.protocol {
            Protocol::Ave => self.route_ave(now, x),
            Protocol::Dymo => self.route_dymo(now, x),
            Protocol::Greedy => self.route_greedy(now, x),
            Protocol::SprayAndWait { .. } => self.route_spray(now, x),
        };
        if let Some(x) = keep {
            if self.held.is_empty() {
                self.next_check = now + CHECK_EVERY;
            }
            if self.held.len() >= self.cfg.buffer_limit {
                if let Some(old) = self.held.pop_front() {
                    self.drop_bundle(&old.h, DropCause::BufferFull);
                }
            }
            self.held.push_back(x);
        }
    }

    /// An RSU in reach: directly, or (unless the bundle was itself sent
    /// for local delivery, has hopped too often, or is carried and has not
    /// progressed `d_th` since it was last taken into carry mode) through a
    /// neighbour other than the one it came from.
    ///
    /// The carry condition breaks a loop the other rules let through: a
    /// neighbour that listed an RSU it could no longer reach took a bundle
    /// for local delivery, fell back to carrying it, handed it to the next
    /// vehicle, which sent it to local delivery again at once. Bundles
    /// went L, C, L, C... to the 32-hop guard (`convoy sim fleet
    /// scenarios/ci-100.toml --seed 2`: 33 hops).
    pub(super) fn local(&self, x: &Held, progressed: bool) -> Option<NodeId> {
        if let Some(r) = self.neighbors.rsu() {
            return Some(r);
        }
        if x.h.strategy == Strategy::Local as u8 || x.h.hops >= MAX_HOPS {
            return None;
        }
        if x.h.strategy == Strategy::Carry as u8 && !progressed {
            return None;
        }
        self.neighbors
            .rsu_two_hops(|id| self.is_rsu(id), x.from)
            .map(|(via, _)| via)
    }

    pub(super) fn reactive_route(&self, now: Duration) -> Option<(NodeId, NodeId)> {
        if let Some(r) = self.neighbors.rsu() {
            return Some((r, r));
        }
        self.routes
            .best_to(now, |d| self.is_rsu(d))
            .map(|(rsu, r)| (rsu, r.next_hop))
    }

    /// The neighbour predicted nearest an RSU, if nearer than we are, and
    /// not the one the bundle came from.
    pub(super) fn greedy_next(&self, now: Duration, except: Option<NodeId>) -> Option<NodeId> {
        let mine = self.rsu_distance(self.position(now));
        self.neighbors
            .iter()
            .filter(|(id, n)| !n.is_rsu && Some(*id) != except)
            .map(|(id, n)| (id, self.rsu_distance(n.predicted(now))))
            .filter(|(_, d)| *d < mine)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(id, _)| id)
    }

    pub(super) fn route_ave(&mut self, now: Duration, mut x: Held) -> Option<Held> {
        let m = x.h.strategy;
        let allowed = |n: u8| n <= m || (m == 3 && n == 4);
        let here = self.rsu_distance(self.position(now));
        // Carried bundles leave carry mode only after progress of d_th.
        let progressed = x.h.mark_m.is_none_or(|mark| here <= mark - self.cfg.d_th_m);
        let escalate_ok = m != 4 || progressed;
        // AVE keeps a bundle until the next hop acknowledges it: a hop that
        // fails (a neighbour no longer where its beacon said) goes back
        // through the decision without that neighbour.
        if allowed(1) {
            if let Some(to) = self.local(&x, progressed) {
                x.pending = Some(self.send_data(&x.h, to, Strategy::Local, true, 0));
                return Some(x);
            }
        }
        let recent_rsu = self
            .last_rsu_heard
            .is_some_and(|t| now.saturating_sub(t) <= self.cfg.t_max);
        if allowed(2) && escalate_ok && recent_rsu && !x.reactive_failed && x.h.hops < MAX_HOPS {
            if let Some((rsu, next)) = self.reactive_route(now) {
                x.h.rsu = rsu;
                self.routes.touch(now, rsu, self.cfg.route_timeout);
                x.pending = Some(self.send_data(&x.h, next, Strategy::Reactive, true, 0));
                return Some(x);
            }
            if self.discovery.is_none() {
                self.start_discovery(now, 0);
            }
            x.waiting = true;
            return Some(x);
        }
        if allowed(3) && escalate_ok {
            if let Some(to) = self
                .greedy_next(now, x.from)
                .filter(|_| x.h.hops < MAX_HOPS)
            {
                x.pending = Some(self.send_data(&x.h, to, Strategy::Geographic, true, 0));
                return Some(x);
            }
        }
        if allowed(4) {
            if x.h.strategy != 4 || x.h.mark_m.is_none() {
                // Entering carry mode: remember where.
                x.h.mark_m = Some(here);
                x.h.strategy = 4;
            } else if progressed {
                x.h.mark_m = Some(here);
                x.reactive_failed = false;
            }
            return self.carry(now, x);
        }
        // Nothing the loop rule allows works (the RSU a local hop aimed at
        // is gone, or the hop failed): carry it rather than drop it. Carry
        // cannot loop: custody moves only for 50 m of predicted progress,
        // and the mark keeps it in carry until d_th of real progress.
        x.h.strategy = 4;
        x.h.mark_m = Some(here);
        self.carry(now, x)
    }

    /// Store-carry-forward: hand custody to the neighbour predicted to be
    /// nearest an RSU after the horizon, if it beats us by the minimum gain.
    pub(super) fn carry(&mut self, now: Duration, mut x: Held) -> Option<Held> {
        let h = self.cfg.carry_horizon.as_secs_f64();
        let mine = self.rsu_distance(self.position(now).add_scaled(self.vel, h));
        if x.h.hops >= MAX_HOPS {
            return Some(x); // carried to the end: no more custody moves
        }
        let best = self
            .neighbors
            .iter()
            .filter(|(id, n)| !n.is_rsu && n.lists_us && Some(*id) != x.from)
            .map(|(id, n)| (id, self.rsu_distance(n.predicted(now).add_scaled(n.vel, h))))
            .filter(|(_, d)| *d + self.cfg.carry_min_gain_m <= mine)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((to, _)) = best {
            x.pending = Some(self.send_data(&x.h, to, Strategy::Carry, true, 0));
        }
        Some(x)
    }

    pub(super) fn route_dymo(&mut self, now: Duration, mut x: Held) -> Option<Held> {
        if let Some((rsu, next)) = self.reactive_route(now) {
            x.h.rsu = rsu;
            self.routes.touch(now, rsu, self.cfg.route_timeout);
            self.send_data(&x.h, next, Strategy::Reactive, false, 0);
            return None;
        }
        if x.h.hops > 0 {
            // An intermediate node that lost the route: DYMO would send a
            // route error; the bundle is lost either way.
            self.drop_bundle(&x.h, DropCause::NoRoute);
            return None;
        }
        if x.waiting {
            // Waiting bundles are re-examined by the periodic check only
            // through `drain_held`, which skips them.
            return Some(x);
        }
        if self.discovery.is_none() {
            self.start_discovery(now, 0);
        }
        x.waiting = true;
        Some(x)
    }

    pub(super) fn route_greedy(&mut self, now: Duration, x: Held) -> Option<Held> {
        let to = self
            .neighbors
            .rsu()
            .or_else(|| self.greedy_next(now, x.from));
        match to {
            Some(to) => {
                let s = if self.neighbors.rsu() == Some(to) {
                    Strategy::Local
                } else {
                    Strategy::Geographic
                };
                self.send_data(&x.h, to, s, false, 0);
            }
            None => self.drop_bundle(&x.h, DropCause::NoRoute),
        }
        None
    }

    /// Binary spray-and-wait: half the copies to each new contact while
    /// more than one is left, then only to an RSU.
    pub(super) fn route_spray(&mut self, _now: Duration, mut x: Held) -> Option<Held> {
        if x.pending.is_some() {
            return Some(x);
        }
        if let Some(rsu) = self.neighbors.rsu() {
            x.pending = Some(self.send_data(&x.h, rsu, Strategy::Local, true, 0));
            return Some(x);
        }
        if x.h.copies > 1 {
            let give = x.h.copies / 2;
            let to = self
                .neighbors
                .iter()
                .find(|(id, n)| !n.is_rsu && !x.sprayed_to.contains(id) && *id != x.h.origin)
                .map(|(id, _)| id);
            if let Some(to) = to {
                x.pending = Some(self.send_data(&x.h, to, Strategy::Carry, true, give));
            }
        }
        Some(x)
    }
}
