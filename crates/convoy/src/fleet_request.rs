//! `convoy fleet request VEHICLE ...`: issues a request to a vehicle
//! (docs/SERVICE.md, "Requests"). Like `POST /api/requests`, it takes an
//! operator's token (checked with the server's key against the registry)
//! and queues the request in the catalog; the server holding the
//! vehicle's connection sends it within its poll period (100 ms).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use convoy_net::control::RequestBody;
use serde_json::json;

use crate::fleet_cmd::CatalogOpts;

#[derive(Args)]
pub struct RequestArgs {
    /// The vehicle's registered name.
    pub vehicle: String,
    /// An operator's token (`convoy fleet token OPERATOR`); a vehicle's
    /// token is refused.
    #[arg(long, value_name = "TOKEN")]
    pub token: String,
    /// The server's private key file (the token is checked with it).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    #[command(flatten)]
    pub catalog: CatalogOpts,
    /// Wait up to this many seconds for the request to finish, printing
    /// its acknowledgement and progress.
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<f64>,
    #[command(subcommand)]
    pub what: What,
}

#[derive(Subcommand)]
pub enum What {
    /// Report the agent's status now.
    Status,
    /// Upload these spool segments (names as in /api/uploads) or those
    /// made in a time range, now, at a priority.
    Upload {
        files: Vec<String>,
        #[arg(long)]
        from_ns: Option<i64>,
        #[arg(long)]
        to_ns: Option<i64>,
        /// events, telemetry, previews or bulk.
        #[arg(long, default_value = "events")]
        priority: String,
    },
    /// Send the latest value of these signals at a rate for a span.
    Collect {
        signals: Vec<String>,
        #[arg(long, default_value_t = 1.0)]
        rate_hz: f64,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Change a link rule (until the agent restarts).
    Link {
        name: String,
        /// "50MB", or "none".
        #[arg(long)]
        daily_budget: Option<String>,
        /// "2mbit", or "none".
        #[arg(long)]
        rate: Option<String>,
        #[arg(long, value_delimiter = ',')]
        classes: Option<Vec<String>>,
        #[arg(long)]
        metered: Option<bool>,
    },
    /// A request as JSON, as `POST /api/requests` takes its "request".
    Json { request: String },
}

fn body(what: What) -> Result<RequestBody> {
    let v = match what {
        What::Status => json!({"type": "status"}),
        What::Upload {
            files,
            from_ns,
            to_ns,
            priority,
        } => {
            json!({"type": "upload", "files": files, "from_ns": from_ns, "to_ns": to_ns, "priority": priority})
        }
        What::Collect {
            signals,
            rate_hz,
            seconds,
        } => json!({"type": "collect", "signals": signals, "rate_hz": rate_hz, "seconds": seconds}),
        What::Link {
            name,
            daily_budget,
            rate,
            classes,
            metered,
        } => json!({"type": "link", "name": name, "daily_budget": daily_budget, "rate": rate,
                    "classes": classes, "metered": metered}),
        What::Json { request } => return RequestBody::parse(&request).map_err(anyhow::Error::msg),
    };
    RequestBody::parse(&v.to_string()).map_err(anyhow::Error::msg)
}

/// Checks an operator's token with the server's key and the registry:
/// the operator's name and the token's vehicle scope, and the catalog.
pub(crate) fn operator(
    key: &std::path::Path,
    token: &str,
    catalog: &CatalogOpts,
    what: &str,
) -> Result<(String, Option<String>, Box<dyn convoy_catalog::Catalog>)> {
    let now = convoy_telemetry::now_ns();
    let server = convoy_net::load_keypair(key)?;
    let claims =
        convoy_web::token::verify(&server.private, token.trim(), (now / 1_000_000_000) as u64)
            .map_err(|e| anyhow::anyhow!("token refused: {e}"))?;
    let mut c = convoy_catalog::open(&catalog.url()?)?;
    let Some(who) = c.vehicle_by_name(&claims.name)? else {
        bail!("token refused: {} is not in the registry", claims.name);
    };
    if who.revoked_ns.is_some() {
        bail!("token refused: {} is revoked", who.name);
    }
    if who.role != "operator" {
        bail!("{what} need an operator's token: {} is a vehicle", who.name);
    }
    Ok((who.name, claims.vehicle, c))
}

pub fn run(a: RequestArgs) -> Result<()> {
    let now = convoy_telemetry::now_ns();
    let (name, scope, mut c) = operator(&a.key, &a.token, &a.catalog, "requests")?;
    if scope.as_deref().is_some_and(|v| v != a.vehicle) {
        bail!("this token is for another vehicle");
    }
    let parsed = body(a.what)?;
    let text = serde_json::to_string(&parsed)?;
    let row = c.add_request(&a.vehicle, parsed.kind(), &text, &name, now)?;
    println!("request {} queued for {}: {text}", row.id, a.vehicle);
    let Some(wait) = a.wait else {
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_secs_f64(wait.max(0.0));
    let (mut acked, mut progress) = (false, None);
    while Instant::now() < deadline {
        let r = c
            .requests(Some(&a.vehicle), 1000)?
            .into_iter()
            .find(|r| r.id == row.id);
        let Some(r) = r else {
            bail!("request {} vanished", row.id)
        };
        if let (false, Some(at)) = (acked, r.acked_ns) {
            acked = true;
            println!(
                "acknowledged by {} {:.1} ms after it was queued",
                a.vehicle,
                (at - r.created_ns) as f64 / 1e6
            );
        }
        if r.progress.is_some() && r.progress != progress {
            progress = r.progress.clone();
            println!("progress: {}", progress.as_deref().unwrap_or(""));
        }
        match r.state.as_str() {
            "done" => {
                println!("done: {}", r.result.unwrap_or_default());
                return Ok(());
            }
            "failed" => bail!("request {} failed: {}", r.id, r.error.unwrap_or_default()),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    bail!(
        "request {} not finished after {wait} s (it stays queued for the vehicle)",
        row.id
    )
}
