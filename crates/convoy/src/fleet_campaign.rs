//! `convoy fleet campaign deploy FILE --vehicles A,B`, `convoy fleet
//! campaign withdraw NAME [--vehicles A,B]` and `convoy fleet campaign
//! list` (docs/SERVICE.md, "Campaigns"). Like `POST /api/campaigns` and
//! `/api/campaigns/withdraw`, deploying and withdrawing take an
//! operator's token, record the campaign's next version in the catalog
//! and queue a `campaign` (or `withdraw`) request per vehicle, which the
//! server holding the vehicle's connection sends within its poll period
//! (100 ms), or on reconnection.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};

use crate::fleet_cmd::CatalogOpts;

#[derive(Args)]
pub struct CampaignArgs {
    /// An operator's token (`convoy fleet token OPERATOR`).
    #[arg(long, value_name = "TOKEN")]
    pub token: String,
    /// The server's private key file (the token is checked with it).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    #[command(flatten)]
    pub catalog: CatalogOpts,
    #[command(subcommand)]
    pub what: CampaignWhat,
}

#[derive(Subcommand)]
pub enum CampaignWhat {
    /// Deploy a campaign file to vehicles as its next version.
    Deploy {
        /// The campaign file (TOML).
        file: PathBuf,
        /// The vehicles, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        vehicles: Vec<String>,
        /// Wait up to this many seconds for every vehicle to run it.
        #[arg(long, value_name = "SECONDS")]
        wait: Option<f64>,
    },
    /// Withdraw a campaign: its vehicles stop it (no new triggers; windows
    /// already spooled still upload). Recorded as its next version.
    Withdraw {
        /// The campaign's name.
        name: String,
        /// Only these vehicles, comma-separated (default: every vehicle it
        /// was deployed to).
        #[arg(long, value_delimiter = ',')]
        vehicles: Vec<String>,
        /// Wait up to this many seconds for every vehicle to stop it.
        #[arg(long, value_name = "SECONDS")]
        wait: Option<f64>,
    },
    /// List campaign versions, newest first, and where each vehicle's stands.
    List {
        /// Only this campaign.
        #[arg(long)]
        name: Option<String>,
    },
}

pub fn run(a: CampaignArgs) -> Result<()> {
    let (who, scope, mut c) =
        crate::fleet_request::operator(&a.key, &a.token, &a.catalog, "campaigns")?;
    match a.what {
        CampaignWhat::Deploy {
            file,
            vehicles,
            wait,
        } => {
            if let Some(only) = &scope {
                if vehicles.iter().any(|v| v != only) {
                    bail!("this token is for another vehicle");
                }
            }
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let origin = file.display().to_string();
            let now = convoy_telemetry::now_ns();
            let row =
                convoy_web::campaigns::deploy(c.as_mut(), &origin, &text, &vehicles, &who, now)
                    .map_err(|(_, e)| anyhow::anyhow!(e))?;
            println!(
                "campaign {} version {} queued for {} (requests {:?})",
                row.name,
                row.version,
                row.vehicles.join(", "),
                row.requests
            );
            match wait {
                Some(w) => wait_for(c.as_mut(), &row, w, "running"),
                None => Ok(()),
            }
        }
        CampaignWhat::Withdraw {
            name,
            mut vehicles,
            wait,
        } => {
            if let Some(only) = &scope {
                if vehicles.is_empty() {
                    vehicles.push(only.clone());
                }
                if vehicles.iter().any(|v| v != only) {
                    bail!("this token is for another vehicle");
                }
            }
            let now = convoy_telemetry::now_ns();
            let row = convoy_web::campaigns::withdraw(c.as_mut(), &name, &vehicles, &who, now)
                .map_err(|(_, e)| anyhow::anyhow!(e))?;
            println!(
                "campaign {} withdrawn as version {}, queued for {} (requests {:?})",
                row.name,
                row.version,
                row.vehicles.join(", "),
                row.requests
            );
            match wait {
                Some(w) => wait_for(c.as_mut(), &row, w, "stopped"),
                None => Ok(()),
            }
        }
        CampaignWhat::List { name } => {
            for r in c.campaigns(name.as_deref(), 100)? {
                let mut states = Vec::new();
                for (v, id) in r.vehicles.iter().zip(&r.requests) {
                    if scope.as_deref().is_some_and(|o| o != v) {
                        continue;
                    }
                    let st = c
                        .requests(Some(v), 1000)?
                        .into_iter()
                        .find(|q| q.id == *id)
                        .map_or("?".to_string(), |q| q.state);
                    states.push(format!("{v}: {st}"));
                }
                println!(
                    "{} v{}{} by {} at {} ns: {}",
                    r.name,
                    r.version,
                    if r.withdrawn { " withdrawn" } else { "" },
                    r.issuer,
                    r.created_ns,
                    states.join(", ")
                );
            }
            Ok(())
        }
    }
}

/// Waits up to `wait` seconds for every vehicle of `row` to finish its
/// request, printing each as it does (`what`: "running", "stopped").
fn wait_for(
    c: &mut dyn convoy_catalog::Catalog,
    row: &convoy_catalog::CampaignRow,
    wait: f64,
    what: &str,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs_f64(wait.max(0.0));
    let mut left: Vec<(String, i64)> = row
        .vehicles
        .iter()
        .cloned()
        .zip(row.requests.iter().copied())
        .collect();
    while !left.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for (v, id) in left {
            let r = c.requests(Some(&v), 1000)?.into_iter().find(|r| r.id == id);
            match r.as_ref().map(|r| r.state.as_str()) {
                Some("done") => println!("{v}: {what} version {}", row.version),
                Some("failed") => println!(
                    "{v}: failed: {}",
                    r.and_then(|r| r.error).unwrap_or_default()
                ),
                _ => still.push((v, id)),
            }
        }
        left = still;
        std::thread::sleep(Duration::from_millis(20));
    }
    if !left.is_empty() {
        let names: Vec<&str> = left.iter().map(|(v, _)| v.as_str()).collect();
        bail!(
            "not yet {what} on {} after {wait} s (queued for when they connect)",
            names.join(", ")
        );
    }
    Ok(())
}
