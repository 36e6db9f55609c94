//! Requests from the cloud to vehicles, server side (docs/SERVICE.md,
//! "Requests"): the catalog holds them durably; this dispatcher sends each
//! open request down the control stream of its vehicle when the vehicle
//! is connected (at once for a request issued here, within
//! [`POLL_EVERY`] for one issued by another server on a shared catalog,
//! and right after the stream opens for one that waited while the vehicle
//! was away), and records what the vehicle answers.
//!
//! The transport calls the [`ControlHook`] on its protocol threads, so the
//! hook only moves frames through channels; every catalog query runs on
//! the dispatcher's own thread.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_catalog::{Catalog, RequestEvent, RequestRow};
use convoy_net::auth::Identity;
use convoy_net::control::{Bell, ControlHook, FromVehicle, RequestBody, ToVehicle};

/// How often the dispatcher looks for requests other servers queued.
pub const POLL_EVERY: Duration = Duration::from_millis(100);

enum Inbound {
    Attached(String),
    Frame(String, Vec<u8>),
    /// A request was queued in this process.
    Queued,
}

struct Link {
    tx: mpsc::Sender<Vec<u8>>,
    bell: Bell,
    /// Requests already sent on this stream.
    sent: HashSet<i64>,
}

/// What the dispatcher reports, for the server's log.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RequestLog {
    ControlOpened {
        vehicle: String,
    },
    RequestSent {
        vehicle: String,
        id: i64,
        kind: String,
    },
    RequestAcked {
        vehicle: String,
        id: i64,
        millis: f64,
    },
    RequestFinished {
        vehicle: String,
        id: i64,
        state: String,
        detail: String,
    },
    ControlError {
        vehicle: String,
        error: String,
    },
}

/// The control hook and its dispatcher thread.
pub struct RequestDispatch {
    links: Arc<Mutex<HashMap<String, Vec<Link>>>>,
    inbox: mpsc::Sender<Inbound>,
}

impl RequestDispatch {
    /// Starts the dispatcher on its own catalog connection; it stops when
    /// `stop` is set.
    pub fn start(
        catalog: Box<dyn Catalog>,
        stop: Arc<AtomicBool>,
        log: impl Fn(&RequestLog) + Send + 'static,
    ) -> Arc<RequestDispatch> {
        let (tx, rx) = mpsc::channel();
        let links: Arc<Mutex<HashMap<String, Vec<Link>>>> = Arc::default();
        let mut worker = Worker {
            catalog,
            links: links.clone(),
            last_seen: 0,
            log: Box::new(log),
        };
        std::thread::Builder::new()
            .name("convoy-requests".into())
            .spawn(move || worker.run(rx, stop))
            .expect("spawning the request dispatcher");
        Arc::new(RequestDispatch { links, inbox: tx })
    }

    /// A request was queued in the catalog here: send it now rather than
    /// at the next poll.
    pub fn queued(&self) {
        let _ = self.inbox.send(Inbound::Queued);
    }

    /// Vehicles with a control stream open on this server.
    pub fn connected(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .links
            .lock()
            .map(|l| l.keys().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl ControlHook for RequestDispatch {
    fn attach(&self, who: &Identity, bell: Bell) -> Result<mpsc::Receiver<Vec<u8>>, String> {
        let (tx, rx) = mpsc::channel();
        let mut links = self
            .links
            .lock()
            .map_err(|_| "dispatcher stopped".to_string())?;
        links.entry(who.name.clone()).or_default().push(Link {
            tx,
            bell,
            sent: HashSet::new(),
        });
        drop(links);
        let _ = self.inbox.send(Inbound::Attached(who.name.clone()));
        Ok(rx)
    }

    fn received(&self, who: &Identity, frame: Vec<u8>) {
        let _ = self.inbox.send(Inbound::Frame(who.name.clone(), frame));
    }
}

struct Worker {
    catalog: Box<dyn Catalog>,
    links: Arc<Mutex<HashMap<String, Vec<Link>>>>,
    /// The highest request id seen queued: polls ask only for newer ones.
    last_seen: i64,
    log: Box<dyn Fn(&RequestLog) + Send>,
}

impl Worker {
    fn run(&mut self, rx: mpsc::Receiver<Inbound>, stop: Arc<AtomicBool>) {
        // Requests queued before this start are sent as each vehicle's
        // stream opens (`Attached`), so polling starts from the newest.
        self.last_seen = self
            .catalog
            .requests(None, 1)
            .ok()
            .and_then(|r| r.first().map(|r| r.id))
            .unwrap_or(0);
        let mut next_poll = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let wait = next_poll.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Inbound::Attached(v)) => {
                    (self.log)(&RequestLog::ControlOpened { vehicle: v.clone() });
                    match self.catalog.open_requests(&v) {
                        Ok(rows) => self.send(&rows),
                        Err(e) => self.error(&v, &e.to_string()),
                    }
                }
                Ok(Inbound::Frame(v, frame)) => self.answer(&v, &frame),
                Ok(Inbound::Queued) => self.poll(),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    next_poll = Instant::now() + POLL_EVERY;
                    self.poll();
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    fn error(&self, vehicle: &str, error: &str) {
        (self.log)(&RequestLog::ControlError {
            vehicle: vehicle.into(),
            error: error.into(),
        });
    }

    /// Sends what was queued since the last look to connected vehicles.
    fn poll(&mut self) {
        match self.catalog.queued_after(self.last_seen, 1000) {
            Ok(rows) => {
                if let Some(last) = rows.last() {
                    self.last_seen = last.id;
                }
                self.send(&rows);
            }
            Err(e) => self.error("*", &format!("catalog: {e}")),
        }
    }

    /// Sends each request to every open stream of its vehicle that has
    /// not had it yet; streams that ended are forgotten.
    fn send(&mut self, rows: &[RequestRow]) {
        let Ok(mut links) = self.links.lock() else {
            return;
        };
        let mut sent = Vec::new();
        for row in rows {
            let Some(list) = links.get_mut(&row.vehicle) else {
                continue;
            };
            let body = match RequestBody::parse(&row.body) {
                Ok(b) => b,
                Err(e) => {
                    // Checked when queued; a row edited by hand is not.
                    sent.push((row.vehicle.clone(), row.id, Err(e)));
                    continue;
                }
            };
            let frame = ToVehicle::Request { id: row.id, body }.to_frame();
            list.retain_mut(|l| {
                if l.sent.contains(&row.id) {
                    return true;
                }
                if l.tx.send(frame.clone()).is_err() {
                    return false;
                }
                l.sent.insert(row.id);
                l.bell.ring();
                true
            });
            if list.is_empty() {
                links.remove(&row.vehicle);
            } else {
                sent.push((row.vehicle.clone(), row.id, Ok(row.kind.clone())));
            }
        }
        drop(links);
        for (vehicle, id, what) in sent {
            match what {
                Ok(kind) => (self.log)(&RequestLog::RequestSent { vehicle, id, kind }),
                Err(e) => self.record(&vehicle, id, &RequestEvent::Failed(e)),
            }
        }
    }

    /// A frame from `vehicle`'s control stream.
    fn answer(&mut self, vehicle: &str, frame: &[u8]) {
        let msg = match serde_json::from_slice::<FromVehicle>(frame) {
            Ok(m) => m,
            Err(e) => return self.error(vehicle, &format!("unreadable answer: {e}")),
        };
        let id = msg.id();
        let ev = match msg {
            FromVehicle::Ack { .. } => RequestEvent::Ack,
            FromVehicle::Progress {
                done, total, note, ..
            } => RequestEvent::Progress(
                serde_json::json!({"done": done, "total": total, "note": note}).to_string(),
            ),
            FromVehicle::Done { result, .. } => RequestEvent::Done(result.to_string()),
            FromVehicle::Failed { error, .. } => RequestEvent::Failed(error),
            FromVehicle::Hello { extra_signals } => {
                // A frame bounds the list already; names are VSS paths.
                if extra_signals.len() > 4096
                    || extra_signals.iter().any(|s| s.is_empty() || s.len() > 256)
                {
                    return self.error(vehicle, "hello: extra_signals out of bounds");
                }
                let now = convoy_telemetry::now_ns();
                if let Err(e) = self
                    .catalog
                    .set_vehicle_signals(vehicle, &extra_signals, now)
                {
                    self.error(vehicle, &format!("catalog: {e}"));
                }
                return;
            }
            FromVehicle::Unreadable { error } => {
                return self.error(
                    vehicle,
                    &format!("the vehicle could not read a request: {error}"),
                )
            }
        };
        if let Some(id) = id {
            self.record(vehicle, id, &ev);
        }
    }

    fn record(&mut self, vehicle: &str, id: i64, ev: &RequestEvent) {
        let now = convoy_telemetry::now_ns();
        match self.catalog.request_event(vehicle, id, ev, now) {
            Ok(true) => {}
            Ok(false) => {
                return self.error(
                    vehicle,
                    &format!("answer for request {id}, not one of its own"),
                )
            }
            Err(e) => return self.error(vehicle, &format!("catalog: {e}")),
        }
        match ev {
            RequestEvent::Ack => {
                let millis = self
                    .catalog
                    .requests(Some(vehicle), 64)
                    .ok()
                    .and_then(|rows| rows.into_iter().find(|r| r.id == id))
                    .and_then(|r| r.acked_ns.map(|a| (a - r.created_ns) as f64 / 1e6))
                    .unwrap_or(f64::NAN);
                (self.log)(&RequestLog::RequestAcked {
                    vehicle: vehicle.into(),
                    id,
                    millis,
                })
            }
            RequestEvent::Done(r) => (self.log)(&RequestLog::RequestFinished {
                vehicle: vehicle.into(),
                id,
                state: "done".into(),
                detail: r.clone(),
            }),
            RequestEvent::Failed(e) => (self.log)(&RequestLog::RequestFinished {
                vehicle: vehicle.into(),
                id,
                state: "failed".into(),
                detail: e.clone(),
            }),
            RequestEvent::Progress(_) => {}
        }
    }
}
