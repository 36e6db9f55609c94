//! Requests from the cloud, agent side (docs/SERVICE.md, "Requests"): the
//! driver around convoy-net's sans-IO [`RequestBook`]. The live lane opens
//! the control stream on each connection it makes ([`Requests::attach`]);
//! frames arrive on this module's thread, which acknowledges, runs and
//! reports each request:
//!
//! * `upload`: the named segments, or those made in a time range, are put
//!   ahead of every lower priority in the spool ([`spool_ops`]); progress
//!   is counted as the lanes upload them;
//! * `collect`: [`collect::Collectors`], fed by the segmenter loop;
//! * `link`: the link rule is changed in place (until the agent restarts);
//! * `status`: the status snapshot, at once;
//! * `campaign`: [`Campaigns::apply`], at once;
//! * `withdraw`: [`Campaigns::withdraw`], at once.

pub mod collect;
pub mod spool_ops;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use convoy_net::control::book::{Action, RequestBook};
use convoy_net::control::{FromVehicle, RequestBody};
use convoy_net::wake::Waker;
use convoy_net::{Client, NetError};
use convoy_telemetry::SignalCatalog;

use crate::campaign::{Campaigns, Deployed};
use crate::config::{parse_rate, parse_size};
use crate::policy::{Class, LinkRule};
use crate::spool::Spool;
use crate::status::Shared;
use collect::{CollectProgress, Collectors};

/// How often running uploads' progress is looked up in the spool.
const PROGRESS_POLL: Duration = Duration::from_millis(250);

/// The control stream's sender, and the waker of the driver that writes it.
type Outlet = (Sender<Vec<u8>>, Arc<Waker>);

struct UploadJob {
    id: i64,
    boosted: spool_ops::Boosted,
}

pub struct Requests {
    inbound: Sender<Vec<u8>>,
    /// The control stream of the live lane's current connection.
    out: Mutex<Option<Outlet>>,
    book: Mutex<RequestBook>,
    uploads: Mutex<Vec<UploadJob>>,
    pub collectors: Arc<Collectors>,
    spool: Arc<Mutex<Spool>>,
    status: Arc<Shared>,
    rules: Arc<RwLock<Vec<LinkRule>>>,
    signals: Arc<SignalCatalog>,
    /// The configuration's `extra_signals`, declared in the hello.
    extra_signals: Vec<String>,
    campaigns: Arc<Campaigns>,
}

fn class_named(name: &str) -> Result<Class, String> {
    Class::ALL
        .into_iter()
        .find(|c| c.as_str() == name)
        .ok_or_else(|| format!("unknown class {name:?}"))
}

impl Requests {
    /// The requests driver; run [`Requests::run`] on a thread of its own
    /// with the receiver.
    pub fn new(
        spool: Arc<Mutex<Spool>>,
        status: Arc<Shared>,
        rules: Arc<RwLock<Vec<LinkRule>>>,
        signals: Arc<SignalCatalog>,
        extra_signals: Vec<String>,
        campaigns: Arc<Campaigns>,
    ) -> (Arc<Requests>, Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel();
        let r = Requests {
            inbound: tx,
            out: Mutex::new(None),
            book: Mutex::default(),
            uploads: Mutex::default(),
            collectors: Arc::default(),
            spool,
            status,
            rules,
            signals,
            extra_signals,
            campaigns,
        };
        (Arc::new(r), rx)
    }

    /// Opens the control stream on a new connection of the live lane.
    /// Returns the driver's waker (ring it to end a wait on the client).
    pub fn attach(&self, client: &mut Client) -> Result<Arc<Waker>, NetError> {
        // The outlet stays locked until the new stream is in it. The
        // server sends its queued requests as soon as it sees the stream,
        // and the pass that opens it may already read them: their
        // acknowledgments, made on the requests thread meanwhile, wait
        // here instead of finding no stream and being dropped (the server
        // sends a request again only when the vehicle reconnects, so a
        // dropped acknowledgment left it queued for the whole
        // connection).
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        *out = None;
        let (tx, rx) = mpsc::channel();
        let waker = client.open_control(self.inbound.clone(), rx)?;
        // First on every stream: the server checks campaigns against the
        // signals this vehicle declares (a reconfigured agent says so on
        // its next connection).
        let hello = FromVehicle::Hello {
            extra_signals: self.extra_signals.clone(),
        };
        if tx.send(hello.to_frame()).is_ok() {
            waker.wake();
        }
        *out = Some((tx, waker.clone()));
        Ok(waker)
    }

    fn send(&self, msg: &FromVehicle) {
        // Not connected: the server sends the request again when the
        // vehicle is back, and the book answers it again then.
        if let Ok(out) = self.out.lock() {
            if let Some((tx, waker)) = out.as_ref() {
                if tx.send(msg.to_frame()).is_ok() {
                    waker.wake();
                }
            }
        }
    }

    fn act(&self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(m) => self.send(&m),
                Action::Start { id, body } => self.start(id, body),
                Action::Refused(reason) => tracing::warn!(
                    reason = %reason,
                    "the server refused the control stream"
                ),
            }
        }
    }

    fn finish(&self, id: i64, outcome: Result<serde_json::Value, String>) {
        let actions = self
            .book
            .lock()
            .map(|mut b| b.finish(id, outcome))
            .unwrap_or_default();
        self.act(actions);
    }

    fn progress(&self, id: i64, done: u64, total: u64, note: String) {
        let now = Duration::from_nanos(convoy_telemetry::now_ns() as u64);
        let msg = self
            .book
            .lock()
            .ok()
            .and_then(|mut b| b.progress(id, done, total, note, now));
        if let Some(m) = msg {
            self.send(&m);
        }
    }

    fn start(&self, id: i64, body: RequestBody) {
        match body {
            RequestBody::Campaign {
                name,
                version,
                toml,
            } => {
                let r = self.campaigns.apply(&Deployed {
                    name,
                    version,
                    toml,
                    withdrawn: false,
                });
                self.finish(id, r);
            }
            RequestBody::Withdraw { name, version } => {
                let r = self.campaigns.withdraw(&name, version);
                self.finish(id, r);
            }
            RequestBody::Status {} => {
                let snap = self.status.snapshot();
                let spool = self.spool.lock().ok().and_then(|s| s.status().ok());
                self.finish(id, Ok(serde_json::json!({"status": snap, "spool": spool})));
            }
            RequestBody::Link {
                name,
                daily_budget,
                rate,
                classes,
                metered,
            } => {
                let r = self.change_link(&name, daily_budget, rate, classes, metered);
                if r.is_ok() {
                    self.status.wake_uploaders();
                }
                self.finish(id, r);
            }
            RequestBody::Collect {
                signals,
                rate_hz,
                seconds,
            } => {
                for s in &signals {
                    if let Err(e) = self.signals.check(s) {
                        return self.finish(id, Err(e));
                    }
                }
                self.collectors
                    .start(id, &signals, rate_hz, seconds, Instant::now());
            }
            RequestBody::Upload {
                files,
                from_ns,
                to_ns,
                priority,
            } => {
                let range = from_ns.zip(to_ns);
                let boosted = class_named(&priority).and_then(|class| {
                    self.spool
                        .lock()
                        .map_err(|_| "spool unavailable".to_string())?
                        .boost(&files, range, class)
                });
                match boosted {
                    Ok(b) => {
                        if let Ok(mut u) = self.uploads.lock() {
                            u.push(UploadJob { id, boosted: b });
                        }
                        self.status.wake_uploaders();
                    }
                    Err(e) => self.finish(id, Err(e)),
                }
            }
        }
    }

    fn change_link(
        &self,
        name: &str,
        daily_budget: Option<String>,
        rate: Option<String>,
        classes: Option<Vec<String>>,
        metered: Option<bool>,
    ) -> Result<serde_json::Value, String> {
        // Everything is parsed before anything changes.
        let budget = daily_budget
            .as_deref()
            .map(|b| {
                if b == "none" {
                    Ok(None)
                } else {
                    parse_size(b).map(Some)
                }
            })
            .transpose()?;
        let rate = rate
            .as_deref()
            .map(|r| {
                if r == "none" {
                    Ok(None)
                } else {
                    parse_rate(r).map(Some)
                }
            })
            .transpose()?;
        let classes = classes
            .map(|c| {
                c.iter()
                    .map(|n| class_named(n))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let mut rules = self.rules.write().map_err(|_| "link rules unavailable")?;
        let names: Vec<String> = rules.iter().map(|r| r.name.clone()).collect();
        let Some(rule) = rules.iter_mut().find(|r| r.name == name) else {
            return Err(format!(
                "no link named {name:?} on this vehicle (links: {})",
                names.join(", ")
            ));
        };
        if let Some(b) = budget {
            rule.daily_budget = b;
        }
        if let Some(r) = rate {
            rule.rate_bps = r;
        }
        if let Some(c) = classes {
            rule.classes = c;
        }
        if let Some(m) = metered {
            rule.metered = m;
        }
        Ok(serde_json::json!({
            "link": rule.name,
            "metered": rule.metered,
            "classes": rule.classes.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "daily_budget": rule.daily_budget,
            "rate_bps": rule.rate_bps,
        }))
    }

    /// A collection ticked (from the segmenter loop).
    pub fn collected(&self, p: CollectProgress) {
        let note = format!("{} samples", p.samples);
        self.progress(p.id, p.ticks, p.total, note);
        if p.ticks >= p.total {
            let result = if p.samples == 0 {
                Err("none of the signals had a value during the collection".into())
            } else {
                Ok(serde_json::json!({"ticks": p.ticks, "samples": p.samples}))
            };
            self.finish(p.id, result);
        }
    }

    /// Reports the progress of running uploads; finishes those whose
    /// segments are all uploaded (or gone).
    fn poll_uploads(&self) {
        let jobs: Vec<(i64, Vec<i64>, u64, Vec<String>)> = match self.uploads.lock() {
            Ok(u) => u
                .iter()
                .map(|j| {
                    (
                        j.id,
                        j.boosted.ids.clone(),
                        j.boosted.bytes,
                        j.boosted.missing.clone(),
                    )
                })
                .collect(),
            Err(_) => return,
        };
        for (id, ids, bytes, missing) in jobs {
            let p = match self.spool.lock().map(|s| s.boost_progress(&ids)) {
                Ok(Ok(p)) => p,
                _ => continue,
            };
            let total = ids.len() as u64;
            let note = format!(
                "{} of {total} segments uploaded ({} of {bytes} bytes)",
                p.uploaded, p.uploaded_bytes
            );
            self.progress(id, p.uploaded + p.dropped, total, note);
            if p.waiting == 0 {
                if let Ok(mut u) = self.uploads.lock() {
                    u.retain(|j| j.id != id);
                }
                self.finish(
                    id,
                    Ok(serde_json::json!({
                        "segments": total,
                        "uploaded": p.uploaded,
                        "uploaded_bytes": p.uploaded_bytes,
                        "dropped": p.dropped,
                        "missing": missing,
                    })),
                );
            }
        }
    }

    /// Runs until `stop`: frames from the server, and upload progress.
    pub fn run(self: Arc<Self>, rx: Receiver<Vec<u8>>, stop: Arc<AtomicBool>) {
        let mut next_poll = Instant::now() + PROGRESS_POLL;
        while !stop.load(Ordering::Relaxed) {
            let wait = next_poll.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(frame) => {
                    let actions = self
                        .book
                        .lock()
                        .map(|mut b| b.on_frame(&frame))
                        .unwrap_or_default();
                    self.act(actions);
                }
                Err(RecvTimeoutError::Timeout) => {
                    next_poll = Instant::now() + PROGRESS_POLL;
                    self.poll_uploads();
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }
}
