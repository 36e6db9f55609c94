//! `agent.toml`: who the vehicle is, where the server is, the spool, the
//! sources and the links (docs/SERVICE.md has a complete example).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::can::Unmapped;
use crate::policy::{Class, LinkRule, Timetable};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The vehicle's name in the agent's log lines (the `vehicle` field of
    /// each): the name it is registered under. Default: the key file's
    /// name without its extension (truck-7.key: truck-7).
    #[serde(default)]
    pub name: Option<String>,
    /// The vehicle's private key file (`convoy keygen`).
    pub key: PathBuf,
    /// The server, HOST:PORT.
    pub server: String,
    /// The local address the agent's connections leave from (its modem's
    /// address when the vehicle has several, or one of many vehicles
    /// emulated on one host); default: the one the kernel's routes choose.
    #[serde(default)]
    pub local_address: Option<std::net::IpAddr>,
    /// The server's public key: 64 hex digits or a .pub file.
    pub server_key: String,
    /// The spool directory (segments waiting, the agent's catalog).
    pub spool: PathBuf,
    /// Most bytes the spool may hold (e.g. "2GB").
    #[serde(default = "default_quota")]
    pub quota: String,
    /// Transport mode: tide (the default, as for `convoy send`), rcdp or rlnc-bbr.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// The backlog lane's priority: `normal` (the mode's controller) or
    /// `background` (the scavenger controller, `--priority background`),
    /// which keeps the queue it shares with the live lane within a few
    /// milliseconds and drains the backlog more slowly. The live lane is
    /// always `normal`.
    #[serde(default = "default_backlog_priority")]
    pub backlog_priority: String,
    /// Seconds without hearing from the server before reconnecting.
    #[serde(default = "default_idle")]
    pub idle_timeout: f64,
    #[serde(default)]
    pub segments: SegmentConfig,
    /// Signal names accepted beyond VSS and Vehicle.Private.*.
    #[serde(default)]
    pub extra_signals: Vec<String>,
    #[serde(default, rename = "source")]
    pub sources: Vec<SourceConfig>,
    /// The links the vehicle may use; with none, one unmetered link.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkConfig>,
    /// A file holding the name of the link in use now (written by the
    /// connection manager); without it, the first link.
    #[serde(default)]
    pub link_file: Option<PathBuf>,
}

fn default_quota() -> String {
    "1GB".into()
}
fn default_backlog_priority() -> String {
    "normal".into()
}

fn default_mode() -> String {
    "tide".into()
}
fn default_idle() -> f64 {
    15.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentConfig {
    /// A telemetry segment closes after this many seconds...
    #[serde(default = "default_seconds")]
    pub max_seconds: f64,
    /// ...or this many uncompressed bytes, whichever comes first.
    #[serde(default = "default_seg_bytes")]
    pub max_bytes: String,
    /// While the server cannot be reached, a telemetry segment closes
    /// after this many seconds instead: nobody sees it before the link
    /// returns, and an hour's outage is then 60 segments to send, not
    /// 3,600. The open one closes as soon as a connection is made.
    #[serde(default = "default_offline_seconds")]
    pub offline_seconds: f64,
}

fn default_seconds() -> f64 {
    1.0
}
fn default_offline_seconds() -> f64 {
    60.0
}
fn default_seg_bytes() -> String {
    "4MB".into()
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            max_seconds: default_seconds(),
            max_bytes: default_seg_bytes(),
            offline_seconds: default_offline_seconds(),
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// JSON lines on standard input.
    Stdin {
        #[serde(default = "telemetry")]
        class: Class,
    },
    /// JSON lines from any number of programs on a Unix socket.
    Socket {
        path: PathBuf,
        #[serde(default = "telemetry")]
        class: Class,
    },
    /// Files dropped into a directory (an inbox: settled files are moved
    /// into the spool).
    Directory {
        path: PathBuf,
        #[serde(default = "bulk")]
        class: Class,
        /// A file is taken once its size and time have not changed for
        /// this long.
        #[serde(default = "default_settle")]
        settle_seconds: f64,
    },
    /// A replay of one vehicle of a SUMO FCD file, in real time (or
    /// `speedup` times faster), as position, speed and heading samples.
    Fcd {
        path: PathBuf,
        vehicle: String,
        /// Where the network's (0, 0) is on Earth: [latitude, longitude].
        #[serde(default = "default_origin")]
        origin: [f64; 2],
        #[serde(default = "one")]
        speedup: f64,
        /// Start over at the end.
        #[serde(default)]
        looped: bool,
    },
    /// CAN frames decoded with a DBC file: from a candump -L `log`, or
    /// live from a SocketCAN `interface` (one of the two).
    Can {
        dbc: PathBuf,
        #[serde(default)]
        log: Option<PathBuf>,
        #[serde(default)]
        interface: Option<String>,
        /// DBC signal (`SIGNAL` or `MESSAGE.SIGNAL`) → VSS name.
        #[serde(default)]
        signals: BTreeMap<String, String>,
        /// Signals not in `signals`: "drop" (the default) or "private"
        /// (`Vehicle.Private.CAN.MESSAGE.SIGNAL`).
        #[serde(default)]
        unmapped: Unmapped,
        #[serde(default = "telemetry")]
        class: Class,
    },
    /// JSON messages from a local MQTT broker, mapped to VSS names by a
    /// mapping file (docs/SERVICE.md).
    Mqtt {
        /// HOST:PORT of the broker.
        broker: String,
        mapping: PathBuf,
        #[serde(default = "default_client_id")]
        client_id: String,
        #[serde(default = "telemetry")]
        class: Class,
    },
    /// VSS signals from an Eclipse KUKSA databroker (`kuksa.val.v2`
    /// Subscribe over gRPC; docs/SERVICE.md).
    Kuksa {
        /// `http://HOST:PORT` of the databroker.
        databroker: String,
        /// The VSS paths to subscribe to.
        signals: Vec<String>,
        /// Datapoints the broker keeps for a slow subscriber before it
        /// drops the oldest.
        #[serde(default = "default_kuksa_buffer")]
        buffer: u32,
        /// A file holding the JWT the broker asks for, if it asks.
        #[serde(default)]
        token: Option<PathBuf>,
        #[serde(default = "telemetry")]
        class: Class,
    },
}

fn default_kuksa_buffer() -> u32 {
    64
}

fn default_client_id() -> String {
    "convoy-agent".into()
}

fn telemetry() -> Class {
    Class::Telemetry
}
fn bulk() -> Class {
    Class::Bulk
}
fn default_settle() -> f64 {
    2.0
}
fn default_origin() -> [f64; 2] {
    [45.0703, 7.6869]
}
fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub name: String,
    /// Metered (cellular): only `classes` may use it, within the budget.
    #[serde(default)]
    pub metered: bool,
    /// Classes allowed on this link (default: all on an unmetered link;
    /// events and telemetry on a metered one).
    #[serde(default)]
    pub classes: Option<Vec<Class>>,
    /// Bytes per UTC day on this link (e.g. "50MB").
    #[serde(default)]
    pub daily_budget: Option<String>,
    /// Average upload rate cap (e.g. "2mbit").
    #[serde(default)]
    pub rate: Option<String>,
    /// When uploads may run: "06:00-22:00" (UTC), several separated by commas.
    #[serde(default)]
    pub hours: Option<String>,
}

impl Config {
    /// The backlog lane's priority (`backlog_priority`), parsed.
    pub fn backlog_priority(&self) -> Result<convoy_net::Priority, String> {
        self.backlog_priority
            .parse()
            .map_err(|e: String| format!("backlog_priority: {e}"))
    }

    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut c: Config =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        // Relative paths are relative to the config file.
        let base = path.parent().unwrap_or(Path::new("."));
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        c.backlog_priority()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        fix(&mut c.key);
        fix(&mut c.spool);
        if let Some(p) = c.link_file.as_mut() {
            fix(p);
        }
        if !c.server_key.chars().all(|ch| ch.is_ascii_hexdigit()) {
            let mut p = PathBuf::from(&c.server_key);
            fix(&mut p);
            c.server_key = p.to_string_lossy().into_owned();
        }
        for s in &mut c.sources {
            match s {
                SourceConfig::Socket { path, .. }
                | SourceConfig::Directory { path, .. }
                | SourceConfig::Fcd { path, .. } => fix(path),
                SourceConfig::Can {
                    dbc,
                    log,
                    interface,
                    ..
                } => {
                    if log.is_some() == interface.is_some() {
                        return Err(format!(
                            "{}: a CAN source reads a log or an interface (one of the two)",
                            path.display()
                        ));
                    }
                    fix(dbc);
                    if let Some(l) = log.as_mut() {
                        fix(l);
                    }
                }
                SourceConfig::Mqtt { mapping, .. } => fix(mapping),
                SourceConfig::Kuksa { token, .. } => {
                    if let Some(t) = token.as_mut() {
                        fix(t);
                    }
                }
                SourceConfig::Stdin { .. } => {}
            }
        }
        c.link_rules()?;
        parse_size(&c.quota)?;
        parse_size(&c.segments.max_bytes)?;
        if c.segments.max_seconds.is_nan() || c.segments.max_seconds <= 0.0 {
            return Err("segments.max_seconds must be positive".into());
        }
        if c.segments.offline_seconds.is_nan() || c.segments.offline_seconds <= 0.0 {
            return Err("segments.offline_seconds must be positive".into());
        }
        Ok(c)
    }

    pub fn quota_bytes(&self) -> u64 {
        parse_size(&self.quota).unwrap_or(1 << 30)
    }

    pub fn segment_bytes(&self) -> u64 {
        parse_size(&self.segments.max_bytes).unwrap_or(4 << 20)
    }

    /// The link rules, checked.
    pub fn link_rules(&self) -> Result<Vec<LinkRule>, String> {
        if self.links.is_empty() {
            return Ok(vec![LinkRule::unmetered("default")]);
        }
        self.links
            .iter()
            .map(|l| {
                Ok(LinkRule {
                    name: l.name.clone(),
                    metered: l.metered,
                    classes: l.classes.clone().unwrap_or_else(|| {
                        if l.metered {
                            vec![Class::Events, Class::Telemetry]
                        } else {
                            Class::ALL.to_vec()
                        }
                    }),
                    daily_budget: l.daily_budget.as_deref().map(parse_size).transpose()?,
                    rate_bps: l.rate.as_deref().map(parse_rate).transpose()?,
                    hours: l.hours.as_deref().map(Timetable::parse).transpose()?,
                })
            })
            .collect()
    }
}

/// "4MB", "512KiB", "2TB", "1000" → bytes (`convoy_units`' grammar, as
/// every convoy command reads sizes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    convoy_units::parse_bytes(s).map_err(|e| e.to_string())
}

/// "2mbit", "500kbit", "1gbit" → bits per second.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    convoy_units::parse_rate_bps(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates() {
        assert_eq!(parse_size("4MB").unwrap(), 4_000_000);
        assert_eq!(parse_size("1.5 KiB").unwrap(), 1536);
        assert_eq!(parse_size("2TB").unwrap(), 2_000_000_000_000);
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_rate("2mbit").unwrap(), 2_000_000);
        assert!(parse_rate("2 mb").is_err());
    }

    #[test]
    fn a_full_config_parses_and_bad_ones_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.toml");
        std::fs::write(
            &p,
            r#"
key = "v.key"
server = "127.0.0.1:4433"
local_address = "10.7.2.17"
server_key = "server.key.pub"
spool = "spool"
quota = "100MB"
[segments]
max_seconds = 2
[[source]]
kind = "stdin"
[[source]]
kind = "directory"
path = "inbox"
class = "previews"
[[link]]
name = "lte"
metered = true
daily_budget = "50MB"
rate = "2mbit"
hours = "06:00-22:00"
[[link]]
name = "wifi"
"#,
        )
        .unwrap();
        let c = Config::load(&p).unwrap();
        assert_eq!(c.spool, dir.path().join("spool"));
        assert_eq!(c.local_address, Some("10.7.2.17".parse().unwrap()));
        let rules = c.link_rules().unwrap();
        assert_eq!(rules[0].classes, vec![Class::Events, Class::Telemetry]);
        assert_eq!(rules[1].classes.len(), 4);
        std::fs::write(&p, "key = 1").unwrap();
        assert!(Config::load(&p).is_err());
        let base = "key='k'\nserver='s'\nserver_key='k'\nspool='s'\n";
        std::fs::write(&p, format!("{base}local_address='10.7.2'\n")).unwrap();
        assert!(Config::load(&p).is_err(), "not an address");
        std::fs::write(&p, base).unwrap();
        let c = Config::load(&p).unwrap();
        assert_eq!(c.local_address, None);
        assert_eq!(c.backlog_priority(), Ok(convoy_net::Priority::Normal));
        std::fs::write(&p, format!("{base}backlog_priority='background'\n")).unwrap();
        let c = Config::load(&p).unwrap();
        assert_eq!(c.backlog_priority(), Ok(convoy_net::Priority::Background));
        std::fs::write(&p, format!("{base}backlog_priority='urgent'\n")).unwrap();
        let e = Config::load(&p).unwrap_err();
        assert!(
            e.contains("backlog_priority") && e.contains("background"),
            "{e}"
        );
        std::fs::write(
            &p,
            format!("{base}[[source]]\nkind='can'\ndbc='v.dbc'\nlog='d.log'\nunmapped='private'\n[source.signals]\nVehicleSpeed='Vehicle.Speed'\n[[source]]\nkind='mqtt'\nbroker='127.0.0.1:1883'\nmapping='m.toml'\n"),
        )
        .unwrap();
        let c = Config::load(&p).unwrap();
        match &c.sources[0] {
            SourceConfig::Can { dbc, log, .. } => {
                assert_eq!(dbc, &dir.path().join("v.dbc"));
                assert_eq!(log.as_deref(), Some(dir.path().join("d.log").as_path()));
            }
            other => panic!("{other:?}"),
        }
        for (src, why) in [
            ("kind='can'\ndbc='v.dbc'\n", "one of the two"),
            (
                "kind='can'\ndbc='v.dbc'\nlog='a'\ninterface='can0'\n",
                "one of the two",
            ),
            (
                "kind='can'\ndbc='v.dbc'\nlog='a'\nunmapped='keep'\n",
                "unknown variant",
            ),
            ("kind='mqtt'\nbroker='b:1'\n", "mapping"),
            ("kind='kuksa'\ndatabroker='http://b:1'\n", "signals"),
        ] {
            std::fs::write(&p, format!("{base}[[source]]\n{src}")).unwrap();
            let err = Config::load(&p).unwrap_err();
            assert!(err.contains(why), "{src}: {err}");
        }
        std::fs::write(
            &p,
            "key='k'\nserver='s'\nserver_key='k'\nspool='s'\nbogus=1\n",
        )
        .unwrap();
        let err = Config::load(&p).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
    }
}
