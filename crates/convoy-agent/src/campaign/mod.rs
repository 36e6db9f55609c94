//! Campaigns on the vehicle (docs/SERVICE.md, "Campaigns"): the driver
//! around the sans-IO [`engine`]. The segmenter loop feeds it every sample
//! and ticks it; it spools each window it emits as a preserved segment
//! ([`spool_ops`]). Campaigns arrive as `campaign` requests on the control
//! stream and are applied at once (the engines are swapped under the
//! lock), and kept in `SPOOL/campaigns/NAME.json` so a restart runs them
//! again. A `withdraw` request stops one the same way: its engine (ring
//! buffers and all) is dropped, its open windows are spooled as they
//! stand, and `NAME.json` becomes a tombstone holding the withdrawal's
//! version, so a restart does not run it and a deployment older than the
//! withdrawal that arrives late is refused.
//!
//! * [`engine`]: the trigger engine and ring buffers.
//! * [`spool_ops`]: windows in the spool (preserved, upload conditions).

pub mod engine;
pub mod spool_ops;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_telemetry::campaign::Campaign;
use convoy_telemetry::{Sample, SegmentWriter, SignalCatalog};
use serde::{Deserialize, Serialize};

use crate::policy::Class;
use crate::spool::{is_full_io, Spool};
use crate::status::Shared;
use engine::{Engine, Window};

/// A campaign as deployed: its name, version and file text.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Deployed {
    pub name: String,
    pub version: i64,
    pub toml: String,
    /// A tombstone: `version` withdrew the campaign (`toml` is empty).
    #[serde(default)]
    pub withdrawn: bool,
}

/// What `convoy agent status` shows of a running campaign.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CampaignStatus {
    pub name: String,
    pub version: i64,
    pub triggers_fired: u64,
    pub windows_spooled: u64,
    pub samples_spooled: u64,
    /// Windows that could not be spooled (no room even past the quota).
    pub windows_lost: u64,
    /// Withdrawn at `version`: it no longer runs (the counters are those
    /// it had when it stopped, zero after a restart).
    #[serde(default)]
    pub withdrawn: bool,
}

struct Running {
    version: i64,
    engine: Engine,
    stat: CampaignStatus,
}

pub struct Campaigns {
    dir: PathBuf,
    /// Set while any campaign runs: the sample path costs one load else.
    active: AtomicBool,
    running: Mutex<Vec<Running>>,
    /// Campaigns withdrawn, as `convoy agent status` shows them.
    withdrawn: Mutex<Vec<CampaignStatus>>,
    spool: Arc<Mutex<Spool>>,
    status: Arc<Shared>,
    signals: Arc<SignalCatalog>,
    epoch: Instant,
}

impl Campaigns {
    /// The campaigns kept in `SPOOL/campaigns/`; one that no longer
    /// parses (the signal catalog changed) is logged and left out.
    pub fn load(
        spool_dir: &Path,
        spool: Arc<Mutex<Spool>>,
        status: Arc<Shared>,
        signals: Arc<SignalCatalog>,
    ) -> Arc<Campaigns> {
        let c = Campaigns {
            dir: spool_dir.join("campaigns"),
            active: AtomicBool::new(false),
            running: Mutex::default(),
            withdrawn: Mutex::default(),
            spool,
            status,
            signals,
            epoch: Instant::now(),
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&c.dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
        {
            let loaded = std::fs::read(f)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Deployed>(&b).map_err(|e| e.to_string()))
                .and_then(|d| {
                    if d.withdrawn {
                        c.tombstone(&d.name, d.version, CampaignStatus::default());
                        Ok(())
                    } else {
                        c.install(&d, false).map(|_| ())
                    }
                });
            if let Err(e) = loaded {
                c.status
                    .note_error(&format!("campaign {} not started: {e}", f.display()));
            }
        }
        c.publish();
        Arc::new(c)
    }

    /// Applies a deployed campaign: parsed and checked, kept on disk,
    /// then swapped in for the running version of that name (whose open
    /// windows are spooled as they stand). A version older than the one
    /// running is refused; the same one again is a no-op.
    pub fn apply(&self, d: &Deployed) -> Result<serde_json::Value, String> {
        self.install(d, true)
    }

    fn install(&self, d: &Deployed, persist: bool) -> Result<serde_json::Value, String> {
        let origin = format!("campaign {} v{}", d.name, d.version);
        let c = Campaign::parse(&origin, &d.toml, &self.signals)?;
        if c.name != d.name {
            return Err(format!("{origin}: the file names {:?}", c.name));
        }
        let mut running = self.running.lock().map_err(|_| "campaigns lock")?;
        if let Some(w) = self.withdrawn_version(&d.name) {
            if w >= d.version {
                return Err(format!("{origin}: older than its withdrawal (version {w})"));
            }
        }
        if let Some(r) = running.iter().find(|r| r.engine.campaign().name == d.name) {
            if r.version > d.version {
                return Err(format!(
                    "{origin}: older than the running version {}",
                    r.version
                ));
            }
            if r.version == d.version {
                return Ok(self.describe(&running));
            }
        }
        if persist {
            self.persist(d)?;
        }
        let mut flushed = Vec::new();
        if let Some(i) = running
            .iter()
            .position(|r| r.engine.campaign().name == d.name)
        {
            let mut old = running.remove(i);
            let w = old.engine.flush();
            flushed.push((old, w));
        }
        running.push(Running {
            version: d.version,
            engine: Engine::new(c),
            stat: CampaignStatus {
                name: d.name.clone(),
                version: d.version,
                ..CampaignStatus::default()
            },
        });
        self.active.store(true, Ordering::Release);
        if let Ok(mut w) = self.withdrawn.lock() {
            w.retain(|s| s.name != d.name);
        }
        for (mut old, windows) in flushed {
            for w in windows {
                self.spool_window(&mut old, w);
            }
        }
        tracing::info!(target: "convoy::agent", campaign = %d.name, version = d.version, "campaign running");
        let out = self.describe(&running);
        drop(running);
        self.publish();
        Ok(out)
    }

    /// Stops campaign `name` at withdrawal `version`, without a restart:
    /// no new triggers, its ring buffers freed. Windows it already
    /// triggered are spooled (the open ones as they stand) and upload as
    /// any other. A running version newer than the withdrawal is kept
    /// (the withdrawal arrived late); withdrawing a campaign this agent
    /// does not run still records the tombstone, so the deployment it
    /// ends is refused if it arrives after it.
    pub fn withdraw(&self, name: &str, version: i64) -> Result<serde_json::Value, String> {
        let origin = format!("withdrawal of campaign {name} v{version}");
        let mut running = self.running.lock().map_err(|_| "campaigns lock")?;
        if let Some(r) = running.iter().find(|r| r.engine.campaign().name == name) {
            if r.version > version {
                return Err(format!(
                    "{origin}: older than the running version {}",
                    r.version
                ));
            }
        }
        if self.withdrawn_version(name).is_some_and(|w| w >= version) {
            return Ok(self.describe(&running));
        }
        self.persist(&Deployed {
            name: name.into(),
            version,
            toml: String::new(),
            withdrawn: true,
        })?;
        let stopped = running
            .iter()
            .position(|r| r.engine.campaign().name == name)
            .map(|i| running.remove(i));
        self.active.store(!running.is_empty(), Ordering::Release);
        let was_running = stopped.is_some();
        let mut stat = CampaignStatus::default();
        if let Some(mut old) = stopped {
            let windows = old.engine.flush();
            for w in windows {
                self.spool_window(&mut old, w);
            }
            stat = old.stat;
            // `old` (its engine and ring buffers) is dropped here.
        }
        self.tombstone(name, version, stat);
        tracing::info!(target: "convoy::agent", campaign = %name, version, was_running, "campaign withdrawn");
        let mut out = self.describe(&running);
        out["withdrawn"] =
            serde_json::json!({"name": name, "version": version, "was_running": was_running});
        drop(running);
        self.publish();
        Ok(out)
    }

    fn tombstone(&self, name: &str, version: i64, mut stat: CampaignStatus) {
        stat.name = name.into();
        stat.version = version;
        stat.withdrawn = true;
        if let Ok(mut w) = self.withdrawn.lock() {
            w.retain(|s| s.name != name);
            w.push(stat);
        }
    }

    fn withdrawn_version(&self, name: &str) -> Option<i64> {
        let w = self.withdrawn.lock().ok()?;
        w.iter().find(|s| s.name == name).map(|s| s.version)
    }

    fn persist(&self, d: &Deployed) -> Result<(), String> {
        let e = |e: std::io::Error| format!("keeping campaign {}: {e}", d.name);
        std::fs::create_dir_all(&self.dir).map_err(e)?;
        let tmp = self.dir.join(format!(".{}.json.tmp", d.name));
        let text = serde_json::to_vec(d).map_err(|x| x.to_string())?;
        std::fs::write(&tmp, text).map_err(e)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(e)?;
        std::fs::rename(&tmp, self.dir.join(format!("{}.json", d.name))).map_err(e)?;
        Ok(())
    }

    fn describe(&self, running: &[Running]) -> serde_json::Value {
        serde_json::json!({
            "running": running.iter().map(|r| serde_json::json!({"name": r.stat.name, "version": r.version})).collect::<Vec<_>>()
        })
    }

    /// The running campaigns' counters, then the withdrawn ones', into
    /// the status snapshot.
    fn publish(&self) {
        let mut list: Vec<CampaignStatus> = self
            .running
            .lock()
            .map(|r| r.iter().map(|r| r.stat.clone()).collect())
            .unwrap_or_default();
        if let Ok(w) = self.withdrawn.lock() {
            list.extend(w.iter().cloned());
        }
        self.status.update(|s| s.campaigns = list);
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// A sample read by a source (from the segmenter loop).
    pub fn observe(&self, s: &Sample) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let now = self.now();
        self.each(|e| e.push(s, now));
    }

    /// The loop's clock moved: windows whose input went quiet close.
    pub fn tick(&self) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let now = self.now();
        self.each(|e| e.tick(now));
    }

    /// The agent stops: open windows are spooled as they stand.
    pub fn flush(&self) {
        self.each(|e| e.flush());
    }

    fn each(&self, mut f: impl FnMut(&mut Engine) -> Vec<Window>) {
        let Ok(mut running) = self.running.lock() else {
            return;
        };
        let mut any = false;
        for r in running.iter_mut() {
            let fired = r.engine.fired;
            let windows = f(&mut r.engine);
            any |= r.engine.fired != fired || !windows.is_empty();
            r.stat.triggers_fired = r.engine.fired;
            for w in windows {
                self.spool_window(r, w);
            }
        }
        drop(running);
        if any {
            self.publish();
        }
    }

    /// Writes a window as a segment, `DATE/campaign/NAME/vVERSION-TRIGGER-T_NS.jsonl.zst`,
    /// preserved and with its upload conditions. A window is never
    /// refused for the quota (like an event it may go past it); only a
    /// disk with no room loses it, counted.
    fn spool_window(&self, r: &mut Running, w: Window) {
        let c = r.engine.campaign();
        let class = Class::ALL
            .into_iter()
            .find(|k| k.as_str() == c.priority)
            .unwrap_or(Class::Events);
        let name = format!(
            "{}/campaign/{}/v{}-{}-{}.jsonl.zst",
            crate::utc_date(w.t_ns),
            w.campaign,
            r.version,
            w.trigger,
            w.t_ns
        );
        let n = w.samples.len() as u64;
        let result = self.write_window(&name, class, &w, &c.upload.links, c.upload.unmetered_only);
        match result {
            Ok(()) => {
                r.stat.windows_spooled += 1;
                r.stat.samples_spooled += n;
                tracing::debug!(target: "convoy::agent", campaign = %w.campaign, name = %name, samples = n, complete = w.complete, "window spooled");
                self.status.wake_uploaders();
            }
            Err(e) => {
                r.stat.windows_lost += 1;
                self.status
                    .note_error(&format!("campaign window {name} lost: {e}"));
            }
        }
    }

    fn write_window(
        &self,
        name: &str,
        class: Class,
        w: &Window,
        links: &[String],
        unmetered: bool,
    ) -> Result<(), String> {
        let mut spool = self.spool.lock().map_err(|_| "spool lock")?;
        let tmp = spool.tmp_path(&format!("window-{}-{}", w.campaign, w.t_ns));
        let write = || -> std::io::Result<u64> {
            let mut out = SegmentWriter::new(std::fs::File::create(&tmp)?)?;
            for s in &w.samples {
                out.push(s)?;
            }
            let f = out.finish()?;
            f.sync_all()?;
            Ok(f.metadata()?.len())
        };
        let bytes = write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            if is_full_io(&e) {
                format!("disk full: {e}")
            } else {
                e.to_string()
            }
        })?;
        // Like an event, a window is admitted past the quota if need be
        // (the overflow rule never refuses preserved data); the next
        // newcomer of a lower class then makes room by dropping.
        spool.add(&tmp, name, class, bytes).map_err(String::from)?;
        spool
            .mark_window(name, class, links, unmetered)
            .map_err(|e| format!("spool catalog: {e}"))
    }
}

#[cfg(test)]
#[path = "withdraw_tests.rs"]
mod withdraw_tests;
