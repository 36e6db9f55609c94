//! The control stream's messages, JSON in each frame, and the checks a
//! request passes before it is queued (the server) and again before it
//! runs (the agent).

use serde::{Deserialize, Serialize};

use crate::request::validate_name;

/// Priority classes a request may name, most urgent first (the agent's
/// classes).
pub const CLASSES: [&str; 4] = ["events", "telemetry", "previews", "bulk"];

/// The most files one upload request names, and signals one collection.
pub const MAX_ITEMS: usize = 256;

/// The longest campaign file a request carries (it fits one frame with
/// room to spare for JSON escaping).
pub const MAX_CAMPAIGN_BYTES: usize = 48 * 1024;

/// The fastest rate a collection may ask for, and its longest span.
pub const MAX_RATE_HZ: f64 = 100.0;
pub const MAX_COLLECT_SECONDS: f64 = 86_400.0;

/// What the cloud asks of a vehicle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RequestBody {
    /// Upload these spool files (names as the server stores them without
    /// the vehicle, `telemetry/2026-11-27/telemetry/000042.jsonl.zst`),
    /// or every waiting segment made in `[from_ns, to_ns)`, now, ahead
    /// of everything of a lower `priority` (a class name).
    Upload {
        #[serde(default)]
        files: Vec<String>,
        #[serde(default)]
        from_ns: Option<i64>,
        #[serde(default)]
        to_ns: Option<i64>,
        #[serde(default = "default_priority")]
        priority: String,
    },
    /// Send the latest value of each signal (read since the collection
    /// began) `rate_hz` times a second for `seconds`, as events (so they
    /// go out first).
    Collect {
        signals: Vec<String>,
        rate_hz: f64,
        seconds: f64,
    },
    /// Change a link rule: its budget, rate cap, classes or meteredness.
    Link {
        name: String,
        #[serde(default)]
        daily_budget: Option<String>,
        #[serde(default)]
        rate: Option<String>,
        #[serde(default)]
        classes: Option<Vec<String>>,
        #[serde(default)]
        metered: Option<bool>,
    },
    /// Report the agent's status now.
    Status {},
    /// Run this campaign (docs/SERVICE.md, "Campaigns"): `toml` is the
    /// campaign file, `version` the catalog's for `name`. Replaces the
    /// running version of that name without a restart.
    Campaign {
        name: String,
        version: i64,
        toml: String,
    },
    /// Stop campaign `name` (docs/SERVICE.md, "Withdrawing a campaign"):
    /// `version` is the catalog's version of the withdrawal, the next
    /// after the deployments it ends, so a deployment older than it that
    /// arrives late is refused. No new triggers; windows already spooled
    /// are still uploaded.
    Withdraw { name: String, version: i64 },
}

fn default_priority() -> String {
    "events".into()
}

impl RequestBody {
    /// The request's type, as in its JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            RequestBody::Upload { .. } => "upload",
            RequestBody::Collect { .. } => "collect",
            RequestBody::Link { .. } => "link",
            RequestBody::Status {} => "status",
            RequestBody::Campaign { .. } => "campaign",
            RequestBody::Withdraw { .. } => "withdraw",
        }
    }

    /// Parses and checks a request as an operator wrote it.
    pub fn parse(json: &str) -> Result<RequestBody, String> {
        let body: RequestBody =
            serde_json::from_str(json).map_err(|e| format!("malformed request: {e}"))?;
        body.check()?;
        Ok(body)
    }

    /// What both ends check (the agent checks signals, link names and
    /// amounts against its own configuration as well).
    pub fn check(&self) -> Result<(), String> {
        let class = |c: &str| {
            if CLASSES.contains(&c) {
                Ok(())
            } else {
                Err(format!(
                    "unknown class {c:?} (one of {})",
                    CLASSES.join(", ")
                ))
            }
        };
        match self {
            RequestBody::Upload {
                files,
                from_ns,
                to_ns,
                priority,
            } => {
                class(priority)?;
                if files.len() > MAX_ITEMS {
                    return Err(format!("at most {MAX_ITEMS} files per request"));
                }
                for f in files {
                    validate_name(f)?;
                }
                match (from_ns, to_ns) {
                    (None, None) if files.is_empty() => {
                        Err("an upload names files or a time range (from_ns, to_ns)".into())
                    }
                    (Some(a), Some(b)) if a >= b => Err(format!(
                        "empty time range: from_ns {a} is not before to_ns {b}"
                    )),
                    (Some(_), None) | (None, Some(_)) => {
                        Err("a time range needs both from_ns and to_ns".into())
                    }
                    _ => Ok(()),
                }
            }
            RequestBody::Collect {
                signals,
                rate_hz,
                seconds,
            } => {
                if signals.is_empty() || signals.len() > MAX_ITEMS {
                    return Err(format!("a collection names 1 to {MAX_ITEMS} signals"));
                }
                if !(*rate_hz > 0.0 && *rate_hz <= MAX_RATE_HZ) {
                    return Err(format!("rate_hz must be in (0, {MAX_RATE_HZ}]"));
                }
                if !(*seconds > 0.0 && *seconds <= MAX_COLLECT_SECONDS) {
                    return Err(format!("seconds must be in (0, {MAX_COLLECT_SECONDS}]"));
                }
                Ok(())
            }
            RequestBody::Link { name, classes, .. } => {
                if name.is_empty() {
                    return Err("a link request names the link".into());
                }
                for c in classes.iter().flatten() {
                    class(c)?;
                }
                Ok(())
            }
            RequestBody::Status {} => Ok(()),
            // The file itself is checked by convoy-telemetry's parser, on
            // the server before it is deployed and on the agent.
            RequestBody::Campaign {
                name,
                version,
                toml,
            } => {
                if name.is_empty() || *version < 1 {
                    return Err("a campaign has a name and a version from 1".into());
                }
                if toml.len() > MAX_CAMPAIGN_BYTES {
                    return Err(format!(
                        "a campaign file is at most {MAX_CAMPAIGN_BYTES} bytes"
                    ));
                }
                Ok(())
            }
            RequestBody::Withdraw { name, version } => {
                if name.is_empty() || *version < 1 {
                    return Err("a withdrawal names the campaign and a version from 1".into());
                }
                Ok(())
            }
        }
    }
}

/// Server to vehicle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToVehicle {
    /// A request, with the catalog's id for it. Sent again after a
    /// reconnection until the vehicle reports it done or failed.
    Request { id: i64, body: RequestBody },
    /// The server takes no control stream from this peer.
    Refused { reason: String },
}

/// Vehicle to server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum FromVehicle {
    /// The request arrived and runs (or ran: sent again for a duplicate).
    Ack { id: i64 },
    /// `done` of `total` units (segments, samples) so far.
    Progress {
        id: i64,
        done: u64,
        total: u64,
        note: String,
    },
    /// Finished; what it produced.
    Done { id: i64, result: serde_json::Value },
    /// Finished without doing what was asked; nothing was lost.
    Failed { id: i64, error: String },
    /// A frame the vehicle could not read as a request (no id in it).
    Unreadable { error: String },
    /// Sent first on each control stream: what the server cannot know
    /// from the registry. `extra_signals` are the names the vehicle's
    /// configuration adds to the VSS list, so campaigns may use them.
    Hello {
        #[serde(default)]
        extra_signals: Vec<String>,
    },
}

impl FromVehicle {
    pub fn id(&self) -> Option<i64> {
        match self {
            FromVehicle::Ack { id }
            | FromVehicle::Progress { id, .. }
            | FromVehicle::Done { id, .. }
            | FromVehicle::Failed { id, .. } => Some(*id),
            FromVehicle::Unreadable { .. } | FromVehicle::Hello { .. } => None,
        }
    }

    pub fn to_frame(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("messages serialize")
    }
}

impl ToVehicle {
    pub fn to_frame(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("messages serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_bad_ones_say_why() {
        let ok = RequestBody::parse(r#"{"type":"upload","from_ns":1,"to_ns":2}"#).unwrap();
        assert_eq!(ok.kind(), "upload");
        assert_eq!(
            RequestBody::parse(r#"{"type":"status"}"#).unwrap(),
            RequestBody::Status {}
        );
        for (bad, why) in [
            ("{", "malformed request"),
            (r#"{"type":"reboot"}"#, "unknown variant"),
            (r#"{"type":"status","x":1}"#, "unknown field"),
            (r#"{"type":"upload"}"#, "names files or a time range"),
            (
                r#"{"type":"upload","from_ns":5,"to_ns":5}"#,
                "empty time range",
            ),
            (r#"{"type":"upload","files":["../x"]}"#, "invalid name"),
            (
                r#"{"type":"upload","files":["a"],"priority":"vip"}"#,
                "unknown class",
            ),
            (
                r#"{"type":"collect","signals":[],"rate_hz":1,"seconds":1}"#,
                "1 to 256",
            ),
            (
                r#"{"type":"collect","signals":["Vehicle.Speed"],"rate_hz":0,"seconds":1}"#,
                "rate_hz",
            ),
            (r#"{"type":"link","name":""}"#, "names the link"),
            (
                r#"{"type":"withdraw","name":"brake","version":0}"#,
                "version from 1",
            ),
        ] {
            let e = RequestBody::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn messages_round_trip() {
        let m = ToVehicle::Request {
            id: 7,
            body: RequestBody::Collect {
                signals: vec!["Vehicle.Speed".into()],
                rate_hz: 10.0,
                seconds: 2.0,
            },
        };
        assert_eq!(
            serde_json::from_slice::<ToVehicle>(&m.to_frame()).unwrap(),
            m
        );
        let r = FromVehicle::Progress {
            id: 7,
            done: 1,
            total: 2,
            note: "1 of 2".into(),
        };
        assert_eq!(
            serde_json::from_slice::<FromVehicle>(&r.to_frame()).unwrap(),
            r
        );
    }
}
