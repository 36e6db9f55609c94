//! The city "obstacle coefficient" of baguena-2017 §5.3.2 (SPEC S5): the
//! share of rays, cast from random points on the streets in random
//! directions, that reach a *different* street before hitting a building.
//! With the average street length it predicted flooding reachability
//! linearly across the cities of the paper (Moscow 0.55, Milan 0.48,
//! Paris 0.54, Moscow with synthetic street-only obstacles 0.20).
//!
//! The paper does not say how long a ray is; a ray that meets nothing
//! within radio range reaches no one, so rays here stop at `range_m`
//! (default 500 m: where the line-of-sight 802.11p channel still delivers
//! about half its frames). Points are spread uniformly over street length.

use crate::error::ModelError;
use crate::geom::{length, point_along, segment_crossing, BBox, Point};
use crate::rng::Rng;
use crate::shadowing::Buildings;
use crate::sumo::Network;

/// What the coefficient was computed from, and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct CityProfile {
    pub streets: usize,
    pub total_street_km: f64,
    pub mean_street_m: f64,
    pub buildings: usize,
    pub rays: usize,
    pub reached: usize,
    pub range_m: f64,
    /// reached / rays.
    pub obstacle_coefficient: f64,
    /// Binomial standard error of the coefficient.
    pub std_error: f64,
}

pub const DEFAULT_RANGE_M: f64 = 500.0;

pub fn city_profile(
    net: &Network,
    buildings: &Buildings,
    rays: usize,
    range_m: f64,
    seed: u64,
) -> Result<CityProfile, ModelError> {
    if net.streets.len() < 2 {
        return Err(ModelError::TooFew {
            what: "the obstacle coefficient (streets in the network)",
            min: 2,
            got: net.streets.len(),
        });
    }
    if rays == 0 {
        return Err(ModelError::TooFew {
            what: "the obstacle coefficient (rays)",
            min: 1,
            got: 0,
        });
    }
    if !(range_m.is_finite() && range_m > 0.0) {
        return Err(ModelError::NotPositive {
            what: "ray range",
            value: range_m,
        });
    }
    let lengths: Vec<f64> = net.streets.iter().map(|s| length(&s.shape)).collect();
    let boxes: Vec<BBox> = net.streets.iter().map(|s| BBox::of(&s.shape)).collect();
    let mut cumulative = Vec::with_capacity(lengths.len());
    let mut total = 0.0;
    for l in &lengths {
        total += l;
        cumulative.push(total);
    }
    let mut rng = Rng::new(seed);
    let mut reached = 0;
    for _ in 0..rays {
        let s = rng.uniform() * total;
        let i = cumulative
            .partition_point(|&c| c < s)
            .min(lengths.len() - 1);
        let along = s - (cumulative[i] - lengths[i]);
        let from = point_along(&net.streets[i].shape, along);
        let theta = rng.uniform() * std::f64::consts::TAU;
        let to = Point::new(
            from.x + range_m * theta.cos(),
            from.y + range_m * theta.sin(),
        );
        let wall = buildings.first_wall(from, to).unwrap_or(f64::INFINITY);
        let ray_box = BBox::of(&[from, to]);
        let mut street_hit = f64::INFINITY;
        for (j, st) in net.streets.iter().enumerate() {
            if j == i || !boxes[j].overlaps(&ray_box) {
                continue;
            }
            for w in st.shape.windows(2) {
                if let Some(t) = segment_crossing(from, to, w[0], w[1]) {
                    // Streets sharing the source's junction touch it at the
                    // junction point only; the ray starting there is not a
                    // crossing unless it leaves along them.
                    if t > 1e-9 {
                        street_hit = street_hit.min(t);
                    }
                }
            }
        }
        if street_hit < wall {
            reached += 1;
        }
    }
    let p = reached as f64 / rays as f64;
    Ok(CityProfile {
        streets: net.streets.len(),
        total_street_km: total / 1000.0,
        mean_street_m: total / net.streets.len() as f64,
        buildings: buildings.len(),
        rays,
        reached,
        range_m,
        obstacle_coefficient: p,
        std_error: (p * (1.0 - p) / rays as f64).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shadowing::{Building, ShadowingParams};
    use crate::sumo::Street;

    fn street(a: &str, b: &str, p: Point, q: Point) -> Street {
        Street {
            key: (a.into(), b.into()),
            shape: vec![p, q],
        }
    }

    /// Two parallel streets 100 m apart, long enough to look endless.
    fn two_streets() -> Network {
        Network {
            streets: vec![
                street("a", "b", Point::new(-1e5, 0.0), Point::new(1e5, 0.0)),
                street("c", "d", Point::new(-1e5, 100.0), Point::new(1e5, 100.0)),
            ],
        }
    }

    #[test]
    fn open_ground_reaches_the_other_street_half_the_time() {
        // With no buildings, a ray from the middle reaches the other street
        // when it heads towards it (half the directions) and is long enough.
        let p = city_profile(&two_streets(), &Buildings::default(), 20_000, 10_000.0, 1).unwrap();
        assert!(
            (p.obstacle_coefficient - 0.5).abs() < 0.02,
            "{}",
            p.obstacle_coefficient
        );
    }

    #[test]
    fn a_wall_between_streets_blocks_every_ray() {
        let wall = Building::new(
            "w",
            vec![
                Point::new(-2e5, 40.0),
                Point::new(2e5, 40.0),
                Point::new(2e5, 60.0),
                Point::new(-2e5, 60.0),
            ],
        );
        let b = Buildings::new(vec![wall], ShadowingParams::default());
        let p = city_profile(&two_streets(), &b, 2000, 10_000.0, 1).unwrap();
        assert_eq!(p.reached, 0);
    }

    #[test]
    fn needs_streets() {
        assert!(city_profile(&Network::default(), &Buildings::default(), 10, 500.0, 1).is_err());
    }
}
