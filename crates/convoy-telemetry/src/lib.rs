//! Vehicle telemetry as convoy moves it.
//!
//! * [`Sample`]: one timestamped value of one COVESA VSS signal
//!   (`Vehicle.Speed`, `Vehicle.CurrentLocation.Latitude`).
//! * [`vss`]: which names are known, and the private overlay for signals
//!   VSS does not define (air quality).
//! * [`line`]: the JSON-lines form producers write (`{"path":
//!   "Vehicle.Speed", "value": 12.5, "t": 1764000000.25}`), parsed with
//!   a clear error per bad line.
//! * [`segment`]: a bounded batch of samples as one zstd-compressed
//!   JSON-lines file (`.jsonl.zst`), the unit the agent spools and the
//!   ingest indexes, and its streaming reader.
//!
//! * [`campaign`]: campaign files and their trigger expressions.
//!
//! No I/O beyond byte buffers and `Read`/`Write`: files are the callers'.

pub mod campaign;
pub mod line;
pub mod segment;
pub mod vss;

pub use line::{parse_line, LineError};
pub use segment::{SegmentReader, SegmentWriter, SEGMENT_EXT};
pub use vss::SignalCatalog;

/// A signal's value: VSS signals are numbers, booleans or strings.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Number(f64),
    Text(String),
}

impl Value {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(x) => Some(*x),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Text(_) => None,
        }
    }
}

/// One timestamped value of one signal.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// When it was measured: nanoseconds since the Unix epoch, UTC.
    pub t_ns: i64,
    /// The VSS path.
    pub path: String,
    pub value: Value,
}

/// The VSS paths of a position fix.
pub const LATITUDE: &str = "Vehicle.CurrentLocation.Latitude";
pub const LONGITUDE: &str = "Vehicle.CurrentLocation.Longitude";
pub const SPEED: &str = "Vehicle.Speed";
pub const HEADING: &str = "Vehicle.CurrentLocation.Heading";

/// Nanoseconds since the Unix epoch now.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The UTC date (YYYY-MM-DD) of a time in nanoseconds since the epoch:
/// what segment names and the store's day partitions start with.
pub fn utc_date(t_ns: i64) -> String {
    // Howard Hinnant's days-to-civil (proleptic Gregorian).
    let z = t_ns.div_euclid(86_400_000_000_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
