//! The agent's KUKSA source: many vehicles keep their VSS signals in an
//! Eclipse KUKSA databroker, and this subscribes to it over gRPC
//! (`kuksa.val.v2.VAL/Subscribe`, the client generated from the published
//! proto by the KUKSA project's own Rust SDK) and hands each datapoint on
//! as a sample.
//!
//! ```toml
//! [[source]]
//! kind = "kuksa"
//! databroker = "http://127.0.0.1:55555"
//! signals = ["Vehicle.Speed", "Vehicle.CurrentLocation.Latitude"]
//! buffer = 64            # datapoints the broker keeps for us when we are slow
//! token = "kuksa.jwt"    # optional: a file with the JWT the broker asks for
//! ```
//!
//! The buffer is bounded on both sides: the databroker keeps at most
//! `buffer` responses for a slow subscriber and drops the oldest beyond
//! that (the proto's contract for `buffer_size`), and the agent's own
//! channel to the segmenter is bounded, so a stalled spool holds the
//! stream back through HTTP/2 flow control rather than growing memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

use convoy_telemetry::{Sample, SignalCatalog, Value};
use kuksa_rust_sdk::v2_proto::{
    val_client::ValClient, value::TypedValue, Datapoint, SubscribeRequest, SubscribeResponse,
};

use crate::policy::Class;
use crate::sources::Tagged;
use crate::status::Shared;

/// How long a failed subscription waits before the next try, at first
/// and at most: a databroker that restarts is back within a second, one
/// that refuses us (unknown signal, bad token) is not asked every second.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The largest `buffer_size` the KUKSA databroker accepts.
pub const MAX_BUFFER: u32 = 1000;

/// A configured KUKSA source.
#[derive(Clone, Debug)]
pub struct KuksaSource {
    /// The databroker's URL, `http://HOST:PORT`.
    pub databroker: String,
    /// VSS paths to subscribe to, each checked against the agent's catalog.
    pub signals: Vec<String>,
    /// `buffer_size` of the subscription.
    pub buffer: u32,
    /// The JWT sent as `authorization: Bearer …`, when the broker asks for one.
    pub token: Option<String>,
    pub class: Class,
}

impl KuksaSource {
    /// Checks the source before it starts, so a typo is an error at
    /// start-up rather than a retry loop.
    pub fn check(&self, catalog: &SignalCatalog) -> Result<(), String> {
        if self.signals.is_empty() {
            return Err("names no signals".into());
        }
        for s in &self.signals {
            catalog.check(s)?;
        }
        // The databroker refuses a larger buffer (INVALID_ARGUMENT).
        if self.buffer > MAX_BUFFER {
            return Err(format!(
                "buffer {} is over the databroker's {MAX_BUFFER}",
                self.buffer
            ));
        }
        let uri: tonic::transport::Uri = self
            .databroker
            .parse()
            .map_err(|e| format!("databroker {:?} is not a URL: {e}", self.databroker))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(format!(
                "databroker {:?} is not http://HOST:PORT (TLS is not supported)",
                self.databroker
            ));
        }
        if let Some(t) = &self.token {
            bearer(t)?;
        }
        Ok(())
    }

    /// Subscribes on a thread of its own and stays subscribed: a broker
    /// that goes away or ends the stream is dialled again.
    pub fn start(self, out: SyncSender<Tagged>, status: Arc<Shared>, stop: Arc<AtomicBool>) {
        crate::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return status.note_error(&format!("KUKSA source: {e}")),
            };
            rt.block_on(self.run(&out, &status, &stop));
        });
    }

    async fn run(&self, out: &SyncSender<Tagged>, status: &Shared, stop: &AtomicBool) {
        let mut wait = RETRY_FIRST;
        while !stop.load(Ordering::Relaxed) {
            match self.subscribe_once(out, status, stop).await {
                Ok(Ended::Stopped) => return,
                Ok(Ended::Streamed) => wait = RETRY_FIRST,
                Err(e) => {
                    status.note_error(&format!("KUKSA {}: {e}; retrying", self.databroker));
                }
            }
            // Sleep in short steps so a stop is seen.
            let until = tokio::time::Instant::now() + wait;
            while tokio::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            wait = (wait * 2).min(RETRY_MAX);
        }
    }

    /// One subscription, until the stream ends, fails or the agent stops.
    async fn subscribe_once(
        &self,
        out: &SyncSender<Tagged>,
        status: &Shared,
        stop: &AtomicBool,
    ) -> Result<Ended, String> {
        let endpoint = tonic::transport::Endpoint::from_shared(self.databroker.clone())
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(2));
        let channel = endpoint.connect().await.map_err(|e| error_text(&e))?;
        let mut request = tonic::Request::new(SubscribeRequest {
            signal_paths: self.signals.clone(),
            buffer_size: self.buffer,
            filter: None,
        });
        if let Some(t) = &self.token {
            request.metadata_mut().insert("authorization", bearer(t)?);
        }
        let mut stream = ValClient::new(channel)
            .subscribe(request)
            .await
            .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?
            .into_inner();
        tracing::info!(target: "convoy::agent", databroker = %self.databroker, "KUKSA subscribed");
        let mut streamed = false;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(Ended::Stopped);
            }
            // The timeout only lets a stop be noticed.
            let next =
                match tokio::time::timeout(Duration::from_millis(500), stream.message()).await {
                    Err(_) => continue,
                    Ok(next) => next,
                };
            match next {
                Ok(Some(response)) => {
                    streamed = true;
                    let (samples, errors) = samples(&response, convoy_telemetry::now_ns());
                    status.update(|s| s.kuksa_updates += 1);
                    for e in errors {
                        status.reject(&format!("kuksa: {e}"));
                    }
                    for s in samples {
                        // Blocks while the spool is behind: HTTP/2 flow
                        // control then holds the broker back, whose
                        // bounded buffer drops the oldest.
                        if out.send((self.class, s)).is_err() {
                            return Ok(Ended::Stopped);
                        }
                    }
                }
                Ok(None) if streamed => return Ok(Ended::Streamed),
                Ok(None) => return Err("the databroker ended the subscription".into()),
                Err(s) if streamed => {
                    status.note_error(&format!(
                        "KUKSA {}: {:?}: {}; resubscribing",
                        self.databroker,
                        s.code(),
                        s.message()
                    ));
                    return Ok(Ended::Streamed);
                }
                Err(s) => return Err(format!("{:?}: {}", s.code(), s.message())),
            }
        }
    }
}

enum Ended {
    /// The agent is stopping.
    Stopped,
    /// The stream carried data and then ended: try again at once.
    Streamed,
}

fn bearer(token: &str) -> Result<tonic::metadata::MetadataValue<tonic::metadata::Ascii>, String> {
    format!("Bearer {}", token.trim())
        .parse()
        .map_err(|_| "the KUKSA token is not printable ASCII".to_string())
}

/// A transport error and its causes on one line ("transport error" alone
/// does not say the broker refused the connection).
fn error_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The samples in one response, and what could not be taken. A
/// datapoint without a value (a signal never set) is skipped; one
/// without a timestamp is stamped `now_ns`; arrays are kept as their JSON
/// text, since a sample holds one number, boolean or string.
pub fn samples(response: &SubscribeResponse, now_ns: i64) -> (Vec<Sample>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (path, point) in &response.entries {
        match sample(path, point, now_ns) {
            Ok(Some(s)) => out.push(s),
            Ok(None) => {}
            Err(e) => errors.push(format!("{path}: {e}")),
        }
    }
    // The map's order is the hash's: time order is what the segmenter wants.
    out.sort_by_key(|s| s.t_ns);
    (out, errors)
}

fn sample(path: &str, point: &Datapoint, now_ns: i64) -> Result<Option<Sample>, String> {
    let Some(typed) = point.value.as_ref().and_then(|v| v.typed_value.as_ref()) else {
        return Ok(None);
    };
    let t_ns = match &point.timestamp {
        None => now_ns,
        Some(t) => {
            if t.seconds <= 0 || !(0..1_000_000_000).contains(&t.nanos) {
                return Err(format!(
                    "timestamp {}s {}ns is out of range",
                    t.seconds, t.nanos
                ));
            }
            t.seconds
                .checked_mul(1_000_000_000)
                .and_then(|s| s.checked_add(i64::from(t.nanos)))
                .ok_or_else(|| format!("timestamp {}s is out of range", t.seconds))?
        }
    };
    let value = match typed {
        TypedValue::String(s) => Value::Text(s.clone()),
        TypedValue::Bool(b) => Value::Bool(*b),
        TypedValue::Int32(x) => Value::Number(f64::from(*x)),
        TypedValue::Uint32(x) => Value::Number(f64::from(*x)),
        // Past 2^53 an f64 rounds: VSS's 64-bit signals (odometer in
        // metres, timestamps) stay well below it.
        TypedValue::Int64(x) => Value::Number(*x as f64),
        TypedValue::Uint64(x) => Value::Number(*x as f64),
        TypedValue::Float(x) => finite(f64::from(*x))?,
        TypedValue::Double(x) => finite(*x)?,
        TypedValue::StringArray(a) => json(&a.values),
        TypedValue::BoolArray(a) => json(&a.values),
        TypedValue::Int32Array(a) => json(&a.values),
        TypedValue::Int64Array(a) => json(&a.values),
        TypedValue::Uint32Array(a) => json(&a.values),
        TypedValue::Uint64Array(a) => json(&a.values),
        TypedValue::FloatArray(a) => json(&a.values),
        TypedValue::DoubleArray(a) => json(&a.values),
    };
    Ok(Some(Sample {
        t_ns,
        path: path.to_string(),
        value,
    }))
}

fn finite(x: f64) -> Result<Value, String> {
    if x.is_finite() {
        Ok(Value::Number(x))
    } else {
        Err(format!("{x} is not a finite number"))
    }
}

fn json<T: serde::Serialize>(values: &[T]) -> Value {
    // Serializing numbers, booleans and strings cannot fail (a NaN in a
    // float array becomes null).
    Value::Text(serde_json::to_string(values).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuksa_rust_sdk::v2_proto::{StringArray, Value as KValue};

    fn point(seconds: i64, nanos: i32, v: Option<TypedValue>) -> Datapoint {
        Datapoint {
            timestamp: (seconds != 0).then_some(prost_types::Timestamp { seconds, nanos }),
            value: v.map(|t| KValue {
                typed_value: Some(t),
            }),
        }
    }

    #[test]
    fn datapoints_become_samples_in_time_order() {
        let mut r = SubscribeResponse::default();
        r.entries.insert(
            "Vehicle.Speed".into(),
            point(1_764_000_001, 250_000_000, Some(TypedValue::Float(42.5))),
        );
        r.entries.insert(
            "Vehicle.IsMoving".into(),
            point(1_764_000_000, 0, Some(TypedValue::Bool(true))),
        );
        r.entries
            .insert("Vehicle.Body.Lights.IsHighBeamOn".into(), point(0, 0, None));
        r.entries.insert(
            "Vehicle.OBD.DTCList".into(),
            point(
                0,
                0,
                Some(TypedValue::StringArray(StringArray {
                    values: vec!["P0300".into(), "U0100".into()],
                })),
            ),
        );
        let (s, e) = samples(&r, 7);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(s.len(), 3, "the value-less datapoint is skipped");
        assert_eq!(
            (s[0].t_ns, &s[0].value),
            (7, &Value::Text(r#"["P0300","U0100"]"#.into()))
        );
        assert_eq!(
            (s[1].t_ns, s[1].path.as_str(), &s[1].value),
            (
                1_764_000_000_000_000_000,
                "Vehicle.IsMoving",
                &Value::Bool(true)
            )
        );
        assert_eq!(
            (s[2].t_ns, &s[2].value),
            (1_764_000_001_250_000_000, &Value::Number(42.5))
        );
    }

    #[test]
    fn bad_datapoints_are_named_and_the_rest_kept() {
        let mut r = SubscribeResponse::default();
        r.entries.insert(
            "Vehicle.Speed".into(),
            point(1, 0, Some(TypedValue::Double(f64::NAN))),
        );
        r.entries.insert(
            "Vehicle.Acceleration.Longitudinal".into(),
            point(5, -1, Some(TypedValue::Double(1.0))),
        );
        r.entries.insert(
            "Vehicle.TraveledDistance".into(),
            point(5, 0, Some(TypedValue::Uint64(12))),
        );
        let (s, mut e) = samples(&r, 7);
        e.sort();
        assert_eq!(s.len(), 1);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("Vehicle.Acceleration.Longitudinal") && e[0].contains("timestamp"));
        assert!(e[1].contains("Vehicle.Speed") && e[1].contains("finite"));
    }

    #[test]
    fn a_bad_source_is_refused_before_it_starts() {
        let c = SignalCatalog::default();
        let good = KuksaSource {
            databroker: "http://127.0.0.1:55555".into(),
            signals: vec!["Vehicle.Speed".into()],
            buffer: 16,
            token: None,
            class: Class::Telemetry,
        };
        good.check(&c).unwrap();
        let e = KuksaSource {
            signals: vec!["Vehicle.Sped".into()],
            ..good.clone()
        };
        assert!(e.check(&c).unwrap_err().contains("Vehicle.Sped"));
        let e = KuksaSource {
            signals: vec![],
            ..good.clone()
        };
        assert!(e.check(&c).unwrap_err().contains("no signals"));
        for url in [
            "127.0.0.1:55555",
            "https://broker:55555",
            "http://",
            "not a url",
        ] {
            let e = KuksaSource {
                databroker: url.into(),
                ..good.clone()
            };
            assert!(e.check(&c).is_err(), "{url} accepted");
        }
        let e = KuksaSource {
            buffer: MAX_BUFFER + 1,
            ..good.clone()
        };
        assert!(e.check(&c).unwrap_err().contains("buffer"));
        let e = KuksaSource {
            token: Some("bad\u{7f}token".into()),
            ..good
        };
        assert!(e.check(&c).unwrap_err().contains("token"));
    }

    proptest::proptest! {
        /// Whatever a broker sends, conversion never panics, and what it
        /// keeps has a time after the epoch.
        #[test]
        fn any_datapoint_converts_or_is_named(
            seconds in proptest::prelude::any::<i64>(),
            nanos in proptest::prelude::any::<i32>(),
            x in proptest::prelude::any::<f64>(),
            n in proptest::prelude::any::<i64>(),
        ) {
            let mut r = SubscribeResponse::default();
            r.entries.insert("a".into(), point(seconds, nanos, Some(TypedValue::Double(x))));
            r.entries.insert("b".into(), point(seconds, nanos, Some(TypedValue::Int64(n))));
            let (s, e) = samples(&r, 1);
            proptest::prop_assert_eq!(s.len() + e.len(), 2);
            proptest::prop_assert!(s.iter().all(|s| s.t_ns > 0));
        }
    }
}
