//! Campaigns (docs/SERVICE.md, "Campaigns"): which signals a vehicle
//! keeps around which events. A campaign file is TOML:
//!
//! ```toml
//! name = "hard-braking"
//! priority = "events"          # the class its windows are uploaded as
//! pre_seconds = 10             # kept before each trigger (ring buffer)
//! post_seconds = 5             # and after it
//! [upload]
//! links = ["wifi"]             # optional: only these links
//! unmetered_only = true        # optional: never a metered link
//! [[signal]]
//! name = "Vehicle.Speed"
//! interval_ms = 100            # at most one sample per 100 ms (0: all)
//! max_samples = 2000           # the ring buffer's cap for this signal
//! [[trigger]]
//! name = "brake"
//! when = "Vehicle.Speed > 30 && rising(Vehicle.Brake.IsPressed)"
//! ```
//!
//! Parsed and checked here (both the server, before it deploys one, and
//! the agent, before it runs one); the agent's trigger engine runs it.

pub mod expr;

use serde::Deserialize;

use crate::vss::SignalCatalog;
pub use expr::{Expr, Parsed};

/// Classes a campaign's windows may go as (the agent's, most urgent first).
pub const PRIORITIES: [&str; 4] = ["events", "telemetry", "previews", "bulk"];

/// The longest window on either side of a trigger: a ring buffer that
/// large stays well within a vehicle's memory at the sample caps.
pub const MAX_WINDOW_SECONDS: f64 = 600.0;
/// The most samples one signal's ring buffer holds.
pub const MAX_SAMPLES: usize = 1_000_000;
/// The longest campaign file (it travels in one control-stream frame).
pub const MAX_FILE_BYTES: usize = 48 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default = "default_priority")]
    priority: String,
    pre_seconds: f64,
    post_seconds: f64,
    #[serde(default)]
    upload: Upload,
    #[serde(default)]
    signal: Vec<SignalFile>,
    #[serde(default)]
    trigger: Vec<TriggerFile>,
}

fn default_priority() -> String {
    "events".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalFile {
    name: String,
    #[serde(default)]
    interval_ms: u64,
    #[serde(default = "default_max")]
    max_samples: usize,
}

fn default_max() -> usize {
    100_000
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerFile {
    #[serde(default)]
    name: Option<String>,
    when: String,
}

/// Upload conditions of a campaign's windows.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    /// Only these links (by the agent's link names); empty: any the
    /// class may use.
    #[serde(default)]
    pub links: Vec<String>,
    /// Never a metered link.
    #[serde(default)]
    pub unmetered_only: bool,
}

/// A signal a campaign records.
#[derive(Clone, Debug, PartialEq)]
pub struct Signal {
    pub name: String,
    /// Keep a sample only this long after the last one kept (0: every one).
    pub interval_ns: i64,
    /// The ring buffer's cap for this signal (oldest go first).
    pub max_samples: usize,
}

/// A trigger: a name (for window names and status) and its expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Trigger {
    pub name: String,
    pub source: String,
    pub parsed: Parsed,
}

/// A checked campaign.
#[derive(Clone, Debug, PartialEq)]
pub struct Campaign {
    pub name: String,
    pub priority: String,
    pub pre_ns: i64,
    pub post_ns: i64,
    pub upload: Upload,
    pub signals: Vec<Signal>,
    pub triggers: Vec<Trigger>,
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Campaign {
    /// Parses and checks campaign text; `origin` names it in errors (a
    /// file name). Every error is one line naming the place: the TOML
    /// line and column, or the signal or trigger and the column in it.
    pub fn parse(origin: &str, text: &str, signals: &SignalCatalog) -> Result<Campaign, String> {
        if text.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{origin}: {} bytes: a campaign file is at most {MAX_FILE_BYTES}",
                text.len()
            ));
        }
        let f: File = toml::from_str(text).map_err(|e| {
            let place = e
                .span()
                .map(|s| {
                    let line = text[..s.start].matches('\n').count() + 1;
                    let col = s.start - text[..s.start].rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!("line {line}, column {col}: ")
                })
                .unwrap_or_default();
            format!("{origin}: {place}{}", e.message().trim())
        })?;
        let err = |m: String| Err(format!("{origin}: {m}"));
        if !valid_name(&f.name) {
            return err(format!(
                "name {:?}: 1 to 64 letters, digits, '-' or '_'",
                f.name
            ));
        }
        if !PRIORITIES.contains(&f.priority.as_str()) {
            return err(format!(
                "priority {:?}: one of {}",
                f.priority,
                PRIORITIES.join(", ")
            ));
        }
        for (k, v) in [
            ("pre_seconds", f.pre_seconds),
            ("post_seconds", f.post_seconds),
        ] {
            if !(0.0..=MAX_WINDOW_SECONDS).contains(&v) {
                return err(format!("{k} = {v}: between 0 and {MAX_WINDOW_SECONDS}"));
            }
        }
        if f.signal.is_empty() {
            return err("no [[signal]]: a campaign records at least one".into());
        }
        if f.trigger.is_empty() {
            return err("no [[trigger]]: a campaign has at least one".into());
        }
        let mut out_signals: Vec<Signal> = Vec::new();
        for (i, s) in f.signal.iter().enumerate() {
            let place = format!("signal {} ({:?})", i + 1, s.name);
            if let Err(e) = signals.check(&s.name) {
                return err(format!("{place}: {e}"));
            }
            if out_signals.iter().any(|o| o.name == s.name) {
                return err(format!("{place}: listed twice"));
            }
            if s.max_samples == 0 || s.max_samples > MAX_SAMPLES {
                return err(format!("{place}: max_samples between 1 and {MAX_SAMPLES}"));
            }
            out_signals.push(Signal {
                name: s.name.clone(),
                interval_ns: (s.interval_ms as i64).saturating_mul(1_000_000),
                max_samples: s.max_samples,
            });
        }
        let mut triggers: Vec<Trigger> = Vec::new();
        for (i, t) in f.trigger.iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(|| format!("t{}", i + 1));
            let place = format!("trigger {} ({name:?})", i + 1);
            if !valid_name(&name) {
                return err(format!("{place}: a name is letters, digits, '-' or '_'"));
            }
            if triggers.iter().any(|o| o.name == name) {
                return err(format!("{place}: the name is taken"));
            }
            let parsed = expr::parse(&t.when)
                .map_err(|e| format!("{origin}: {place}: {e}: {:?}", t.when))?;
            let mut used = Vec::new();
            parsed.expr.signals(&mut used);
            for s in used {
                signals
                    .check(&s)
                    .map_err(|e| format!("{origin}: {place}: {e}"))?;
            }
            triggers.push(Trigger {
                name,
                source: t.when.clone(),
                parsed,
            });
        }
        for l in &f.upload.links {
            if l.is_empty() || l.contains(',') {
                return err(format!("upload.links: {l:?} is not a link name"));
            }
        }
        Ok(Campaign {
            name: f.name,
            priority: f.priority,
            pre_ns: (f.pre_seconds * 1e9).round() as i64,
            post_ns: (f.post_seconds * 1e9).round() as i64,
            upload: f.upload,
            signals: out_signals,
            triggers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "hard-braking"
pre_seconds = 2
post_seconds = 1.5
[upload]
unmetered_only = true
[[signal]]
name = "Vehicle.Speed"
interval_ms = 100
[[signal]]
name = "Vehicle.Private.Brake"
[[trigger]]
name = "brake"
when = "Vehicle.Speed > 30 && rising(Vehicle.Private.Brake)"
"#;

    #[test]
    fn a_campaign_parses_with_its_defaults() {
        let c = Campaign::parse("c.toml", GOOD, &SignalCatalog::default()).unwrap();
        assert_eq!((c.pre_ns, c.post_ns), (2_000_000_000, 1_500_000_000));
        assert_eq!(c.priority, "events");
        assert_eq!(c.signals[0].interval_ns, 100_000_000);
        assert_eq!(c.signals[1].max_samples, 100_000);
        assert!(c.upload.unmetered_only && c.upload.links.is_empty());
        assert_eq!(c.triggers[0].parsed.edges, 1);
    }

    #[test]
    fn each_bad_campaign_is_one_line_naming_the_place() {
        let cat = SignalCatalog::default();
        for (bad, want) in [
            (GOOD.replace("pre_seconds = 2", "pre_seconds = \"2\""), "c.toml: line 3, column 15"),
            (GOOD.replace("interval_ms", "intervall_ms"), "unknown field `intervall_ms`"),
            (GOOD.replace("name = \"Vehicle.Speed\"", "name = \"Vehicle.Sped\""), "signal 1 (\"Vehicle.Sped\"): unknown VSS signal"),
            (GOOD.replace("Speed > 30 &&", "Speed > 30 &"), "trigger 1 (\"brake\"): column 20: '&' alone"),
            (GOOD.replace("Vehicle.Speed > 30", "Vehicle.Sepd > 30"), "trigger 1 (\"brake\"): unknown VSS signal \"Vehicle.Sepd\""),
            (GOOD.replace("pre_seconds = 2", "pre_seconds = -1"), "pre_seconds = -1"),
            (GOOD.replace("name = \"hard-braking\"", "name = \"a/b\""), "name \"a/b\""),
            (GOOD.replace("[[trigger]]\nname = \"brake\"\nwhen", "[[x]]\nname = \"brake\"\nwhen"), "unknown field `x`"),
            ("name = \"x\"\npre_seconds = 1\npost_seconds = 1\n[[signal]]\nname = \"Vehicle.Speed\"\n".to_string(), "no [[trigger]]"),
        ] {
            let e = Campaign::parse("c.toml", &bad, &cat).unwrap_err();
            assert!(e.starts_with("c.toml: "), "{e}");
            assert!(e.contains(want), "{want}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
