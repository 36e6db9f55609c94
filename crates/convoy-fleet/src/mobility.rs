//! Vehicle motion, precomputed: a SUMO FCD file streamed step by step
//! (never SUMO itself inside the run), or a built-in Manhattan grid for
//! benchmarks and tests that need no SUMO. Between steps a vehicle moves on
//! the straight line to its next position (its velocity).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use convoy_ave::Vec2;
use convoy_models::sumo::{FcdReader, FcdStep};
use convoy_models::Rng;

use crate::events::{Nanos, SEC};
use crate::scenario::GridSpec;

/// What is known of a vehicle before the run: its FCD id, and where its
/// trip ends (the DESTINATION of its beacons).
#[derive(Clone, Debug)]
pub struct VehicleInfo {
    pub key: String,
    pub destination: Option<Vec2>,
}

/// Every vehicle on the map at one instant: (index, position, velocity).
#[derive(Clone, Debug, Default)]
pub struct Step {
    pub t: Nanos,
    pub moves: Vec<(u32, Vec2, Vec2)>,
}

pub enum Mobility {
    Fcd(Box<FcdMobility>),
    Grid(GridMobility),
}

impl Mobility {
    pub fn vehicles(&self) -> &[VehicleInfo] {
        match self {
            Mobility::Fcd(f) => &f.vehicles,
            Mobility::Grid(g) => &g.vehicles,
        }
    }

    pub fn next_step(&mut self) -> Result<Option<Step>, String> {
        match self {
            Mobility::Fcd(f) => f.next_step(),
            Mobility::Grid(g) => Ok(Some(g.next_step())),
        }
    }

    /// The map's extent (for the spatial index), from what was seen.
    pub fn bounds(&self) -> (Vec2, Vec2) {
        match self {
            Mobility::Fcd(f) => (f.min, f.max),
            Mobility::Grid(g) => (Vec2::new(0.0, 0.0), Vec2::new(g.side, g.side)),
        }
    }
}

pub struct FcdMobility {
    path: PathBuf,
    vehicles: Vec<VehicleInfo>,
    index: HashMap<String, u32>,
    reader: FcdReader<BufReader<File>>,
    ahead: Option<FcdStep>,
    min: Vec2,
    max: Vec2,
}

fn open(path: &Path) -> Result<FcdReader<BufReader<File>>, String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(FcdReader::new(
        BufReader::new(f),
        path.display().to_string(),
    ))
}

impl FcdMobility {
    /// Reads the file once to number the vehicles (in order of first
    /// appearance) and find where each trip ends, then rewinds to stream it.
    pub fn open(path: &Path) -> Result<FcdMobility, String> {
        let mut r = open(path)?;
        let mut vehicles: Vec<VehicleInfo> = Vec::new();
        let mut index: HashMap<String, u32> = HashMap::new();
        let (mut min, mut max) = (Vec2::new(f64::MAX, f64::MAX), Vec2::new(f64::MIN, f64::MIN));
        while let Some(step) = r.next_step().map_err(|e| e.to_string())? {
            for v in step.vehicles {
                let p = Vec2::new(v.pos.x, v.pos.y);
                min = Vec2::new(min.x.min(p.x), min.y.min(p.y));
                max = Vec2::new(max.x.max(p.x), max.y.max(p.y));
                let i = *index.entry(v.id.clone()).or_insert_with(|| {
                    vehicles.push(VehicleInfo {
                        key: v.id.clone(),
                        destination: None,
                    });
                    (vehicles.len() - 1) as u32
                });
                vehicles[i as usize].destination = Some(p);
            }
        }
        if vehicles.is_empty() {
            return Err(format!("{}: no vehicle in the FCD file", path.display()));
        }
        let mut reader = open(path)?;
        let ahead = reader.next_step().map_err(|e| e.to_string())?;
        Ok(FcdMobility {
            path: path.to_path_buf(),
            vehicles,
            index,
            reader,
            ahead,
            min,
            max,
        })
    }

    fn next_step(&mut self) -> Result<Option<Step>, String> {
        let Some(cur) = self.ahead.take() else {
            return Ok(None);
        };
        self.ahead = self.reader.next_step().map_err(|e| e.to_string())?;
        let t = (cur.time_s * SEC as f64).round() as Nanos;
        let mut next: HashMap<&str, Vec2> = HashMap::new();
        let mut dt = 1.0;
        if let Some(a) = &self.ahead {
            dt = (a.time_s - cur.time_s).max(1e-3);
            for v in &a.vehicles {
                next.insert(v.id.as_str(), Vec2::new(v.pos.x, v.pos.y));
            }
        }
        let mut moves = Vec::with_capacity(cur.vehicles.len());
        for v in &cur.vehicles {
            let Some(&i) = self.index.get(&v.id) else {
                return Err(format!(
                    "{}: vehicle {} changed between reads",
                    self.path.display(),
                    v.id
                ));
            };
            let p = Vec2::new(v.pos.x, v.pos.y);
            let vel = next
                .get(v.id.as_str())
                .map(|q| Vec2::new((q.x - p.x) / dt, (q.y - p.y) / dt))
                .unwrap_or_default();
            moves.push((i, p, vel));
        }
        moves.sort_by_key(|m| m.0);
        Ok(Some(Step { t, moves }))
    }
}

/// Vehicles driving a Manhattan grid at constant speed, turning at random
/// at every junction (straight 1/2, left 1/4, right 1/4; back at the edge).
pub struct GridMobility {
    vehicles: Vec<VehicleInfo>,
    blocks: u32,
    block_m: f64,
    side: f64,
    cars: Vec<GridCar>,
    t: Nanos,
    rng: Rng,
}

#[derive(Clone, Copy)]
struct GridCar {
    /// The junction it left and its heading (0 E, 1 N, 2 W, 3 S).
    from: (u32, u32),
    heading: u8,
    /// Metres travelled from `from`.
    along: f64,
    speed: f64,
}

const DIRS: [(i64, i64); 4] = [(1, 0), (0, 1), (-1, 0), (0, -1)];

impl GridMobility {
    pub fn new(spec: &GridSpec, seed: u64) -> GridMobility {
        let mut rng = Rng::fork(seed, "grid-mobility");
        let n = spec.blocks;
        let mut cars = Vec::with_capacity(spec.vehicles as usize);
        let mut vehicles = Vec::with_capacity(spec.vehicles as usize);
        for i in 0..spec.vehicles {
            let from = (
                (rng.uniform() * f64::from(n + 1)) as u32 % (n + 1),
                (rng.uniform() * f64::from(n + 1)) as u32 % (n + 1),
            );
            let mut car = GridCar {
                from,
                heading: (rng.uniform() * 4.0) as u8 % 4,
                along: rng.uniform() * spec.block_m,
                speed: spec.speed_mps * rng.uniform_in(0.8, 1.2),
            };
            fix_heading(&mut car, n, &mut rng);
            cars.push(car);
            vehicles.push(VehicleInfo {
                key: format!("v{i}"),
                destination: None,
            });
        }
        GridMobility {
            vehicles,
            blocks: n,
            block_m: spec.block_m,
            side: f64::from(n) * spec.block_m,
            cars,
            t: 0,
            rng,
        }
    }

    fn pos(&self, c: &GridCar) -> Vec2 {
        let (dx, dy) = DIRS[c.heading as usize];
        Vec2::new(
            f64::from(c.from.0) * self.block_m + dx as f64 * c.along,
            f64::from(c.from.1) * self.block_m + dy as f64 * c.along,
        )
    }

    fn next_step(&mut self) -> Step {
        let mut moves = Vec::with_capacity(self.cars.len());
        for (i, c) in self.cars.iter().enumerate() {
            let (dx, dy) = DIRS[c.heading as usize];
            moves.push((
                i as u32,
                self.pos(c),
                Vec2::new(dx as f64 * c.speed, dy as f64 * c.speed),
            ));
        }
        let step = Step { t: self.t, moves };
        // Advance one second; a junction passed picks a new heading.
        let n = self.blocks;
        for c in &mut self.cars {
            c.along += c.speed;
            while c.along >= self.block_m {
                c.along -= self.block_m;
                let (dx, dy) = DIRS[c.heading as usize];
                c.from = ((c.from.0 as i64 + dx) as u32, (c.from.1 as i64 + dy) as u32);
                let r = self.rng.uniform();
                c.heading = match r {
                    r if r < 0.5 => c.heading,
                    r if r < 0.75 => (c.heading + 1) % 4,
                    _ => (c.heading + 3) % 4,
                };
                fix_heading(c, n, &mut self.rng);
            }
        }
        self.t += SEC;
        step
    }
}

/// Turns a car that would leave the grid onto a street that stays in it.
fn fix_heading(c: &mut GridCar, n: u32, rng: &mut Rng) {
    let ok = |h: u8| {
        let (dx, dy) = DIRS[h as usize];
        let x = c.from.0 as i64 + dx;
        let y = c.from.1 as i64 + dy;
        (0..=n as i64).contains(&x) && (0..=n as i64).contains(&y)
    };
    if ok(c.heading) {
        return;
    }
    let start = (rng.uniform() * 4.0) as u8 % 4;
    for k in 0..4 {
        let h = (start + k) % 4;
        if ok(h) {
            c.heading = h;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_cars_stay_on_the_map_and_on_streets() {
        let spec = GridSpec {
            blocks: 3,
            block_m: 100.0,
            vehicles: 20,
            speed_mps: 13.0,
            buildings: false,
        };
        let mut g = GridMobility::new(&spec, 1);
        for _ in 0..300 {
            let s = g.next_step();
            for (_, p, _) in s.moves {
                assert!(
                    (-1e-6..=300.0 + 1e-6).contains(&p.x) && (-1e-6..=300.0 + 1e-6).contains(&p.y)
                );
                let on_street = (p.x / 100.0 - (p.x / 100.0).round()).abs() < 1e-6
                    || (p.y / 100.0 - (p.y / 100.0).round()).abs() < 1e-6;
                assert!(on_street, "{p:?}");
            }
        }
    }
}
