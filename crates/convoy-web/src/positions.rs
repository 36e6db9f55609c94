//! `/api/positions`: every vehicle's last position as GeoJSON points, the
//! map's most frequent query (each open page asks again whenever the
//! catalog changes).
//!
//! The document is written straight from the catalog's rows through
//! `Serialize` structs, not built as a `serde_json::Value` tree first: at
//! 1,000 vehicles the tree's maps, and their frees, were most of a
//! request's time (`convoy fleet bench --http-load`, under perf).
//!
//! Not cached: the catalog's version (`Catalog::version`) counts segments
//! and their newest index time, so two segments indexed within one clock
//! tick leave it unchanged; a document filed under it could be stale.

use serde::Serialize;

use crate::api::{Caller, Reply};
use crate::http::Shared;

#[derive(Serialize)]
struct Collection<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    features: Vec<Feature<'a>>,
}

#[derive(Serialize)]
struct Feature<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    geometry: Point,
    properties: Properties<'a>,
}

#[derive(Serialize)]
struct Point {
    #[serde(rename = "type")]
    kind: &'static str,
    coordinates: [f64; 2],
}

#[derive(Serialize)]
struct Properties<'a> {
    vehicle: &'a str,
    t_ns: i64,
    speed: Option<f64>,
}

fn render(last: &[convoy_catalog::LastState], who: &Caller) -> Result<Vec<u8>, String> {
    let features = last
        .iter()
        .filter(|l| who.may_see(&l.vehicle))
        .map(|l| Feature {
            kind: "Feature",
            geometry: Point {
                kind: "Point",
                coordinates: [l.lon, l.lat],
            },
            properties: Properties {
                vehicle: &l.vehicle,
                t_ns: l.t_ns,
                speed: l.speed,
            },
        })
        .collect();
    serde_json::to_vec(&Collection {
        kind: "FeatureCollection",
        features,
    })
    .map_err(|e| e.to_string())
}

pub(crate) fn positions(shared: &Shared, who: &Caller) -> Result<Reply, String> {
    let last = shared.pool.with(|c| c.last_states())?;
    Ok(Reply::Json(render(&last, who)?))
}
