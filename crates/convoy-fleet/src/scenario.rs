//! The scenario file (TOML, docs/SIM.md): mobility, infrastructure, radio
//! and core-network constants, and the applications vehicles run. Unknown
//! keys are errors, so a typo never silently runs the default.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    pub duration_s: f64,
    #[serde(default)]
    pub seed: u64,
    pub mobility: MobilitySpec,
    #[serde(default)]
    pub rsu: Vec<Site>,
    #[serde(default)]
    pub enodeb: Vec<Site>,
    #[serde(default)]
    pub radio: RadioSpec,
    #[serde(default)]
    pub lte: LteSpec,
    #[serde(default)]
    pub core: CoreSpec,
    pub sensing: Option<SensingSpec>,
    pub upload: Option<UploadSpec>,
    pub edge: Option<EdgeSpec>,
    pub clusters: Option<ClusterSpec>,
    #[serde(default)]
    pub vehicles: VehicleSpec,
    /// Where relative paths in the file are resolved (set by `load`).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn default_name() -> String {
    "fleet".into()
}

/// Which interfaces vehicles have: each vehicle draws its own from these
/// shares (keyed by its id, so the draw does not depend on the others).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VehicleSpec {
    /// Share of vehicles with an 802.11p radio (AVE, clusters).
    pub wave_share: f64,
    /// Share of vehicles with an LTE modem (uploads, edge, clusters).
    pub lte_share: f64,
}

impl Default for VehicleSpec {
    fn default() -> Self {
        VehicleSpec {
            wave_share: 1.0,
            lte_share: 1.0,
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Site {
    pub x: f64,
    pub y: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MobilitySpec {
    /// A SUMO FCD file (`sumo --fcd-output`), precomputed.
    pub fcd: Option<PathBuf>,
    /// Or a built-in Manhattan grid with vehicles driving it.
    pub grid: Option<GridSpec>,
    /// SUMO polygons; those of type "building" shadow 802.11p.
    pub buildings: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    /// Blocks per side (the grid has blocks + 1 streets each way).
    pub blocks: u32,
    #[serde(default = "default_block")]
    pub block_m: f64,
    pub vehicles: u32,
    #[serde(default = "default_speed")]
    pub speed_mps: f64,
    /// Add a building in every block, set back 12 m from the street axes.
    #[serde(default)]
    pub buildings: bool,
}

fn default_block() -> f64 {
    200.0
}
fn default_speed() -> f64 {
    13.89
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RadioSpec {
    /// "vehicles-as-obstacles" (m = 0.7, α = 2.3) or "los" (m = 1, α = 2.2).
    pub model: String,
    pub nakagami_m: Option<f64>,
    pub alpha: Option<f64>,
    pub tx_power_dbm: Option<f64>,
    /// A frame survives an overlapping one only if it is this much stronger.
    pub capture_db: f64,
    /// 802.11 unicast attempts before a frame is given up (dot11ShortRetryLimit).
    pub retry_limit: u8,
    /// Carrier sense threshold, dBm (802.11p CCA at 10 MHz).
    pub cca_dbm: f64,
}

impl Default for RadioSpec {
    fn default() -> Self {
        RadioSpec {
            model: "vehicles-as-obstacles".into(),
            nakagami_m: None,
            alpha: None,
            tx_power_dbm: None,
            capture_db: 10.0,
            retry_limit: 7,
            cca_dbm: -85.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LteSpec {
    /// The fitted uplink model (convoy-models' lte_uplink) the UEs' uplink
    /// capacity comes from: "att", "tmobile" or "verizon".
    pub uplink_fit: String,
    /// Instead of the uplink model: uplink capacity as this share of the
    /// CSQ model's (downlink) capacity, as before the model existed.
    pub uplink_factor: Option<f64>,
    /// A neighbour cell must be this many CSQ steps (2 dB each) better.
    pub handover_hysteresis: u8,
    pub handover_interruption_ms: f64,
    /// Fixed air-interface one-way latency before HARQ retransmissions.
    pub air_ms: f64,
    /// Packets a UE's queue holds, each direction (drop-tail beyond).
    pub queue_packets: usize,
}

impl Default for LteSpec {
    fn default() -> Self {
        LteSpec {
            uplink_fit: "verizon".into(),
            uplink_factor: None,
            handover_hysteresis: 2,
            handover_interruption_ms: convoy_models::handover::DEFAULT_INTERRUPTION_MS as f64,
            air_ms: 5.0,
            queue_packets: 200,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoreSpec {
    /// eNodeB ↔ PGW one-way delay (12.5 ms makes the base RTT to the PGW 35 ms,
    /// the LTE model's base peak).
    pub backhaul_ms: f64,
    /// PGW ↔ cloud one-way delay.
    pub internet_ms: f64,
}

impl Default for CoreSpec {
    fn default() -> Self {
        CoreSpec {
            backhaul_ms: 12.5,
            internet_ms: 20.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SensingSpec {
    /// "ave", "dymo", "greedy" or "spray".
    pub protocol: String,
    #[serde(default = "default_bundle")]
    pub bundle_bytes: u16,
    /// Bundles per burst (sent 100 ms apart).
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Mean time between a vehicle's bursts (exponential).
    pub mean_interval_s: f64,
    /// Bursts start only in [start_s, stop_s) so late bundles get time to arrive.
    #[serde(default)]
    pub start_s: f64,
    pub stop_s: Option<f64>,
    /// Share of vehicles that sense (all by default).
    #[serde(default = "one")]
    pub share: f64,
    pub d_th_m: Option<f64>,
    pub spray_copies: Option<u8>,
}

fn default_bundle() -> u16 {
    512
}
fn default_burst() -> u32 {
    5
}
fn one() -> f64 {
    1.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadSpec {
    /// Share of vehicles uploading (0.1: one in ten).
    pub share: f64,
    /// Bytes per upload; a vehicle starts the next one when one completes.
    pub bytes: u64,
    /// convoy-proto's mode: `tide` (the default mode everywhere else too),
    /// `rlnc-bbr` or `rcdp`.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// Uploads start at a uniform time in [0, start_spread_s).
    #[serde(default = "default_spread")]
    pub start_spread_s: f64,
}

fn default_mode() -> String {
    "tide".into()
}
fn default_spread() -> f64 {
    5.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeSpec {
    /// "ar", "game" or "other" (thesis Table 8.1).
    pub workload: String,
    /// Share of vehicles that are clients (all by default).
    #[serde(default = "one")]
    pub share: f64,
    /// Probability a request goes to the edge rather than the cloud.
    pub edge_share: f64,
    /// "enodeb" or "pgw".
    pub placement: String,
    /// Concurrent requests the edge serves; the rest queue.
    pub capacity: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// "wifi", "lte" or "both".
    pub radios: String,
    /// Awareness-message period of each vehicle.
    #[serde(default = "default_cam")]
    pub cam_interval_s: f64,
    #[serde(default = "default_cam_bytes")]
    pub cam_bytes: u16,
    /// A message counts as delivered if it arrives within this time.
    #[serde(default = "default_deadline")]
    pub deadline_ms: f64,
    /// Where the intersection is; platoons form on the roads approaching it.
    pub intersection: Site,
    /// Vehicles within this distance of the intersection take part.
    #[serde(default = "default_zone")]
    pub zone_m: f64,
    /// A vehicle is on a leg if it is within this distance of the leg's
    /// axis (the roads through the intersection run along x and y); one
    /// on a parallel street nearby is not approaching this intersection.
    #[serde(default = "default_leg_width")]
    pub leg_width_m: f64,
    /// Wi-Fi channels available (13 in 2.4 GHz).
    #[serde(default = "default_channels")]
    pub channels: u8,
}

fn default_cam() -> f64 {
    0.5
}
fn default_cam_bytes() -> u16 {
    200
}
fn default_deadline() -> f64 {
    500.0
}
fn default_zone() -> f64 {
    300.0
}
fn default_leg_width() -> f64 {
    10.0
}
fn default_channels() -> u8 {
    13
}

/// The longest simulated time: a week.
const MAX_DURATION_S: f64 = 7.0 * 86_400.0;
/// The largest grid city: 1,000 blocks a side (200 km at 200 m blocks).
const MAX_GRID_BLOCKS: u32 = 1_000;
/// The most vehicles a grid city holds.
const MAX_GRID_VEHICLES: u32 = 1_000_000;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    // `error`, not `source`: a field of that name is the error's source,
    // and chain printers (`convoy: {e:#}`) then repeat the I/O message.
    #[error("{path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Sets a dotted key in a TOML table, creating tables on the way.
fn set_key(table: &mut toml::Table, key: &str, value: &str) -> Result<(), ScenarioError> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::Invalid(format!("bad key {key:?} in --set")));
    }
    let parsed: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| ScenarioError::Invalid(format!("--set {key}: {p} is not a table")))?;
    }
    t.insert(parts[parts.len() - 1].to_string(), parsed);
    Ok(())
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_with(path, &[])
    }

    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with(text, &[])
    }

    /// Parses with `KEY=VALUE` overrides applied first (dotted keys, e.g.
    /// `sensing.protocol=dymo`; a value that is not TOML is taken as a string).
    pub fn parse_with(text: &str, sets: &[(String, String)]) -> Result<Scenario, ScenarioError> {
        let perr = |m: String| ScenarioError::Parse {
            path: "<scenario>".into(),
            message: m.trim().replace('\n', " "),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| perr(e.to_string()))?;
        for (key, value) in sets {
            set_key(&mut table, key, value)?;
        }
        let s: Scenario = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| perr(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// `load`, with overrides.
    pub fn load_with(path: &Path, sets: &[(String, String)]) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Read {
            path: path.display().to_string(),
            error,
        })?;
        let mut s = Scenario::parse_with(&text, sets).map_err(|e| match e {
            ScenarioError::Parse { message, .. } => ScenarioError::Parse {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })?;
        s.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(s)
    }

    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// What a scenario may ask for. The limits stop a slip of the keyboard
    /// (`--set mobility.grid.vehicles=1000000000`) from ending in an
    /// allocation abort or a run that never ends; the 10,000-vehicle bench
    /// city is 78 blocks a side.
    fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: String| Err(ScenarioError::Invalid(m));
        if !(self.duration_s > 0.0 && self.duration_s <= MAX_DURATION_S) {
            return bad(format!(
                "duration_s must be positive and at most {MAX_DURATION_S} (a week), not {}",
                self.duration_s
            ));
        }
        match (&self.mobility.fcd, &self.mobility.grid) {
            (Some(_), Some(_)) | (None, None) => {
                return bad("mobility needs exactly one of `fcd` or `grid`".into())
            }
            (None, Some(g)) if g.blocks == 0 || g.block_m <= 0.0 || g.speed_mps <= 0.0 => {
                return bad("mobility.grid needs blocks ≥ 1, block_m > 0 and speed_mps > 0".into())
            }
            (None, Some(g)) if g.blocks > MAX_GRID_BLOCKS || g.vehicles > MAX_GRID_VEHICLES => {
                return bad(format!(
                    "mobility.grid holds at most {MAX_GRID_BLOCKS} blocks a side and \
                     {MAX_GRID_VEHICLES} vehicles, not {} and {}",
                    g.blocks, g.vehicles
                ))
            }
            _ => {}
        }
        if let Some(s) = &self.sensing {
            s.protocol
                .parse::<convoy_ave::Protocol>()
                .map_err(ScenarioError::Invalid)?;
            if self.rsu.is_empty() {
                return bad("sensing needs at least one [[rsu]]".into());
            }
            if s.mean_interval_s.is_nan()
                || s.mean_interval_s <= 0.0
                || !(0.0..=1.0).contains(&s.share)
                || s.burst == 0
            {
                return bad(
                    "sensing needs mean_interval_s > 0, burst ≥ 1 and share in [0, 1]".into(),
                );
            }
        }
        if let Some(u) = &self.upload {
            u.mode
                .parse::<convoy_proto::Mode>()
                .map_err(ScenarioError::Invalid)?;
            if !(0.0..=1.0).contains(&u.share) || u.bytes == 0 {
                return bad("upload needs share in [0, 1] and bytes ≥ 1".into());
            }
        }
        if let Some(e) = &self.edge {
            if !["ar", "game", "other"].contains(&e.workload.as_str()) {
                return bad(format!(
                    "edge.workload {:?}: use ar, game or other",
                    e.workload
                ));
            }
            if !["enodeb", "pgw"].contains(&e.placement.as_str()) {
                return bad(format!(
                    "edge.placement {:?}: use enodeb or pgw",
                    e.placement
                ));
            }
            if !(0.0..=1.0).contains(&e.edge_share) || e.capacity == 0 {
                return bad("edge needs edge_share in [0, 1] and capacity ≥ 1".into());
            }
        }
        if let Some(c) = &self.clusters {
            if !["wifi", "lte", "both"].contains(&c.radios.as_str()) {
                return bad(format!(
                    "clusters.radios {:?}: use wifi, lte or both",
                    c.radios
                ));
            }
            if c.channels == 0 || c.cam_interval_s.is_nan() || c.cam_interval_s <= 0.0 {
                return bad("clusters needs channels ≥ 1 and cam_interval_s > 0".into());
            }
        }
        if convoy_models::lte_uplink::UplinkFit::from_name(&self.lte.uplink_fit).is_none() {
            return bad(format!(
                "lte.uplink_fit {:?}: use att, tmobile or verizon",
                self.lte.uplink_fit
            ));
        }
        if let Some(f) = self.lte.uplink_factor {
            if !(f > 0.0 && f.is_finite()) {
                return bad(format!("lte.uplink_factor must be positive, not {f}"));
            }
        }
        let needs_lte = self.upload.is_some()
            || self.edge.is_some()
            || self.clusters.as_ref().is_some_and(|c| c.radios != "wifi");
        if needs_lte && self.enodeb.is_empty() {
            return bad(
                "uploads, edge requests and LTE clusters need at least one [[enodeb]]".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.vehicles.wave_share)
            || !(0.0..=1.0).contains(&self.vehicles.lte_share)
        {
            return bad("vehicles.wave_share and vehicles.lte_share must be in [0, 1]".into());
        }
        if self.radio.retry_limit == 0 {
            return bad("radio.retry_limit must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_grid_scenario_parses() {
        let s = Scenario::parse(
            "duration_s = 10\n[mobility]\ngrid = { blocks = 2, vehicles = 5 }\n[[rsu]]\nx = 0\ny = 0\n\
             [sensing]\nprotocol = \"ave\"\nmean_interval_s = 5\n",
        )
        .unwrap();
        assert_eq!(s.rsu.len(), 1);
        assert_eq!(s.radio.retry_limit, 7);
    }

    #[test]
    fn overrides_replace_and_add_keys() {
        let text = "duration_s = 10\n[mobility]\ngrid = { blocks = 2, vehicles = 5 }\n[[rsu]]\nx = 0\ny = 0\n\
             [sensing]\nprotocol = \"ave\"\nmean_interval_s = 5\n";
        let sets = vec![
            ("sensing.protocol".to_string(), "dymo".to_string()),
            ("duration_s".to_string(), "20".to_string()),
            ("radio.capture_db".to_string(), "6.5".to_string()),
        ];
        let s = Scenario::parse_with(text, &sets).unwrap();
        assert_eq!(s.sensing.unwrap().protocol, "dymo");
        assert_eq!(s.duration_s, 20.0);
        assert_eq!(s.radio.capture_db, 6.5);
        let bad = vec![("duration_s.x".to_string(), "1".to_string())];
        assert!(Scenario::parse_with(text, &bad).is_err());
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Scenario::parse(
            "duration_s = 10\n[mobility]\ngrid = { blocks = 2, vehicles = 5 }\ntypo = 1\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("typo"), "{e}");
        let e = Scenario::parse("duration_s = 10\n[mobility]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one"), "{e}");
        let e = Scenario::parse(
            "duration_s = 10\n[mobility]\ngrid = { blocks = 2, vehicles = 5 }\n[upload]\nshare = 0.1\nbytes = 10\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("enodeb"), "{e}");
    }

    #[test]
    fn a_city_or_a_run_too_large_to_simulate_is_refused_before_it_starts() {
        let text = "duration_s = 10\n[mobility]\ngrid = { blocks = 2, vehicles = 5 }\n[[rsu]]\nx = 0\ny = 0\n\
             [sensing]\nprotocol = \"ave\"\nmean_interval_s = 5\n";
        for (key, value, needle) in [
            ("mobility.grid.vehicles", "1000000000", "vehicles"),
            ("mobility.grid.blocks", "100000000", "blocks"),
            ("duration_s", "1e12", "a week"),
        ] {
            let sets = vec![(key.to_string(), value.to_string())];
            let e = Scenario::parse_with(text, &sets).unwrap_err().to_string();
            assert!(e.contains(needle), "{key}={value}: {e}");
        }
        // The limits themselves are allowed.
        let sets = vec![("mobility.grid.vehicles".to_string(), "1000000".to_string())];
        assert!(Scenario::parse_with(text, &sets).is_ok());
    }
}
