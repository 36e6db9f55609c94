//! Buildings for 802.11p shadowing, indexed on a grid so a link looks only
//! at buildings near its line (convoy-models' `Buildings::shadow` scans
//! them all, fine for a trace, too slow for 10⁵ receptions a second).

use convoy_ave::Vec2;
use convoy_models::geom::contains;
use convoy_models::shadowing::{Building, ShadowingParams};
use convoy_models::Point;

const CELL_M: f64 = 100.0;

pub struct City {
    buildings: Vec<Building>,
    params: ShadowingParams,
    origin: Vec2,
    cols: usize,
    rows: usize,
    cells: Vec<Vec<u32>>,
    stamp: Vec<u32>,
    round: u32,
}

impl City {
    pub fn new(buildings: Vec<Building>) -> City {
        let params = ShadowingParams::default();
        if buildings.is_empty() {
            return City {
                buildings,
                params,
                origin: Vec2::default(),
                cols: 0,
                rows: 0,
                cells: vec![],
                stamp: vec![],
                round: 0,
            };
        }
        let (mut lo, mut hi) = (Vec2::new(f64::MAX, f64::MAX), Vec2::new(f64::MIN, f64::MIN));
        for b in &buildings {
            let bb = b.bbox();
            lo = Vec2::new(lo.x.min(bb.min.x), lo.y.min(bb.min.y));
            hi = Vec2::new(hi.x.max(bb.max.x), hi.y.max(bb.max.y));
        }
        let cols = ((hi.x - lo.x) / CELL_M).floor() as usize + 1;
        let rows = ((hi.y - lo.y) / CELL_M).floor() as usize + 1;
        let mut cells = vec![Vec::new(); cols * rows];
        for (i, b) in buildings.iter().enumerate() {
            let bb = b.bbox();
            let (c0, r0) = (
                ((bb.min.x - lo.x) / CELL_M) as usize,
                ((bb.min.y - lo.y) / CELL_M) as usize,
            );
            let (c1, r1) = (
                ((bb.max.x - lo.x) / CELL_M) as usize,
                ((bb.max.y - lo.y) / CELL_M) as usize,
            );
            for r in r0..=r1.min(rows - 1) {
                for c in c0..=c1.min(cols - 1) {
                    cells[r * cols + c].push(i as u32);
                }
            }
        }
        let n = buildings.len();
        City {
            buildings,
            params,
            origin: lo,
            cols,
            rows,
            cells,
            stamp: vec![0; n],
            round: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.buildings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buildings.is_empty()
    }

    /// Buildings of a synthetic grid city: one per block, set back from
    /// the street axes, as `convoy_lab.mobility.grid_buildings` writes.
    pub fn grid(blocks: u32, block_m: f64, setback_m: f64) -> City {
        let mut v = Vec::new();
        for i in 0..blocks {
            for j in 0..blocks {
                let (x0, y0) = (
                    f64::from(i) * block_m + setback_m,
                    f64::from(j) * block_m + setback_m,
                );
                let (x1, y1) = (
                    f64::from(i + 1) * block_m - setback_m,
                    f64::from(j + 1) * block_m - setback_m,
                );
                let ring = vec![
                    Point::new(x0, y0),
                    Point::new(x1, y0),
                    Point::new(x1, y1),
                    Point::new(x0, y1),
                    Point::new(x0, y0),
                ];
                v.push(Building::new(format!("b{i}_{j}"), ring));
            }
        }
        City::new(v)
    }

    /// Sommer et al.'s obstacle loss in dB on the line a → b.
    pub fn shadow_db(&mut self, a: Vec2, b: Vec2) -> f64 {
        if self.buildings.is_empty() {
            return 0.0;
        }
        self.round = self.round.wrapping_add(1);
        if self.round == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.round = 1;
        }
        let (pa, pb) = (Point::new(a.x, a.y), Point::new(b.x, b.y));
        let len = a.dist(b);
        let (mut walls, mut inside_m) = (0u32, 0.0);
        // Walk the cells the segment's bounding box covers (segments are at
        // most a radio range long, so the box is a few cells).
        let c0 = (((a.x.min(b.x) - self.origin.x) / CELL_M).floor().max(0.0)) as usize;
        let c1 = (((a.x.max(b.x) - self.origin.x) / CELL_M).floor().max(0.0)) as usize;
        let r0 = (((a.y.min(b.y) - self.origin.y) / CELL_M).floor().max(0.0)) as usize;
        let r1 = (((a.y.max(b.y) - self.origin.y) / CELL_M).floor().max(0.0)) as usize;
        for r in r0..=r1.min(self.rows - 1) {
            for c in c0..=c1.min(self.cols - 1) {
                if !segment_touches_cell(a, b, self.origin, c, r) {
                    continue;
                }
                for &i in &self.cells[r * self.cols + c] {
                    if self.stamp[i as usize] == self.round {
                        continue;
                    }
                    self.stamp[i as usize] = self.round;
                    let bld = &self.buildings[i as usize];
                    let ts = bld.crossings(pa, pb);
                    let mut inside = contains(&bld.ring, pa);
                    if ts.is_empty() && !inside {
                        continue;
                    }
                    walls += ts.len() as u32;
                    let mut last = 0.0;
                    for &t in ts.iter().chain(std::iter::once(&1.0)) {
                        if inside {
                            inside_m += (t - last) * len;
                        }
                        inside = !inside;
                        last = t;
                    }
                }
            }
        }
        self.params.db_per_wall * f64::from(walls) + self.params.db_per_metre * inside_m
    }
}

/// Whether segment a–b passes through grid cell (c, r): a separating-axis
/// test against the cell's box.
fn segment_touches_cell(a: Vec2, b: Vec2, origin: Vec2, c: usize, r: usize) -> bool {
    let x0 = origin.x + c as f64 * CELL_M;
    let y0 = origin.y + r as f64 * CELL_M;
    let (x1, y1) = (x0 + CELL_M, y0 + CELL_M);
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    let side = |x: f64, y: f64| dx * (y - a.y) - dy * (x - a.x);
    let s = [side(x0, y0), side(x1, y0), side(x0, y1), side(x1, y1)];
    !(s.iter().all(|v| *v > 0.0) || s.iter().all(|v| *v < 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use convoy_models::shadowing::Buildings;

    #[test]
    fn index_agrees_with_the_full_scan() {
        let mut city = City::grid(6, 200.0, 12.0);
        let full = Buildings::new(city.buildings.clone(), ShadowingParams::default());
        let mut rng = convoy_models::Rng::new(3);
        for _ in 0..500 {
            let a = Vec2::new(rng.uniform_in(-50.0, 1250.0), rng.uniform_in(-50.0, 1250.0));
            let b = Vec2::new(
                a.x + rng.uniform_in(-600.0, 600.0),
                a.y + rng.uniform_in(-600.0, 600.0),
            );
            let want = full.shadow(Point::new(a.x, a.y), Point::new(b.x, b.y)).db;
            let got = city.shadow_db(a, b);
            assert!((want - got).abs() < 1e-9, "{a:?} {b:?}: {want} vs {got}");
        }
    }
}
