//! `convoy fleet add / list / revoke / token`: the server's registry of
//! vehicles and operators, kept in the catalog (`DIR/.convoy-catalog.db`,
//! or the PostgreSQL database several servers share).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use convoy_net::auth::validate_identity_name;
use convoy_net::parse_server_key;
use convoy_proto::crypto::hex;

/// The catalog file inside a server's directory.
pub const CATALOG_FILE: &str = ".convoy-catalog.db";

/// Where the catalog is: `--catalog URL`, else `DIR/.convoy-catalog.db`.
#[derive(Args, Clone, Debug)]
pub struct CatalogOpts {
    /// The server's storage directory (the catalog is DIR/.convoy-catalog.db).
    #[arg(long, value_name = "DIR", required_unless_present = "catalog")]
    pub dir: Option<PathBuf>,
    /// A catalog elsewhere: postgres://USER@HOST:PORT/DB, or a SQLite file.
    #[arg(long, value_name = "URL")]
    pub catalog: Option<String>,
}

impl CatalogOpts {
    pub fn url(&self) -> Result<String> {
        catalog_url(self.catalog.as_deref(), self.dir.as_deref())
    }
}

pub fn catalog_url(catalog: Option<&str>, dir: Option<&Path>) -> Result<String> {
    match (catalog, dir) {
        (Some(c), _) => Ok(c.to_owned()),
        (None, Some(d)) => {
            if !d.is_dir() {
                bail!("{}: not a directory", d.display());
            }
            Ok(d.join(CATALOG_FILE).to_string_lossy().into_owned())
        }
        (None, None) => bail!("give --dir DIR or --catalog URL"),
    }
}

#[derive(Subcommand)]
pub enum FleetCommand {
    /// Register a vehicle: `convoy fleet add truck-7 truck-7.key.pub --dir DIR`.
    /// Its key may then connect; it writes and reads only under truck-7/.
    Add(AddArgs),
    /// List registered vehicles and operators.
    List(ListArgs),
    /// Refuse a vehicle's key from now on, including its open connections
    /// (within about a second); its data stays.
    Revoke(RevokeArgs),
    /// Print an HTTP token for a registered name, for the web view and its
    /// JSON API (`Authorization: Bearer TOKEN`, or the page's login): it
    /// expires, may be confined to one vehicle, and is read-only.
    Token(TokenArgs),
    /// Issue a request to a vehicle over its control stream (queued while
    /// it is away): upload, collect, link, status. Needs an operator's
    /// token.
    Request(crate::fleet_request::RequestArgs),
    /// Deploy a campaign (signals, triggers, windows kept around them) to
    /// vehicles as its next version, or list versions. Needs an
    /// operator's token.
    Campaign(crate::fleet_campaign::CampaignArgs),
    /// Measure the server side: telemetry indexed per second on one core,
    /// and the map's fleet and track queries over HTTP on 1,000 vehicles.
    Bench(crate::fleet_bench::BenchArgs),
}

#[derive(Args)]
pub struct AddArgs {
    /// 1-64 of A-Z a-z 0-9 - _ . (also the namespace its files go under).
    pub name: String,
    /// Its public key: KEY.pub from `convoy keygen`, or 64 hex digits.
    pub key: String,
    /// An operator: reads every vehicle's data.
    #[arg(long)]
    pub operator: bool,
    #[command(flatten)]
    pub catalog: CatalogOpts,
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub catalog: CatalogOpts,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RevokeArgs {
    pub name: String,
    #[command(flatten)]
    pub catalog: CatalogOpts,
}

#[derive(Args)]
pub struct TokenArgs {
    pub name: String,
    /// How long the token lives: a number and s, m, h or d.
    #[arg(long, value_name = "LIFETIME", default_value = "30d")]
    pub expires: String,
    /// Confine the token to this vehicle's data (an operator's token for
    /// one vehicle; a vehicle's own token is confined to it anyway).
    #[arg(long, value_name = "VEHICLE")]
    pub vehicle: Option<String>,
    /// The server's private key file (tokens are derived from it).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    #[command(flatten)]
    pub catalog: CatalogOpts,
}

pub fn run(cmd: FleetCommand) -> Result<()> {
    let now = convoy_telemetry::now_ns();
    match cmd {
        FleetCommand::Bench(a) => return crate::fleet_bench::run(a),
        FleetCommand::Request(a) => return crate::fleet_request::run(a),
        FleetCommand::Campaign(a) => return crate::fleet_campaign::run(a),
        FleetCommand::Add(a) => {
            validate_identity_name(&a.name).map_err(anyhow::Error::msg)?;
            let key = parse_server_key(&a.key).with_context(|| format!("reading key {}", a.key))?;
            let role = if a.operator { "operator" } else { "vehicle" };
            let mut c = convoy_catalog::open(&a.catalog.url()?)?;
            c.add_vehicle(&a.name, &hex(&key), role, now)?;
            println!("registered {role} {} with key {}", a.name, hex(&key));
        }
        FleetCommand::List(a) => {
            let mut c = convoy_catalog::open(&a.catalog.url()?)?;
            let rows = c.vehicles()?;
            if a.json {
                println!("{}", serde_json::json!({ "vehicles": rows }));
            } else if rows.is_empty() {
                println!("no vehicles registered (convoy fleet add NAME KEY.pub)");
            } else {
                println!("{:<24} {:<9} {:<8} key", "name", "role", "state");
                for v in rows {
                    let state = if v.revoked_ns.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    println!("{:<24} {:<9} {:<8} {}", v.name, v.role, state, v.key);
                }
            }
        }
        FleetCommand::Revoke(a) => {
            let mut c = convoy_catalog::open(&a.catalog.url()?)?;
            c.revoke_vehicle(&a.name, now)?;
            println!("revoked {}: its key is refused from now on", a.name);
        }
        FleetCommand::Token(a) => {
            let server = convoy_net::load_keypair(&a.key)?;
            let mut c = convoy_catalog::open(&a.catalog.url()?)?;
            if !c.vehicles()?.iter().any(|v| v.name == a.name) {
                bail!("no vehicle or operator named {:?} in the registry", a.name);
            }
            let lifetime =
                convoy_web::token::parse_lifetime(&a.expires).map_err(anyhow::Error::msg)?;
            if let Some(v) = &a.vehicle {
                validate_identity_name(v).map_err(anyhow::Error::msg)?;
            }
            let claims = convoy_web::token::Claims {
                name: a.name.clone(),
                expires: (now / 1_000_000_000) as u64 + lifetime,
                vehicle: a.vehicle.clone(),
            };
            println!("{}", convoy_web::token::issue(&server.private, &claims));
        }
    }
    Ok(())
}
