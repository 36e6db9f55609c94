//! The agent's MQTT source: many ECUs publish on a broker local to the
//! vehicle; this subscribes to it and turns JSON fields into VSS samples
//! through a mapping file:
//!
//! ```toml
//! [[topic]]
//! filter = "ecu/+/drive"        # an MQTT filter (+ and # wildcards)
//! time = "ts"                   # optional: a field with seconds since the epoch
//! [topic.fields]
//! speed = "Vehicle.Speed"       # a field of the JSON object...
//! "engine.rpm" = "Vehicle.Powertrain.CombustionEngine.Speed"  # ...or a nested one
//! [[topic]]
//! filter = "bms/soc"
//! [topic.fields]
//! "" = "Vehicle.Powertrain.TractionBattery.StateOfCharge.Current"  # the payload is the value
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

use convoy_telemetry::{Sample, SignalCatalog, Value};
use rumqttc::{Client, Event, MqttOptions, Packet, QoS, RecvTimeoutError};
use serde::Deserialize;

use crate::policy::Class;
use crate::sources::Tagged;
use crate::status::Shared;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MappingFile {
    #[serde(rename = "topic")]
    topics: Vec<TopicMap>,
}

/// One filter and the fields taken from its messages.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicMap {
    pub filter: String,
    /// A field holding the time in seconds since the epoch; without it
    /// (or when a message lacks it) the sample is stamped on arrival.
    #[serde(default)]
    pub time: Option<String>,
    /// Dotted JSON field → VSS name; the empty field is the payload itself.
    pub fields: BTreeMap<String, String>,
}

/// The checked mapping of one MQTT source.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub topics: Vec<TopicMap>,
}

impl Mapping {
    /// Reads a mapping file; a VSS name the catalog refuses or a filter
    /// MQTT would refuse is an error naming the file.
    pub fn load(path: &Path, catalog: &SignalCatalog) -> Result<Mapping, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Mapping::parse(&text, catalog).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str, catalog: &SignalCatalog) -> Result<Mapping, String> {
        let file: MappingFile = toml::from_str(text).map_err(|e| e.to_string())?;
        for t in &file.topics {
            if !rumqttc::valid_filter(&t.filter) {
                return Err(format!("{:?} is not an MQTT topic filter", t.filter));
            }
            if t.fields.is_empty() {
                return Err(format!("topic {:?} maps no fields", t.filter));
            }
            for (field, vss) in &t.fields {
                catalog
                    .check(vss)
                    .map_err(|e| format!("topic {:?} field {field:?}: {e}", t.filter))?;
            }
        }
        Ok(Mapping {
            topics: file.topics,
        })
    }

    /// The samples in one message, or why there are none. Every topic
    /// entry whose filter matches contributes.
    pub fn samples(&self, topic: &str, payload: &[u8], now_ns: i64) -> Result<Vec<Sample>, String> {
        let matching: Vec<&TopicMap> = self
            .topics
            .iter()
            .filter(|t| rumqttc::matches(topic, &t.filter))
            .collect();
        if matching.is_empty() {
            return Ok(Vec::new());
        }
        let json: serde_json::Value =
            serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
        let mut out = Vec::new();
        for t in matching {
            let t_ns = t
                .time
                .as_deref()
                .and_then(|f| field(&json, f))
                .and_then(|v| v.as_f64())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map_or(now_ns, seconds_to_ns);
            for (name, vss) in &t.fields {
                let Some(v) = field(&json, name) else {
                    continue;
                };
                let value = match v {
                    serde_json::Value::Number(n) => match n.as_f64() {
                        Some(x) => Value::Number(x),
                        None => continue,
                    },
                    serde_json::Value::Bool(b) => Value::Bool(*b),
                    serde_json::Value::String(s) => Value::Text(s.clone()),
                    _ => {
                        return Err(format!(
                            "field {name:?} is neither a number, a boolean nor a string"
                        ))
                    }
                };
                out.push(Sample {
                    t_ns,
                    path: vss.clone(),
                    value,
                });
            }
        }
        Ok(out)
    }
}

/// Whole seconds and the fraction apart: `s * 1e9` in one f64 loses the
/// last digits of a present-day time (1764000000.25 s became
/// 1764000000249999872 ns).
fn seconds_to_ns(s: f64) -> i64 {
    let whole = s.trunc();
    whole as i64 * 1_000_000_000 + ((s - whole) * 1e9).round() as i64
}

/// `a.b.c` in a JSON object; the empty name is the whole value.
fn field<'a>(json: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    if name.is_empty() {
        return Some(json);
    }
    name.split('.').try_fold(json, |v, k| v.get(k))
}

/// A configured MQTT source.
pub struct MqttSource {
    pub broker: String,
    pub client_id: String,
    pub mapping: Mapping,
    pub class: Class,
}

impl MqttSource {
    /// Connects on a thread of its own and stays connected: a broker
    /// that goes away is dialled again every second, and the filters are
    /// subscribed again on each connection.
    pub fn start(self, out: SyncSender<Tagged>, status: Arc<Shared>, stop: Arc<AtomicBool>) {
        crate::spawn(move || {
            if let Err(e) = self.run(&out, &status, &stop) {
                status.note_error(&format!("MQTT {}: {e}", self.broker));
            }
        });
    }

    fn run(
        &self,
        out: &SyncSender<Tagged>,
        status: &Shared,
        stop: &AtomicBool,
    ) -> Result<(), String> {
        let (host, port) = self
            .broker
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
            .ok_or_else(|| "broker is not HOST:PORT".to_string())?;
        let mut opts = MqttOptions::new(&self.client_id, host, port);
        opts.set_keep_alive(Duration::from_secs(5));
        let (client, mut connection) = Client::new(opts, 64);
        let mut connected = false;
        while !stop.load(Ordering::Relaxed) {
            // The timeout only lets a stop be noticed. It must not be
            // short: a timeout drops rumqttc's poll, and one dropped while
            // connecting starts the connection over.
            match connection.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) => {
                    tracing::info!(target: "convoy::agent", broker = %self.broker, "MQTT connected");
                    connected = true;
                    for t in &self.mapping.topics {
                        client
                            .try_subscribe(&t.filter, QoS::AtLeastOnce)
                            .map_err(|e| e.to_string())?;
                    }
                }
                Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                    let topic = &p.topic;
                    let now = convoy_telemetry::now_ns();
                    match self.mapping.samples(topic, &p.payload, now) {
                        Ok(samples) => {
                            let unmapped = samples.is_empty();
                            status.update(|s| {
                                s.mqtt_messages += 1;
                                s.mqtt_unmapped += u64::from(unmapped);
                            });
                            for s in samples {
                                if out.send((self.class, s)).is_err() {
                                    return Ok(());
                                }
                            }
                        }
                        Err(e) => {
                            status.update(|s| s.mqtt_messages += 1);
                            status.reject(&format!("mqtt {topic}: {e}"));
                        }
                    }
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    if connected {
                        status.note_error(&format!("MQTT {}: {e}; reconnecting", self.broker));
                    }
                    connected = false;
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
        let _ = client.try_disconnect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"
[[topic]]
filter = "ecu/+/drive"
time = "ts"
[topic.fields]
speed = "Vehicle.Speed"
"engine.rpm" = "Vehicle.Powertrain.CombustionEngine.Speed"
[[topic]]
filter = "bms/soc"
[topic.fields]
"" = "Vehicle.Powertrain.TractionBattery.StateOfCharge.Current"
"#;

    #[test]
    fn fields_nested_fields_and_whole_payloads() {
        let m = Mapping::parse(MAP, &SignalCatalog::default()).unwrap();
        let s = m
            .samples(
                "ecu/7/drive",
                br#"{"speed": 12.5, "engine": {"rpm": 900}, "ts": 1764000000.5}"#,
                1,
            )
            .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].path, "Vehicle.Powertrain.CombustionEngine.Speed");
        assert_eq!(
            (s[1].t_ns, &s[1].value),
            (1_764_000_000_500_000_000, &Value::Number(12.5))
        );
        let s = m.samples("bms/soc", b"81.5", 7).unwrap();
        assert_eq!((s[0].t_ns, &s[0].value), (7, &Value::Number(81.5)));
        assert!(m.samples("other/topic", b"garbage", 1).unwrap().is_empty());
        assert!(m
            .samples("bms/soc", b"{oops", 1)
            .unwrap_err()
            .contains("not JSON"));
    }

    #[test]
    fn bad_mappings_say_why() {
        let c = SignalCatalog::default();
        let e = Mapping::parse(&MAP.replace("Vehicle.Speed", "Vehicle.Sped"), &c).unwrap_err();
        assert!(e.contains("Vehicle.Sped"), "{e}");
        let e = Mapping::parse(&MAP.replace("ecu/+/drive", "ecu/#/drive"), &c).unwrap_err();
        assert!(e.contains("not an MQTT topic filter"), "{e}");
    }
}
