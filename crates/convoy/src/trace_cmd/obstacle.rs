//! `convoy trace shadow` and `convoy trace obstacle-coefficient`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use convoy_models::obstacle::{city_profile, DEFAULT_RANGE_M};
use convoy_models::shadowing::ShadowingParams;
use convoy_models::sumo::parse_network;
use convoy_models::Point;
use serde::Serialize;

use super::{load_buildings, parse_point, read_text};

#[derive(Args, Clone, Debug)]
pub struct ShadowingOpts {
    /// Sommer et al.'s β: dB lost per wall crossed.
    #[arg(long, value_name = "DB", default_value_t = 9.0)]
    db_per_wall: f64,
    /// Sommer et al.'s γ: dB lost per metre inside a building.
    #[arg(long, value_name = "DB", default_value_t = 0.4)]
    db_per_metre: f64,
    /// Polygons whose type starts with this are buildings ('*': every polygon).
    #[arg(long, value_name = "TYPE", default_value = "building")]
    pub poly_type: String,
}

impl ShadowingOpts {
    pub fn params(&self) -> ShadowingParams {
        ShadowingParams {
            db_per_wall: self.db_per_wall,
            db_per_metre: self.db_per_metre,
        }
    }
}

#[derive(Args)]
pub struct ShadowArgs {
    /// SUMO polygon file with the buildings (polyconvert output).
    #[arg(long, value_name = "FILE")]
    poly: PathBuf,
    /// Transmitter, x,y in network metres.
    #[arg(long, value_parser = parse_point, allow_hyphen_values = true)]
    from: Point,
    /// Receiver, x,y in network metres.
    #[arg(long, value_parser = parse_point, allow_hyphen_values = true)]
    to: Point,
    #[command(flatten)]
    shadowing: ShadowingOpts,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ShadowReport {
    distance_m: f64,
    walls: u32,
    metres_inside: f64,
    loss_db: f64,
}

pub fn run_shadow(a: &ShadowArgs) -> Result<()> {
    let b = load_buildings(&a.poly, &a.shadowing.poly_type, a.shadowing.params())?;
    let s = b.shadow(a.from, a.to);
    let r = ShadowReport {
        distance_m: a.from.dist(a.to),
        walls: s.walls,
        metres_inside: s.metres_inside,
        loss_db: s.db,
    };
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{:.1} m line of sight: {} walls, {:.1} m inside buildings → {:.1} dB of shadowing",
            r.distance_m, r.walls, r.metres_inside, r.loss_db
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct ObstacleArgs {
    /// SUMO network (.net.xml).
    #[arg(long, value_name = "FILE")]
    net: PathBuf,
    /// SUMO polygon file with the buildings; without it the city is open ground.
    #[arg(long, value_name = "FILE")]
    poly: Option<PathBuf>,
    /// Rays to cast (the standard error is printed).
    #[arg(long, default_value_t = 20_000)]
    rays: usize,
    /// Length of a ray, metres.
    #[arg(long, value_name = "M", default_value_t = DEFAULT_RANGE_M)]
    range: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    shadowing: ShadowingOpts,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ProfileReport {
    net: String,
    poly: Option<String>,
    streets: usize,
    total_street_km: f64,
    mean_street_m: f64,
    buildings: usize,
    rays: usize,
    range_m: f64,
    obstacle_coefficient: f64,
    std_error: f64,
}

pub fn run_coefficient(a: &ObstacleArgs) -> Result<()> {
    let net = parse_network(&read_text(&a.net)?, &a.net.display().to_string())?;
    let buildings = match &a.poly {
        Some(p) => load_buildings(p, &a.shadowing.poly_type, a.shadowing.params())?,
        None => Default::default(),
    };
    crate::progress::update("casting rays");
    let p = city_profile(&net, &buildings, a.rays, a.range, a.seed)?;
    crate::progress::clear();
    let r = ProfileReport {
        net: a.net.display().to_string(),
        poly: a.poly.as_ref().map(|p| p.display().to_string()),
        streets: p.streets,
        total_street_km: p.total_street_km,
        mean_street_m: p.mean_street_m,
        buildings: p.buildings,
        rays: p.rays,
        range_m: p.range_m,
        obstacle_coefficient: p.obstacle_coefficient,
        std_error: p.std_error,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{}: {} streets, {:.2} km in total, {:.2} m on average; {} buildings\n\
             obstacle coefficient {:.4} ± {:.4} ({} rays of {} m)",
            r.net,
            r.streets,
            r.total_street_km,
            r.mean_street_m,
            r.buildings,
            r.obstacle_coefficient,
            r.std_error,
            r.rays,
            r.range_m
        );
    }
    Ok(())
}
