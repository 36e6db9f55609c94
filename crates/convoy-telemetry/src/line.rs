//! One telemetry sample per line of JSON, as producers write it:
//!
//! ```text
//! {"path": "Vehicle.Speed", "value": 12.5, "t": 1764000000.25}
//! {"path": "Vehicle.CurrentLocation.Latitude", "value": 45.07, "t_ns": 1764000000250000000}
//! ```
//!
//! `t` is seconds since the Unix epoch (a float), `t_ns` nanoseconds; with
//! neither the receiver's clock stamps the sample. Each bad line gets an
//! error naming what is wrong, and the caller keeps going with the next.

use crate::vss::SignalCatalog;
use crate::{Sample, Value};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LineError {
    #[error("not a JSON object with \"path\" and \"value\": {0}")]
    Malformed(String),
    #[error("{0}")]
    UnknownSignal(String),
    #[error("time {0} is not a plausible UTC time (1970..2200)")]
    BadTime(String),
    #[error("value of {0} is not a number, boolean or string")]
    BadValue(String),
}

#[derive(serde::Deserialize)]
struct Raw<'a> {
    #[serde(borrow)]
    path: std::borrow::Cow<'a, str>,
    value: serde_json::Value,
    #[serde(default)]
    t: Option<f64>,
    #[serde(default)]
    t_ns: Option<i64>,
}

/// Latest plausible time: year 2200.
const MAX_NS: i64 = 7_258_118_400_000_000_000;

/// Parses one line; `now_ns` stamps samples that carry no time.
pub fn parse_line(line: &str, signals: &SignalCatalog, now_ns: i64) -> Result<Sample, LineError> {
    let raw: Raw<'_> =
        serde_json::from_str(line.trim()).map_err(|e| LineError::Malformed(e.to_string()))?;
    signals.check(&raw.path).map_err(LineError::UnknownSignal)?;
    let t_ns = match (raw.t_ns, raw.t) {
        (Some(ns), _) => ns,
        (None, Some(s)) if s.is_finite() => (s * 1e9) as i64,
        (None, Some(s)) => return Err(LineError::BadTime(s.to_string())),
        (None, None) => now_ns,
    };
    if !(0..MAX_NS).contains(&t_ns) {
        return Err(LineError::BadTime(t_ns.to_string()));
    }
    let value = match raw.value {
        serde_json::Value::Number(n) => Value::Number(
            n.as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| LineError::BadValue(raw.path.to_string()))?,
        ),
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::String(s) => Value::Text(s),
        _ => return Err(LineError::BadValue(raw.path.to_string())),
    };
    Ok(Sample {
        t_ns,
        path: raw.path.into_owned(),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_lines_parse_with_either_time() {
        let c = SignalCatalog::default();
        let s = parse_line(r#"{"path":"Vehicle.Speed","value":12.5,"t":10.5}"#, &c, 0).unwrap();
        assert_eq!(s.t_ns, 10_500_000_000);
        assert_eq!(s.value, Value::Number(12.5));
        let s = parse_line(
            r#"{"path":"Vehicle.IsMoving","value":true,"t_ns":7}"#,
            &c,
            0,
        )
        .unwrap();
        assert_eq!((s.t_ns, s.value), (7, Value::Bool(true)));
        let s = parse_line(r#" {"path":"Vehicle.Speed","value":1} "#, &c, 99).unwrap();
        assert_eq!(s.t_ns, 99);
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let c = SignalCatalog::default();
        let err = |l: &str| parse_line(l, &c, 0).unwrap_err();
        assert!(matches!(err("not json"), LineError::Malformed(_)));
        assert!(matches!(err(r#"{"value":1}"#), LineError::Malformed(_)));
        assert!(matches!(
            err(r#"{"path":"Vehicle.Sped","value":1}"#),
            LineError::UnknownSignal(_)
        ));
        assert!(matches!(
            err(r#"{"path":"Vehicle.Speed","value":[1]}"#),
            LineError::BadValue(_)
        ));
        assert!(matches!(
            err(r#"{"path":"Vehicle.Speed","value":1,"t":-5}"#),
            LineError::BadTime(_)
        ));
        let msg = err(r#"{"path":"Vehicle.Sped","value":1}"#).to_string();
        assert!(msg.contains("Vehicle.Sped"), "{msg}");
    }
}
