//! Plane geometry in SUMO's network coordinates (metres, x east, y north).

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

impl Point {
    pub const fn new(x: f64, y: f64) -> Point {
        Point { x, y }
    }

    pub fn dist(self, o: Point) -> f64 {
        (self.x - o.x).hypot(self.y - o.y)
    }

    /// The point a fraction `t` of the way to `o`.
    pub fn lerp(self, o: Point, t: f64) -> Point {
        Point::new(self.x + (o.x - self.x) * t, self.y + (o.y - self.y) * t)
    }
}

/// Axis-aligned bounding box, for cheap rejection before exact tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BBox {
    pub min: Point,
    pub max: Point,
}

impl BBox {
    pub fn of(points: &[Point]) -> BBox {
        let mut b = BBox {
            min: Point::new(f64::INFINITY, f64::INFINITY),
            max: Point::new(f64::NEG_INFINITY, f64::NEG_INFINITY),
        };
        for p in points {
            b.min.x = b.min.x.min(p.x);
            b.min.y = b.min.y.min(p.y);
            b.max.x = b.max.x.max(p.x);
            b.max.y = b.max.y.max(p.y);
        }
        b
    }

    pub fn overlaps(&self, o: &BBox) -> bool {
        self.min.x <= o.max.x
            && o.min.x <= self.max.x
            && self.min.y <= o.max.y
            && o.min.y <= self.max.y
    }
}

/// Where segment a→b crosses segment c→d, as the fraction t ∈ [0, 1] along
/// a→b; `None` when they do not cross or are parallel (a grazing parallel
/// overlap is not a wall crossing).
pub fn segment_crossing(a: Point, b: Point, c: Point, d: Point) -> Option<f64> {
    let r = (b.x - a.x, b.y - a.y);
    let s = (d.x - c.x, d.y - c.y);
    let denom = r.0 * s.1 - r.1 * s.0;
    if denom.abs() < 1e-12 {
        return None;
    }
    let q = (c.x - a.x, c.y - a.y);
    let t = (q.0 * s.1 - q.1 * s.0) / denom;
    let u = (q.0 * r.1 - q.1 * r.0) / denom;
    if (0.0..=1.0).contains(&t) && (0.0..=1.0).contains(&u) {
        Some(t)
    } else {
        None
    }
}

/// Even–odd point-in-polygon test (the ring is closed implicitly).
pub fn contains(ring: &[Point], p: Point) -> bool {
    let mut inside = false;
    let n = ring.len();
    let mut j = n.wrapping_sub(1);
    for i in 0..n {
        let (a, b) = (ring[i], ring[j]);
        if (a.y > p.y) != (b.y > p.y) && p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x {
            inside = !inside;
        }
        j = i;
    }
    inside
}

/// Length of a polyline.
pub fn length(line: &[Point]) -> f64 {
    line.windows(2).map(|w| w[0].dist(w[1])).sum()
}

/// The point at `s` metres along a polyline (clamped to its ends).
pub fn point_along(line: &[Point], mut s: f64) -> Point {
    for w in line.windows(2) {
        let l = w[0].dist(w[1]);
        if s <= l && l > 0.0 {
            return w[0].lerp(w[1], s / l);
        }
        s -= l;
    }
    *line.last().expect("non-empty polyline")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossing_and_containment() {
        let t = segment_crossing(
            Point::new(0.0, 0.0),
            Point::new(10.0, 0.0),
            Point::new(4.0, -1.0),
            Point::new(4.0, 1.0),
        );
        assert_eq!(t, Some(0.4));
        let square = [
            Point::new(0.0, 0.0),
            Point::new(2.0, 0.0),
            Point::new(2.0, 2.0),
            Point::new(0.0, 2.0),
        ];
        assert!(contains(&square, Point::new(1.0, 1.0)));
        assert!(!contains(&square, Point::new(3.0, 1.0)));
        assert_eq!(point_along(&square[..3], 3.0), Point::new(2.0, 1.0));
    }
}
