//! `/api/positions`: every vehicle's last position as GeoJSON points, the
//! map's most frequent query (each open page asks again whenever the
//! catalog changes).
//!
//! The document is written straight from the catalog's rows through
//! `Serialize` structs, not built as a `serde_json::Value` tree first: at
//! 1,000 vehicles the tree's maps, and their frees, were most of a
//! request's time (`convoy fleet bench --http-load`, under perf).
//!
//! Cached per catalog version ([`Cache`]): the version is a counter the
//! catalog raises in the same transaction as every change
//! (`Catalog::version`), so a document filed under it is the document
//! until the version moves. A request costs the caller's registry lookup
//! and one read of the version, not the 1,000 rows and their JSON.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use convoy_catalog::LastState;
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

fn render(last: &[LastState], who: &Caller) -> Result<Vec<u8>, String> {
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

/// What a caller may see of the positions: a document is shared by the
/// callers with the same key (every unscoped operator; each vehicle).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Scope {
    operator: bool,
    /// The caller's name, for a vehicle (an operator's name changes
    /// nothing it sees).
    name: Option<String>,
    only: Option<String>,
}

impl Scope {
    fn of(who: &Caller) -> Scope {
        Scope {
            operator: who.operator,
            name: (!who.operator).then(|| who.name.clone()),
            only: who.only.clone(),
        }
    }
}

/// Documents kept at most for one version: a fleet's vehicles with room.
/// Past it the version's documents are dropped and made again.
const MAX_DOCUMENTS: usize = 4096;

/// The last states of one catalog version and the documents made from
/// them, per scope.
struct Entry {
    version: i64,
    rows: Arc<Vec<LastState>>,
    docs: HashMap<Scope, Bytes>,
}

/// `/api/positions` documents of the newest catalog version seen.
#[derive(Default)]
pub(crate) struct Cache {
    entry: Mutex<Option<Entry>>,
}

impl Cache {
    /// `who`'s document at catalog version `version`, made from `load`'s
    /// rows when this version's rows or `who`'s document are not kept.
    ///
    /// `version` must be read before `load` runs: the rows are then at
    /// least as new as the version they are filed under, never older, so
    /// a document is never staler than its version says.
    fn get(
        &self,
        version: i64,
        who: &Caller,
        load: impl FnOnce() -> Result<Vec<LastState>, String>,
    ) -> Result<Bytes, String> {
        let scope = Scope::of(who);
        let rows = {
            let entry = self.entry.lock().map_err(|_| "cache poisoned")?;
            match entry.as_ref().filter(|e| e.version == version) {
                Some(e) => match e.docs.get(&scope) {
                    Some(doc) => return Ok(doc.clone()),
                    None => Some(e.rows.clone()),
                },
                None => None,
            }
        };
        // Made outside the lock: other callers' hits do not wait for it.
        let rows = match rows {
            Some(r) => r,
            None => Arc::new(load()?),
        };
        let doc = Bytes::from(render(&rows, who)?);
        let mut entry = self.entry.lock().map_err(|_| "cache poisoned")?;
        match entry.as_mut() {
            Some(e) if e.version == version => {
                if e.docs.len() >= MAX_DOCUMENTS {
                    e.docs.clear();
                }
                e.docs.insert(scope, doc.clone());
            }
            // A slower request of an older version does not push out
            // what a newer one filed.
            Some(e) if e.version > version => {}
            _ => {
                *entry = Some(Entry {
                    version,
                    rows,
                    docs: HashMap::from([(scope, doc.clone())]),
                })
            }
        }
        Ok(doc)
    }
}

pub(crate) fn positions(shared: &Shared, who: &Caller) -> Result<Reply, String> {
    let version = shared.pool.with(|c| c.version())?;
    let doc = shared
        .positions
        .get(version, who, || shared.pool.with(|c| c.last_states()))?;
    Ok(Reply::Shared(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(vehicle: &str, lat: f64) -> LastState {
        LastState {
            vehicle: vehicle.into(),
            t_ns: 1,
            lat,
            lon: 7.0,
            speed: None,
            values: "{}".into(),
        }
    }

    fn caller(name: &str, operator: bool, only: Option<&str>) -> Caller {
        Caller {
            name: name.into(),
            operator,
            only: only.map(str::to_owned),
        }
    }

    /// The (vehicle, latitude) pairs of a document.
    fn points(doc: &Bytes) -> Vec<(String, f64)> {
        let v: serde_json::Value = serde_json::from_slice(doc).unwrap();
        v["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["properties"]["vehicle"].as_str().unwrap().to_owned(),
                    f["geometry"]["coordinates"][1].as_f64().unwrap(),
                )
            })
            .collect()
    }

    fn unused() -> Result<Vec<LastState>, String> {
        panic!("the catalog was asked again for a version already cached")
    }

    #[test]
    fn one_load_per_version_and_each_scope_sees_its_own() {
        let cache = Cache::default();
        let ops = caller("ops", true, None);
        let loads = std::cell::Cell::new(0);
        let v1 = || {
            loads.set(loads.get() + 1);
            Ok(vec![row("a", 45.0), row("b", 46.0)])
        };
        let all = cache.get(1, &ops, v1).unwrap();
        assert_eq!(points(&all), [("a".into(), 45.0), ("b".into(), 46.0)]);
        assert_eq!(loads.get(), 1);
        // Same version: neither another operator nor a vehicle reloads,
        // and each sees only what it may.
        let again = cache.get(1, &caller("ops2", true, None), unused).unwrap();
        assert_eq!(again, all);
        let b = cache.get(1, &caller("b", false, None), unused).unwrap();
        assert_eq!(points(&b), [("b".into(), 46.0)]);
        let only_a = cache.get(1, &caller("ops", true, Some("a")), unused);
        assert_eq!(points(&only_a.unwrap()), [("a".into(), 45.0)]);
        // A vehicle token scoped to another vehicle sees nothing.
        let odd = cache.get(1, &caller("b", false, Some("a")), unused);
        assert!(points(&odd.unwrap()).is_empty());
        // A new version (a new last state) is loaded again, for everyone.
        let v2 = || Ok(vec![row("a", 45.5), row("b", 46.0)]);
        let all2 = cache.get(2, &ops, v2).unwrap();
        assert_eq!(points(&all2)[0], ("a".into(), 45.5));
        let a2 = cache.get(2, &caller("a", false, None), unused).unwrap();
        assert_eq!(points(&a2), [("a".into(), 45.5)]);
        // A slow request of version 1 finishing late keeps version 2 filed.
        let old = cache.get(1, &caller("a", false, None), || Ok(vec![row("a", 45.0)]));
        assert_eq!(points(&old.unwrap()), [("a".into(), 45.0)]);
        assert_eq!(cache.get(2, &ops, unused).unwrap(), all2);
    }
}
