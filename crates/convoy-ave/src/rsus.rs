//! The RSUs every router knows a priori (AVE's context table): their
//! addresses, sorted for lookup, and a grid of their positions so "how far
//! is the nearest RSU" costs a few cells, not a scan of every RSU. Shared
//! between all routers of a simulation (`Arc`).

use crate::{NodeId, Vec2};

pub struct RsuTable {
    ids: Vec<NodeId>,
    at: Vec<(NodeId, Vec2)>,
    cell: f64,
    origin: Vec2,
    cols: usize,
    rows: usize,
    cells: Vec<Vec<Vec2>>,
}

impl RsuTable {
    pub fn new(rsus: Vec<(NodeId, Vec2)>) -> RsuTable {
        let mut ids: Vec<NodeId> = rsus.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        let (mut lo, mut hi) = (Vec2::new(f64::MAX, f64::MAX), Vec2::new(f64::MIN, f64::MIN));
        for (_, p) in &rsus {
            lo = Vec2::new(lo.x.min(p.x), lo.y.min(p.y));
            hi = Vec2::new(hi.x.max(p.x), hi.y.max(p.y));
        }
        if rsus.is_empty() {
            lo = Vec2::default();
            hi = Vec2::default();
        }
        let cell = 500.0;
        let cols = ((hi.x - lo.x) / cell).floor() as usize + 1;
        let rows = ((hi.y - lo.y) / cell).floor() as usize + 1;
        let mut cells = vec![Vec::new(); cols * rows];
        for (_, p) in &rsus {
            let c = ((p.x - lo.x) / cell) as usize;
            let r = ((p.y - lo.y) / cell) as usize;
            cells[r * cols + c].push(*p);
        }
        RsuTable {
            ids,
            at: rsus,
            cell,
            origin: lo,
            cols,
            rows,
            cells,
        }
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.ids.binary_search(&id).is_ok()
    }

    pub fn all(&self) -> &[(NodeId, Vec2)] {
        &self.at
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Distance from `p` to the nearest RSU (∞ with none): rings of cells
    /// outward from p's cell until no unvisited cell can hold a nearer one.
    pub fn nearest_distance(&self, p: Vec2) -> f64 {
        if self.at.is_empty() {
            return f64::INFINITY;
        }
        let cx = ((p.x - self.origin.x) / self.cell).floor() as i64;
        let cy = ((p.y - self.origin.y) / self.cell).floor() as i64;
        let mut best = f64::INFINITY;
        let max_ring = (self.cols.max(self.rows) as i64) + cx.abs().max(cy.abs()) + 1;
        for ring in 0..=max_ring {
            // Any cell of this ring is at least (ring − 1) cells away.
            if (ring - 1) as f64 * self.cell > best {
                break;
            }
            for dy in -ring..=ring {
                for dx in -ring..=ring {
                    if dx.abs() != ring && dy.abs() != ring {
                        continue;
                    }
                    let (x, y) = (cx + dx, cy + dy);
                    if x < 0 || y < 0 || x >= self.cols as i64 || y >= self.rows as i64 {
                        continue;
                    }
                    for q in &self.cells[y as usize * self.cols + x as usize] {
                        best = best.min(p.dist(*q));
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_agrees_with_a_scan() {
        let mut rsus = Vec::new();
        let mut s: u64 = 7;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        for i in 0..40 {
            rsus.push((i, Vec2::new(next() * 8000.0, next() * 3000.0)));
        }
        let t = RsuTable::new(rsus.clone());
        for _ in 0..2000 {
            let p = Vec2::new(next() * 12000.0 - 2000.0, next() * 7000.0 - 2000.0);
            let want = rsus
                .iter()
                .map(|(_, q)| p.dist(*q))
                .fold(f64::INFINITY, f64::min);
            assert!((t.nearest_distance(p) - want).abs() < 1e-9);
        }
        assert!(t.contains(5) && !t.contains(99));
    }
}
