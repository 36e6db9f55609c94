//! Uploads, in two lanes with a connection each: the live lane sends
//! recent events and telemetry as soon as they are segmented; the backlog
//! lane sends everything else by class and age. A lane takes the next
//! segment its link allows (metered link classes, budget, hours), uploads
//! it with convoy (resumable, checked with BLAKE3), and marks it
//! acknowledged only when the server says it is durable. Failures keep
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

const MAX_BACKOFF: Duration = Duration::from_secs(30);

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
            let item = {
                let mut sp = match self.spool.lock() {
                    Ok(sp) => sp,
                    Err(_) => return,
                };
                let spent = sp.spent(&rule.name, day);
                let allowed: Vec<Class> = Class::ALL
                    .into_iter()
                    .filter(|c| rule.allows(*c, now_s, spent).is_ok())
                    .collect();
                sp.take(self.lane, &allowed, convoy_telemetry::now_ns())
            };
            let item = match item {
                Ok(Some(i)) => i,
                Ok(None) => {
                    self.set(|l| l.state = "idle".into());
                    self.status.wait(Duration::from_millis(500));
                    continue;
                }
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
                        self.fail(&item, &e.to_string());
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
            self.set(|l| l.state = format!("uploading {} on {}", item.name, rule.name));
            let started = Instant::now();
            let c = client.as_mut().expect("connected");
            match c.upload(&item.path, Some(&item.name), None) {
                Ok(r) => {
                    let took = started.elapsed();
                    if let Ok(mut sp) = self.spool.lock() {
                        if let Err(e) = sp.acked(&item, &rule.name, day) {
                            self.status.note_error(&format!("spool catalog: {e}"));
                        }
                    }
                    let age = (convoy_telemetry::now_ns() - item.created_ns) as f64 / 1e9;
                    self.set(|l| {
                        l.uploads += 1;
                        l.bytes += r.bytes;
                        l.last_error = None;
                        l.last_upload = Some(LastUpload {
                            name: item.name.clone(),
                            class: item.class.as_str().into(),
                            bytes: r.bytes,
                            link: rule.name.clone(),
                            at_ns: convoy_telemetry::now_ns(),
                            seconds: took.as_secs_f64(),
                            age_seconds: age,
                        });
                    });
                    let pause = rule.pause_after(item.bytes, took);
                    if !pause.is_zero() {
                        self.set(|l| l.state = format!("rate cap on {}", rule.name));
                        std::thread::sleep(pause);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    self.fail(&item, &msg);
                    client = None;
                    let wait = if msg.contains("refused") {
                        MAX_BACKOFF
                    } else {
                        backoff
                    };
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    self.sleep_unless_stopped(wait);
                }
            }
        }
        if let Some(c) = client {
            c.close();
        }
    }

    fn fail(&self, item: &crate::spool::Item, msg: &str) {
        if let Ok(mut sp) = self.spool.lock() {
            let _ = sp.failed(item, msg);
        }
        let lane = match self.lane {
            Lane::Live => "live",
            Lane::Backlog => "backlog",
        };
        crate::log(&format!(
            "{lane} lane: {} not sent, will retry: {msg}",
            item.name
        ));
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
