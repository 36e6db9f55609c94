//! The trigger engine: a sans-IO state machine per campaign, fed samples
//! with their timestamps, that emits the windows to upload. No clock, no
//! files: the driver ([`super::Campaigns`]) feeds it and spools what it
//! emits.
//!
//! * Each recorded signal has a ring buffer of its kept samples (after
//!   `interval_ms` thinning), trimmed to `pre_seconds` behind the newest
//!   sample and to `max_samples`.
//! * Each trigger is evaluated whenever a signal it reads gets a sample;
//!   it fires on its expression's rising edge (false, or no value yet,
//!   then true), so a condition that holds fires once, not per sample.
//! * A firing at `t` opens a window `[t - pre, t + post]` holding the
//!   ring's samples in it, then every kept sample in it that arrives
//!   after; it is emitted once a sample newer than `t + post` arrives, or
//!   when the input has been quiet for [`QUIET_CLOSE`] (the driver's
//!   clock), since waiting longer then gains nothing.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use convoy_telemetry::campaign::Campaign;
use convoy_telemetry::{Sample, Value};

/// A window whose post-trigger span has not been reached by the samples
/// is emitted after this long without a sample for the campaign.
pub const QUIET_CLOSE: Duration = Duration::from_secs(2);

/// A triggered window, ready to upload.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub campaign: String,
    pub trigger: String,
    /// The sample time the trigger fired at.
    pub t_ns: i64,
    pub from_ns: i64,
    pub to_ns: i64,
    /// Every kept sample in `[from_ns, to_ns]`, in arrival order.
    pub samples: Vec<Sample>,
    /// Closed by a later sample (`true`) or by a quiet input (`false`:
    /// the post-trigger span may be short of samples not yet produced).
    pub complete: bool,
}

struct Ring {
    interval_ns: i64,
    max: usize,
    last_kept: Option<i64>,
    buf: VecDeque<Sample>,
}

struct Open {
    w: Window,
}

/// One campaign's state.
pub struct Engine {
    c: Campaign,
    rings: HashMap<String, Ring>,
    /// The latest value of every signal a trigger reads.
    latest: HashMap<String, Value>,
    /// Which triggers read each signal.
    readers: HashMap<String, Vec<usize>>,
    /// Per trigger: its expression's last value and its edge nodes' state.
    state: Vec<(bool, Vec<bool>)>,
    open: Vec<Open>,
    newest_ns: Option<i64>,
    last_arrival: Option<Duration>,
    pub fired: u64,
}

impl Engine {
    pub fn new(c: Campaign) -> Engine {
        let rings = c
            .signals
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    Ring {
                        interval_ns: s.interval_ns,
                        max: s.max_samples,
                        last_kept: None,
                        buf: VecDeque::new(),
                    },
                )
            })
            .collect();
        let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, t) in c.triggers.iter().enumerate() {
            let mut used = Vec::new();
            t.parsed.expr.signals(&mut used);
            for s in used {
                readers.entry(s).or_default().push(i);
            }
        }
        let state = c
            .triggers
            .iter()
            .map(|t| (false, vec![false; t.parsed.edges]))
            .collect();
        Engine {
            c,
            rings,
            latest: HashMap::new(),
            readers,
            state,
            open: Vec::new(),
            newest_ns: None,
            last_arrival: None,
            fired: 0,
        }
    }

    pub fn campaign(&self) -> &Campaign {
        &self.c
    }

    /// Whether the campaign reads or records `path` at all.
    pub fn wants(&self, path: &str) -> bool {
        self.rings.contains_key(path) || self.readers.contains_key(path)
    }

    /// Windows not yet emitted.
    pub fn open_windows(&self) -> usize {
        self.open.len()
    }

    /// A sample, arriving at `now` on the driver's clock; returns the
    /// windows it closed.
    pub fn push(&mut self, s: &Sample, now: Duration) -> Vec<Window> {
        if !self.wants(&s.path) {
            return self.tick(now);
        }
        self.last_arrival = Some(now);
        let newest = self.newest_ns.map_or(s.t_ns, |n| n.max(s.t_ns));
        self.newest_ns = Some(newest);
        // Record first, so a window opened by this sample holds it.
        if let Some(ring) = self.rings.get_mut(&s.path) {
            let keep = ring
                .last_kept
                .is_none_or(|t| s.t_ns < t || s.t_ns - t >= ring.interval_ns);
            if keep {
                ring.last_kept = Some(s.t_ns);
                ring.buf.push_back(s.clone());
                while ring.buf.len() > ring.max {
                    ring.buf.pop_front();
                }
                for o in &mut self.open {
                    if s.t_ns >= o.w.from_ns && s.t_ns <= o.w.to_ns {
                        o.w.samples.push(s.clone());
                    }
                }
            }
            let horizon = newest - self.c.pre_ns;
            while ring.buf.front().is_some_and(|f| f.t_ns < horizon) {
                ring.buf.pop_front();
            }
        }
        if let Some(idx) = self.readers.get(&s.path).cloned() {
            self.latest.insert(s.path.clone(), s.value.clone());
            for i in idx {
                let (was, edges) = &mut self.state[i];
                let now_true = self.c.triggers[i].parsed.expr.eval(&self.latest, edges);
                let fire = now_true && !*was;
                *was = now_true;
                if fire {
                    self.fire(i, s.t_ns);
                }
            }
        }
        let mut out = Vec::new();
        let mut k = 0;
        while k < self.open.len() {
            if newest > self.open[k].w.to_ns {
                let mut w = self.open.remove(k).w;
                w.complete = true;
                out.push(w);
            } else {
                k += 1;
            }
        }
        out
    }

    fn fire(&mut self, trigger: usize, t: i64) {
        self.fired += 1;
        let (from_ns, to_ns) = (t - self.c.pre_ns, t + self.c.post_ns);
        // The ring's samples in the window, signal by signal in the
        // campaign's order (the file is sorted by nothing else).
        let mut samples = Vec::new();
        for sig in &self.c.signals {
            if let Some(r) = self.rings.get(&sig.name) {
                samples.extend(
                    r.buf
                        .iter()
                        .filter(|x| x.t_ns >= from_ns && x.t_ns <= to_ns)
                        .cloned(),
                );
            }
        }
        self.open.push(Open {
            w: Window {
                campaign: self.c.name.clone(),
                trigger: self.c.triggers[trigger].name.clone(),
                t_ns: t,
                from_ns,
                to_ns,
                samples,
                complete: false,
            },
        });
    }

    /// The driver's clock moved: windows whose input went quiet close.
    pub fn tick(&mut self, now: Duration) -> Vec<Window> {
        let quiet = self
            .last_arrival
            .is_none_or(|a| now.saturating_sub(a) >= QUIET_CLOSE);
        if !quiet || self.open.is_empty() {
            return Vec::new();
        }
        self.open.drain(..).map(|o| o.w).collect()
    }

    /// Everything still open, as it stands (the agent stops).
    pub fn flush(&mut self) -> Vec<Window> {
        self.open.drain(..).map(|o| o.w).collect()
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
