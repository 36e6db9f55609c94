//! `convoy trace ...`: the vehicular channel models of SPEC S5 from the
//! command line (crates/convoy-models), and per-vehicle link traces from
//! SUMO mobility for the emulator and the simulator (docs/MODELS.md).

mod from_mobility;
mod lte;
mod lte_up;
mod mac;
mod obstacle;
mod pdr;
mod scale;
mod uplink_fit;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use convoy_models::dsrc::{Dsrc, DsrcPreset};
use convoy_models::shadowing::{Buildings, ShadowingParams};
use convoy_models::Point;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// 802.11p packet-delivery ratio against distance: modified free-space
    /// path loss with exponent α plus Nakagami-m fading.
    ///
    /// The paper's two fits: `--m 0.7 --alpha 2.3` (vehicles as obstacles,
    /// PDR ≥ 90 % to about 100 m) and `--m 1 --alpha 2.2` (line of sight,
    /// PDR < 5 % at 1400 m). Transmit power, noise floor and receive
    /// threshold are printed with the curve and can be changed.
    Pdr(pdr::PdrArgs),
    /// LTE traces. Downwards (the default), the empirical Dublin model:
    /// per-second capacity and RTT from the signal quality CSQ, with
    /// handovers and residual loss, as a convoy time-series trace; with
    /// --table its moments beside the paper's fits. `--direction up`: the
    /// uplink model (power limit, TTI grants, HARQ; fitted to the shared
    /// drive traces) as a Mahimahi trace.
    Lte(lte::LteArgs),
    /// Building shadowing (Sommer et al.) on the straight line between two
    /// points: walls crossed, metres inside, dB lost.
    Shadow(obstacle::ShadowArgs),
    /// The city obstacle coefficient of a SUMO network and its buildings:
    /// the share of rays from street points that reach another street.
    ObstacleCoefficient(obstacle::ObstacleArgs),
    /// One convoy time-series trace per vehicle per interface (802.11p to the
    /// nearest RSU, LTE to the nearest eNodeB) from SUMO FCD output.
    FromMobility(Box<from_mobility::FromMobilityArgs>),
    /// A slower or faster twin of a Mahimahi or time-series trace, with its
    /// bursts, gaps and outages where they were: `scale --factor 0.25 IN
    /// OUT` turns a 4 Mbit/s LTE uplink into a 1 Mbit/s one.
    Scale(scale::ScaleArgs),
    /// What 802.11 retries leave of a PHY rate for 1500-byte packets, and
    /// the loss after them: `mac --rate-mbps 20 --loss 0.1 --mac
    /// 80211:retries=4` (docs/MODELS.md, "802.11 MAC retries").
    Mac(mac::MacArgs),
    /// The LTE uplink model against Mahimahi uplink traces: mean,
    /// per-second percentiles, lag-1 s autocorrelation, gaps and outages of
    /// each trace beside the model's, with the stored fit or a new search
    /// (`uplink-fit --search ../shared/traces/*.up`).
    UplinkFit(uplink_fit::UplinkFitArgs),
}

pub fn run(cmd: TraceCommand) -> Result<()> {
    match cmd {
        TraceCommand::Pdr(a) => pdr::run(&a),
        TraceCommand::Lte(a) => lte::run(&a),
        TraceCommand::Shadow(a) => obstacle::run_shadow(&a),
        TraceCommand::ObstacleCoefficient(a) => obstacle::run_coefficient(&a),
        TraceCommand::FromMobility(a) => from_mobility::run(&a),
        TraceCommand::Scale(a) => scale::run(&a),
        TraceCommand::Mac(a) => mac::run(&a),
        TraceCommand::UplinkFit(a) => uplink_fit::run(&a),
    }
}

/// The radio a curve or trace is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelName {
    /// IEEE 802.11p (ITS-G5 / DSRC), 5.9 GHz.
    #[value(name = "80211p")]
    Dsrc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PresetArg {
    /// m = 0.7, α = 2.3 (urban traffic; the default)
    VehiclesAsObstacles,
    /// m = 1, α = 2.2 (clear line of sight)
    Los,
}

/// The 802.11p channel options shared by `pdr` and `from-mobility`.
#[derive(Args, Clone, Debug)]
pub struct DsrcArgs {
    /// Fit to start from; --m and --alpha override its values.
    #[arg(long, value_enum, default_value = "vehicles-as-obstacles")]
    preset: PresetArg,
    /// Nakagami shape m (0.7 obstructed, 1–1.1 line of sight).
    #[arg(long)]
    m: Option<f64>,
    /// Path-loss exponent α (2 is free space).
    #[arg(long)]
    alpha: Option<f64>,
    /// Transmit power in dBm.
    #[arg(long, value_name = "DBM", default_value_t = Dsrc::DEFAULT_TX_POWER_DBM, allow_negative_numbers = true)]
    tx_power_dbm: f64,
    /// Noise floor in dBm (−174 dBm/Hz + 10 MHz + 6 dB noise figure).
    #[arg(long, value_name = "DBM", default_value_t = Dsrc::DEFAULT_NOISE_FLOOR_DBM, allow_negative_numbers = true)]
    noise_floor_dbm: f64,
    /// SNR a frame needs, dB; receive threshold = noise floor + this.
    #[arg(long, value_name = "DB", default_value_t = Dsrc::DEFAULT_MIN_SNR_DB, allow_negative_numbers = true)]
    min_snr_db: f64,
}

impl DsrcArgs {
    pub fn channel(&self) -> Result<Dsrc> {
        let base = Dsrc::preset(match self.preset {
            PresetArg::VehiclesAsObstacles => DsrcPreset::VehiclesAsObstacles,
            PresetArg::Los => DsrcPreset::LineOfSight,
        });
        Ok(Dsrc {
            m: self.m.unwrap_or(base.m),
            alpha: self.alpha.unwrap_or(base.alpha),
            tx_power_dbm: self.tx_power_dbm,
            noise_floor_dbm: self.noise_floor_dbm,
            min_snr_db: self.min_snr_db,
            ..base
        }
        .validated()?)
    }
}

/// Reads a whole text file, naming it in the error.
pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Buildings from a SUMO polygon file: polygons whose type starts with
/// `kind` (`*` for every polygon).
pub fn load_buildings(path: &Path, kind: &str, params: ShadowingParams) -> Result<Buildings> {
    let text = read_text(path)?;
    let polys = convoy_models::sumo::parse_polys(&text, &path.display().to_string())?;
    let chosen: Vec<_> = polys
        .iter()
        .filter(|p| kind == "*" || p.kind.starts_with(kind))
        .map(|p| p.to_building())
        .collect();
    if chosen.is_empty() && !polys.is_empty() {
        bail!(
            "{}: none of its {} polygons has a type starting with {kind:?} (use --poly-type '*' for all)",
            path.display(),
            polys.len()
        );
    }
    Ok(Buildings::new(chosen, params))
}

/// `x,y` in network metres.
pub fn parse_point(s: &str) -> std::result::Result<Point, String> {
    let (x, y) = s
        .split_once(',')
        .ok_or_else(|| format!("expected x,y in metres, found {s:?}"))?;
    let p = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| format!("expected x,y in metres, found {s:?}"))
    };
    Ok(Point::new(p(x)?, p(y)?))
}

/// Points from `--x x,y` options and from a file of `x,y` (or `id,x,y`)
/// lines; `#` starts a comment.
pub fn collect_points(inline: &[Point], file: Option<&PathBuf>, what: &str) -> Result<Vec<Point>> {
    let mut pts = inline.to_vec();
    if let Some(path) = file {
        for (i, line) in read_text(path)?.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split(',').collect();
            let xy = match fields.len() {
                2 => line.to_string(),
                3 => format!("{},{}", fields[1], fields[2]),
                _ => bail!(
                    "{}:{}: expected x,y or id,x,y, found {line:?}",
                    path.display(),
                    i + 1
                ),
            };
            pts.push(
                parse_point(&xy)
                    .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), i + 1))?,
            );
        }
    }
    if pts.is_empty() {
        bail!("no {what} positions: give --{what} X,Y or --{what}s FILE");
    }
    Ok(pts)
}

#[cfg(test)]
mod tests;
