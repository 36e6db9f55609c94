//! `convoy serve` as the fleet data service: the registry authorizes
//! every connection, each durable upload is queued for the indexer before
//! it is acknowledged, the indexer runs beside the server, and `--http`
//! adds the web view. Without a registry (no catalog in DIR, no
//! `--catalog`, no `--fleet`) `convoy serve` stays the open file server
//! the transport experiments use.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use convoy_ingest::{IndexEvent, Indexer, QueueHook, RegistryAuthorizer, Store};
use convoy_net::ServerOptions;

use crate::fleet_cmd::{catalog_url, CATALOG_FILE};

/// The fleet options of `convoy serve`.
#[derive(clap::Args, Clone, Debug)]
pub struct FleetServeOpts {
    /// Run as the fleet data service even before a vehicle is registered
    /// (a catalog in DIR, or --catalog, turns it on too).
    #[arg(long)]
    pub fleet: bool,
    /// The catalog (registry, segments, last state, tracks):
    /// postgres://USER@HOST:PORT/DB to share it between servers, or a
    /// SQLite file (default DIR/.convoy-catalog.db).
    #[arg(long, value_name = "URL")]
    pub catalog: Option<String>,
    /// Where indexed uploads and Parquet telemetry go: s3://BUCKET[/PREFIX]
    /// (credentials and endpoint from AWS_* variables), or DIR itself
    /// when left out.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Serve the web view and JSON API on this address (e.g. 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Serve the web view over TLS (HTTPS, HTTP/2 by ALPN) with this PEM
    /// certificate chain and PEM private key.
    #[arg(long, num_args = 2, value_names = ["CERT", "KEY"], requires = "http")]
    pub http_tls: Option<Vec<std::path::PathBuf>>,
    /// A GeoJSON file drawn under the vehicles on the map (roads, depots).
    #[arg(long, value_name = "FILE")]
    pub overlay: Option<std::path::PathBuf>,
    /// Catalog and store are shared with other servers: leave claims of
    /// segments others are indexing alone at start-up.
    #[arg(long)]
    pub shared: bool,
}

impl FleetServeOpts {
    pub fn enabled(&self, dir: &Path) -> bool {
        self.fleet
            || self.catalog.is_some()
            || self.store.is_some()
            || self.http.is_some()
            || dir.join(CATALOG_FILE).exists()
    }
}

/// The fleet service's parts that run beside the transport server.
pub struct FleetService {
    /// Counted from the server's and the indexer's events, for `/metrics`.
    pub counters: Arc<crate::service_metrics::ServiceCounters>,
    stop: Arc<AtomicBool>,
    indexer: Option<std::thread::JoinHandle<()>>,
    _web: Option<convoy_web::Web>,
}

impl Drop for FleetService {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.indexer.take() {
            let _ = t.join();
        }
    }
}

/// Where `convoy serve --json` writes the service's events (stdout), or
/// nothing without --json; the log (tracing) gets them either way.
pub type JsonOut = Arc<dyn Fn(serde_json::Value) + Send + Sync>;

/// Sets up authorization, the commit hook, the indexer and the web view.
pub fn start(
    opts: &FleetServeOpts,
    dir: &Path,
    server: &mut ServerOptions,
    json: JsonOut,
) -> Result<FleetService> {
    let url = catalog_url(opts.catalog.as_deref(), Some(dir))?;
    let open = || convoy_catalog::open(&url).with_context(|| format!("opening the catalog {url}"));
    let registered = open()?.vehicles()?.len();
    let store = Arc::new(Store::open(opts.store.as_deref(), dir)?);
    let (wake_tx, wake_rx) = std::sync::mpsc::sync_channel(1024);
    let registry = Arc::new(RegistryAuthorizer::new(open()?));
    server.authorizer = Some(registry.clone());
    server.commit_hook = Some(Arc::new(QueueHook::new(open()?, wake_tx)));
    let stop = Arc::new(AtomicBool::new(false));
    let rjson = json.clone();
    let dispatch = convoy_ingest::requests::RequestDispatch::start(
        open()?,
        stop.clone(),
        move |e| {
            use convoy_ingest::requests::RequestLog::*;
            match e {
                ControlOpened { vehicle } => {
                    tracing::info!(target: "convoy::requests", vehicle = %vehicle, "control stream open")
                }
                RequestSent { vehicle, id, kind } => {
                    tracing::info!(target: "convoy::requests", vehicle = %vehicle, id = %id, kind = %kind, "request sent")
                }
                RequestAcked {
                    vehicle,
                    id,
                    millis,
                } => tracing::info!(
                    target: "convoy::requests",
                    vehicle = %vehicle, id = %id, millis = *millis,
                    "request acknowledged"
                ),
                RequestFinished {
                    vehicle,
                    id,
                    state,
                    detail,
                } => tracing::info!(
                    target: "convoy::requests",
                    vehicle = %vehicle, id = %id, state = %state, detail = %detail,
                    "request finished"
                ),
                ControlError { vehicle, error } => {
                    tracing::warn!(target: "convoy::requests", vehicle = %vehicle, error = %error, "control stream error")
                }
            }
            rjson(serde_json::to_value(e).unwrap_or_default());
        },
    );
    server.control_hook = Some(dispatch.clone());
    let ijson = json.clone();
    let counters = Arc::new(crate::service_metrics::ServiceCounters::default());
    let icounters = counters.clone();
    // The web view's live feed hears of each segment the indexer commits
    // (indexed, or kept as not indexable) at once; a retry changed nothing.
    let changes = convoy_web::ChangeSignal::new();
    let ichanges = changes.clone();
    let indexer = Indexer::new(open()?, store.clone(), dir, move |e: &IndexEvent| {
        if !matches!(e, IndexEvent::IndexRetry { .. }) {
            ichanges.ring();
        }
        icounters.index_event(e);
        crate::service_log::index_event(e);
        ijson(serde_json::to_value(e).unwrap_or_default());
    });
    let single = !opts.shared;
    let stop2 = stop.clone();
    let indexer = std::thread::Builder::new()
        .name("convoy-indexer".into())
        .spawn(move || indexer.run(stop2, wake_rx, single))?;
    let web = match &opts.http {
        Some(addr) => {
            let web = convoy_web::Web::start(convoy_web::WebConfig {
                listen: crate::net_common::resolve_tcp(addr)?,
                catalog_url: url.clone(),
                store: store.clone(),
                server_private: server.keypair.private,
                overlay: opts.overlay.clone(),
                tls: opts.http_tls.as_ref().map(|v| (v[0].clone(), v[1].clone())),
                extra_metrics: Some({
                    let c = counters.clone();
                    Arc::new(move |p: &mut convoy_web::metrics::Exposition| c.write(p))
                }),
                on_request: Some({
                    let d = dispatch.clone();
                    Arc::new(move || d.queued())
                }),
                changes: Some(changes),
            })
            .map_err(anyhow::Error::msg)?;
            json(serde_json::json!({"event": "http", "addr": web.addr(), "url": web.url()}));
            tracing::info!(
                target: "convoy::http",
                addr = %web.addr(), url = %web.url(),
                "web view and API listening (log in with a token from convoy fleet token NAME)"
            );
            Some(web)
        }
        None => None,
    };
    reload_on_hangup(
        registry,
        web.as_ref().and_then(|w| w.certificate()),
        json.clone(),
    )?;
    json(
        serde_json::json!({"event": "fleet", "catalog": url, "store": store.url(), "registered": registered}),
    );
    tracing::info!(
        target: "convoy::server",
        registered, catalog = %url, store = %store.url(),
        "fleet service"
    );
    Ok(FleetService {
        counters,
        stop,
        indexer: Some(indexer),
        _web: web,
    })
}

/// SIGHUP reloads the registry (every cached answer is dropped, so a
/// revocation or a new vehicle counts at the next handshake, commit or
/// re-check) and the web view's TLS certificate and key (new connections
/// get the new one; a pair that does not load leaves the old in use).
/// Each reload is logged with what it found.
fn reload_on_hangup(
    registry: Arc<RegistryAuthorizer>,
    cert: Option<Arc<convoy_web::tls::Certificate>>,
    json: JsonOut,
) -> Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGHUP])
        .context("cannot install the SIGHUP handler")?;
    std::thread::Builder::new()
        .name("convoy-sighup".into())
        .spawn(move || {
            for _ in signals.forever() {
                match registry.reload() {
                    Ok((names, revoked)) => {
                        json(serde_json::json!({"event": "reload", "what": "registry", "registered": names, "revoked": revoked}));
                        tracing::info!(
                            target: "convoy::server",
                            registered = names, revoked,
                            "SIGHUP: registry reloaded"
                        );
                    }
                    Err(e) => {
                        json(serde_json::json!({"event": "reload_failed", "what": "registry", "error": e}));
                        tracing::error!(
                            target: "convoy::server",
                            error = %e,
                            "SIGHUP: registry not reloaded"
                        );
                    }
                }
                let Some(cert) = &cert else { continue };
                let file = cert.paths().0.display().to_string();
                match cert.reload() {
                    Ok(_) => {
                        json(serde_json::json!({"event": "reload", "what": "tls", "cert": file}));
                        tracing::info!(
                            target: "convoy::http",
                            cert = file.as_str(),
                            "SIGHUP: TLS certificate reloaded"
                        );
                    }
                    Err(e) => {
                        json(serde_json::json!({"event": "reload_failed", "what": "tls", "error": e}));
                        tracing::error!(
                            target: "convoy::http",
                            cert = file.as_str(), error = %e,
                            "SIGHUP: TLS certificate not reloaded, the old one stays"
                        );
                    }
                }
            }
        })?;
    Ok(())
}
