//! Building shadowing after Sommer et al. (WONS 2011): a signal crossing a
//! building loses a fixed amount per wall it passes through and a further
//! amount per metre it travels inside,
//!
//! ```text
//! L_obs = β·n + γ·d_m      [dB]
//! ```
//!
//! with n the number of walls (polygon edges) the line of sight crosses and
//! d_m the metres of it inside buildings. β = 9 dB per wall and γ = 0.4 dB/m
//! are the values Sommer et al. fitted to 802.11p measurements at 5.9 GHz
//! (and Veins ships as its default), so they are the defaults here.

use crate::geom::{contains, segment_crossing, BBox, Point};

/// Sommer et al.'s two coefficients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShadowingParams {
    /// β: attenuation per wall crossed, dB.
    pub db_per_wall: f64,
    /// γ: attenuation per metre inside a building, dB/m.
    pub db_per_metre: f64,
}

impl Default for ShadowingParams {
    fn default() -> Self {
        ShadowingParams {
            db_per_wall: 9.0,
            db_per_metre: 0.4,
        }
    }
}

/// One obstacle: a closed polygon (SUMO `<poly>`).
#[derive(Clone, Debug, PartialEq)]
pub struct Building {
    pub id: String,
    pub ring: Vec<Point>,
    bbox: BBox,
}

impl Building {
    pub fn new(id: impl Into<String>, mut ring: Vec<Point>) -> Building {
        // SUMO closes polygons by repeating the first point; the ring here is
        // closed implicitly, so a repeated point would count as a zero-length wall.
        if ring.len() > 1 && ring.first() == ring.last() {
            ring.pop();
        }
        let bbox = BBox::of(&ring);
        Building {
            id: id.into(),
            ring,
            bbox,
        }
    }

    pub fn bbox(&self) -> BBox {
        self.bbox
    }

    /// Fractions along a→b where the segment crosses this building's walls,
    /// sorted.
    pub fn crossings(&self, a: Point, b: Point) -> Vec<f64> {
        let n = self.ring.len();
        let mut ts = Vec::new();
        if n < 3 {
            return ts;
        }
        for i in 0..n {
            if let Some(t) = segment_crossing(a, b, self.ring[i], self.ring[(i + 1) % n]) {
                ts.push(t);
            }
        }
        ts.sort_by(f64::total_cmp);
        // A line through a vertex meets both walls there: one crossing.
        ts.dedup_by(|x, y| (*x - *y).abs() < 1e-9);
        ts
    }
}

/// What lies between two points.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shadow {
    pub walls: u32,
    pub metres_inside: f64,
    pub db: f64,
}

/// A set of buildings and the coefficients that turn them into loss.
#[derive(Clone, Debug, Default)]
pub struct Buildings {
    buildings: Vec<Building>,
    pub params: ShadowingParams,
}

impl Buildings {
    pub fn new(buildings: Vec<Building>, params: ShadowingParams) -> Buildings {
        Buildings { buildings, params }
    }

    pub fn len(&self) -> usize {
        self.buildings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buildings.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Building> {
        self.buildings.iter()
    }

    /// Walls crossed and metres inside on the straight line a→b, and the
    /// resulting loss.
    pub fn shadow(&self, a: Point, b: Point) -> Shadow {
        let seg = BBox::of(&[a, b]);
        let len = a.dist(b);
        let mut out = Shadow::default();
        for bld in &self.buildings {
            if !bld.bbox.overlaps(&seg) {
                continue;
            }
            let ts = bld.crossings(a, b);
            let start_inside = contains(&bld.ring, a);
            if ts.is_empty() && !start_inside {
                continue;
            }
            out.walls += ts.len() as u32;
            // Inside and outside alternate at every wall, starting from
            // where `a` is; sum the inside stretches.
            let mut inside = start_inside;
            let mut last = 0.0;
            for &t in ts.iter().chain(std::iter::once(&1.0)) {
                if inside {
                    out.metres_inside += (t - last) * len;
                }
                inside = !inside;
                last = t;
            }
        }
        out.db = self.params.db_per_wall * f64::from(out.walls)
            + self.params.db_per_metre * out.metres_inside;
        out
    }

    /// Fraction along a→b of the first wall crossed, if any (for ray casting).
    pub fn first_wall(&self, a: Point, b: Point) -> Option<f64> {
        let seg = BBox::of(&[a, b]);
        let mut best: Option<f64> = None;
        for bld in &self.buildings {
            if !bld.bbox.overlaps(&seg) {
                continue;
            }
            if contains(&bld.ring, a) {
                return Some(0.0);
            }
            if let Some(&t) = bld.crossings(a, b).first() {
                best = Some(best.map_or(t, |b: f64| b.min(t)));
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square(x0: f64, y0: f64, side: f64) -> Building {
        Building::new(
            "b",
            vec![
                Point::new(x0, y0),
                Point::new(x0 + side, y0),
                Point::new(x0 + side, y0 + side),
                Point::new(x0, y0 + side),
                Point::new(x0, y0),
            ],
        )
    }

    #[test]
    fn straight_through_one_building() {
        let b = Buildings::new(vec![square(10.0, -5.0, 20.0)], ShadowingParams::default());
        let s = b.shadow(Point::new(0.0, 0.0), Point::new(50.0, 0.0));
        assert_eq!(s.walls, 2);
        assert!((s.metres_inside - 20.0).abs() < 1e-9);
        assert!((s.db - (2.0 * 9.0 + 20.0 * 0.4)).abs() < 1e-9);
    }

    #[test]
    fn from_inside_counts_one_wall() {
        let b = Buildings::new(vec![square(0.0, 0.0, 10.0)], ShadowingParams::default());
        let s = b.shadow(Point::new(5.0, 5.0), Point::new(25.0, 5.0));
        assert_eq!(s.walls, 1);
        assert!((s.metres_inside - 5.0).abs() < 1e-9);
    }

    #[test]
    fn clear_line_has_no_loss() {
        let b = Buildings::new(vec![square(10.0, 10.0, 5.0)], ShadowingParams::default());
        assert_eq!(
            b.shadow(Point::new(0.0, 0.0), Point::new(50.0, 0.0)),
            Shadow::default()
        );
        assert_eq!(
            b.first_wall(Point::new(0.0, 0.0), Point::new(50.0, 0.0)),
            None
        );
        let t = b
            .first_wall(Point::new(0.0, 12.0), Point::new(50.0, 12.0))
            .unwrap();
        assert!((t - 0.2).abs() < 1e-12);
    }
}
