//! One pass over a telemetry segment: the columns for Parquet, the time
//! range, the newest position and values (last state), and a track
//! downsampled to one point per bucket.
//!
//! A position fix is a latitude and a longitude with the same timestamp
//! (VSS keeps them as two signals); the speed attached to a fix is the
//! newest `Vehicle.Speed` at or before it.

use std::collections::HashMap;

use convoy_catalog::{LastState, TrackPoint, TRACK_BUCKET_NS};
use convoy_telemetry::segment::{SegmentError, SegmentReader, ValueRef};
pub use convoy_telemetry::utc_date;
use convoy_telemetry::{LATITUDE, LONGITUDE, SPEED};

/// Columns of the samples, in segment order; paths are interned (a
/// segment repeats a handful of names), `path[i]` indexes `paths`.
#[derive(Default)]
pub struct Columns {
    pub t_ns: Vec<i64>,
    pub path: Vec<u32>,
    pub paths: Vec<String>,
    pub value: Vec<Option<f64>>,
    pub text: Vec<Option<String>>,
}

/// What one segment holds.
#[derive(Default)]
pub struct Extracted {
    pub columns: Columns,
    pub t_first: Option<i64>,
    pub t_last: Option<i64>,
    pub last: Option<LastState>,
    pub track: Vec<TrackPoint>,
}

#[derive(Default)]
struct Fix {
    t: i64,
    lat: Option<f64>,
    lon: Option<f64>,
}

/// Reads every sample of `seg` for `vehicle`.
pub fn extract(vehicle: &str, seg: &SegmentReader) -> Result<Extracted, SegmentError> {
    let mut out = Extracted::default();
    let mut fix = Fix::default();
    let mut speed: Option<f64> = None;
    // Per interned path: the time and row of its newest sample.
    let mut newest: Vec<(i64, usize)> = Vec::new();
    let mut index: HashMap<String, u32> = HashMap::new();
    let mut last_bucket = i64::MIN;
    let mut best: Option<TrackPoint> = None;
    seg.for_each(|l| {
        let c = &mut out.columns;
        let row = c.t_ns.len();
        let p = match index.get(l.path) {
            Some(&p) => p,
            None => {
                let p = c.paths.len() as u32;
                c.paths.push(l.path.to_owned());
                index.insert(l.path.to_owned(), p);
                newest.push((i64::MIN, 0));
                p
            }
        };
        c.t_ns.push(l.t_ns);
        c.path.push(p);
        let num = match &l.value {
            ValueRef::Number(x) => Some(*x),
            ValueRef::Bool(b) => Some(f64::from(u8::from(*b))),
            ValueRef::Text(_) => None,
        };
        c.value.push(num);
        c.text.push(match &l.value {
            ValueRef::Text(s) => Some(s.to_string()),
            _ => None,
        });
        out.t_first = Some(out.t_first.map_or(l.t_ns, |t| t.min(l.t_ns)));
        out.t_last = Some(out.t_last.map_or(l.t_ns, |t| t.max(l.t_ns)));
        let slot = &mut newest[p as usize];
        if slot.0 <= l.t_ns {
            *slot = (l.t_ns, row);
        }
        if l.path == SPEED {
            speed = num;
        }
        if l.path == LATITUDE || l.path == LONGITUDE {
            if fix.t != l.t_ns {
                fix = Fix {
                    t: l.t_ns,
                    ..Fix::default()
                };
            }
            if l.path == LATITUDE {
                fix.lat = num;
            } else {
                fix.lon = num;
            }
            if let (Some(lat), Some(lon)) = (fix.lat, fix.lon) {
                let p = TrackPoint {
                    t_ns: fix.t,
                    lat,
                    lon,
                    speed,
                };
                let bucket = fix.t.div_euclid(TRACK_BUCKET_NS);
                if bucket != last_bucket {
                    last_bucket = bucket;
                    out.track.push(p);
                }
                if best.is_none_or(|b| p.t_ns >= b.t_ns) {
                    best = Some(p);
                }
                fix.lat = None;
                fix.lon = None;
            }
        }
    })?;
    if let Some(p) = best {
        let c = &out.columns;
        let values: serde_json::Map<String, serde_json::Value> = newest
            .iter()
            .enumerate()
            .map(|(i, &(_, row))| {
                let v = match (&c.text[row], c.value[row]) {
                    (Some(t), _) => serde_json::json!(t),
                    (None, Some(x)) => serde_json::json!(x),
                    (None, None) => serde_json::Value::Null,
                };
                (c.paths[i].clone(), v)
            })
            .collect();
        out.last = Some(LastState {
            vehicle: vehicle.to_owned(),
            t_ns: p.t_ns,
            lat: p.lat,
            lon: p.lon,
            speed: p.speed,
            values: serde_json::Value::Object(values).to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use convoy_telemetry::{Sample, SegmentWriter, Value};

    fn seg(samples: &[Sample]) -> SegmentReader {
        let mut w = SegmentWriter::new(Vec::new()).unwrap();
        for s in samples {
            w.push(s).unwrap();
        }
        SegmentReader::new(&w.finish().unwrap()[..], 1 << 30).unwrap()
    }

    fn s(t_s: i64, path: &str, v: f64) -> Sample {
        Sample {
            t_ns: t_s * 1_000_000_000,
            path: path.into(),
            value: Value::Number(v),
        }
    }

    #[test]
    fn fixes_become_a_downsampled_track_and_a_last_state() {
        let mut samples = Vec::new();
        for t in 0..30 {
            samples.push(s(1_764_000_000 + t, SPEED, t as f64));
            samples.push(s(1_764_000_000 + t, LATITUDE, 45.0 + t as f64 * 1e-4));
            samples.push(s(1_764_000_000 + t, LONGITUDE, 7.0));
        }
        samples.push(s(1_764_000_000, "Vehicle.Exterior.AirTemperature", 4.5));
        let e = extract("v1", &seg(&samples)).unwrap();
        assert_eq!(e.columns.t_ns.len(), 91);
        // 30 s of fixes from a bucket boundary: 3 buckets of 10 s.
        assert_eq!(e.track.len(), 3);
        let last = e.last.unwrap();
        assert_eq!(last.t_ns, (1_764_000_000 + 29) * 1_000_000_000);
        assert_eq!(last.speed, Some(29.0));
        assert!(last.values.contains("AirTemperature"));
        assert_eq!(e.t_first, Some(1_764_000_000 * 1_000_000_000));
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(1_764_000_000 * 1_000_000_000), "2025-11-24");
        assert_eq!(utc_date(951_782_400 * 1_000_000_000), "2000-02-29");
    }
}
