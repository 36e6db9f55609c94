//! `convoy agent --config agent.toml` and `convoy agent status`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use convoy_agent::config::Config;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AgentArgs {
    #[command(subcommand)]
    pub command: Option<AgentCommand>,
    /// The agent's configuration (docs/SERVICE.md).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Exit once stdin has ended and every segment is acknowledged
    /// (for scripts and tests; an agent on a vehicle runs until stopped).
    #[arg(long)]
    pub until_idle: bool,
    /// Serve the agent's Prometheus metrics at http://ADDR/metrics (spool
    /// bytes per class, per-link budget used, the lanes' state, the age of
    /// the oldest unacknowledged segment), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub log: crate::logging::LogOpts,
}

#[derive(Subcommand)]
pub enum AgentCommand {
    /// The spool (per class: waiting, acknowledged, dropped), the lanes,
    /// the link in use and the last upload.
    Status {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// One JSON document on stdout.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: AgentArgs) -> Result<()> {
    match args.command {
        Some(AgentCommand::Status { config, json }) => status(&config, json),
        None => {
            let Some(path) = args.config else {
                bail!("give --config agent.toml (docs/SERVICE.md has an example)");
            };
            args.log.init("info")?;
            let cfg = Config::load(&path).map_err(anyhow::Error::msg)?;
            // Every event of the agent, on every thread, names the vehicle:
            // `name` in the configuration, else its key file's name
            // (truck-7.key: truck-7). An error span, so that it is there
            // whatever level the filter keeps.
            let vehicle = cfg.name.clone().unwrap_or_else(|| {
                cfg.key
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            let span =
                tracing::error_span!(target: "convoy::agent", "agent", vehicle = vehicle.as_str());
            let _entered = span.enter();
            // Kept for as long as the agent runs; dropping it stops it.
            let _exporter = match &args.metrics {
                Some(addr) => {
                    let m = crate::agent_metrics::AgentMetrics::new(&cfg)
                        .map_err(anyhow::Error::msg)?;
                    let e = convoy_web::exporter::Exporter::start(
                        crate::net_common::resolve_tcp(addr)?,
                        Arc::new(move |p: &mut convoy_web::metrics::Exposition| m.write(p)),
                    )
                    .map_err(anyhow::Error::msg)?;
                    tracing::info!(
                        target: "convoy::agent",
                        addr = %e.addr(),
                        "metrics on http://{}/metrics", e.addr()
                    );
                    Some(e)
                }
                None => None,
            };
            let stop = Arc::new(AtomicBool::new(false));
            crate::net_common::stop_on_signals(&stop)?;
            convoy_agent::run(cfg, stop, args.until_idle).map_err(anyhow::Error::msg)
        }
    }
}

fn status(path: &std::path::Path, json: bool) -> Result<()> {
    let cfg = Config::load(path).map_err(anyhow::Error::msg)?;
    let spool =
        convoy_agent::spool::Spool::open_readonly(&cfg.spool).map_err(anyhow::Error::msg)?;
    let classes = spool.status()?;
    let used = spool.used()?;
    let (preserved_segments, preserved_bytes) = spool.preserved();
    let snap = convoy_agent::status::read(&cfg.spool);
    let now = convoy_telemetry::now_ns();
    let running = snap.as_ref().is_some_and(|s| {
        now - s.written_ns < 5_000_000_000
            && std::path::Path::new(&format!("/proc/{}", s.pid)).exists()
    });
    if json {
        println!(
            "{}",
            serde_json::json!({
                "running": running, "spool_bytes": used, "quota_bytes": cfg.quota_bytes(),
                "preserved_segments": preserved_segments, "preserved_bytes": preserved_bytes,
                "classes": classes, "agent": snap,
            })
        );
        return Ok(());
    }
    println!(
        "agent: {}",
        if running {
            "running"
        } else {
            "not running (status below is from the spool)"
        }
    );
    println!(
        "spool: {} of {} bytes ({:.1} %) in {}",
        used,
        cfg.quota_bytes(),
        used as f64 * 100.0 / cfg.quota_bytes().max(1) as f64,
        cfg.spool.display()
    );
    println!(
        "preserved: {preserved_bytes} bytes in {preserved_segments} segments \
         (asked for by requests, or campaign windows; never dropped by the overflow rule)"
    );
    for c in snap.iter().flat_map(|s| &s.campaigns) {
        if c.withdrawn {
            println!(
                "campaign {} withdrawn at version {}: {} triggers fired, {} windows spooled before (they still upload)",
                c.name, c.version, c.triggers_fired, c.windows_spooled
            );
            continue;
        }
        println!(
            "campaign {} version {}: {} triggers fired, {} windows ({} samples) spooled, {} lost",
            c.name,
            c.version,
            c.triggers_fired,
            c.windows_spooled,
            c.samples_spooled,
            c.windows_lost
        );
    }
    println!(
        "{:<10} {:>8} {:>12} {:>8} {:>14} {:>8} {:>12} {:>8}",
        "class", "waiting", "bytes", "acked", "bytes", "dropped", "bytes", "refused"
    );
    for c in &classes {
        println!(
            "{:<10} {:>8} {:>12} {:>8} {:>14} {:>8} {:>12} {:>8}",
            c.class,
            c.queued,
            c.queued_bytes,
            c.acked,
            c.acked_bytes,
            c.dropped,
            c.dropped_bytes,
            c.refused
        );
    }
    if let Some(s) = snap {
        println!("link: {}", s.link.as_deref().unwrap_or("none"));
        for (name, lane) in [("live", &s.live), ("backlog", &s.backlog)] {
            println!(
                "{name} lane: {} ({} uploads, {} bytes)",
                lane.state, lane.uploads, lane.bytes
            );
            if let Some(u) = &lane.last_upload {
                println!(
                    "  last upload: {} ({} bytes, {}, on {}) {:.1} s ago, acknowledged {:.1} s after it was segmented",
                    u.name,
                    u.bytes,
                    u.class,
                    u.link,
                    (now - u.at_ns) as f64 / 1e9,
                    u.age_seconds
                );
            }
            if let Some(e) = &lane.last_error {
                println!("  last error: {e}");
            }
        }
        println!(
            "input: {} samples, {} lines rejected{}",
            s.samples_in,
            s.lines_rejected,
            s.last_rejection
                .map(|r| format!(" (last: {r})"))
                .unwrap_or_default()
        );
        if s.samples_lost > 0 {
            println!(
                "lost to the overflow rule or a full disk: {} samples",
                s.samples_lost
            );
        }
        if s.can_frames_decoded + s.can_frames_unknown + s.can_frames_short > 0 {
            println!(
                "CAN: {} frames decoded, {} with ids not in the DBC, {} too short for their message",
                s.can_frames_decoded, s.can_frames_unknown, s.can_frames_short
            );
        }
        if s.mqtt_messages > 0 {
            println!(
                "MQTT: {} messages, {} matching no mapped field",
                s.mqtt_messages, s.mqtt_unmapped
            );
        }
        if s.kuksa_updates > 0 {
            println!("KUKSA: {} subscription updates", s.kuksa_updates);
        }
    }
    Ok(())
}
