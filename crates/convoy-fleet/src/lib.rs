//! convoy-fleet: a deterministic discrete-event simulator of a city's
//! worth of vehicles running convoy's own code in virtual time: AVE routers
//! (convoy-ave) over a shared 802.11p medium, convoy-proto endpoints
//! uploading over shared LTE cells, edge requests and clustered awareness
//! messages, on mobility precomputed by SUMO (FCD) or a built-in grid, with
//! the channel models of convoy-models. A run is a function of its scenario
//! and seed; it writes CSV records and a summary (docs/SIM.md).

pub mod apps;
pub mod bench;
pub mod city;
pub mod events;
pub mod lte;
pub mod mobility;
pub mod packet;
pub mod records;
pub mod scenario;
pub mod space;
pub mod wave;
pub mod world;

use std::path::Path;

pub use records::Summary;
pub use scenario::{Scenario, ScenarioError};
pub use world::World;

use city::City;
use mobility::{FcdMobility, GridMobility, Mobility};

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("{0}")]
    Setup(String),
    #[error("writing records: {0}")]
    Io(#[from] std::io::Error),
}

/// Builds the world of a scenario: mobility, buildings, nodes and apps.
pub fn build(sc: Scenario, seed: u64) -> Result<World, FleetError> {
    let mob = match (&sc.mobility.fcd, &sc.mobility.grid) {
        (Some(f), _) => Mobility::Fcd(Box::new(
            FcdMobility::open(&sc.resolve(f)).map_err(FleetError::Setup)?,
        )),
        (None, Some(g)) => Mobility::Grid(GridMobility::new(g, seed)),
        (None, None) => return Err(FleetError::Setup("no mobility".into())),
    };
    let city = match (&sc.mobility.buildings, &sc.mobility.grid) {
        (Some(p), _) => {
            let path = sc.resolve(p);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| FleetError::Setup(format!("{}: {e}", path.display())))?;
            let polys = convoy_models::sumo::parse_polys(&text, &path.display().to_string())
                .map_err(|e| FleetError::Setup(e.to_string()))?;
            City::new(
                polys
                    .iter()
                    .filter(|p| p.kind.contains("building"))
                    .map(|p| p.to_building())
                    .collect(),
            )
        }
        (None, Some(g)) if g.buildings => City::grid(g.blocks, g.block_m, 12.0),
        _ => City::new(Vec::new()),
    };
    World::new(sc, seed, mob, city).map_err(FleetError::Setup)
}

/// What a finished run produced.
pub struct Outcome {
    pub summary: Summary,
    pub tables: Vec<(&'static str, String)>,
    pub events: u64,
}

/// Runs a scenario with a seed; writes the records into `out` if given.
/// `progress(now, end)` is called every 10 s of virtual time.
pub fn run(
    sc: Scenario,
    seed: u64,
    out: Option<&Path>,
    progress: impl FnMut(u64, u64),
) -> Result<Outcome, FleetError> {
    let mut w = build(sc, seed)?;
    let events = w.run(progress).map_err(FleetError::Setup)?;
    let tables = records::tables(&w);
    let summary = records::summarize(&w, events, &tables);
    if let Some(dir) = out {
        records::write(dir, &tables, &summary)?;
    }
    Ok(Outcome {
        summary,
        tables,
        events,
    })
}
