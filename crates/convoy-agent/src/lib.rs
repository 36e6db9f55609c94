//! convoy-agent: the vehicle side of convoy's data service
//! (`convoy agent --config agent.toml`), built to run for days.
//!
//! ```text
//! sources ──samples──▶ segmenter (per class) ──segments──▶ spool ──▶ live lane ──┐
//!  stdin, socket, FCD,                zstd, 1 s / 4 MB     quota,     backlog lane ┴▶ convoy
//!  CAN + DBC, MQTT
//!  directory inbox ──────────files────────────────────────▶ SQLite                    server
//! ```
//!
//! Nothing is deleted before the server acknowledges it as durable,
//! except by the spool's stated overflow rule ([`spool`]); a restart
//! resumes every queued and half-sent segment ([`spool::Spool::open`]).

pub mod campaign;
pub mod can;
pub mod config;
pub mod kuksa;
pub mod mqtt;
pub mod policy;
pub mod requests;
pub mod segmenter;
pub mod sources;
pub mod spool;
pub mod status;
pub mod uploader;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_telemetry::SignalCatalog;

use crate::config::{Config, SourceConfig};
use crate::policy::Class;
use crate::segmenter::Segmenter;
use crate::spool::{Lane, Spool};
use crate::status::Shared;

/// How long the main loop takes queued input before it turns to its clock
/// work (closing segments, collection requests, the status file).
const INPUT_TURN: Duration = Duration::from_millis(50);

/// `std::thread::spawn` that carries the caller's `tracing` span into the
/// thread, so every event the agent logs names its vehicle (the span
/// `convoy agent` runs it in).
pub(crate) fn spawn<F, T>(f: F) -> std::thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let span = tracing::Span::current();
    std::thread::spawn(move || span.in_scope(f))
}

pub use convoy_telemetry::{now_ns, utc_date};

/// Runs the agent until `stop` is set (a signal) and, with `until_idle`,
/// until stdin has ended and the spool is empty.
pub fn run(cfg: Config, stop: Arc<AtomicBool>, until_idle: bool) -> Result<(), String> {
    let keypair = convoy_net::load_keypair(&cfg.key).map_err(|e| e.to_string())?;
    let server_key = convoy_net::parse_server_key(&cfg.server_key).map_err(|e| e.to_string())?;
    let server = std::net::ToSocketAddrs::to_socket_addrs(&cfg.server)
        .map_err(|e| format!("server {:?}: {e}", cfg.server))?
        .next()
        .ok_or_else(|| format!("server {:?} has no address", cfg.server))?;
    let mode = cfg.mode.parse().map_err(|e: String| e)?;
    let backlog_priority = cfg.backlog_priority()?;
    let rules = Arc::new(std::sync::RwLock::new(cfg.link_rules()?));
    let spool = Arc::new(Mutex::new(Spool::open(&cfg.spool, cfg.quota_bytes())?));
    let status = Arc::new(Shared::default());
    let signals = Arc::new(SignalCatalog::new(cfg.extra_signals.iter()));
    let (tx, rx) = std::sync::mpsc::sync_channel::<sources::Tagged>(65_536);

    let stdin_done = Arc::new(AtomicBool::new(true));
    for src in &cfg.sources {
        match src.clone() {
            SourceConfig::Stdin { class } => {
                stdin_done.store(false, Ordering::Relaxed);
                let (tx, status, stop, signals, done) = (
                    tx.clone(),
                    status.clone(),
                    stop.clone(),
                    signals.clone(),
                    stdin_done.clone(),
                );
                crate::spawn(move || {
                    let stdin = std::io::stdin();
                    sources::read_lines(
                        stdin.lock(),
                        "stdin",
                        class,
                        &signals,
                        &tx,
                        &status,
                        &stop,
                    );
                    done.store(true, Ordering::Relaxed);
                });
            }
            SourceConfig::Socket { path, class } => sources::serve_socket(
                &path,
                class,
                signals.clone(),
                tx.clone(),
                status.clone(),
                stop.clone(),
            )?,
            SourceConfig::Directory {
                path,
                class,
                settle_seconds,
            } => {
                std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                sources::watch_directory(
                    path,
                    class,
                    Duration::from_secs_f64(settle_seconds.max(0.0)),
                    spool.clone(),
                    status.clone(),
                    stop.clone(),
                )
            }
            SourceConfig::Fcd {
                path,
                vehicle,
                origin,
                speedup,
                looped,
            } => sources::FcdReplay {
                path,
                vehicle,
                origin,
                speedup: speedup.max(1e-3),
                looped,
            }
            .run(tx.clone(), status.clone(), stop.clone()),
            SourceConfig::Can {
                dbc,
                log,
                interface,
                signals: map,
                unmapped,
                class,
            } => {
                let input = match (log, interface) {
                    (Some(l), _) => can::CanInput::Log(l),
                    (None, Some(i)) => can::CanInput::Interface(i),
                    (None, None) => {
                        status.note_error("CAN source not started: neither log nor interface");
                        continue;
                    }
                };
                let src = can::CanSource {
                    dbc,
                    input,
                    signals: map,
                    unmapped,
                    class,
                };
                // A bad DBC or mapping stops this source, not the agent:
                // the other sources and the spool's backlog go on.
                if let Err(e) = src.start(&signals, tx.clone(), status.clone(), stop.clone()) {
                    status.note_error(&format!("CAN source not started: {e}"));
                }
            }
            SourceConfig::Mqtt {
                broker,
                mapping,
                client_id,
                class,
            } => {
                let started = mqtt::Mapping::load(&mapping, &signals).map(|m| {
                    mqtt::MqttSource {
                        broker,
                        client_id,
                        mapping: m,
                        class,
                    }
                    .start(tx.clone(), status.clone(), stop.clone())
                });
                if let Err(e) = started {
                    status.note_error(&format!("MQTT source not started: {e}"));
                }
            }
            SourceConfig::Kuksa {
                databroker,
                signals: paths,
                buffer,
                token,
                class,
            } => {
                let started = token
                    .map(|t| {
                        std::fs::read_to_string(&t).map_err(|e| format!("{}: {e}", t.display()))
                    })
                    .transpose()
                    .and_then(|token| {
                        let src = kuksa::KuksaSource {
                            databroker,
                            signals: paths,
                            buffer,
                            token,
                            class,
                        };
                        src.check(&signals)?;
                        src.start(tx.clone(), status.clone(), stop.clone());
                        Ok(())
                    });
                if let Err(e) = started {
                    status.note_error(&format!("KUKSA source not started: {e}"));
                }
            }
        }
    }
    drop(tx);

    let campaigns =
        campaign::Campaigns::load(&cfg.spool, spool.clone(), status.clone(), signals.clone());
    let (requests, request_rx) = requests::Requests::new(
        spool.clone(),
        status.clone(),
        rules.clone(),
        signals.clone(),
        cfg.extra_signals.clone(),
        campaigns.clone(),
    );
    {
        let (r, stop) = (requests.clone(), stop.clone());
        std::thread::Builder::new()
            .name("convoy-requests".into())
            .spawn(move || r.run(request_rx, stop))
            .map_err(|e| e.to_string())?;
    }
    let collectors = requests.collectors.clone();

    let mut client = convoy_net::ClientOptions::new(server, server_key);
    client.keypair = Some(keypair);
    client.mode = mode;
    client.idle_timeout = Duration::from_secs_f64(cfg.idle_timeout.clamp(1.0, 3600.0));
    client.handshake_timeout = Duration::from_secs(5);
    client.local = cfg.local_address;
    let mut lanes = Vec::new();
    let mut interrupts = Vec::new();
    for lane in [Lane::Live, Lane::Backlog] {
        let slot = Arc::new(Mutex::new(None));
        interrupts.push(slot.clone());
        let up = uploader::Uploader {
            lane,
            client: {
                let mut c = client.clone();
                if lane == Lane::Backlog {
                    c.priority = backlog_priority;
                }
                c
            },
            spool: spool.clone(),
            status: status.clone(),
            rules: rules.clone(),
            requests: (lane == Lane::Live).then(|| requests.clone()),
            link_file: cfg.link_file.clone(),
            stop: stop.clone(),
            interrupt: slot,
        };
        lanes.push(crate::spawn(move || up.run()));
    }
    tracing::info!(
        target: "convoy::agent",
        sources = cfg.sources.len(), spool = %cfg.spool.display(),
        quota_bytes = cfg.quota_bytes(), server = %server,
        "running"
    );

    // The segmenters run here, on the main thread.
    let max_age = Duration::from_secs_f64(cfg.segments.max_seconds);
    let offline_age = Duration::from_secs_f64(cfg.segments.offline_seconds).max(max_age);
    let mut segs: HashMap<Class, Segmenter> = HashMap::new();
    for class in [Class::Events, Class::Telemetry] {
        let (age, offline) = if class == Class::Events {
            (Duration::ZERO, Duration::ZERO)
        } else {
            (max_age, offline_age)
        };
        segs.insert(
            class,
            Segmenter::new(
                class,
                spool.clone(),
                status.clone(),
                age,
                offline,
                cfg.segment_bytes(),
            ),
        );
    }
    let mut next_status = Instant::now();
    let mut inputs_open = true;
    while !stop.load(Ordering::Relaxed) {
        let deadline = segs
            .values()
            .filter_map(|s| s.deadline())
            .chain(collectors.deadline())
            .min();
        let wait = deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(250))
            .min(Duration::from_millis(250));
        if inputs_open {
            match rx.recv_timeout(wait) {
                Ok(first) => {
                    let mut take = |(class, s): (Class, _)| {
                        let class = if class == Class::Events {
                            class
                        } else {
                            Class::Telemetry
                        };
                        collectors.observe(&s);
                        campaigns.observe(&s);
                        segs.get_mut(&class).expect("segmenter").push(&s);
                    };
                    take(first);
                    // Take what else is waiting before looking at the
                    // clock, but for a bounded time: input that comes
                    // faster than it is written (a full disk sheds a
                    // segment per write) would otherwise keep this loop
                    // from closing segments and writing the status.
                    let until = Instant::now() + INPUT_TURN;
                    while Instant::now() < until {
                        match rx.try_recv() {
                            Ok(next) => take(next),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => inputs_open = false,
            }
        } else {
            std::thread::sleep(wait);
        }
        // Collection requests' samples go out as events.
        let (due, ticked) = collectors.due(Instant::now(), now_ns());
        for s in &due {
            segs.get_mut(&Class::Events).expect("segmenter").push(s);
        }
        for p in ticked {
            requests.collected(p);
        }
        campaigns.tick();
        for s in segs.values_mut() {
            s.tick();
        }
        if Instant::now() >= next_status {
            next_status = Instant::now() + Duration::from_secs(1);
            status.write(&cfg.spool);
        }
        if until_idle && stdin_done.load(Ordering::Relaxed) && !inputs_open {
            for s in segs.values_mut() {
                s.close_segment();
            }
            // No input will come to fill a window's post-trigger span.
            campaigns.flush();
            let empty = spool
                .lock()
                .map(|sp| sp.used().unwrap_or(1) == 0)
                .unwrap_or(false);
            if empty {
                break;
            }
        }
    }
    for s in segs.values_mut() {
        s.close_segment();
    }
    campaigns.flush();
    stop.store(true, Ordering::Relaxed);
    for slot in &interrupts {
        if let Some(flag) = slot.lock().ok().and_then(|s| s.clone()) {
            flag.store(true, Ordering::Relaxed);
        }
    }
    status.wake_uploaders();
    for l in lanes {
        let _ = l.join();
    }
    status.write(&cfg.spool);
    tracing::info!(
        target: "convoy::agent",
        "stopped; everything not acknowledged stays in the spool for the next run"
    );
    Ok(())
}
