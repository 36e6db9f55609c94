//! Collection requests: the latest value of each named signal, sampled
//! at a rate for a span, sent as events (so they go out first). The
//! segmenter loop feeds every sample in ([`Collectors::observe`], one
//! relaxed load when nothing is collected) and takes what is due
//! ([`Collectors::due`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use convoy_telemetry::{Sample, Value};

struct Collector {
    id: i64,
    latest: HashMap<String, Option<Value>>,
    period: Duration,
    next: Instant,
    ticks: u64,
    total: u64,
    samples: u64,
}

/// Where a collection stands: ticks taken of `total`, samples sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollectProgress {
    pub id: i64,
    pub ticks: u64,
    pub total: u64,
    pub samples: u64,
}

#[derive(Default)]
pub struct Collectors {
    active: AtomicBool,
    list: Mutex<Vec<Collector>>,
}

impl Collectors {
    /// Starts collecting `signals` `rate_hz` times a second for `seconds`.
    pub fn start(&self, id: i64, signals: &[String], rate_hz: f64, seconds: f64, now: Instant) {
        let period = Duration::from_secs_f64(1.0 / rate_hz);
        let total = (rate_hz * seconds).round().max(1.0) as u64;
        if let Ok(mut l) = self.list.lock() {
            l.retain(|c| c.id != id);
            l.push(Collector {
                id,
                latest: signals.iter().map(|s| (s.clone(), None)).collect(),
                period,
                next: now,
                ticks: 0,
                total,
                samples: 0,
            });
            self.active.store(true, Ordering::Release);
        }
    }

    /// A sample read by a source.
    pub fn observe(&self, s: &Sample) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut l) = self.list.lock() {
            for c in l.iter_mut() {
                if let Some(v) = c.latest.get_mut(&s.path) {
                    *v = Some(s.value.clone());
                }
            }
        }
    }

    /// The next instant a collection is due, if any runs.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        self.list.lock().ok()?.iter().map(|c| c.next).min()
    }

    /// Samples due by `now` (stamped `now_ns`), and the progress of every
    /// collection that ticked; finished ones are removed.
    pub fn due(&self, now: Instant, now_ns: i64) -> (Vec<Sample>, Vec<CollectProgress>) {
        let mut out = (Vec::new(), Vec::new());
        if !self.active.load(Ordering::Relaxed) {
            return out;
        }
        let Ok(mut l) = self.list.lock() else {
            return out;
        };
        for c in l.iter_mut() {
            let mut ticked = false;
            while c.next <= now && c.ticks < c.total {
                c.ticks += 1;
                c.next += c.period;
                ticked = true;
                let mut names: Vec<&String> = c.latest.keys().collect();
                names.sort();
                for name in names {
                    if let Some(Some(v)) = c.latest.get(name) {
                        out.0.push(Sample {
                            t_ns: now_ns,
                            path: name.clone(),
                            value: v.clone(),
                        });
                        c.samples += 1;
                    }
                }
            }
            if ticked {
                out.1.push(CollectProgress {
                    id: c.id,
                    ticks: c.ticks,
                    total: c.total,
                    samples: c.samples,
                });
            }
        }
        l.retain(|c| c.ticks < c.total);
        self.active.store(!l.is_empty(), Ordering::Release);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_samples_the_latest_values_at_its_rate_then_ends() {
        let c = Collectors::default();
        let t0 = Instant::now();
        c.start(
            5,
            &["Vehicle.Speed".into(), "Vehicle.Private.X".into()],
            10.0,
            0.5,
            t0,
        );
        c.observe(&Sample {
            t_ns: 1,
            path: "Vehicle.Speed".into(),
            value: Value::Number(3.0),
        });
        let (s, p) = c.due(t0, 100);
        // Vehicle.Private.X has no value yet: not invented.
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].t_ns, p[0].ticks, p[0].total), (100, 1, 5));
        let (s, p) = c.due(t0 + Duration::from_millis(450), 200);
        assert_eq!((s.len(), p[0].ticks, p[0].samples), (4, 5, 5));
        assert!(c.deadline().is_none(), "finished collections are removed");
    }
}
