//! Uploads, in two lanes with a connection each: the live lane sends
//! recent events and telemetry as soon as they are segmented; the backlog
//! lane sends everything else by class and age. A lane takes the next
//! segments its link allows (metered link classes, budget, hours), uploads
//! them with convoy, several in flight on one connection (resumable,
//! checked with BLAKE3), and marks each acknowledged only when the server
//! says it is durable. Failures keep
//! the segment queued and reconnect with backoff; a refused key (revoked)
//! is reported as such and retried every 30 s.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_net::{Client, ClientOptions};

use crate::policy::{day_of, Class, LinkRule};
use crate::spool::{Lane, Spool};
use crate::status::{LaneStatus, LastUpload, Shared};

pub struct Uploader {
    pub lane: Lane,
    pub client: ClientOptions,
    pub spool: Arc<Mutex<Spool>>,
    pub status: Arc<Shared>,
    pub rules: Vec<LinkRule>,
    pub link_file: Option<PathBuf>,
    pub stop: Arc<AtomicBool>,
    /// Set by `stop` to interrupt a transfer in progress.
    pub interrupt: Arc<Mutex<Option<Arc<AtomicBool>>>>,
}

/// The longest wait between connection attempts. Each attempt is itself
/// a handshake retried for `handshake_timeout`, so the agent is nearly
/// always trying: when a vehicle comes back into coverage after an hour,
/// its backlog starts within a few seconds, not at the end of a long
/// backoff. An attempt into a dead link costs a few KB a minute.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How long to wait after the server refused our key (revoked or unknown):
/// it will not change its mind soon.
const REFUSED_WAIT: Duration = Duration::from_secs(30);

/// Uploads in flight on a lane's connection at once. After a long outage
/// the backlog is thousands of one-second telemetry segments of a few
/// hundred bytes: one at a time, each would cost a round trip and the
/// server's fsync, and the drain would run at a fraction of the link.
const WINDOW: usize = 16;

/// A batch stops taking segments past this many bytes, so a failed
/// connection sends at most this much again (resumed where the server has
/// it, in any case).
const BATCH_BYTES: u64 = 16 << 20;

fn retry_wait(error: &str, backoff: Duration) -> Duration {
    // The server's refusal reads "refused: NAME is revoked"; an OS error's
    // "Connection refused" is a server restarting, worth the usual backoff.
    if error.contains("refused: ") {
        REFUSED_WAIT
    } else {
        backoff
    }
}

/// The link in use now: the link file's content, or the first rule.
pub fn current_link<'a>(rules: &'a [LinkRule], file: Option<&PathBuf>) -> Option<&'a LinkRule> {
    match file {
        None => rules.first(),
        Some(f) => {
            let name = std::fs::read_to_string(f).ok()?;
            rules.iter().find(|r| r.name == name.trim())
        }
    }
}

impl Uploader {
    fn set(&self, f: impl FnOnce(&mut LaneStatus)) {
        let lane = self.lane;
        self.status.update(|s| {
            f(match lane {
                Lane::Live => &mut s.live,
                Lane::Backlog => &mut s.backlog,
            })
        });
    }

    pub fn run(self) {
        let mut client: Option<Client> = None;
        let mut backoff = Duration::from_millis(250);
        while !self.stop.load(Ordering::Relaxed) {
            let Some(rule) = current_link(&self.rules, self.link_file.as_ref()).cloned() else {
                self.set(|l| l.state = "no link".into());
                if self.lane == Lane::Live {
                    self.status.update(|s| s.link = None);
                }
                client = None;
                self.status.wait(Duration::from_millis(500));
                continue;
            };
            if self.lane == Lane::Live {
                self.status.update(|s| s.link = Some(rule.name.clone()));
            }
            let now_s = convoy_telemetry::now_ns() / 1_000_000_000;
            let day = day_of(now_s);
            let batch = match self.take_batch(&rule, now_s, day) {
                Ok(b) if b.is_empty() => {
                    self.set(|l| l.state = "idle".into());
                    self.status.wait(Duration::from_millis(500));
                    continue;
                }
                Ok(b) => b,
                Err(e) => {
                    self.status.note_error(&format!("spool catalog: {e}"));
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            };
            if client.is_none() {
                self.set(|l| l.state = "connecting".into());
                match Client::connect(self.client.clone()) {
                    Ok(c) => {
                        if let Ok(mut slot) = self.interrupt.lock() {
                            *slot = Some(c.interrupt_flag());
                        }
                        client = Some(c);
                        backoff = Duration::from_millis(250);
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        self.fail(&batch, &msg);
                        self.sleep_unless_stopped(retry_wait(&msg, backoff));
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
            self.set(|l| {
                l.state = match batch.len() {
                    1 => format!("uploading {} on {}", batch[0].name, rule.name),
                    n => format!(
                        "uploading {} and {} more on {}",
                        batch[0].name,
                        n - 1,
                        rule.name
                    ),
                }
            });
            let started = Instant::now();
            let files: Vec<_> = batch
                .iter()
                .map(|i| (i.path.clone(), i.name.clone()))
                .collect();
            let mut stored = 0;
            let c = client.as_mut().expect("connected");
            let result = c.upload_batch(&files, WINDOW, &mut |i, r| {
                // Each confirmation is recorded as it comes, so a killed
                // agent never sends again what the server acknowledged.
                self.stored(&batch[i], &rule.name, day, r.bytes, started.elapsed());
                stored = i + 1;
            });
            match result {
                Ok(()) => {
                    let bytes = batch.iter().map(|i| i.bytes).sum();
                    let pause = rule.pause_after(bytes, started.elapsed());
                    if !pause.is_zero() {
                        self.set(|l| l.state = format!("rate cap on {}", rule.name));
                        std::thread::sleep(pause);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    self.fail(&batch[stored..], &msg);
                    client = None;
                    self.sleep_unless_stopped(retry_wait(&msg, backoff));
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        if let Some(c) = client {
            c.close();
        }
    }

    /// The next uploads for this lane, at most [`WINDOW`] segments and
    /// [`BATCH_BYTES`] (at least one): each is checked against the link's
    /// rules with the batch's earlier bytes counted as spent, so a daily
    /// budget is still overrun by at most one segment. A rate-capped link
    /// takes one at a time: the cap pauses after each upload, and a batch
    /// would go at the link's full speed before its pause.
    fn take_batch(
        &self,
        rule: &LinkRule,
        now_s: i64,
        day: i64,
    ) -> rusqlite::Result<Vec<crate::spool::Item>> {
        let Ok(mut sp) = self.spool.lock() else {
            return Ok(Vec::new());
        };
        let spent = sp.spent(&rule.name, day);
        let mut batch: Vec<crate::spool::Item> = Vec::new();
        let mut bytes = 0;
        let most = if rule.rate_bps.is_some() { 1 } else { WINDOW };
        while batch.len() < most && bytes < BATCH_BYTES {
            let allowed: Vec<Class> = Class::ALL
                .into_iter()
                .filter(|c| rule.allows(*c, now_s, spent + bytes).is_ok())
                .collect();
            match sp.take(self.lane, &allowed, convoy_telemetry::now_ns()) {
                Ok(Some(item)) => {
                    bytes += item.bytes;
                    batch.push(item);
                }
                Ok(None) => break,
                Err(e) if batch.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(batch)
    }

    /// The server confirmed `item` durable: acknowledge it in the spool.
    fn stored(&self, item: &crate::spool::Item, link: &str, day: i64, bytes: u64, took: Duration) {
        if let Ok(mut sp) = self.spool.lock() {
            if let Err(e) = sp.acked(item, link, day) {
                self.status.note_error(&format!("spool catalog: {e}"));
            }
        }
        let age = (convoy_telemetry::now_ns() - item.created_ns) as f64 / 1e9;
        self.set(|l| {
            l.uploads += 1;
            l.bytes += bytes;
            l.last_error = None;
            l.last_upload = Some(LastUpload {
                name: item.name.clone(),
                class: item.class.as_str().into(),
                bytes,
                link: link.to_owned(),
                at_ns: convoy_telemetry::now_ns(),
                seconds: took.as_secs_f64(),
                age_seconds: age,
            });
        });
    }

    /// These were not stored: they stay queued for the next try.
    fn fail(&self, items: &[crate::spool::Item], msg: &str) {
        if let Ok(mut sp) = self.spool.lock() {
            for item in items {
                let _ = sp.failed(item, msg);
            }
        }
        let lane = match self.lane {
            Lane::Live => "live",
            Lane::Backlog => "backlog",
        };
        if let Some(first) = items.first() {
            let more = match items.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            };
            crate::log(&format!(
                "{lane} lane: {}{more} not sent, will retry: {msg}",
                first.name
            ));
        }
        self.set(|l| {
            l.state = "waiting to retry".into();
            l.last_error = Some(msg.to_owned());
        });
    }

    fn sleep_unless_stopped(&self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end && !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
